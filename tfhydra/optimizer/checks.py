"""What the run plan checks in the `optimizer:` section: schedules that cannot mean what they say. No TensorFlow.

`optimizer.lr` is the peak rate; a schedule's floor above it, a warm-up as long as the run, or piecewise
boundaries out of order would train at a rate nobody asked for, without an error.
"""
from __future__ import annotations

from omegaconf import DictConfig

from tfhydra.errors import ConfigError


def check_schedule(cfg: DictConfig) -> None:
    optimizer = cfg.optimizer
    if "_target_" in optimizer or "schedule" not in optimizer:  # a user's optimizer takes its own rate
        return
    schedule, lr, epochs = optimizer.schedule, optimizer.lr, cfg.trainer.epochs
    name = schedule.get("name")
    if name in ("cosine", "reduce_on_plateau") and schedule.min_lr > lr:
        raise ConfigError("optimizer.schedule.min_lr", schedule.min_lr, f"a rate <= optimizer.lr ({lr}), the peak",
                          "the floor is above the peak rate")
    if name == "cosine" and schedule.warmup_epochs >= epochs:
        raise ConfigError("optimizer.schedule.warmup_epochs", schedule.warmup_epochs,
                          f"fewer than trainer.epochs ({epochs})", "the warm-up would take the whole run")
    if name == "piecewise":
        boundaries, multipliers = list(schedule.boundaries_epochs), list(schedule.multipliers)
        if any(later < earlier for earlier, later in zip(boundaries, boundaries[1:])):
            raise ConfigError("optimizer.schedule.boundaries_epochs", boundaries, "epochs in increasing order, "
                              "e.g. [10, 15]", "decreasing")
        if len(multipliers) != len(boundaries) + 1:
            raise ConfigError("optimizer.schedule.multipliers", multipliers, f"{len(boundaries) + 1} multipliers "
                              f"for the {len(boundaries)} boundaries_epochs (one before, between and after them)",
                              "does not match boundaries_epochs")


CHECKS = (check_schedule,)
