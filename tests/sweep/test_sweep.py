"""Sweeps as users run them (`python train.py -m ...`): named job directories, failures that do
not stop the sweep, the summary, the exit code, TensorBoard's HParams dashboard through the
real server, and jobs sharing one process without sharing state."""

import csv
import json
import os
import shutil
import subprocess
import urllib.parse

import h5py
import numpy as np
import pytest
from conftest import ROOT, read_run_record, run_cli, run_module
from shared_runs import made_once
from tb_server import tensorboard_server

TRIAL_TAGS = ("best_val_accuracy", "test_accuracy")

FAIL_AT_5E4 = "trainer.callbacks=[{_target_: sweep_code.FailAtLearningRate, lr: 0.0005}]"
JOBS = ["0_optimizer.lr=0.001", "1_optimizer.lr=0.0005", "2_optimizer.lr=10000.0"]


def only_sweep(cwd):
    sweeps = list((cwd / "outputs" / "multirun").glob("*/*"))
    assert len(sweeps) == 1, sweeps
    return sweeps[0]


def metrics_of(job_dir):
    return read_run_record(job_dir)


@pytest.fixture(scope="session")
def mixed_sweep(tmp_path_factory):
    """One job completes, one raises during training, one diverges (Adam at lr 1e4: exploding loss). Swept once
    per session across xdist workers: the command's answer (returncode, stdout, stderr) and its sweep directory,
    read only (a test changing it copies it)."""

    def make(cwd):
        cwd.mkdir()
        result = run_cli("-m", "optimizer.lr=1e-3,5e-4,1e4", "model=mlp", "debug=fast", FAIL_AT_5E4, cwd=cwd)
        answer = {"args": result.args, "returncode": result.returncode, "stdout": result.stdout}
        (cwd / "answer.json").write_text(json.dumps({**answer, "stderr": result.stderr}))

    cwd = made_once(tmp_path_factory, "trainer-mixed-sweep", make)
    answer = json.loads((cwd / "answer.json").read_text())
    return subprocess.CompletedProcess(**answer), only_sweep(cwd)


def test_a_failed_and_a_diverged_job_do_not_stop_the_sweep_but_its_exit_code_says_so(mixed_sweep):
    result, sweep = mixed_sweep
    assert result.returncode == 1, result.stderr[-3000:]
    assert sorted(p.name for p in sweep.iterdir() if p.is_dir()) == JOBS
    completed, failed, diverged = (metrics_of(sweep / job) for job in JOBS)
    assert completed["status"] == "completed"
    assert failed["status"] == "failed" and failed["error"] == "RuntimeError: injected failure at lr=0.0005"
    assert diverged["status"] == "diverged" and diverged["diverged"]["loss"] > 1e6  # trainer.max_loss=auto
    assert "injected failure" in (sweep / JOBS[1] / "train.log").read_text()  # with its traceback
    stderr_lines = result.stderr.strip().splitlines()
    assert stderr_lines[-1] == (
        "Error: 2 of 3 jobs did not complete: 1_optimizer.lr=0.0005 (failed), 2_optimizer.lr=10000.0 (diverged)"
    )


def test_the_summary_ranks_jobs_and_says_how_to_reproduce_the_best(mixed_sweep):
    result, sweep = mixed_sweep
    rows = list(csv.DictReader((sweep / "summary.csv").open()))
    assert [(r["rank"], r["job"], r["status"], r["optimizer.lr"]) for r in rows] == [
        ("1", "0", "completed", "0.001"),
        ("", "1", "failed", "0.0005"),
        ("", "2", "diverged", "10000.0"),
    ]
    best = metrics_of(sweep / JOBS[0])
    assert float(rows[0]["best_val_accuracy"]) == pytest.approx(best["best"]["val_accuracy"])
    assert rows[0]["epochs"] == "1" and float(rows[0]["wall_seconds"]) > 0
    assert rows[1]["error"] == "RuntimeError: injected failure at lr=0.0005"
    assert rows[2]["error"].startswith("loss became ") and "(epoch 1)" in rows[2]["error"]
    markdown = (sweep / "summary.md").read_text()
    callbacks = "trainer.callbacks=[{_target_:sweep_code.FailAtLearningRate,lr:0.0005}]"  # as Hydra spells it
    command = f"python train.py optimizer.lr=0.001 model=mlp debug=fast '{callbacks}'"
    assert command in markdown and "| 1 | [0_optimizer.lr=0.001]" in markdown
    assert "![val_accuracy per epoch](summary.png)" in markdown
    assert (sweep / "summary.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert f"best job: {JOBS[0]} (val_accuracy=" in result.stdout
    assert f"reproduce: {command}" in result.stdout
    assert f"summary: {sweep.relative_to(sweep.parents[3])}/summary.md" in result.stdout


def test_tensorboard_shows_every_job_in_the_hparams_dashboard(mixed_sweep, tmp_path):
    """The real server over the sweep directory: runs, scalar tags and one HParams trial per job."""
    _, sweep = mixed_sweep
    with tensorboard_server(sweep, tmp_path / "tensorboard.log") as board:
        board.wait_until(lambda b: len(b.session_groups()) == 3, timeout=60)
        runs, tags, experiment, groups = board.runs(), board.scalar_tags(), board.experiment(), board.session_groups()
        validation = urllib.parse.quote(f"{JOBS[0]}/tensorboard/validation")
        cards = {tag: board.get(f"/data/plugin/scalars/scalars?run={validation}&tag={tag}") for tag in TRIAL_TAGS}
    record = metrics_of(sweep / JOBS[0])  # each card a line TensorBoard draws (one point is drawn empty)
    assert [point[2] for point in cards["best_val_accuracy"]][-1] == pytest.approx(record["best"]["val_accuracy"])
    assert len(cards["best_val_accuracy"]) == max(record["epochs_run"], 2) and len(cards["test_accuracy"]) == 2
    for job in JOBS:  # the trial is in the job's validation run: two runs per job, not three
        assert f"{job}/tensorboard/validation" in runs and f"{job}/tensorboard" not in runs
    for job in (JOBS[0], JOBS[2]):  # the failed job stopped before its first epoch
        assert "epoch_loss" in tags[f"{job}/tensorboard/train"]
        assert "epoch_accuracy" in tags[f"{job}/tensorboard/validation"]
    assert {"best_val_accuracy", "test_accuracy"} <= set(tags[f"{JOBS[0]}/tensorboard/validation"])
    assert [h["name"] for h in experiment["hparamInfos"]] == ["optimizer.lr"]
    assert sorted(experiment["hparamInfos"][0]["domainDiscrete"]) == [0.0005, 0.001, 10000.0]
    shown = {m["displayName"] for m in experiment["metricInfos"]}
    assert {"val_accuracy", "val_loss", "best val_accuracy", "test accuracy (not used to choose)"} <= shown
    by_name = {g["name"]: g for g in groups}  # trials are named by their job directory
    assert sorted(by_name) == JOBS
    assert [by_name[j]["hparams"]["optimizer.lr"] for j in JOBS] == [0.001, 0.0005, 10000.0]
    assert [by_name[j]["sessions"][0]["status"] for j in JOBS] == ["STATUS_SUCCESS", "STATUS_FAILURE", "STATUS_FAILURE"]
    accuracy = {m["name"]["tag"]: m["value"] for m in by_name[JOBS[0]]["metricValues"] if not m["name"].get("group")}[
        "epoch_accuracy"
    ]  # the session's own run: validation
    assert accuracy == pytest.approx(metrics_of(sweep / JOBS[0])["final"]["val_accuracy"])


def test_the_summary_command_rebuilds_an_interrupted_sweep(mixed_sweep, tmp_path):
    """Job 1 killed before it wrote metrics.json, job 2 never started: both still listed."""
    _, original = mixed_sweep
    sweep = tmp_path / "sweep"
    shutil.copytree(original, sweep)
    for name in ("summary.csv", "summary.md", "summary.png"):
        (sweep / name).unlink()
    (sweep / JOBS[1] / "metrics.json").unlink()
    shutil.rmtree(sweep / JOBS[2])
    result = run_module("tfhydra.sweep", "summary", str(sweep), cwd=ROOT, env=dict(os.environ), timeout=120)
    assert result.returncode == 0, result.stderr
    rows = list(csv.DictReader((sweep / "summary.csv").open()))
    assert [(r["job"], r["status"], r["directory"]) for r in rows] == [
        ("0", "completed", JOBS[0]),
        ("1", "interrupted", JOBS[1]),
        ("2", "not started", ""),
    ]
    assert rows[2]["overrides"] == "optimizer.lr=10000.0"  # expanded from multirun.yaml as Hydra would
    assert f"best job: {JOBS[0]}" in result.stdout and (sweep / "summary.md").is_file()

    missing = run_module(
        "tfhydra.sweep", "summary", str(tmp_path / "nope"), cwd=ROOT, env=dict(os.environ), timeout=120
    )
    assert missing.returncode == 1 and missing.stderr.strip().splitlines()[-1].startswith("Error: sweep_dir=")


def test_a_configuration_error_still_stops_the_sweep_before_any_job(tmp_path):
    result = run_cli("-m", "optimizer.lr=1e-3,-1", "debug=fast", cwd=tmp_path)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1] == "Error: optimizer.lr=-1: out of range; accepted: a number > 0"
    assert not (tmp_path / "outputs").exists()


def weights_of(job_dir):
    with h5py.File(job_dir / "checkpoints" / "last.weights.h5", "r") as weights:
        arrays = []
        weights.visit(
            lambda name: arrays.append(np.array(weights[name])) if isinstance(weights[name], h5py.Dataset) else None
        )
    return arrays


ISOLATION = [
    "model=mlp",
    "data.fraction=0.3",
    "trainer.epochs=1",
    "logging.histogram_freq=0",
    "logging.write_graph=false",
    "export.formats=[]",
]


@pytest.fixture(scope="module")
def fp32_alone(tmp_path_factory):
    """The fp32 job swept alone (the basic launcher: the launching process): what it gives when nothing ran first."""
    cwd = tmp_path_factory.mktemp("alone")
    alone = run_cli("-m", "precision=fp32", *ISOLATION, "hydra/launcher=basic", cwd=cwd)
    assert alone.returncode == 0, alone.stderr[-2000:]
    (alone_job,) = only_sweep(cwd).glob("0_*")  # nothing swept: named by all its overrides
    return alone_job


@pytest.mark.slow  # about 16 s each
@pytest.mark.parametrize(
    "launcher",
    ["hydra/launcher=basic", "hydra.launcher.workers=1"],
    ids=["basic launcher: the launching process", "tfhydra launcher: one reused worker"],
)
def test_jobs_sharing_a_process_are_isolated(tmp_path, launcher, fp32_alone):
    """[mixed, fp32] in one process gives the fp32 job exactly what [fp32] alone gives it."""
    after_mixed = run_cli("-m", "precision=mixed,fp32", *ISOLATION, launcher, cwd=tmp_path)
    assert after_mixed.returncode == 0, after_mixed.stderr[-2000:]
    mixed_job, shared_job = only_sweep(tmp_path) / "0_precision=mixed", only_sweep(tmp_path) / "1_precision=fp32"
    assert metrics_of(mixed_job)["policy"] == "mixed_float16"
    assert metrics_of(shared_job)["policy"] == metrics_of(fp32_alone)["policy"] == "float32"
    assert metrics_of(shared_job)["history"] == metrics_of(fp32_alone)["history"]
    for shared, single in zip(weights_of(shared_job), weights_of(fp32_alone), strict=True):
        np.testing.assert_array_equal(shared, single)


@pytest.mark.slow
def test_acceptance_six_named_jobs_a_ranked_summary_and_hparams_for_all(tmp_path):
    """The issue's command: lr x batch size on digits, 2 epochs."""
    result = run_cli(
        "-m", "optimizer.lr=1e-3,5e-4,1e-4", "data.batch_size=32,64", "trainer.epochs=2", cwd=tmp_path, timeout=600
    )
    assert result.returncode == 0, result.stderr[-3000:]
    sweep = only_sweep(tmp_path)
    expected = [
        f"{n}_optimizer.lr={lr},data.batch_size={bs}"
        for n, (lr, bs) in enumerate((lr, bs) for lr in ("0.001", "0.0005", "0.0001") for bs in (32, 64))
    ]
    assert sorted(p.name for p in sweep.iterdir() if p.is_dir()) == sorted(expected)
    rows = list(csv.DictReader((sweep / "summary.csv").open()))
    best = [float(r["best_val_accuracy"]) for r in rows]
    assert [r["rank"] for r in rows] == ["1", "2", "3", "4", "5", "6"] and best == sorted(best, reverse=True)
    assert {r["status"] for r in rows} == {"completed"} and {r["epochs"] for r in rows} == {"2"}
    assert "| 6 |" in (sweep / "summary.md").read_text()
    with tensorboard_server(sweep, tmp_path / "tensorboard.log") as board:
        board.wait_until(lambda b: len(b.session_groups()) == 6, timeout=90)
        groups = {g["name"]: g for g in board.session_groups()}
        runs = board.runs()
    assert sorted(groups) == sorted(expected)
    for name in expected:
        lr, bs = name.split("_", 1)[1].replace("optimizer.lr=", "").replace("data.batch_size=", "").split(",")
        assert groups[name]["hparams"] == {"optimizer.lr": float(lr), "data.batch_size": float(bs)}
        assert {f"{name}/tensorboard/train", f"{name}/tensorboard/validation"} <= set(runs)
