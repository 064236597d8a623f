"""The types of the `trainer:` section: dataclass schemas,
stored in Hydra's ConfigStore as `schema/<name>` (tfhydra/runner/plan.py `store_schemas`) and named by each YAML's
defaults list. The values and their comments stay in conf/; ranges and
choices are checked by the rules in this room's checks (docs/design.md, "Typed configs"). No TensorFlow.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from omegaconf import MISSING

from tfhydra.config.typed import Choice


class Loop(Choice):
    fit = "fit"
    custom = "custom"


class Mode(Choice):
    min = "min"
    max = "max"


@dataclass
class EarlyStoppingConfig:
    patience: int = MISSING
    monitor: str = MISSING
    mode: Mode = MISSING
    min_delta: float = MISSING


@dataclass
class RecoveryConfig:
    max_trials: int = MISSING
    lr_factor: float = MISSING


@dataclass
class EmaConfig:
    decay: float | None = MISSING


@dataclass
class FinetuneConfig:
    head_epochs: int = MISSING
    lr_factor: float = MISSING


@dataclass
class TrainerConfig:
    """conf/tfhydra.yaml's `trainer:` section. `loss` and `metrics` take a name or a `_target_` node, and
    `jit_compile`, `save_every`, `max_loss` mix a word with a number or a boolean: Any (their rules check them)."""

    loop: Loop = MISSING
    epochs: int = MISSING
    seed: int = MISSING
    deterministic: bool = MISSING
    steps_per_execution: int = MISSING
    jit_compile: Any = MISSING
    clip_norm: float | None = MISSING
    clip_value: float | None = MISSING
    clip_global_norm: float | None = MISSING
    accumulate_steps: int = MISSING
    save_every: Any = MISSING
    resume: bool = MISSING
    early_stopping: EarlyStoppingConfig = MISSING
    callbacks: list[Any] = MISSING
    verbose: int = MISSING
    monitor: str = MISSING
    monitor_mode: Mode = MISSING
    loss: Any = MISSING
    label_smoothing: float = MISSING
    metrics: Any = MISSING
    threads: int = MISSING
    max_loss: Any = MISSING
    max_minutes: float | None = MISSING
    stop_at: dict[str, float] = MISSING
    steps_per_epoch: int | None = MISSING
    validation_steps: int | None = MISSING
    val_every_steps: int | None = MISSING
    run_eagerly: bool = MISSING
    check_numerics: bool = MISSING
    recovery: RecoveryConfig = MISSING
    ema: EmaConfig = MISSING
    finetune: FinetuneConfig = MISSING


SCHEMAS: dict[str, type] = {"trainer": TrainerConfig}
