"""Parallel jobs (joblib launcher), the Optuna presets, experiment presets and the debug preset."""

import csv

import pytest
from conftest import run_cli
from shared_runs import made_once
from test_sweep import metrics_of, only_sweep

import tfhydra


@pytest.mark.parametrize("loop", ["fit", "custom"])
def test_debug_preset_trains_two_batches_per_epoch_in_both_loops(compose_cfg, tmp_path, loop):
    counter = tmp_path / "steps.txt"
    cfg = compose_cfg(
        [
            "debug=fast",
            f"trainer.loop={loop}",
            "trainer.epochs=2",
            "model=mlp",
            f"trainer.callbacks=[{{_target_: sweep_code.StepCounter, path: '{counter}'}}]",
        ]
    )
    tfhydra.run(cfg, run_dir=tmp_path / "run")
    metrics = metrics_of(tmp_path / "run")
    assert metrics["status"] == "completed" and metrics["epochs_run"] == 2
    assert int(counter.read_text()) == 4  # 2 epochs x trainer.steps_per_epoch=2
    assert metrics["exports"] == {} and not (tmp_path / "run" / "export").exists()  # debug: no export


def joblib_argv(sweep):
    """Two jobs in joblib's worker processes, two at a time."""
    return [
        "-m",
        "hydra/launcher=joblib",
        "hydra.launcher.n_jobs=2",
        "optimizer.lr=1e-3,5e-4",
        "model=mlp",
        "trainer.epochs=2",
        "logging.histogram_freq=0",
        "export.formats=[]",
        f"hydra.sweep.dir={sweep}",
    ]


@pytest.fixture(scope="session")
def joblib_sweep(tmp_path_factory):
    """`joblib_argv`'s sweep, swept once per session across xdist workers (joblib's workers are processes of their
    own, each importing TensorFlow): read it, or copy it before running into it
    (test_sweep_resume.py: test_a_finished_joblib_sweep_run_again_keeps_every_job)."""

    def make(sweep):
        result = run_cli(*joblib_argv(sweep))
        assert result.returncode == 0, result.stderr[-3000:]

    return made_once(tmp_path_factory, "trainer-joblib-sweep", make)


def test_joblib_launcher_runs_jobs_in_parallel_processes_with_a_share_of_the_cores(joblib_sweep):
    sweep = joblib_sweep
    jobs = sorted(p.name for p in sweep.iterdir() if p.is_dir())
    assert jobs == ["0_optimizer.lr=0.001", "1_optimizer.lr=0.0005"]  # named in the worker processes too
    from tfhydra.platform.runtime import available_cores

    records = [metrics_of(sweep / job) for job in jobs]
    assert [r["threads"] for r in records] == [max(1, available_cores() // 2)] * 2  # trainer.threads=0: auto
    assert all(r["status"] == "completed" for r in records)
    assert [r["rank"] for r in csv.DictReader((sweep / "summary.csv").open())] == ["1", "2"]


def test_experiment_presets_run_as_a_sweep_in_debug_mode(tmp_path):
    result = run_cli("-m", "experiment=glob(*)", "debug=fast", cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    sweep = only_sweep(tmp_path)
    jobs = {p.name.split("=", 1)[1]: metrics_of(p) for p in sweep.iterdir() if p.is_dir()}
    assert sorted(jobs) == ["full", "mlp_baseline", "prescreen"]
    assert jobs["prescreen"]["data"]["train_size"] == pytest.approx(0.1 * jobs["full"]["data"]["train_size"], abs=10)
    assert jobs["mlp_baseline"]["model"] == "mlp" and jobs["full"]["model"] == "cnn"
    assert all(j["status"] == "completed" and j["epochs_run"] == 1 for j in jobs.values())  # debug wins


def test_optuna_preset_searches_and_a_diverged_trial_does_not_stop_it(tmp_path):
    optuna = pytest.importorskip("optuna")  # a dev dependency: CI installs it
    # optimizer.lr on the command line replaces the preset's range; model.filters fixed takes it out of the search.
    result = run_cli(
        "-m",
        "hparams_search=optuna",
        "debug=fast",
        "model.filters=[4,8]",
        "hydra.sweeper.n_trials=3",
        "optimizer.lr=choice(1e-3,1e4)",
        cwd=tmp_path,
    )
    sweep = only_sweep(tmp_path)
    records = {p.name: metrics_of(p) for p in sweep.iterdir() if p.is_dir()}
    assert len(records) == 3, result.stderr[-3000:]
    for name in records:  # named by the values Optuna drew
        assert name.startswith(("0_", "1_", "2_")) and "optimizer.lr=" in name and "data.batch_size=" in name
        assert "model.filters" not in name
    statuses = sorted(r["status"] for r in records.values())
    assert set(statuses) <= {"completed", "diverged"} and "completed" in statuses
    assert result.returncode == (1 if "diverged" in statuses else 0)
    study = optuna.load_study(study_name="tfhydra", storage=f"sqlite:///{sweep / 'optuna.db'}")
    states = sorted(t.state.name for t in study.trials)  # a diverged trial is told as failed, not as a value
    assert states == sorted("COMPLETE" if s == "completed" else "FAIL" for s in statuses)
    assert study.best_value == max(r["best"]["val_accuracy"] for r in records.values() if r["status"] == "completed")
    assert (sweep / "summary.md").is_file()
