"""The command line as users run it: `python train.py` and `python train.py -m ...` (subprocesses)."""

import re

import pytest
from conftest import read_run_record, run_cli
from tb_events import read_events

RUN_DIR = re.compile(r"^\d{4}-\d{2}-\d{2}/\d{2}-\d{2}-\d{2}\.\d{6}$")


@pytest.mark.slow
def test_default_run_reaches_097_on_digits_and_leaves_the_run_contract(tmp_path):
    result = run_cli(cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    runs = [p for p in (tmp_path / "outputs").glob("*/*") if p.is_dir()]
    assert len(runs) == 1
    run_dir = runs[0]
    assert RUN_DIR.match(str(run_dir.relative_to(tmp_path / "outputs")))
    metrics = read_run_record(run_dir)
    assert metrics["status"] == "completed" and metrics["overrides"] == []
    assert metrics["best"]["val_accuracy"] >= 0.97
    assert metrics["test"]["examples"] == 360 and metrics["test"]["metrics"]["accuracy"] >= 0.96  # measured 0.9750
    assert (run_dir / ".hydra" / "config.yaml").is_file() and (run_dir / ".hydra" / "overrides.yaml").is_file()
    log = (run_dir / "train.log").read_text()
    assert "epoch 20/20" in log and "completed: best val_accuracy=" in log and "; test accuracy=" in log
    assert "Saved artifact" not in result.stdout  # export details stay out of the console
    assert (run_dir / "checkpoints" / "best.weights.h5").is_file()
    assert (run_dir / "export" / "saved_model" / "saved_model.pb").is_file()
    train = read_events(run_dir / "tensorboard" / "train")
    assert len(train["scalars"]["epoch_loss"]) == 20 and train["histograms"] and train["graph"]
    assert read_events(run_dir / "tensorboard" / "validation")["scalars"]["epoch_accuracy"]


@pytest.mark.slow
def test_multirun_makes_one_directory_per_job(tmp_path):
    small = ["model=mlp", "trainer.epochs=1", "trainer.steps_per_epoch=4", "logging.histogram_freq=0"]  # any job
    result = run_cli("-m", "optimizer.lr=1e-3,5e-4", *small, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    sweeps = list((tmp_path / "outputs" / "multirun").glob("*/*"))
    assert len(sweeps) == 1 and RUN_DIR.match(str(sweeps[0].relative_to(tmp_path / "outputs" / "multirun")))
    jobs = sorted(p.name for p in sweeps[0].iterdir() if p.is_dir())
    assert jobs == ["0_optimizer.lr=0.001", "1_optimizer.lr=0.0005"]  # swept overrides only, as Hydra spells them
    for job, lr in zip(jobs, ["0.001", "0.0005"], strict=True):
        metrics = read_run_record(sweeps[0] / job)
        assert metrics["status"] == "completed" and metrics["overrides"] == [f"optimizer.lr={lr}", *small]
        assert read_events(sweeps[0] / job / "tensorboard" / "train")["scalars"]["epoch_loss"]
    assert (sweeps[0] / "multirun.yaml").is_file()
