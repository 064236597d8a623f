"""The types of the task options: dataclass schemas,
stored in Hydra's ConfigStore as `schema/<name>` (tfhydra/runner/plan.py `store_schemas`) and named by each YAML's
defaults list. The values and their comments stay in conf/; ranges and
choices are checked by the rules in this room's checks (docs/design.md, "Typed configs"). No TensorFlow.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from omegaconf import MISSING

from tfhydra.config.typed import Choice


class MonitorMode(Choice):
    min = "min"
    max = "max"


@dataclass
class TaskConfig:
    """What every task option has. `loss` takes a name or a `_target_` node, `metrics` names or nodes: Any."""

    name: str = MISSING
    loss: Any = MISSING
    metrics: Any = MISSING
    monitor: str = MISSING
    monitor_mode: MonitorMode = MISSING


@dataclass
class ClassificationTaskConfig(TaskConfig):
    pass


@dataclass
class BinaryTaskConfig(TaskConfig):
    threshold: float = MISSING


@dataclass
class MultilabelTaskConfig(TaskConfig):
    threshold: float = MISSING


@dataclass
class RegressionTaskConfig(TaskConfig):
    standardize: bool = MISSING
    strata_bins: int | None = MISSING


SCHEMAS: dict[str, type] = {
    "task/classification": ClassificationTaskConfig,
    "task/binary": BinaryTaskConfig,
    "task/multilabel": MultilabelTaskConfig,
    "task/regression": RegressionTaskConfig,
}
