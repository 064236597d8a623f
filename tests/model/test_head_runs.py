"""The documented own-model builder (docs/models.md: any body ended by `task_head(spec)`) trains every task on
the same small table, and `task.standardize` applies to a user's model that ends in a Dense of its own: its
figures, its record and its export are in the targets' units (issue 55, item 3). In-process runs, seconds each."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from conftest import read_run_record

import tfhydra

QUICK = ["data.batch_size=32", "optimizer.lr=0.01", "logging.histogram_freq=0", "trainer.epochs=8"]


def labels_for(task: str, x: np.ndarray) -> np.ndarray:
    """One table's labels for each task, all learnable from its first three features."""
    if task == "classification":
        return np.argmax(x[:, :3], axis=1)
    if task == "binary":
        return (x[:, 0] + x[:, 1] > 0).astype(np.int64)
    if task == "multilabel":
        return (x[:, :3] > 0).astype(np.int64)
    return 100 + 3 * x[:, 0] - 2 * x[:, 1]  # far from 0: a model that is not scaled back misses by about 100


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    """(folder, features): 320 rows of 6 normal features, 80 of them the test split; one npz per task beside."""
    folder = tmp_path_factory.mktemp("table")
    x = np.random.default_rng(0).normal(size=(320, 6)).astype(np.float32)
    for task in ("classification", "binary", "multilabel", "regression"):
        y = labels_for(task, x)
        np.savez(folder / f"{task}.npz", x_train=x[:240], y_train=y[:240], x_test=x[240:], y_test=y[240:])
    return folder, x


# the task's monitor on the validation split, and the least it reaches when the head fits (chance: 1/3, 0.5, 0.5)
LEARNT = {
    "classification": ("val_accuracy", 0.7),
    "binary": ("val_auc", 0.9),
    "multilabel": ("val_auc", 0.85),
    "regression": ("val_r2", 0.8),
}


@pytest.mark.parametrize("task", list(LEARNT))
def test_the_documented_builder_trains_every_task(task, table, compose_cfg, tmp_path):
    folder, _ = table
    overrides = [f"task={task}", "data=npz", f"data.path={folder / task}.npz", *QUICK]
    overrides += ["task.standardize=true"] if task == "regression" else []
    overrides += ["export.formats=[]"]  # what the head trains is the question here
    cfg = compose_cfg(["~model", "+model._target_=user_code.build_headed_model", *overrides])
    tfhydra.run(cfg, run_dir=tmp_path / "run")
    record = read_run_record(tmp_path / "run")
    monitor, least = LEARNT[task]
    assert record["status"] == "completed" and record["best"][monitor] > least, record["best"]


def test_task_standardize_scales_a_users_own_model_back_to_the_targets_units(table, compose_cfg, tmp_path):
    """`user_code.build_linear_model` ends in `Dense(spec.outputs)`, no task_head: tfhydra appends the scaling, so
    the network learns unit-scale values and the metrics, the record and the export are in the targets' units."""
    folder, x = table
    y = labels_for("regression", x)
    overrides = ["task=regression", "task.standardize=true", "data=npz", f"data.path={folder}/regression.npz"]
    cfg = compose_cfg(["~model", "+model._target_=user_code.build_linear_model", *overrides, *QUICK])
    run = tmp_path / "run"
    tfhydra.run(cfg, run_dir=run)
    record = read_run_record(run)
    assert record["status"] == "completed" and record["model"] == "linear"
    head = record["data"]["head"]
    assert head["offset"][0] == pytest.approx(y[:240].mean(), abs=1.0)  # the training split's own mean, near 100
    test = record["test"]["metrics"]
    assert test["rmse"] < 0.3 * y.std() and test["r2"] > 0.8, test  # y's std is about 3.6: the targets' units

    served = tf.saved_model.load(str(run / "export" / "saved_model"))
    (predicted,) = (v.numpy() for v in served.signatures["serving_default"](inputs=tf.constant(x[240:])).values())
    assert predicted.shape == (80, 1) and np.abs(predicted[:, 0] - y[240:]).mean() < 0.3 * y.std()
