"""Callbacks every run gets: TensorBoard, best checkpoint, divergence stop, and the run record."""
from __future__ import annotations

import logging
import math
import time
from pathlib import Path

import tf_keras as keras

log = logging.getLogger("tfhydra")


class RunRecorder(keras.callbacks.Callback):
    """Per-epoch logs and timing for metrics.json, and one line per epoch in train.log.

    `train_seconds` covers the training phase of each epoch only (validation excluded), so
    examples/second measures what the optimizer step costs.
    """

    def __init__(self) -> None:
        super().__init__()
        self.epochs: list[dict] = []
        self.train_seconds: list[float] = []
        self.first_step_seconds: float | None = None
        self.diverged: dict | None = None
        self._step = 0

    def on_train_begin(self, logs=None):
        self._start = time.perf_counter()

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch_start, self._train_end = time.perf_counter(), None

    def on_train_batch_end(self, batch, logs=None):
        self._step += 1
        if self.first_step_seconds is None:
            self.first_step_seconds = time.perf_counter() - self._start
        loss = (logs or {}).get("loss")
        if loss is not None and not math.isfinite(float(loss)):
            self.diverged = {"epoch": len(self.epochs), "step": self._step, "loss": float(loss)}
            log.error("loss became %s at step %d (epoch %d): stopping", float(loss), self._step, len(self.epochs))
            self.model.stop_training = True

    def on_test_begin(self, logs=None):
        if self._train_end is None:
            self._train_end = time.perf_counter()

    def on_epoch_end(self, epoch, logs=None):
        end = self._train_end or time.perf_counter()
        self.train_seconds.append(end - self._epoch_start)
        values = {k: float(v) for k, v in (logs or {}).items()}
        self.epochs.append(values)
        log.info("epoch %d/%s %s", epoch + 1, self.params.get("epochs"),
                 " ".join(f"{k}={v:.4f}" for k, v in values.items()))


def build_callbacks(cfg_trainer, cfg_logging, run_dir: Path, recorder: RunRecorder) -> list[keras.callbacks.Callback]:
    callbacks: list[keras.callbacks.Callback] = [recorder]
    if cfg_logging.tensorboard:
        callbacks.append(keras.callbacks.TensorBoard(
            log_dir=str(run_dir / "tensorboard"), histogram_freq=cfg_logging.histogram_freq,
            write_graph=cfg_logging.write_graph, update_freq=cfg_logging.update_freq, profile_batch=0))
    callbacks.append(keras.callbacks.ModelCheckpoint(
        str(best_checkpoint_path(run_dir)), monitor=cfg_trainer.monitor, mode=cfg_trainer.monitor_mode,
        save_best_only=True, save_weights_only=True, verbose=0))
    return callbacks


def best_checkpoint_path(run_dir: Path) -> Path:
    return run_dir / "checkpoints" / "best.weights.h5"
