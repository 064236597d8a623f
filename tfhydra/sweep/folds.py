"""k-fold as a sweep: `python train.py -m sweep.folds=5 optimizer.lr=1e-3,1e-4` runs every setting once per fold.

tfhydra's default sweeper (hydra_plugins/tfhydra_basic/) adds `data.folds=K data.fold=0,...,K-1` to the command's
overrides, so Hydra's basic sweeper expands them as any swept key: job numbers, directories
(`3_optimizer.lr=0.0001,data.fold=1`), the summary's expected jobs and the HParams domain all come from the same
expansion. Each job holds out fold `data.fold` of what the test split leaves as its validation split
(tfhydra/data/splits.py); the summary groups the jobs that differ only by `data.fold` (as by `trainer.seed`) and
ranks the settings by their fold mean (tfhydra/sweep/summary.py). What the command line may combine with it is the
pre-flight's (tfhydra/sweep/preflight_checks.py `check_folds_command`). No TensorFlow.
"""

from __future__ import annotations

from typing import Any

from omegaconf import DictConfig

from tfhydra.config.schema import is_int

KEY = "sweep.folds"
FOLD, FOLDS = "data.fold", "data.folds"  # the keys each job gets (conf/tfhydra.yaml's data section)
# The most folds a sweep takes: each fold is a job and its `data.fold` value is written out before anything runs,
# so a drawn 2**63 would be a list no machine holds; 100 is past any k-fold in use (leave-one-out is not a sweep).
MAX_FOLDS = 100


def _folds(value: Any) -> int | None:
    return int(value) if is_int(value) and 2 <= value <= MAX_FOLDS else None


def folds_of(cfg: Any) -> int | None:
    """`sweep.folds` of a config (a DictConfig, or multirun.yaml read as plain data: another type reads as unset)."""
    sweep = cfg.get("sweep") if isinstance(cfg, (dict, DictConfig)) else None
    folds = sweep.get(KEY.split(".")[1]) if isinstance(sweep, (dict, DictConfig)) else None
    return _folds(folds)


def fold_overrides(folds: int | None) -> list[str]:
    """What each job of a k-fold sweep adds to its setting's overrides, `data.fold` as a sweep; [] without folds."""
    if folds is None:
        return []
    return [f"{FOLDS}={folds}", f"{FOLD}={','.join(str(i) for i in range(folds))}"]


def command_folds(parsed) -> int | None:
    """The value of a fixed `sweep.folds=K` on a parsed command line (the pre-flight expands the jobs before it has
    composed a config); None when absent or not an integer in [2, MAX_FOLDS] (the schema's rule then names it)."""
    for override in parsed:
        if override.get_key_element().lstrip("+~") == KEY and not override.is_sweep_override():
            return _folds(override.value())
    return None
