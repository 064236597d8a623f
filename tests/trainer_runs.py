"""Runs the trainer's rooms share (tests/trainer/): each trained once per session across xdist workers by
tests/shared_runs.py and read by several tests, instead of each test training its own."""

from __future__ import annotations

from pathlib import Path

import pytest
from shared_runs import trained_run


def gradients_overrides(loop: str) -> tuple[str, ...]:
    """Two epochs of the default CNN with weight and gradient histograms every epoch and the default export."""
    return (
        f"trainer.loop={loop}",
        "trainer.epochs=2",
        "trainer.steps_per_execution=4",
        "logging.histogram_freq=1",
        "logging.gradients=true",
        "logging.images_freq=0",
    )


def gradients_run(tmp_path_factory: pytest.TempPathFactory, loop: str) -> Path:
    """The run of `gradients_overrides(loop)`: read it, or copy it (shared_runs.copy_run) before writing into it."""
    return trained_run(tmp_path_factory, *gradients_overrides(loop))
