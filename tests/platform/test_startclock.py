"""The record times the wait a user sees (issue 37, item 2): `time_to_first_step_seconds` counts from the
command's own start, agrees with a clock started before the command, and its parts add up to it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest
from conftest import FAST, ROOT, TESTS

from tfhydra.platform import startclock


def test_the_process_start_is_the_kernels():
    """This process started before the test ran, and not before the machine booted."""
    assert startclock.PROCESS_START is not None and startclock.PROCESS_START < time.time()
    with open("/proc/uptime", encoding="ascii") as uptime:
        assert startclock.PROCESS_START > time.time() - float(uptime.read().split()[0]) - 1


def test_the_parts_add_up_and_a_missing_mark_is_zero(monkeypatch):
    monkeypatch.setattr(startclock, "_marks", {})
    startclock.start_job()  # no "main" mark: a job outside the command line counts from now
    origin = startclock._marks["origin"]
    startclock._marks.update(data=origin + 2.0, model=origin + 2.5)
    waited = startclock.startup(origin + 4.0)
    assert waited["origin"] == "job" and waited["seconds"] == pytest.approx(4.0)
    assert (
        waited["preflight"] == 0.0
        and waited["data"] == pytest.approx(2.0)
        and waited["first_step"] == pytest.approx(1.5)
    )
    assert sum(waited[p] for p in startclock.PHASES) == pytest.approx(waited["seconds"])


@pytest.mark.slow
def test_the_recorded_wait_agrees_with_a_clock_started_before_the_command(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(TESTS)}
    before = time.time()
    subprocess.run(
        [sys.executable, str(ROOT / "train.py"), "model=mlp", *FAST, f"hydra.run.dir={tmp_path}"],
        cwd=ROOT,
        env=env,
        check=True,
        capture_output=True,
        timeout=900,
        stdin=subprocess.DEVNULL,
    )
    record = json.loads((tmp_path / "metrics.json").read_text())
    waited = record["startup"]
    seen = record["first_step_unix_time"] - before  # the wall clock from before the command to the first step
    assert waited["origin"] == "process" and abs(record["time_to_first_step_seconds"] - seen) < 0.2
    assert sum(waited[p] for p in startclock.PHASES) == pytest.approx(waited["seconds"])
    assert all(waited[p] > 0 for p in startclock.PHASES), waited  # the command passed through every phase
