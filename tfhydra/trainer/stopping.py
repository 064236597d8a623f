"""Why a run stopped: its epochs, patience, a time budget or a target (`trainer.max_minutes`, `trainer.stop_at`).

Lightning's `max_time` and users' requests for a target stop are the models. `StopRules` is a Keras callback checked
at each epoch's end, where the validation figures exist, so both loops (fit and the custom loop) stop at the same
boundary with a validated epoch, and the best weights are chosen and exported as at any end. The budget is not
checked inside an epoch, unless `trainer.val_every_steps` validates within it: then both are checked at each
validation (`on_validation`, tfhydra/trainer/validation.py), and the run ends at that step.
The time counts from the process start, like the first-step clock (tfhydra/platform/startclock.py); a resumed run
adds the training time of the epochs it resumed with.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Mapping, Sequence

from tfhydra.platform.keras_lib import keras
from tfhydra.trainer.validation import DecidesOnValidation

REASONS = ("epochs", "patience", "time", "target")  # the record's `stop_reason`
log = logging.getLogger("tfhydra")


class StopRules(DecidesOnValidation, keras.callbacks.Callback):
    """Ends training past `max_minutes` or at the first epoch whose logs reach a target of `stop_at`."""

    def __init__(
        self, max_minutes: float | None, stop_at: Mapping[str, float], origin: float, spent_before: float = 0.0
    ) -> None:
        super().__init__()
        self.budget = None if max_minutes is None else 60.0 * float(max_minutes)
        self.targets = {str(name): float(value) for name, value in stop_at.items()}
        self.origin, self.spent_before = origin, spent_before
        self.reason: str | None = None
        self.time_to_target: float | None = None
        self.reached: dict | None = None  # {metric: value} of the target reached

    def elapsed(self) -> float:
        return time.time() - self.origin + self.spent_before

    def decide(self, epoch: int, logs, step: int | None = None) -> None:
        logs, where = logs or {}, "" if step is None else f" (step {step})"
        for name, target in self.targets.items():
            value = logs.get(name)
            if self.time_to_target is None and reaches(name, value, target):
                self.time_to_target, self.reached = self.elapsed(), {name: float(value)}
                self.reason, self.model.stop_training = "target", True
                log.info(
                    "trainer.stop_at: %s=%.4g reached its target %.4g at epoch %d%s, %.1f s from the start",
                    name,
                    float(value),
                    target,
                    epoch + 1,
                    where,
                    self.time_to_target,
                )
        if self.budget is not None and self.reason is None and self.elapsed() > self.budget:
            self.reason, self.model.stop_training = "time", True
            log.info("trainer.max_minutes: %.0f s spent; training ends in epoch %d%s", self.elapsed(), epoch + 1, where)


def reaches(name: str, value, target: float) -> bool:
    """A figure at or past its target, in the metric's own direction (a loss or error at or below it)."""
    if value is None or not math.isfinite(float(value)):
        return False
    return float(value) >= target if maximized(name) else float(value) <= target


LOWER_IS_BETTER = ("loss", "error", "rmse", "mse", "mae", "crossentropy", "hinge", "poisson", "divergence")


def maximized(name: str) -> bool:
    """Which way a logged metric improves: losses and errors down, every other figure (accuracy, AUC, R², F1) up."""
    return not any(part in name.lower() for part in LOWER_IS_BETTER)


def stop_reason(rules: StopRules | None, callbacks) -> str:
    """`time` or `target` when the rules stopped the run, `patience` when early stopping did, else `epochs`."""
    if rules is not None and rules.reason:
        return rules.reason
    stopped = any(
        getattr(c, "stopped_epoch", 0) or getattr(c, "stopped", False)  # `stopped`: ours, also within epoch 1
        for c in callbacks
        if isinstance(c, keras.callbacks.EarlyStopping)
    )
    return "patience" if stopped else "epochs"


def stop_rules(cfg_trainer, spent_before: float) -> list[StopRules]:
    """The rules of `trainer.max_minutes` and `trainer.stop_at`, or none."""
    from tfhydra.platform.startclock import origin

    max_minutes, stop_at = cfg_trainer.get("max_minutes"), cfg_trainer.get("stop_at") or {}
    if max_minutes is None and not stop_at:
        return []
    return [StopRules(max_minutes, dict(stop_at), origin(), spent_before)]


def stop_figures(callbacks: Sequence) -> dict:
    """The record's `stop_reason` and `time_to_target_seconds` (None: no target reached, or none set)."""
    rules = next((c for c in callbacks if isinstance(c, StopRules)), None)
    return {
        "stop_reason": stop_reason(rules, callbacks),
        "time_to_target_seconds": rules.time_to_target if rules is not None else None,
    }
