"""The file writers the picture callbacks share (tfhydra/trainer/pictures.py, scatter.py): one `tf.summary` writer
per directory, made on the first picture (a run that draws none opens no file), closed when training ends."""

from __future__ import annotations

import tensorflow as tf

from tfhydra.platform.keras_lib import keras


class SummaryCallback(keras.callbacks.Callback):
    """The file writers of the picture callbacks: one per directory, made on the first picture, closed at the end."""

    def __init__(self, *dirs) -> None:
        super().__init__()
        self.dirs = tuple(str(d) for d in dirs)
        self.writers: list | None = None  # tf.summary file writers, made on the first picture

    def _writer(self, which: int):
        if self.writers is None:
            self.writers = [tf.summary.create_file_writer(d) for d in self.dirs]
        return self.writers[which]

    def on_train_end(self, logs=None):
        for writer in self.writers or ():
            writer.close()
        self.writers = None
