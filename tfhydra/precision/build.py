"""Precision options: each names the Keras global dtype policy for one run.

The policy is process-global, and several sweep jobs can run in one process, so it is
set for the duration of a run and restored afterwards (`policy_scope`). Loss scaling:
`model.compile` wraps the optimizer in a `LossScaleOptimizer` by itself under
`mixed_float16`; the custom loop uses that same wrapper (tfhydra/trainer/custom.py).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator

import tensorflow as tf

from tfhydra.config.registry import Registry
from tfhydra.platform.keras_lib import keras, loss_scale_of
from tfhydra.precision.schemas import PrecisionConfig

PRECISIONS = Registry("precision", locations=["tfhydra.precision.build"])  # the builders below
log = logging.getLogger("tfhydra")
_warned_cpu = False


@PRECISIONS.register("fp32", schema=PrecisionConfig)
def build_fp32(cfg) -> str:
    return "float32"


@PRECISIONS.register("mixed", schema=PrecisionConfig)
def build_mixed(cfg) -> str:
    return "mixed_float16"


@PRECISIONS.register("bf16", schema=PrecisionConfig)
def build_bf16(cfg) -> str:
    return "mixed_bfloat16"


@contextlib.contextmanager
def policy_scope(cfg_precision) -> Iterator[keras.mixed_precision.Policy]:
    previous = keras.mixed_precision.global_policy()
    policy = PRECISIONS.build(cfg_precision)
    warn_if_slow(policy)
    keras.mixed_precision.set_global_policy(policy)
    try:
        yield keras.mixed_precision.global_policy()
    finally:
        keras.mixed_precision.set_global_policy(previous)


def warn_if_slow(policy: str) -> None:
    """Once per process: float16 has no fast path on CPUs, so a mixed run there is slower than fp32.

    tf_keras says the same on the first mixed_float16 policy of a process, in four lines ("Mixed precision
    compatibility check (mixed_float16): WARNING ..."): one warning per condition, so where tfhydra says it, tf_keras'
    check is marked done (its module flag, the one way it offers). With a GPU tfhydra says nothing, and tf_keras'
    check (which names a GPU without fast float16) still speaks."""
    global _warned_cpu
    if policy != "mixed_float16" or tf.config.list_physical_devices("GPU"):
        return
    _hold_back_keras_device_check()
    if not _warned_cpu:
        _warned_cpu = True
        log.warning("precision=mixed without a GPU: float16 is emulated on CPU and slower than fp32; running anyway")


def _hold_back_keras_device_check() -> None:
    from tfhydra.platform.private_api import hold_back_device_check

    hold_back_device_check()  # tf_keras' "logged once" flag


def float32_output(model: keras.Model) -> keras.Model:
    """A model whose output is not float32 (a user's `_target_` model under a mixed policy)
    gets a float32 cast appended, so losses and exports see float32 probabilities."""
    # Keras 3: a Sequential has no `output`; tf_keras: a subclassed model has no `outputs` (None), but an `output`
    output = model.outputs[0] if model.outputs and len(model.outputs) == 1 else model.output
    if tf.as_dtype(output.dtype) == tf.float32:
        return model
    outputs = keras.layers.Activation("linear", dtype="float32", name="float32_output")(output)
    return keras.Model(model.inputs, outputs, name=model.name)


def loss_scale(optimizer) -> float | None:
    """The dynamic loss scale at the end of a run (None when the optimizer does not scale)."""
    return loss_scale_of(optimizer)
