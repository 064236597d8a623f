"""`python -m tfhydra.predict RUN_DIR INPUT...` (tfhydra/predict/cli.py)."""

import sys

from tfhydra.predict.cli import main

sys.exit(main())
