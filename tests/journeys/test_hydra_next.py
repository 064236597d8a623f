"""tfhydra on the next Hydra (issue 46, item 4; docs/design.md, "Hydra 1.3 and 1.4"): hydra-core 1.4.0rc3 with
OmegaConf 2.4.1rc1 (the OmegaConf that Hydra release asks for) and the 1.4 line of Hydra's launchers, from PyPI, in
a fresh venv that shadows the outer environment's Hydra 1.3, with tfhydra installed as the README says
(`pip install -e`, so Hydra 1.4 finds its plugins by their entry points). A user's project with its own
`_target_` runs and sweeps there with every warning shown (PYTHONWARNINGS=default), and nothing Hydra, OmegaConf
or tfhydra says is a warning. The same on Hydra 1.3: tests/journeys/test_user_project.py's run and sweep.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from installs import ROOT, SHOWN, nested_venv, pip_install, run_in, two_job_sweep, warnings_of, write_project

NEXT = {"hydra-core": "1.4.0rc3", "omegaconf": "2.4.1rc1"}
# The outer environment's launchers are the 1.2 line, built for Hydra 1.3 (the Ray one registers its resolver
# under OmegaConf 2.3's name); a user moving to Hydra 1.4 takes the launchers of its line.
LAUNCHERS = ["hydra-joblib-launcher==1.4.0rc3", "hydra-submitit-launcher==1.4.0rc3", "hydra-ray-launcher==1.4.0rc3"]

# A Hydra callback of the user's own, named on the command line: Hydra instantiates it, not tfhydra.
ANNOUNCE = """
from hydra.experimental.callback import Callback


class Announce(Callback):
    def on_run_start(self, config, **kwargs):
        print("the project's callback started the run", flush=True)
"""


@pytest.fixture(scope="module")
def next_hydra(tmp_path_factory) -> Path:
    """bin/ of a venv holding Hydra 1.4 and OmegaConf 2.4 from PyPI over the outer environment, and tfhydra."""
    bin_dir = nested_venv(tmp_path_factory.mktemp("venv-hydra14"))
    fetched = subprocess.run(
        [str(bin_dir / "python"), "-m", "pip", "install", "--no-deps", "--disable-pip-version-check", "--quiet"]
        + [f"{name}=={version}" for name, version in NEXT.items()]
        + LAUNCHERS,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=600,
    )
    assert fetched.returncode == 0, fetched.stderr[-3000:]
    pip_install(bin_dir, "-e", str(ROOT))
    return bin_dir


@pytest.mark.slow
def test_a_run_on_hydra_1_4_says_no_warning(next_hydra, tmp_path):
    project = write_project(tmp_path / "myproject")
    (project / "announce.py").write_text(ANNOUNCE)
    callback = "+hydra.callbacks.announce._target_=announce.Announce"
    overrides = ["model=tiny", "debug=fast", "hydra.run.dir=run", callback]
    result = run_in(next_hydra, "tfhydra-train", *overrides, cwd=project, env=SHOWN)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "the project's callback started the run" in result.stdout  # Hydra called it: in hydra.main's whitelist
    record = json.loads((project / "run" / "metrics.json").read_text())
    assert record["status"] == "completed" and record["model"] == "users_tiny"  # the user's _target_, whitelisted
    assert {name: record["versions"][name] for name in NEXT} == NEXT
    assert warnings_of(result.stderr, (project / "run" / "train.log").read_text()) == []


@pytest.mark.slow
def test_a_sweep_on_hydra_1_4_says_no_warning(next_hydra, tmp_path):
    jobs = two_job_sweep(next_hydra, write_project(tmp_path / "myproject"))  # exits 0 and says no warning
    records = [json.loads((job / "metrics.json").read_text()) for job in jobs]
    assert [(r["status"], r["model"], r["versions"]["hydra-core"]) for r in records] == [
        ("completed", "users_tiny", NEXT["hydra-core"])
    ] * 2
