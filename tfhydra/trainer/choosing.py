"""What each validation decides: the best weights kept (`BestCheckpoint`) and when patience runs out
(`EarlyStopping`). Both ask the Monitor which figures are better (tfhydra/record/monitor.py), so the weights exported
are the ones the record calls best.

A validation reaches them at each epoch's end (`on_epoch_end`, the default), or, with `trainer.val_every_steps`,
from tfhydra/trainer/validation.py's `StepValidation` (`on_validation`, every N optimizer steps and at each epoch's
end; `per_validation` is then set and the epoch ends are not judged twice). A run resumed in that mode has its
choices replayed from the validations it recorded (`resume_validations`), so its best and its patience are those of
an uninterrupted run.
"""

from __future__ import annotations

import os
from pathlib import Path

from tfhydra.platform.keras_lib import keras
from tfhydra.record.monitor import Monitor
from tfhydra.trainer.state import discard
from tfhydra.trainer.validation import DecidesOnValidation


class BestCheckpoint(DecidesOnValidation, keras.callbacks.ModelCheckpoint):
    """The best epoch's weights, the epoch the record calls best: the Monitor decides (tfhydra/record/monitor.py:
    an exact tie on the monitored value goes to the lower val_loss, then the earlier epoch), and Keras' checkpoint
    only writes (as `save_best_only=False`, called for a new best alone). Only the epochs from `from_epoch`
    (0-based) on count (RunRecorder.best_from). Each new best goes to a temporary file renamed over the old one: a
    kill mid-write keeps the previous best intact, and a write that fails (a full disk) leaves no partial file
    taking the space the run's record still needs. An epoch the recorder (before it in the list) found diverged is
    never a best: its monitored value may still look good (val_accuracy of NaN outputs), and trainer.recovery
    trains on with this callback's `best_logs`. `best`: the best epoch's logs so far (a resumed run's, which a new
    epoch must beat, its val_loss included)."""

    def __init__(
        self,
        filepath: str,
        monitor: str = "val_loss",
        mode: str = "min",
        *,
        from_epoch: int = 0,
        diverged=lambda: False,
        best: dict | None = None,
        **kwargs,
    ):
        self.final_path = Path(filepath)
        self.partial_path = self.final_path.with_name(".best.partial.weights.h5")
        # Keras formats the path with the epoch and logs (`str.format`): a directory named by a sweep over a
        # dict value (`data.augment=[{name:...}]`) holds braces, which are doubled so they stay literal.
        literal = str(self.partial_path).replace("{", "{{").replace("}", "}}")
        kwargs.pop("save_best_only", None)  # the Monitor chooses; Keras writes what it is handed
        super().__init__(literal, monitor=monitor, mode=mode, save_best_only=False, **kwargs)
        self.from_epoch, self.diverged = from_epoch, diverged
        self.ranking, self.best_logs = Monitor(monitor, mode), best

    def resume_validations(self, kept: list[dict]) -> None:
        """The best of the validations a resumed run keeps (the record's, up to its saved step) is what to beat."""
        self.best_logs = best_so_far(
            [v for v in kept if v.get("epoch", 0) > self.from_epoch], self.ranking.name, self.ranking.mode
        )

    def decide(self, epoch: int, logs, step: int | None = None) -> None:
        """Keep the weights when these figures are the best so far."""
        if epoch < self.from_epoch or self.diverged() or not self.ranking.better_epoch(logs, self.best_logs):
            return
        try:
            keras.callbacks.ModelCheckpoint.on_epoch_end(self, epoch, logs)  # Keras writes
        except BaseException:
            discard(self.partial_path)
            raise
        self.best_logs = dict(logs or {})
        if self.partial_path.exists():
            os.replace(self.partial_path, self.final_path)


class EarlyStopping(DecidesOnValidation, keras.callbacks.EarlyStopping):
    """Keras' early stopping (`trainer.early_stopping`), waiting as long as the best checkpoint still moves: an
    improvement is what the Monitor calls better (tfhydra/record/monitor.py), by more than `min_delta`, or an exact
    tie on the monitored value with a lower val_loss, the epoch the record would then keep. Patience counts
    validations: epochs, or with `trainer.val_every_steps` every validation (`on_validation`)."""

    def __init__(self, monitor: str, mode: str, patience: int, min_delta: float = 0.0):
        super().__init__(monitor=monitor, mode=mode, patience=patience, min_delta=min_delta)
        self.ranking, self.margin = Monitor(monitor, mode), abs(float(min_delta))
        self.best_logs: dict | None = None
        self.wait: int = 0
        self.judged = 0  # validations judged: the first never stops the run (Keras' `epoch > 0`)
        self.stopped = False  # the record's stop_reason: `stopped_epoch` is 0 for a stop within the first epoch

    def on_train_begin(self, logs=None):
        super().on_train_begin(logs)
        self.best_logs, self.judged = None, 0

    def resume_validations(self, kept: list[dict]) -> None:
        """Patience as it stood after the validations a resumed run keeps (replayed; none of them stops it)."""
        self.best_logs, self.wait, self.judged = None, 0, 0
        for validation in kept:
            self.patience_ran_out(validation.get("epoch", 1) - 1, validation)

    def decide(self, epoch: int, logs, step: int | None = None) -> None:
        if self.patience_ran_out(epoch, logs):
            self.stopped_epoch, self.stopped = epoch, True
            self.model.stop_training = True

    def patience_ran_out(self, epoch: int, logs) -> bool:
        if self.get_monitor_value(logs) is None:
            return False
        self.wait += 1
        self.judged += 1
        if self.ranking.better_epoch(logs, self.best_logs, self.margin):
            self.best_logs, self.best, self.best_epoch, self.wait = dict(logs or {}), logs[self.monitor], epoch, 0
            return False
        return self.wait >= self.patience and self.judged > 1


def best_so_far(epochs: list[dict], monitor: str, mode: str, from_epoch: int = 0) -> dict | None:
    """The best epoch's logs a resumed run recorded (None: none yet): a new epoch must beat them, by the monitored
    value or, at the same value, by the lower val_loss, to replace the best checkpoint."""
    epoch = Monitor(monitor, mode).choose(epochs, from_epoch).epoch
    return None if epoch is None else dict(epochs[epoch - 1])
