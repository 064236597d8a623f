"""The hand-written loop (`trainer.loop=custom`): tf.function train and eval steps around a
GradientTape, for per-step control.

It reports through the same Keras callbacks as fit, under the same metric names, so the
run contract is identical. A model whose class overrides `train_step` or `test_step` (a `tf.keras.Model` subclass
with its own step) has its own steps run instead of tfhydra's, inside the same compiled, strategy-run call, and
the dict they return is what is logged, as `model.fit` does (docs/training.md, "Your own train_step").

Its state (model, optimizer, data iterator, position in the epoch, metric accumulators, random generators) is
checkpointed every `trainer.save_every` so a killed run resumes exactly where the last save left it.
"""

from __future__ import annotations

import logging

import tensorflow as tf

from tfhydra.platform.keras_lib import gradients_to_apply, keras, scaled_loss, trackable_metrics
from tfhydra.platform.private_api import compiled_metrics, is_trackable, random_layer_states
from tfhydra.trainer.base import LOOPS, LoopContext
from tfhydra.trainer.restore import restore_newest_readable
from tfhydra.trainer.schemas import TrainerConfig
from tfhydra.trainer.state import KEEP, stop_for
from tfhydra.trainer.validation import metrics_kept, step_validator

log = logging.getLogger("tfhydra")


@LOOPS.register("custom")
def custom_loop(
    cfg_trainer: TrainerConfig, model: keras.Model, datasets, callbacks: list, context: LoopContext
) -> None:
    CustomLoop(cfg_trainer, model, datasets, context).run(callbacks)


class CustomLoop:
    """One run of the custom loop: its compiled steps, its checkpointed state, and the epochs around them.

    `epoch` and `step` are variables in the checkpoint, so a resumed run continues where the last save left
    it: mid-epoch (every `trainer.save_every` steps) or at an epoch's end."""

    def __init__(self, cfg_trainer: TrainerConfig, model: keras.Model, datasets, context: LoopContext) -> None:
        self.cfg, self.model, self.datasets, self.context = cfg_trainer, model, datasets, context
        self.strategy, self.steps_per_epoch = context.strategy, datasets.steps_per_epoch
        # One iterator over all epochs (repeat after batch keeps epoch boundaries), so its
        # shuffle state is part of the checkpoint and a resumed run sees the same batches.
        self.iterator = iter(
            self.strategy.experimental_distribute_dataset(datasets.prefetched(datasets.train.repeat()))
        )
        self.epoch = tf.Variable(0, dtype=tf.int64, trainable=False)
        self.step = tf.Variable(0, dtype=tf.int64, trainable=False)
        self.own_steps = has_own_steps(model)
        if self.own_steps:
            log.info("trainer.loop=custom runs %s's own train_step/test_step", type(model).__name__)
        self.last_logs: dict | None = None  # what the model's own step returned last
        self.objective = per_example_objective(model.loss)
        self.loss_tracker = keras.metrics.Mean(name="loss")  # mean per-example loss, synced over replicas
        jit = jit_setting(cfg_trainer.jit_compile)
        eager = cfg_trainer.run_eagerly  # print(), breakpoint() and NumPy see concrete tensors
        train_steps, eval_step = (
            (self._own_train_steps, self._own_eval_step) if self.own_steps else (self._train_steps, self._eval_step)
        )
        self.train_steps = train_steps if eager else tf.function(train_steps, jit_compile=jit)
        self.eval_step = eval_step if eager else tf.function(eval_step, jit_compile=jit)
        self.metrics = self._build_accumulators()
        self.manager, self.directory, checkpoint = self._checkpoint()
        stop = context.stop
        # under multi_worker, one signal stops every worker after the same step
        self.stop = (
            stop_for(stop, self.strategy, checkpoint, self.directory).check if stop is not None else (lambda save: None)
        )
        self.save_every = None if cfg_trainer.save_every == "epoch" else int(cfg_trainer.save_every)
        every = cfg_trainer.val_every_steps  # in updates: N x accumulate_steps batches
        self.validate_every = None if every is None else int(every) * cfg_trainer.accumulate_steps

    # ---- the compiled steps (traced once) ----------------------------------------------------------------------
    def _average_loss(self, y, y_pred):
        """The replica's share of the global-batch mean, as tf.distribute expects its gradients."""
        per_example = self.objective(y, y_pred)
        self.loss_tracker.update_state(per_example)
        loss = tf.nn.compute_average_loss(per_example)
        if self.model.losses:
            loss += tf.nn.scale_regularization_loss(tf.add_n(self.model.losses))
        return loss

    def _replica_step(self, data):
        x, y = data
        model = self.model
        with tf.GradientTape() as tape:
            y_pred = model(x, training=True)
            loss = scaled_loss(model.optimizer, self._average_loss(y, y_pred))
        gradients = tape.gradient(loss, model.trainable_variables)
        # Clips per trainer.clip_*; the LossScaleOptimizer skips steps whose gradients are not finite.
        model.optimizer.apply_gradients(
            zip(gradients_to_apply(model.optimizer, gradients), model.trainable_variables, strict=True)
        )
        compiled_metrics(model).update_state(y, y_pred)

    def _train_steps(self, iterator, count):
        for _ in tf.range(count):
            self.strategy.run(self._replica_step, args=(next(iterator),))

    def _replica_eval(self, batch):
        x, y = batch
        y_pred = self.model(x, training=False)
        self._average_loss(y, y_pred)
        compiled_metrics(self.model).update_state(y, y_pred)

    def _eval_step(self, data):
        self.strategy.run(self._replica_eval, args=(data,))

    # ---- the model's own steps (a subclass overriding train_step / test_step) --------------------------------------
    def _own_step(self, step, data) -> dict:
        """`step(data)` on every replica; its returned logs reduced over the replicas as model.fit reduces them
        (tf_keras' own `reduce_per_replica` with the model's `distribute_reduction_method`: "auto" sums them,
        except on a TPU)."""
        from tfhydra.platform.private_api import reduce_per_replica  # fit's function: the same figures as fit

        outputs = self.strategy.run(step, args=(data,))
        reduced = reduce_per_replica(outputs, self.strategy, reduction=self.model.distribute_reduction_method)
        return tf.nest.map_structure(tf.convert_to_tensor, reduced)

    def _own_train_steps(self, iterator, count):
        logs = self._own_step(self.model.train_step, next(iterator))
        for _ in tf.range(count - 1):
            logs = self._own_step(self.model.train_step, next(iterator))
        return logs

    def _own_eval_step(self, data):
        return self._own_step(self.model.test_step, data)

    def _logs(self, returned) -> dict[str, float]:
        """The epoch's figures so far: what the model's own step returned last, else the accumulators. As in
        model.fit, a returned dict whose keys are the model's metrics' names is replaced by their results."""
        if self.own_steps and returned is not None and set(returned) != {m.name for m in self.metrics}:
            return plain_logs(returned)
        return metric_values(self.metrics)

    # ---- the state a resumed run continues from ------------------------------------------------------------------
    def _build_accumulators(self) -> list:
        """Optimizer slots and metric accumulators exist only after their first use; create them now (one
        evaluation batch, then reset) so the checkpoint tracks them and a restore fills them."""
        with self.strategy.scope():  # slots must be mirrored like the variables they belong to
            self.model.optimizer.build(self.model.trainable_variables)
        self.layer_generators = random_layer_generators(self.model, self.strategy)
        for batch in self.strategy.experimental_distribute_dataset(self.datasets.validation.take(1)):
            self.eval_step(batch)
        metrics = (
            list(self.model.metrics) if self.own_steps else [self.loss_tracker, *compiled_metrics(self.model).metrics]
        )
        reset(metrics)
        return metrics

    def _checkpoint(self):
        state = dict(
            model=self.model,
            optimizer=self.model.optimizer,
            epoch=self.epoch,
            step=self.step,
            metrics=trackable_metrics(self.metrics),
            rng=tf.random.get_global_generator(),
            layer_rngs=self.layer_generators,
        )
        if is_trackable(self.iterator):
            state["iterator"] = self.iterator
        else:  # a multi-replica strategy's iterator cannot be checkpointed: a resumed run restarts the data order
            log.warning(
                "%s: the data iterator is not checkpointed; a resumed run re-reads the data from the start",
                type(self.strategy).__name__,
            )
        checkpoint = tf.train.Checkpoint(**state)
        directory = self.context.paths.state  # a non-chief worker's own (one run directory may serve the cluster)
        if not self.strategy.extended.should_checkpoint:
            directory = directory / f"worker_{self.strategy.cluster_resolver.task_id}"
        manager = tf.train.CheckpointManager(checkpoint, str(directory), max_to_keep=KEEP)
        restored = restore_newest_readable(checkpoint, directory, self.strategy)
        if restored:
            log.info("resumed from %s at epoch %d, step %d", restored, int(self.epoch) + 1, int(self.step))
        return manager, directory, checkpoint

    def _save(self) -> str:
        self.manager.save()
        return f"epoch {int(self.epoch) + 1}, step {int(self.step)} ({self.manager.directory})"

    # ---- the epochs ------------------------------------------------------------------------------------------------
    def run(self, callbacks: list) -> None:
        """The epochs, in the strategy's cross-replica context as `model.fit` runs its own: a callback that updates
        distributed variables eagerly (the Model Optimization Toolkit's mask update at an epoch's end) finds the
        strategy's, not the default replica context's merge_call, which failed on a MirroredVariable."""
        with self.strategy.scope():
            self._epochs(callbacks)

    def _epochs(self, callbacks: list) -> None:
        cfg, model = self.cfg, self.model
        callback_list = keras.callbacks.CallbackList(
            callbacks, model=model, epochs=cfg.epochs, steps=self.steps_per_epoch, verbose=0
        )
        model.stop_training = False
        validation = step_validator(callbacks)  # trainer.val_every_steps: it validates, at epoch ends too
        if validation is not None:
            validation.evaluate = self._evaluate_within_epoch
        callback_list.on_train_begin()
        while int(self.epoch) < cfg.epochs and not model.stop_training:
            current, self.last_logs = int(self.epoch), None
            if int(self.step) == 0:
                reset(self.metrics)
            callback_list.on_epoch_begin(current)
            self._train_epoch(callback_list)
            # a validation that stopped the run mid-epoch (patience, a target) ends the epoch as fit does
            if model.stop_training and (validation is None or self.context.diverged()):
                break
            train_logs = self._logs(self.last_logs)
            val_logs = self._validate(callback_list) if validation is None else {}
            self.epoch.assign_add(1)
            self.step.assign(0)
            # The record may run ahead of the state, never behind: a run killed before the save
            # redoes this epoch, and RunRecorder drops the record it is ahead by.
            callback_list.on_epoch_end(current, {**train_logs, **val_logs})
            if self.context.diverged():  # a blown-up state is never saved: recovery goes back to the last good one
                break
            self.manager.save()
            self.stop(lambda current=current: f"the end of epoch {current + 1} ({self.manager.directory})")
        # trainer.ema: the averaged weights into the model, as model.fit does at its end
        model.optimizer.finalize_variable_values(model.trainable_variables)
        callback_list.on_train_end()

    def _train_epoch(self, callback_list) -> None:
        """The rest of the epoch from `step`, `trainer.steps_per_execution` steps per compiled call; an execution
        ends on each save point, so saves happen where asked."""
        cfg, step, steps = self.cfg, self.step, self.steps_per_epoch
        progress = keras.utils.Progbar(steps, verbose=cfg.verbose) if cfg.verbose else None
        while int(step) < steps:
            count = min(cfg.steps_per_execution, steps - int(step))
            for every in (self.save_every, self.validate_every):
                if every:
                    count = min(count, every - int(step) % every)
            callback_list.on_train_batch_begin(int(step))
            self.last_logs = self.train_steps(self.iterator, tf.constant(count))
            step.assign_add(count)
            logs = self._logs(self.last_logs)
            if progress:
                progress.update(int(step), list(logs.items()))
            callback_list.on_train_batch_end(int(step) - 1, logs)
            if self.model.stop_training:
                return
            if self.save_every and int(step) % self.save_every == 0 and int(step) < steps:
                self.manager.save()
            self.stop(self._save)

    def _validate(self, callback_list) -> dict:
        callback_list.on_test_begin()
        val_logs = self._evaluate()
        callback_list.on_test_end(val_logs)
        return val_logs

    def _evaluate(self) -> dict:
        reset(self.metrics)
        returned = None
        for batch in self.strategy.experimental_distribute_dataset(self.datasets.prefetched(self.datasets.validation)):
            returned = self.eval_step(batch)
        return {f"val_{name}": value for name, value in self._logs(returned).items()}

    def _evaluate_within_epoch(self) -> dict:
        """StepValidation's validation: the training accumulators, which evaluation shares, put back afterwards."""
        with metrics_kept(self.metrics):
            return self._evaluate()


def has_own_steps(model: keras.Model) -> bool:
    """Whether the model's class brings its own `train_step` or `test_step` (then both of the model's steps run,
    an inherited one being Keras' own, as under model.fit)."""
    return any(getattr(type(model), name) is not getattr(keras.Model, name) for name in ("train_step", "test_step"))


def plain_logs(returned) -> dict[str, float]:
    """A step's returned dict as numbers for the callbacks: its scalar entries (a dict-valued entry, such as a
    metric returning a dict, flattened one level; anything not a scalar left out, as Keras' progress bar does)."""
    flat = {}
    for name, value in returned.items() if isinstance(returned, dict) else []:
        items = value.items() if isinstance(value, dict) else [(name, value)]
        flat.update({k: float(v) for k, v in items if getattr(v, "shape", ()) == ()})
    return flat


def random_layer_generators(model: keras.Model, strategy) -> list:
    """The tf.random.Generator of each random layer (Dropout & co.), created now rather than on first use (Keras 3:
    each layer's SeedGenerator state).

    Keras keeps these out of the model's checkpoint on purpose (backward compatibility), so
    without saving them ourselves a resumed run would draw different dropout masks.
    tf_keras' exist only with `enable_tf_random_generator()` (trainer.deterministic=true).
    """
    with strategy.scope():
        return random_layer_states(model)


def per_example_objective(loss):
    """The compiled loss, unreduced: a Keras loss function as is, a `Loss` object through its `call`."""
    return loss.call if isinstance(loss, keras.losses.Loss) else loss


def reset(metrics) -> None:
    for metric in metrics:
        metric.reset_state()


def metric_values(metrics) -> dict[str, float]:
    values = {}
    for metric in metrics:
        result = metric.result()
        values.update(
            {k: float(v) for k, v in result.items()} if isinstance(result, dict) else {metric.name: float(result)}
        )
    return values


def jit_setting(value) -> bool:
    """`auto` keeps XLA off: on CPU it slowed the seed CNN (docs/training.md); no GPU measurement yet."""
    return value is True
