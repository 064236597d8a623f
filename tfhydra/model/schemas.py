"""The types of the model options: dataclass schemas,
stored in Hydra's ConfigStore as `schema/<name>` (tfhydra/runner/plan.py `store_schemas`) and named by each YAML's
defaults list. The values and their comments stay in conf/; ranges and
choices are checked by the rules in this room's checks (docs/design.md, "Typed configs"). No TensorFlow.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from omegaconf import MISSING

from tfhydra.config.typed import Choice


class Pooling(Choice):
    avg = "avg"
    max = "max"


class Cell(Choice):
    lstm = "lstm"
    gru = "gru"


class Positions(Choice):
    sinusoidal = "sinusoidal"
    learned = "learned"


@dataclass
class ModelConfig:
    """What every model option has. `freeze` is a word (none, base) or a list of layer patterns: Any."""

    name: str = MISSING
    freeze: Any = MISSING


@dataclass
class CnnModelConfig(ModelConfig):
    filters: list[int] = MISSING
    kernel_size: int = MISSING
    pool_size: int = MISSING
    dense_units: int = MISSING
    activation: str = MISSING
    weights: str | None = MISSING


@dataclass
class MlpModelConfig(ModelConfig):
    units: list[int] = MISSING
    dropout: float = MISSING
    activation: str = MISSING
    wide: bool = MISSING
    linear_start: bool = MISSING
    deep_l2: float = MISSING
    weights: str | None = MISSING


@dataclass
class ResnetModelConfig(ModelConfig):
    depth: int | None = MISSING
    blocks_per_stage: list[int] | None = MISSING
    width: int = MISSING
    weights: str | None = MISSING


@dataclass
class KerasAppModelConfig(ModelConfig):
    arch: str = MISSING
    weights: str | None = MISSING
    pooling: Pooling = MISSING
    dropout: float = MISSING
    arch_args: dict[str, Any] = MISSING


@dataclass
class KerasHubModelConfig(ModelConfig):
    preset: str | None = MISSING
    sequence_length: int | None = MISSING
    dropout: float = MISSING


@dataclass
class LstmModelConfig(ModelConfig):
    cell: Cell = MISSING
    units: list[int] = MISSING
    bidirectional: bool = MISSING
    embedding_dim: int = MISSING
    dropout: float = MISSING
    mask_zero: bool = MISSING
    weights: str | None = MISSING


@dataclass
class TransformerModelConfig(ModelConfig):
    width: int = MISSING
    heads: int = MISSING
    blocks: int = MISSING
    mlp_dim: int = MISSING
    dropout: float = MISSING
    positions: Positions = MISSING
    mask_zero: bool = MISSING
    weights: str | None = MISSING


@dataclass
class TabularMlpConfig:
    """`model=auto`'s MLP for tables (rank-1 float feature vectors): the keys of `mlp` it chose by measurement."""

    units: list[int] = MISSING
    dropout: float = MISSING
    activation: str = MISSING
    wide: bool = MISSING
    linear_start: bool = MISSING
    deep_l2: float = MISSING


@dataclass
class AutoModelConfig(CnnModelConfig):
    """`model=auto`: the seed CNN's keys at the top (what it builds for images, so `model.filters=...` reads as
    under model=cnn), an MLP's for tables, a sequence model's for token ids (tfhydra/model/auto.py)."""

    tabular: TabularMlpConfig = MISSING
    tokens: TransformerModelConfig = MISSING


SCHEMAS: dict[str, type] = {
    "model/auto": AutoModelConfig,
    "model/cnn": CnnModelConfig,
    "model/mlp": MlpModelConfig,
    "model/resnet": ResnetModelConfig,
    "model/keras_app": KerasAppModelConfig,
    "model/keras_hub": KerasHubModelConfig,
    "model/lstm": LstmModelConfig,
    "model/transformer": TransformerModelConfig,
}
