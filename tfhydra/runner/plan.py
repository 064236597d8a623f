"""The run plan: everything about a run that the config alone decides, before TensorFlow is imported.

`plan_run(cfg)` checks the config (the schema's types and ranges, then each group's own cross-key
checks, which live beside the group's builders in a TensorFlow-free `checks`/`plan` module) and
returns the ordered phases the run will train. The pre-flight (tfhydra/cli/preflight.py) plans every job of
a command line, sweeps included, before Hydra creates a directory; tfhydra/runner/job.py plans again
(a run started from Python has had no pre-flight) and trains the phases in this order.

After the plan, a ConfigError can only come from the data or the machine (a file's contents, the
devices present, TF_CONFIG), never from the config alone: docs/reliability.md marks each bad input
"pre-flight" or "in the job".
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from omegaconf import DictConfig

from tfhydra.compression import plan as compression_plan
from tfhydra.compression import schemas as compression_schemas
from tfhydra.config.contracts import PhasePlan
from tfhydra.config.schema import Rule, validate
from tfhydra.data import checks as data_checks
from tfhydra.data import schemas as data_schemas
from tfhydra.data.label_sample import read_label_sample
from tfhydra.export import checks as export_checks
from tfhydra.export import schemas as export_schemas
from tfhydra.logger import checks as logger_checks
from tfhydra.logger import schemas as logger_schemas
from tfhydra.model import checks as model_checks
from tfhydra.model import schemas as model_schemas
from tfhydra.optimizer import checks as optimizer_checks
from tfhydra.optimizer import schemas as optimizer_schemas
from tfhydra.precision import schemas as precision_schemas
from tfhydra.strategy import checks as strategy_checks
from tfhydra.strategy import schemas as strategy_schemas
from tfhydra.sweep import checks as sweep_checks
from tfhydra.sweep import schemas as sweep_schemas
from tfhydra.task import checks as task_checks
from tfhydra.task import schemas as task_schemas
from tfhydra.trainer import checks as trainer_checks
from tfhydra.trainer import schemas as trainer_schemas


def _source(room) -> str:
    return "tfhydra/" + room.__name__.removeprefix("tfhydra.").replace(".", "/") + ".py"


ROOMS = (
    data_checks,
    task_checks,
    model_checks,
    optimizer_checks,
    trainer_checks,
    strategy_checks,
    compression_plan,
    export_checks,
    logger_checks,
    sweep_checks,
)
# Each room's ranges and choices of its own keys (declared once, beside its option names), and its cross-key
# checks, in the order a user reads the config.
RULES: dict[str, Rule] = {
    key: dataclasses.replace(rule, source=_source(room)) for room in ROOMS for key, rule in room.RULES.items()
}
GROUP_CHECKS = tuple(check for room in ROOMS for check in getattr(room, "CHECKS", ()))
# Each option's and section's schema, by its name under `schema/` in Hydra's ConfigStore (`model/cnn`, `trainer`).
SCHEMAS: dict[str, type] = {
    name: schema
    for room in (
        data_schemas,
        task_schemas,
        model_schemas,
        optimizer_schemas,
        precision_schemas,
        trainer_schemas,
        strategy_schemas,
        compression_schemas,
        export_schemas,
        logger_schemas,
        sweep_schemas,
    )
    for name, schema in room.SCHEMAS.items()
}


def store_schemas() -> None:
    """Put every schema in Hydra's ConfigStore as `schema/<name>`, where conf/'s defaults lists name them: under a
    group of its own, so `--help` and the groups' option lists do not show them. Called before Hydra composes
    tfhydra's configs (hydra_plugins/tfhydra_conf, once a process has imported tfhydra); storing again replaces
    the same nodes."""
    from hydra.core.config_store import ConfigStore

    store = ConfigStore.instance()
    if "tfhydra-schemas.yaml" in store.repo.get("schema", {}):  # stored once a process: Hydra 1.4 warns on a repeat
        return
    for name, schema in SCHEMAS.items():
        group, _, option = f"schema/{name}".rpartition("/")
        store.store(group=group, name=option, node=schema)
    store.store(group="schema", name="tfhydra-schemas", node={})  # the mark that they are stored


@dataclass(frozen=True)
class RunPlan:
    phases: tuple[PhasePlan, ...]  # earlier phases first; the last is the run's own

    @property
    def earlier_phases(self) -> tuple[PhasePlan, ...]:
        return self.phases[:-1]

    @property
    def final_phase(self) -> PhasePlan:
        return self.phases[-1]


def check_config(cfg: DictConfig, defaults: DictConfig | None = None) -> None:
    """The schema's checks with every room's rules: what `plan_run` checks first (also for tests)."""
    validate(cfg, defaults, RULES)


def check_labels_fit_task(cfg: DictConfig) -> None:
    """Labels a source can read without TensorFlow (a CSV's column, an npz array: a bounded sample, data room) that
    do not fit the run's task (the task room's answer) are one line here, before a run directory exists: a numeric
    target under task=classification, class names under task=regression (docs/tasks.md)."""
    sample = read_label_sample(cfg.data)
    if sample is not None:
        task_checks.check_label_sample(cfg.task, cfg.data, sample)
        if cfg.data.get("folds") is not None:  # k-fold: a class too small to be in every fold
            data_checks.check_folds_sample(cfg.data, task_checks.sample_strata(cfg.task, sample))


def plan_run(cfg: DictConfig, defaults: DictConfig | None = None) -> RunPlan:
    """Check `cfg` (raising the first ConfigError) and return its phases. `defaults`: the config the
    command line's group choices compose to, which gives every leaf its expected type."""
    validate(cfg, defaults, RULES)
    for check in GROUP_CHECKS:
        check(cfg)
    check_labels_fit_task(cfg)
    phases = tuple(compression_plan.plan_phases(cfg))
    if len(phases) > 1:  # each phase builds its own schedule over its own epochs
        for phase in phases:
            optimizer_checks.check_warmup(
                cfg.optimizer,
                phase.epochs,
                f"the {phase.epochs} epochs of the {phase.label} phase "
                "(trainer.finetune.head_epochs, compression.start_epoch, compression.quantize_epochs)",
            )
            lower = phase.overrides.get("optimizer.lr")
            if lower is not None:  # a phase after recipe=finetune's head, at the lower rate
                optimizer_checks.check_floor(
                    cfg.optimizer,
                    lower,
                    f"the {phase.label} phase's rate ({lower:g}: optimizer.lr x trainer.finetune.lr_factor)",
                )
    return RunPlan(phases)
