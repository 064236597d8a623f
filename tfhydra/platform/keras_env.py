"""The Keras environment tfhydra runs in, set before TensorFlow is first imported (the ground floor).

TensorFlow reads `TF_USE_LEGACY_KERAS` once, when it is first imported: "1" makes `tf.keras` tf_keras (Keras 2),
anything else Keras 3. A run chooses with the top-level key `keras` (2, the default, or 3; docs/keras.md). Importing
any tfhydra module sets "1" here (tfhydra/__init__.py imports this module first), so a room imported on its own and
every `keras=2` run mean tf_keras, as before `keras` existed (a process started by a `keras=3` command, which
inherits TFHYDRA_KERAS=3, gets "0"); the command, `tfhydra.compose`/`tfhydra.run` and the
sweep launcher choose with the composed `keras` after composing and before TensorFlow loads
(tfhydra/config/keras_choice.py `choose_keras`), so `tf.keras` in the user's code means the run's Keras. A process
holds one Keras: once TensorFlow is imported, a run asking for the other is refused there. Imports nothing.
"""

import os
import sys

LEGACY_KERAS = "TF_USE_LEGACY_KERAS"
CHOSEN_KERAS = "TFHYDRA_KERAS"  # the run's `keras`, once chosen: what the processes it starts inherit

# 1 (tf_keras) unless a parent process chose keras=3 for this one (a sweep's fork server and workers)
os.environ[LEGACY_KERAS] = "0" if os.environ.get(CHOSEN_KERAS) == "3" else "1"
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # keep C++ info logs out of train.log


def environment_major() -> int:
    """The Keras the environment names: 2 under TensorFlow's legacy values ("1", "true", "True"), 3 otherwise."""
    return 2 if os.environ.get(LEGACY_KERAS) in ("1", "true", "True") else 3


def held_major() -> int | None:
    """The Keras this process holds (TensorFlow is imported: it read the environment then, and tfhydra changes the
    variable only before that), or None while it may still choose."""
    return environment_major() if "tensorflow" in sys.modules else None
