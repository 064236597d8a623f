"""Training loops `loop(cfg_trainer, model, datasets, callbacks, context)`, selected by `trainer.loop`.

Both loops train the compiled model and report through the same Keras callbacks, so
TensorBoard, checkpoints and the run record are the same whichever loop ran.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import tensorflow as tf
import tf_keras as keras

from tfhydra.registry import Registry

LOOPS = Registry("trainer.loop")
log = logging.getLogger("tfhydra")


@dataclass
class LoopContext:
    strategy: tf.distribute.Strategy
    run_dir: Path
    histogram_freq: int  # custom loop: gradient-norm summaries every N epochs (0: off)


def train(cfg_trainer, model: keras.Model, datasets, callbacks: list, context: LoopContext) -> None:
    LOOPS.get(cfg_trainer.loop)(cfg_trainer, model, datasets, callbacks, context)


def state_dir(run_dir: Path) -> Path:
    """Where a loop keeps the state it resumes from (deleted once the run completes)."""
    return run_dir / "checkpoints" / "state"


@LOOPS.register("fit")
def fit_loop(cfg_trainer, model: keras.Model, datasets, callbacks: list, context: LoopContext) -> None:
    model.fit(datasets.train, validation_data=datasets.validation, epochs=cfg_trainer.epochs,
              callbacks=[*backup_callback(cfg_trainer, context), *callbacks], verbose=cfg_trainer.verbose)


def backup_callback(cfg_trainer, context: LoopContext) -> list:
    """Keras' BackupAndRestore, where Keras supports it (not under OneDeviceStrategy)."""
    if isinstance(context.strategy, tf.distribute.OneDeviceStrategy):
        log.warning("strategy=one_device: model.fit cannot save resumable state (Keras' BackupAndRestore does not "
                    "support OneDeviceStrategy); use trainer.loop=custom to be able to resume")
        return []
    save_freq = "epoch" if cfg_trainer.save_every == "epoch" else int(cfg_trainer.save_every)
    return [keras.callbacks.BackupAndRestore(str(state_dir(context.run_dir)), save_freq=save_freq,
                                             delete_checkpoint=True)]


from tfhydra.trainer import custom  # noqa: E402,F401  (registers "custom")
