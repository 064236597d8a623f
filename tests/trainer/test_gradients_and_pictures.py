"""Gradients in both loops and pictures in TensorBoard (issue 27, items 3 and 4), read back from the event files."""

import math

import data_files
import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras
from conftest import read_run_record, run_cli
from tb_events import read_events, read_pictures
from trainer_runs import gradients_run

from tfhydra.trainer.pictures import Pictures, confusion_counts, display, most_confident_mistakes

FAST = ["logging.write_graph=false", "export.formats=[]", "trainer.epochs=2"]


def png_size(png: bytes) -> tuple[int, int]:
    height, width = tf.io.decode_png(png).shape[:2]
    return int(height), int(width)


# ---- 3. gradients in both loops -----------------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("loop", ["fit", "custom"])
def test_gradient_norms_and_histograms_are_written_every_histogram_freq_epochs(tmp_path_factory, loop):
    run_dir = gradients_run(tmp_path_factory, loop)  # shared with test_custom_loop_writes_the_same_contract
    assert read_run_record(run_dir)["status"] == "completed"
    events = read_events(run_dir / "tensorboard" / "train")
    norms = {tag: values for tag, values in events["scalars"].items() if tag.startswith("gradient_norm/")}
    assert [step for step, _ in norms["gradient_norm/global"]] == [0, 1]  # the epochs' steps, as Keras' epoch_*
    per_variable = {tag: values for tag, values in norms.items() if tag != "gradient_norm/global"}
    assert any("conv2d" in tag and "kernel" in tag for tag in per_variable), sorted(norms)
    assert all([step for step, _ in values] == [0, 1] for values in per_variable.values())
    assert all(math.isfinite(v) and v > 0 for values in norms.values() for _, v in values)
    for step in (0, 1):  # the global norm is the norm of the per-variable norms
        squares = sum(dict(values)[step] ** 2 for values in per_variable.values())
        assert dict(norms["gradient_norm/global"])[step] == pytest.approx(math.sqrt(squares), rel=1e-4)
    assert any(tag.startswith("gradients/") for tag in events["histograms"])
    assert "epoch_loss" in events["scalars"]  # beside Keras' own scalars


# ---- 4. pictures: the callback on hand-made data -------------------------------------------------------------------
def brightness_model() -> keras.Model:
    """Class "bright" when an image's mean is above 0, with a confidence that grows with the distance from 0."""
    inputs = keras.Input((4, 4, 1))
    mean = keras.layers.Lambda(lambda x: tf.reduce_mean(x, axis=[1, 2, 3])[:, None])(inputs)
    outputs = keras.layers.Lambda(lambda m: tf.nn.softmax(tf.concat([-4 * m, 4 * m], axis=1)))(mean)
    return keras.Model(inputs, outputs)


def hand_made_validation():
    """Six images whose means are known; examples 1 (dark labelled bright, mean -0.1) and 4 (bright labelled dark,
    mean 0.9) are the mistakes, 4 the more confident."""
    rng = np.random.default_rng(0)
    means, labels = [-0.8, -0.1, -0.5, 0.6, 0.9, 0.3], [0, 1, 0, 1, 0, 1]
    images = np.stack([m + 0.05 * rng.standard_normal((4, 4, 1)) for m in means]).astype(np.float32)
    images -= images.mean(axis=(1, 2, 3), keepdims=True) - np.array(means, np.float32)[:, None, None, None]
    return images, np.array(labels, np.int64)


def run_callback(tmp_path, kind="image", texts=None, epochs=2, labelled=False):
    """labelled=False: the NumPy pictures (no matplotlib); tests/trainer/test_confusion_figure.py tests the
    labelled ones."""
    images, labels = hand_made_validation()
    data = tf.data.Dataset.from_tensor_slices((images, labels)).batch(4)
    train = tf.data.Dataset.from_tensor_slices((np.repeat(images, 3, axis=0), np.repeat(labels, 3))).batch(16)
    callback = Pictures(
        train,
        data,
        ["dark", "bright"],
        tmp_path / "train",
        tmp_path / "validation",
        freq=1,
        kind=kind,
        texts=texts,
        labelled=labelled,
    )
    callback.set_model(brightness_model())
    callback.on_train_begin()
    for epoch in range(epochs):
        callback.on_epoch_end(epoch, {})
    callback.on_train_end()
    return images


def test_the_most_confident_mistake_comes_first_with_its_class_names(tmp_path):
    images = run_callback(tmp_path)
    pictures = read_pictures(tmp_path / "validation")
    [(step, wrong, description)] = pictures["misclassified"][:1]
    assert [s for s, _, _ in pictures["misclassified"]] == [0, 1]
    assert len(wrong) == 2 and all(png_size(png) == (64, 64) for png in wrong)  # 4x4 enlarged 16 times
    first = tf.io.decode_png(wrong[0]).numpy()
    assert np.array_equal(first, display(images[[4]])[0])  # example 4, the bright one labelled dark, first
    assert np.array_equal(tf.io.decode_png(wrong[1]).numpy(), display(images[[1]])[0])
    assert "validation example 4: true **dark**, predicted **bright**" in description.splitlines()[0]
    assert "validation example 1: true **bright**, predicted **dark**" in description.splitlines()[1]


def test_the_confusion_matrix_counts_and_picture(tmp_path):
    run_callback(tmp_path)
    [(_, [png], description), _] = read_pictures(tmp_path / "validation")["confusion_matrix"]
    assert png_size(png) == (256, 256)  # 2 classes, 128 pixels a cell
    picture = tf.io.decode_png(png).numpy()[..., 0]
    assert picture[64, 64] == round(2 / 3 * 255) and picture[64, 192] == round(1 / 3 * 255)  # dark: 2 right, 1 wrong
    assert "| dark | 2 | 1 |" in description and "| bright | 1 | 2 |" in description


def test_the_training_examples_grid_is_written_once_at_the_start(tmp_path):
    run_callback(tmp_path)
    [(step, [png], description)] = read_pictures(tmp_path / "train")["examples/train"]
    assert step == 0 and png_size(png) == (4 * 66 - 2, 4 * 66 - 2)  # 16 examples of 64x64, 2 pixels apart
    assert description.endswith(
        "dark, dark, dark, bright, bright, bright, dark, dark, dark, bright, bright, bright, dark, dark, dark, bright"
    )  # labels 0, 1, 0, 1, ... three times each


def test_text_data_gets_a_table_of_the_misclassified_texts(tmp_path):
    texts = np.array([b"very dark", b"almost | dark", b"dark", b"bright", b"shining", b"light"])
    run_callback(tmp_path, kind="text", texts=texts, epochs=1)
    pictures = read_pictures(tmp_path / "validation")
    assert "misclassified" not in pictures and "confusion_matrix" in pictures
    [(step, table, _)] = pictures["text"]["misclassified"]
    rows = table.splitlines()
    assert rows[0] == "| text | true | predicted | probability |"
    assert rows[2].startswith("| shining | dark | bright | 0.999 |") and rows[3].startswith(
        "| almost \\| dark | bright"
    )


def test_mistakes_and_counts():
    probabilities = np.array([[0.9, 0.1], [0.2, 0.8], [0.4, 0.6], [0.7, 0.3]])
    true = np.array([0, 0, 0, 1])
    assert list(most_confident_mistakes(true, probabilities)) == [1, 3, 2]
    assert confusion_counts(true, probabilities.argmax(1), 2).tolist() == [[1, 2], [1, 0]]


# ---- 4. pictures: end to end -----------------------------------------------------------------------------------------
@pytest.mark.slow
def test_a_run_writes_the_pictures_every_images_freq_epochs(tmp_path):
    result = run_cli(
        *FAST, "model=mlp", "logging.images_freq=1", "logging.gradients=false", f"hydra.run.dir={tmp_path}"
    )
    assert result.returncode == 0, result.stderr[-2000:]
    train, validation = (read_pictures(tmp_path / "tensorboard" / d) for d in ("train", "validation"))
    [(_, [grid], _)] = train["examples/train"]
    assert png_size(grid) == (4 * 86 - 2, 4 * 86 - 2)  # 16 digits (28x28 as data=digits resizes them), enlarged 3 times
    assert [step for step, _, _ in validation["confusion_matrix"]] == [0, 1]
    assert png_size(validation["confusion_matrix"][0][1][0]) == (640, 640)  # matplotlib's labelled figure (dev extra)
    steps = [step for step, _, _ in validation.get("misclassified", [])]
    assert steps and all(len(pngs) == 1 for _, pngs, _ in validation["misclassified"])  # one titled grid
    assert not any(t.startswith("gradient_norm/") for t in read_events(tmp_path / "tensorboard" / "train")["scalars"])
    assert read_run_record(tmp_path)["status"] == "completed"


@pytest.mark.slow
def test_a_text_run_writes_the_misclassified_table(tmp_path):
    path = data_files.write_text_csv(tmp_path / "reviews.csv", n=80)
    result = run_cli(
        "data=text_csv",
        f"data.path={path}",
        "model=lstm",
        "model.units=[8]",  # the smallest LSTM that still reads the texts: the table is the subject, not the model
        "model.embedding_dim=8",
        "data.sequence_length=16",
        "trainer.epochs=1",
        "logging.images_freq=1",
        "logging.histogram_freq=0",
        "export.formats=[]",
        "logging.write_graph=false",
        f"hydra.run.dir={tmp_path / 'run'}",
    )
    assert result.returncode == 0, result.stderr[-2000:]
    validation = read_pictures(tmp_path / "run" / "tensorboard" / "validation")
    assert "confusion_matrix" in validation and "misclassified" not in validation
    [(_, table, _)] = validation["text"]["misclassified"]
    assert table.startswith("| text | true | predicted | probability |") or table.startswith("no misclassified")
    assert "examples/train" not in read_pictures(tmp_path / "run" / "tensorboard" / "train")
