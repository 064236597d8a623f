"""Optimizer builders `build_x(cfg_optimizer, learning_rate, **clipping)` and learning-rate schedules.

Rooms: checks.py (what the run plan checks, no TensorFlow), build.py (the registries and builders), accumulate.py
(trainer.accumulate_steps: N batches per update).

This face names nothing, so importing the package imports no TensorFlow; the names are imported from their
module: `from tfhydra.optimizer.build import OPTIMIZERS, SCHEDULES, build_optimizer, build_schedule,
plateau_callback`.
schemas.py: the options' types (dataclasses named by conf/'s YAML; docs/design.md
"Typed configs").
"""
