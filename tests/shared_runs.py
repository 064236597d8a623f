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
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

_DONE = ".shared-run-done"

# Runs many rooms can read (ask for these exact overrides to share one run; add your own where a room needs more):
# the default job (the seed CNN on the bundled digits) in two epochs with its default exports, and the MLP's.
DIGITS_CNN = ("trainer.epochs=2", "logging.histogram_freq=1")
DIGITS_MLP = ("model=mlp", "trainer.epochs=2", "logging.histogram_freq=0")


def shared_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The directory every xdist worker of this session sees (the base temp directory without xdist)."""
    base = tmp_path_factory.getbasetemp()
    root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    shared = root / "shared-runs"
    shared.mkdir(exist_ok=True)
    return shared


def made_once(tmp_path_factory: pytest.TempPathFactory, name: str, make: Callable[[Path], None]) -> Path:
    """`<shared>/<name>/run`, made by `make(path)` by the first worker that asks; the others wait for it.

    A `make` that raises leaves no finished mark, so the next asker makes it again and sees the same error."""
    home = shared_root(tmp_path_factory) / name
    home.mkdir(exist_ok=True)
    with open(home / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        run = home / "run"
        if not (home / _DONE).exists():
            shutil.rmtree(run, ignore_errors=True)
            make(run)
            (home / _DONE).touch()
    return run


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
