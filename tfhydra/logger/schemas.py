"""The types of the `logging:` section and the logger options: dataclass schemas,
stored in Hydra's ConfigStore as `schema/<name>` (tfhydra/runner/plan.py `store_schemas`) and named by each YAML's
defaults list. The values and their comments stay in conf/; ranges and
choices are checked by the rules in this room's checks (docs/design.md, "Typed configs"). No TensorFlow.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from omegaconf import MISSING


@dataclass
class LoggingConfig:
    """conf/tfhydra.yaml's `logging:` section: TensorBoard's keys. `update_freq` and `profile_batch` mix a word or a
    range with a number: Any (their rules check them)."""

    tensorboard: bool = MISSING
    histogram_freq: int = MISSING
    gradients: bool = MISSING
    images_freq: int = MISSING
    write_graph: bool = MISSING
    update_freq: Any = MISSING
    profile_batch: Any = MISSING


@dataclass
class CsvConfig:
    """logger=csv has no keys: selecting it is all it takes."""


@dataclass
class MlflowConfig:
    tracking_uri: str | None = MISSING
    experiment_name: str = MISSING
    artifact_location: str | None = MISSING
    log_export: bool = MISSING
    tags: dict[str, Any] = MISSING
    timeout: float = MISSING


@dataclass
class WandbConfig:
    mode: str | None = MISSING
    project: str = MISSING
    entity: str | None = MISSING
    group: str | None = MISSING
    job_type: str = MISSING
    tags: list[Any] = MISSING


# A logger option's keys sit under its own name (logger.mlflow.*), so that several loggers merge into one `logger`
# node: each YAML names its schema at that key (`/schema/logger/mlflow@mlflow`). logger=tensorboard only turns
# logging.tensorboard on, which LoggingConfig types.
SCHEMAS: dict[str, type] = {
    "logging": LoggingConfig,
    "logger/csv": CsvConfig,
    "logger/mlflow": MlflowConfig,
    "logger/wandb": WandbConfig,
}
