"""Run `python train.py` as a user does, as a separate process, and check what it leaves: shared by the contract,
logger and property tests (tests/contract/test_faults.py and others), which stand in different rooms of tests/."""

import hashlib
import json
import os
import signal
import subprocess
import time
from pathlib import Path

import numpy as np
from conftest import ROOT, TESTS, ForkedProcess, read_run_record, run_cli, start_cli, start_module

# The seed MLP on digits with small batches: about 180 steps an epoch, so a signal lands mid-run.
BASE = ["model=mlp", "data.batch_size=8", "logging.histogram_freq=0"]


def start(
    run_dir: Path, *args: str, signal_log: Path | None = None, module: str | None = None
) -> subprocess.Popen | ForkedProcess:
    """`python train.py ARGS hydra.run.dir=RUN_DIR` (or `python -m MODULE ARGS ...`, a module of tests/) as a
    process of its own, its stderr on a file beside the run; forked from the test server as `run_cli` and
    `run_module` are (tests/conftest.py)."""
    env = {**os.environ, "PYTHONPATH": str(TESTS)}
    env.pop("HYDRA_FULL_ERROR", None)
    log = signal_log or run_dir.parent / f"{run_dir.name}.stderr"
    if module is None:
        return start_cli(*args, f"hydra.run.dir={run_dir}", cwd=ROOT, env=env, stderr=log)
    return start_module(module, *args, f"hydra.run.dir={run_dir}", cwd=ROOT, env=env, stderr=log)


def wait_for(process: subprocess.Popen, condition, timeout: float = 240) -> bool:
    """Poll `condition()` every few milliseconds while the process runs; True once it holds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and process.poll() is None:
        if condition():
            return True
        time.sleep(0.005)
    return False


def kill(process: subprocess.Popen, signum=signal.SIGKILL) -> int:
    if process.poll() is None:
        process.send_signal(signum)
    return process.wait(timeout=120)


def kill_when_ready(process: subprocess.Popen, ready, timeout: float = 240) -> None:
    """SIGKILL `process` once `ready()` holds. The run is frozen (SIGSTOP) while its files are read, so it is killed in
    the state that was read: without the freeze, an epoch's end could be saved between the look and the kill (seen
    in CI). A `ready` that reads a file caught mid-write may raise ValueError: it is asked again."""
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline and process.poll() is None:
            time.sleep(0.05)
            process.send_signal(signal.SIGSTOP)
            try:
                if ready():
                    break
            except ValueError:
                pass
            process.send_signal(signal.SIGCONT)
        assert process.poll() is None, "the run ended before it could be killed"
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()


def epochs_recorded(run_dir: Path) -> int:
    try:
        return len(json.loads((run_dir / "checkpoints" / "history.json").read_text())["epochs"])
    except (OSError, ValueError, KeyError):
        return 0


def finish(run_dir: Path, *args: str, epochs: int) -> dict:
    """Run the same command again: it must end the run completely."""
    result = run_cli(*args, f"hydra.run.dir={run_dir}")
    assert result.returncode == 0, result.stderr[-3000:]
    return check_complete(run_dir, epochs)


def check_complete(run_dir: Path, epochs: int) -> dict:
    import tensorflow as tf

    record = read_run_record(run_dir)
    assert record["status"] == "completed" and record["epochs_run"] == epochs == len(record["history"])
    assert not (run_dir / "checkpoints" / "state").exists()  # finished: nothing left to resume
    served = tf.saved_model.load(str(run_dir / "export" / "saved_model"))
    shape = [1, *record["data"]["input_shape"]]
    probabilities = served.serve(tf.zeros(shape)).numpy()
    assert probabilities.shape == (1, record["data"]["num_classes"])
    np.testing.assert_allclose(probabilities.sum(), 1.0, rtol=1e-5)
    assert not [p for p in (run_dir / "export").iterdir() if p.name.startswith(".")]  # no partial export left
    return record


def weights_digest(path):
    import h5py

    digest = hashlib.sha256()
    with h5py.File(path, "r") as f:
        f.visititems(
            lambda name, obj: (
                digest.update(name.encode() + np.asarray(obj).tobytes()) if isinstance(obj, h5py.Dataset) else None
            )
        )
    return digest.hexdigest()


def saved_step(state_dir):
    """Step within the epoch of the latest saved state (0 at an epoch boundary or when none)."""
    import tensorflow as tf

    try:
        latest = tf.train.latest_checkpoint(str(state_dir))
        return int(tf.train.load_variable(latest, "step/.ATTRIBUTES/VARIABLE_VALUE")) if latest else 0
    except Exception:  # noqa: BLE001  (caught mid-write: look again)
        return 0
