"""Which epoch is best: the one owner of "monitor and mode" (`trainer.monitor`, `trainer.monitor_mode`).

As Keras' `MonitorCallback` is for its checkpointing, early stopping and plateau callbacks, `Monitor` is for
tfhydra's readers: the run record's best epoch (tfhydra/record/report.py's `epoch_summary`), the best checkpoint a
resumed run must beat (trainer/callbacks.py), the sweep's ranking, its seed groups and a staged sweep's
promotion (sweep/jobs.py, summary.py, stages.py) and the summary's wording. No other module compares a mode
with "max" or "min" (tests/record/test_monitor.py holds it).

The sweep ranks by what the record chose (metrics.json's `best`, which counts only the epochs that may be
exported, e.g. after pruning has reached its target); a Monitor ranks a history itself only where a record has
no best (a job killed before it wrote one). Ties go to the earliest epoch, as Keras' checkpoint keeps the first
of equal values. Ground floor: imports no room.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypeGuard

MODES = ("min", "max")  # conf/tfhydra.yaml's trainer.monitor_mode and trainer.early_stopping.mode accept these


def is_figure(value: Any) -> TypeGuard[float]:
    """A finite number (a JSON null, NaN, inf, a bool or a string is no figure to rank on)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


@dataclass(frozen=True)
class Monitor:
    name: str  # the logged metric, e.g. val_accuracy
    mode: str  # "max": higher is better; "min": lower is better

    def __post_init__(self) -> None:
        if self.mode not in MODES:  # the schema refuses it in a config; a caller passing another is a bug
            raise ValueError(f"monitor mode {self.mode!r} is not one of {MODES}")

    @property
    def maximize(self) -> bool:
        return self.mode == "max"

    def better(self, a: Any, b: Any) -> bool:
        """`a` strictly better than `b`; a value that is no figure is never better, and any figure beats one."""
        if not is_figure(a):
            return False
        if not is_figure(b):
            return True
        return a > b if self.maximize else a < b

    def best(self, values: Sequence[Any], from_epoch: int = 0) -> tuple[float | None, int | None]:
        """(best value, its epoch from 1) of a history (one value per epoch), counting the epochs from `from_epoch`
        (0-based) on; the earliest of equal values; (None, None) when none of them is a figure."""
        value, epoch = None, None
        for index in range(max(0, from_epoch), len(values)):
            if self.better(values[index], value):
                value, epoch = values[index], index + 1
        return value, epoch

    def best_of_epochs(self, epochs: Sequence[dict], from_epoch: int = 0) -> tuple[float | None, int | None]:
        """`best` of per-epoch logs (`{metric: value}` each), by this monitor's metric."""
        return self.best([e.get(self.name) if isinstance(e, dict) else None for e in epochs], from_epoch)

    def sort_key(self, value: float) -> float:
        """Ascending order of this key is best first."""
        return -value if self.maximize else value

    @property
    def direction(self) -> str:
        """Optuna's word for this mode (`hydra.sweeper.direction`): a search must go the way the runs rank."""
        return "maximize" if self.maximize else "minimize"

    @property
    def in_words(self) -> str:
        """`higher is better` or `lower is better`, for what a person reads."""
        return f"{'higher' if self.maximize else 'lower'} is better"
