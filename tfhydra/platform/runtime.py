"""The process's runtime settings, decided in one place: CPUs, threads and seeds.

How many cores this process may use, how many jobs of a sweep share them (and so the threads each gets), the
threads TensorFlow is set to, and the seeds every random source starts from. The sweep room, the recipe
(tfhydra/runner/job.py) and the data pipeline (its private thread pool) ask here; TensorFlow is imported only by the
functions that set it. (`strategy.logical_cpus`, which splits the CPU into devices, is the strategy room's.)
"""

from __future__ import annotations

import logging
import os

log = logging.getLogger("tfhydra")


def available_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


WORKER_ENV = (
    "TFHYDRA_WORKER_INDEX",
    "TFHYDRA_WORKER_THREADS",
    "TFHYDRA_WORKER_JOB",
    "TFHYDRA_GPU_MEMORY_MB",
    "TFHYDRA_WORKER_PRELOADED",
)  # the last: "1" when the worker had TensorFlow from its fork server


def worker_threads() -> int | None:
    """The threads tfhydra's launcher gave this worker process (tfhydra/launch/placement.py: the cores split
    between its workers; 0: TensorFlow decides); None outside its workers."""
    text = os.environ.get(WORKER_ENV[1], "")
    return int(text) if text.isdigit() else None


def data_threads() -> int:
    """tf.data's private thread pool: the worker's share of the cores under tfhydra's launcher, else all of them."""
    return worker_threads() or available_cores()


def set_threads(threads: int) -> int:
    """Returns the intra-op threads in effect (0: TensorFlow decides)."""
    import tensorflow as tf

    if threads > 0:
        try:
            tf.config.threading.set_intra_op_parallelism_threads(threads)
            tf.config.threading.set_inter_op_parallelism_threads(threads)
        except RuntimeError:  # the runtime is already up in this process (e.g. an earlier sweep job)
            if tf.config.threading.get_intra_op_parallelism_threads() != threads:
                log.warning("trainer.threads=%d ignored: TensorFlow was already initialised in this process", threads)
    return tf.config.threading.get_intra_op_parallelism_threads()


def limit_gpu_memory() -> None:
    """`hydra.launcher.gpu_memory_mb` of tfhydra's launcher: each visible GPU one logical device of that size (set
    before the runtime starts; later jobs of the worker already have it)."""
    text = os.environ.get(WORKER_ENV[3], "")
    if not text.isdigit():
        return
    import tensorflow as tf

    for gpu in tf.config.list_physical_devices("GPU"):
        try:
            tf.config.set_logical_device_configuration(gpu, [tf.config.LogicalDeviceConfiguration(int(text))])
        except RuntimeError:  # the runtime is up (an earlier job of this worker): the limit holds already
            pass


def worker_record(threads: int) -> dict:
    """metrics.json's `worker`: the process that ran the job and what it had. `index` and `job` (1 = the worker's
    first) under tfhydra's launcher, else null; `threads`: intra-op, inter-op and tf.data threads (0: TensorFlow
    decides); the GPUs it was shown and how it shares their memory; `tensorflow_preloaded`: whether the worker was
    forked with TensorFlow imported (tfhydra/launch/fork_server.py), null outside tfhydra's launcher."""
    import tensorflow as tf

    index, job = (os.environ.get(WORKER_ENV[i], "") for i in (0, 2))
    memory = os.environ.get(WORKER_ENV[3]) or (
        "growth" if os.environ.get("TF_FORCE_GPU_ALLOW_GROWTH") == "true" else None
    )
    return {
        "pid": os.getpid(),
        "index": int(index) if index.isdigit() else None,
        "job": int(job) if job.isdigit() else None,
        "threads": {
            "intra_op": threads,
            "inter_op": tf.config.threading.get_inter_op_parallelism_threads(),
            "data": data_threads(),
        },
        "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "gpu_memory": memory,
        "tensorflow_preloaded": {"1": True, "0": False}.get(os.environ.get(WORKER_ENV[4], "")),
    }


def seed_everything(seed: int, deterministic: bool) -> None:
    import tensorflow as tf

    from tfhydra.platform.keras_lib import keras, track_random_generators

    keras.utils.set_random_seed(seed)
    tf.random.set_global_generator(tf.random.Generator.from_seed(seed))  # checkpointed by the custom loop
    if deterministic:
        tf.config.experimental.enable_op_determinism()
        track_random_generators(True)  # Dropout & co. draw from variables that checkpoints track
    else:  # both are process-wide: an earlier job of an in-process sweep must not leave them on
        from tfhydra.platform.private_api import disable_op_determinism  # not public API

        disable_op_determinism()
        track_random_generators(False)


def cluster_size() -> int:
    """The workers `TF_CONFIG` names (chief and workers); 1 without it, or when it cannot be read."""
    import json

    try:
        cluster = json.loads(os.environ.get("TF_CONFIG") or "{}").get("cluster", {})
        return sum(len(cluster.get(role) or []) for role in ("chief", "worker"))
    except (ValueError, AttributeError, TypeError):
        return 1
