"""Multirun sweeps: job directory names, and what a job needs to know about its sweep.

`hydra.job.override_dirname` lists every override of a job (the fixed ones too) and
lets a value containing `/` create nested folders. Job directories are instead named
`<num>_<swept overrides>`, e.g. `3_optimizer.lr=5e-4,data.batch_size=64`, with
characters that file systems or shells mishandle replaced by `_`.

Which keys are swept is known to the process that launched the sweep (its command line
and `hydra.sweeper.params`). A job run by another launcher lives in a process whose
`sys.argv` is not the user's (a joblib or submitit worker), on a machine that may not share
the launching shell's environment (a SLURM node, a Ray worker started before the sweep). So
the sweep callback (tfhydra/sweep/callback.py) writes the swept keys into every job's config,
as `hydra.job.env_set.TFHYDRA_SWEPT_KEYS` (`handover_overrides`): Hydra composes each job from
the sweep's `hydra.overrides.hydra` under every launcher, and sets the variable while the job
runs, for the job's own code.

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
SWEPT_KEYS_ENV = "TFHYDRA_SWEPT_KEYS"  # JSON list of swept keys: a job's hydra.job.env_set, written by the sweep callback


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


def current_swept_keys(argv: Sequence[str] | None = None, hydra_node=None) -> set[str]:
    """The swept keys of the running sweep: those the sweep callback wrote into the job's config
    (`recorded_swept_keys`), else those of the command line (`argv`, else `sys.argv`)."""
    recorded = recorded_swept_keys(hydra_node) if argv is None else None
    return recorded if recorded is not None else swept_keys(sys.argv[1:] if argv is None else argv)


def recorded_swept_keys(hydra_node=None) -> set[str] | None:
    """`hydra.job.env_set.TFHYDRA_SWEPT_KEYS` of a job's `hydra` node (by default the running job's), else the
    variable in the environment (Hydra sets it while the job runs); None when neither holds a JSON list."""
    from omegaconf import OmegaConf

    if hydra_node is None:
        from hydra.core.hydra_config import HydraConfig

        hydra_node = HydraConfig.get() if HydraConfig.initialized() else None
    recorded = OmegaConf.select(hydra_node, f"job.env_set.{SWEPT_KEYS_ENV}", default=None) if hydra_node else None
    for text in (recorded, os.environ.get(SWEPT_KEYS_ENV)):
        try:
            keys = json.loads(text) if text else None
        except ValueError:
            continue
        if isinstance(keys, list):
            return set(keys)
    return None


def handover_overrides(swept: Iterable[str], sweep_dir: str, launcher: str = "") -> list[str]:
    """Hydra overrides that carry what each job must know about its sweep to every launcher (Hydra composes
    every job again from the sweep's `hydra.overrides.hydra`): the swept keys, and under Ray's launcher
    (`launcher`: its `_target_`) an absolute sweep directory, because a Ray worker runs in the directory
    `ray start` ran in; the others run their jobs in the launching directory."""
    overrides = [f"++hydra.job.env_set.{SWEPT_KEYS_ENV}={override_quoted(json.dumps(sorted(swept)))}"]
    if "hydra_ray_launcher" in launcher and not os.path.isabs(sweep_dir):
        overrides.append(f"hydra.sweep.dir={override_quoted(os.path.abspath(sweep_dir))}")
    return overrides


def override_quoted(text: str) -> str:
    """`text` as one quoted value in Hydra's override grammar: quotes escaped, and the backslashes just before
    a quote or the closing quote doubled (Hydra unescapes backslashes only there)."""
    return "'" + re.sub(r"(\\*)('|$)", lambda m: m.group(1) * 2 + ("\\'" if m.group(2) else ""), text) + "'"


def job_dirname(task_overrides: Sequence[str], argv: Sequence[str] | None = None, swept: set[str] | None = None,
                hydra_node=None) -> str:
    """`<swept overrides>` of a job's directory `<num>_<swept overrides>` (conf/tfhydra.yaml's hydra.sweep.subdir)."""
    swept = current_swept_keys(argv, hydra_node) if swept is None else swept
    chosen = [o for o in task_overrides if o.split("=", 1)[0] in swept] or list(task_overrides)
    return safe_name(",".join(chosen))


def safe_name(text: str) -> str:
    return _UNSAFE.sub("_", text)[:MAX_NAME]


def register_resolvers() -> None:
    from omegaconf import OmegaConf

    if not OmegaConf.has_resolver("tfhydra.job_dirname"):  # resolved in the job's process: its own config names it
        OmegaConf.register_new_resolver("tfhydra.job_dirname", lambda overrides, _root_: job_dirname(
            list(overrides), hydra_node=_root_.get("hydra")))


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
    (TensorFlow would otherwise give every job a thread pool as large as the machine). Under a cluster
    launcher each job gets the CPUs the launcher reserved for it (`launcher_cpus`): that many threads."""
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
    launcher = HydraConfig.get().launcher
    target = str(launcher.get("_target_", ""))
    if "submitit" in target:
        cpus = launcher.get("cpus_per_task")
    elif "hydra_ray_launcher" in target:
        cpus = OmegaConf.select(launcher, "ray.remote.num_cpus", default=None) or 1
    else:
        return None
    return max(1, int(cpus)) if isinstance(cpus, (int, float)) and cpus > 0 else None
