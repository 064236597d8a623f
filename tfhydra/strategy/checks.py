"""What the run plan checks in the `strategy:` section. No TensorFlow.

Only what the config decides is checked here: the replica count of `mirrored` with explicit
`devices` or `logical_cpus`, and of the single-device strategies. `auto` and `multi_worker` count
their replicas on the machine (GPUs, TF_CONFIG), so their check runs in the job
(tfhydra/runner/job.py calls `check_replica_batch` with the replicas the strategy found).
"""

from __future__ import annotations

from omegaconf import DictConfig

from tfhydra.config.errors import ConfigError
from tfhydra.config.schema import Rule, choice, integer, list_of, optional


def planned_replicas(cfg_strategy: DictConfig) -> int | None:
    """The replica count the config alone fixes; None when the machine decides."""
    name = cfg_strategy.get("name")
    if name in ("default", "one_device"):
        return 1
    if name == "mirrored":
        if cfg_strategy.get("devices"):
            return len(cfg_strategy.devices)
        if (cfg_strategy.get("logical_cpus") or 0) > 1:
            return int(cfg_strategy.logical_cpus)
    return None


def check_replica_batch(batch_size: int, replicas: int) -> None:
    if batch_size % replicas:
        raise ConfigError(
            "data.batch_size",
            batch_size,
            f"a multiple of the {replicas} replicas (it is the global "
            f"batch; each replica gets batch_size / {replicas})",
            "not divisible by the replica count",
        )


def check_strategy(cfg: DictConfig) -> None:
    replicas = planned_replicas(cfg.strategy)
    if replicas is not None and "_target_" not in cfg.strategy:
        check_replica_batch(cfg.data.batch_size, replicas)


def check_keras3(cfg: DictConfig) -> None:
    """Keras 3 trains on no MultiWorkerMirroredStrategy (docs/keras.md, "Not yet"): its trainer reduces the first
    distributed batch with `strategy.reduce`, which fails on a worker's PerReplica (keras-team/keras#20585)."""
    if cfg.keras == 3 and cfg.strategy.get("name") == "multi_worker":
        reason = "Keras 3's trainer fails on MultiWorkerMirroredStrategy (keras-team/keras#20585, open)"
        raise ConfigError("strategy", "multi_worker", "keras=2 with strategy=multi_worker", reason)


CHECKS = (check_strategy, check_keras3)


CLUSTER_RESOLVERS = ("tf_config", "slurm", "kubernetes")  # strategy.cluster_resolver (tfhydra/strategy/build.py)

# The strategy section's ranges and choices, read by the schema's checks (tfhydra/config/schema.py).
RULES: dict[str, Rule] = {
    "strategy.cross_device_ops": choice("auto", "nccl", "hierarchical_copy", "reduce_to_one"),
    "strategy.communication": choice("auto", "ring", "nccl"),
    "strategy.auto_shard": choice("auto", "data", "file", "off"),
    "strategy.cluster_resolver": choice(*CLUSTER_RESOLVERS),
    "strategy.port": integer(1, 65535),
    "strategy.gpus_per_task": optional(integer(1)),
    "strategy.worker_label": Rule(
        "a Kubernetes label selector such as job-name=tfhydra-worker", lambda v: isinstance(v, str) and "=" in v
    ),
    "strategy.logical_cpus": integer(0),
    "strategy.devices": optional(list_of(Rule("a device name such as /gpu:0", lambda v: isinstance(v, str)))),
    "strategy.device": optional(Rule("a device name such as /gpu:0", lambda v: isinstance(v, str))),
}
