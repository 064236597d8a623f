"""The trainer room's base: the loop registry and what a loop is handed. The loops (loops.py's fit loop,
custom.py) import it and register themselves; `LOOPS` names both modules and imports them on its first lookup."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import tensorflow as tf

from tfhydra.config.registry import Registry
from tfhydra.record.rundir import RunPaths
from tfhydra.trainer.state import StopOnSignal

LOOPS = Registry("trainer.loop", locations=["tfhydra.trainer.loops", "tfhydra.trainer.custom"])  # fit, custom


@dataclass
class LoopContext:
    strategy: tf.distribute.Strategy
    paths: RunPaths
    stop: StopOnSignal | None = None  # SIGTERM/SIGUSR2/SIGINT: save the state at the next step boundary and stop
    diverged: Callable[[], bool] = lambda: False  # training blew up: its state is not saved (trainer.recovery)
