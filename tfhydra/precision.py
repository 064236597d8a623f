"""Precision options: each names the Keras global dtype policy for one run.

The policy is process-global, and several sweep jobs can run in one process, so it is
set for the duration of a run and restored afterwards (`policy_scope`).
"""
from __future__ import annotations

import contextlib
from typing import Iterator

import tf_keras as keras

from tfhydra.registry import Registry

PRECISIONS = Registry("precision")


@PRECISIONS.register("fp32")
def build_fp32(cfg) -> str:
    return "float32"


@contextlib.contextmanager
def policy_scope(cfg_precision) -> Iterator[keras.mixed_precision.Policy]:
    previous = keras.mixed_precision.global_policy()
    keras.mixed_precision.set_global_policy(PRECISIONS.build(cfg_precision))
    try:
        yield keras.mixed_precision.global_policy()
    finally:
        keras.mixed_precision.set_global_policy(previous)
