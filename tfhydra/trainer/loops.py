"""Training loops `loop(cfg_trainer, model, datasets, callbacks, context)`, selected by `trainer.loop`.

Both loops train the compiled model and report through the same Keras callbacks, so
TensorBoard, checkpoints and the run record are the same whichever loop ran.
"""
from __future__ import annotations

import logging

import tensorflow as tf
import tf_keras as keras

from tfhydra.trainer import custom  # noqa: F401  (registers "custom")
from tfhydra.trainer.base import LOOPS, LoopContext
from tfhydra.trainer.ema import check_ema_place
from tfhydra.trainer.state import ResumableBackup

__all__ = ["LOOPS", "LoopContext", "train"]

log = logging.getLogger("tfhydra")


def train(cfg_trainer, model: keras.Model, datasets, callbacks: list, context: LoopContext) -> None:
    LOOPS.get(cfg_trainer.loop)(cfg_trainer, model, datasets, callbacks, context)


@LOOPS.register("fit")
def fit_loop(cfg_trainer, model: keras.Model, datasets, callbacks: list, context: LoopContext) -> None:
    # The state is saved after the other callbacks have recorded the epoch: a run killed in between
    # redoes that epoch, and RunRecorder drops the record it is ahead by.
    callbacks = check_ema_place([*callbacks, *backup_callback(cfg_trainer, context)])
    model.fit(datasets.prefetched(datasets.train), validation_data=datasets.prefetched(datasets.validation),
              epochs=cfg_trainer.epochs, callbacks=callbacks, verbose=cfg_trainer.verbose)


def backup_callback(cfg_trainer, context: LoopContext) -> list:
    """Resumable state (tfhydra/trainer/state.py), where Keras supports it (not under OneDeviceStrategy)."""
    if isinstance(context.strategy, tf.distribute.OneDeviceStrategy):
        log.warning("strategy=one_device: model.fit cannot save resumable state (Keras' BackupAndRestore does not "
                    "support OneDeviceStrategy); use trainer.loop=custom to be able to resume")
        return []
    return [ResumableBackup(str(context.paths.state), cfg_trainer.save_every, context.stop, context.diverged)]
