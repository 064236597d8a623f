"""The regression picture in TensorBoard (issue 44): `predicted_vs_true`, one picture per target where
classification draws its confusion matrix, chosen by the task's head (`Head.pictures`), read back from the event
files: the callback on hand-made data (the NumPy picture, pixel by pixel), matplotlib's figure, and a run."""

import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras
from conftest import read_run_record
from tb_events import read_pictures

import tfhydra
from tfhydra.trainer import figures
from tfhydra.trainer.scatter import SCATTER_PIXELS, PredictedVsTrue, fit_said, scatter_picture, value_bounds


def doubling_model() -> keras.Model:
    """Predicts twice each input: the predictions of true values t are 2t, off the diagonal."""
    inputs = keras.Input((2,))
    return keras.Model(inputs, keras.layers.Lambda(lambda x: 2 * x)(inputs))


def run_callback(tmp_path, labelled: bool, epochs: int = 2) -> dict:
    true = np.array([[0.0, 5.0], [1.0, 6.0], [2.0, 7.0], [4.0, 9.0]], np.float32)  # two targets, x = y
    data = tf.data.Dataset.from_tensor_slices((true, true)).batch(3)
    callback = PredictedVsTrue(data, ["price", "rent"], tmp_path / "validation", freq=1, labelled=labelled)
    callback.set_model(doubling_model())
    for epoch in range(epochs):
        callback.on_epoch_end(epoch, {})
    callback.on_train_end()
    return read_pictures(tmp_path / "validation")


def test_the_numpy_scatter_puts_each_example_at_true_and_predicted(tmp_path):
    pictures = run_callback(tmp_path, labelled=False)
    assert [step for step, _, _ in pictures["predicted_vs_true"]] == [0, 1]
    _, pngs, description = pictures["predicted_vs_true"][0]
    assert len(pngs) == 2  # one per target
    price = tf.io.decode_png(pngs[0]).numpy()
    assert price.shape == (SCATTER_PIXELS, SCATTER_PIXELS, 1)
    low, high = value_bounds(np.array([0.0, 1, 2, 4]), np.array([0.0, 2, 4, 8]))  # price's axes: true 0..4, 2x

    def pixel(value: float) -> int:
        return int(round((value - low) / (high - low) * (SCATTER_PIXELS - 1)))

    for t in (1.0, 2.0, 4.0):  # each example a black dot at (true, 2 x true): row counted from the top
        assert price[SCATTER_PIXELS - 1 - pixel(2 * t), pixel(t), 0] == 0
    assert price[SCATTER_PIXELS - 1 - pixel(3.0), pixel(3.0), 0] == 192  # the diagonal, where no example lies
    assert price[SCATTER_PIXELS - 1 - pixel(6.0), pixel(1.0), 0] == 255  # the white ground
    rmse = np.sqrt(np.mean(np.array([0.0, 1, 2, 4]) ** 2))  # predicted - true = true
    assert description.splitlines()[0] == f"- **price**: 4 validation examples, RMSE {rmse:.4g}, R² {1 - 21 / 8.75:.3f}"
    assert description.splitlines()[1].startswith("- **rent**: 4 validation examples, RMSE ")


def test_the_labelled_scatter_is_a_640_pixel_figure_per_target(tmp_path):
    pytest.importorskip("matplotlib")
    _, pngs, _ = run_callback(tmp_path, labelled=True, epochs=1)["predicted_vs_true"][0]
    pictures = [tf.io.decode_png(png).numpy() for png in pngs]
    assert [p.shape for p in pictures] == [(640, 640, 3), (640, 640, 3)]
    assert all(p.std() > 10 for p in pictures)  # drawn, not blank


def test_a_regression_run_draws_the_scatter_and_no_confusion_matrix(compose_cfg, tmp_path):
    cfg = compose_cfg(
        [
            "data=synthetic",
            "task=regression",
            "data.shape=[8,8,1]",
            "data.num_classes=2",
            "data.train_size=64",
            "data.val_size=32",
            "data.test_size=16",
            "model=mlp",
            "model.units=[8]",
            "trainer.epochs=2",
            "logging.images_freq=1",
            "logging.histogram_freq=0",
            "export.formats=[]",
        ]
    )
    tfhydra.run(cfg, run_dir=tmp_path / "run")
    assert read_run_record(tmp_path / "run")["data"]["head"]["pictures"] == "scatter"
    validation = read_pictures(tmp_path / "run" / "tensorboard" / "validation")
    assert "confusion_matrix" not in validation and "misclassified" not in validation
    assert [step for step, _, _ in validation["predicted_vs_true"]] == [0, 1]
    _, pngs, description = validation["predicted_vs_true"][1]
    expected = (640, 640, 3) if figures.available() else (SCATTER_PIXELS, SCATTER_PIXELS, 1)
    assert [tf.io.decode_png(png).numpy().shape for png in pngs] == [expected, expected]  # the two targets
    assert description.startswith("- **target_0**: 32 validation examples, RMSE ")


def test_a_diverged_models_non_finite_predictions_are_left_out():
    """A run that blew up still draws its scatter (the record says it diverged): the finite dots alone."""
    true, predicted = np.array([0.0, 1.0, 2.0]), np.array([np.nan, 1.0, np.inf])
    bounds = value_bounds(true, predicted)
    assert bounds == pytest.approx((-0.1, 2.1))  # from the finite values only
    picture = scatter_picture(true, predicted, bounds)[0, ..., 0]
    assert (picture == 0).sum() == 9  # one 3x3 dot: (1, 1)
    assert fit_said(true, predicted) == "RMSE nan, R² nan"
