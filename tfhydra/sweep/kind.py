"""Which sweeper, which launcher, and am I in a sweep: the one module that reads a sweeper's or launcher's `_target_`.

Hydra names a sweep's plugins only by their `_target_` (a class path), and tfhydra behaves differently under
some of them: the pre-flight expands a grid only for a basic sweeper, screen-then-promote needs tfhydra's own,
the fork server starts only for tfhydra's launcher, a job's threads follow joblib's `n_jobs` or the CPUs a
cluster launcher reserved, and a Ray worker needs an absolute sweep directory. Everyone asks here by name
(`sweeper_kind(cfg) == "basic"`), so a plugin renamed upstream is one line to change, and
tests/sweep/test_sweep_kind.py fails on a `_target_` test about a sweeper or launcher anywhere else.

`cfg` is a config with its `hydra` node (a composed job, the sweep callback's config, a loaded multirun.yaml
as a dict); None reads the running job's Hydra config (HydraConfig). Imports only the ground floor (the cores
this process may use): the sweep package's import stays light.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tfhydra.platform.runtime import available_cores, worker_threads

TFHYDRA_LAUNCHER = "hydra_plugins.tfhydra_launcher.tfhydra_launcher.TfhydraLauncher"  # the default: reused workers
TFHYDRA_SWEEPER = "hydra_plugins.tfhydra_basic.basic_sweeper.BasicSweeper"  # the default: it screens and promotes

SWEEPER_KINDS = ("tfhydra_basic", "basic", "tfhydra_optuna", "optuna", "other", "none")
LAUNCHER_KINDS = ("tfhydra", "basic", "joblib", "submitit_slurm", "submitit_local", "ray", "other", "none")
GRID_SWEEPERS = ("tfhydra_basic", "basic")  # expand a grid of discrete values (Hydra's BasicSweeper's rules)


def in_sweep() -> bool:
    """True inside a job of `python train.py -m ...` (any launcher, any sweeper)."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    return HydraConfig.initialized() and HydraConfig.get().mode == RunMode.MULTIRUN


def sweeper_kind(cfg: Any = None) -> str:
    """tfhydra_basic (tfhydra's default, screens and promotes), basic (Hydra's own), tfhydra_optuna (tfhydra's
    search), optuna (Hydra's Optuna plugin), other, or none (no sweeper in the config)."""
    target = plugin_target(cfg, "sweeper")
    if not target:
        return "none"
    if target == TFHYDRA_SWEEPER:
        return "tfhydra_basic"
    if target.endswith("BasicSweeper"):
        return "basic"
    if "tfhydra_optuna." in target:
        return "tfhydra_optuna"
    return "optuna" if "optuna" in target else "other"


def launcher_kind(cfg: Any = None) -> str:
    """tfhydra (tfhydra's launcher: reused workers), basic (Hydra's: jobs in this process), joblib,
    submitit_slurm, submitit_local, ray, other, or none (no launcher in the config)."""
    target = plugin_target(cfg, "launcher")
    if not target:
        return "none"
    if target == TFHYDRA_LAUNCHER:
        return "tfhydra"
    if target.endswith("BasicLauncher"):
        return "basic"
    if "joblib" in target:
        return "joblib"
    if "submitit" in target:
        return "submitit_slurm" if target.endswith("SlurmLauncher") else "submitit_local"
    return "ray" if "hydra_ray_launcher" in target else "other"


def expands_grid(cfg: Any = None) -> bool:
    """The sweeper runs the grid the command line spells (a,b,c; range(); glob()), one job per setting."""
    return sweeper_kind(cfg) in GRID_SWEEPERS


def plugin_target(cfg: Any, plugin: str) -> str:
    """`hydra.<plugin>._target_` of `cfg` (None: of the running job), "" when there is none."""
    hydra: Any  # the running job's HydraConf, or a config's `hydra` node (a DictConfig, a dict) or None
    if cfg is None:
        from hydra.core.hydra_config import HydraConfig

        if not HydraConfig.initialized():
            return ""
        hydra = HydraConfig.get()
    else:
        hydra = cfg.get("hydra") if isinstance(cfg, Mapping) or hasattr(cfg, "get") else None
    node = hydra.get(plugin) if hydra is not None else None
    return str(node.get("_target_") or "") if node is not None and hasattr(node, "get") else ""


# How many threads a job gets follows from its launcher: the launchers' thread rules.


def parallel_jobs() -> int:
    """How many jobs of this sweep run at once on this machine: hydra.launcher.n_jobs under the
    joblib launcher (joblib's convention: -1 = one per core, -2 = all cores but one), else 1."""
    from hydra.core.hydra_config import HydraConfig

    if not in_sweep() or launcher_kind() != "joblib":
        return 1
    n_jobs = int(HydraConfig.get().launcher.get("n_jobs") or 1)
    return n_jobs if n_jobs > 0 else max(1, available_cores() + 1 + n_jobs)


def auto_threads() -> int:
    """`trainer.threads=0`: TensorFlow decides alone, or, when N jobs share the machine, cores // N each
    (TensorFlow would otherwise give every job a thread pool as large as the machine). Under a cluster
    launcher each job gets the CPUs the launcher reserved for it (`launcher_cpus`): that many threads; in a
    worker of tfhydra's launcher, the worker's share (`worker_threads`)."""
    share = worker_threads()
    if share is not None:
        return share
    cpus = launcher_cpus()
    if cpus:
        return cpus
    jobs = parallel_jobs()
    return 0 if jobs <= 1 else max(1, available_cores() // jobs)


def launcher_cpus() -> int | None:
    """The CPUs this sweep's launcher reserves for each job: `hydra.launcher.cpus_per_task` under submitit's
    launchers (None when unset: SLURM's default), `hydra.launcher.ray.remote.num_cpus` under Ray's (1 when
    unset: what Ray reserves for a task, and the OMP_NUM_THREADS it sets), else None."""
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import OmegaConf

    if not in_sweep():
        return None
    launcher, kind = HydraConfig.get().launcher, launcher_kind()
    if kind in ("submitit_slurm", "submitit_local"):
        cpus = launcher.get("cpus_per_task")
    elif kind == "ray":
        cpus = OmegaConf.select(launcher, "ray.remote.num_cpus", default=None) or 1
    else:
        return None
    return max(1, int(cpus)) if isinstance(cpus, (int, float)) and cpus > 0 else None
