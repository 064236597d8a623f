"""Training loops `loop(cfg_trainer, model, datasets, callbacks, context)`, selected by `trainer.loop`.

Rooms: checks.py (what the run plan checks in the trainer section, no TensorFlow), base.py (the loop registry
and what a loop is handed), loops.py (the fit loop), custom.py (the tf.function loop), callbacks.py (the list a
run trains with: the recorder, best weights, TensorBoard), progress.py (an epoch's live bar), objectives.py (loss
and metrics), state.py (resumable state and signals), restore.py (which saved state a resumed run restores),
weights.py (the weights kept between attempts and exported), recovery.py (back to the last good state after a
blow-up), ema.py (EMA weights), debugging.py (numeric checks and where a NaN came from), and what TensorBoard
shows: histograms.py, gradients.py, pictures.py (examples, confusion matrix, mistakes), scatter.py (a regression's
predicted against true), summaries.py (their file writers), figures.py (labelled pictures with matplotlib), graph.py
(the Graphs tab).

This package's import stays TensorFlow-free so the run plan can read checks.py before TensorFlow
is loaded; the names below are looked up on first use (PEP 562).
schemas.py: the `trainer:` section's type (dataclasses, named by conf/'s YAML; docs/design.md "Typed configs").
"""

from __future__ import annotations

import importlib

_LAZY = {"LOOPS": "tfhydra.trainer.loops", "LoopContext": "tfhydra.trainer.loops", "train": "tfhydra.trainer.loops"}


def __getattr__(name: str):
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_LAZY[name]), name)


__all__ = sorted(_LAZY)
