"""A user's own project, as a user of pip gets it: tfhydra installed into a fresh venv, once as the README
installs it (`pip install -e <checkout>`) and once from a wheel, then every command run from a project
directory outside the checkout holding only conf/model/tiny.yaml and mymodels.py (tests/journeys/installs.py).
A project's own conf/ adds options to tfhydra's groups and may replace its primary config (tfhydra/config/project.py);
Hydra must find tfhydra's plugins and configs in both installs (docs/project.md).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from conftest import last_line
from installs import ROOT, SHOWN, editable_install, run_in, two_job_sweep, warnings_of, wheel_install, write_project

KINDS = ["editable", "wheel"]


@pytest.fixture(scope="module", params=KINDS)
def installed(request, tmp_path_factory) -> tuple[str, Path]:
    """(kind, bin/ of a fresh venv holding tfhydra installed that way)."""
    environment = tmp_path_factory.mktemp(f"venv-{request.param}")
    if request.param == "editable":
        return request.param, editable_install(environment)
    return request.param, wheel_install(environment, tmp_path_factory.mktemp("wheels"))


def where_configs_live(kind: str, bin_dir: Path) -> Path:
    """Where tfhydra's own code and configs must come from for this install kind."""
    return ROOT if kind == "editable" else bin_dir.parent.resolve()


def test_the_install_carries_the_configs_and_the_command(installed, tmp_path):
    kind, venv_bin = installed
    where = run_in(
        venv_bin, "python", "-c", "import tfhydra; print(tfhydra.__file__); print(tfhydra.CONFIG_DIR)", cwd=tmp_path
    )
    module, config_dir = where.stdout.split()
    home = where_configs_live(kind, venv_bin)
    assert Path(module).resolve().is_relative_to(home) and Path(config_dir).resolve().is_relative_to(home), where.stdout
    installed_yaml = sorted(p.relative_to(config_dir).as_posix() for p in Path(config_dir).rglob("*.yaml"))
    assert installed_yaml == sorted(p.relative_to(ROOT / "conf").as_posix() for p in (ROOT / "conf").rglob("*.yaml"))
    digits = Path(module).parent / "data" / "digits.csv.gz"  # the default run's data, shipped (no scikit-learn)
    assert digits.read_bytes() == (ROOT / "tfhydra" / "data" / "digits.csv.gz").read_bytes()

    version = run_in(venv_bin, "tfhydra-train", "--version", cwd=tmp_path)
    assert version.returncode == 0 and version.stdout.startswith("tfhydra 0.1.0 (hydra-core 1.3."), version.stdout
    assert run_in(venv_bin, "python", "-m", "tfhydra", "--version", cwd=tmp_path).stdout == version.stdout


def test_cfg_job_prints_the_config_from_an_empty_directory_and_from_a_project(installed, tmp_path):
    _, venv_bin = installed
    empty = run_in(venv_bin, "tfhydra-train", "--cfg", "job", cwd=tmp_path)
    assert empty.returncode == 0, empty.stderr[-2000:]
    assert yaml.safe_load(empty.stdout)["model"]["name"] == "auto"  # tfhydra's defaults, found outside the checkout
    project = write_project(tmp_path / "myproject")
    own = run_in(venv_bin, "tfhydra-train", "--cfg", "job", "model=tiny", cwd=project)
    assert own.returncode == 0, own.stderr[-2000:]
    cfg = yaml.safe_load(own.stdout)
    assert cfg["model"] == {"_target_": "mymodels.build_tiny", "units": 8} and cfg["optimizer"]["name"] == "adam"
    assert sorted(p.name for p in project.iterdir()) == ["conf", "mymodels.py"]  # --cfg writes nothing


@pytest.mark.slow
def test_a_project_trains_its_own_model_with_the_installed_command(installed, tmp_path):
    kind, venv_bin = installed
    project = write_project(tmp_path / "myproject", units=8)
    result = run_in(venv_bin, "tfhydra-train", "model=tiny", "trainer.epochs=1", cwd=project, env=SHOWN)  # Hydra 1.3
    assert result.returncode == 0, result.stderr[-3000:]
    (record_file,) = (project / "outputs").rglob("metrics.json")
    assert warnings_of(result.stderr, (record_file.parent / "train.log").read_text()) == []
    record = json.loads(record_file.read_text())
    assert record["status"] == "completed" and record["model"] == "users_tiny" and record["epochs_run"] == 1
    assert 0.0 <= record["best"]["val_accuracy"] <= 1.0 and record["best"]["epoch"] == 1
    height, width, channels = record["data"]["input_shape"]
    assert record["params"] == (height * width * channels * 8 + 8) + (8 * 10 + 10)  # the user's Dense(8) model
    sources = yaml.safe_load((record_file.parent / ".hydra" / "hydra.yaml").read_text())["hydra"]["runtime"]
    paths = {s["provider"]: s["path"] for s in sources["config_sources"]}
    assert Path(paths["main"]) == (project / "conf").resolve()
    assert Path(paths["tfhydra"]).resolve().is_relative_to(where_configs_live(kind, venv_bin))
    assert sorted(p.name for p in project.iterdir()) == ["conf", "mymodels.py", "outputs"]

    evaluated = run_in(venv_bin, "tfhydra-evaluate", "--json", str(record_file.parent), cwd=project)
    assert evaluated.returncode == 0, evaluated.stderr[-2000:]
    figures = json.loads(last_line(evaluated.stdout))["metrics"]
    assert figures["accuracy"] == pytest.approx(record["test"]["metrics"]["accuracy"], abs=1e-6)  # default: test


@pytest.mark.slow
@pytest.mark.parametrize("installed", ["wheel"], indirect=True)
def test_a_two_job_sweep_of_the_projects_model_completes(installed, tmp_path):
    """From the wheel only: that Hydra finds tfhydra's configs and plugins in an editable install, and that the
    project's model trains there without a warning, is held by the single run above; a sweep adds nothing an
    editable install could break, and its process costs a TensorFlow import and two trainings."""
    _, venv_bin = installed
    jobs = two_job_sweep(venv_bin, write_project(tmp_path / "myproject"))  # and no warning (test_hydra_next.py)
    assert [p.name for p in jobs] == ["0_optimizer.lr=0.01", "1_optimizer.lr=0.001"]
    records = [json.loads((job / "metrics.json").read_text()) for job in jobs]
    assert [r["status"] for r in records] == ["completed", "completed"]
    assert {r["model"] for r in records} == {"users_tiny"}
    assert [yaml.safe_load((job / ".hydra" / "config.yaml").read_text())["optimizer"]["lr"] for job in jobs] == [
        0.01,
        0.001,
    ]


def test_the_projects_options_are_listed_and_suggested_in_one_line(installed, tmp_path):
    _, venv_bin = installed
    project = write_project(tmp_path / "myproject")
    result = run_in(venv_bin, "tfhydra-train", "model=tiyn", cwd=project)
    assert result.returncode == 1 and not (project / "outputs").exists()
    assert last_line(result.stderr) == (
        "Error: model=tiyn: no such model option (did you mean tiny?); accepted: one of "
        "auto, cnn, keras_app, keras_hub, lstm, mlp, resnet, tiny, transformer"
    )
    searchpath = run_in(venv_bin, "tfhydra-train", "--info", "searchpath", cwd=project).stdout
    assert f"file://{(project / 'conf').resolve()}" in searchpath and "| tfhydra " in searchpath


def test_a_missing_config_dir_is_one_line(installed, tmp_path):
    _, venv_bin = installed
    result = run_in(venv_bin, "tfhydra-train", cwd=tmp_path, env={"TFHYDRA_CONFIG_DIR": str(tmp_path / "nope")})
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert last_line(result.stderr) == (
        f"Error: TFHYDRA_CONFIG_DIR={tmp_path / 'nope'}: no such directory; accepted: "
        "a directory of config groups (e.g. conf/ holding model/tiny.yaml)"
    )


def test_tab_completion_installs_for_the_command(installed, tmp_path):
    _, venv_bin = installed
    script = run_in(venv_bin, "tfhydra-train", "-sc", "install=bash", cwd=tmp_path)
    assert (
        script.returncode == 0
        and "complete -o nospace -o default -F hydra_bash_completion tfhydra-train" in script.stdout
    )
