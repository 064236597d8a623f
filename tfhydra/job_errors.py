"""What stops a run's training, said in one line: a TensorFlow runtime error (the input pipeline's or the
model's), and a run directory that cannot be written (a full disk, an unwritable checkpoints/)."""
from __future__ import annotations

import contextlib
from pathlib import Path

import tensorflow as tf
from omegaconf import DictConfig

from tfhydra.errors import ConfigError, clip, first_line, write_failure
from tfhydra.lifecycle import resume_command
from tfhydra.rundir import RunPaths


@contextlib.contextmanager
def one_line_tensorflow_errors(cfg: DictConfig):
    """A TensorFlow runtime error while training (an example of another shape deep in a file, a record that
    does not decode) is one line: the first line of TensorFlow's message, and whether the input pipeline
    (IteratorGetNext) or the model raised it. The record says failed; HYDRA_FULL_ERROR=1 keeps the traceback."""
    try:
        yield
    except tf.errors.OpError as error:
        text, reason = str(getattr(error, "message", None) or error), first_line(error)
        if "IteratorGetNext" in text or "iterator" in text.lower():
            raise ConfigError("data", cfg.data.get("name"), "examples the source decodes into one shape and dtype "
                              "(docs/data.md)", f"the input pipeline failed while training ({type(error).__name__}: "
                              f"{clip(reason, 240)})") from error
        raise ConfigError("model", cfg.model.get("name") or cfg.model.get("_target_"), "a model that runs on these "
                          "examples", f"training failed in TensorFlow ({type(error).__name__}: {clip(reason, 240)})"
                          ) from error


@contextlib.contextmanager
def run_directory_writes(paths: RunPaths, kept: str):
    """A full disk or an unwritable directory is one line naming the file and the OS's reason, never the model's
    fault nor a traceback: while training (a checkpoint, history.json, best.weights.h5, TensorBoard's events) it
    costs the steps since the last save (`kept`: the state saved last), after it no training (the trained state);
    the same command finishes the run. The record says failed, with that line. Only files in the run directory
    (and a worker's checkpoints/) count: a data file or a user's own file elsewhere is not the run's to explain."""
    try:
        yield
    except (OSError, tf.errors.OpError) as error:
        where, reason = write_failure(error, paths.root) or (None, None)
        if where is None or not any(Path(where).absolute().is_relative_to(d.absolute())
                                    for d in (paths.root, paths.checkpoints)):
            raise  # TensorFlow failing for another reason (one_line_tensorflow_errors says which), or not our file
        raise ConfigError(where, None, f"a writable run directory with free space ({kept} is kept in "
                          f"{paths.checkpoints}; finish the run with: {resume_command(paths.root)})",
                          f"cannot write it ({reason})") from error
