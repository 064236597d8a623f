"""tfhydra's Optuna search (issue 15): Optuna 4/5, a study in the sweep directory that survives a kill, and a
pruner that stops unpromising trials, recorded as `pruned` in metrics.json, the summary and HParams."""

import os
import signal
import subprocess
import sys
import time

import pytest
from conftest import CONFIG_DIR, ROOT, TESTS, read_run_record, run_cli

from tfhydra.cli.preflight import check_overrides
from tfhydra.config.errors import ConfigError

optuna = pytest.importorskip("optuna")  # a dev dependency: CI installs it, so CI never skips this
pytestmark = pytest.mark.slow

EPOCHS = 6
TRIALS = 8
SEARCH = [
    "-m",
    "hparams_search=optuna_mlp",
    f"trainer.epochs={EPOCHS}",
    "optimizer.lr=tag(log,interval(1e-5,1e-1))",
    "logging.histogram_freq=0",
    "logging.write_graph=false",
    "export.formats=[]",
]


def search(trials: int = TRIALS) -> list[str]:
    return [*SEARCH, f"hydra.sweeper.n_trials={trials}"]


def trials(sweep):
    study = optuna.load_study(study_name="tfhydra_mlp", storage=f"sqlite:///{sweep / 'optuna.db'}")
    return {t.number: t for t in study.get_trials(deepcopy=False)}


def job_records(sweep):
    return {d.name: read_run_record(d) for d in sorted(sweep.iterdir()) if (d / "metrics.json").is_file()}


def test_the_pruner_stops_trials_and_saves_epochs(tmp_path):
    pruned_dir, full_dir = tmp_path / "median", tmp_path / "none"
    result = run_cli(*search(), f"hydra.sweep.dir={pruned_dir}", timeout=900)
    assert result.returncode == 0, result.stderr[-3000:]
    # Without the pruner every trial runs every epoch (two trials show it; the pruned search above has eight).
    full = run_cli(*search(2), "hydra.sweeper.pruner=none", f"hydra.sweep.dir={full_dir}")
    assert full.returncode == 0, full.stderr[-3000:]
    assert [(r["status"], r["epochs_run"]) for r in job_records(full_dir).values()] == [("completed", EPOCHS)] * 2

    records = job_records(pruned_dir)
    statuses = [r["status"] for r in records.values()]
    assert len(records) == TRIALS and "pruned" in statuses and set(statuses) <= {"completed", "pruned"}, statuses
    states = [t.state.name for t in trials(pruned_dir).values()]
    assert states.count("PRUNED") == statuses.count("pruned") and states.count("COMPLETE") == statuses.count(
        "completed"
    )
    assert all(r["epochs_run"] == EPOCHS for r in records.values() if r["status"] == "completed")
    assert all(r["epochs_run"] < EPOCHS for r in records.values() if r["status"] == "pruned")
    summary = (pruned_dir / "summary.md").read_text()
    assert f"{statuses.count('pruned')} pruned" in summary
    best = max((t for t in trials(pruned_dir).values() if t.state.name == "COMPLETE"), key=lambda t: t.value)
    assert best.value == max(r["best"]["val_accuracy"] for r in records.values() if r["status"] == "completed")


KILLED_TRIALS = 5  # killed once trial 3 has started: three told before the kill, two after


def test_a_killed_search_continues_its_study(tmp_path):
    sweep = tmp_path / "study"
    env = {**os.environ, "PYTHONPATH": str(TESTS)}
    env.pop("HYDRA_FULL_ERROR", None)
    command = [sys.executable, str(ROOT / "train.py"), *search(KILLED_TRIALS), f"hydra.sweep.dir={sweep}"]
    process = subprocess.Popen(
        command,
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and not list(sweep.glob("3_*")):  # trial 3 started: 0-2 are told
        assert process.poll() is None, "the search ended before it could be killed"
        time.sleep(0.1)
    os.killpg(process.pid, signal.SIGKILL)
    process.wait(timeout=60)
    before = {n: (t.state.name, t.value) for n, t in trials(sweep).items() if t.state.name != "RUNNING"}
    assert len(before) >= 3

    again = run_cli(*search(KILLED_TRIALS), f"hydra.sweep.dir={sweep}", timeout=900)
    assert again.returncode == 0, again.stderr[-3000:]
    assert f"{len(before)} earlier trial(s) kept, 1 resumed" in again.stdout
    after = trials(sweep)
    assert {n: (after[n].state.name, after[n].value) for n in before} == before  # earlier trials kept
    assert sorted(after) == list(range(len(after)))  # numbering goes on
    assert len(after) == KILLED_TRIALS and {t.state.name for t in after.values()} <= {"COMPLETE", "PRUNED"}
    killed = next(d for d in sweep.glob(f"{len(before)}_*"))  # the trial the kill caught: resumed, not redone
    assert "resuming from the saved state" in (killed / "train.log").read_text() or read_run_record(killed)[
        "status"
    ] in ("completed", "pruned")


@pytest.mark.parametrize(
    "overrides,wanted",
    [
        (["trainer.monitor=val_loss", "trainer.monitor_mode=min"], "minimize"),
        (["hydra.sweeper.direction=minimize"], "maximize"),
    ],
)
def test_a_search_going_the_other_way_from_the_runs_ranking_is_one_line_before_any_job(overrides, wanted):
    with pytest.raises(ConfigError) as error:
        check_overrides(CONFIG_DIR, "config", ["hparams_search=optuna", *overrides], multirun=True)
    assert error.value.key == "hydra.sweeper.direction" and error.value.accepted.startswith(wanted)
    assert "\n" not in str(error.value)


@pytest.mark.parametrize(
    "overrides", [[], ["trainer.monitor=val_loss", "trainer.monitor_mode=min", "hydra.sweeper.direction=minimize"]]
)
def test_a_search_going_the_runs_way_passes_the_preflight(overrides):
    assert (
        check_overrides(CONFIG_DIR, "config", ["hparams_search=optuna", *overrides], multirun=True).launcher
        == "tfhydra"
    )
