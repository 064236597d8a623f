"""`model.weights`: a local HDF5 weights file loaded into the built model, before compression and training.

One format, the one tfhydra's own runs write (`checkpoints/best.weights.h5`, tf_keras' `save_weights` to a
`.weights.h5`) and Keras' application files are (`*_notop.h5`, tf_keras' legacy `.h5` layout): both are HDF5, so
the pre-flight can tell a weights file from anything else without TensorFlow (tfhydra/model/checks.py), and a
load can be checked whole: the file's arrays are counted against the model's, so a file that fits only a part of
the model is refused, not half loaded. A TensorFlow checkpoint prefix is not taken (its object graph matches
silently by name, and it is not one file the pre-flight can look at).

The file fits the whole model (a run of the same model config), or one model nested in it: keras_app's
application without its top, so Keras' own no-top files load into the base and the head starts fresh.
Nothing is downloaded: `imagenet` is keras_app's builder's business, not this module's.
"""

from __future__ import annotations

import logging

from tfhydra.config.errors import ConfigError, library_reason
from tfhydra.model.checks import WEIGHTS_ACCEPTED as ACCEPTED
from tfhydra.platform.keras_lib import keras
from tfhydra.trust.hdf5 import UnsafeWeights, checked_weights, model_array_count, weight_shapes

KEY = "weights"
log = logging.getLogger("tfhydra")


def is_file_setting(setting) -> bool:
    """A path (not null, not keras_app's `imagenet`): what this module loads."""
    return isinstance(setting, str) and setting not in ("", "imagenet")


def load_weights_file(model: keras.Model, path: str) -> None:
    """Fill `model` from `path`: the whole model first, else the first nested model the file fits; a file that
    fits none of them is one ConfigError line with each one's reason. The file is checked by the trust boundary's
    HDF5 reader first (tfhydra/trust/hdf5.py: nothing stored outside it, every array a shape of this model's)."""
    try:
        arrays = model_array_count(checked_weights(path, weight_shapes(model), key=f"model.{KEY}"))
    except OSError as error:
        raise ConfigError(f"model.{KEY}", path, ACCEPTED, f"not an HDF5 weights file ({error})") from None
    except UnsafeWeights as error:
        if not error.misfit:
            raise
        problem = f"its weights do not fit model {model.name} ({error.problem})"
        raise ConfigError(f"model.{KEY}", path, ACCEPTED, problem) from None
    reasons = []
    nested = [layer for layer in model.layers if isinstance(layer, keras.Model)]
    targets = [model.name, *(f"its nested {layer.name}" for layer in nested)]
    for target in [model, *nested]:
        reason = load_into(target, path, arrays)
        if reason is None:
            log.info("model.weights: %s loaded into %s (%d arrays)", path, target.name, arrays)
            return
        reasons.append(reason)
    said = [f"{target} ({reason})" for target, reason in zip(targets, reasons, strict=True)]
    raise ConfigError(f"model.{KEY}", path, ACCEPTED, f"its weights do not fit model {' nor '.join(said)}")


def load_into(target: keras.Model, path: str, arrays: int) -> str | None:
    """None when `path` filled every weight of `target` and nothing else; else why not (Keras' reason whole)."""
    if arrays != len(target.weights):
        return f"the file holds {arrays} weight arrays, {target.name} has {len(target.weights)}"
    try:
        target.load_weights(path)
    except (ValueError, KeyError, OSError) as error:
        return library_reason(error)
    return None
