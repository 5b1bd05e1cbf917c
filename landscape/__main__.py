"""``python -m landscape`` and the ``landscape`` command's entry point."""

import sys

# Neither imports torch: the subcommands do, after main() has chosen the wait policy.
from landscape.cli import main as cli_main
from landscape.threads import set_for_command


def main(argv: list[str] | None = None) -> int:
    """The ``landscape`` command in its own process: its OpenMP threads wait passively when other
    processes keep the CPUs busy (:mod:`landscape.threads`; set before torch is imported), then
    :func:`landscape.cli.main`."""
    set_for_command()
    return cli_main(argv)


if __name__ == "__main__":
    sys.exit(main())
