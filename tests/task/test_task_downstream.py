"""What comes after training, per task (issue 44, item 5): tfhydra-evaluate on a regression's SavedModel and TFLite
file in the target's units and on a multi-label export, tfhydra-predict on both kinds of file, the notebook API
and `--help task`. Every figure is checked against numbers computed with numpy from the trained Keras model's own
predictions (export/keras/model.keras) on the split the command measured.

Compression, EMA, recovery and sweeps per task: tests/task/test_task_training_features.py."""

import csv
import json
import shutil

import numpy as np
import pytest
import tf_keras as keras
from conftest import read_run_record, run_cli
from shared_runs import copy_run, made_once
from test_task_runs import QUICK, multi_hot_npz, regression_csv

import tfhydra

EXPORTS = "export.formats=[saved_model,tflite,keras]"


def train(overrides, run_dir):
    """A run composed as `tfhydra-train` composes it (`tfhydra.compose` records the overrides, so evaluate and
    predict compose the same config again), and its record."""
    tfhydra.run(tfhydra.compose(overrides), run_dir=run_dir)
    record = read_run_record(run_dir)
    assert record["status"] == "completed", record.get("error")
    return record


def tflite_only(run_dir, where):
    """A copy of the run without its SavedModel: the commands then answer with its TFLite file (a run that exported
    TFLite only), which takes the model's inputs as the pipeline feeds them."""
    shutil.copytree(run_dir, where)
    shutil.rmtree(where / "export" / "saved_model")
    return where


def measured_split(run_dir, split="test"):
    """(the model's inputs, the labels, the raw examples as stored) of a split, read as the run read them."""
    from tfhydra.data.pipeline import build_datasets
    from tfhydra.evaluate import load_run_config
    from tfhydra.task.build import build_task

    cfg = load_run_config(run_dir, [])
    datasets = build_datasets(cfg.data, cfg.trainer.seed, task=build_task(cfg.task))
    batches = datasets.test if split == "test" else datasets.validation
    x, y = (np.concatenate(part) for part in zip(*((a.numpy(), b.numpy()) for a, b in batches), strict=True))
    raw, _ = datasets.serving.raw_test if split == "test" else datasets.serving.raw_validation  # (examples, labels)
    return x, y, np.asarray(raw)


def keras_outputs(run_dir, x):
    """The trained Keras model's outputs (a quantization-aware one is the `.h5` file, read in tfmot's scope)."""
    folder = run_dir / "export" / "keras"
    if (folder / "model.h5").is_file():
        import tensorflow_model_optimization as tfmot

        with tfmot.quantization.keras.quantize_scope():
            model = keras.models.load_model(str(folder / "model.h5"), compile=False)
    else:
        model = keras.models.load_model(str(folder / "model.keras"), compile=False, safe_mode=True)
    return model.predict(x, verbose=0)


def signature_outputs(run_dir, raw):
    """{signature: {output key: values}} of the run's SavedModel fed the stored examples (serve_raw) and the model's
    inputs (serve)."""
    import tensorflow as tf

    served = tf.saved_model.load(str(run_dir / "export" / "saved_model"))
    return {
        name: {k: v.numpy() for k, v in served.signatures[name](inputs=tf.constant(x)).items()}
        for name, x in (("serving_default", raw[0]), ("serve", raw[1]))
    }


def evaluated(run_dir, *extra):
    from tfhydra.evaluate import main as evaluate

    assert evaluate([str(run_dir), *extra]) == 0
    written = sorted((run_dir / "evaluations").glob("*.json"))[-1]
    return json.loads(written.read_text())


def regression(folder, *extra, rows: int = 240):
    """The overrides of a standardised regression on a CSV written in `folder` (y = 100 + 3a - 2b + noise)."""
    regression_csv(folder / "reg.csv", rows=rows)
    where = [f"data.path={folder / 'reg.csv'}", "data.label=price", "task.standardize=true"]
    return ["data=csv", *where, "task=regression", *QUICK, *extra]


def shared_regression(tmp_path_factory):
    """A standardised regression with EMA weights and every export, trained once per session (across xdist workers)
    and shared by the tests of evaluate and predict here and of EMA (test_task_training_features): its run directory
    and record. A test copies it (`copy_run`) before evaluate writes into it."""

    def make(run):
        train(regression(run.parent, "trainer.epochs=6", "trainer.ema.decay=0.9", EXPORTS, rows=400), run)

    run = made_once(tmp_path_factory, "task-regression-ema", make)
    return run, read_run_record(run)


@pytest.fixture(scope="session")
def regression_run(tmp_path_factory):
    return shared_regression(tmp_path_factory)


def rmse_mae(predicted, labels):
    error = np.asarray(predicted, np.float64).reshape(-1) - np.asarray(labels, np.float64).reshape(-1)
    return float(np.sqrt(np.mean(error**2))), float(np.mean(np.abs(error)))


@pytest.mark.slow
def test_evaluate_measures_a_regressions_savedmodel_and_tflite_file_in_the_targets_units(regression_run, tmp_path):
    shared, record = regression_run
    folder = tmp_path
    run = copy_run(shared, tmp_path / "run")
    x, y, raw = measured_split(run)
    rmse, mae = rmse_mae(keras_outputs(run, x), y)
    for outputs in signature_outputs(run, (raw.astype(np.float32), x)).values():  # named by the task
        assert list(outputs) == ["predictions"]
        np.testing.assert_allclose(outputs["predictions"], keras_outputs(run, x), rtol=1e-5)
    assert 95 < float(np.mean(y)) < 105 and rmse < 0.3 * float(np.std(y))  # the target's units: about 100, not 0

    saved = evaluated(run)
    assert saved["export"] == "saved_model" and saved["input"] == "raw" and saved["task"] == "regression"
    assert saved["metrics"]["rmse"] == pytest.approx(rmse, rel=1e-4) and saved["metrics"]["mae"] == pytest.approx(
        mae, rel=1e-4
    )
    assert saved["metrics"]["loss"] == pytest.approx(rmse**2, rel=1e-3)  # mse
    assert saved["metrics"]["rmse"] == pytest.approx(record["test"]["metrics"]["rmse"], rel=1e-4)

    lite = evaluated(tflite_only(run, folder / "lite"))
    assert lite["export"] == "tflite" and lite["input"] == "features"
    assert lite["metrics"]["rmse"] == pytest.approx(rmse, rel=1e-4) and lite["metrics"]["mae"] == pytest.approx(
        mae, rel=1e-4
    )
    r2 = 1 - np.sum((keras_outputs(run, x)[:, 0] - y[:, 0]) ** 2) / np.sum((y[:, 0] - y[:, 0].mean()) ** 2)
    assert lite["metrics"]["r2"] == pytest.approx(r2, abs=1e-4)

    # tfhydra-predict on the TFLite file: the model's inputs in, the target's units out, as the Keras model says
    from tfhydra.predict.cli import main as predict

    np.save(folder / "features.npy", x[:8])
    assert predict([str(folder / "lite"), str(folder / "features.npy"), "--output", str(folder / "out.csv")]) == 0
    rows = list(csv.reader(open(folder / "out.csv")))
    assert rows[0] == ["input", "predicted_price"] and len(rows) == 9
    predicted = np.array([float(r[1]) for r in rows[1:]])
    np.testing.assert_allclose(predicted, keras_outputs(run, x[:8])[:, 0], rtol=1e-5)


@pytest.fixture(scope="module")
def multilabel_run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("multilabel")
    multi_hot_npz(folder / "multi.npz")
    where = [f"data.path={folder / 'multi.npz'}", "data.x_test=null", "data.y_test=null"]
    named = ["data=npz", *where, "data.class_names=[red,green,blue]", "task=multilabel"]
    return folder, train([*named, "trainer.epochs=8", *QUICK, EXPORTS], folder / "run")


def macro_f1(predicted, labels):
    tp = np.sum(predicted * labels, axis=0)
    fp, fn = np.sum(predicted * (1 - labels), axis=0), np.sum((1 - predicted) * labels, axis=0)
    return float(np.mean(2 * tp / np.maximum(2 * tp + fp + fn, 1e-12)))


@pytest.mark.slow
def test_evaluate_and_predict_on_a_multilabel_export_give_its_metrics_and_labels(multilabel_run):
    folder, record = multilabel_run
    run = folder / "run"
    assert record["data"]["class_names"] == ["red", "green", "blue"]
    x, y, raw = measured_split(run)
    probabilities = keras_outputs(run, x)
    over = (probabilities >= 0.5).astype(np.float64)
    for outputs in signature_outputs(run, (raw, x)).values():  # named by the task, a column per label
        assert list(outputs) == ["probabilities"]
        np.testing.assert_allclose(outputs["probabilities"], probabilities, rtol=1e-5, atol=1e-6)

    for directory, export in ((run, "saved_model"), (tflite_only(run, folder / "lite"), "tflite")):
        result = evaluated(directory)
        assert result["export"] == export and result["task"] == "multilabel"
        figures = result["metrics"]
        assert figures["binary_accuracy"] == pytest.approx(float(np.mean(over == y)), abs=1e-6)
        assert figures["f1"] == pytest.approx(macro_f1(over, y), abs=1e-5)
        clipped = np.clip(probabilities, 1e-7, 1 - 1e-7)
        crossentropy = -np.mean(y * np.log(clipped) + (1 - y) * np.log(1 - clipped))
        assert figures["loss"] == pytest.approx(crossentropy, rel=1e-3) and figures["auc"] > 0.9

    # tfhydra-predict on the SavedModel: the images as stored in, every label's probability and those over 0.5 out
    from tfhydra.predict.cli import main as predict

    np.save(folder / "images.npy", raw[:6])
    assert predict([str(run), str(folder / "images.npy"), "--output", str(folder / "out.jsonl")]) == 0
    lines = [json.loads(line) for line in open(folder / "out.jsonl")]
    assert len(lines) == 6
    for line, expected in zip(lines, probabilities[:6], strict=True):
        assert list(line["probabilities"]) == ["red", "green", "blue"]
        np.testing.assert_allclose(list(line["probabilities"].values()), expected, rtol=1e-4, atol=1e-6)
        assert line["labels"] == [n for n, p in zip(["red", "green", "blue"], expected, strict=True) if p >= 0.5]


@pytest.mark.slow
def test_the_notebook_api_returns_a_regressions_metrics(tmp_path):
    regression_csv(tmp_path / "reg.csv", rows=200)
    result = tfhydra.train(
        [
            "data=csv",
            f"data.path={tmp_path / 'reg.csv'}",
            "data.label=price",
            "task=regression",
            "trainer.epochs=3",
            *QUICK,
        ],
        run_dir=tmp_path / "run",
    )
    assert result.status == "completed" and result.record.monitor == "val_loss"
    figures = result.metrics
    assert {"val_loss", "val_rmse", "val_mae", "val_r2"} <= set(figures)
    assert figures["val_rmse"] ** 2 == pytest.approx(figures["val_loss"], rel=1e-4)  # mse: the RMSE squared
    best = min(result.history, key=lambda epoch: epoch["val_loss"])  # min: the task's monitor mode
    assert result.best_epoch == result.history.index(best) + 1 and figures["val_loss"] == best["val_loss"]


def test_help_task_lists_the_task_options_and_the_chosen_tasks_keys():
    result = run_cli("--help", "task", "task=regression")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    options = [line.split()[0] for line in lines if line.startswith("    ")]
    assert options == ["binary", "classification", "multilabel", "regression"]
    assert next(line for line in lines if line.startswith("    regression")).split()[1] == "(chosen)"
    keys = {line.split()[0]: line.split()[1:3] for line in lines if line.startswith("task.")}
    assert keys["task.standardize"] == ["bool", "true"] and keys["task.monitor_mode"] == ["string", "min"]
    assert keys["task.loss"] == ["string", "mse"] and "task.threshold" not in keys
    binary = run_cli("--help", "task", "task=binary").stdout
    assert "task.threshold     float   0.5" in binary and "binary (chosen)" in binary
