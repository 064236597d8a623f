"""Recovery from a blow-up (`trainer.recovery`), as Model Garden's trainer does it: when the loss becomes NaN/Inf or
passes `trainer.max_loss` (RunRecorder stops training), or an op makes NaN under `trainer.check_numerics`, restore
the last good state, multiply the learning rate by `lr_factor` and train on, at most `max_trials` times; after
that the run ends diverged as without recovery.

- The last good state is the resumable state (checkpoints/state/) that both loops save at each epoch's end (and
  every `trainer.save_every` steps): training is simply started again and the loop resumes from it. A diverged
  epoch's state is never saved (`LoopContext.diverged`). A blow-up before the first save restores the weights
  and optimizer variables the run started with, kept in memory.
- The learning rate: with recovery on, the optimizer's rate (a constant or any schedule) is wrapped in
  `ScaledRate`, the rate times a `scale` variable, so one multiplication serves constants and schedules alike.
  The scale is not in the checkpoint: it is `lr_factor ** len(recoveries)`, the recoveries being kept in the
  run's history.json, so a resumed run trains at the rate it had reached. `optimizer.schedule=reduce_on_plateau`
  sets the rate itself and is refused with recovery (tfhydra/trainer/checks.py).
"""

from __future__ import annotations

import logging

import tensorflow as tf

from tfhydra.platform.keras_lib import keras, value_of, with_learning_rate
from tfhydra.platform.private_api import learning_rate_of
from tfhydra.platform.terminal import figure
from tfhydra.trainer.debugging import numeric_failure
from tfhydra.trainer.ema import optimizer_of
from tfhydra.trainer.loops import train

log = logging.getLogger("tfhydra")


@keras.saving.register_keras_serializable(package="tfhydra")
class ScaledRate(keras.optimizers.schedules.LearningRateSchedule):
    """`rate` (a number or a schedule) times `scale`, a variable recovery lowers. Registered, so a Keras that
    rebuilds the optimizer from its config (Keras 3 loading weights into a copy under mirrored) finds it."""

    def __init__(self, rate, scale: tf.Variable) -> None:
        self.rate, self.scale = rate, scale

    def __call__(self, step):
        rate = self.rate(step) if callable(self.rate) else self.rate
        return tf.cast(rate, tf.float32) * self.scale

    def get_config(self) -> dict:
        rate = keras.optimizers.schedules.serialize(self.rate) if callable(self.rate) else float(self.rate)
        return {"rate": rate, "scale": float(self.scale.numpy())}

    @classmethod
    def from_config(cls, config: dict) -> ScaledRate:
        rate = config["rate"]
        rate = keras.optimizers.schedules.deserialize(rate) if isinstance(rate, dict) else rate
        return cls(rate, tf.Variable(config["scale"], trainable=False, name="recovery_lr_scale"))


def scale_for_recovery(optimizer, cfg_recovery):
    """Before compile, in the strategy's scope: the optimizer's rate made scalable when recovery is on."""
    if not cfg_recovery.max_trials:
        return optimizer
    rate = learning_rate_of(optimizer)  # a schedule (callable), or a number or variable (Keras 3's: no tf.Variable)
    rate = rate if callable(rate) else float(value_of(rate))
    return with_learning_rate(optimizer, ScaledRate(rate, tf.Variable(1.0, trainable=False, name="recovery_lr_scale")))


def train_with_recovery(cfg_trainer, model: keras.Model, datasets, callbacks: list, context, recorder) -> None:
    """The training loop, again from the last good state after each blow-up while `trainer.recovery` allows."""
    context.diverged = lambda: recorder.diverged is not None
    recovery = cfg_trainer.recovery
    rate = learning_rate_of(optimizer_of(model))
    if isinstance(rate, ScaledRate):
        rate.scale.assign(recovery.lr_factor ** len(recorder.recoveries))
        start = initial_state(model, context.strategy)
    while True:
        train_once(cfg_trainer, model, datasets, callbacks, context, recorder)
        if recorder.diverged is None or len(recorder.recoveries) >= recovery.max_trials:
            return
        rate.scale.assign(rate.scale * recovery.lr_factor)
        learning_rate = float(rate(optimizer_of(model).iterations))
        if not any(context.paths.state.rglob("checkpoint")):  # nothing saved yet: start over
            restore_state(model, start)
        blow_up = recorder.diverged
        recorder.recovered(
            {"epoch": blow_up["epoch"], "step": blow_up["step"], "loss": blow_up["loss"], "lr": learning_rate}
        )
        log.warning(
            "recovery %d of %d (trainer.recovery.max_trials): back to the last good state, learning rate x%g (now %s)",
            len(recorder.recoveries),
            recovery.max_trials,
            recovery.lr_factor,
            figure(learning_rate),
        )


def train_once(cfg_trainer, model: keras.Model, datasets, callbacks: list, context, recorder) -> None:
    """One call of the loop; a check-numerics error (trainer.check_numerics) is a divergence, said as the op."""
    try:
        train(cfg_trainer, model, datasets, callbacks, context)
    except tf.errors.OpError as error:
        found = numeric_failure(error)
        if found is None:
            raise
        # Off from here: the weights may hold the NaN now, and saving them (or anything reading them eagerly)
        # would fail again. The steps traced so far keep their checks, so a recovered run is still checked.
        tf.debugging.disable_check_numerics()
        recorder.numeric_failure(found)


def initial_state(model: keras.Model, strategy) -> tuple[list, list]:
    """The weights and optimizer variables before the first step (the optimizer built now, as both loops do)."""
    optimizer = optimizer_of(model)
    with strategy.scope():
        optimizer.build(model.trainable_variables)
    return model.get_weights(), [v.numpy() for v in optimizer.variables]


def restore_state(model: keras.Model, state: tuple[list, list]) -> None:
    weights, optimizer_values = state
    model.set_weights(weights)
    for variable, value in zip(optimizer_of(model).variables, optimizer_values, strict=True):
        variable.assign(value)
