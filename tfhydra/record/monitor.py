"""Which epoch is best: the one owner of "monitor and mode" (`trainer.monitor`, `trainer.monitor_mode`).

As Keras' `MonitorCallback` is for its checkpointing, early stopping and plateau callbacks, `Monitor` is for
tfhydra's readers: the run record's best epoch (tfhydra/record/report.py's `epoch_summary`), the best checkpoint a
resumed run must beat (trainer/callbacks.py), the sweep's ranking, its seed groups and a staged sweep's
promotion (sweep/jobs.py, summary.py, stages.py) and the summary's wording. No other module compares a mode
with "max" or "min" (tests/record/test_monitor.py holds it).

The sweep ranks by what the record chose (metrics.json's `best`, which counts only the epochs that may be
exported, e.g. after pruning has reached its target); a Monitor ranks a history itself only where a record has
no best (a job killed before it wrote one).

An exact tie on the monitored value is broken by the lower validation loss (`val_loss`), then by the earlier
epoch: a saturated monitor (val_accuracy 1.0 from epoch 4 of 20) keeps the epoch that fits validation best,
not the first to reach the ceiling (docs/record.md, "Ties"). The best checkpoint and early stopping
(tfhydra/trainer/callbacks.py) ask `better_epoch`, so the weights exported are the record's best epoch's, in
both loops and after a resume. Ground floor: imports no room.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeGuard

MODES = ("min", "max")  # conf/tfhydra.yaml's trainer.monitor_mode and trainer.early_stopping.mode accept these
TIE_BREAKER = "val_loss"  # what breaks an exact tie on the monitored value: lower is better


def is_figure(value: Any) -> TypeGuard[float]:
    """A finite number (a JSON null, NaN, inf, a bool or a string is no figure to rank on)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


@dataclass(frozen=True)
class Chosen:
    """The best epoch of a history: its monitored `value` and `epoch` (from 1; both None when no epoch has a
    figure), and `tie`: None, or the record's `tie` block when other epochs have exactly the same value."""

    value: float | None
    epoch: int | None
    tie: dict | None = None


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

    def better(self, a: Any, b: Any, margin: float = 0.0) -> bool:
        """`a` strictly better than `b` (by more than `margin`, early stopping's `min_delta`); a value that is no
        figure is never better, and any figure beats one."""
        if not is_figure(a):
            return False
        if not is_figure(b):
            return True
        return a - margin > b if self.maximize else a + margin < b

    def better_epoch(self, a: Mapping | None, b: Mapping | None, margin: float = 0.0) -> bool:
        """Epoch logs `a` strictly better than `b` (None: no epoch yet): by the monitored value (by more than
        `margin`), or at exactly the same value by the lower `val_loss`; a full tie keeps `b`, the earlier epoch."""
        a, b = a or {}, b or {}
        mine, theirs = a.get(self.name), b.get(self.name)
        if self.better(mine, theirs, margin):
            return True
        if not is_figure(mine) or not is_figure(theirs) or mine != theirs or self.name == TIE_BREAKER:
            return False
        return LOSS.better(a.get(TIE_BREAKER), b.get(TIE_BREAKER))

    def choose(self, epochs: Sequence[Any], from_epoch: int = 0) -> Chosen:
        """The best of per-epoch logs (`{metric: value}` each; anything else counts as an epoch without figures),
        counting the epochs from `from_epoch` (0-based) on: the best monitored value; of exactly equal ones the
        lowest `val_loss`, then the earliest epoch."""
        logs = [e if isinstance(e, Mapping) else {} for e in epochs]
        best, epoch = None, None
        for index in range(max(0, from_epoch), len(logs)):
            if self.better_epoch(logs[index], best):
                best, epoch = logs[index], index + 1
        if best is None or epoch is None:
            return Chosen(None, None)
        value = best[self.name]
        tied = [i + 1 for i in range(max(0, from_epoch), len(logs)) if is_figure(logs[i].get(self.name))]
        tied = [e for e in tied if logs[e - 1][self.name] == value]
        if len(tied) < 2:
            return Chosen(value, epoch)
        # the loss decided when the kept epoch beat another tied one on it; else the tied losses were equal (or
        # missing, or the monitor is the loss itself) and the earliest was kept
        decided = self.name != TIE_BREAKER and any(
            LOSS.better(best.get(TIE_BREAKER), logs[e - 1].get(TIE_BREAKER)) for e in tied if e != epoch
        )
        by = TIE_BREAKER if decided else "earliest"
        return Chosen(value, epoch, {"value": value, "epochs": tied, "kept": epoch, "by": by})

    def best(
        self, values: Sequence[Any], from_epoch: int = 0, losses: Sequence[Any] | None = None
    ) -> tuple[float | None, int | None]:
        """(best value, its epoch from 1) of a history (one value per epoch; `losses`: the same epochs' `val_loss`,
        which break an exact tie), as `choose`; (None, None) when none of them is a figure."""
        chosen = self.choose(
            [
                {TIE_BREAKER: losses[i] if losses is not None and i < len(losses) else None, self.name: v}
                for i, v in enumerate(values)
            ],
            from_epoch,
        )
        return chosen.value, chosen.epoch

    def best_of_epochs(self, epochs: Sequence[dict], from_epoch: int = 0) -> tuple[float | None, int | None]:
        """`best` of per-epoch logs (`{metric: value}` each), by this monitor's metric."""
        chosen = self.choose(epochs, from_epoch)
        return chosen.value, chosen.epoch

    def sort_key(self, value: float) -> float:
        """Ascending order of this key is best first."""
        return -value if self.maximize else value

    def rank_key(self, value: float, loss: Any = None) -> tuple[float, float]:
        """Ascending order of this key is best first, an exact tie on `value` broken by the lower `loss` (the
        `val_loss` beside it; none: after every figure), as `better_epoch` breaks it between epochs."""
        tie = loss if is_figure(loss) and self.name != TIE_BREAKER else math.inf
        return self.sort_key(value), tie

    @property
    def direction(self) -> str:
        """Optuna's word for this mode (`hydra.sweeper.direction`): a search must go the way the runs rank."""
        return "maximize" if self.maximize else "minimize"

    @property
    def in_words(self) -> str:
        """`higher is better` or `lower is better`, for what a person reads."""
        return f"{'higher' if self.maximize else 'lower'} is better"


LOSS = Monitor(TIE_BREAKER, "min")  # the tie breaker's own order
