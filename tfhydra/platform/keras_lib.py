"""The run's Keras, handed to every room: `from tfhydra.platform.keras_lib import keras` (docs/keras.md).

`keras` is tf_keras (Keras 2, `keras=2`, the default and compression's only path) or Keras 3's `keras` package
(`keras=3`), decided once per process from TF_USE_LEGACY_KERAS (tfhydra/platform/keras_env.py sets it from the
composed config before TensorFlow loads), so it is always the Keras that `tf.keras` means. What differs between the
two and a room needs is a function here (or, for private names, in tfhydra/platform/private_api.py); no other room
asks which Keras it runs on. Importing this module imports TensorFlow's Keras: only rooms that build or train do.
"""

from __future__ import annotations

from typing import Any

from tfhydra.platform.keras_env import environment_major

MAJOR = environment_major()  # 2 | 3: the process's Keras, fixed at its first import

if MAJOR == 3:
    import keras
else:
    import tf_keras as keras

KERAS3 = MAJOR == 3


def keras_record() -> dict:
    """What metrics.json records of the run's Keras: its major version and the package's own version."""
    return {"major": MAJOR, "version": keras.__version__}


def value_of(tensor: Any) -> Any:
    """A variable's or tensor's value as NumPy (tf_keras' `backend.get_value`; Keras 3 has `ops.convert_to_numpy`)."""
    return keras.ops.convert_to_numpy(tensor) if KERAS3 else keras.backend.get_value(tensor)


def scaled_loss(optimizer: Any, loss: Any) -> Any:
    """The loss the custom loop differentiates: multiplied by the loss scale under float16 (a LossScaleOptimizer),
    as is otherwise. tf_keras: `get_scaled_loss`; Keras 3: `scale_loss`, which every Keras 3 optimizer has (the
    identity without a scale)."""
    if KERAS3:
        return optimizer.scale_loss(loss)
    if isinstance(optimizer, keras.mixed_precision.LossScaleOptimizer):
        return optimizer.get_scaled_loss(loss)
    return loss


def unscaled_gradients(optimizer: Any, gradients: list) -> list:
    """The gradients of a scaled loss as the unscaled loss's, for what the loop reads of them before they are
    applied (norms, histograms). tf_keras' LossScaleOptimizer expects them unscaled (`get_unscaled_gradients`)
    before `apply_gradients`; Keras 3's unscales inside its own `apply_gradients`, so the loop hands it the scaled
    ones (`gradients_to_apply`) and divides only its own copy here."""
    if KERAS3:
        if isinstance(optimizer, keras.mixed_precision.LossScaleOptimizer):
            scale = optimizer.dynamic_scale if optimizer.built else 1.0
            return [None if g is None else g / keras.ops.cast(scale, g.dtype) for g in gradients]
        return gradients
    if isinstance(optimizer, keras.mixed_precision.LossScaleOptimizer):
        return optimizer.get_unscaled_gradients(gradients)
    return gradients


def gradients_to_apply(optimizer: Any, scaled: list, unscaled: list) -> list:
    """What `apply_gradients` takes: tf_keras' LossScaleOptimizer the unscaled gradients, Keras 3's the scaled ones
    (it unscales them itself, and skips the step whose gradients are not finite)."""
    return scaled if KERAS3 else unscaled


def track_random_generators(enabled: bool) -> None:
    """Dropout & co. drawing from variables that checkpoints track, so a resumed run draws the same masks. tf_keras
    switches it on process-wide (`enable_tf_random_generator`); Keras 3 layers always draw from a SeedGenerator,
    whose state variable is the layer's own (nothing to switch)."""
    if KERAS3:
        return
    if enabled:
        keras.backend.experimental.enable_tf_random_generator()
    else:
        keras.backend.experimental.disable_tf_random_generator()
