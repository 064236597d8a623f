"""Shared fixtures: configs composed with Hydra's compose API, and the real CLI in a subprocess."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import tfhydra  # noqa: F401  (sets TF_USE_LEGACY_KERAS before any test imports TensorFlow)

ROOT = Path(__file__).resolve().parents[1]
CONFIG_DIR = ROOT / "conf"
TESTS = Path(__file__).resolve().parent

# Small and quick: one epoch, no per-epoch histograms unless a test asks for them.
FAST = ["trainer.epochs=1", "logging.histogram_freq=0"]


def compose_config(overrides=()):
    """The DictConfig `python train.py <overrides>` would run (also for module-scoped fixtures)."""
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        return compose(config_name="config", overrides=list(overrides))


@pytest.fixture
def compose_cfg():
    """compose_cfg(overrides) -> the DictConfig `python train.py <overrides>` would run."""
    return compose_config


def run_cli(*args: str, cwd: Path = ROOT, env: dict | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    """Run `python train.py ARGS` as a user would; tests/ is importable for user-code `_target_`s."""
    full_env = {**os.environ, "PYTHONPATH": str(TESTS), **(env or {})}
    full_env.pop("HYDRA_FULL_ERROR", None) if not (env or {}).get("HYDRA_FULL_ERROR") else None
    return subprocess.run([sys.executable, str(ROOT / "train.py"), *args], cwd=cwd, env=full_env,
                          capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else ""


def read_run_record(run_dir: Path) -> dict:
    """A run's metrics.json, read through the run record (tfhydra/record.py), as a plain dict."""
    from tfhydra.record import load_record

    return load_record(run_dir).as_dict()


def assert_failed_record(run_dir: Path, message: str) -> None:
    """A run stopped by a mistake found in the job still says so in its record, with the one line."""
    record = read_run_record(run_dir)
    assert record["status"] == "failed" and message in record["error"], record


# Property tests (Hypothesis) draw from this seed, printed in pytest's header so a failure can be replayed.
HYPOTHESIS_SEED = int(os.environ.get("TFHYDRA_HYPOTHESIS_SEED") or int.from_bytes(os.urandom(4), "little"))


def pytest_report_header(config):
    return f"hypothesis seed: {HYPOTHESIS_SEED} (replay: TFHYDRA_HYPOTHESIS_SEED={HYPOTHESIS_SEED} pytest ...)"
