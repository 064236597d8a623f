"""tfhydra as a library another project installs: the wheel carries conf/ and `tfhydra-train`; a project's
own conf/ adds options to tfhydra's groups and may replace its primary config (tfhydra/project.py).

The wheel is built from this checkout and installed into a fresh virtual environment that sees the
already installed dependencies (--system-site-packages: TensorFlow is not downloaded again); every
command then runs from an empty project directory, as a user of pip would run it.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from conftest import ROOT, last_line

TINY_BUILDER = '''
import tensorflow as tf

def build_tiny(spec, units=8):
    """A user's own model: one hidden layer, named so the test can tell it from tfhydra's."""
    inputs = tf.keras.Input(spec.input_shape)
    x = tf.keras.layers.Dense(units, activation="relu")(tf.keras.layers.Flatten()(inputs))
    outputs = tf.keras.layers.Dense(spec.num_classes, activation="softmax", dtype="float32")(x)
    return tf.keras.Model(inputs, outputs, name="users_tiny")
'''


def write_project(directory: Path, units: int = 8, config: str | None = None) -> Path:
    """A user's project: conf/model/tiny.yaml naming mymodels.build_tiny, mymodels.py, maybe conf/config.yaml."""
    (directory / "conf" / "model").mkdir(parents=True)
    (directory / "conf" / "model" / "tiny.yaml").write_text(f"_target_: mymodels.build_tiny\nunits: {units}\n")
    (directory / "mymodels.py").write_text(TINY_BUILDER)
    if config is not None:
        (directory / "conf" / "config.yaml").write_text(textwrap.dedent(config))
    return directory


@pytest.fixture(scope="module")
def venv_bin(tmp_path_factory) -> Path:
    """bin/ of a fresh virtual environment holding the wheel built from this checkout."""
    wheels = tmp_path_factory.mktemp("wheels")
    subprocess.run([sys.executable, "-m", "pip", "wheel", str(ROOT), "--no-deps", "--no-build-isolation", "--quiet",
                    "--wheel-dir", str(wheels)], check=True, capture_output=True, stdin=subprocess.DEVNULL)
    (wheel,) = wheels.glob("tfhydra-*.whl")
    environment = tmp_path_factory.mktemp("venv")
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(environment)], check=True)
    subprocess.run([str(environment / "bin" / "python"), "-m", "pip", "install", "--no-deps", "--no-index", "--quiet",
                    str(wheel)], check=True, capture_output=True, stdin=subprocess.DEVNULL)
    return environment / "bin"


def run_in(bin_dir: Path, command: str, *args: str, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    full_env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "HYDRA_FULL_ERROR", "TFHYDRA_CONFIG_DIR")}
    return subprocess.run([str(bin_dir / command), *args], cwd=cwd, env={**full_env, **(env or {})}, text=True,
                          capture_output=True, timeout=600, stdin=subprocess.DEVNULL)


def test_the_wheel_carries_the_configs_and_the_command(venv_bin, tmp_path):
    where = run_in(venv_bin, "python", "-c", "import tfhydra; print(tfhydra.__file__); print(tfhydra.CONFIG_DIR)",
                   cwd=tmp_path)
    module, config_dir = where.stdout.split()
    venv = venv_bin.parent.resolve()
    assert Path(module).resolve().is_relative_to(venv) and Path(config_dir).resolve().is_relative_to(venv), where.stdout
    installed = sorted(p.relative_to(config_dir).as_posix() for p in Path(config_dir).rglob("*.yaml"))
    assert installed == sorted(p.relative_to(ROOT / "conf").as_posix() for p in (ROOT / "conf").rglob("*.yaml"))

    version = run_in(venv_bin, "tfhydra-train", "--version", cwd=tmp_path)
    assert version.returncode == 0 and version.stdout.startswith("tfhydra 0.1.0 (hydra-core 1.3."), version.stdout
    assert run_in(venv_bin, "python", "-m", "tfhydra", "--version", cwd=tmp_path).stdout == version.stdout


def test_a_project_trains_its_own_model_with_the_installed_command(venv_bin, tmp_path):
    project = write_project(tmp_path / "myproject", units=8)
    result = run_in(venv_bin, "tfhydra-train", "model=tiny", "trainer.epochs=1", cwd=project)
    assert result.returncode == 0, result.stderr[-3000:]
    (record_file,) = (project / "outputs").rglob("metrics.json")
    record = json.loads(record_file.read_text())
    assert record["status"] == "completed" and record["model"] == "users_tiny" and record["epochs_run"] == 1
    height, width, channels = record["data"]["input_shape"]
    assert record["params"] == (height * width * channels * 8 + 8) + (8 * 10 + 10)  # the user's Dense(8) model
    sources = yaml.safe_load((record_file.parent / ".hydra" / "hydra.yaml").read_text())["hydra"]["runtime"]
    paths = {s["provider"]: s["path"] for s in sources["config_sources"]}
    assert Path(paths["main"]) == (project / "conf").resolve()
    assert Path(paths["tfhydra"]).resolve().is_relative_to(venv_bin.parent.resolve())
    assert sorted(p.name for p in project.iterdir()) == ["conf", "mymodels.py", "outputs"]

    evaluated = run_in(venv_bin, "tfhydra-evaluate", str(record_file.parent), cwd=project)
    assert evaluated.returncode == 0, evaluated.stderr[-2000:]
    figures = json.loads(last_line(evaluated.stdout))["metrics"]
    assert figures["accuracy"] == pytest.approx(record["best"]["val_accuracy"], abs=1e-6)


def test_the_projects_options_are_listed_and_suggested_in_one_line(venv_bin, tmp_path):
    project = write_project(tmp_path / "myproject")
    result = run_in(venv_bin, "tfhydra-train", "model=tiyn", cwd=project)
    assert result.returncode == 1 and not (project / "outputs").exists()
    assert last_line(result.stderr) == ("Error: model=tiyn: no such model option (did you mean tiny?); accepted: one of "
                                        "cnn, keras_app, lstm, mlp, resnet, tiny, transformer")
    searchpath = run_in(venv_bin, "tfhydra-train", "--info", "searchpath", cwd=project).stdout
    assert f"file://{(project / 'conf').resolve()}" in searchpath and "| tfhydra " in searchpath


def test_a_missing_config_dir_is_one_line(venv_bin, tmp_path):
    result = run_in(venv_bin, "tfhydra-train", cwd=tmp_path, env={"TFHYDRA_CONFIG_DIR": str(tmp_path / "nope")})
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert last_line(result.stderr) == (f"Error: TFHYDRA_CONFIG_DIR={tmp_path / 'nope'}: no such directory; accepted: "
                                        "a directory of config groups (e.g. conf/ holding model/tiny.yaml)")


def test_tab_completion_installs_for_the_command(venv_bin, tmp_path):
    script = run_in(venv_bin, "tfhydra-train", "-sc", "install=bash", cwd=tmp_path)
    assert script.returncode == 0 and "complete -o nospace -o default -F hydra_bash_completion tfhydra-train" in script.stdout


# ---- the same search path in-process (no wheel needed) ---------------------------------------------------------

def test_a_project_config_yaml_overrides_tfhydras_defaults(tmp_path, monkeypatch):
    import tfhydra

    monkeypatch.syspath_prepend(str(tmp_path))  # the project's modules import, as from its own directory
    project = write_project(tmp_path, units=16, config="""\
        defaults:
          - tfhydra            # tfhydra's own defaults
          - override model: tiny
          - _self_
        trainer:
          epochs: 5
        """)
    cfg = tfhydra.compose([], config_dir=project / "conf")
    assert cfg.model == {"_target_": "mymodels.build_tiny", "units": 16} and cfg.trainer.epochs == 5
    assert cfg.data.name == "digits" and cfg.optimizer.name == "adam"  # the rest is tfhydra's
    cfg = tfhydra.compose(["model=mlp", "trainer.epochs=2"], config_dir=project / "conf")
    assert cfg.model.name == "mlp" and cfg.trainer.epochs == 2  # the command line still decides


def test_a_project_option_replaces_tfhydras_option_of_that_name(tmp_path):
    import tfhydra

    (tmp_path / "conf" / "optimizer").mkdir(parents=True)
    adam = (ROOT / "conf" / "optimizer" / "adam.yaml").read_text().replace("lr: 0.001", "lr: 0.123")
    (tmp_path / "conf" / "optimizer" / "adam.yaml").write_text(adam)
    cfg = tfhydra.compose([], config_dir=tmp_path / "conf")
    assert cfg.optimizer.lr == 0.123


def test_the_sweep_resume_command_takes_the_config_dir_from_the_command_not_the_file(tmp_path):
    """A sweep's multirun.yaml names the config directory it was made with; resume uses this command's
    (--config-dir, $TFHYDRA_CONFIG_DIR, ./conf), and the recorded one only with --trust-sweep."""
    from tfhydra.errors import ConfigError
    from tfhydra.sweep.__main__ import resume_command

    project = tmp_path / "conf"
    (project / "model").mkdir(parents=True)
    (project / "model" / "tiny.yaml").write_text("name: mlp\nunits: [8]\ndropout: 0.0\n")
    elsewhere = tmp_path / "elsewhere"
    sweep = tmp_path / "sweep"
    sweep.mkdir()
    sources = [{"path": "hydra.conf", "schema": "pkg", "provider": "hydra"},
               {"path": str(elsewhere), "schema": "file", "provider": "main"}]
    (sweep / "multirun.yaml").write_text(yaml.safe_dump({"hydra": {
        "overrides": {"task": ["model=tiny", "optimizer.lr=1e-3,1e-4"], "hydra": ["hydra.mode=MULTIRUN"]},
        "runtime": {"config_sources": sources}}}))
    with pytest.raises(ConfigError, match="it holds model=tiny, which is not an option of model"):
        resume_command(sweep)  # tfhydra's own configs have no model=tiny
    command = resume_command(sweep, config_dir=str(project))
    assert command[1:6] == ["-m", "tfhydra", "--config-dir", str(project), "-m"]
    assert command[6:] == ["model=tiny", "optimizer.lr=1e-3,1e-4", f"hydra.sweep.dir={sweep.resolve()}"]
    assert resume_command(sweep, trusted=True)[3:5] == ["--config-dir", str(elsewhere)]

def test_tfhydras_plugins_stay_visible_to_hydra_after_a_sys_path_change(tmp_path, monkeypatch):
    """Hydra lists plugins by walking the `hydra_plugins` namespace, whose `__path__` Python computes again
    from sys.path after every change: tfhydra's four must be in every recomputed one (docs/project.md)."""
    import pkgutil

    import hydra_plugins

    import tfhydra  # noqa: F401  (what a command imports first)

    own = {"tfhydra_basic", "tfhydra_conf", "tfhydra_launcher", "tfhydra_optuna"}
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.syspath_prepend(str(tmp_path / "elsewhere"))
    assert own <= {name for _, name, _ in pkgutil.iter_modules(hydra_plugins.__path__)}, list(hydra_plugins.__path__)
