"""A job of tfhydra's Optuna search reports its monitored metric to its trial every epoch and stops when the
pruner says the trial is not promising (tfhydra/sweep/search.py). Imported by the job's process only: it
needs tf_keras, which a sweep's launching process never imports."""

from __future__ import annotations

import logging
import math

from tfhydra.platform.keras_lib import keras
from tfhydra.platform.private_api import trial_id
from tfhydra.platform.terminal import figure

log = logging.getLogger("tfhydra")


class ReportToTrial(keras.callbacks.Callback):
    """`trial.report(monitor, epoch)` after each epoch; `pruned_at` is the epoch the pruner stopped it at."""

    def __init__(self, storage: str, study_name: str, number: int, monitor: str, pruner) -> None:
        super().__init__()
        import optuna

        # A loaded study does not remember its pruner: the job decides with the search's own (should_prune).
        study = optuna.load_study(study_name=study_name, storage=storage, pruner=pruner)
        # Optuna addresses a trial by its storage id; the sweeper hands the job its number (stable, readable).
        self.trial = optuna.trial.Trial(study, trial_id(study, number))
        self.number, self.monitor = number, monitor
        self.pruned_at: int | None = None

    def on_epoch_end(self, epoch, logs=None):
        value = (logs or {}).get(self.monitor)
        if value is None or not math.isfinite(float(value)):
            return
        self.trial.report(float(value), step=epoch + 1)
        if self.trial.should_prune():
            self.pruned_at = epoch + 1
            log.info(
                "trial %d pruned after epoch %d (%s=%s): the pruner found it unpromising",
                self.number,
                epoch + 1,
                self.monitor,
                figure(float(value)),
            )
            self.model.stop_training = True
