"""The ``landscape`` command: one module per subcommand, parsed in ``_main``."""

from landscape.cli._main import build_parser, main

__all__ = ["main", "build_parser"]
