"""The types of the compression options: dataclass schemas,
stored in Hydra's ConfigStore as `schema/<name>` (tfhydra/runner/plan.py `store_schemas`) and named by each YAML's
defaults list. The values and their comments stay in conf/; ranges and
choices are checked by the rules in this room's checks (docs/design.md, "Typed configs"). No TensorFlow.
"""

from __future__ import annotations

from dataclasses import dataclass

from omegaconf import MISSING

from tfhydra.config.typed import Choice


class PruningSchedule(Choice):
    polynomial = "polynomial"
    constant = "constant"


class CentroidsInit(Choice):
    kmeans_plus_plus = "kmeans_plus_plus"
    linear = "linear"
    density_based = "density_based"
    random = "random"


@dataclass
class CompressionConfig:
    """What every compression option has: its name and conf/tfhydra.yaml's shared `compression:` keys."""

    name: str = MISSING
    start_epoch: int = MISSING
    from_run: str | None = MISSING


@dataclass
class PruneCompressionConfig(CompressionConfig):
    schedule: PruningSchedule = MISSING
    target_sparsity: float = MISSING
    initial_sparsity: float = MISSING
    begin_step: int | None = MISSING
    end_step: int | None = MISSING
    begin_epoch: float | None = MISSING
    end_epoch: float | None = MISSING
    frequency: int = MISSING
    block_size: list[int] | None = MISSING


@dataclass
class PruneQuantizeCompressionConfig(PruneCompressionConfig):
    quantize_epochs: int = MISSING


@dataclass
class ClusterCompressionConfig(CompressionConfig):
    number_of_clusters: int = MISSING
    centroids_init: CentroidsInit = MISSING


@dataclass
class ClusterQuantizeCompressionConfig(ClusterCompressionConfig):
    quantize_epochs: int = MISSING


SCHEMAS: dict[str, type] = {
    "compression/none": CompressionConfig,
    "compression/quantize": CompressionConfig,
    "compression/prune": PruneCompressionConfig,
    "compression/prune_quantize": PruneQuantizeCompressionConfig,
    "compression/cluster": ClusterCompressionConfig,
    "compression/cluster_quantize": ClusterQuantizeCompressionConfig,
}
