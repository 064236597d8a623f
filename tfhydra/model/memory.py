"""Will the model fit? Its memory estimated before a byte of it is allocated.

A layer of 2³¹ units is a valid config, and Keras allocates its weights the moment the layer is built: the
process then dies by the kernel's OOM killer or in a traceback, after the start-up has been paid. So the job
first builds the model in a throwaway graph (`tf.Graph().as_default()`: Keras creates symbolic variables there,
no initializer runs, nothing is allocated; about 0.1 s for the seed models), counts its parameters and the
activations one example produces, and refuses in one line what cannot fit in the memory this process may take
(host memory, cgroup-aware: tfhydra/data/budget.py).

The estimate, per parameter: the weights, their gradient and the optimizer's slots (2 for Adam-like ones, 1 for
momentum SGD; +1 under EMA), 4 bytes each; per example of the batch: every layer's output kept for the backward
pass and its gradient, at the compute dtype's size. It is a floor (TensorFlow's workspace, the data pipeline and
the runtime come on top), so a refusal is never a false alarm; a model near the limit is trained and may still
run out. On an accelerator the device's own memory is the tighter bound; the host check still catches configs
that no machine would hold. A model that cannot be built in a graph (a builder doing eager work, a subclassed
model with no static shapes) is not estimated: it is built as before.
"""

from __future__ import annotations

import logging
import random

import numpy as np
from omegaconf import DictConfig

from tfhydra.config.contracts import DataSpec
from tfhydra.config.errors import ConfigError

log = logging.getLogger("tfhydra")


def estimated_bytes(
    cfg_model: DictConfig, spec: DataSpec, batch_size: int, slots: int, activation_bytes: int = 4
) -> tuple[int, int, int] | None:
    """(total bytes, parameters, activation values per example) of training the model, or None when it cannot be
    built symbolically."""
    import tensorflow as tf

    from tfhydra.model.build import build_model

    states = _random_states()  # the real build then draws the same initial weights as without this one
    try:
        with tf.Graph().as_default():
            # a graph seed of its own: under op determinism (trainer.deterministic=true, or a deterministic run
            # earlier in this process) an unseeded random op such as Dropout's refuses to be built
            tf.compat.v1.set_random_seed(0)
            model = build_model(cfg_model, spec, load_weights=False)  # its size, not its values
            parameters = int(model.count_params())
            per_example = sum(_values(layer) for layer in model.layers)
    except ConfigError:
        raise  # the builder's own checks answer first, as in the real build
    except Exception as error:  # noqa: BLE001  (user code that only runs eagerly: not estimated)
        log.debug("model memory not estimated (%s: %s)", type(error).__name__, error)
        return None
    finally:
        _restore_random_states(states)
    total = parameters * 4 * (2 + slots) + per_example * batch_size * activation_bytes * 2
    return total, parameters, per_example


def _random_states() -> tuple:
    """Python's, NumPy's and tf_keras' seed generator (what `keras.utils.set_random_seed` seeds and an initializer
    without a seed draws from, tfhydra/platform/private_api.py) as they are before the symbolic build."""
    from tfhydra.platform.private_api import keras_seed_generator

    generator = keras_seed_generator()
    return random.getstate(), np.random.get_state(), generator, generator.getstate() if generator else None


def _restore_random_states(states: tuple) -> None:
    random.setstate(states[0])
    np.random.set_state(states[1])
    if states[2] is not None:
        states[2].setstate(states[3])


def _values(layer) -> int:
    """Values one example makes in `layer`'s output (several outputs summed; unknown sizes count as 0)."""
    import tensorflow as tf

    shapes = layer.output_shape if isinstance(layer.output_shape, list) else [layer.output_shape]
    count = 0
    for shape in shapes:
        if isinstance(shape, tuple):
            count += int(tf.TensorShape(shape[1:]).num_elements() or 0)
    return count


def check_model_fits(cfg: DictConfig, spec: DataSpec) -> None:
    """One ConfigError when training `cfg.model` on `spec` needs more memory than this process may take."""
    from tfhydra.platform.hostmemory import available_memory, human

    slots = _optimizer_slots(cfg)
    half = cfg.precision.name in ("mixed", "bf16")  # 16-bit activations
    found = estimated_bytes(cfg.model, spec, int(cfg.data.batch_size), slots, 2 if half else 4)
    if found is None:
        return
    total, parameters, per_example = found
    available, where = available_memory()
    if total > available:
        raise ConfigError(
            "model",
            cfg.model.get("_target_", cfg.model.get("name")),
            f"a model whose training fits "
            f"the {human(available)} this process may take ({where}): fewer units, filters or layers, "
            "or a smaller data.batch_size",
            f"it needs at least {human(total)} ({parameters:.3g} "
            f"parameters with gradients and {slots} optimizer slot(s); {per_example:.3g} activation "
            f"values per example at batch {cfg.data.batch_size})",
        )


def _optimizer_slots(cfg: DictConfig) -> int:
    """Per-parameter state the optimizer keeps (Adam's two moments, SGD's momentum), plus EMA's average."""
    name = str(cfg.optimizer.name if "name" in cfg.optimizer else cfg.optimizer._target_).lower()
    return (1 if "sgd" in name else 2) + (1 if cfg.trainer.ema.decay is not None else 0)
