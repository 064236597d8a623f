"""The types of the strategy options: dataclass schemas,
stored in Hydra's ConfigStore as `schema/<name>` (tfhydra/runner/plan.py `store_schemas`) and named by each YAML's
defaults list. The values and their comments stay in conf/; ranges and
choices are checked by the rules in this room's checks (docs/design.md, "Typed configs"). No TensorFlow.
"""

from __future__ import annotations

from dataclasses import dataclass

from omegaconf import MISSING

from tfhydra.config.typed import Choice


class CrossDeviceOps(Choice):
    auto = "auto"
    nccl = "nccl"
    hierarchical_copy = "hierarchical_copy"
    reduce_to_one = "reduce_to_one"


class ClusterResolver(Choice):
    tf_config = "tf_config"
    slurm = "slurm"
    kubernetes = "kubernetes"


class Communication(Choice):
    auto = "auto"
    ring = "ring"
    nccl = "nccl"


class AutoShard(Choice):
    auto = "auto"
    data = "data"
    file = "file"
    off = "off"


@dataclass
class StrategyConfig:
    """What every strategy option has: its name (default, auto: nothing more)."""

    name: str = MISSING


@dataclass
class MirroredStrategyConfig(StrategyConfig):
    devices: list[str] | None = MISSING
    cross_device_ops: CrossDeviceOps = MISSING
    logical_cpus: int = MISSING


@dataclass
class MultiWorkerStrategyConfig(StrategyConfig):
    cluster_resolver: ClusterResolver = MISSING
    port: int = MISSING
    gpus_per_task: int | None = MISSING
    worker_label: str = MISSING
    communication: Communication = MISSING
    auto_shard: AutoShard = MISSING


@dataclass
class OneDeviceStrategyConfig(StrategyConfig):
    device: str | None = MISSING


SCHEMAS: dict[str, type] = {
    "strategy/auto": StrategyConfig,
    "strategy/default": StrategyConfig,
    "strategy/mirrored": MirroredStrategyConfig,
    "strategy/multi_worker": MultiWorkerStrategyConfig,
    "strategy/one_device": OneDeviceStrategyConfig,
}
