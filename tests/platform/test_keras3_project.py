"""A user's own `import keras` model from a project directory outside the checkout (issue 45's acceptance):
`tfhydra-train keras=3 model=mine`, killed with SIGKILL mid-epoch and run again, ends bit for bit where an
uninterrupted run ends, and `tfhydra-predict` answers from its export. The kill and compare are
tests/contract/test_resume.py's, on Keras 3 (custom loop, deterministic: the Dropout's seed state resumes too)."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
from conftest import ROOT, read_run_record, run_cli
from run_processes import kill_when_ready, saved_step, weights_digest

BIN = Path(sys.executable).parent
ARGS = [
    "keras=3",
    "model=mine",
    "trainer.loop=custom",
    "trainer.deterministic=true",
    "trainer.epochs=3",
    "trainer.save_every=7",
    "logging.histogram_freq=0",
]
BUILDER = '''
import keras
import tensorflow as tf


def build_mine(spec, units: int = 16):
    """A keras.io-style functional model; `tf.keras` must be the same Keras in a keras=3 run."""
    assert tf.keras.Model is keras.Model
    inputs = keras.Input(spec.input_shape)
    x = keras.layers.Flatten()(inputs)
    x = keras.layers.Dense(units, activation="relu")(x)
    x = keras.layers.Dropout(0.25)(x)
    outputs = keras.layers.Dense(spec.num_classes, activation="softmax")(x)
    return keras.Model(inputs, outputs, name="mine")
'''


def project(directory: Path) -> Path:
    (directory / "conf" / "model").mkdir(parents=True)
    (directory / "conf" / "model" / "mine.yaml").write_text("_target_: mymodels.build_mine\nunits: 16\n")
    (directory / "mymodels.py").write_text(BUILDER)
    return directory


def env() -> dict:
    return {"PATH": f"{BIN}:/usr/bin:/bin", "PYTHONPATH": str(ROOT), "HOME": os.environ.get("HOME", "/tmp")}


def command(name: str, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(BIN / name), *args],
        cwd=cwd,
        env=env(),
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
    )


def kill_mid_epoch(project_dir: Path, run_dir: Path) -> int:
    """Start the run, SIGKILL it once an epoch is recorded and a mid-epoch state is saved; the epochs recorded."""
    process = subprocess.Popen(
        [str(BIN / "tfhydra-train"), *ARGS, f"hydra.run.dir={run_dir}"],
        cwd=project_dir,
        env=env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
    )
    history, state = run_dir / "checkpoints" / "history.json", run_dir / "checkpoints" / "state"
    kill_when_ready(process, lambda: history.exists() and saved_step(state) > 0)
    assert not (run_dir / "metrics.json").exists()
    return len(json.loads(history.read_text())["epochs"])


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_an_import_keras_model_from_a_project_resumes_bit_identically_and_predicts(tmp_path):
    mine = project(tmp_path / "myproject")
    killed, reference = tmp_path / "killed", tmp_path / "reference"
    epochs_before = kill_mid_epoch(mine, killed)
    assert 1 <= epochs_before < 3 and saved_step(killed / "checkpoints" / "state") > 0

    resumed = command("tfhydra-train", *ARGS, f"hydra.run.dir={killed}", cwd=mine)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "resumed from" in (killed / "train.log").read_text()
    # the uninterrupted run to compare with: the same command and project, forked from the tests' Keras 3 server
    # (one Keras 3 import fewer; the installed command is the one killed and resumed above)
    uninterrupted = run_cli(*ARGS, f"hydra.run.dir={reference}", cwd=mine)
    assert uninterrupted.returncode == 0, uninterrupted.stderr[-3000:]
    a, b = (read_run_record(d) for d in (killed, reference))
    assert a["status"] == b["status"] == "completed" and a["keras"]["major"] == 3 and a["model"] == "mine"
    assert a["resumed"]["kind"] == "saved_state" and a["resumed"]["epoch"] == epochs_before
    assert a["history"] == b["history"]
    assert weights_digest(killed / "checkpoints" / "last.weights.h5") == weights_digest(
        reference / "checkpoints" / "last.weights.h5"
    )

    x = np.random.default_rng(1).uniform(0, 16, (6, 8, 8)).astype("float32")  # digits as stored
    np.save(tmp_path / "x.npy", x)
    predicted = command("tfhydra-predict", str(killed), str(tmp_path / "x.npy"), cwd=mine)
    assert predicted.returncode == 0, predicted.stderr[-2000:]
    served = tf.saved_model.load(str(killed / "export" / "saved_model")).signatures["serving_default"]
    (probabilities,) = served(inputs=tf.constant(x)).values()
    names = a["data"]["class_names"]
    found = list(csv.DictReader(io.StringIO(predicted.stdout)))
    assert [r["class_1"] for r in found] == [names[i] for i in probabilities.numpy().argmax(axis=1)]
