"""Each task trains in-process on tiny data: its metrics in metrics.json's best and test blocks, its head in the
export, tfhydra-predict writing its outputs; and the one-line refusal of a label that does not fit the task."""

import csv
import json

import numpy as np
import pytest
import tensorflow as tf
from conftest import read_run_record

import tfhydra
from tfhydra.config.errors import ConfigError

QUICK = ["model=mlp", "model.units=[32]", "logging.histogram_freq=0", "data.batch_size=32", "optimizer.lr=0.01"]


def regression_csv(path, rows: int = 400):
    """y = 100 + 3a - 2b + noise (std about 3.6): far from 0 and of a scale a standardised target learns at once."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(rows, 3))
    y = 100 + 3 * x[:, 0] - 2 * x[:, 1] + rng.normal(scale=0.2, size=rows)
    write_csv(path, ["a", "b", "c", "price"], np.column_stack([x, y]))
    return x, y


def write_csv(path, header, rows) -> None:
    with open(path, "w", newline="") as file:
        table = csv.writer(file)
        table.writerow(header)
        table.writerows([[f"{v:.6g}" for v in row] for row in rows])


def test_regression_on_a_csv_learns_in_the_targets_units_and_predict_writes_them(compose_cfg, tmp_path):
    x, y = regression_csv(tmp_path / "reg.csv")
    cfg = compose_cfg(
        [
            "data=csv",
            f"data.path={tmp_path / 'reg.csv'}",
            "data.label=price",
            "task=regression",
            "task.standardize=true",
            "trainer.epochs=20",
            *QUICK,
        ]  # fmt: skip
    )
    assert cfg.trainer.monitor == "val_loss" and cfg.trainer.monitor_mode == "min" and cfg.trainer.loss == "mse"
    run = tmp_path / "run"
    tfhydra.run(cfg, run_dir=run)
    record = read_run_record(run)
    assert record["status"] == "completed" and record["task"] == {
        "name": "regression",
        "standardize": True,
        "headline": ["rmse", "r2"],
    }
    test = record["test"]["metrics"]
    assert {"loss", "rmse", "mae", "r2"} <= set(test) and {"val_rmse", "val_mae", "val_r2"} <= set(record["best"])
    # the summary leads with the task's headline, RMSE and R² (issue 55 item 4), the monitor's key kept
    summary = json.loads((run / "metrics.json").read_text())["summary"]
    assert list(summary["best"]) == ["epoch", "val_rmse", "val_r2", "val_loss"]
    assert list(summary["test"])[:2] == ["rmse", "r2"]
    assert test["rmse"] < 0.25 * y.std() and test["r2"] > 0.9, test  # std of the target: about 3.6
    head = record["data"]["head"]
    assert head["units"] == 1 and head["offset"][0] == pytest.approx(100, abs=1)  # fitted on the training rows
    assert record["compression"]["keras_test_accuracy"] is None  # no classes: no accuracy of the export

    # The served export takes the raw feature columns and answers in the target's units
    served = tf.saved_model.load(str(run / "export" / "saved_model"))
    outputs = served.signatures["serving_default"](inputs=tf.constant(x[:50], tf.float32))
    (predicted,) = (v.numpy() for v in outputs.values())
    assert predicted.shape == (50, 1) and np.abs(predicted[:, 0] - y[:50]).mean() < 0.25 * y.std()

    from tfhydra.predict.cli import main as predict

    write_csv(tmp_path / "new.csv", ["a", "b", "c"], x[:5])
    assert predict([str(run), str(tmp_path / "new.csv"), "--output", str(tmp_path / "out.csv")]) == 0
    rows = list(csv.reader(open(tmp_path / "out.csv")))
    assert rows[0] == ["input", "predicted_price"] and len(rows) == 6
    assert np.abs(np.array([float(r[1]) for r in rows[1:]]) - y[:5]).max() < 0.5 * y.std()


def test_a_numeric_target_without_task_regression_is_one_line_suggesting_it(compose_cfg, tmp_path):
    regression_csv(tmp_path / "reg.csv")
    cfg = compose_cfg(["data=csv", f"data.path={tmp_path / 'reg.csv'}", "data.label=price", "trainer.epochs=1", *QUICK])
    with pytest.raises(ConfigError, match=r"\(price column\): the labels are numbers .*use task=regression") as caught:
        tfhydra.run(cfg, run_dir=tmp_path / "run")
    assert "\n" not in str(caught.value) and "100." not in str(caught.value)
    assert not (tmp_path / "run" / "export").exists()


def test_binary_on_a_csv_trains_one_sigmoid_output_and_records_auc(compose_cfg, tmp_path):
    rng = np.random.default_rng(1)
    x = rng.normal(size=(300, 2))
    write_csv(tmp_path / "bin.csv", ["a", "b", "spam"], np.column_stack([x, (x[:, 0] + x[:, 1] > 0).astype(int)]))
    cfg = compose_cfg(
        [
            "data=csv",
            f"data.path={tmp_path / 'bin.csv'}",
            "data.label=spam",
            "task=binary",
            "trainer.epochs=8",
            *QUICK,
            "export.formats=[saved_model,tflite]",
        ]  # fmt: skip
    )
    tfhydra.run(cfg, run_dir=tmp_path / "run")
    record = read_run_record(tmp_path / "run")
    assert (
        record["task"] == {"name": "binary", "threshold": 0.5, "headline": ["auc", "accuracy"]}
        and record["monitor"] == "val_loss"  # a table's (conf/tables.yaml)
    )
    assert record["data"]["head"]["units"] == 1 and record["data"]["head"]["activation"] == "sigmoid"
    assert record["test"]["metrics"]["auc"] > 0.9 and record["best"]["val_accuracy"] > 0.8, record["test"]
    # The export's own figures: 0/1 agreement at 0.5 of the one sigmoid output, in Keras and in LiteRT
    figures = record["compression"]
    assert figures["keras_test_accuracy"] == pytest.approx(record["test"]["metrics"]["accuracy"], abs=1e-6)
    assert figures["artefacts"]["export/tflite/model.tflite"]["test_accuracy"] == figures["keras_test_accuracy"]

    from tfhydra.predict.cli import main as predict

    write_csv(tmp_path / "new.csv", ["a", "b"], [[2.0, 2.0], [-2.0, -2.0]])
    assert predict([str(tmp_path / "run"), str(tmp_path / "new.csv"), "--output", str(tmp_path / "out.jsonl")]) == 0
    lines = [json.loads(line) for line in open(tmp_path / "out.jsonl")]
    assert [line["class"] for line in lines] == ["1", "0"]
    assert lines[0]["probability"] > 0.5 > lines[1]["probability"]


def multi_hot_npz(path, rows: int = 320, labels: int = 3):
    """Each label lights its own quarter of an 8x8 image: a multi-hot y of shape (rows, labels)."""
    rng = np.random.default_rng(2)
    y = (rng.uniform(size=(rows, labels)) < 0.5).astype(np.uint8)
    x = rng.uniform(0, 0.3, size=(rows, 8, 8)).astype(np.float32)
    for k in range(labels):
        x[y[:, k] == 1, (k // 2) * 4 : (k // 2) * 4 + 4, (k % 2) * 4 : (k % 2) * 4 + 4] += 0.7
    np.savez(path, x_train=x, y_train=y)
    return x, y


def test_multilabel_on_an_npz_of_multi_hot_labels_records_auc_and_f1(compose_cfg, tmp_path):
    multi_hot_npz(tmp_path / "multi.npz")
    cfg = compose_cfg(
        [
            "data=npz",
            f"data.path={tmp_path / 'multi.npz'}",
            "data.x_test=null",
            "data.y_test=null",
            "task=multilabel",
            "trainer.epochs=10",
            *QUICK,
        ]  # fmt: skip
    )
    tfhydra.run(cfg, run_dir=tmp_path / "run")
    record = read_run_record(tmp_path / "run")
    assert record["task"]["name"] == "multilabel" and record["data"]["head"]["units"] == 3
    test = record["test"]["metrics"]
    assert {"auc", "f1", "binary_accuracy"} <= set(test) and test["auc"] > 0.9 and test["f1"] > 0.7, test


def test_multi_hot_labels_under_classification_are_one_line_naming_multilabel(compose_cfg, tmp_path):
    multi_hot_npz(tmp_path / "multi.npz")
    cfg = compose_cfg(["data=npz", f"data.path={tmp_path / 'multi.npz'}", "data.x_test=null", "data.y_test=null"])
    with pytest.raises(ConfigError, match=r"multi-hot rows of 3 labels .*use task=multilabel"):
        tfhydra.run(cfg, run_dir=tmp_path / "run")


@pytest.mark.parametrize("name", ["binary", "multilabel", "regression"])
def test_synthetic_data_fit_every_task(name, compose_cfg, tmp_path):
    cfg = compose_cfg(
        [
            "data=synthetic",
            "data.shape=[8,8,1]",
            "data.num_classes=3",
            "data.train_size=64",
            "data.val_size=32",
            "data.test_size=32",
            f"task={name}",
            "trainer.epochs=1",
            *QUICK,
        ]  # fmt: skip
    )
    tfhydra.run(cfg, run_dir=tmp_path / "run")
    record = read_run_record(tmp_path / "run")
    assert record["status"] == "completed" and record["task"]["name"] == name
    assert record["data"]["head"]["units"] == {"binary": 1, "multilabel": 3, "regression": 3}[name]
    assert set(record["test"]["metrics"]) >= {"binary": {"auc"}, "multilabel": {"f1"}, "regression": {"rmse"}}[name]


def test_several_csv_label_columns_are_several_targets_and_class_strings_refuse_regression(compose_cfg, tmp_path):
    rng = np.random.default_rng(3)
    x = rng.normal(size=(200, 2))
    write_csv(tmp_path / "two.csv", ["a", "b", "y1", "y2"], np.column_stack([x, x[:, 0] * 2, x[:, 1] - 1]))
    cfg = compose_cfg(
        [
            "data=csv",
            f"data.path={tmp_path / 'two.csv'}",
            "data.label=[y1,y2]",
            "task=regression",
            "trainer.epochs=2",
            *QUICK,
        ]  # fmt: skip
    )
    tfhydra.run(cfg, run_dir=tmp_path / "run")
    record = read_run_record(tmp_path / "run")
    assert record["data"]["class_names"] == ["y1", "y2"] and record["data"]["head"]["units"] == 2
    assert record["data"]["input_shape"] == [2]  # the label columns are not features

    with open(tmp_path / "animals.csv", "w") as file:
        file.write("a,animal\n" + "".join(f"{i},{'cat' if i % 2 else 'dog'}\n" for i in range(40)))
    cfg = compose_cfg(["data=csv", f"data.path={tmp_path / 'animals.csv'}", "data.label=animal", "task=regression"])
    with pytest.raises(ConfigError, match=r'\(animal column\): the labels are class names \(2 distinct, e.g. "cat"\)'):
        tfhydra.run(cfg, run_dir=tmp_path / "refused")


def test_a_source_that_reads_class_indices_only_is_one_line_under_another_task(compose_cfg, tmp_path):
    cfg = compose_cfg(["task=regression", "trainer.epochs=1"])  # digits: class indices only, for now
    with pytest.raises(ConfigError, match=r"^data=digits: it reads class indices only, and the task trains on numeric"):
        tfhydra.run(cfg, run_dir=tmp_path / "run")
