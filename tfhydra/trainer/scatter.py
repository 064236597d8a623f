"""`predicted_vs_true` in TensorBoard (`logging.images_freq`, a task whose head draws `pictures="scatter"`: a
regression's numbers), where classes get their confusion matrix (tfhydra/trainer/pictures.py): every N epochs, one
picture per target (up to 9), each validation example a dot at (true, predicted) on equal axes, with the diagonal
where they are equal. With matplotlib (tfhydra/trainer/figures.py) a 640x640 figure with axis labels and the RMSE
and R² in the title; without it a 256x256 grey picture drawn with NumPy (white ground, the diagonal light grey,
dots black). The description holds each target's examples, RMSE and R². One extra pass over the validation split
each time, with the validated weights (the EMA averages when on).
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from tfhydra.trainer import figures
from tfhydra.trainer.summaries import SummaryCallback

TARGETS = 9  # predicted_vs_true pictures at most (one per target; the description names every target)
SCATTER_PIXELS = 256  # the NumPy scatter's side


def value_bounds(true: np.ndarray, predicted: np.ndarray) -> tuple[float, float]:
    """One range for both axes: every finite true and predicted value, 5% of the span around them."""
    values = np.concatenate([true, predicted])
    values = values[np.isfinite(values)]
    if not len(values):
        return 0.0, 1.0
    low, high = float(values.min()), float(values.max())
    pad = (high - low) * 0.05 or max(abs(low) * 0.05, 0.5)
    return low - pad, high + pad


def fit_said(true: np.ndarray, predicted: np.ndarray) -> str:
    """RMSE and R² of one target, as the title and the description say them."""
    error = np.asarray(predicted, np.float64) - true
    spread = float(np.sum((true - np.mean(true)) ** 2))
    r2 = 1 - float(np.sum(error**2)) / spread if spread > 0 else float("nan")
    return f"RMSE {np.sqrt(np.mean(error**2)):.4g}, R² {r2:.3f}"


def scatter_picture(true: np.ndarray, predicted: np.ndarray, bounds: tuple[float, float]) -> np.ndarray:
    """(1, side, side, 1) uint8: white, the diagonal (predicted = true) light grey, each example a black 3x3 dot,
    true to the right and predicted upwards over `bounds`; a non-finite prediction is left out."""
    side, (low, high) = SCATTER_PIXELS, bounds
    picture = np.full((side, side), 255, np.uint8)
    steps = np.arange(side)
    picture[side - 1 - steps, steps] = 192
    finite = np.isfinite(true) & np.isfinite(predicted)
    cols, rows = (
        np.clip(np.round((v[finite] - low) / (high - low) * (side - 1)), 0, side - 1).astype(int)
        for v in (true, predicted)
    )
    rows = side - 1 - rows
    for dr in (-1, 0, 1):
        for dc in (-1, 0, 1):
            picture[np.clip(rows + dr, 0, side - 1), np.clip(cols + dc, 0, side - 1)] = 0
    return picture[None, :, :, None]


class PredictedVsTrue(SummaryCallback):
    """`predicted_vs_true` (above): the validation split's predictions against its numbers, every `freq` epochs."""

    def __init__(self, validation: tf.data.Dataset, names, validation_dir, freq: int, labelled: bool | None = None):
        super().__init__(validation_dir)
        self.validation, self.names, self.freq = validation, [str(n) for n in names], freq
        self.labelled = figures.available() if labelled is None else labelled

    def on_epoch_end(self, epoch, logs=None):
        if not self.freq or (epoch + 1) % self.freq:
            return
        true, predicted = self._predict()
        pictures, lines = [], []
        for i, name in enumerate(self.names):
            target, guess = true[:, i], predicted[:, i]
            bounds, fit = value_bounds(target, guess), fit_said(target, guess)
            lines.append(f"- **{name}**: {len(target)} validation examples, {fit}")
            if i < TARGETS:
                pictures.append(self._picture(target, guess, name, bounds, fit))
        with self._writer(0).as_default(step=epoch):
            tf.summary.image(
                "predicted_vs_true", np.concatenate(pictures), max_outputs=TARGETS, description="\n".join(lines)
            )
        self._writer(0).flush()

    def _picture(self, true: np.ndarray, predicted: np.ndarray, name: str, bounds, fit: str) -> np.ndarray:
        if self.labelled:  # matplotlib's figure, with axis labels and the fit in the title
            return figures.rendered(figures.scatter_figure(true, predicted, name, bounds, fit))
        return scatter_picture(true, predicted, bounds)

    def _predict(self) -> tuple[np.ndarray, np.ndarray]:
        """(true, predicted), (examples, targets) each, in the target's units (the head undoes any standardising)."""
        true, predicted = [], []
        for x, y in self.validation:
            predicted.append(np.asarray(self.model(x, training=False), np.float64).reshape(len(y), -1))
            true.append(np.asarray(y, np.float64).reshape(len(y), -1))
        return np.concatenate(true), np.concatenate(predicted)
