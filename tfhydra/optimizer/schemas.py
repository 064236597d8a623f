"""The types of the optimizer options: dataclass schemas,
stored in Hydra's ConfigStore as `schema/<name>` (tfhydra/runner/plan.py `store_schemas`) and named by each YAML's
defaults list. The values and their comments stay in conf/; ranges and
choices are checked by the rules in this room's checks (docs/design.md, "Typed configs"). No TensorFlow.
"""

from __future__ import annotations

from dataclasses import dataclass

from omegaconf import MISSING

from tfhydra.config.typed import Choice


class ScheduleName(Choice):
    constant = "constant"
    cosine = "cosine"
    exponential = "exponential"
    piecewise = "piecewise"
    reduce_on_plateau = "reduce_on_plateau"


@dataclass
class ScheduleConfig:
    """conf/tfhydra.yaml's `optimizer.schedule:`, shared by every optimizer option."""

    name: ScheduleName = MISSING
    warmup_epochs: float = MISSING
    min_lr: float = MISSING
    decay_rate: float = MISSING
    decay_epochs: float = MISSING
    staircase: bool = MISSING
    boundaries_epochs: list[int] = MISSING
    multipliers: list[float] = MISSING
    factor: float = MISSING
    patience: int = MISSING


@dataclass
class OptimizerConfig:
    """What every optimizer option has."""

    name: str = MISSING
    lr: float = MISSING
    schedule: ScheduleConfig = MISSING


@dataclass
class AdamOptimizerConfig(OptimizerConfig):
    beta_1: float = MISSING
    beta_2: float = MISSING
    epsilon: float = MISSING


@dataclass
class AdamwOptimizerConfig(AdamOptimizerConfig):
    weight_decay: float = MISSING
    amsgrad: bool = MISSING


@dataclass
class NadamOptimizerConfig(AdamOptimizerConfig):
    weight_decay: float | None = MISSING


@dataclass
class LionOptimizerConfig(OptimizerConfig):
    beta_1: float = MISSING
    beta_2: float = MISSING
    weight_decay: float | None = MISSING


@dataclass
class AdafactorOptimizerConfig(OptimizerConfig):
    beta_2_decay: float = MISSING
    epsilon_1: float = MISSING
    epsilon_2: float = MISSING
    clip_threshold: float = MISSING
    relative_step: bool = MISSING
    weight_decay: float | None = MISSING


@dataclass
class RmspropOptimizerConfig(OptimizerConfig):
    rho: float = MISSING
    momentum: float = MISSING
    epsilon: float = MISSING
    centered: bool = MISSING
    weight_decay: float | None = MISSING


@dataclass
class SgdOptimizerConfig(OptimizerConfig):
    momentum: float = MISSING
    nesterov: bool = MISSING


SCHEMAS: dict[str, type] = {
    "optimizer/adafactor": AdafactorOptimizerConfig,
    "optimizer/adam": AdamOptimizerConfig,
    "optimizer/adamw": AdamwOptimizerConfig,
    "optimizer/lion": LionOptimizerConfig,
    "optimizer/nadam": NadamOptimizerConfig,
    "optimizer/rmsprop": RmspropOptimizerConfig,
    "optimizer/sgd": SgdOptimizerConfig,
}
