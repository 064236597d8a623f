"""Multirun sweeps: job directory names, and what a job needs to know about its sweep.

`hydra.job.override_dirname` lists every override of a job (the fixed ones too) and
lets a value containing `/` create nested folders. Job directories are instead named
`<num>_<swept overrides>`, e.g. `3_optimizer.lr=5e-4,data.batch_size=64`, with
characters that file systems or shells mishandle replaced by `_`.

Which keys are swept is known to the process that launched the sweep (its command line
and `hydra.sweeper.params`). A job run by a parallel launcher lives in a worker process
whose `sys.argv` is the worker's, so the sweep callback (tfhydra/sweep/callback.py) hands
the swept keys to every job through the environment (`SWEPT_KEYS_ENV`), which worker
processes inherit.

The rest of the room: trial.py (one job of a sweep: HParams, failures recorded instead of
raised), hparams.py (TensorBoard HParams records), summary.py (summary.csv/.md/.png),
callback.py (the Hydra callback tying them together), __main__.py (`python -m tfhydra.sweep`).
Nothing here imports TensorFlow: a sweep's launching process never needs it.
"""
from __future__ import annotations

import json
import os
import re
import sys
from typing import Iterable, Sequence

_UNSAFE = re.compile(r"[/\\:*?\"<>|\s]")
MAX_NAME = 180  # leaves room under the usual 255-byte limit for the job number
SWEPT_KEYS_ENV = "TFHYDRA_SWEPT_KEYS"  # JSON list of swept keys, set by the sweep callback for its jobs


def swept_keys(argv: Sequence[str]) -> set[str]:
    """Keys whose value on the command line is a sweep (`a=1,2`, `range(...)`, `glob(...)`)."""
    from hydra._internal.utils import get_args_parser

    args, _ = get_args_parser().parse_known_args(list(argv))
    return sweep_override_keys(args.overrides)


def sweep_override_keys(overrides: Iterable[str]) -> set[str]:
    """The keys of the overrides that are sweeps, from Hydra's own parser."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    try:
        parsed = OverridesParser.create().parse_overrides(list(overrides))
    except Exception:  # malformed overrides are reported by the pre-flight check, not here
        return set()
    return {o.get_key_element() for o in parsed if o.is_sweep_override()}


def current_swept_keys(argv: Sequence[str] | None = None) -> set[str]:
    """The swept keys of the running sweep: handed over by the sweep callback, else from the command line."""
    if argv is None and os.environ.get(SWEPT_KEYS_ENV):
        try:
            return set(json.loads(os.environ[SWEPT_KEYS_ENV]))
        except ValueError:
            pass
    return swept_keys(sys.argv[1:] if argv is None else argv)


def job_dirname(task_overrides: Sequence[str], argv: Sequence[str] | None = None, swept: set[str] | None = None) -> str:
    """`<swept overrides>` of a job's directory `<num>_<swept overrides>` (conf/tfhydra.yaml's hydra.sweep.subdir)."""
    swept = current_swept_keys(argv) if swept is None else swept
    chosen = [o for o in task_overrides if o.split("=", 1)[0] in swept] or list(task_overrides)
    return safe_name(",".join(chosen))


def safe_name(text: str) -> str:
    return _UNSAFE.sub("_", text)[:MAX_NAME]


def register_resolvers() -> None:
    from omegaconf import OmegaConf

    if not OmegaConf.has_resolver("tfhydra.job_dirname"):
        OmegaConf.register_new_resolver("tfhydra.job_dirname", lambda overrides: job_dirname(list(overrides)))


def in_sweep() -> bool:
    """True inside a job of `python train.py -m ...` (any launcher, any sweeper)."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    return HydraConfig.initialized() and HydraConfig.get().mode == RunMode.MULTIRUN


def available_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def parallel_jobs() -> int:
    """How many jobs of this sweep run at once on this machine: hydra.launcher.n_jobs under the
    joblib launcher (joblib's convention: -1 = one per core, -2 = all cores but one), else 1."""
    from hydra.core.hydra_config import HydraConfig

    if not in_sweep():
        return 1
    launcher = HydraConfig.get().launcher
    if "joblib" not in str(launcher.get("_target_", "")):
        return 1
    n_jobs = int(launcher.get("n_jobs") or 1)
    return n_jobs if n_jobs > 0 else max(1, available_cores() + 1 + n_jobs)


def auto_threads() -> int:
    """`trainer.threads=0`: TensorFlow decides alone, or, when N jobs share the machine, cores // N each
    (TensorFlow would otherwise give every job a thread pool as large as the machine). Under submitit's
    launchers (local mode or SLURM) each job has `cpus_per_task` CPUs: that many threads."""
    cpus = launcher_cpus_per_task()
    if cpus:
        return cpus
    jobs = parallel_jobs()
    return 0 if jobs <= 1 else max(1, available_cores() // jobs)


def launcher_cpus_per_task() -> int | None:
    """`hydra.launcher.cpus_per_task` of a submitit launcher in this sweep, else None."""
    from hydra.core.hydra_config import HydraConfig

    if not in_sweep():
        return None
    launcher = HydraConfig.get().launcher
    cpus = launcher.get("cpus_per_task") if "submitit" in str(launcher.get("_target_", "")) else None
    return int(cpus) if isinstance(cpus, int) and cpus > 0 else None
