"""The weights a run keeps between attempts and exports (how a run starts is tfhydra/record/resume.py's): the best
epoch's weights restored before the export (or the last epoch's, said in the record, when they cannot be read), and the
last epoch's weights of a run that ended training in an earlier attempt."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import tensorflow as tf

from tfhydra.config.errors import library_reason
from tfhydra.platform.keras_lib import keras
from tfhydra.platform.terminal import figure
from tfhydra.record.run_record import RunRecord
from tfhydra.record.rundir import RunPaths
from tfhydra.trust.hdf5 import checked_weights, weight_shapes

log = logging.getLogger("tfhydra")


def restore_best(model: keras.Model, paths: RunPaths, strategy: tf.distribute.Strategy, record: RunRecord) -> dict:
    """Export the best epoch's weights, not the last one's; the last ones when the best file is missing or damaged.
    Returns the record's `exported` {epoch, weights, reason}: which epoch the export is, and why not the best."""
    best, best_epoch, last_epoch = (
        paths.best_weights,
        (record.best or {}).get("epoch"),
        (record.final or {}).get("epoch"),
    )
    name = best.name if paths.checkpoints_root else paths.relative(best)  # a non-chief worker's: outside its root
    if best.exists():
        try:
            load_weights(model, best, strategy)
            return {"epoch": best_epoch, "weights": name, "reason": None}
        except (OSError, ValueError, KeyError) as error:
            reason = f"{name} cannot be read ({library_reason(error, 200)})"  # Keras 3 says why after a colon
            load_weights(model, paths.last_weights, strategy)  # the best file may have been read in part
    else:
        reason = f"{name} was never written (no epoch was saved as the best by {record.monitor})"
    if best_epoch != last_epoch or best.exists():
        log.warning(
            "%s: exporting the last epoch's weights (epoch %s) instead of the best epoch's (epoch %s)",
            reason,
            last_epoch,
            best_epoch,
        )
    last = paths.last_weights.name if paths.checkpoints_root else paths.relative(paths.last_weights)
    return {"epoch": last_epoch, "weights": last, "reason": reason}


def load_last_weights(model: keras.Model, paths: RunPaths, strategy: tf.distribute.Strategy) -> bool:
    """The trained model of an attempt killed after training; False when last.weights.h5 is damaged, so the
    loop restores the same weights from the resumable state (kept until the record is final) instead."""
    try:
        load_weights(model, paths.last_weights, strategy)
        return True
    except (OSError, ValueError, KeyError) as error:
        log.warning(
            "%s cannot be read (%s): restoring the trained model from %s",
            paths.last_weights,
            library_reason(error, 160),
            paths.state,
        )
        return False


def load_weights(model: keras.Model, path: Path, strategy: tf.distribute.Strategy) -> None:
    """The run's own weights file into `model`, after the trust boundary's HDF5 reader (tfhydra/trust/hdf5.py): a run
    directory may have been written by anyone, so a file that stores bytes elsewhere or declares arrays this model
    does not have is one line (UnsafeWeights), not a fallback; an unreadable one is an OSError, which callers fall
    back from."""
    checked_weights(path, weight_shapes(model))
    if not tf.distribute.has_strategy() and strategy is tf.distribute.get_strategy():
        model.load_weights(str(path))
        return
    # Mirrored variables cannot be assigned from the .h5 file directly: read it into a plain copy, then layer by
    # layer (the .h5 holds the layers' weights; a model class's own variables, such as a metric its train_step
    # updates, are not in it nor in the copy, which clone_model makes of the layers only).
    copy = keras.models.clone_model(model)
    copy.load_weights(str(path))
    for layer, loaded in zip(model.layers, copy.layers, strict=True):
        layer.set_weights(loaded.get_weights())


def measure_test(
    model: keras.Model, datasets, exported: dict, ema: bool, scheme: str, validation_steps: int | None = None, task=None
) -> dict | None:
    """The record's `test` block: the kept weights (restored best epoch, EMA averages when on, the compressed
    model of the last phase) measured once on the test split; None when the run has none. The `task`'s
    `exact_metrics` (binary's AUC) are measured exactly on the test outputs in place of Keras' approximation,
    which the block keeps under `keras_figures`.

    Called after training and after the best weights are restored, with no callback: nothing that chooses
    (best epoch, early stopping, recovery, a pruner, a sweep) has seen or will see these figures.
    `validation_steps` (trainer.validation_steps, a debugging cap) caps the test batches too."""
    if datasets.test is None:
        return None
    figures = model.evaluate(datasets.test, verbose=0, return_dict=True)
    examples = datasets.spec.test_size
    if validation_steps:
        examples = min(examples, validation_steps * datasets.batch_size)
    block = {
        "split": "test",
        "examples": examples,
        "metrics": {k: float(v) for k, v in figures.items()},
        "weights": {"epoch": exported.get("epoch"), "file": exported.get("weights"), "ema": ema, "compression": scheme},
    }
    if task is not None and task.exact_metrics:
        test = datasets.test.take(validation_steps) if validation_steps else datasets.test
        exact = {k: v for k, v in task.exact_figures(*labels_and_outputs(model, test)).items() if v is not None}
        block["keras_figures"] = {k: block["metrics"][k] for k in exact if k in block["metrics"]}
        block["metrics"].update(exact)
    log.info(
        "test (%d examples, measured once on the exported weights): %s",
        examples,
        ", ".join(f"{k}={figure(v)}" for k, v in block["metrics"].items()),
    )
    return block


def measure_per_label(model: keras.Model, datasets, task) -> tuple[dict | None, dict | None]:
    """(validation, test) per-label figures of the kept weights (`Task.per_label`: the record's `best.per_label`
    and `test.per_label`), each split read once more after training; (None, None) for a task without them. Like
    `measure_test`, measured after the choices were made: nothing reads them to choose."""
    if not task.per_label_metrics:
        return None, None
    names = tuple(datasets.spec.class_names)
    figures = [
        task.per_label(*labels_and_outputs(model, split), names) if split is not None else None
        for split in (datasets.validation, datasets.test)
    ]
    for split, block in zip(("validation", "test"), figures, strict=True):
        if block:
            log.info("%s per label: %s", split, "; ".join(f"{n} {said(f)}" for n, f in block.items()))
    return figures[0], figures[1]


def labels_and_outputs(model: keras.Model, dataset) -> tuple:
    """The labels and the model's outputs (float32) of every batch of `dataset`, in its order."""
    labels, outputs = [], []
    for batch in dataset:
        labels.append(np.asarray(batch[1]))
        outputs.append(np.asarray(model(batch[0], training=False), dtype=np.float32))
    return np.concatenate(labels), np.concatenate(outputs)


def said(figures: dict) -> str:
    return " ".join(f"{k}={'n/a' if v is None else figure(v)}" for k, v in figures.items())
