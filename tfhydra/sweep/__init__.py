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

The rest of the room (how its jobs run as processes is tfhydra/launch/'s):
- kind.py: which sweeper, which launcher, am I in a sweep, and the threads a job gets under each launcher;
- __main__.py: `python -m tfhydra.sweep` (tfhydra-sweep: summary, resume);
- callback.py: the Hydra callback tying a sweep together (swept keys, summary, MLflow parent run);
- checks.py: what the run plan checks in the `sweep` section (screen, then promote);
- preflight_checks.py: what the pre-flight checks of a `-m` command line (the jobs, the sweeper and launcher,
  screen-then-promote, a sweep run again into its directory);
- trial.py: one job of a sweep (HParams, failures recorded instead of raised, Optuna's trial);
- hparams.py: TensorBoard HParams records;
- search.py: tfhydra's Optuna search (hydra_plugins/tfhydra_optuna hands over); pruning.py: its Keras callback;
- stages.py: screen, then promote (`sweep.promote`, run by tfhydra's default sweeper, hydra_plugins/tfhydra_basic/);
- decide.py: `sweep.decide=true`, the screen (share of the data, epochs, how many promoted) chosen from the grid
  and the data;
- jobs.py: a sweep's jobs read back from their directories (ranked, merged, expected);
- rerun.py: a sweep run again into its directory (a job directory kept, continued or refused);
- summary.py and summary_render.py: summary.csv/.md/.png.
Nothing here imports TensorFlow: a sweep's launching process never needs it.
schemas.py: the `sweep:` section's type (dataclasses, named by conf/'s YAML; docs/design.md "Typed configs").
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable

from tfhydra.config.jobnames import (
    MAX_NAME,
    SWEPT_KEYS_ENV,
    current_swept_keys,
    job_dirname,
    recorded_swept_keys,
    safe_name,
    sweep_override_keys,
    swept_keys,
)
from tfhydra.platform.command import COMMAND_ENV, command_handover
from tfhydra.platform.runtime import available_cores
from tfhydra.sweep.kind import auto_threads, in_sweep, launcher_cpus, parallel_jobs

# The job-name helpers live in tfhydra/config/jobnames.py (the config's resolver names jobs) and the launchers'
# thread rules in kind.py: the sweep room re-exports them, as its modules and the tests import them from here.
__all__ = [
    "MAX_NAME",
    "SWEPT_KEYS_ENV",
    "auto_threads",
    "available_cores",
    "current_swept_keys",
    "handover_overrides",
    "in_sweep",
    "job_dirname",
    "launcher_cpus",
    "override_quoted",
    "parallel_jobs",
    "recorded_swept_keys",
    "safe_name",
    "sweep_override_keys",
    "swept_keys",
]


def handover_overrides(swept: Iterable[str], sweep_dir: str, launcher: str = "none") -> list[str]:
    """Hydra overrides that carry what each job must know about its sweep to every launcher (Hydra composes
        every job again from the sweep's `hydra.overrides.hydra`): the swept keys, the command line the user typed (a
    launcher's job runs in a process whose `sys.argv` is the launcher's), and under Ray's launcher
        (`launcher`: its kind, tfhydra/sweep/kind.py) an absolute sweep directory, because a Ray worker runs in the
        directory `ray start` ran in; the others run their jobs in the launching directory."""
    overrides = [f"++hydra.job.env_set.{SWEPT_KEYS_ENV}={override_quoted(json.dumps(sorted(swept)))}"]
    overrides.append(f"++hydra.job.env_set.{COMMAND_ENV}={override_quoted(command_handover())}")  # the `command`
    if launcher == "ray" and not os.path.isabs(sweep_dir):
        overrides.append(f"hydra.sweep.dir={override_quoted(os.path.abspath(sweep_dir))}")
    return overrides


def override_quoted(text: str) -> str:
    """`text` as one quoted value in Hydra's override grammar: quotes escaped, and the backslashes just before
    a quote or the closing quote doubled (Hydra unescapes backslashes only there)."""
    return "'" + re.sub(r"(\\*)('|$)", lambda m: m.group(1) * 2 + ("\\'" if m.group(2) else ""), text) + "'"
