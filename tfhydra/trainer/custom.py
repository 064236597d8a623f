"""The hand-written loop (`trainer.loop=custom`): tf.function train and eval steps around a
GradientTape, for per-step control.

It reports through the same Keras callbacks as fit, under the same metric names, so the
run contract is identical. Its state (model, optimizer, data iterator, position in the
epoch, metric accumulators, random generators) is checkpointed every `trainer.save_every`
so a killed run resumes exactly where the last save left it.
"""
from __future__ import annotations

import logging

import tensorflow as tf
import tf_keras as keras

from tfhydra.trainer.loops import LOOPS, LoopContext
from tfhydra.trainer.state import KEEP, restore_newest_readable, stop_for

log = logging.getLogger("tfhydra")


@LOOPS.register("custom")
def custom_loop(cfg_trainer, model: keras.Model, datasets, callbacks: list, context: LoopContext) -> None:
    strategy, steps_per_epoch = context.strategy, datasets.steps_per_epoch
    jit = jit_setting(cfg_trainer.jit_compile)
    # One iterator over all epochs (repeat after batch keeps epoch boundaries), so its
    # shuffle state is part of the checkpoint and a resumed run sees the same batches.
    train_iterator = iter(strategy.experimental_distribute_dataset(datasets.prefetched(datasets.train.repeat())))
    epoch, step = tf.Variable(0, dtype=tf.int64, trainable=False), tf.Variable(0, dtype=tf.int64, trainable=False)

    objective = per_example_objective(model.loss)
    loss_tracker = keras.metrics.Mean(name="loss")  # mean per-example loss, synced over replicas
    scaling = isinstance(model.optimizer, keras.mixed_precision.LossScaleOptimizer)  # compile wraps it under mixed

    def average_loss(y, y_pred):
        """The replica's share of the global-batch mean, as tf.distribute expects its gradients."""
        per_example = objective(y, y_pred)
        loss_tracker.update_state(per_example)
        loss = tf.nn.compute_average_loss(per_example)
        if model.losses:
            loss += tf.nn.scale_regularization_loss(tf.add_n(model.losses))
        return loss

    def replica_step(data):
        x, y = data
        with tf.GradientTape() as tape:
            y_pred = model(x, training=True)
            loss = average_loss(y, y_pred)
            if scaling:
                loss = model.optimizer.get_scaled_loss(loss)
        gradients = tape.gradient(loss, model.trainable_variables)
        if scaling:
            gradients = model.optimizer.get_unscaled_gradients(gradients)
        # Clips per trainer.clip_*; the LossScaleOptimizer skips steps whose gradients are not finite.
        model.optimizer.apply_gradients(zip(gradients, model.trainable_variables))
        model.compiled_metrics.update_state(y, y_pred)

    @tf.function(jit_compile=jit)
    def train_steps(iterator, count):
        for _ in tf.range(count):
            strategy.run(replica_step, args=(next(iterator),))

    @tf.function(jit_compile=jit)
    def eval_step(data):
        def replica_eval(batch):
            x, y = batch
            y_pred = model(x, training=False)
            average_loss(y, y_pred)
            model.compiled_metrics.update_state(y, y_pred)
        strategy.run(replica_eval, args=(data,))

    # Optimizer slots and metric accumulators exist only after their first use; create them
    # now (one evaluation batch, then reset) so the checkpoint tracks and a restore fills them.
    with strategy.scope():  # slots must be mirrored like the variables they belong to
        model.optimizer.build(model.trainable_variables)
    layer_generators = random_layer_generators(model, strategy)
    for batch in strategy.experimental_distribute_dataset(datasets.validation.take(1)):
        eval_step(batch)
    metrics = [loss_tracker, *model.compiled_metrics.metrics]
    reset(metrics)
    state = dict(model=model, optimizer=model.optimizer, epoch=epoch, step=step, metrics=metrics,
                 rng=tf.random.get_global_generator(), layer_rngs=layer_generators)
    if isinstance(train_iterator, tf.__internal__.tracking.Trackable):
        state["iterator"] = train_iterator
    else:  # a multi-replica strategy's iterator cannot be checkpointed: a resumed run restarts the data order
        log.warning("%s: the data iterator is not checkpointed; a resumed run re-reads the data from the start",
                    type(strategy).__name__)
    checkpoint = tf.train.Checkpoint(**state)
    directory = context.paths.state  # a non-chief worker's own (one run directory may serve the whole cluster)
    if not strategy.extended.should_checkpoint:
        directory = directory / f"worker_{strategy.cluster_resolver.task_id}"
    manager = tf.train.CheckpointManager(checkpoint, str(directory), max_to_keep=KEEP)
    restored = restore_newest_readable(checkpoint, directory, strategy)
    if restored:
        log.info("resumed from %s at epoch %d, step %d", restored, int(epoch) + 1, int(step))

    def save() -> str:
        manager.save()
        return f"epoch {int(epoch) + 1}, step {int(step)} ({manager.directory})"

    stop = stop_for(context.stop, strategy, checkpoint, directory).check if context.stop is not None \
        else lambda save: None  # under multi_worker, one signal stops every worker after the same step
    save_every_steps = None if cfg_trainer.save_every == "epoch" else int(cfg_trainer.save_every)

    callback_list = keras.callbacks.CallbackList(callbacks, model=model, epochs=cfg_trainer.epochs,
                                                 steps=steps_per_epoch, verbose=0)
    gradient_writer = tf.summary.create_file_writer(str(context.paths.tensorboard_train)) \
        if context.histogram_freq else None
    model.stop_training = False
    callback_list.on_train_begin()
    while int(epoch) < cfg_trainer.epochs and not model.stop_training:
        current = int(epoch)
        if int(step) == 0:
            reset(metrics)
        callback_list.on_epoch_begin(current)
        progress = keras.utils.Progbar(steps_per_epoch, verbose=cfg_trainer.verbose) if cfg_trainer.verbose else None
        while int(step) < steps_per_epoch:
            count = min(cfg_trainer.steps_per_execution, steps_per_epoch - int(step))
            if save_every_steps:  # end an execution on each save point, so saves happen where asked
                count = min(count, save_every_steps - int(step) % save_every_steps)
            callback_list.on_train_batch_begin(int(step))
            train_steps(train_iterator, tf.constant(count))
            step.assign_add(count)
            logs = metric_values(metrics)
            if progress:
                progress.update(int(step), list(logs.items()))
            callback_list.on_train_batch_end(int(step) - 1, logs)
            if model.stop_training:
                break
            if save_every_steps and int(step) % save_every_steps == 0 and int(step) < steps_per_epoch:
                manager.save()
            stop(save)
        if model.stop_training:
            break
        train_logs = metric_values(metrics)
        if gradient_writer and (current + 1) % context.histogram_freq == 0:
            write_gradient_summaries(model, datasets.train, gradient_writer, current)
        callback_list.on_test_begin()
        reset(metrics)
        for batch in strategy.experimental_distribute_dataset(datasets.prefetched(datasets.validation)):
            eval_step(batch)
        val_logs = {f"val_{name}": value for name, value in metric_values(metrics).items()}
        callback_list.on_test_end(val_logs)
        epoch.assign_add(1)
        step.assign(0)
        # The record may run ahead of the state, never behind: a run killed before the save
        # redoes this epoch, and RunRecorder drops the record it is ahead by.
        callback_list.on_epoch_end(current, {**train_logs, **val_logs})
        manager.save()
        stop(lambda: f"the end of epoch {current + 1} ({manager.directory})")
    callback_list.on_train_end()


def random_layer_generators(model: keras.Model, strategy) -> list:
    """The tf.random.Generator of each random layer (Dropout & co.), created now rather than on first use.

    Keras keeps these out of the model's checkpoint on purpose (backward compatibility), so
    without saving them ourselves a resumed run would draw different dropout masks.
    They exist only with `enable_tf_random_generator()` (trainer.deterministic=true).
    """
    generators = []
    with strategy.scope():
        for layer in model.submodules:
            random = getattr(layer, "_random_generator", None)
            if hasattr(random, "_maybe_init"):
                random._maybe_init()
                if isinstance(getattr(random, "_generator", None), tf.random.Generator):
                    generators.append(random._generator)
    return generators


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
        values.update({k: float(v) for k, v in result.items()} if isinstance(result, dict) else {metric.name: float(result)})
    return values


def write_gradient_summaries(model: keras.Model, train: tf.data.Dataset, writer, epoch: int) -> None:
    """Per-variable gradient norms and histograms on one training batch (an extra forward/backward pass)."""
    x, y = next(iter(train))
    with tf.GradientTape() as tape:
        loss = model.compute_loss(x, y, model(x, training=False), None)
    gradients = tape.gradient(loss, model.trainable_variables)
    with writer.as_default(step=epoch):
        for variable, gradient in zip(model.trainable_variables, gradients):
            if gradient is not None:
                name = variable.name.replace(":", "_")
                tf.summary.scalar(f"gradient_norm/{name}", tf.norm(gradient))
                tf.summary.histogram(f"gradients/{name}", gradient)
    writer.flush()


def jit_setting(value) -> bool:
    """`auto` keeps XLA off: on CPU it slowed the seed CNN (docs/training.md); no GPU measurement yet."""
    return value is True
