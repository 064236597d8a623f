"""Every reach into TensorFlow's, tf_keras', OmegaConf's and Optuna's private API, in one place (the ground floor).

As tfhydra/config/hydra_api.py is for Hydra's internals: each function names what it borrows and why tfhydra
cannot do without it, so an upgrade of one of these packages is checked here, and tests/structure/test_imports.py fails
on a private name of theirs (`tf_keras.src`, `tensorflow.python`, `obj._name`) anywhere else. Checked against tensorflow
2.21.0, tf_keras 2.21.0, omegaconf 2.3.1 and optuna 5.0.0 (pyproject.toml's ranges). TensorFlow and tf_keras are
imported inside the functions, so the TensorFlow-free rooms (the plan's, the sweep's) may use it. A subclass's own use
of its Keras base's hooks and flags (`_log_weights` in trainer/histograms.py, `_supports_tf_logs`,
`_implements_train_batch_hooks`) stays with the subclass: the guard reads reaches into another object, not `self`.
"""

from __future__ import annotations

from typing import Any

# ---- OmegaConf: a config's nodes as written, without resolving them --------------------------------------------


def config_node(container: Any, key: Any) -> Any:
    """The node under `key` (`_get_node`): its type and unresolved value, which `cfg[key]` would resolve away; the
    schema compares a value's type with its default's, and reports an interpolation as written."""
    return container._get_node(key)


def node_value(node: Any) -> Any:
    """A leaf node's value as written (`_value()`: `${trainer.monitor}` stays a string)."""
    return node._value()


def omegaconf_resolvers() -> dict:
    """OmegaConf's table of registered resolvers (`BaseContainer._resolvers`), which Hydra's Singleton state carries
    to a launcher's worker as its own joblib launcher does (hydra_joblib_launcher/_core.py)."""
    from omegaconf.basecontainer import BaseContainer

    return BaseContainer._resolvers


# ---- TensorFlow ---------------------------------------------------------------------------------------------------


def op_determinism_enabled() -> bool:
    """`tensorflow.python.framework.config.is_op_determinism_enabled`: public `enable_op_determinism` has no public
    reader; deterministic runs read their files in a fixed order."""
    from tensorflow.python.framework import config

    return bool(config.is_op_determinism_enabled())


def disable_op_determinism() -> None:
    """`tensorflow.python.framework.config.disable_op_determinism` (no public counterpart): determinism is
    process-wide, and an earlier job of an in-process sweep must not leave it on."""
    from tensorflow.python.framework import config

    if config.is_op_determinism_enabled():
        config.disable_op_determinism()


def slurm_tasks_per_node(value: str) -> list[int]:
    """SLURM's `SLURM_STEP_TASKS_PER_NODE` (`2(x3),1`) expanded as TensorFlow's own SlurmClusterResolver reads it
    (`slurm_cluster_resolver.expand_tasks_per_node`), so tfhydra counts GPUs per node as the resolver will."""
    from tensorflow.python.distribute.cluster_resolver.slurm_cluster_resolver import expand_tasks_per_node

    return expand_tasks_per_node(value)


def is_trackable(value: Any) -> bool:
    """Whether a checkpoint can track `value` (`tf.__internal__.tracking.Trackable`): a multi-replica strategy's
    data iterator cannot be, so the custom loop checkpoints it only where it is."""
    import tensorflow as tf

    return isinstance(value, tf.__internal__.tracking.Trackable)


# ---- tf_keras -----------------------------------------------------------------------------------------------------


def keras_seed_generator() -> Any:
    """tf_keras' global seed generator (`tf_keras.src.backend._SEED_GENERATOR.generator`, None until seeded): what an
    initializer without a seed draws from; the memory estimate restores it after its symbolic build. None under
    Keras 3, which has no such generator (an unseeded initializer or Dropout draws its seed from Python's `random`
    when made, which the estimate restores itself): a keras=3 run then imports no tf_keras (docs/performance.md)."""
    from tfhydra.platform.keras_env import held_major  # not keras_lib, which asks this module

    if held_major() == 3:
        return None
    from tf_keras.src import backend

    return getattr(backend._SEED_GENERATOR, "generator", None)


def hold_back_device_check() -> None:
    """Mark tf_keras' mixed-precision device check as already logged (`device_compatibility_check.
    _logged_compatibility_check`): tfhydra says it once, in its own words (tfhydra/precision/build.py)."""
    from tf_keras.src.mixed_precision import device_compatibility_check

    device_compatibility_check._logged_compatibility_check = True


def reduce_per_replica(outputs: Any, strategy: Any, reduction: str) -> Any:
    """fit's own reduction of per-replica logs (`tf_keras.src.engine.training.reduce_per_replica`): the custom loop
    running a model's own `train_step` reports the same figures as fit."""
    from tf_keras.src.engine.training import reduce_per_replica as reduce

    return reduce(outputs, strategy, reduction=reduction)


def worker_training_state(model: Any, backup_dir: str, save_freq: int) -> Any:
    """Keras' BackupAndRestore state (`tf_keras.src.distribute.worker_training_state.WorkerTrainingState`): its
    checkpoint of the model, optimizer and saved epoch/batch, which tfhydra's resumable state extends. Keras 3 has
    none (its BackupAndRestore writes weight files and resumes at an epoch): `EpochTrainingState` keeps the same
    checkpoint in TensorFlow's format, resumed at the epoch after the saved one (`resume_fit_at`)."""
    from tfhydra.platform.keras_env import held_major  # not keras_lib, which asks this module

    if held_major() == 3:
        return EpochTrainingState(model, backup_dir)
    from tf_keras.src.distribute import worker_training_state as states

    return states.WorkerTrainingState(model, backup_dir, save_freq=save_freq)


class EpochTrainingState:
    """WorkerTrainingState's attributes for a Keras 3 model (which TensorFlow's checkpoint tracks as it does a
    tf_keras one): the model, its optimizer and the saved epoch and batch, in `<backup_dir>/chief`. Keras 3's fit
    starts only at an epoch's first step, so this state is saved at an epoch's end and nowhere else."""

    saves_mid_epoch = False

    def __init__(self, model: Any, backup_dir: str) -> None:
        import os

        import tensorflow as tf

        self._ckpt_saved_epoch = tf.Variable(-1, dtype=tf.int64, trainable=False)
        self._ckpt_saved_batch = tf.Variable(-1, dtype=tf.int64, trainable=False)
        checkpoint = tf.train.Checkpoint(
            model=model, optimizer=model.optimizer, epoch=self._ckpt_saved_epoch, batch=self._ckpt_saved_batch
        )
        manager = tf.train.CheckpointManager(checkpoint, os.path.join(backup_dir, "chief"), max_to_keep=1)
        self.read_checkpoint_manager = self.write_checkpoint_manager = manager


def saves_mid_epoch(state: Any) -> bool:
    """Whether the fit loop's state can be saved within an epoch and resumed there (tf_keras' can)."""
    return bool(getattr(state, "saves_mid_epoch", True))


def resume_fit_at(model: Any, state: Any) -> None:
    """After a restore: Keras 3's fit starts at `model._initial_epoch` (what its own BackupAndRestore sets), the
    epoch after the saved one; tf_keras' fit reads the attached state itself."""
    if isinstance(state, EpochTrainingState) and int(state._ckpt_saved_epoch.numpy()) >= 0:
        model._initial_epoch = int(state._ckpt_saved_epoch.numpy()) + 1


def attach_training_state(model: Any, state: Any) -> None:
    """`model._training_state`: where fit looks for the state to resume from; None detaches it."""
    if state is None:
        if hasattr(model, "_training_state"):
            del model._training_state
    else:
        model._training_state = state


def saved_epoch_and_batch(state: Any) -> tuple[Any, Any]:
    """The variables a WorkerTrainingState saves its position in (`_ckpt_saved_epoch`, `_ckpt_saved_batch`)."""
    return state._ckpt_saved_epoch, state._ckpt_saved_batch


def build_compiled_metrics(model: Any, y_pred: Any, y_true: Any) -> None:
    """Make the compiled loss's and metrics' objects and variables now (`compiled_loss.build`,
    `compiled_metrics.build`, tf_keras' compile_utils containers, whose `build` is not public API; `fit` calls
    them inside its first trace): a tf.function whose first trace creates variables is traced a second time
    without them, so variables made before `fit` halve its tracing (trainer/loops.py, docs/performance.md)."""
    if hasattr(model, "_compile_loss"):  # Keras 3: its trainer's CompileLoss/CompileMetrics, built (y_true, y_pred)
        for container in (model._compile_loss, model._compile_metrics):
            if container is not None and not container.built:
                container.build(y_true, y_pred)
        return
    if not model.compiled_loss.built:
        model.compiled_loss.build(y_pred)
    if not model.compiled_metrics.built:
        model.compiled_metrics.build(y_pred, y_true)


def metric_built(metric: Any) -> bool:
    """Whether a Keras 3 metric that makes its variables at its first update (R2Score, FBetaScore and F1Score, AUC
    with multi_label: `_built`, set by their own `_build`) has made them; True for any other metric. Keras has no
    public way to ask (tfhydra/platform/keras_lib.py: build_metric_variables)."""
    return bool(getattr(metric, "_built", True))


def compiled_metrics(model: Any) -> Any:
    """The compiled metrics' container, whose `update_state(y, y_pred)` and `metrics` the custom loop uses: tf_keras'
    public `compiled_metrics`; Keras 3's trainer keeps it as `_compile_metrics` (None without metrics), and its
    `compiled_metrics` is gone."""
    if hasattr(model, "_compile_metrics"):
        return model._compile_metrics or _NoMetrics()
    return model.compiled_metrics


class _NoMetrics:
    """Keras 3's missing container for a model compiled without metrics."""

    metrics: list = []

    def update_state(self, y_true: Any, y_pred: Any) -> None:
        return None


def made_by(tensor: Any) -> tuple[Any, list] | None:
    """(the layer, Keras 3: the operation, that made a symbolic tensor of a model's graph, the tensors it took), from
    the tensor's `_keras_history` and the node's `input_tensors`: neither Keras says publicly which layer made a
    model's output when a layer is used twice, and the head check reads that layer's activation. None: a tensor of
    no graph (an eager value)."""
    history = getattr(tensor, "_keras_history", None)
    if not history:
        return None
    layer, node_index = history[0], history[1]
    taken = layer._inbound_nodes[node_index].input_tensors
    return layer, list(taken) if isinstance(taken, (list, tuple)) else [taken]


def nested_layers(model: Any) -> list:
    """Every layer inside `model` at any depth (wrappers and nested models too): tf_keras' public `submodules`
    (its tf.Module's); a Keras 3 model is no tf.Module, its own walk is `_flatten_layers`."""
    if hasattr(model, "_flatten_layers") and not hasattr(model, "submodules"):
        return list(model._flatten_layers(include_self=False, recursive=True))
    return list(model.submodules)


def random_layer_states(model: Any) -> list:
    """What a model's random layers draw from, to be checkpointed: tf_keras' tf.random.Generators of each
    layer (`layer_random_generator`), or Keras 3's SeedGenerator state variables (`_flatten_layers`,
    `_seed_generators`: each layer's own, which the model's checkpoint does not name)."""
    if hasattr(model, "_seed_generators"):
        return [sg.state for layer in model._flatten_layers() for sg in layer._seed_generators]
    return [g for g in (layer_random_generator(layer) for layer in nested_layers(model)) if g is not None]


def optimizer_built(optimizer: Any) -> bool:
    """Whether the optimizer has made its slots (`_built`; Keras 3's public `built`): they must exist before a
    checkpoint restores them."""
    return bool(getattr(optimizer, "_built", False) or getattr(optimizer, "built", False))


def learning_rate_of(optimizer: Any) -> Any:
    """The optimizer's rate as set (`_learning_rate`: a float, variable or schedule; the public property reads a
    schedule's current value instead), which recovery wraps and later rescales."""
    return optimizer._learning_rate


def make_current_rate_variable(optimizer: Any) -> None:
    """tf_keras: the variable that holds a schedule's current rate (`_current_learning_rate`), made as the
    optimizer's constructor makes it (`_build_learning_rate`). The public setter that replaces a number with a
    schedule does not make it, so the first `apply_gradients` made it inside the train step: under a distribution
    strategy that fails in both loops ("You must feed a value for placeholder tensor"); elsewhere the first trace
    made it (a tf.function that makes variables is traced again: trainer/loops.py, make_step_variables)."""
    if not hasattr(optimizer, "_current_learning_rate"):
        optimizer._build_learning_rate(optimizer._learning_rate)


def moving_average_of(optimizer: Any, variable: Any) -> Any:
    """The EMA average the optimizer keeps for `variable` (`_model_variables_moving_average`, `_index_dict`,
    `_var_key`; Keras 3: `_get_variable_index`): neither Keras has a public accessor, and the averaged weights
    are swapped in for validation."""
    if hasattr(optimizer, "_get_variable_index"):  # Keras 3
        return optimizer._model_variables_moving_average[optimizer._get_variable_index(variable)]
    return optimizer._model_variables_moving_average[optimizer._index_dict[optimizer._var_key(variable)]]


def is_functional(model: Any) -> bool:
    """A Functional model (`_is_graph_network`), which the Model Optimization Toolkit can clone layer by layer; a
    subclassed model is not."""
    return bool(getattr(model, "_is_graph_network", False))


def layer_random_generator(layer: Any) -> Any:
    """A random layer's tf.random.Generator, created now rather than on its first call (`_random_generator`,
    `_maybe_init`, `_generator`), or None: Keras leaves them out of the model's checkpoint, and the custom loop saves
    them so a resumed run draws the same dropout masks."""
    import tensorflow as tf

    random: Any = getattr(layer, "_random_generator", None)
    if not hasattr(random, "_maybe_init"):
        return None
    random._maybe_init()
    generator = getattr(random, "_generator", None)
    return generator if isinstance(generator, tf.random.Generator) else None


# ---- Optuna -------------------------------------------------------------------------------------------------------


def trial_id(study: Any, number: int) -> int:
    """The storage id of the study's trial `number` (`study._storage`, `study._study_id`): the sweeper hands a job
    its trial's number (stable, readable), and Optuna's storage addresses a trial by id."""
    return study._storage.get_trial_id_from_study_id_trial_number(study._study_id, number)


def set_trial_attribute(study: Any, number: int, key: str, value: Any) -> None:
    """A user attribute on a trial the sweeper asked for but did not create itself (`study._storage`): the test
    figures shown beside its value."""
    study._storage.set_trial_user_attr(trial_id(study, number), key, value)
