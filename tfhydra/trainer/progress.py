"""The live bar while an epoch trains, on a terminal only: one tqdm bar per epoch (steps, examples/s, ETA, the
running loss), redrawn by a thread so a batch end costs an assignment; the log's epoch line takes its place at the
epoch's end (tfhydra/platform/terminal.py decides whether there is a terminal to draw on).
"""

from __future__ import annotations

import threading
import time

from tfhydra.platform.keras_lib import keras
from tfhydra.platform.terminal import figure


def epoch_progress(verbose: int, batch_size: int) -> list[keras.callbacks.Callback]:
    """A live bar per epoch on a terminal (unless Keras draws its own, trainer.verbose=1); nothing otherwise."""
    from tfhydra.platform.terminal import wants_progress

    return [EpochProgress(batch_size)] if not verbose and wants_progress() else []


class EpochProgress(keras.callbacks.Callback):
    """One tqdm bar per epoch on stderr: steps of the epoch, examples/s, ETA, the running loss. A thread redraws it
    in place five times a second from what the loops last reported (every compiled call), so a batch end costs
    an assignment, not a terminal write (Keras would call the callback slow); it is removed at the epoch's end,
    where the log's epoch line takes its place, and never reaches train.log (a log handler), only the terminal."""

    REDRAW_SECONDS = 0.2

    def __init__(self, batch_size: int) -> None:
        super().__init__()
        self.batch_size, self.bar, self._latest = batch_size, None, (0, None)
        self._stop: threading.Event | None = None  # both set for each epoch on a terminal
        self._thread: threading.Thread | None = None
        # The loss is kept as the tensor Keras hands over and read only when the bar is redrawn: without this,
        # Keras would copy every batch's logs to NumPy for all callbacks, because this one has a batch hook.
        self._supports_tf_logs = True

    def on_epoch_begin(self, epoch, logs=None):
        import sys
        import threading

        from tfhydra.platform.terminal import progress_bar

        self._latest, self._stop = (0, None), threading.Event()
        self.bar = progress_bar(
            total=self.params.get("steps"),
            desc=f"epoch {epoch + 1}/{self.params.get('epochs')}",
            unit="step",
            leave=False,
            file=sys.stderr,
            mininterval=self.REDRAW_SECONDS,
            bar_format="{desc} {percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt} steps [{elapsed}<{remaining}{postfix}]",
        )
        self._thread = threading.Thread(
            target=self._redraw, args=(self.bar, self._stop, time.monotonic()), name="tfhydra-progress", daemon=True
        )
        self._thread.start()

    def on_train_batch_end(self, batch, logs=None):
        self._latest = (batch + 1, (logs or {}).get("loss"))

    def _redraw(self, bar, stop, started: float) -> None:
        while not stop.wait(self.REDRAW_SECONDS):
            done, loss = self._latest
            if done <= bar.n:
                continue
            postfix = {"examples/s": f"{done * self.batch_size / max(time.monotonic() - started, 1e-9):,.0f}"}
            if loss is not None:
                postfix = {"loss": figure(float(loss)), **postfix}
            bar.set_postfix(postfix, refresh=False)
            bar.update(done - bar.n)

    def on_epoch_end(self, epoch, logs=None):
        self.close()

    def on_train_end(self, logs=None):
        self.close()

    def close(self) -> None:
        if self._thread is not None and self._stop is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None
        if self.bar is not None:
            self.bar.close()
            self.bar = None
