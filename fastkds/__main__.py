"""``python -m fastkds``: the ``fastkds`` command line (:mod:`fastkds.cli`)."""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
