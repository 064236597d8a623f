"""Training loops `loop(cfg_trainer, model, datasets, callbacks, context)`, selected by `trainer.loop`.

Both loops train the compiled model and report through the same Keras callbacks, so
TensorBoard, checkpoints and the run record are the same whichever loop ran.
"""

from __future__ import annotations

import logging

import tensorflow as tf

from tfhydra.platform.keras_lib import keras
from tfhydra.platform.private_api import build_compiled_metrics, optimizer_built
from tfhydra.trainer.base import LOOPS, LoopContext
from tfhydra.trainer.ema import check_ema_place
from tfhydra.trainer.state import ResumableBackup
from tfhydra.trainer.validation import metrics_kept, step_validator

__all__ = ["LOOPS", "LoopContext", "train"]

log = logging.getLogger("tfhydra")


def train(cfg_trainer, model: keras.Model, datasets, callbacks: list, context: LoopContext) -> None:
    LOOPS.get(cfg_trainer.loop)(cfg_trainer, model, datasets, callbacks, context)


@LOOPS.register("fit")
def fit_loop(cfg_trainer, model: keras.Model, datasets, callbacks: list, context: LoopContext) -> None:
    # The state is saved after the other callbacks have recorded the epoch: a run killed in between
    # redoes that epoch, and RunRecorder drops the record it is ahead by.
    callbacks = check_ema_place([*callbacks, *backup_callback(cfg_trainer, context)])
    make_step_variables(model, datasets.train)
    validation = step_validator(callbacks)  # trainer.val_every_steps: it validates, at epoch ends too
    if validation is not None:
        validation.evaluate = lambda: evaluate_within_fit(model, datasets)
    model.fit(
        datasets.prefetched(datasets.train),
        validation_data=None if validation is not None else datasets.prefetched(datasets.validation),
        epochs=cfg_trainer.epochs,
        callbacks=callbacks,
        verbose=cfg_trainer.verbose,
        shuffle=False,  # the pipeline shuffles (data.shuffle_buffer); Keras 3 warns that its default is ignored
    )


def evaluate_within_fit(model: keras.Model, datasets) -> dict[str, float]:
    """The validation split's figures as fit's own validation names them (val_...), from within fit: its training
    metrics' accumulators are put back after `evaluate` resets them (metrics_kept)."""
    with metrics_kept(model.metrics):
        figures = model.evaluate(datasets.prefetched(datasets.validation), verbose=0, return_dict=True)
    return {f"val_{name}": float(value) for name, value in figures.items()}


def make_step_variables(model: keras.Model, train) -> None:
    """The variables the first training step would create (the compiled metrics', the optimizer's slots), made
    before `fit`: Keras' train function is a tf.function, which traces twice when its first trace creates
    variables (once making them, once without), and with `trainer.steps_per_execution` > 1 each of those traces
    the step twice. Made first, the step is traced half as often: about 0.3 s less before the first step of the
    seed CNN (docs/performance.md). The same initial values, so the same numbers. Only the single-output models
    tfhydra builds, with labels of a known shape; otherwise `fit` makes them as before."""
    spec = getattr(train, "element_spec", None)
    labels = spec[1] if isinstance(spec, tuple) and len(spec) >= 2 else None
    outputs = getattr(model, "outputs", None) or []
    if (
        model.optimizer is None
        or getattr(model, "compiled_loss", None) is None
        or len(outputs) != 1
        or not isinstance(labels, tf.TensorSpec)
        or not labels.shape[1:].is_fully_defined()
    ):
        return
    output = outputs[0]
    with model.distribute_strategy.scope():
        build_compiled_metrics(
            model, tf.zeros([1, *output.shape[1:]], output.dtype), tf.zeros([1, *labels.shape[1:]], labels.dtype)
        )
        if not optimizer_built(model.optimizer):
            model.optimizer.build(model.trainable_variables)


def backup_callback(cfg_trainer, context: LoopContext) -> list:
    """Resumable state (tfhydra/trainer/state.py), where Keras supports it (not under OneDeviceStrategy)."""
    if isinstance(context.strategy, tf.distribute.OneDeviceStrategy):
        log.warning(
            "strategy=one_device: model.fit cannot save resumable state (Keras' BackupAndRestore does not "
            "support OneDeviceStrategy); use trainer.loop=custom to be able to resume"
        )
        return []
    return [ResumableBackup(str(context.paths.state), cfg_trainer.save_every, context.stop, context.diverged)]
