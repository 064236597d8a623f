"""tfhydra as a library another project uses, in-process: a project's own conf/ adds options to tfhydra's
groups and may replace its primary config (tfhydra/config/project.py); Hydra finds tfhydra's plugins after any
sys.path change. The installed commands, run from a project directory after an editable or a wheel install
into a fresh venv, are tests/journeys/test_user_project.py.
"""

from __future__ import annotations

import pytest
import yaml
from conftest import ROOT
from journeys.installs import write_project


def test_a_project_config_yaml_overrides_tfhydras_defaults(tmp_path, monkeypatch):
    import tfhydra

    monkeypatch.syspath_prepend(str(tmp_path))  # the project's modules import, as from its own directory
    project = write_project(
        tmp_path,
        units=16,
        config="""\
        defaults:
          - tfhydra            # tfhydra's own defaults
          - override model: tiny
          - _self_
        trainer:
          epochs: 5
        """,
    )
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
    from tfhydra.config.errors import ConfigError
    from tfhydra.sweep.__main__ import resume_command

    project = tmp_path / "conf"
    (project / "model").mkdir(parents=True)
    (project / "model" / "tiny.yaml").write_text("name: mlp\nunits: [8]\ndropout: 0.0\n")
    elsewhere = tmp_path / "elsewhere"
    sweep = tmp_path / "sweep"
    sweep.mkdir()
    sources = [
        {"path": "hydra.conf", "schema": "pkg", "provider": "hydra"},
        {"path": str(elsewhere), "schema": "file", "provider": "main"},
    ]
    (sweep / "multirun.yaml").write_text(
        yaml.safe_dump(
            {
                "hydra": {
                    "overrides": {"task": ["model=tiny", "optimizer.lr=1e-3,1e-4"], "hydra": ["hydra.mode=MULTIRUN"]},
                    "runtime": {"config_sources": sources},
                }
            }
        )
    )
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
