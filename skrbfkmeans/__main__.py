"""``python -m skrbfkmeans``: the command line (see ``skrbfkmeans._cli``)."""

import sys

from ._cli import main

# pytest --doctest-modules imports this module: run only as a program.
if __name__ == "__main__":
    sys.exit(main())
