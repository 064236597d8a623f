"""The Keras callback that hands each epoch to the run's trackers. It comes after the callbacks that add to
the epoch logs (the learning rate) and after the run's recorder, whose history it reads: so a resumed run
hands over, at its first epoch's end, any earlier epoch a tracker missed (a kill between the two)."""

from __future__ import annotations

from collections.abc import Callable

from tfhydra.logger.trackers import Trackers
from tfhydra.platform.keras_lib import keras


class TrackerCallback(keras.callbacks.Callback):
    def __init__(self, trackers: Trackers, history: Callable[[], list[dict]]) -> None:
        super().__init__()
        self.trackers, self.history = trackers, history

    def on_epoch_end(self, epoch, logs=None):
        self.trackers.log_history(self.history())


def epoch_loggers(trackers: Trackers, history: Callable[[], list[dict]]) -> list[keras.callbacks.Callback]:
    """[] when no tracker runs (TensorBoard only, or a worker that is not the chief)."""
    return [TrackerCallback(trackers, history)] if trackers.active else []
