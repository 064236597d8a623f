"""Optimizer builders: `build_x(cfg_optimizer) -> tf_keras optimizer`. `lr` is the learning rate."""
from __future__ import annotations

import tf_keras as keras

from tfhydra.registry import Registry

OPTIMIZERS = Registry("optimizer")


def build_optimizer(cfg_optimizer) -> keras.optimizers.Optimizer:
    return OPTIMIZERS.build(cfg_optimizer)


@OPTIMIZERS.register("adam")
def build_adam(cfg) -> keras.optimizers.Optimizer:
    return keras.optimizers.Adam(learning_rate=cfg.lr, beta_1=cfg.beta_1, beta_2=cfg.beta_2, epsilon=cfg.epsilon)


@OPTIMIZERS.register("sgd")
def build_sgd(cfg) -> keras.optimizers.Optimizer:
    return keras.optimizers.SGD(learning_rate=cfg.lr, momentum=cfg.momentum, nesterov=cfg.nesterov)
