"""``python -m executorch_espnn``: the ``espnn`` command (docs/cli.md)."""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
