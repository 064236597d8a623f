"""trainer.loss / trainer.metrics: Keras names or a user's `_target_`, accepted by the pre-flight check
and trained with."""

import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras
from conftest import CONFIG_DIR, FAST, counts_cases, read_run_record
from hypothesis import given, settings
from hypothesis import strategies as st

import tfhydra
from tfhydra.cli.preflight import check_overrides
from tfhydra.config.errors import ConfigError

TINY = [
    "model=mlp",
    "model.units=[16]",
    "data=synthetic",
    "data.shape=[8,8,1]",
    "data.num_classes=4",
    "data.train_size=64",
    "data.val_size=32",
    *FAST,
]
FOCAL = "trainer.loss={_target_:user_code.SparseFocalLoss,gamma:2.0}"
TOP2 = "trainer.metrics=[accuracy,{_target_:tf_keras.metrics.SparseTopKCategoricalAccuracy,k:2,name:top2}]"


def test_focal_loss_is_cross_entropy_at_gamma_zero_and_smaller_above():
    from user_code import SparseFocalLoss

    labels = tf.constant([0, 2, 1])
    probabilities = tf.nn.softmax(tf.random.stateless_normal((3, 4), seed=(1, 2)))
    cross_entropy = keras.losses.SparseCategoricalCrossentropy()(labels, probabilities)
    np.testing.assert_allclose(SparseFocalLoss(gamma=0.0)(labels, probabilities), cross_entropy, rtol=1e-5)
    assert SparseFocalLoss(gamma=2.0)(labels, probabilities) < cross_entropy


def test_pre_flight_accepts_target_loss_and_metrics_and_refuses_a_node_without_target():
    check_overrides(CONFIG_DIR, "config", [FOCAL, TOP2])  # the command line `python train.py <these>` starts
    with pytest.raises(ConfigError) as info:
        check_overrides(CONFIG_DIR, "config", ["trainer.loss={gamma:2.0}"])
    assert str(info.value) == (
        "trainer.loss={'gamma': 2.0}: not an accepted value; accepted: a Keras loss name, or a node with _target_"
    )


def test_trains_with_a_user_focal_loss_given_by_target(compose_cfg, tmp_path):
    """The logged loss is the focal loss: below the cross-entropy logged beside it as a metric."""
    tfhydra.run(
        compose_cfg([*TINY, FOCAL, "trainer.metrics=[accuracy,sparse_categorical_crossentropy]"]), run_dir=tmp_path
    )
    metrics = read_run_record(tmp_path)
    assert metrics["status"] == "completed"
    final = metrics["final"]
    assert 0 < final["loss"] < final["sparse_categorical_crossentropy"]
    assert 0 < final["val_loss"] < final["val_sparse_categorical_crossentropy"]


def test_trains_with_a_target_metric_and_can_monitor_it(compose_cfg, tmp_path):
    returned = tfhydra.run(compose_cfg([*TINY, TOP2, "trainer.monitor=val_top2"]), run_dir=tmp_path)
    metrics = read_run_record(tmp_path)
    assert metrics["status"] == "completed" and metrics["monitor"] == "val_top2"
    best = metrics["best"]
    assert {"top2", "val_top2"} <= set(best) and best["val_top2"] >= best["val_accuracy"]
    assert returned == pytest.approx(best["val_top2"])


@counts_cases()
@settings(max_examples=30, deadline=None, database=None)
@given(smoothing=st.floats(0.0, 0.99), classes=st.integers(2, 12), batch=st.integers(1, 6), seed=st.integers(0, 999))
def test_sparse_label_smoothing_is_the_one_hot_formula(smoothing, classes, batch, seed):
    """-sum(((1 - s) onehot + s / K) log p), averaged over the batch; s = 0 is Keras' sparse crossentropy."""
    from tfhydra.trainer.objectives import build_loss

    rng = np.random.default_rng(seed)
    labels = rng.integers(0, classes, size=(batch, 1))
    probabilities = tf.nn.softmax(tf.constant(rng.normal(size=(batch, classes)), tf.float32)).numpy()
    targets = (1 - smoothing) * np.eye(classes)[labels[:, 0]] + smoothing / classes
    expected = np.mean(-np.sum(targets * np.log(np.clip(probabilities, 1e-7, 1.0)), axis=-1))
    loss = build_loss("sparse_categorical_crossentropy", smoothing)
    for given_labels in (labels, labels[:, 0]):  # (batch, 1) and (batch,); s = 0: Keras' function, per example
        np.testing.assert_allclose(np.mean(loss(given_labels, probabilities)), expected, rtol=1e-4, atol=1e-6)


def test_label_smoothing_with_a_loss_that_does_not_take_it_is_one_line():
    with pytest.raises(ConfigError) as info:
        check_overrides(CONFIG_DIR, "config", [FOCAL, "trainer.label_smoothing=0.1"])
    assert str(info.value).startswith(
        "trainer.label_smoothing=0.1: the loss does not take label smoothing; accepted: 0"
    )
    for bad in ("1.0", "-0.1", "nan", "abc"):
        with pytest.raises(ConfigError, match="^trainer.label_smoothing="):
            check_overrides(CONFIG_DIR, "config", [f"trainer.label_smoothing={bad}"])


@pytest.mark.slow
def test_a_smoothed_run_logs_a_larger_loss_than_its_plain_crossentropy(compose_cfg, tmp_path):
    """The trained loss is the smoothed one: above the plain crossentropy metric once the model is confident."""
    tfhydra.run(
        compose_cfg(
            [
                *TINY,
                "trainer.label_smoothing=0.2",
                "trainer.epochs=8",
                "optimizer.lr=0.02",
                "data.signal=1.0",
                "trainer.metrics=[accuracy,sparse_categorical_crossentropy]",
            ]
        ),
        run_dir=tmp_path,
    )
    final = read_run_record(tmp_path)["final"]
    assert final["loss"] > final["sparse_categorical_crossentropy"] > 0
