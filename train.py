"""Train a model: `python train.py [group=option ...] [key=value ...]`, or `-m` to sweep.

The checkout's entry point; installed, the same command is `tfhydra-train` (or `python -m tfhydra`).
All logic lives in tfhydra/; tfhydra/__main__.py connects Hydra to it.
"""

# importing tfhydra sets TF_USE_LEGACY_KERAS before TensorFlow loads (tfhydra/platform/keras_env.py)
from tfhydra.__main__ import main

if __name__ == "__main__":
    main()
