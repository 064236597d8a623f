"""Starting a scheme from an earlier run's trained model (`compression.from_run`, and each phase after the first).

The phases themselves are planned in tfhydra/compression/plan.py and run in order by tfhydra/job.py.
"""
from __future__ import annotations

import logging
from pathlib import Path

import tf_keras as keras

from tfhydra.compression.plan import saved_run_config
from tfhydra.compression.schemes import build_scheme
from tfhydra.contracts import Phase
from tfhydra.errors import ConfigError
from tfhydra.rundir import RunPaths

log = logging.getLogger("tfhydra")


def load_run_model(run: Path, model: keras.Model, spec, steps_per_epoch: int) -> keras.Model:
    """A completed run's trained model, built by code and filled from its weights file (nothing from the run runs).

    `model` is a fresh model of the same config (checked by `check_run` in the run plan); the run's own
    scheme wraps it so the weights file's variables line up, and that scheme's strip gives the model
    to continue from.
    """
    saved = saved_run_config(run)
    phase = Phase(steps_per_epoch, saved.trainer.epochs - saved.compression.get("start_epoch", 0))
    earlier = build_scheme(saved.compression, model, spec, phase)
    paths = RunPaths(run)
    weights = paths.best_weights if paths.best_weights.is_file() else paths.last_weights
    try:
        earlier.model.load_weights(str(weights))
    except (ValueError, OSError, KeyError) as error:
        raise ConfigError("compression.from_run", str(run), "a run of this model and data config",
                          f"its weights do not fit this model ({str(error).splitlines()[0]})") from error
    log.info("starting from %s (%s)", weights, saved.compression.get("name"))
    return earlier.strip(earlier.model)
