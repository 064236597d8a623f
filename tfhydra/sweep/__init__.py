"""Multirun sweeps: what a sweep is, and what a job needs to know about its sweep.

The room (how its jobs run as processes is tfhydra/launch/'s):
- handover.py: a job's directory name and what each job must know about its sweep, carried to every launcher;
- kind.py: which sweeper, which launcher, am I in a sweep, and the threads a job gets under each launcher;
- __main__.py: `python -m tfhydra.sweep` (tfhydra-sweep: summary, resume);
- callback.py: the Hydra callback tying a sweep together (swept keys, summary, MLflow parent run);
- checks.py: what the run plan checks in the `sweep` section (screen, then promote);
- preflight_checks.py: what the pre-flight checks of a `-m` command line (the jobs, the sweeper and launcher,
  screen-then-promote, a sweep run again into its directory);
- trial.py: one job of a sweep (HParams, failures recorded instead of raised, Optuna's trial);
- hparams.py: TensorBoard HParams records;
- search.py: tfhydra's Optuna search (hydra_plugins/tfhydra_optuna hands over); pruning.py: its Keras callback;
- folds.py: k-fold as a sweep (`sweep.folds=K`: `data.fold` swept by tfhydra's default sweeper);
- stages.py: screen, then promote (`sweep.promote`, run by tfhydra's default sweeper, hydra_plugins/tfhydra_basic/);
- decide.py: `sweep.decide=true`, the screen (share of the data, epochs, how many promoted) chosen from the grid
  and the data;
- jobs.py: a sweep's jobs read back from their directories (ranked, merged, expected);
- rerun.py: a sweep run again into its directory (a job directory kept, continued or refused);
- summary.py and summary_render.py: summary.csv/.md/.png.
Nothing here imports TensorFlow: a sweep's launching process never needs it.

This face hands on the names a job asks of its sweep (the job-name helpers of tfhydra/config/jobnames.py, the
launchers' thread rules of kind.py, the handover); tfhydra's own modules import them from those modules.
schemas.py: the `sweep:` section's type (dataclasses named by conf/'s YAML; docs/design.md
"Typed configs").
"""

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
from tfhydra.platform.runtime import available_cores
from tfhydra.sweep.handover import handover_overrides, override_quoted
from tfhydra.sweep.kind import auto_threads, in_sweep, launcher_cpus, parallel_jobs

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
