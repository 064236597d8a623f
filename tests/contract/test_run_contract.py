"""What one run leaves in its directory, checked on real files (run in-process for speed)."""

import math

import numpy as np
import pytest
import tensorflow as tf
from conftest import compose_config, read_run_record
from shared_runs import DIGITS_CNN, trained_run
from tb_events import read_events

import tfhydra


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    """The session's shared 2-epoch run of the seed CNN on digits (tests/shared_runs.py), only read here."""
    run_dir = trained_run(tmp_path_factory, *DIGITS_CNN)
    return compose_config(list(DIGITS_CNN)), run_dir, read_run_record(run_dir)


def test_metrics_json_records_the_run(finished_run):
    cfg, run_dir, metrics = finished_run
    assert metrics["status"] == "completed"
    assert metrics["epochs_run"] == 2 and len(metrics["history"]) == 2
    for section in ("best", "final"):
        assert set(metrics[section]) >= {"epoch", "loss", "accuracy", "val_loss", "val_accuracy"}
    assert metrics["final"]["epoch"] == 2
    best_by_hand = max(e["val_accuracy"] for e in metrics["history"])
    assert metrics["best"]["val_accuracy"] == best_by_hand
    assert metrics["best"]["val_accuracy"] > 0.8  # 2 epochs of the seed CNN on digits
    assert metrics["params"] == 121930  # the seed CNN at 28x28x1, 10 classes
    assert metrics["examples_per_second"] > 0 and metrics["wall_seconds"] > 0
    data = metrics["data"]  # three splits (issue 34): they add up to digits' examples
    assert (data["train_size"], data["val_size"], data["test_size"]) == (1077, 360, 360)
    assert metrics["test"]["examples"] == 360 and metrics["test"]["metrics"]["accuracy"] > 0.8
    assert metrics["policy"] == "float32" and metrics["replicas"] == 1
    assert metrics["exports"] == {"saved_model": "export/saved_model"}


def test_tensorboard_has_scalars_histograms_and_graph(finished_run):
    _, run_dir, metrics = finished_run
    train, validation = (
        read_events(run_dir / "tensorboard" / "train"),
        read_events(run_dir / "tensorboard" / "validation"),
    )
    assert [s for s, _ in train["scalars"]["epoch_loss"]] == [0, 1]
    assert [v for _, v in validation["scalars"]["epoch_accuracy"]] == pytest.approx(
        [e["val_accuracy"] for e in metrics["history"]]
    )
    assert any("kernel" in tag for tag in train["histograms"])
    assert train["graph"]


def test_best_checkpoint_is_what_was_exported(finished_run):
    """The SavedModel reloads and predicts exactly what the best checkpoint's weights predict."""
    cfg, run_dir, _ = finished_run
    from tfhydra.data.pipeline import build_datasets
    from tfhydra.model.build import build_model

    datasets = build_datasets(cfg.data, cfg.trainer.seed)
    model = build_model(cfg.model, datasets.spec)
    model.load_weights(str(run_dir / "checkpoints" / "best.weights.h5"))
    images, labels = next(iter(datasets.validation))
    expected = model(images, training=False).numpy()

    served = tf.saved_model.load(str(run_dir / "export" / "saved_model"))
    predicted = served.serve(images).numpy()
    np.testing.assert_allclose(predicted, expected, rtol=1e-5, atol=1e-6)
    signature = served.signatures["serve"]  # the model's inputs; serving_default takes digits as stored (8x8)
    assert list(signature(inputs=images).values())[0].shape == (len(images), 10)
    accuracy = float(np.mean(predicted.argmax(axis=1) == labels.numpy()))
    assert accuracy > 0.7


def test_diverging_run_is_recorded_not_exported(tmp_path, compose_cfg):
    cfg = compose_cfg(
        ["trainer.epochs=2", "logging.histogram_freq=0", "optimizer=sgd", "optimizer.lr=1e6", "optimizer.momentum=0.0"]
    )
    returned = tfhydra.run(cfg, run_dir=tmp_path)
    metrics = read_run_record(tmp_path)
    assert metrics["status"] == "diverged"
    assert metrics["diverged"]["step"] >= 1 and metrics["diverged"]["loss"] is None  # NaN/inf written as null
    assert math.isnan(returned)
    assert not (tmp_path / "export").exists()


def test_mlp_with_sgd_trains(tmp_path, compose_cfg):
    """`python train.py model=mlp optimizer=sgd optimizer.lr=0.05 trainer.epochs=3`, in-process."""
    cfg = compose_cfg(
        ["model=mlp", "optimizer=sgd", "optimizer.lr=0.05", "trainer.epochs=3", "logging.histogram_freq=0"]
    )
    returned = tfhydra.run(cfg, run_dir=tmp_path)
    metrics = read_run_record(tmp_path)
    assert metrics["status"] == "completed" and metrics["model"] == "mlp" and metrics["epochs_run"] == 3
    assert returned > 0.8
    best_by_hand = max(e["val_accuracy"] for e in metrics["history"])
    assert returned == pytest.approx(best_by_hand) == metrics["best"]["val_accuracy"]  # run() returns what it monitors
