"""`trainer.accumulate_steps=N`: the gradients of N batches summed into one update (a large effective batch on a
small GPU), for both loops and every distribution strategy.

The accumulation lives in the optimizer, where both loops meet: `model.fit`'s step (`optimizer.minimize`) and the
custom loop's `apply_gradients` hand it each batch's gradients, already averaged over the batch (and over the
replicas: the optimizer all-reduces them first). It adds `gradient / N` to an accumulator per variable and every
N-th batch applies the accumulated gradient through the optimizer's own `apply_gradients` (clipping, weight
decay, EMA and the update itself, on the summed gradient: what one batch N times larger would give), then
zeroes the accumulators. For a model without batch-dependent layers (BatchNorm), batch B with N steps trains the
same weights as batch N*B, to float tolerance (tests/optimizer/test_accumulate.py).

As `LossScaleOptimizer` does, the cross-replica part runs in a `merge_call`: a `tf.cond` whose branch calls
`merge_call` (the wrapped update does) is not allowed in a replica context. Under `precision=mixed` the loss
scale optimizer wraps this one: each batch's gradients are unscaled before they are accumulated, and a batch whose
gradients are not finite is skipped (its step counts, as a skipped step does without accumulation).

`optimizer.iterations` counts updates, so a learning-rate schedule given in epochs runs over the run's updates
(tfhydra/optimizer/build.py gives it steps_per_epoch / N). The accumulators and the batch counter are optimizer
variables: checkpoints keep them, so a run resumed mid-accumulation continues it exactly.

Under `keras=3` the optimizer accumulates by Keras 3's own `gradient_accumulation_steps` (the seam,
tfhydra/platform/keras_lib.py `accumulates_itself`): the same sum of N batches' gradients in one update, its
accumulators and batch counter optimizer variables as well; one replica only (keras-team/keras#20582).
"""

from __future__ import annotations

import tensorflow as tf

from tfhydra.config.errors import ConfigError
from tfhydra.platform.keras_lib import accumulates_itself, keras


class AccumulatedSteps(keras.optimizers.Optimizer):
    """Mixed in before a tf_keras optimizer class (`accumulating`): its `apply_gradients` accumulates. Never
    built alone: `accumulating` makes a subclass of the built optimizer's class with this first."""

    accumulate_steps = 1
    _accumulated: list | None = None  # one accumulator per variable, made by `build`

    def build(self, var_list) -> None:
        super().build(var_list)  # the optimizer class this is mixed into
        if self._accumulated is not None:
            return
        self._accumulated = [self.add_variable_from_reference(v, "accumulated") for v in var_list]
        self._batches = self.add_variable((), dtype=tf.int64, initializer="zeros", name="accumulated_batches")

    def apply_gradients(self, grads_and_vars, name=None, skip_gradients_aggregation=False, **kwargs):
        grads_and_vars = [(g, v) for g, v in grads_and_vars if g is not None]
        variables = [v for _, v in grads_and_vars]
        with tf.init_scope():
            self.build(variables)
        if not skip_gradients_aggregation and kwargs.pop("experimental_aggregate_gradients", True):
            grads_and_vars = self.aggregate_gradients(grads_and_vars)  # the replicas' sum, as the update would
        grads = [g for g, _ in grads_and_vars]
        steps = self.accumulate_steps
        update = super().apply_gradients  # the optimizer's own: clipping, weight decay, EMA, the update

        def accumulate_then_maybe_apply(distribution, grads):
            for accumulated, grad in zip(self._accumulated_for(variables), grads, strict=True):
                distribution.extended.update(accumulated, _add_share, args=(grad, steps), group=False)
            batches = self._batches.assign_add(1)

            def apply() -> None:
                distribution.extended.call_for_each_replica(
                    lambda: update(
                        list(zip([a.read_value() for a in self._accumulated_for(variables)], variables, strict=True)),
                        name=name,
                        skip_gradients_aggregation=True,
                    )
                )
                for accumulated in self._accumulated_for(variables):
                    distribution.extended.update(accumulated, _zero, group=False)

            tf.cond(tf.equal(batches % steps, 0), apply, lambda: None)

        tf.distribute.get_replica_context().merge_call(accumulate_then_maybe_apply, args=(grads,))
        return self.iterations

    def _accumulated_for(self, variables) -> list:
        """The accumulators of `variables` (the ones `build` made, in the optimizer's own variable order)."""
        accumulated = self._accumulated or []
        return [accumulated[self._index_dict[self._var_key(v)]] for v in variables]


def _add_share(accumulated, grad, steps):
    return accumulated.assign_add(tf.cast(grad, accumulated.dtype) / steps)


def _zero(accumulated):
    return accumulated.assign(tf.zeros_like(accumulated))


def accumulating(optimizer, steps: int):
    """`optimizer`, made to accumulate `steps` batches per update (unchanged when steps is 1). Under tf_keras its
    class becomes a subclass of its own with `AccumulatedSteps` first, so every setting it was built with (learning
    rate and schedule, clipping, EMA) stays as built, and `isinstance` checks on its class still hold; a Keras 3
    optimizer accumulates by itself."""
    if steps <= 1:
        return optimizer
    if not isinstance(optimizer, keras.optimizers.Optimizer):
        raise ConfigError(
            "trainer.accumulate_steps",
            steps,
            "1 with this optimizer, or an optimizer of tf_keras.optimizers (not tf_keras.optimizers.legacy)",
            f"{type(optimizer).__name__} is not a tf_keras.optimizers.Optimizer",
        )
    try:
        if accumulates_itself(optimizer, steps):  # keras=3: the optimizer's own gradient_accumulation_steps
            return optimizer
    except ValueError as cannot:
        accepted = "1 over several replicas with keras=3, or keras=2"
        raise ConfigError("trainer.accumulate_steps", steps, accepted, str(cannot)) from None
    cls = type(optimizer)
    optimizer.__class__ = type(cls.__name__, (AccumulatedSteps, cls), {"accumulate_steps": steps})
    return optimizer
