"""The run's Keras, handed to every room: `from tfhydra.platform.keras_lib import keras` (docs/keras.md).

`keras` is tf_keras (Keras 2, `keras=2`, the default and compression's only path) or Keras 3's `keras` package
(`keras=3`), decided once per process from TF_USE_LEGACY_KERAS (tfhydra/platform/keras_env.py sets it from the
composed config before TensorFlow loads), so it is always the Keras that `tf.keras` means. What differs between the
two and a room needs is a function here (or, for private names, in tfhydra/platform/private_api.py); no other room
asks which Keras it runs on. Importing this module imports TensorFlow's Keras: only rooms that build or train do.
"""

from __future__ import annotations

import logging
from typing import Any

from tfhydra.platform.keras_env import environment_major

MAJOR = environment_major()  # 2 | 3: the process's Keras, fixed at its first import

if MAJOR == 3:
    import keras
else:
    import tf_keras as keras

KERAS3 = MAJOR == 3
log = logging.getLogger("tfhydra")
# What a model builder must return, said to a user whose builder returned something else
MODEL_ACCEPTED = (
    "a builder returning a keras.Model (keras=3: Keras 3)"
    if KERAS3
    else "a builder returning a tf_keras.Model (keras=2; an `import keras` model runs with keras=3, docs/keras.md)"
)


def keras_record() -> dict:
    """What metrics.json records of the run's Keras: its major version and the package's own version."""
    return {"major": MAJOR, "version": keras.__version__}


def variable_tag(variable: Any) -> str:
    """A weight's TensorBoard name, layer-qualified under either Keras: tf_keras' `conv2d/kernel:0` as
    `conv2d/kernel_0`; Keras 3 names a variable without its layer (`kernel`), its `path` with it (`conv2d/kernel`)."""
    return variable.path if KERAS3 else variable.name.replace(":", "_")


def clear_session() -> None:
    """A new Keras session (layer names, graphs) for the next job in this process, as tf_keras makes it: Keras 3's
    `clear_session` also runs a full garbage collection unless told not to, 0.2 s of CPU at the start of every run
    in a process that has loaded TensorFlow (docs/performance.md); a sweep's worker collects between jobs itself
    (tfhydra/launch/worker_process.py)."""
    if KERAS3:
        keras.backend.clear_session(free_memory=False)
    else:
        keras.backend.clear_session()


def fit_steps_per_execution(requested: int, strategy: Any) -> int:
    """The steps of one compiled call of `fit`: as asked, except Keras 3 over several replicas, whose multi-step
    train function fails there ("You must feed a value for placeholder tensor", keras-team/keras#19246, open), so it
    runs one step per call (the custom loop keeps its own `trainer.steps_per_execution`)."""
    if KERAS3 and strategy.num_replicas_in_sync > 1 and requested > 1:
        log.info(
            "keras=3 over %d replicas: fit runs 1 step per call (keras-team/keras#19246)", strategy.num_replicas_in_sync
        )
        return 1
    return requested


def build_metric_variables(metrics: list, strategy: Any, model: Any) -> None:
    """Keras 3 over several replicas: a metric that makes its variables at its first update (R2Score, F1Score, AUC
    with multi_label) would make them inside the replicated train step, which fails there ("You must feed a value
    for placeholder tensor", the family of keras-team/keras#19246). One eager update on a zero batch, in the
    strategy's scope where the model's were made, makes them before training; `reset_state` forgets the batch.
    tf_keras' metrics make theirs when made. A metric named by a string (`accuracy`) Keras makes inside `fit`, and a
    model without one output of a known width (a subclassed one) is left to it: neither is reached here."""
    if not KERAS3 or strategy.num_replicas_in_sync < 2:
        return
    outputs = getattr(model, "outputs", None) or []
    if len(outputs) != 1 or outputs[0].shape[-1] is None:
        return
    import numpy as np

    from tfhydra.platform.private_api import metric_built

    zeros = np.zeros((1, outputs[0].shape[-1]), "float32")
    with strategy.scope():
        for metric in metrics:
            if isinstance(metric, keras.metrics.Metric) and not metric_built(metric):
                metric.update_state(zeros, zeros)
                metric.reset_state()


def snapshot(variable: Any) -> Any:
    """A variable's current value as a tensor that later assignments leave alone (tf_keras: `read_value`; a Keras 3
    variable has none: its TensorFlow variable read through `tf.identity`)."""
    if KERAS3:
        import tensorflow as tf

        return tf.identity(variable.value)
    return variable.read_value()


def value_of(tensor: Any) -> Any:
    """A variable's or tensor's value as NumPy (tf_keras' `backend.get_value`; Keras 3 has `ops.convert_to_numpy`)."""
    return keras.ops.convert_to_numpy(tensor) if KERAS3 else keras.backend.get_value(tensor)


def scaled_loss(optimizer: Any, loss: Any) -> Any:
    """The loss the custom loop differentiates: multiplied by the loss scale under float16 (a LossScaleOptimizer),
    as is otherwise. tf_keras: `get_scaled_loss`; Keras 3: `scale_loss`, which every Keras 3 optimizer has (the
    identity without a scale)."""
    if KERAS3:
        return optimizer.scale_loss(loss)
    if isinstance(optimizer, keras.mixed_precision.LossScaleOptimizer):
        return optimizer.get_scaled_loss(loss)
    return loss


def loss_scale_of(optimizer: Any) -> float | None:
    """The dynamic loss scale of a LossScaleOptimizer (tf_keras: `loss_scale`; Keras 3: `dynamic_scale`), or None
    when the optimizer does not scale."""
    if not isinstance(optimizer, keras.mixed_precision.LossScaleOptimizer):
        return None
    return float(value_of(optimizer.dynamic_scale if KERAS3 else optimizer.loss_scale))


def gradients_to_apply(optimizer: Any, gradients: list) -> list:
    """The gradients of `scaled_loss` as the optimizer's `apply_gradients` takes them: tf_keras' LossScaleOptimizer
    takes them unscaled (`get_unscaled_gradients`); Keras 3's takes the scaled ones, unscales them itself and skips
    a step whose gradients are not finite."""
    if not KERAS3 and isinstance(optimizer, keras.mixed_precision.LossScaleOptimizer):
        return optimizer.get_unscaled_gradients(gradients)
    return gradients


def track_random_generators(enabled: bool) -> None:
    """Dropout & co. drawing from variables that checkpoints track, so a resumed run draws the same masks. tf_keras
    switches it on process-wide (`enable_tf_random_generator`); Keras 3 layers always draw from a SeedGenerator,
    whose state variable is the layer's own (nothing to switch)."""
    if KERAS3:
        return
    if enabled:
        keras.backend.experimental.enable_tf_random_generator()
    else:
        keras.backend.experimental.disable_tf_random_generator()


def trackable_metrics(metrics: list) -> list:
    """The metric accumulators as a checkpoint takes them: tf_keras' metrics are trackable; Keras 3's are not (its
    `Metric` is no TensorFlow Trackable), their variables are."""
    return [v for m in metrics for v in m.variables] if KERAS3 else metrics


def with_learning_rate(optimizer: Any, rate: Any) -> Any:
    """`optimizer` with `rate` (a schedule) as its learning rate, every other setting as built. tf_keras' setter
    keeps the optimizer checkpointable; Keras 3's drops the rate variable it replaces from the optimizer's variable
    list, which TensorFlow's checkpoint then refuses to save ("A list element was replaced ... deleted"), so a
    Keras 3 optimizer (not built yet) is made again from its config with `rate`. Called in the strategy's scope:
    tf_keras' variable for the schedule's current rate is made here, beside the optimizer's own (private_api)."""
    if not KERAS3:
        from tfhydra.platform.private_api import make_current_rate_variable

        optimizer.learning_rate = rate
        make_current_rate_variable(optimizer)
        return optimizer
    return type(optimizer).from_config({**optimizer.get_config(), "learning_rate": rate})


def accumulates_itself(optimizer: Any, steps: int) -> bool:
    """`trainer.accumulate_steps=N` by the optimizer's own means: Keras 3's optimizers have
    `gradient_accumulation_steps` (set here, before they are built; True), tf_keras' nothing of the kind (False:
    tfhydra's mixin does it, tfhydra/optimizer/accumulate.py). Keras 3 calls a learning-rate schedule with its
    batch counter, so a schedule given in updates (tfhydra/optimizer/build.py) is asked at `batches // N`: the
    rate of the update the batch belongs to, as under tf_keras. Raises ValueError (said by the caller as the
    key's one line) over several replicas, where Keras 3's conditional update cannot run (keras-team/keras#20582)."""
    if not KERAS3:
        return False
    import tensorflow as tf

    from tfhydra.platform.private_api import learning_rate_of

    replicas = tf.distribute.get_strategy().num_replicas_in_sync
    if replicas > 1:
        raise ValueError(
            f"Keras 3's gradient accumulation cannot update over {replicas} replicas (keras-team/keras#20582)"
        )
    optimizer.gradient_accumulation_steps = steps
    rate = learning_rate_of(optimizer)
    if isinstance(rate, keras.optimizers.schedules.LearningRateSchedule):
        optimizer.learning_rate = PerUpdate(rate, steps)
    return True


@keras.saving.register_keras_serializable(package="tfhydra")
class PerUpdate(keras.optimizers.schedules.LearningRateSchedule):
    """A schedule given in updates, asked with a batch counter: the rate of batch `step`'s update."""

    def __init__(self, schedule: Any, steps: int) -> None:
        self.schedule, self.steps = schedule, steps

    def __call__(self, step: Any) -> Any:
        return self.schedule(step // self.steps)

    def get_config(self) -> dict:
        return {"schedule": keras.optimizers.schedules.serialize(self.schedule), "steps": self.steps}

    @classmethod
    def from_config(cls, config: dict) -> PerUpdate:
        return cls(keras.optimizers.schedules.deserialize(config["schedule"]), config["steps"])
