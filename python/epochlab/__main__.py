"""``python -m epochlab``: the same command as the ``epochlab`` console script."""

import sys

from epochlab.cli import main

sys.exit(main())
