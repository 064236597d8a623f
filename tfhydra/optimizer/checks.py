"""What the run plan checks in the `optimizer:` section: schedules that cannot mean what they say. No TensorFlow.

`optimizer.lr` is the peak rate; a schedule's floor above it, a warm-up as long as the run, or piecewise
boundaries out of order would train at a rate nobody asked for, without an error.
"""

from __future__ import annotations

from omegaconf import DictConfig

from tfhydra.config.errors import ConfigError
from tfhydra.config.schema import Rule, choice, integer, list_of, number, optional


def check_schedule(cfg: DictConfig) -> None:
    optimizer = cfg.optimizer
    if "schedule" not in optimizer or ("_target_" in optimizer and "lr" not in optimizer):  # a user's optimizer
        return  # with its own rate (tfhydra/optimizer/build.py refuses a schedule it cannot take)
    schedule, lr, epochs = optimizer.schedule, optimizer.lr, cfg.trainer.epochs
    name = schedule.get("name")
    check_floor(optimizer, lr, f"optimizer.lr ({lr})")
    check_warmup(optimizer, epochs, f"trainer.epochs ({epochs})")
    if name == "piecewise":
        boundaries, multipliers = list(schedule.boundaries_epochs), list(schedule.multipliers)
        if any(later < earlier for earlier, later in zip(boundaries, boundaries[1:], strict=False)):
            raise ConfigError(
                "optimizer.schedule.boundaries_epochs",
                boundaries,
                "epochs in increasing order, e.g. [10, 15]",
                "decreasing",
            )
        if len(multipliers) != len(boundaries) + 1:
            raise ConfigError(
                "optimizer.schedule.multipliers",
                multipliers,
                f"{len(boundaries) + 1} multipliers "
                f"for the {len(boundaries)} boundaries_epochs (one before, between and after them)",
                "does not match boundaries_epochs",
            )


def check_floor(cfg_optimizer: DictConfig, lr: float, what: str) -> None:
    """A cosine or plateau floor at most the peak rate `lr` (`what` names it: optimizer.lr, or a phase's lower rate
    under recipe=finetune, tfhydra/runner/plan.py): above it, the schedule would raise the rate as it "decays"."""
    schedule = cfg_optimizer.get("schedule")
    if schedule is not None and schedule.get("name") in ("cosine", "reduce_on_plateau") and schedule.min_lr > lr:
        raise ConfigError(
            "optimizer.schedule.min_lr",
            schedule.min_lr,
            f"a rate <= {what}, the peak",
            "the floor is above the peak rate",
        )


def check_warmup(cfg_optimizer: DictConfig, epochs: int, what: str) -> None:
    """A cosine warm-up shorter than the epochs its schedule runs over (`what` names them): the schedule is built
    per phase (tfhydra/runner/plan.py checks each phase), so a warm-up longer than a phase would decay below zero."""
    if "schedule" not in cfg_optimizer:  # a `_target_` optimizer that takes a learning_rate gets the schedule too
        return
    schedule = cfg_optimizer.schedule
    if schedule.get("name") == "cosine" and schedule.warmup_epochs >= epochs:
        raise ConfigError(
            "optimizer.schedule.warmup_epochs",
            schedule.warmup_epochs,
            f"fewer than {what}",
            "the warm-up would take the whole schedule",
        )


CHECKS = (check_schedule,)


# optimizer.schedule.name: the schedules tfhydra/optimizer/build.py registers (a test holds them equal)
SCHEDULE_NAMES = ("constant", "cosine", "exponential", "piecewise", "reduce_on_plateau")

# The optimizer section's ranges and choices, read by the schema's checks (tfhydra/config/schema.py).
RULES: dict[str, Rule] = {
    "optimizer.schedule.name": choice(*SCHEDULE_NAMES),
    "optimizer.schedule.warmup_epochs": number(0, low_open=False),
    "optimizer.schedule.min_lr": number(0, low_open=False),
    "optimizer.schedule.decay_rate": number(0, 1, high_open=False),
    "optimizer.schedule.decay_epochs": number(0),
    "optimizer.schedule.boundaries_epochs": list_of(number(0), min_len=0),
    "optimizer.schedule.multipliers": list_of(number(0)),
    "optimizer.schedule.factor": number(0, 1),
    "optimizer.schedule.patience": integer(0),
    "optimizer.lr": number(0),
    "optimizer.momentum": number(0, 1, low_open=False),
    "optimizer.beta_1": number(0, 1, low_open=False),
    "optimizer.beta_2": number(0, 1, low_open=False),
    "optimizer.epsilon": number(0),
    "optimizer.weight_decay": optional(number(0, low_open=False)),
    "optimizer.rho": number(0, 1, low_open=False),
    "optimizer.epsilon_1": number(0),
    "optimizer.epsilon_2": number(0),
    "optimizer.clip_threshold": number(0),
}
