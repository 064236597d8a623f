"""trainer.loss / trainer.metrics: Keras names or a user's `_target_`, accepted by the pre-flight check and trained with."""

import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras

import tfhydra
from conftest import CONFIG_DIR, FAST, read_run_record
from tfhydra.preflight import check_overrides
from tfhydra.errors import ConfigError

TINY = ["model=mlp", "model.units=[16]", "data=synthetic", "data.shape=[8,8,1]", "data.num_classes=4",
        "data.train_size=64", "data.val_size=32", *FAST]
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
    assert str(info.value) == ("trainer.loss={'gamma': 2.0}: not an accepted value; "
                               "accepted: a Keras loss name, or a node with _target_")


def test_trains_with_a_user_focal_loss_given_by_target(compose_cfg, tmp_path):
    """The logged loss is the focal loss: below the cross-entropy logged beside it as a metric."""
    tfhydra.run(compose_cfg([*TINY, FOCAL, "trainer.metrics=[accuracy,sparse_categorical_crossentropy]"]),
                run_dir=tmp_path)
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
