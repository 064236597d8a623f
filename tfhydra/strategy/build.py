"""Distribution strategy builders: `build_x(cfg_strategy) -> tf.distribute.Strategy`.

Model, optimizer and metrics are created inside `strategy.scope()` by the run; a
strategy builder only chooses devices. `data.batch_size` is the GLOBAL batch: each of
the strategy's replicas gets `batch_size / replicas` examples per step.

Strategies that set up collectives (multi_worker) must be built before TensorFlow runs
its first op, so the run builds the strategy first (tfhydra/runner/job.py).
"""

from __future__ import annotations

import json
import os
from typing import Any

import tensorflow as tf

from tfhydra.config.errors import ConfigError, first_line
from tfhydra.config.registry import Registry
from tfhydra.strategy.schemas import (
    MirroredStrategyConfig,
    MultiWorkerStrategyConfig,
    OneDeviceStrategyConfig,
    StrategyConfig,
)

STRATEGIES = Registry("strategy", locations=["tfhydra.strategy.build"])  # the builders below

TF_CONFIG_EXAMPLE = (
    'TF_CONFIG=\'{"cluster": {"worker": ["host1:port", "host2:port"]}, "task": {"type": "worker", "index": 0}}\''
)
SHARD_POLICIES = {
    "auto": tf.data.experimental.AutoShardPolicy.AUTO,
    "data": tf.data.experimental.AutoShardPolicy.DATA,
    "file": tf.data.experimental.AutoShardPolicy.FILE,
    "off": tf.data.experimental.AutoShardPolicy.OFF,
}


def build_strategy(cfg_strategy) -> tf.distribute.Strategy:
    split_cpu(cfg_strategy.get("logical_cpus") or 0)  # only mirrored has the key (conf/strategy/)
    return STRATEGIES.build(cfg_strategy)


@STRATEGIES.register("default", schema=StrategyConfig)
def build_default(cfg) -> tf.distribute.Strategy:
    return tf.distribute.get_strategy()


@STRATEGIES.register("one_device", schema=OneDeviceStrategyConfig)
def build_one_device(cfg) -> tf.distribute.Strategy:
    device = cfg.device or _first_device()
    known = [d.name for d in tf.config.list_logical_devices()]
    if tf.DeviceSpec.from_string(device).to_string() not in {tf.DeviceSpec.from_string(k).to_string() for k in known}:
        raise ConfigError("strategy.device", device, known, "no such device on this machine")
    return tf.distribute.OneDeviceStrategy(device)


@STRATEGIES.register("mirrored", schema=MirroredStrategyConfig)
def build_mirrored(cfg) -> tf.distribute.Strategy:
    """All GPUs by default (the CPU if there are none), or `devices`; one replica per device."""
    devices = list(cfg.devices) if cfg.devices else None
    if devices is None and (cfg.get("logical_cpus") or 0) > 1:
        devices = [d.name for d in tf.config.list_logical_devices("CPU")]
    ops = {
        "auto": None,
        "nccl": tf.distribute.NcclAllReduce,
        "hierarchical_copy": tf.distribute.HierarchicalCopyAllReduce,
        "reduce_to_one": tf.distribute.ReductionToOneDevice,
    }[cfg.cross_device_ops]
    return tf.distribute.MirroredStrategy(devices=devices, cross_device_ops=ops() if ops else None)


@STRATEGIES.register("auto", schema=StrategyConfig)
def build_auto(cfg) -> tf.distribute.Strategy:
    """mirrored when more than one GPU is visible, else the default strategy."""
    if len(tf.config.list_logical_devices("GPU")) > 1:
        return tf.distribute.MirroredStrategy()
    return tf.distribute.get_strategy()


@STRATEGIES.register("multi_worker", schema=MultiWorkerStrategyConfig)
def build_multi_worker(cfg) -> tf.distribute.Strategy:
    """MultiWorkerMirroredStrategy over the cluster its `cluster_resolver` finds (one process per host, or per
    task): TF_CONFIG, SLURM's `srun` environment or the Kubernetes pods with a label."""
    resolver = CLUSTER_RESOLVERS[cfg.cluster_resolver](cfg)
    implementation = {
        "auto": tf.distribute.experimental.CommunicationImplementation.AUTO,
        "ring": tf.distribute.experimental.CommunicationImplementation.RING,
        "nccl": tf.distribute.experimental.CommunicationImplementation.NCCL,
    }[cfg.communication]
    options = tf.distribute.experimental.CommunicationOptions(implementation=implementation)
    return tf.distribute.MultiWorkerMirroredStrategy(cluster_resolver=resolver, communication_options=options)


def tf_config_resolver(cfg) -> tf.distribute.cluster_resolver.ClusterResolver:
    """TensorFlow's default: the cluster and this task from the TF_CONFIG environment variable, checked first."""
    read_tf_config()
    return tf.distribute.cluster_resolver.TFConfigClusterResolver()


SLURM_ACCEPTED = (
    "a step started by srun (SLURM_PROCID, SLURM_STEP_NODELIST, SLURM_STEP_TASKS_PER_NODE, "
    "SLURM_STEP_NUM_TASKS in the environment; docs/distribute.md has an sbatch script)"
)


def slurm_resolver(cfg) -> tf.distribute.cluster_resolver.ClusterResolver:
    """TensorFlow's SlurmClusterResolver: one worker per SLURM task, at `port` on its host (a host's second task
    at port + 1, ...). `gpus_per_task`: the resolver gives each task that many of the host's GPUs
    (CUDA_VISIBLE_DEVICES); null leaves the GPUs as SLURM bound them (--gpus-per-task). TensorFlow's resolver
    counts tasks by GPUs, so without one it is told a GPU per task and not to touch CUDA_VISIBLE_DEVICES."""
    missing = [
        v
        for v in ("SLURM_PROCID", "SLURM_STEP_NODELIST", "SLURM_STEP_TASKS_PER_NODE", "SLURM_STEP_NUM_TASKS")
        if not os.environ.get(v)
    ]
    if missing:
        raise ConfigError(
            "strategy.cluster_resolver",
            "slurm",
            SLURM_ACCEPTED,
            f"{', '.join(missing)} not set: not inside a SLURM job step",
        )
    from tfhydra.platform.private_api import slurm_tasks_per_node

    tasks_per_node = max(slurm_tasks_per_node(os.environ["SLURM_STEP_TASKS_PER_NODE"]))
    gpus = cfg.get("gpus_per_task")
    try:
        resolver = tf.distribute.cluster_resolver.SlurmClusterResolver(
            port_base=int(cfg.port),
            gpus_per_node=(gpus or 1) * tasks_per_node,
            gpus_per_task=gpus or 1,
            auto_set_gpu=bool(gpus),
        )
        resolver.cluster_spec()  # resolves this task's type and index
    except (RuntimeError, ValueError) as error:
        raise ConfigError("strategy.cluster_resolver", "slurm", SLURM_ACCEPTED, first_line(error)) from None
    return resolver


def kubernetes_resolver(cfg) -> tf.distribute.cluster_resolver.ClusterResolver:
    """TensorFlow's KubernetesClusterResolver: the running pods labelled `worker_label`, sorted by name, each at
    its node's address and `port` (so one worker pod per node, or hostNetwork); this pod (POD_NAME) is the task
    at its place in that order. Needs the `kubernetes` extra and a service account allowed to list pods."""
    accepted = (
        "pods labelled strategy.worker_label, run with a service account that may list pods, and "
        "pip install 'tfhydra[kubernetes]' (docs/distribute.md has a manifest)"
    )
    try:
        from kubernetes import client, config
    except ImportError:
        raise ConfigError(
            "strategy.cluster_resolver", "kubernetes", accepted, "the kubernetes Python client is not installed"
        ) from None
    try:
        config.load_incluster_config()
    except config.ConfigException:
        config.load_kube_config()  # outside the cluster: ~/.kube/config
    pod = os.environ.get("POD_NAME") or os.environ.get("HOSTNAME", "")  # hostNetwork pods: HOSTNAME is the node's
    return kubernetes_resolver_from(client.CoreV1Api(), cfg, pod, accepted)


def kubernetes_resolver_from(api, cfg, pod: str, accepted: str) -> tf.distribute.cluster_resolver.ClusterResolver:
    """The resolver over the Kubernetes API `api`, with this pod's place in the resolver's own order as its index."""
    pods = sorted(p.metadata.name for p in api.list_pod_for_all_namespaces(label_selector=cfg.worker_label).items)
    if pod not in pods:
        raise ConfigError(
            "strategy.worker_label",
            cfg.worker_label,
            accepted,
            f"this pod ({pod or 'POD_NAME not set'}) is not among the {len(pods)} pods it selects",
        )
    resolver = tf.distribute.cluster_resolver.KubernetesClusterResolver(
        {"worker": [cfg.worker_label]}, tf_server_port=int(cfg.port), override_client=api
    )
    resolver.task_type, resolver.task_id = "worker", pods.index(pod)
    try:
        resolver.cluster_spec()
    except RuntimeError as error:  # a pod that is not Running yet
        raise ConfigError("strategy.worker_label", cfg.worker_label, accepted, first_line(error)) from None
    return resolver


CLUSTER_RESOLVERS = {"tf_config": tf_config_resolver, "slurm": slurm_resolver, "kubernetes": kubernetes_resolver}


def read_tf_config() -> dict:
    """TF_CONFIG, checked: a missing or malformed one is one line naming what is wrong."""
    raw = os.environ.get("TF_CONFIG")
    if not raw:
        raise ConfigError(
            "TF_CONFIG",
            None,
            TF_CONFIG_EXAMPLE,
            "strategy=multi_worker needs the TF_CONFIG environment variable on every worker; it is not set",
        )
    try:
        config = json.loads(raw)
    except ValueError as error:
        raise ConfigError("TF_CONFIG", raw, TF_CONFIG_EXAMPLE, f"not valid JSON ({error})") from None
    cluster: Any = config.get("cluster") if isinstance(config, dict) else None
    workers = cluster.get("worker") if isinstance(cluster, dict) else None
    task = config.get("task") if isinstance(config, dict) else None
    if not isinstance(workers, list) or not workers:
        raise ConfigError("TF_CONFIG", raw, TF_CONFIG_EXAMPLE, "cluster.worker (a list of host:port) is missing")
    if not isinstance(task, dict) or "type" not in task or "index" not in task:
        raise ConfigError("TF_CONFIG", raw, TF_CONFIG_EXAMPLE, "task.type and task.index are missing")
    members = cluster.get(task["type"])
    if not isinstance(members, list) or not isinstance(task["index"], int) or not 0 <= task["index"] < len(members):
        raise ConfigError(
            "TF_CONFIG", raw, TF_CONFIG_EXAMPLE, f"task {task['type']}:{task['index']} is not in the cluster"
        )
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
    """Auto-shard policy across workers (multi_worker only). `auto` keeps the data room's choice (by file with
    enough shards, else by example: tfhydra/data/, recorded in the data spec), so it sets nothing."""
    policy = cfg_strategy.get("auto_shard")  # only multi_worker has the key (conf/strategy/)
    if policy is None or policy == "auto":
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
            raise ConfigError(
                "strategy.logical_cpus",
                count,
                "a fresh process (not a later job of an in-process sweep)",
                "TensorFlow's devices are already initialised in this process",
            ) from None


def _first_device() -> str:
    gpus = tf.config.list_logical_devices("GPU")
    return (gpus or tf.config.list_logical_devices("CPU"))[0].name


def describe_devices(strategy: tf.distribute.Strategy) -> dict:
    try:
        devices = list(strategy.extended.worker_devices)
    except RuntimeError:  # the default strategy places ops itself: report the first visible device
        devices = [_first_device()]
    name = {
        "CollectiveAllReduceStrategy": "MultiWorkerMirroredStrategy",  # the public names
        "_DefaultDistributionStrategy": "DefaultStrategy",
    }.get(type(strategy).__name__, type(strategy).__name__)
    return {"strategy": name, "replicas": strategy.num_replicas_in_sync, "devices": devices}
