"""Distribution strategy builders: `build_x(cfg_strategy) -> tf.distribute.Strategy`.

Model, optimizer and metrics are created inside `strategy.scope()` by the run; a
strategy builder only chooses devices. `data.batch_size` is the GLOBAL batch: each of
the strategy's replicas gets `batch_size / replicas` examples per step.

Strategies that set up collectives (multi_worker) must be built before TensorFlow runs
its first op, so the run builds the strategy first (tfhydra/job.py).
"""
from __future__ import annotations

import json
import os

import tensorflow as tf

from tfhydra.errors import ConfigError
from tfhydra.registry import Registry

STRATEGIES = Registry("strategy")

TF_CONFIG_EXAMPLE = ('TF_CONFIG=\'{"cluster": {"worker": ["host1:port", "host2:port"]}, '
                     '"task": {"type": "worker", "index": 0}}\'')
SHARD_POLICIES = {"auto": tf.data.experimental.AutoShardPolicy.AUTO, "data": tf.data.experimental.AutoShardPolicy.DATA,
                  "file": tf.data.experimental.AutoShardPolicy.FILE, "off": tf.data.experimental.AutoShardPolicy.OFF}


def build_strategy(cfg_strategy) -> tf.distribute.Strategy:
    split_cpu(cfg_strategy.get("logical_cpus", 0))
    return STRATEGIES.build(cfg_strategy)


@STRATEGIES.register("default")
def build_default(cfg) -> tf.distribute.Strategy:
    return tf.distribute.get_strategy()


@STRATEGIES.register("one_device")
def build_one_device(cfg) -> tf.distribute.Strategy:
    device = cfg.device or _first_device()
    known = [d.name for d in tf.config.list_logical_devices()]
    if tf.DeviceSpec.from_string(device).to_string() not in {tf.DeviceSpec.from_string(k).to_string() for k in known}:
        raise ConfigError("strategy.device", device, known, "no such device on this machine")
    return tf.distribute.OneDeviceStrategy(device)


@STRATEGIES.register("mirrored")
def build_mirrored(cfg) -> tf.distribute.Strategy:
    """All GPUs by default (the CPU if there are none), or `devices`; one replica per device."""
    devices = list(cfg.devices) if cfg.devices else None
    if devices is None and cfg.get("logical_cpus", 0) > 1:
        devices = [d.name for d in tf.config.list_logical_devices("CPU")]
    ops = {"auto": None, "nccl": tf.distribute.NcclAllReduce, "hierarchical_copy": tf.distribute.HierarchicalCopyAllReduce,
           "reduce_to_one": tf.distribute.ReductionToOneDevice}[cfg.cross_device_ops]
    return tf.distribute.MirroredStrategy(devices=devices, cross_device_ops=ops() if ops else None)


@STRATEGIES.register("auto")
def build_auto(cfg) -> tf.distribute.Strategy:
    """mirrored when more than one GPU is visible, else the default strategy."""
    if len(tf.config.list_logical_devices("GPU")) > 1:
        return tf.distribute.MirroredStrategy()
    return tf.distribute.get_strategy()


@STRATEGIES.register("multi_worker")
def build_multi_worker(cfg) -> tf.distribute.Strategy:
    """MultiWorkerMirroredStrategy over the cluster in TF_CONFIG (one process per host)."""
    read_tf_config()
    implementation = {"auto": tf.distribute.experimental.CommunicationImplementation.AUTO,
                      "ring": tf.distribute.experimental.CommunicationImplementation.RING,
                      "nccl": tf.distribute.experimental.CommunicationImplementation.NCCL}[cfg.communication]
    options = tf.distribute.experimental.CommunicationOptions(implementation=implementation)
    return tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)


def read_tf_config() -> dict:
    """TF_CONFIG, checked: a missing or malformed one is one line naming what is wrong."""
    raw = os.environ.get("TF_CONFIG")
    if not raw:
        raise ConfigError("TF_CONFIG", None, TF_CONFIG_EXAMPLE, "strategy=multi_worker needs the TF_CONFIG "
                          "environment variable on every worker; it is not set")
    try:
        config = json.loads(raw)
    except ValueError as error:
        raise ConfigError("TF_CONFIG", raw, TF_CONFIG_EXAMPLE, f"not valid JSON ({error})") from None
    cluster = config.get("cluster") if isinstance(config, dict) else None
    workers = cluster.get("worker") if isinstance(cluster, dict) else None
    task = config.get("task") if isinstance(config, dict) else None
    if not isinstance(workers, list) or not workers:
        raise ConfigError("TF_CONFIG", raw, TF_CONFIG_EXAMPLE, "cluster.worker (a list of host:port) is missing")
    if not isinstance(task, dict) or "type" not in task or "index" not in task:
        raise ConfigError("TF_CONFIG", raw, TF_CONFIG_EXAMPLE, "task.type and task.index are missing")
    members = cluster.get(task["type"])
    if not isinstance(members, list) or not isinstance(task["index"], int) or not 0 <= task["index"] < len(members):
        raise ConfigError("TF_CONFIG", raw, TF_CONFIG_EXAMPLE,
                          f"task {task['type']}:{task['index']} is not in the cluster")
    return config


def is_chief(strategy: tf.distribute.Strategy) -> bool:
    """Only the chief (worker 0 when the cluster has no `chief`) writes the run's artefacts."""
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not resolver.cluster_spec().as_dict():
        return True
    if resolver.task_type == "chief":
        return True
    return resolver.task_type == "worker" and resolver.task_id == 0 and "chief" not in resolver.cluster_spec().jobs


def shard(dataset: tf.data.Dataset, cfg_strategy) -> tf.data.Dataset:
    """Auto-shard policy across workers (multi_worker only; `auto` lets tf.data choose FILE or DATA)."""
    policy = cfg_strategy.get("auto_shard")
    if policy is None:
        return dataset
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = SHARD_POLICIES[policy]
    return dataset.with_options(options)


def split_cpu(count: int) -> None:
    """`strategy.logical_cpus=N`: N logical CPU devices, to run a multi-replica strategy without GPUs."""
    if not count or count < 2:
        return
    cpu = tf.config.list_physical_devices("CPU")[0]
    try:
        tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * count)
    except RuntimeError:  # TensorFlow is already initialised in this process
        if len(tf.config.list_logical_devices("CPU")) != count:
            raise ConfigError("strategy.logical_cpus", count, "a fresh process (not a later job of an in-process sweep)",
                              "TensorFlow's devices are already initialised in this process") from None


def _first_device() -> str:
    gpus = tf.config.list_logical_devices("GPU")
    return (gpus or tf.config.list_logical_devices("CPU"))[0].name


def describe_devices(strategy: tf.distribute.Strategy) -> dict:
    try:
        devices = list(strategy.extended.worker_devices)
    except RuntimeError:  # the default strategy places ops itself: report the first visible device
        devices = [_first_device()]
    name = {"CollectiveAllReduceStrategy": "MultiWorkerMirroredStrategy",  # the public names
            "_DefaultDistributionStrategy": "DefaultStrategy"}.get(type(strategy).__name__, type(strategy).__name__)
    return {"strategy": name, "replicas": strategy.num_replicas_in_sync, "devices": devices}
