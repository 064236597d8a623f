"""Callbacks every run gets: TensorBoard, best checkpoint, divergence stop, and the run record."""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Sequence
from pathlib import Path

import tensorflow as tf
from omegaconf import DictConfig

from tfhydra.config.registry import instantiate_target
from tfhydra.platform.keras_lib import keras, value_of
from tfhydra.platform.terminal import figure
from tfhydra.record.resume import HISTORY_FIELDS, read_history, write_history
from tfhydra.record.rundir import RunPaths
from tfhydra.trainer.choosing import BestCheckpoint, EarlyStopping, best_so_far
from tfhydra.trainer.ema import AveragedWeightsForEvaluation, check_ema_place
from tfhydra.trainer.gradients import GradientSummaries
from tfhydra.trainer.graph import ModelGraph
from tfhydra.trainer.histograms import TensorBoard
from tfhydra.trainer.pictures import picture_callbacks
from tfhydra.trainer.stopping import stop_rules
from tfhydra.trainer.validation import Validation, step_validation

log = logging.getLogger("tfhydra")
__all__ = ["BestCheckpoint", "EarlyStopping", "RunRecorder", "best_so_far", "build_callbacks", "read_history"]


class RunRecorder(keras.callbacks.Callback):
    """Per-epoch logs and timing for metrics.json, and one line per epoch in train.log; with
    `trainer.val_every_steps`, each validation's figures too (`validations`: {epoch, step, val_...}).

    `train_seconds` covers the training phase of each epoch only (validation excluded, mid-epoch ones too), so
    examples/second measures what the optimizer step costs.
    """

    CHECK_EVERY = 16  # optimizer steps between divergence checks (a diverged run stops within that many)

    # First epoch (0-based) that may be the best one: a compression scheme still changing the model
    # before it (pruning below its target sparsity) sets it, so the export has the scheme's final form.
    best_from = 0

    def __init__(self, history_file: Path | None = None, max_loss: float | None = None) -> None:
        super().__init__()
        # Keras then hands over the batch logs as tensors, not per-batch NumPy copies (which wait for the step).
        # An instance attribute: keras.callbacks.Callback.__init__ sets it to False, hiding a class attribute.
        self._supports_tf_logs = True
        self.max_loss = max_loss  # a finite training loss above this is divergence too (trainer.max_loss)
        self.history_file = history_file  # kept beside the resumable state, so a resumed run has all epochs
        self.epochs: list[dict] = []
        self.train_seconds: list[float | None] = []  # None: an epoch whose time was lost (a damaged history)
        self.first_step_seconds: float | None = None
        self.first_step_unix: float | None = None
        self.diverged: dict | None = None
        self.recoveries: list[dict] = []  # each blow-up trainer.recovery recovered from: {epoch, step, loss, lr}
        self.validations: list[dict] = []  # trainer.val_every_steps: {epoch (from 1), step (global), val_...} each
        self._validating = 0.0  # seconds of this epoch's validations so far (StepValidation)
        self.finished = False  # training ended and its weights are saved (mark_finished)
        self._epoch = self._step = 0
        self._next_check = 0

    def on_train_begin(self, logs=None):
        self._start = time.perf_counter()
        self.load()

    def load(self) -> None:
        """What an earlier, interrupted run in this directory recorded (epochs, and whether training had ended)."""
        saved = read_history(self.history_file)
        if saved is not None:
            self.epochs, self.train_seconds = saved["epochs"], saved["train_seconds"]
            self.finished, self.diverged = saved.get("finished", False), saved.get("diverged")
            self.recoveries = saved.get("recoveries") or []
            self.validations = saved.get("validations") or []

    def mark_finished(self) -> None:
        """Training is over and its weights are saved: a run killed after this redoes only the export."""
        self.finished = True
        self._write()

    def on_epoch_begin(self, epoch, logs=None):
        # A resumed run restarts at `epoch`: forget any epoch recorded after the state it resumed from.
        del self.epochs[epoch:], self.train_seconds[epoch:]
        missing = epoch - len(self.epochs)  # a damaged history.json: the state resumed at `epoch` knows more
        self.epochs += [{}] * missing
        self.train_seconds += [None] * missing
        self._epoch = epoch
        self._epoch_start, self._train_end, self._validating = time.perf_counter(), None, 0.0

    def on_train_batch_end(self, batch, logs=None):
        steps = self.params.get("steps") or 0
        # the global optimizer step; Keras 3 numbers an epoch's last, shorter multi-step call as a whole one
        self._step = self._epoch * steps + (min(batch + 1, steps) if steps else batch + 1)
        if self.first_step_seconds is None:
            self.first_step_seconds = time.perf_counter() - self._start
            self.first_step_unix = time.time()  # benchmarks compare it with the process start
        # Reading the loss waits for the device; doing it every batch would serialise input and
        # compute. Check every CHECK_EVERY optimizer steps (each call with steps_per_execution >= 16).
        if self._step < self._next_check:
            return
        self._next_check = self._step + self.CHECK_EVERY
        self.check_loss((logs or {}).get("loss"))

    def check_loss(self, loss) -> None:
        exploded = loss is not None and self.max_loss is not None and self.max_loss < float(loss) < math.inf
        if loss is not None and (not math.isfinite(float(loss)) or exploded):
            self.diverged = {"epoch": self._epoch + 1, "step": self._step, "loss": float(loss)}
            log.error(
                "loss became %s%s at step %d (epoch %d): stopping",
                float(loss),
                f" (above trainer.max_loss={self.max_loss:g})" if exploded else "",
                self._step,
                self._epoch + 1,
            )
            self.model.stop_training = True

    def numeric_failure(self, found: dict) -> None:
        """TensorFlow's numeric checks (trainer.check_numerics) stopped training: `found` says which op made
        the NaN/Inf and where (tfhydra/trainer/debugging.py)."""
        self.diverged = {"epoch": self._epoch + 1, "step": self._step, "loss": None, **found}
        log.error(
            "an op made NaN or Inf: %s in %s (%s) after step %d (epoch %d): stopping",
            found.get("op"),
            found.get("where") or "an eager op",
            found.get("code") or "no user code named",
            self._step,
            self._epoch + 1,
        )
        self._write()

    def recovered(self, recovery: dict) -> None:
        """trainer.recovery restores the last good state and goes on: the divergence becomes a recovery."""
        self.recoveries.append(recovery)
        self.diverged = None
        self._write()

    def on_test_begin(self, logs=None):
        if self._train_end is None:
            self._train_end = time.perf_counter()

    def check_weights(self) -> None:
        """A NaN input can turn a kernel into NaN while the loss stays finite (masked or averaged away):
        a model whose weights are not finite has diverged, whatever its loss says."""
        variables = self.model.trainable_variables
        if variables and not bool(tf.reduce_all([tf.reduce_all(tf.math.is_finite(v)) for v in variables])):
            bad = next(v.name for v in variables if not bool(tf.reduce_all(tf.math.is_finite(v))))
            self.diverged = {"epoch": self._epoch + 1, "step": self._step, "loss": None, "weights": bad}
            log.error(
                "weights of %s became NaN or infinite by step %d (epoch %d): stopping", bad, self._step, self._epoch + 1
            )
            self.model.stop_training = True

    def on_epoch_end(self, epoch, logs=None):
        if self.diverged is None:
            self.check_loss((logs or {}).get("loss"))
        if self.diverged is None:
            self.check_weights()
        end = self._train_end or time.perf_counter()
        self.train_seconds.append(end - self._epoch_start - self._validating)
        values = {k: float(v) for k, v in (logs or {}).items()}
        self.epochs.append(values)
        self._write()
        log.info(
            "epoch %d/%s %s",
            epoch + 1,
            self.params.get("epochs"),
            " ".join(f"{k}={figure(v)}" for k, v in values.items()),
        )

    def on_validation(self, validation: Validation) -> None:
        self._validating += validation.seconds
        self.validations.append(validation.record())
        self._write()  # before the state is saved: the record may run ahead of the state, never behind
        log.info(
            "validation at step %d (epoch %d) %s",
            validation.step,
            validation.epoch + 1,
            " ".join(f"{k}={figure(v)}" for k, v in validation.logs.items()),
        )

    def resume_validations(self, kept: list[dict]) -> None:
        self.validations = kept  # those after the step the run resumed from are done again

    def _write(self) -> None:
        if self.history_file:
            write_history(self.history_file, {key: getattr(self, key) for key in HISTORY_FIELDS})


class LearningRateLogger(keras.callbacks.Callback):
    """Adds the optimizer's current learning rate to the epoch logs (TensorBoard: epoch_learning_rate)."""

    def on_epoch_end(self, epoch, logs=None):
        if logs is not None:
            optimizer = self.model.optimizer
            rate = optimizer.learning_rate
            if isinstance(rate, keras.optimizers.schedules.LearningRateSchedule):
                rate = rate(optimizer.iterations)
            logs["learning_rate"] = float(value_of(rate))


def build_callbacks(
    cfg_trainer,
    cfg_logging,
    paths: RunPaths,
    recorder: RunRecorder,
    extra: Sequence[keras.callbacks.Callback] = (),
    writers: Sequence[keras.callbacks.Callback] = (),
    datasets=None,
) -> list[keras.callbacks.Callback]:
    """Order matters: callbacks that add to the epoch logs come before those that write them. `writers` (the
    experiment trackers' callback) come right after the recorder, whose history they read. `datasets` (the data
    room's Datasets) feed the gradient and picture summaries; without them there are none."""
    # trainer.val_every_steps: first, so the epoch's logs hold its epoch-end validation for every callback after it
    validation = step_validation(cfg_trainer, paths if cfg_logging.tensorboard else None, lambda: recorder.validations)
    callbacks: list[keras.callbacks.Callback] = [*validation, *extra, LearningRateLogger(), recorder, *writers]
    stopping = cfg_trainer.early_stopping
    if stopping.patience > 0:
        callbacks.append(EarlyStopping(stopping.monitor, stopping.mode, stopping.patience, stopping.min_delta))
    callbacks += stop_rules(cfg_trainer, sum(s for s in recorder.train_seconds if s))  # budget and targets
    callbacks += user_callbacks(cfg_trainer.callbacks)
    if cfg_logging.tensorboard:
        callbacks.append(
            TensorBoard(
                log_dir=str(paths.tensorboard),
                histogram_freq=cfg_logging.histogram_freq,
                write_graph=False,
                update_freq=cfg_logging.update_freq,  # Keras' graph: a while-loop or malformed
                profile_batch=profile_range(cfg_logging.profile_batch),
            )
        )
        callbacks += [ModelGraph(paths.tensorboard_train)] if cfg_logging.write_graph else []  # the layers instead
        callbacks += picture_callbacks(cfg_logging, paths, datasets) if datasets is not None else []
    callbacks.append(
        BestCheckpoint(
            str(paths.best_weights),
            monitor=cfg_trainer.monitor,
            mode=cfg_trainer.monitor_mode,
            save_weights_only=True,
            verbose=0,
            from_epoch=recorder.best_from,
            diverged=lambda: recorder.diverged is not None,
            best=best_so_far(recorder.epochs, cfg_trainer.monitor, cfg_trainer.monitor_mode, recorder.best_from),
        )
    )
    if validation:  # each validation to whoever decides on it: best, patience, targets, the record, TensorBoard
        validation[0].hand_to(callbacks)
    if cfg_trainer.ema.decay is not None:  # after the best checkpoint, which keeps the averaged weights
        callbacks.append(AveragedWeightsForEvaluation())
    if cfg_logging.tensorboard and cfg_logging.gradients and cfg_logging.histogram_freq and datasets is not None:
        # after the swap back: the gradients of the weights that train, not of their averages
        callbacks.append(GradientSummaries(datasets.train, paths.tensorboard_train, cfg_logging.histogram_freq))
    return check_ema_place(callbacks)


def profile_range(value):
    """`logging.profile_batch`: 0, a batch number, or [start, stop] (Keras wants a tuple for a range)."""
    return tuple(value) if not isinstance(value, int) else value


def user_callbacks(nodes) -> list[keras.callbacks.Callback]:
    built = []
    for i, node in enumerate(nodes):
        callback = instantiate_target(node, f"trainer.callbacks[{i}]") if isinstance(node, DictConfig) else None
        if not isinstance(callback, keras.callbacks.Callback):
            from tfhydra.config.errors import ConfigError

            raise ConfigError(
                f"trainer.callbacks[{i}]", node, "a node whose _target_ builds a tf_keras Callback", "not a callback"
            )
        built.append(callback)
    return built


CROSSENTROPY_LOSSES = {"sparse_categorical_crossentropy", "categorical_crossentropy", "binary_crossentropy"}


def loss_bound(cfg_trainer) -> float | None:
    """`trainer.max_loss`: `auto` bounds the crossentropy losses only (their sane values stay near
    ln(classes); 1e6 means exploding logits, e.g. Adam at lr 1e4, which never reaches inf in float32)."""
    bound = cfg_trainer.max_loss
    if bound == "auto":
        return 1e6 if isinstance(cfg_trainer.loss, str) and cfg_trainer.loss in CROSSENTROPY_LOSSES else None
    return None if bound is None else float(bound)
