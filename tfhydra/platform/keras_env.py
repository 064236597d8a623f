"""The Keras environment tfhydra runs in, set before TensorFlow is first imported (the ground floor).

The TensorFlow Model Optimization Toolkit works with Keras 2 only, so tfhydra uses tf_keras everywhere and makes
`tf.keras` mean tf_keras for the user's own code too: `TF_USE_LEGACY_KERAS=1` must be in the environment before
TensorFlow is first imported (TensorFlow reads it once, when `tf.keras` is first looked up). tfhydra/__init__.py
imports this module first, so importing any tfhydra module sets it; a module or script that imports TensorFlow
before anything of tfhydra imports this one instead of the whole package. It imports nothing.
"""

import os

LEGACY_KERAS = "TF_USE_LEGACY_KERAS"

os.environ[LEGACY_KERAS] = "1"
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # keep C++ info logs out of train.log
