"""Binary's test AUC is exact (Task.exact_figures, tfhydra/task/ranking.py): Keras' AUC metric, which updates per
batch, approximates the ROC AUC on 200 evenly spaced thresholds, and a model whose probabilities crowd near 0 and 1
puts most test examples into its two end buckets. The record's `test.metrics.auc` is scikit-learn's figure on the
kept weights' outputs, and Keras' own stays beside it under `keras_figures`; the other tasks measure none."""

import numpy as np
import pytest
import tensorflow as tf
from omegaconf import OmegaConf
from sklearn.metrics import roc_auc_score

from tfhydra.config.contracts import DataSpec
from tfhydra.data.pipeline import Datasets
from tfhydra.platform.keras_lib import keras
from tfhydra.task.base import TASKS
from tfhydra.task.ranking import roc_auc
from tfhydra.trainer.weights import measure_test


def crowded_scores(rows: int = 120, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """0/1 labels and logits whose sigmoids lie within 0.005 of 0 or 1 for most rows, ordered imperfectly."""
    rng = np.random.default_rng(seed)
    labels = (rng.uniform(size=rows) < 0.4).astype(np.float32)
    logits = np.where(labels == 1, 9.0, -9.0) + rng.normal(0, 9.0, size=rows)
    return labels, logits.astype(np.float32)


def test_the_rank_auc_is_scikit_learns_with_ties_counted_half():
    labels, logits = crowded_scores()
    for scores in (logits, np.round(logits), 1 / (1 + np.exp(-logits.astype(np.float64)))):
        assert roc_auc(labels == 1, scores) == pytest.approx(roc_auc_score(labels, scores), abs=1e-12)
    assert roc_auc(np.ones(4, bool), np.arange(4.0)) is None and roc_auc(np.zeros(4, bool), np.arange(4.0)) is None


def test_only_binary_measures_its_auc_exactly():
    labels, logits = crowded_scores()
    tasks = {n: TASKS.get(n)(OmegaConf.create({"name": n})) for n in ("binary", "classification", "regression")}
    binary = tasks.pop("binary")
    assert binary.exact_metrics == ("auc",)
    figures = binary.exact_figures(labels.reshape(-1, 1), logits.reshape(-1, 1))
    assert figures["auc"] == pytest.approx(roc_auc_score(labels, logits), abs=1e-12)
    assert binary.exact_figures(np.ones((3, 1)), np.zeros((3, 1))) == {"auc": None}  # one class: undefined
    assert all(not t.exact_metrics and t.exact_figures(labels, logits) == {} for t in tasks.values())


def test_the_test_block_holds_the_exact_auc_and_keras_own_beside_it():
    """A real model (its sigmoid of the crowded logits) measured by measure_test, as a run's export measures it."""
    labels, logits = crowded_scores()
    inputs = keras.Input((1,))
    model = keras.Model(inputs, keras.layers.Activation("sigmoid")(inputs))
    model.compile(loss="binary_crossentropy", metrics=[keras.metrics.AUC(name="auc")])
    test = tf.data.Dataset.from_tensor_slices((logits.reshape(-1, 1), labels.reshape(-1, 1))).batch(32)
    spec = DataSpec((1,), 1, ("no", "yes"), 0, 0, test_size=len(labels))
    datasets = Datasets(test, test, spec, 32, test=test)
    binary = TASKS.get("binary")(OmegaConf.create({"name": "binary"}))
    block = measure_test(model, datasets, {"epoch": 1}, False, "none", task=binary)
    probabilities = 1 / (1 + np.exp(-logits.astype(np.float64)))
    exact = roc_auc_score(labels, probabilities)
    assert block["metrics"]["auc"] == pytest.approx(exact, abs=1e-6)
    assert abs(block["keras_figures"]["auc"] - exact) > 0.01, block  # 200 thresholds, most rows in two buckets
    assert set(block["metrics"]) == {"loss", "auc"}
    without = measure_test(model, datasets, {"epoch": 1}, False, "none")
    assert "keras_figures" not in without and without["metrics"]["auc"] == block["keras_figures"]["auc"]
    first = measure_test(model, datasets, {"epoch": 1}, False, "none", validation_steps=1, task=binary)
    assert first["metrics"]["auc"] == pytest.approx(roc_auc_score(labels[:32], probabilities[:32]), abs=1e-6)
