"""Per-label figures of a multi-label run (Task.per_label): each label's ROC AUC and F1 at task.threshold, measured
once after training on the kept weights, on validation (`best.per_label`) and on test (`test.per_label`), and equal
to scikit-learn's on the exported model's own predictions; the other tasks have none."""

import numpy as np
import pytest
import tensorflow as tf
from conftest import read_run_record
from sklearn.metrics import f1_score, roc_auc_score

import tfhydra
from tfhydra.task.base import TASKS
from tfhydra.task.multilabel import Multilabel

NAMES = ["cat", "dog", "bird", "rare"]


def split(rng, rows: int, rare: bool):
    """Labels cat, dog, bird each light a quarter of an 8x8 image, blurred by noise so that neither AUC nor F1 is
    perfect; `rare` lights nothing and is present in training and validation only (absent from test)."""
    y = (rng.uniform(size=(rows, 4)) < 0.4).astype(np.uint8)
    y[:, 3] = (rng.uniform(size=rows) < 0.2) if rare else 0
    x = rng.uniform(0, 0.6, size=(rows, 8, 8)).astype(np.float32)
    for k in range(3):
        x[y[:, k] == 1, (k // 2) * 4 : (k // 2) * 4 + 4, (k % 2) * 4 : (k % 2) * 4 + 4] += 0.25
    return x, y


@pytest.mark.slow
def test_per_label_auc_and_f1_are_scikit_learns_on_the_models_predictions(compose_cfg, tmp_path):
    rng = np.random.default_rng(3)
    (x_train, y_train), (x_val, y_val), (x_test, y_test) = (split(rng, n, r) for n, r in ((256, 1), (96, 1), (96, 0)))
    np.savez(tmp_path / "tags.npz", **dict(x_train=x_train, y_train=y_train, x_val=x_val, y_val=y_val),
             **dict(x_test=x_test, y_test=y_test))  # fmt: skip
    cfg = compose_cfg(
        [
            "data=npz",
            f"data.path={tmp_path / 'tags.npz'}",
            "data.x_val=x_val",
            "data.y_val=y_val",
            f"data.class_names=[{','.join(NAMES)}]",
            "task=multilabel",
            "task.threshold=0.4",
            "model=mlp",
            "model.units=[16]",
            "trainer.epochs=3",
            "data.batch_size=32",
            "optimizer.lr=0.01",
            "logging.histogram_freq=0",
        ]
    )
    tfhydra.run(cfg, run_dir=tmp_path / "run")
    record = read_run_record(tmp_path / "run")
    assert record["status"] == "completed" and record["exported"]["reason"] is None
    served = tf.saved_model.load(str(tmp_path / "run" / "export" / "saved_model")).signatures["serving_default"]
    for block, x, y in ((record["best"], x_val, y_val), (record["test"], x_test, y_test)):
        (outputs,) = (v.numpy() for v in served(inputs=tf.constant(x[..., None])).values())
        per_label = block["per_label"]
        assert list(per_label) == NAMES and all(set(f) == {"auc", "f1"} for f in per_label.values())
        for i, name in enumerate(NAMES):
            predicted = outputs[:, i] >= 0.4  # task.threshold: at or over predicts the label
            assert per_label[name]["f1"] == pytest.approx(f1_score(y[:, i], predicted, zero_division=0), abs=1e-12)
            if y[:, i].any():
                assert per_label[name]["auc"] == pytest.approx(roc_auc_score(y[:, i], outputs[:, i]), abs=1e-12)
        learnt = [per_label[n]["auc"] for n in NAMES[:3]]
        assert all(0.6 < auc < 1.0 for auc in learnt), per_label  # neither chance nor perfect: a real comparison
    assert record["test"]["per_label"]["rare"] == {"auc": None, "f1": 0.0}  # absent from test: no ROC curve
    assert record["best"]["per_label"]["rare"]["auc"] is not None
    assert set(record["test"]["metrics"]) == {"loss", "auc", "f1", "binary_accuracy"}  # the logs stay scalars
    defined = [record["test"]["per_label"][n]["auc"] for n in NAMES[:3]]  # the test AUC leaves the absent label out
    assert record["test"]["metrics"]["auc"] == pytest.approx(np.mean(defined), abs=0.01)  # 200 thresholds vs exact


def test_the_averaged_auc_leaves_out_a_label_the_split_shows_one_way_only():
    """Keras counts a label with no ROC curve as 0 (a quarter off with one of four absent); with every label
    defined the figure is Keras' own, bit for bit."""
    import tf_keras as keras

    from tfhydra.task.metrics import DefinedLabelsAUC

    rng = np.random.default_rng(0)
    labels = (rng.uniform(size=(200, 4)) < 0.4).astype(np.float32)
    outputs = np.clip(labels * 0.3 + rng.uniform(size=(200, 4)) * 0.7, 0, 1).astype(np.float32)
    for absent in (np.zeros(200), np.ones(200)):  # never present, always present
        labels[:, 3] = absent
        ours, keras_own = DefinedLabelsAUC(multi_label=True), keras.metrics.AUC(multi_label=True)
        ours.update_state(labels, outputs), keras_own.update_state(labels, outputs)
        exact = np.mean([roc_auc_score(labels[:, i], outputs[:, i]) for i in range(3)])
        assert float(ours.result()) == pytest.approx(exact, abs=2e-3)
        assert float(keras_own.result()) == pytest.approx(float(ours.result()) * 3 / 4, abs=1e-6)
    labels[:, 3] = rng.uniform(size=200) < 0.5
    ours, keras_own = DefinedLabelsAUC(multi_label=True), keras.metrics.AUC(multi_label=True)
    ours.update_state(labels, outputs), keras_own.update_state(labels, outputs)
    assert float(ours.result()) == float(keras_own.result())


def test_a_label_the_training_split_shows_one_way_only_is_a_warning_and_recorded(caplog):
    from tfhydra.config.contracts import DataSpec

    spec = DataSpec((4,), 3, ("cat", "dog", "rare"), 4, 2)
    task = Multilabel(threshold=0.5)
    with caplog.at_level("WARNING", logger="tfhydra"):
        task.head(spec, np.array([[1, 0, 0], [0, 1, 0], [1, 1, 0], [0, 0, 0]], np.float32))
    assert "task=multilabel: label(s) rare is in every training example or in none" in caplog.text
    assert task.record()["undefined_in_training"] == ["rare"]
    assert "undefined_in_training" not in Multilabel(threshold=0.5).record()


def test_ties_count_half_and_only_multilabel_has_per_label_figures():
    task = Multilabel(threshold=0.5)
    labels = np.array([[1], [0], [1], [0], [1]])
    outputs = np.array([[0.9], [0.5], [0.5], [0.1], [0.3]], np.float32)
    figures = task.per_label(labels, outputs, ("a",))["a"]
    assert figures["auc"] == pytest.approx(roc_auc_score(labels[:, 0], outputs[:, 0])) == pytest.approx(4.5 / 6)
    assert figures["f1"] == pytest.approx(f1_score(labels[:, 0], outputs[:, 0] >= 0.5))  # 0.5 is "at or over"
    from omegaconf import OmegaConf

    others = {n: TASKS.get(n)(OmegaConf.create({"name": n})) for n in ("classification", "binary", "regression")}
    assert all(not t.per_label_metrics and t.per_label(labels, outputs, ("a",)) is None for t in others.values())
