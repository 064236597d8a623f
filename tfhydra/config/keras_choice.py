"""The top-level key `keras` (2 | 3, docs/keras.md): its values, and the process's choice made from it.

The choice is TF_USE_LEGACY_KERAS (tfhydra/platform/keras_env.py), which TensorFlow reads once, when it is first
imported: the pre-flight (tfhydra/cli/preflight.py) and `tfhydra.run` (tfhydra/api.py) call `choose_keras` after
composing and before anything imports TensorFlow. No TensorFlow here.
"""

from __future__ import annotations

import os

from tfhydra.config.errors import ConfigError
from tfhydra.platform.keras_env import CHOSEN_KERAS, LEGACY_KERAS, held_major

KERAS_MAJORS = (2, 3)  # keras=2: tf_keras (the default, compression's only Keras); keras=3: Keras 3


def choose_keras(major: int) -> None:
    """Make `major` the process's Keras before TensorFlow is imported; a process that already holds the other
    (a notebook kernel's second run, a worker that preloaded TensorFlow) is one ConfigError line."""
    held = held_major()
    if held is None:
        os.environ[LEGACY_KERAS] = "0" if major == 3 else "1"  # another value: the plan refuses it next
        os.environ[CHOSEN_KERAS] = "3" if major == 3 else "2"  # for the processes this one starts
    elif held != major:
        raise ConfigError(
            "keras",
            major,
            f"keras={held} in this process, or a new process for keras={major} (in a notebook: restart the kernel)",
            f"this process has loaded TensorFlow with Keras {held}, and a process holds one Keras",
        )
