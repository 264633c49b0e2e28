"""Run the command-line interface with ``python -m mdakit_fastrdf``."""

import sys

from mdakit_fastrdf.cli import main

if __name__ == "__main__":
    sys.exit(main())
