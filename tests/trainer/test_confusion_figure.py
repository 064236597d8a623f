"""The labelled pictures in TensorBoard (issue 38 item 3): the confusion matrix with class names, axis labels and
counts, read back through the figure's text objects and from the PNG in the event file; the misclassified grid
titled with true and predicted class."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from tb_events import read_pictures
from test_gradients_and_pictures import png_size, run_callback

from tfhydra.trainer import figures
from tfhydra.trainer.pictures import confusion_counts

pytest.importorskip("matplotlib")
DIGITS = [str(d) for d in range(10)]


def digits_counts() -> np.ndarray:
    rng = np.random.default_rng(0)
    true = np.repeat(np.arange(10), 36)
    predicted = np.where(rng.random(len(true)) < 0.9, true, rng.integers(0, 10, len(true)))
    return confusion_counts(true, predicted, 10)


def test_the_confusion_figure_shows_class_names_axis_labels_and_counts():
    counts = digits_counts()
    figure = figures.confusion_figure(counts, DIGITS)
    texts = figures.texts_of(figure)
    assert "true class" in texts and "predicted class" in texts
    assert texts.count("7") >= 2  # the class name on both axes (and perhaps a count)
    for name in DIGITS:
        assert name in texts
    assert len(str_cells(figure)) == 100  # a count in every cell, zeros included
    assert sum(int(c) for c in str_cells(figure)) == counts.sum() == 360
    assert f"360 validation examples, {np.trace(counts)} right" in " ".join(texts)
    assert figures.rendered(figure).shape == (1, 640, 640, 3)


def str_cells(figure) -> list[str]:
    """The counts written in the cells (the axes' own texts, not the tick labels)."""
    [axes] = figure.axes
    return [t.get_text() for t in axes.texts]


def test_class_names_are_the_data_specs_and_a_hundred_classes_stay_readable():
    names = [f"class_{i}" for i in range(100)]
    figure = figures.confusion_figure(np.eye(100, dtype=np.int64) * 3, names)
    texts = figures.texts_of(figure)
    assert "class_0" in texts and "class_3" in texts and "class_1" not in texts  # every 3rd class named: 34 ticks
    assert str_cells(figure) == []  # cells too small for counts: the shading alone
    assert figures.rendered(figure).shape == (1, 640, 640, 3)


def test_the_callback_writes_the_labelled_pictures(tmp_path):
    run_callback(tmp_path, labelled=True)
    pictures = read_pictures(tmp_path / "validation")
    [(_, [matrix], description), _] = pictures["confusion_matrix"]
    assert png_size(matrix) == (640, 640)
    assert tf.io.decode_png(matrix).numpy().std() > 10  # drawn, not blank
    assert "| dark | 2 | 1 |" in description
    [(_, [grid], text), _] = pictures["misclassified"]
    assert png_size(grid)[0] > 200  # one grid of 2 titled examples
    assert "true **dark**, predicted **bright**" in text


def test_the_misclassified_grid_is_titled_with_true_and_predicted_class():
    pictures = np.zeros((3, 64, 64, 1), np.uint8)
    titles = ["true 3 / predicted 8 (0.97)", "true 1 / predicted 7 (0.91)", "true 9 / predicted 4 (0.55)"]
    figure = figures.misclassified_figure(pictures, titles)
    assert set(titles) <= set(figures.texts_of(figure))
    assert figures.rendered(figure).shape == (1, 480, 440, 3)  # 2 x 2 grid, 2.2 x 2.4 inches a picture at 100 dpi
