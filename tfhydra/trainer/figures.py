"""Labelled pictures for TensorBoard, drawn with matplotlib when it is installed (tfhydra/trainer/pictures.py falls
back to its unlabelled NumPy pictures without it): the confusion matrix with class names on both axes, axis labels
and the count in every cell; the misclassified examples as one grid, each titled with its true and predicted class;
a regression target's predicted-against-true scatter with axis labels and its fit in the title.

Matplotlib's object API with the Agg canvas: no pyplot (no global figure state, no display), so it is safe in a
training process and in concurrent sweep workers. Sizes are chosen for TensorBoard, which shows an image at its
own size in a card about 500-700 pixels wide: 640 x 640 for the matrix.
"""

from __future__ import annotations

import math

import numpy as np

MATRIX_PIXELS = 640  # the confusion matrix's (and a scatter's) PNG is this many pixels square
DPI = 100
MAX_COUNTS = 30  # above this many classes the cells are too small for their counts: the shading alone
MAX_TICKS = 40  # above this many classes every k-th class is named


def available() -> bool:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def confusion_figure(counts: np.ndarray, names: list[str]):
    """Rows the true classes, columns the predicted ones; each cell shaded by its share of the row and labelled
    with its count."""
    from matplotlib.figure import Figure

    classes = len(counts)
    figure = Figure(figsize=(MATRIX_PIXELS / DPI, MATRIX_PIXELS / DPI), dpi=DPI)
    axes = figure.add_subplot()
    shares = counts / np.maximum(counts.sum(axis=1, keepdims=True), 1)
    axes.imshow(shares, cmap="Blues", vmin=0.0, vmax=1.0, interpolation="nearest")
    ticks = list(range(0, classes, max(1, math.ceil(classes / MAX_TICKS))))
    labels = [str(names[i])[:14] for i in ticks]
    small = max(5, min(11, int(220 / max(len(ticks), 1))))
    rotate = max((len(label) for label in labels), default=0) > 3
    axes.set_xticks(ticks, labels, rotation=45 if rotate else 0, ha="right" if rotate else "center", fontsize=small)
    axes.set_yticks(ticks, labels, fontsize=small)
    axes.set_xlabel("predicted class")
    axes.set_ylabel("true class")
    total, right = int(counts.sum()), int(np.trace(counts))
    axes.set_title(f"{total} validation examples, {right} right ({right / max(total, 1):.1%})", fontsize=11)
    if classes <= MAX_COUNTS:
        size = max(5, min(11, int(240 / classes)))
        for (row, col), count in np.ndenumerate(counts):
            axes.text(
                col,
                row,
                str(count),
                ha="center",
                va="center",
                fontsize=size,
                color="white" if shares[row, col] > 0.5 else "black",
            )
    figure.tight_layout()
    return figure


def scatter_figure(true: np.ndarray, predicted: np.ndarray, name: str, bounds: tuple[float, float], fit: str):
    """One target's predicted values against its true ones, on equal axes over `bounds`, with the diagonal where
    they are equal (a perfect model's points lie on it) and `fit` (RMSE, R²) in the title."""
    from matplotlib.figure import Figure

    figure = Figure(figsize=(MATRIX_PIXELS / DPI, MATRIX_PIXELS / DPI), dpi=DPI)
    axes = figure.add_subplot()
    axes.plot(bounds, bounds, color="0.6", linewidth=1, zorder=1)
    size = max(2.0, min(20.0, 4000 / max(len(true), 1)))  # many points: smaller dots
    axes.scatter(true, predicted, s=size, alpha=0.6, color="tab:blue", linewidths=0, zorder=2)
    axes.set_xlim(bounds)
    axes.set_ylim(bounds)
    axes.set_aspect("equal")
    axes.set_xlabel(f"true {name}")
    axes.set_ylabel(f"predicted {name}")
    axes.set_title(f"{len(true)} validation examples: {fit}", fontsize=11)
    figure.tight_layout()
    return figure


def misclassified_figure(pictures: np.ndarray, titles: list[str]):
    """(N, H, W, C) uint8 pictures in a square grid, each titled (`true 3 / predicted 8 (0.97)`)."""
    from matplotlib.figure import Figure

    count = len(pictures)
    cols = math.ceil(math.sqrt(count))
    rows = math.ceil(count / cols)
    figure = Figure(figsize=(2.2 * cols, 2.4 * rows), dpi=DPI)
    for i, (picture, title) in enumerate(zip(pictures, titles, strict=True)):
        axes = figure.add_subplot(rows, cols, i + 1)
        if picture.shape[-1] == 1:
            axes.imshow(picture[..., 0], cmap="gray", vmin=0, vmax=255, interpolation="nearest")
        else:
            axes.imshow(picture, interpolation="nearest")
        axes.set_title(title, fontsize=9)
        axes.axis("off")
    figure.tight_layout()
    return figure


def rendered(figure) -> np.ndarray:
    """The figure as a (1, H, W, 3) uint8 batch for `tf.summary.image`."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(figure)
    canvas.draw()
    return np.asarray(canvas.buffer_rgba())[None, ..., :3].copy()


def texts_of(figure) -> list[str]:
    """Every text the figure draws (tick labels, axis labels, title, cell counts): what a reader can read on it."""
    from matplotlib.text import Text

    return [t.get_text() for t in figure.findobj(Text) if t.get_text() and t.get_visible()]
