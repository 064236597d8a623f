"""A sweep's `reproduce:` line runs as printed from where the sweep ran (tfhydra/platform/command.py
`reproduce_command`): the config flags typed and the import path a notebook handed its sweep come along."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from conftest import ROOT

from tfhydra.platform.command import config_flags


def test_the_config_flags_of_a_command_line_are_found_in_every_spelling():
    argv = ["python", "train.py", "-m", "--config-dir", "/p/conf", "-cn=exp", "--config-path=c", "-cp", "x", "a=1"]
    assert config_flags(argv) == ["--config-dir", "/p/conf", "-cn=exp", "--config-path=c", "-cp", "x"]
    assert config_flags(["train.py", "model=cnn", "--config-dir"]) == []  # a flag without its value: not a flag


NOTEBOOK = r"""
import sys
from pathlib import Path
import tfhydra
project = Path("my_project").absolute()
sys.path.insert(0, str(project))
tfhydra.multirun(["model=tiny", "debug=fast", "optimizer.lr=1e-3,3e-3"], config_dir=project / "conf",
                 sweep_dir="sweep")
"""


@pytest.mark.slow
def test_the_notebook_sweeps_reproduce_line_runs_as_printed_from_its_directory(tmp_path):
    project = tmp_path / "my_project"
    (project / "conf" / "model").mkdir(parents=True)
    (project / "mymodels.py").write_text(
        "import tensorflow as tf\nfrom tfhydra.model.head import task_head\n\n"
        "def build_tiny(spec, units=8):\n"
        "    inputs = tf.keras.Input(spec.input_shape)\n"
        "    x = tf.keras.layers.Dense(units, activation='relu')(tf.keras.layers.Flatten()(inputs))\n"
        "    for layer in task_head(spec):\n        x = layer(x)\n"
        "    return tf.keras.Model(inputs, x)\n"
    )
    (project / "conf" / "model" / "tiny.yaml").write_text("_target_: mymodels.build_tiny\nunits: 16\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(ROOT)  # tfhydra of this checkout (a worktree's, too); the project comes from sys.path
    swept = subprocess.run(
        [sys.executable, "-c", NOTEBOOK], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600
    )
    assert swept.returncode == 0, swept.stdout + swept.stderr
    line = next(x for x in swept.stdout.splitlines() if x.startswith("reproduce: "))[len("reproduce: ") :]
    assert "--config-dir" in line and str(project) in line and "model=tiny" in line, line
    # as printed, from the notebook's directory, by a shell whose `python` is this environment's
    shell_env = {**env, "PATH": f"{os.path.dirname(sys.executable)}{os.pathsep}{env.get('PATH', '')}"}
    shell_env.pop("PYTHONPATH")
    again = subprocess.run(
        ["bash", "-c", f"{line} hydra.run.dir=again"],
        cwd=tmp_path,
        env=shell_env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert again.returncode == 0, again.stdout + again.stderr
    record = json.loads((tmp_path / "again" / "metrics.json").read_text())
    assert record["status"] == "completed" and record["params"] > 0
