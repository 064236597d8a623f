"""The run plan: everything about a run that the config alone decides, before TensorFlow is imported.

`plan_run(cfg)` checks the config (the schema's types and ranges, then each group's own cross-key
checks, which live beside the group's builders in a TensorFlow-free `checks`/`plan` module) and
returns the ordered phases the run will train. The pre-flight (tfhydra/cli.py) plans every job of
a command line, sweeps included, before Hydra creates a directory; tfhydra/job.py plans again
(a run started from Python has had no pre-flight) and trains the phases in this order.

After the plan, a ConfigError can only come from the data or the machine (a file's contents, the
devices present, TF_CONFIG), never from the config alone: docs/reliability.md marks each bad input
"pre-flight" or "in the job".
"""
from __future__ import annotations

from dataclasses import dataclass

from omegaconf import DictConfig

from tfhydra.compression import plan as compression_plan
from tfhydra.contracts import PhasePlan
from tfhydra.data import checks as data_checks
from tfhydra.logger import checks as logger_checks
from tfhydra.optimizer import checks as optimizer_checks
from tfhydra.schema import validate
from tfhydra.strategy import checks as strategy_checks
from tfhydra.trainer import checks as trainer_checks

# Each group's config-only checks, in the order a user reads the config.
GROUP_CHECKS = (*data_checks.CHECKS, *optimizer_checks.CHECKS, *trainer_checks.CHECKS, *strategy_checks.CHECKS,
                *compression_plan.CHECKS, *logger_checks.CHECKS)


@dataclass(frozen=True)
class RunPlan:
    phases: tuple[PhasePlan, ...]  # earlier phases first; the last is the run's own

    @property
    def earlier_phases(self) -> tuple[PhasePlan, ...]:
        return self.phases[:-1]

    @property
    def final_phase(self) -> PhasePlan:
        return self.phases[-1]


def plan_run(cfg: DictConfig, defaults: DictConfig | None = None) -> RunPlan:
    """Check `cfg` (raising the first ConfigError) and return its phases. `defaults`: the config the
    command line's group choices compose to, which gives every leaf its expected type."""
    validate(cfg, defaults)
    for check in GROUP_CHECKS:
        check(cfg)
    return RunPlan(tuple(compression_plan.plan_phases(cfg)))
