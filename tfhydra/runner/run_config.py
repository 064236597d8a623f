"""The composed run config as a type: what `runner/` and the loops annotate, so mypy checks every config read.

At run time a config is Hydra's DictConfig; each section and built-in option in it carries its dataclass schema
(tfhydra/<room>/schemas.py), so a misspelt key fails in OmegaConf and, annotated with these classes, in mypy too.
The groups that take a user's own `_target_` option (model, data, task, optimizer) are Any here: their built-in
options are typed in their builders (`build_cnn(cfg: CnnModelConfig, spec)`), a user's option by its callable's
arguments. `as_run_config` is the one place a DictConfig is read as this type.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from tfhydra.compression.schemas import CompressionConfig
from tfhydra.export.schemas import ExportConfig
from tfhydra.logger.schemas import LoggingConfig
from tfhydra.precision.schemas import PrecisionConfig
from tfhydra.strategy.schemas import StrategyConfig
from tfhydra.sweep.schemas import SweepConfig
from tfhydra.trainer.schemas import TrainerConfig

if TYPE_CHECKING:
    from omegaconf import DictConfig


@dataclass
class RunConfig:
    keras: int
    model: Any
    data: Any
    task: Any
    optimizer: Any
    precision: PrecisionConfig
    strategy: StrategyConfig
    compression: CompressionConfig
    logger: Any
    trainer: TrainerConfig
    logging: LoggingConfig
    export: ExportConfig
    sweep: SweepConfig
    hydra: Any  # Hydra's own node, when the config was composed with it


def as_run_config(cfg: DictConfig | RunConfig) -> RunConfig:
    """`cfg` read through its schema's type (no copy, no conversion: the DictConfig itself)."""
    return cast(RunConfig, cfg)


def as_dict_config(cfg: RunConfig | DictConfig) -> DictConfig:
    """The same config, for the rooms' functions that walk it as OmegaConf's DictConfig (the plan, the record)."""
    return cast("DictConfig", cfg)
