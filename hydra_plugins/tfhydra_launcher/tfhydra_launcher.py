"""Hydra's entry to tfhydra's launcher (`hydra/launcher=tfhydra`, the default of `-m` in conf/tfhydra.yaml).

Hydra instantiates launchers only from the `hydra_plugins` package, so the class and its config live here; the
work is tfhydra/launch/launcher.py's (placement: tfhydra/launch/placement.py, workers: tfhydra/launch/workers.py).
"""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from hydra.core.config_store import ConfigStore
from hydra.plugins.launcher import Launcher
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig

from tfhydra.sweep.kind import TFHYDRA_LAUNCHER


@dataclass
class TfhydraLauncherConf:
    _target_: str = TFHYDRA_LAUNCHER  # its kind: tfhydra/sweep/kind.py
    workers: Any = "auto"  # worker processes: auto (from the cores or GPUs and the job count) | a number
    threads: Any = "auto"  # threads of each worker: auto (the cores split between the workers) | 0 | a number
    gpus: Any = "auto"  # auto (CUDA_VISIBLE_DEVICES, else `nvidia-smi -L`) | none | a list of GPU ids
    gpu_memory_mb: int | None = None  # per-job GPU memory limit; null: memory growth where workers share a GPU
    max_jobs_per_worker: int | None = None  # a worker is replaced by a fresh one after this many jobs; null: never


ConfigStore.instance().store(group="hydra/launcher", name="tfhydra", node=TfhydraLauncherConf, provider="tfhydra")


class TfhydraLauncher(Launcher):
    def __init__(
        self,
        workers: Any = "auto",
        threads: Any = "auto",
        gpus: Any = "auto",
        gpu_memory_mb: int | None = None,
        max_jobs_per_worker: int | None = None,
    ) -> None:
        self.options = {
            "workers": workers,
            "threads": threads,
            "gpus": gpus,
            "gpu_memory_mb": gpu_memory_mb,
            "max_jobs_per_worker": max_jobs_per_worker,
        }
        self.config: DictConfig | None = None
        self.hydra_context: HydraContext | None = None
        self.task_function: TaskFunction | None = None
        self.pool: Any = None

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:
        self.config, self.hydra_context, self.task_function = config, hydra_context, task_function

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[Any]:
        from tfhydra.launch.launcher import launch_jobs

        return launch_jobs(self, job_overrides, initial_job_idx)
