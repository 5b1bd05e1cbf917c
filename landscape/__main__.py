"""``python -m landscape``: the ``landscape`` command."""

import sys

from landscape.cli import main

if __name__ == "__main__":
    sys.exit(main())
