"""Where the jobs of a sweep run under tfhydra's launcher: how many worker processes, the CPU threads each gets,
and the GPU(s) each one sees. Pure functions of the machine's description (cores, GPU list, job count) and the
launcher's options, so tests call them with any device list; nothing here imports TensorFlow or starts a process.

A worker's placement is a set of environment variables, set in the worker before TensorFlow is imported:
`CUDA_VISIBLE_DEVICES` (its GPU: round-robin over the visible ones), `TF_FORCE_GPU_ALLOW_GROWTH=true` when
several workers share a GPU (TensorFlow would otherwise map all its memory in the first of them), and
`TFHYDRA_WORKER_THREADS` (read by tfhydra/platform/runtime.py: the intra/inter-op and tf.data threads of every job the
worker runs), so the threads of all workers add up to the machine's cores, not N times them.
"""

from __future__ import annotations

import math
import os
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from tfhydra.config.errors import ConfigError

WORKER_THREADS_ENV = "TFHYDRA_WORKER_THREADS"  # threads of each job in this worker (tfhydra/platform/runtime.py)
WORKER_INDEX_ENV = "TFHYDRA_WORKER_INDEX"  # which worker of the sweep this process is (its record says so)
GPU_MEMORY_ENV = "TFHYDRA_GPU_MEMORY_MB"  # a per-job GPU memory limit (tfhydra/platform/runtime.py), when set
# Measured on 2 cores (docs/sweeps.md, "Concurrent by default"): one worker per job up to this many per core.
JOBS_PER_CORE = 1.5


@dataclass(frozen=True)
class WorkerPlan:
    index: int
    threads: int  # intra/inter-op and tf.data threads of each job it runs (0: TensorFlow decides)
    gpus: tuple[str, ...] = ()  # the GPU ids it sees (CUDA_VISIBLE_DEVICES); () = none, CPU only
    env: dict = field(default_factory=dict)  # what is set in the worker before TensorFlow is imported


def visible_gpus(env: Mapping[str, str] | None = None, nvidia_smi: str | None = None) -> list[str]:
    """The GPUs a sweep may use, without TensorFlow: CUDA_VISIBLE_DEVICES when set (empty or -1: none), else the
    lines of `nvidia-smi -L` (`nvidia_smi`: its output, injected by tests; None: run it if it is installed)."""
    env = os.environ if env is None else env
    if "CUDA_VISIBLE_DEVICES" in env:
        ids = [d.strip() for d in env["CUDA_VISIBLE_DEVICES"].split(",") if d.strip()]
        return [] if not ids or ids[0] == "-1" else ids
    if nvidia_smi is None:
        nvidia_smi = _nvidia_smi_list()
    return [str(i) for i, line in enumerate(nvidia_smi.splitlines()) if line.startswith("GPU ")]


def _nvidia_smi_list() -> str:
    if shutil.which("nvidia-smi") is None:
        return ""
    try:
        return subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.SubprocessError):
        return ""


def worker_count(n_jobs: int, cores: int, gpus: Sequence[str], workers: int | str = "auto") -> int:
    """`workers=auto`: on CPUs, one worker per job up to JOBS_PER_CORE per core (rounded up: 3 on 2 cores); with
    GPUs, one per GPU, more only when there are more jobs than GPUs and memory growth lets them share (up to
    2 per GPU); never more workers than jobs, never fewer than 1."""
    if workers != "auto":
        if not isinstance(workers, int) or isinstance(workers, bool) or workers < 1:
            raise ConfigError("hydra.launcher.workers", workers, "auto or a whole number from 1")
        return max(1, min(workers, n_jobs))
    limit = 2 * len(gpus) if gpus else math.ceil(max(cores, 1) * JOBS_PER_CORE)
    return max(1, min(n_jobs, limit))


def split_threads(cores: int, workers: int, threads: int | str = "auto") -> list[int]:
    """Threads of each worker: `auto` splits the cores so they add up to the machine's (the first workers get
    the remainder; at least 1 each: 3 workers on 2 cores get 1 each); a number is given to every worker."""
    if threads != "auto":
        if not isinstance(threads, int) or isinstance(threads, bool) or threads < 0:
            raise ConfigError("hydra.launcher.threads", threads, "auto, 0 (TensorFlow decides) or a whole number")
        return [threads] * workers
    if workers == 1:
        return [0]  # alone on the machine: TensorFlow's own choice, as a single run
    base, extra = divmod(max(cores, 1), workers)
    return [max(1, base + (i < extra)) for i in range(workers)]


def plan_workers(
    n_jobs: int,
    cores: int,
    gpus: Sequence[str],
    workers: int | str = "auto",
    threads: int | str = "auto",
    gpu_memory_mb: int | None = None,
) -> list[WorkerPlan]:
    """Every worker's placement. GPUs go round-robin (worker i sees gpus[i % len(gpus)]); a GPU seen by more
    than one worker gets memory growth in each of them, or `gpu_memory_mb` per job when that is set."""
    count = worker_count(n_jobs, cores, gpus, workers)
    per_worker = split_threads(cores, count, threads)
    plans = []
    for index in range(count):
        env = {WORKER_INDEX_ENV: str(index), WORKER_THREADS_ENV: str(per_worker[index])}
        seen: tuple[str, ...] = ()
        if gpus:
            seen = (str(gpus[index % len(gpus)]),)
            env["CUDA_VISIBLE_DEVICES"] = seen[0]
            shared = sum(1 for other in range(count) if other % len(gpus) == index % len(gpus)) > 1
            if gpu_memory_mb:
                env[GPU_MEMORY_ENV] = str(int(gpu_memory_mb))
            elif shared:
                env["TF_FORCE_GPU_ALLOW_GROWTH"] = "true"
        plans.append(WorkerPlan(index, per_worker[index], seen, env))
    return plans


def cpu_only(option: str | Sequence | None) -> bool:
    """`hydra.launcher.gpus=none` or `[]`: the user asked for no GPU (not: none was found)."""
    return option in ("none", "") or (option is not None and not isinstance(option, (str, int)) and len(option) == 0)


def launcher_gpus(option: str | Sequence | None, env: Mapping[str, str] | None = None) -> list[str]:
    """`hydra.launcher.gpus`: auto (visible_gpus), none/[] (CPU only) or a list of GPU ids."""
    if option is None or option == "auto":
        return visible_gpus(env)
    if cpu_only(option):
        return []
    if isinstance(option, (str, int)):
        return [d.strip() for d in str(option).split(",") if d.strip()]
    return [str(d) for d in option]
