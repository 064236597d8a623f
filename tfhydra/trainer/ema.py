"""EMA weights (`trainer.ema.decay`): the tf_keras optimizer's own moving average (`use_ema=True`,
`ema_momentum=decay`), updated by `apply_gradients` after every step in both loops.

The optimizer keeps the averages as its own variables, so they are in the resumable state (checkpoints/state/)
and a resumed run continues the same average. They are what each epoch is validated with, what the best
checkpoint keeps, and what is exported: `AveragedWeightsForEvaluation` swaps them into the model for
validation and swaps the raw weights back after the epoch's other callbacks (the best checkpoint) and before the
resumable state is saved, and at the end of training `finalize_variable_values` (fit calls it itself; the custom
loop does) leaves the averages in the model.
"""

from __future__ import annotations

from tfhydra.platform.keras_lib import keras, snapshot
from tfhydra.platform.private_api import moving_average_of


def ema_options(cfg_ema) -> dict:
    """The optimizer's constructor arguments for `trainer.ema` (none when it is off). `ema_overwrite_frequency`
    stays None: the model's weights are replaced by their averages once, at the end of training."""
    if cfg_ema.decay is None:
        return {}
    return {"use_ema": True, "ema_momentum": float(cfg_ema.decay)}


def optimizer_of(model: keras.Model):
    """The optimizer that owns the variables (a mixed-precision LossScaleOptimizer wraps it)."""
    optimizer = model.optimizer
    return getattr(optimizer, "inner_optimizer", optimizer)


def swap_averages(model: keras.Model) -> None:
    """Exchange each trainable variable with its moving average (done twice, everything is as it was)."""
    optimizer = optimizer_of(model)
    for variable in model.trainable_variables:
        average = moving_average_of(optimizer, variable)
        raw = snapshot(variable)
        variable.assign(average)
        average.assign(raw)


class AveragedWeightsForEvaluation(keras.callbacks.Callback):
    """Validation sees the averaged weights; training and the saved state see the raw ones.

    Put after the best checkpoint in the callback list and before the resumable state's callback: the swap back
    happens in `on_epoch_end`, once the best checkpoint has saved the averages."""

    def __init__(self) -> None:
        super().__init__()
        self.swapped = False

    def on_test_begin(self, logs=None):
        if not self.swapped:
            swap_averages(self.model)
            self.swapped = True

    def on_epoch_end(self, epoch, logs=None):
        self._swap_back()

    def on_train_end(self, logs=None):
        self._swap_back()

    def _swap_back(self) -> None:
        if self.swapped:
            swap_averages(self.model)
            self.swapped = False


class CallbackOrderError(AssertionError):
    """The callback list puts AveragedWeightsForEvaluation where its swap would save the wrong weights (a bug in
    whoever built the list, not a user's mistake)."""


def check_ema_place(callbacks: list) -> list:
    """`callbacks`, once AveragedWeightsForEvaluation (if any) is after every ModelCheckpoint (the best checkpoint
    keeps the averaged weights, swapped back in `on_epoch_end`) and before every BackupAndRestore (the resumable
    state keeps the raw ones). Keras' own `SwapEMAWeights` raises when it is misplaced; so does this, where the
    list is built (trainer/callbacks.py: build_callbacks; trainer/loops.py: the fit loop's list)."""
    places = [i for i, callback in enumerate(callbacks) if isinstance(callback, AveragedWeightsForEvaluation)]
    if not places:
        return callbacks
    swap = places[0]
    checkpoints = [type(c).__name__ for c in callbacks[swap + 1 :] if isinstance(c, keras.callbacks.ModelCheckpoint)]
    if checkpoints:
        raise CallbackOrderError(
            f"{', '.join(checkpoints)} after AveragedWeightsForEvaluation: it would save the raw "
            "weights, not their averages; put it before the swap"
        )
    backups = [type(c).__name__ for c in callbacks[:swap] if isinstance(c, keras.callbacks.BackupAndRestore)]
    if backups:
        raise CallbackOrderError(
            f"{', '.join(backups)} before AveragedWeightsForEvaluation: the resumable state "
            "would save the averages as the weights; put it after the swap"
        )
    return callbacks
