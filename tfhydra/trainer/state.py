"""Resumable state that survives faults: a kill mid-write, a corrupted file, SIGTERM or Ctrl-C.

- TensorFlow writes a checkpoint under a temporary name and renames it into place, then
  updates the `checkpoint` index file atomically; a kill mid-write leaves the previous
  checkpoints as they were. `KEEP` of them are kept, so a damaged newest one (a truncated
  file, a disk that filled up) has an older one to fall back on: `restore_newest_readable` (restore.py)
  reads every tensor of a candidate before restoring from it.
- Weight files (`best.weights.h5`, `last.weights.h5`) are written to a temporary name in the
  same directory and renamed over the old one (`save_weights_atomically`).
- `StopOnSignal` turns SIGTERM (a preempted machine), SIGUSR2 (a scheduler's warning before
  pre-emption or the time limit: submitit's and SLURM's `--signal=USR2@90`) and SIGINT (Ctrl-C)
  into "save the state at the end of the current step, then raise `Interrupted`": both loops
  check it after every compiled call, so at most that call's steps are repeated by the next run.
  A handler that was there before tfhydra's (submitit's, which requeues the job) gets the signal
  back once the run's record is written (`Interrupted.hand_over`), so a requeued job resumes.
"""

from __future__ import annotations

import collections
import logging
import os
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path

import tensorflow as tf

from tfhydra.platform.keras_lib import keras, value_of
from tfhydra.platform.private_api import (
    attach_training_state,
    optimizer_built,
    resume_fit_at,
    saved_epoch_and_batch,
    saves_mid_epoch,
    worker_training_state,
)
from tfhydra.trainer.restore import cluster_workers, restore_newest_readable

log = logging.getLogger("tfhydra")
KEEP = 2  # checkpoints kept: the newest, and one to fall back on if the newest is damaged


class Interrupted(KeyboardInterrupt):
    """Training stopped by a signal. A KeyboardInterrupt, so `except Exception` (a sweep recording a
    failed job and going on) lets it through: an interrupted sweep stops."""

    def __init__(self, signum: int, saved: str | None, previous_handler=None):
        self.signum, self.saved, self.previous_handler = signum, saved, previous_handler
        name = signal.Signals(signum).name
        # What happened; the caller adds how to resume (a single run and a sweep's job differ).
        self.reason = (
            f"interrupted by {name}: state saved at {saved}"
            if saved
            else f"interrupted by {name} outside a training step; the state saved last is kept"
        )
        super().__init__(self.reason)

    @property
    def exit_code(self) -> int:
        return 128 + self.signum  # what a shell reports for a process killed by that signal

    def hand_over(self) -> None:
        """Once the state is saved and the record written: send the signal again to the handler the process had
        before tfhydra's, when it has one of its own (submitit's SIGUSR2 handler requeues the job and exits; a
        requeued job reruns the same command and resumes). A process without one stops as `Interrupted` says."""
        handler = self.previous_handler
        if callable(handler) and handler is not signal.default_int_handler and signal.getsignal(self.signum) is handler:
            signal.raise_signal(self.signum)  # Python's own Ctrl-C handler would only raise KeyboardInterrupt again


class StopOnSignal:
    """While active (a `with` block around training), SIGTERM, SIGUSR2 and SIGINT set `signum`; the training
    loop calls `check(save)` at each step boundary, which saves and raises `Interrupted`.
    A second signal, or one outside training, raises at once.
    What a watchdog thread reads (tfhydra/data/service_watch.py): `handled`, the signals whose handler ran (one the
    main thread never took is stuck in C++), and `last_step`, when a loop last reached a step boundary."""

    SIGNALS = (signal.SIGTERM, signal.SIGUSR2, signal.SIGINT)

    def __init__(self) -> None:
        self.signum: int | None = None
        self.training = False
        self._previous: dict = {}
        self.handled: collections.Counter = collections.Counter()
        self.last_step: float | None = None

    def __enter__(self) -> StopOnSignal:
        if threading.current_thread() is threading.main_thread():  # Python delivers signals to the main thread only
            self._previous = {s: signal.signal(s, self._handle) for s in self.SIGNALS}
        return self

    def reinstall(self) -> None:
        """Take the signals back after TensorFlow set up a multi-worker cluster: its coordination service installs
        a C++ SIGTERM handler (its pre-emption notifier) over the process's, and Python's handler would never run."""
        if self._previous and threading.current_thread() is threading.main_thread():
            for signum in self.SIGNALS:
                signal.signal(signum, self._handle)

    def __exit__(self, *exc) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)

    def _handle(self, signum, frame) -> None:
        self.handled[signum] += 1
        if self.signum is not None or not self.training:
            raise Interrupted(signum, None, self._previous.get(signum))
        self.signum = signum
        log.warning(
            "%s received: saving the state after the current step, then stopping (send it again to stop at once)",
            signal.Signals(signum).name,
        )

    def check(self, save) -> None:
        """`save()` returns where the state went (a description for the user); called only on a signal."""
        self.last_step = time.monotonic()
        if self.signum is not None:
            signum, self.signum = self.signum, None
            saved = save()
            log.warning("state saved at %s", saved)
            raise Interrupted(signum, saved, self._previous.get(signum))


class _SaveThrough(tf.train.CheckpointManager):
    """The CheckpointManager that TensorFlow's PreemptionCheckpointHandler saves through: its `save` is the loop's
    own (the step and epoch recorded, `KEEP` checkpoints, the description the user reads), and it restores
    nothing (the loop has restored already, falling back past a damaged checkpoint)."""

    def __init__(self, checkpoint: tf.train.Checkpoint, directory: Path):
        super().__init__(checkpoint, str(directory), max_to_keep=KEEP)
        self.save_now: Callable[[], str] | None = None  # the loop's save, set at each step boundary (check)
        self.saved: str | None = None

    def save(self, *args, **kwargs):
        assert self.save_now is not None  # TensorFlow saves from within check(), which set it
        self.saved = self.save_now()
        return self.saved

    def restore_or_initialize(self):
        return None


class StopWithCluster:
    """`StopOnSignal` for every worker of a multi-worker job at once, through TensorFlow's own pre-emption support
    (`tf.distribute.experimental.PreemptionCheckpointHandler` over the coordination service).

    A worker that stopped alone would leave the others waiting in an all-reduce, and workers that saved at
    different steps could not resume together. Here a signal to any worker (SIGTERM, SIGUSR2, SIGINT: its
    StopOnSignal sets `signum`, which the handler polls) is passed to every worker; all of them save after the
    same step, each into its own directory, then raise `Interrupted` where the loop checks (`check`, the
    same call as StopOnSignal's)."""

    def __init__(self, stop: StopOnSignal, resolver, checkpoint: tf.train.Checkpoint, directory: Path):
        self.stop = stop
        self.manager = _SaveThrough(checkpoint, directory)
        config = tf.distribute.experimental.TerminationConfig(
            termination_watcher_fn=lambda: stop.signum is not None, exit_fn=self._exit, grace_period=0
        )
        self.handler = tf.distribute.experimental.PreemptionCheckpointHandler(
            resolver, self.manager, termination_config=config
        )

    def check(self, save) -> None:
        self.stop.last_step = time.monotonic()
        self.manager.save_now = save
        self.handler.save_checkpoint_if_preempted()

    def _exit(self) -> None:
        signum, self.stop.signum = self.stop.signum, None
        saved = f"{self.manager.saved}, with every worker of the cluster"
        log.warning("state saved at %s", saved)
        raise Interrupted(signum or signal.SIGTERM, saved, self.stop._previous.get(signum))


def stop_for(stop: StopOnSignal, strategy: tf.distribute.Strategy, checkpoint: tf.train.Checkpoint, directory: Path):
    """What a loop checks at each step boundary: `stop` itself, or under a multi-worker cluster `StopWithCluster`."""
    if not cluster_workers(strategy):
        return stop
    return StopWithCluster(stop, strategy.cluster_resolver, checkpoint, directory)


def save_weights_atomically(model: keras.Model, path: Path) -> None:
    """`model.save_weights` to a temporary `.h5` beside `path`, then rename: a kill mid-write leaves
    the previous file, never a truncated one under the real name; a failed write (a full disk) leaves no
    partial file taking the space the run's record still needs."""
    partial = path.with_name(f".{path.name.removesuffix('.weights.h5')}.partial.weights.h5")
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        model.save_weights(str(partial))
    except BaseException:
        discard(partial)
        raise
    os.replace(partial, path)


def discard(path: Path) -> None:
    """Remove a partly written file, truncating it first: h5py may still hold it open after a failed write, and
    an open file's blocks are freed only once it is closed (on a full disk, the record needs them now)."""
    try:
        os.truncate(path, 0)
    except OSError:
        pass
    path.unlink(missing_ok=True)


class ResumableBackup(keras.callbacks.BackupAndRestore):
    """Keras' BackupAndRestore, made fault-tolerant.

    - keeps `KEEP` checkpoints and restores the newest readable one (Keras keeps one and
      fails on a damaged one);
    - always records the last finished batch, so a save between epochs and a save on a
      signal mid-epoch both resume at the right step (Keras resumes mid-epoch only with an
      integer save_freq, and then from the first batch of the last compiled call);
    - `save_every` counts optimizer steps, not compiled calls of `steps_per_execution` steps;
    - the state is left in place at the end: the job deletes it once metrics.json is written,
      so a kill during export still has it.
    """

    def __init__(
        self, backup_dir: str, save_every: str | int, stop: StopOnSignal | None = None, diverged=lambda: False
    ):
        super().__init__(backup_dir, save_freq="epoch", delete_checkpoint=False)
        self.save_every = None if save_every == "epoch" else int(save_every)
        self.stop = stop
        self.diverged = diverged  # a blown-up state is never saved: recovery goes back to the last good one

    def on_train_begin(self, logs=None):
        model = self.model
        if model.built and model.optimizer is not None and not optimizer_built(model.optimizer):
            model.optimizer.build(model.trainable_variables)  # slots must exist to be restored
        # An integer save_freq makes Keras resume from the saved batch, not only the saved epoch.
        state = worker_training_state(model, self.backup_dir, save_freq=1)
        # Every worker reads and writes its own directory (Keras' non-chief workers would read the chief's, which
        # needs a shared file system, and delete what they write): the chief `chief/`, the others `worker_<n>/`.
        directory = state.read_checkpoint_manager.directory
        if state.write_checkpoint_manager is not state.read_checkpoint_manager:
            directory = str(Path(self.backup_dir) / f"worker_{model.distribute_strategy.cluster_resolver.task_id}")
        manager = tf.train.CheckpointManager(state.read_checkpoint_manager.checkpoint, directory, max_to_keep=KEEP)
        state.read_checkpoint_manager = state.write_checkpoint_manager = manager
        attach_training_state(model, state)
        self._training_state = state
        restored = restore_newest_readable(manager.checkpoint, Path(directory), model.distribute_strategy)
        if restored:
            saved_epoch, saved_batch = (int(value_of(v)) for v in saved_epoch_and_batch(state))
            log.info("resumed from %s (saved at epoch %d, step %d)", restored, saved_epoch + 1, saved_batch + 1)
            resume_fit_at(model, state)
        if self.stop is not None:
            self.stop = stop_for(self.stop, model.distribute_strategy, manager.checkpoint, Path(directory))

    def on_epoch_begin(self, epoch, logs=None):
        super().on_epoch_begin(epoch, logs)
        self._last_batch = -1

    def on_train_batch_begin(self, batch, logs=None):
        pass

    def on_train_batch_end(self, batch, logs=None):
        # `batch` is the last step of the compiled call that just ended (0-based within the epoch);
        # a call of steps_per_execution steps may cross a save point anywhere inside it.
        crossed = self.save_every and (batch + 1) // self.save_every > (self._last_batch + 1) // self.save_every
        self._last_batch = batch
        if crossed and batch + 1 < (self.params.get("steps") or 0) and not self.diverged():  # the end saves anyway
            self._save(self._current_epoch, batch)
        if self.stop is not None:
            self.stop.check(lambda: self._save_within(self._current_epoch, batch))

    def on_epoch_end(self, epoch, logs=None):
        if self.diverged():
            return
        self._save(epoch, (self.params.get("steps") or self._last_batch + 1) - 1)
        if self.stop is not None:
            self.stop.check(lambda: f"the end of epoch {epoch + 1} ({self.backup_dir})")

    def _save_within(self, epoch: int, batch: int) -> str:
        """A signal's save mid-epoch; a state that resumes only at an epoch's start (Keras 3's fit) keeps the last
        epoch's instead, and the resumed run repeats this epoch's steps."""
        if saves_mid_epoch(self._training_state):
            return self._save(epoch, batch)
        return f"the end of epoch {epoch} ({self.backup_dir}; this epoch's steps run again)"

    def _save(self, epoch: int, batch: int) -> str:
        saved_epoch, saved_batch = saved_epoch_and_batch(self._training_state)
        saved_epoch.assign(epoch)
        saved_batch.assign(batch)
        self._training_state.write_checkpoint_manager.save()  # not back_up: it deletes a non-chief's directory
        return f"epoch {epoch + 1}, step {batch + 1} ({self.backup_dir})"

    def _implements_train_batch_hooks(self):
        return True

    def on_train_end(self, logs=None):
        del self._training_state
        attach_training_state(self.model, None)
