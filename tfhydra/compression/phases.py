"""Applying the run's scheme, starting from an earlier run's trained model (`compression.from_run`, and each
phase after the first) when there is one.

The phases themselves are planned in tfhydra/compression/plan.py and run in order by tfhydra/runner/job.py.
"""

from __future__ import annotations

import logging
from pathlib import Path

from omegaconf import DictConfig

from tfhydra.compression.plan import saved_run_config
from tfhydra.compression.schemes import build_scheme
from tfhydra.config.contracts import Compression, Phase
from tfhydra.config.errors import ConfigError, library_reason
from tfhydra.platform.keras_lib import keras
from tfhydra.record.rundir import RunPaths
from tfhydra.trust.hdf5 import checked_load

log = logging.getLogger("tfhydra")


def load_run_model(run: Path, model: keras.Model, spec, steps_per_epoch: int, own_phase: bool = False) -> keras.Model:
    """A completed run's trained model, built by code and filled from its weights file (nothing from the run runs).

    `model` is a fresh model of the same config (checked by `check_run` in the run plan); the run's own
    scheme wraps it so the weights file's variables line up, and that scheme's strip gives the model
    to continue from. `own_phase`: `run` is an earlier phase of the run being trained (`RunPaths.is_earlier_phase`).
    """
    saved = saved_run_config(run, own_phase)
    phase = Phase(steps_per_epoch, saved.trainer.epochs - saved.compression.start_epoch)
    earlier = build_scheme(saved.compression, model, spec, phase)
    paths = RunPaths(run)
    weights = paths.best_weights if paths.best_weights.is_file() else paths.last_weights
    try:  # the earlier run's file through the trust boundary's HDF5 reader first (tfhydra/trust/hdf5.py)
        checked_load(earlier.model, weights, key="compression.from_run")
    except (ValueError, OSError, KeyError) as error:
        raise ConfigError(
            "compression.from_run",
            str(run),
            "a run of this model and data config",
            f"its weights do not fit this model ({library_reason(error)})",
        ) from error
    scheme = saved.compression.get("name")
    log.info(
        "starting from %s (%s)",
        weights,
        f"trained with compression={scheme}" if scheme not in (None, "none") else "trained without compression",
    )
    return earlier.strip(earlier.model)


def compress_model(
    cfg_compression: DictConfig, model: keras.Model, spec, phase: Phase, paths: RunPaths | None = None
) -> Compression:
    """Start from `compression.from_run`'s trained model when given, then apply the scheme. `paths`: where this
    phase trains (a `from_run` that is an earlier phase of the same run is the run's own)."""
    if cfg_compression.get("from_run"):
        run = Path(cfg_compression.from_run)
        own = paths is not None and paths.is_earlier_phase(run)
        model = load_run_model(run, model, spec, phase.steps_per_epoch, own)
    return build_scheme(cfg_compression, model, spec, phase)
