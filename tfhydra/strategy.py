"""Distribution strategy builders: `build_x(cfg_strategy) -> tf.distribute.Strategy`.

Model, optimizer and metrics are created inside `strategy.scope()` by the run; a
strategy builder only chooses devices.
"""
from __future__ import annotations

import tensorflow as tf

from tfhydra.registry import Registry

STRATEGIES = Registry("strategy")


def build_strategy(cfg_strategy) -> tf.distribute.Strategy:
    return STRATEGIES.build(cfg_strategy)


@STRATEGIES.register("default")
def build_default(cfg) -> tf.distribute.Strategy:
    return tf.distribute.get_strategy()


def describe_devices(strategy: tf.distribute.Strategy) -> dict:
    try:
        devices = list(strategy.extended.worker_devices)
    except RuntimeError:  # the default strategy places ops itself: report the first visible device
        gpus = tf.config.list_logical_devices("GPU")
        devices = [(gpus or tf.config.list_logical_devices("CPU"))[0].name]
    return {"strategy": type(strategy).__name__, "replicas": strategy.num_replicas_in_sync, "devices": devices}
