"""Pictures in TensorBoard (`logging.images_freq`), drawn with NumPy and written with `tf.summary`, no plotting
library: what the model sees, and what it gets wrong.

- `examples/train` (train/, once, at the start): a grid of up to 16 training examples after the pipeline and
  augmentation, as the model takes them, each scaled to the full grey/colour range for display.
- `confusion_matrix` (validation/, every `images_freq` epochs): one cell per (true row, predicted column). With
  matplotlib installed (tfhydra/trainer/figures.py), a 640x640 figure: class names on both axes, axis labels,
  the count in every cell, shaded by the row's share. Without it, the row's share in grey (white = all of the
  true class's examples). Either way the counts, with class names, are also the summary's description.
- `misclassified` (validation/, same epochs): the up to 9 validation examples the model was most confident
  about and wrong on, most confident first; for image data one grid, each titled with its true and predicted
  class (without matplotlib: the images, with the names in the description), for text data a markdown table in the Text
  tab (text, true, predicted, probability) from the raw validation texts the text sources keep
  (`Serving.raw_validation`).

Validation predictions cost one extra pass over the validation split each time (docs/performance.md).
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from tfhydra.platform.keras_lib import keras
from tfhydra.trainer import figures

GRID = 16  # training examples in examples/train
WRONG = 9  # misclassified examples at most
MIN_SIDE = 64  # small images (digits: 8x8) are enlarged by a whole factor to at least this many pixels


def display(images: np.ndarray) -> np.ndarray:
    """Model inputs (N, H, W, C) as uint8 pictures: each scaled to [0, 255] on its own range, 1 or 3 channels
    (others: the first), enlarged by a whole factor (nearest neighbour) so that the shorter side is >= MIN_SIDE."""
    images = np.asarray(images, dtype=np.float32)
    if images.shape[-1] not in (1, 3):
        images = images[..., :1]
    low = images.min(axis=(1, 2, 3), keepdims=True)
    span = np.maximum(images.max(axis=(1, 2, 3), keepdims=True) - low, 1e-12)
    pictures = np.round((images - low) / span * 255).astype(np.uint8)
    factor = max(1, -(-MIN_SIDE // min(images.shape[1:3])))
    return pictures.repeat(factor, axis=1).repeat(factor, axis=2)


def tile(pictures: np.ndarray, pad: int = 2) -> np.ndarray:
    """(N, H, W, C) uint8 -> one (1, rows*(H+pad)-pad, cols*(W+pad)-pad, C) grid, rows filled first."""
    count, height, width, channels = pictures.shape
    cols = int(np.ceil(np.sqrt(count)))
    rows = -(-count // cols)
    grid = np.zeros((rows * (height + pad) - pad, cols * (width + pad) - pad, channels), np.uint8)
    for i, picture in enumerate(pictures):
        r, c = divmod(i, cols)
        grid[r * (height + pad) : r * (height + pad) + height, c * (width + pad) : c * (width + pad) + width] = picture
    return grid[None]


def confusion_counts(true: np.ndarray, predicted: np.ndarray, classes: int) -> np.ndarray:
    counts = np.zeros((classes, classes), np.int64)
    np.add.at(counts, (true, predicted), 1)
    return counts


def confusion_picture(counts: np.ndarray, cell: int | None = None) -> np.ndarray:
    """Each cell the row's share (true class), in grey, `cell` pixels square; 1-pixel dark lines between."""
    classes = len(counts)
    cell = cell or max(4, 256 // classes)
    shares = counts / np.maximum(counts.sum(axis=1, keepdims=True), 1)
    picture = np.round(shares * 255).astype(np.uint8).repeat(cell, axis=0).repeat(cell, axis=1)
    picture[::cell, :] = picture[:, ::cell] = 64
    return picture[None, :, :, None]


def counts_table(counts: np.ndarray, names) -> str:
    """The confusion matrix as a markdown table: rows are the true classes, columns the predicted ones."""
    lines = ["| true \\ predicted | " + " | ".join(names) + " |", "|---" * (len(names) + 1) + "|"]
    lines += [f"| {name} | " + " | ".join(str(n) for n in row) + " |" for name, row in zip(names, counts, strict=True)]
    return "\n".join(lines)


def most_confident_mistakes(true: np.ndarray, probabilities: np.ndarray, count: int = WRONG) -> np.ndarray:
    """Indices of the misclassified examples, the highest predicted-class probability first."""
    predicted = probabilities.argmax(axis=1)
    wrong = np.flatnonzero(predicted != true)
    return wrong[np.argsort(-probabilities[wrong, predicted[wrong]], kind="stable")][:count]


def as_probabilities(outputs: np.ndarray) -> np.ndarray:
    """Softmax outputs as they are; logits (rows not summing to 1) through a softmax."""
    outputs = np.asarray(outputs, dtype=np.float64)
    if np.all(outputs >= 0) and np.allclose(outputs.sum(axis=1), 1.0, atol=1e-3):
        return outputs
    shifted = np.exp(outputs - outputs.max(axis=1, keepdims=True))
    return shifted / shifted.sum(axis=1, keepdims=True)


def escape(text) -> str:
    text = text.decode("utf-8", "replace") if isinstance(text, bytes) else str(text)
    return " ".join(text.split()).replace("|", "\\|")[:200]


class Pictures(keras.callbacks.Callback):
    """The summaries above. `kind` is "image" (N, H, W, C inputs), "text" (token inputs; `texts` are the raw
    validation texts in the validation split's order) or None (other data: the confusion matrix only)."""

    def __init__(
        self,
        train: tf.data.Dataset,
        validation: tf.data.Dataset,
        class_names,
        train_dir,
        validation_dir,
        freq: int,
        kind: str | None = None,
        texts=None,
        labelled: bool | None = None,
    ) -> None:
        super().__init__()
        self.train, self.validation, self.names, self.freq = train, validation, [str(n) for n in class_names], freq
        self.labelled = figures.available() if labelled is None else labelled  # matplotlib's labelled pictures
        self.dirs, self.kind, self.texts = (str(train_dir), str(validation_dir)), kind, texts
        self.writers: list | None = None  # tf.summary file writers, made on the first picture

    def _writer(self, which: int):
        if self.writers is None:
            self.writers = [tf.summary.create_file_writer(d) for d in self.dirs]
        return self.writers[which]

    def on_train_begin(self, logs=None):
        if self.kind != "image":
            return
        x, y = next(iter(self.train))
        x, y = np.asarray(x)[:GRID], labels_of(y)[:GRID]
        names = ", ".join(self.names[int(label)] for label in y)
        with self._writer(0).as_default(step=0):
            tf.summary.image(
                "examples/train",
                tile(display(x)),
                description=f"{len(x)} training examples as the model takes them, row by row: {names}",
            )
        self._writer(0).flush()

    def on_epoch_end(self, epoch, logs=None):
        if not self.freq or (epoch + 1) % self.freq:
            return
        inputs, true, probabilities = self._predict()
        predicted = probabilities.argmax(axis=1)
        counts = confusion_counts(true, predicted, len(self.names))
        wrong = most_confident_mistakes(true, probabilities)
        with self._writer(1).as_default(step=epoch):
            picture = (
                figures.rendered(figures.confusion_figure(counts, self.names))
                if self.labelled
                else confusion_picture(counts)
            )
            tf.summary.image("confusion_matrix", picture, description=counts_table(counts, self.names))
            self._write_mistakes(wrong, inputs, true, predicted, probabilities)
        self._writer(1).flush()

    def _predict(self):
        batches: list[np.ndarray] = []
        true, outputs = [], []
        for x, y in self.validation:
            outputs.append(np.asarray(self.model(x, training=False)))
            true.append(labels_of(y))
            if self.kind == "image":
                batches.append(np.asarray(x))
        inputs = np.concatenate(batches) if batches else None
        return inputs, np.concatenate(true), as_probabilities(np.concatenate(outputs))

    def _write_mistakes(self, wrong, inputs, true, predicted, probabilities) -> None:
        rows = [(i, self.names[true[i]], self.names[predicted[i]], probabilities[i, predicted[i]]) for i in wrong]
        if self.kind == "image" and rows:
            description = "\n".join(
                f"{n + 1}. validation example {i}: true **{t}**, predicted **{p}** ({prob:.3f})"
                for n, (i, t, p, prob) in enumerate(rows)
            )
            pictures = display(inputs[wrong])
            if self.labelled:  # one grid, each example titled with its true and predicted class
                titles = [f"true {t} / predicted {p} ({prob:.2f})" for _, t, p, prob in rows]
                pictures = figures.rendered(figures.misclassified_figure(pictures, titles))
            tf.summary.image("misclassified", pictures, max_outputs=WRONG, description=description)
        elif self.kind == "text" and self.texts is not None:
            table = ["| text | true | predicted | probability |", "|---|---|---|---|"]
            table += [
                f"| {escape(self.texts[i]) if i < len(self.texts) else '?'} | {t} | {p} | {prob:.3f} |"
                for i, t, p, prob in rows
            ]
            tf.summary.text("misclassified", "\n".join(table) if rows else "no misclassified validation examples")

    def on_train_end(self, logs=None):
        for writer in self.writers or ():
            writer.close()
        self.writers = None


def labels_of(y) -> np.ndarray:
    """Class indices from sparse labels or one-hot rows."""
    y = np.asarray(y)
    return (y.argmax(axis=-1) if y.ndim > 1 and y.shape[-1] > 1 else y.reshape(len(y))).astype(np.int64)


def data_kind(spec, serving) -> str | None:
    """ "image" for (H, W, C) float inputs, "text" for token ids from raw strings, else None."""
    if len(spec.input_shape) == 3 and spec.dtype.startswith("float"):
        return "image"
    raw = getattr(serving, "raw", None)
    return "text" if spec.dtype.startswith("int") and raw is not None and raw.dtype == tf.string else None


class RawTexts:
    """The raw validation texts, read only when the first table is written (a lazy source reads them then)."""

    def __init__(self, serving) -> None:
        self.serving = serving
        self.texts: np.ndarray | None = None

    def _read(self):
        if self.texts is None:
            self.texts = np.asarray(self.serving.raw_validation[0]).reshape(-1)
        return self.texts

    def __len__(self):
        return len(self._read())

    def __getitem__(self, i):
        return self._read()[i]


def picture_callbacks(cfg_logging, paths, datasets) -> list[keras.callbacks.Callback]:
    """The Pictures callback for a run's data (`datasets`: the data room's Datasets, read for its splits, spec
    and serving description); none when `logging.images_freq` is 0, or when the task's head has no classes to
    confuse (binary, multi-label, regression: `spec.head.confusion`, tfhydra/task/)."""
    if not cfg_logging.images_freq or (datasets.spec.head is not None and not datasets.spec.head.confusion):
        return []
    kind = data_kind(datasets.spec, datasets.serving)
    texts = RawTexts(datasets.serving) if kind == "text" else None
    return [
        Pictures(
            datasets.train,
            datasets.validation,
            datasets.spec.class_names,
            paths.tensorboard_train,
            paths.tensorboard_validation,
            cfg_logging.images_freq,
            kind,
            texts,
        )
    ]
