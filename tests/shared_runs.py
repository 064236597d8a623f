"""Trained runs shared by the whole test session: each is trained once per machine and read or copied by the tests
that need it, instead of every test training its own.

A session fixture runs once per xdist worker, so the run itself is made under a file lock in the directory the
workers share (the parent of each worker's base temp directory): the first worker to ask trains it, the others
wait and read the finished directory. A run is keyed by its command line, so two rooms that ask for the same
overrides share one run. A test that changes a run (resumes it, kills it, writes into it) works on `copy_run`'s
copy, never on the shared directory.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path

import pytest

_DONE = ".shared-run-done"
SHARED_DIR = "shared-runs"

# Runs many rooms can read (ask for these exact overrides to share one run; add your own where a room needs more):
# the default job (the seed CNN on the bundled digits) in two epochs with its default exports, and the MLP's.
DIGITS_CNN = ("trainer.epochs=2", "logging.histogram_freq=1")
DIGITS_MLP = ("model=mlp", "trainer.epochs=2", "logging.histogram_freq=0")


def shared_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The directory every xdist worker of this session sees (the base temp directory without xdist)."""
    base = tmp_path_factory.getbasetemp()
    root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    shared = root / SHARED_DIR
    shared.mkdir(exist_ok=True)
    return shared


def made_once(tmp_path_factory: pytest.TempPathFactory, name: str, make: Callable[[Path], None]) -> Path:
    """`<shared>/<name>/run`, made by `make(path)` by the first worker that asks; the others wait for it.

    A `make` that raises leaves no finished mark, so the next asker makes it again and sees the same error."""
    home = shared_root(tmp_path_factory) / name
    home.mkdir(exist_ok=True)
    with open(home / "lock", "w") as lock:
        asked = time.monotonic()
        fcntl.flock(lock, fcntl.LOCK_EX)
        waited = time.monotonic() - asked
        run = home / "run"
        if not (home / _DONE).exists():
            shutil.rmtree(run, ignore_errors=True)
            started = time.monotonic()
            make(run)
            (home / _DONE).touch()
            _account(home.parent, name, "made", time.monotonic() - started)
        if waited > 0.5:  # another worker was making it: this worker sat idle, and its test's time says so
            _account(home.parent, name, "waited", waited)
    return run


WAITS = "shared-runs.jsonl"


def _account(shared: Path, name: str, what: str, seconds: float) -> None:
    """One line per make and per wait, read by conftest's session summary: the suite's worker-seconds include
    every second one worker waits for another's shared run, which no test needs."""
    with open(shared / WAITS, "a") as log:
        log.write(json.dumps({"name": name, "what": what, "seconds": round(seconds, 2), "pid": os.getpid()}) + "\n")


def waits_summary(shared: Path) -> str | None:
    """'shared runs: N made in X s; workers waited Y s for them (top: ...)', or None when nothing was shared."""
    try:
        rows = [json.loads(line) for line in (shared / WAITS).read_text().splitlines() if line]
    except OSError:
        return None
    made = [r for r in rows if r["what"] == "made"]
    waits = sorted((r for r in rows if r["what"] == "waited"), key=lambda r: -r["seconds"])
    top = ", ".join(f"{r['name']} {r['seconds']:.0f} s" for r in waits[:5])
    return (
        f"shared runs: {len(made)} made in {sum(r['seconds'] for r in made):.0f} s; workers waited "
        f"{sum(r['seconds'] for r in waits):.0f} s for them{f' (longest: {top})' if top else ''}"
    )


def trained_run(tmp_path_factory: pytest.TempPathFactory, *overrides: str) -> Path:
    """The run directory of `python train.py OVERRIDES` (forked from the test server, as `run_cli`), trained once
    per session; the command must complete."""
    from conftest import run_cli

    key = hashlib.sha1("\0".join(overrides).encode()).hexdigest()[:10]
    slug = "-".join(o.split("=")[0].split(".")[-1] for o in overrides[:3]) or "default"

    def train(run: Path) -> None:
        result = run_cli(*overrides, f"hydra.run.dir={run}")
        assert result.returncode == 0, f"shared run {list(overrides)} failed:\n{result.stderr[-3000:]}"

    return made_once(tmp_path_factory, f"{slug}-{key}", train)


def copy_run(run: Path, to: Path) -> Path:
    """A private copy of a shared run for a test that resumes, breaks or writes into it."""
    shutil.copytree(run, to, symlinks=True)
    return to
