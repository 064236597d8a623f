"""`python -m tfhydra.comparison`: tfhydra-compare (tfhydra/comparison/cli.py)."""

import sys

from tfhydra.comparison.cli import main

sys.exit(main())
