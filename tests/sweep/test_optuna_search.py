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

EPOCHS = 3  # a pruned trial stops after its first epoch (MedianPruner's warm-up is one epoch): fewer than three
TRIALS = 5  # two startup trials (MedianPruner's n_startup_trials), then three the pruner may stop (seed 42)
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
    pruned_dir = tmp_path / "median"
    result = run_cli(*search(), f"hydra.sweep.dir={pruned_dir}", timeout=900)
    assert result.returncode == 0, result.stderr[-3000:]

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


@pytest.mark.parametrize("pruner,stopped_at", [("median", 1), ("none", None)])
def test_a_job_reports_each_epoch_to_its_trial_and_only_a_pruner_stops_it(hydra_job, tmp_path, pruner, stopped_at):
    """The job's side of a search (tfhydra/sweep/trial.py's search_callbacks, tfhydra/sweep/pruning.py), built from
    the config `-m hparams_search=optuna_mlp hydra.sweeper.pruner=...` hands trial 2 and driven with fake epoch logs
    as Keras' own callback tests are: two earlier trials at 0.9 and 0.8 after epoch 1, then this one at 0.3 every
    epoch. The median pruner stops it after its first epoch; `none` lets it run every epoch."""
    from tfhydra.platform.keras_lib import keras
    from tfhydra.sweep.trial import search_callbacks

    sweep = tmp_path / "sweep"
    sweep.mkdir()
    study = optuna.create_study(
        study_name="tfhydra_mlp", storage=f"sqlite:///{sweep / 'optuna.db'}", direction="maximize"
    )
    for value in (0.9, 0.8):
        earlier = study.ask()
        earlier.report(value, step=1)
        study.tell(earlier, value)
    number = study.ask().number
    search = ["hparams_search=optuna_mlp", f"hydra.sweeper.pruner={pruner}", f"hydra.sweep.dir={sweep}"]
    cfg = hydra_job([*search, f"+optuna_trial={number}"], multirun=True)  # what the sweeper hands trial `number`
    (report,) = search_callbacks(cfg, cfg.hydra, tmp_path / "job")
    report.set_model(keras.Sequential([keras.layers.Dense(1)]))
    report.model.stop_training = False
    epochs = 0
    for epoch in range(EPOCHS):  # as Keras' fit loop: stop once a callback set stop_training
        report.on_epoch_end(epoch, {"val_accuracy": 0.3, "val_loss": 2.0})
        epochs += 1
        if report.model.stop_training:
            break
    assert (report.pruned_at, epochs) == (stopped_at, stopped_at or EPOCHS)
    reported = optuna.load_study(study_name="tfhydra_mlp", storage=f"sqlite:///{sweep / 'optuna.db'}")
    assert reported.trials[number].intermediate_values == {step: 0.3 for step in range(1, epochs + 1)}


KILLED_TRIALS = 4  # killed once trial 2 has started: the two startup trials told before the kill, two after


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
    while time.monotonic() < deadline and not list(sweep.glob("2_*")):  # trial 2 started: 0-1 are told
        assert process.poll() is None, "the search ended before it could be killed"
        time.sleep(0.1)
    os.killpg(process.pid, signal.SIGKILL)
    process.wait(timeout=60)
    before = {n: (t.state.name, t.value) for n, t in trials(sweep).items() if t.state.name != "RUNNING"}
    assert len(before) >= 2

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
