"""Validation every N optimizer steps (`trainer.val_every_steps`), in both loops, as Lightning's `val_check_interval`
and Orbit's evaluation interval do: for data whose epoch takes hours, the best-weights choice, early stopping,
`trainer.stop_at` / `trainer.max_minutes` and the validation curves do not wait for the epoch's end.

`StepValidation` validates after every N optimizer steps counted from each epoch's start (N x
`trainer.accumulate_steps` batches: an update is what a step is), as `trainer.save_every` counts its steps, and at
each epoch's end as without it. The loop hands it its own validation (`evaluate`: fit's `model.evaluate`, the custom
loop's compiled eval step), which runs on the EMA averages when `trainer.ema` is on and leaves the epoch's training
metrics as they were. Each validation goes, as a `Validation`, to the callbacks that decide on it (`on_validation`:
the best checkpoint, early stopping, the stop rules, the run recorder, the step-axis TensorBoard scalars); at an
epoch's end its figures are put in the epoch's logs, so everything that reads epochs (the record's history, the
epoch scalars, a plateau schedule, a sweep's pruner) reads them as before.

A resumed run (a signal, a kill, trainer.recovery) keeps the validations recorded up to the step it resumed from
(`kept_validations`: the schedule is fixed, so their number says which) and replays them into those callbacks
(`resume_validations`): the best so far and the patience counter are those of an uninterrupted run, and with the
custom loop's state saved on the validation steps (`trainer.save_every`), the run ends with the same weights.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import tensorflow as tf

from tfhydra.platform.keras_lib import keras, value_of
from tfhydra.trainer.ema import swap_averages
from tfhydra.trainer.summaries import SummaryCallback

log = logging.getLogger("tfhydra")


@dataclass(frozen=True)
class Validation:
    """One validation: in `epoch` (0-based), after `step` optimizer steps in all (TensorBoard's step axis), its
    `logs` ({val_loss: ..., val_<metric>: ...}) and the `seconds` it took."""

    epoch: int
    step: int
    logs: dict
    seconds: float = 0.0

    def record(self) -> dict:
        """What history.json and the record's `validations` keep: {epoch (from 1), step, val_...}."""
        return {"epoch": self.epoch + 1, "step": self.step, **self.logs}


class DecidesOnValidation:
    """Mixed in before a Keras callback that decides on validation figures (the best checkpoint, early stopping,
    the stop rules): `decide` at each epoch's end, or, once StepValidation took it (`per_validation`), at each
    validation it hands over, the epoch's end included (so none is judged twice)."""

    per_validation = False

    def on_epoch_end(self, epoch, logs=None):
        if not self.per_validation:
            self.decide(epoch, logs)

    def on_validation(self, validation: Validation) -> None:
        self.decide(validation.epoch, validation.logs, validation.step)

    def decide(self, epoch: int, logs, step: int | None = None) -> None:
        raise NotImplementedError


class StepValidation(keras.callbacks.Callback):
    """Validates every `every_steps` optimizer steps of an epoch and at its end (see the module's docstring)."""

    def __init__(self, every_steps: int, accumulate_steps: int = 1, ema: bool = False, recorded=lambda: []) -> None:
        super().__init__()
        self.every = every_steps * accumulate_steps  # batches between validations, from each epoch's start
        self.accumulate, self.ema, self.recorded = accumulate_steps, ema, recorded
        self.evaluate: Callable[[], dict] | None = None  # the loop's validation: {val_...} of the whole split
        self.consumers: list = []
        self._epoch = self._done = 0  # the epoch, and its batches done
        self._resuming = True  # the first batch says where training (re)starts
        self._validated: tuple[int, int] | None = None  # (epoch, batches done) of the last validation
        self._last: dict = {}

    def hand_to(self, callbacks: list) -> None:
        """Each validation goes to the callbacks with `on_validation`; those that judged epoch ends now judge these."""
        self.consumers = [c for c in callbacks if c is not self and callable(getattr(c, "on_validation", None))]
        for consumer in self.consumers:
            if hasattr(consumer, "per_validation"):
                consumer.per_validation = True

    def on_train_begin(self, logs=None):
        if self.evaluate is None:
            raise AssertionError("StepValidation: the training loop did not hand it its validation (evaluate)")
        self._resuming = True

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch, self._done, self._last = int(epoch), 0, {}

    def on_train_batch_begin(self, batch, logs=None):
        self._done = int(batch)  # the batches done before this call (a resumed fit hands a NumPy integer)
        if self._resuming:
            self._resuming = False
            kept = kept_validations(self.recorded(), self._epoch, self._done, self.every)
            for consumer in self.consumers:
                if callable(getattr(consumer, "resume_validations", None)):
                    consumer.resume_validations([dict(v) for v in kept])

    def on_train_batch_end(self, batch, logs=None):
        steps = self.params.get("steps") or 0
        done = min(int(batch) + 1, steps) if steps else int(batch) + 1  # Keras 3: a short last call as a whole one
        crossed = done // self.every > self._done // self.every
        self._done = done
        if crossed and (not steps or done < steps):  # the epoch's end validates anyway
            self.validate()

    def on_epoch_end(self, epoch, logs=None):
        if self._validated != (epoch, self._done):  # not already at this step (a run stopped by a validation)
            self.validate()
        if logs is not None:
            logs.update(self._last)

    def validate(self) -> None:
        assert self.evaluate is not None
        started = time.perf_counter()
        if self.ema:  # validated, and kept as the best, on the averaged weights; trained on the raw ones
            swap_averages(self.model)
        try:
            figures = self.evaluate()
            validation = Validation(self._epoch, self.global_step(), figures, time.perf_counter() - started)
            for consumer in self.consumers:
                consumer.on_validation(validation)
        finally:
            if self.ema:
                swap_averages(self.model)
        self._validated, self._last = (self._epoch, self._done), figures

    def global_step(self) -> int:
        """Optimizer steps (updates) so far: the batches of every epoch so far over trainer.accumulate_steps."""
        steps = self.params.get("steps")
        if not steps:
            return int(value_of(self.model.optimizer.iterations))
        return (int(self._epoch) * int(steps) + self._done) // self.accumulate

    def _implements_train_batch_hooks(self):
        return True


def kept_validations(recorded: list, epoch: int, batch: int, every: int) -> list[dict]:
    """The validations recorded before a run (re)starting at `batch` of `epoch` (both 0-based): every one of the
    earlier epochs and the first `batch // every` of this one (validation points `every`, 2 x `every`, ... of it; the
    epoch's end comes after them all). A later one was recorded ahead of the saved state: it is done again."""
    earlier = [v for v in recorded if isinstance(v, dict) and v.get("epoch", 0) <= epoch]
    this = [v for v in recorded if isinstance(v, dict) and v.get("epoch") == epoch + 1]
    return earlier + this[: batch // every]


@contextlib.contextmanager
def metrics_kept(metrics: list) -> Iterator[None]:
    """A mid-epoch validation resets and fills the metrics it shares with training: their accumulators are put back
    afterwards, so the epoch's training figures cover all of its steps, as without it."""
    variables = list({id(v): v for m in metrics for v in m.variables}.values())
    values = [value_of(v) for v in variables]
    try:
        yield
    finally:
        for variable, value in zip(variables, values, strict=True):
            variable.assign(value)


class ValidationScalars(SummaryCallback):
    """Each validation's figures on the optimizer-step axis, in tensorboard/validation/ as
    `evaluation_<metric>_vs_iterations` (Keras 3's TensorBoard name for the same thing). The epoch scalars stay as
    they are (`epoch_<metric>`, one point per epoch: the epoch's end validation)."""

    def __init__(self, directory) -> None:
        super().__init__(directory)

    def on_validation(self, validation: Validation) -> None:
        writer = self._writer(0)
        with writer.as_default(), tf.summary.record_if(True):
            for name, value in validation.logs.items():
                tf.summary.scalar(f"evaluation_{name.removeprefix('val_')}_vs_iterations", value, step=validation.step)
        writer.flush()


def step_validation(cfg_trainer, paths, recorded) -> list:
    """[StepValidation, and its TensorBoard scalars when `paths` is given] for `trainer.val_every_steps`, else []."""
    every = cfg_trainer.get("val_every_steps")
    if every is None:
        return []
    ema = cfg_trainer.ema.decay is not None
    validation = StepValidation(int(every), int(cfg_trainer.accumulate_steps), ema, recorded)
    log.info("trainer.val_every_steps=%d: validation every %d optimizer steps of an epoch and at its end", every, every)
    return [validation, *([ValidationScalars(paths.tensorboard_validation)] if paths is not None else [])]


def step_validator(callbacks: list) -> StepValidation | None:
    """The loop's StepValidation, to hand its validation to (None: validation at epoch ends, by the loop)."""
    return next((c for c in callbacks if isinstance(c, StepValidation)), None)
