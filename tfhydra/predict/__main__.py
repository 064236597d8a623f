"""`python -m tfhydra.predict RUN_DIR INPUT...` (tfhydra/predict/__init__.py)."""

import sys

from tfhydra.predict import main

sys.exit(main())
