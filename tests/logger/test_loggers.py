"""The `logger` group: MLflow on a real SQLite store (read back with MLflow's own client), W&B offline (its
files read back without the network), CSV; a tracker that fails never stops the run; a killed run resumed is
still one tracker run; a sweep is a parent MLflow run with its jobs as children."""

import csv
import logging
import socket

import pytest
from conftest import last_line, read_run_record, run_cli
from run_processes import BASE, epochs_recorded, finish, kill, start, wait_for

import tfhydra
from tfhydra.config.errors import ConfigError

TINY = ["model=mlp", "logging.histogram_freq=0"]


@pytest.fixture(autouse=True)
def no_tracker_environment(monkeypatch, tmp_path):
    """Nothing from the machine's environment decides where a tracker writes; W&B stays off the network."""
    for name in ("MLFLOW_TRACKING_URI", "WANDB_MODE", "WANDB_API_KEY", "WANDB_DIR", "TFHYDRA_MLFLOW_PARENT"):
        monkeypatch.delenv(name, raising=False)
    for name in ("WANDB_CONFIG_DIR", "WANDB_CACHE_DIR", "WANDB_DATA_DIR"):
        monkeypatch.setenv(name, str(tmp_path / "wandb-home"))


def mlflow_runs(uri: str):
    from mlflow.tracking import MlflowClient

    client = MlflowClient(uri)
    experiments = [e.experiment_id for e in client.search_experiments()]
    return client, client.search_runs(experiments)


def steps(client, run, key="loss") -> list[int]:
    return sorted(m.step for m in client.get_metric_history(run.info.run_id, key))


def artefacts(client, run) -> set[str]:
    return {a.path for a in client.list_artifacts(run.info.run_id)}


def test_tensorboard_stays_the_default_and_loggers_combine():
    default = tfhydra.compose([])
    assert default.logging.tensorboard is True and "logger" not in default
    both = tfhydra.compose(["logger=[tensorboard,mlflow,csv]"])
    assert both.logging.tensorboard is True and set(both.logger) == {"mlflow", "csv"}
    alone = tfhydra.compose(["logger=[mlflow]"])
    assert alone.logging.tensorboard is False and alone.logger.mlflow.experiment_name == "tfhydra"
    assert tfhydra.compose(["logger=[tensorboard]", "logging.tensorboard=false"]).logging.tensorboard is False


@pytest.mark.parametrize(
    "choice,message",
    [
        (
            "logger=[tensorbord,mlflow]",
            "logger=tensorbord: no such logger option (did you mean tensorboard?); "
            "accepted: one of csv, mlflow, tensorboard, wandb",
        ),
        (
            "logger=mlfow",
            "logger=mlfow: no such logger option (did you mean mlflow?); accepted: one of csv, mlflow, "
            "tensorboard, wandb",
        ),
        (
            "logger.wandb.mode=offlin",
            "logger.wandb.mode=offlin: not an accepted value; accepted: null ($WANDB_MODE, "
            "else offline), offline, online or disabled",
        ),
    ],
)
def test_a_misspelt_logger_is_one_line_with_a_suggestion(choice, message):
    overrides = [choice] if choice.startswith("logger=") else ["logger=[wandb]", choice]
    with pytest.raises(ConfigError) as error:
        tfhydra.compose(overrides)
    assert str(error.value) == message


def test_the_command_line_answers_a_misspelt_logger_before_anything_starts(tmp_path):
    result = run_cli("logger=[tensorboard,mlfow]", f"hydra.run.dir={tmp_path / 'run'}")
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert last_line(result.stderr) == (
        "Error: logger=mlfow: no such logger option (did you mean mlflow?); "
        "accepted: one of csv, mlflow, tensorboard, wandb"
    )
    assert not (tmp_path / "run").exists()


def test_a_tracker_that_is_not_installed_is_refused_by_the_plan(monkeypatch):
    import importlib.util

    from tfhydra.runner.plan import plan_run

    cfg = tfhydra.compose(["logger=[tensorboard,wandb]"])
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "wandb" else real(name, *a))
    with pytest.raises(ConfigError, match=r"^logger=wandb: wandb not installed; accepted: pip install -e '.\[wandb\]'"):
        plan_run(cfg)


def test_mlflow_keeps_one_run_per_job_in_a_sqlite_store(tmp_path):
    run_dir = tmp_path / "runs" / "first"
    cfg = tfhydra.compose([*TINY, "trainer.epochs=3", "logger=[tensorboard,mlflow,csv]", "optimizer.lr=0.002"])
    tfhydra.run(cfg, run_dir=run_dir)
    assert (tmp_path / "runs" / "mlflow.db").is_file()  # the default store: beside the runs
    client, runs = mlflow_runs(f"sqlite:///{tmp_path / 'runs' / 'mlflow.db'}")
    assert len(runs) == 1
    run = runs[0]
    assert run.info.status == "FINISHED" and run.info.run_name == "first"
    assert steps(client, run) == [1, 2, 3] and steps(client, run, "val_accuracy") == [1, 2, 3]
    record = read_run_record(run_dir)
    assert run.data.metrics["val_accuracy"] == pytest.approx(record["final"]["val_accuracy"])
    assert run.data.params["optimizer.lr"] == "0.002" and run.data.params["trainer.epochs"] == "3"
    assert run.data.tags["status"] == "completed" and run.data.tags["model"] == "mlp"
    assert run.data.tags["data"] == "digits" and "sweep" not in run.data.tags
    assert {"metrics.json", ".hydra", "export"} <= artefacts(client, run)
    assert (run_dir / "tensorboard" / "train").is_dir()  # TensorBoard still writes beside it
    with (run_dir / "metrics.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert [r["epoch"] for r in rows] == ["1", "2", "3"] and "learning_rate" in rows[0]


@pytest.mark.parametrize(
    "status,overrides",
    [
        ("failed", ["~model", "+model._target_=user_code.not_a_model"]),  # a mistake only the job can see
        ("diverged", ["model=mlp", "trainer.max_loss=1e-9"]),
    ],
)
def test_a_run_that_does_not_complete_ends_its_mlflow_run_failed(tmp_path, status, overrides):
    run_dir = tmp_path / status
    cfg = tfhydra.compose([*overrides, "logging.histogram_freq=0", "trainer.epochs=1", "logger=[mlflow]"])
    if status == "failed":
        with pytest.raises(ConfigError):
            tfhydra.run(cfg, run_dir=run_dir)
    else:
        tfhydra.run(cfg, run_dir=run_dir)
    assert read_run_record(run_dir)["status"] == status
    _, [run] = mlflow_runs(f"sqlite:///{tmp_path / 'mlflow.db'}")
    assert run.info.status == "FAILED" and run.data.tags["status"] == status
    assert not (run_dir / "tensorboard").exists()  # logger=[mlflow] alone: no TensorBoard


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("store", ["sqlite-under-a-file", "server-down"])
def test_a_failing_tracker_warns_once_and_the_run_completes(tmp_path, monkeypatch, caplog, store):
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "2")
    (tmp_path / "a-file").write_text("not a directory")
    uri = (
        f"sqlite:///{tmp_path / 'a-file' / 'mlflow.db'}"
        if store == "sqlite-under-a-file"
        else f"http://127.0.0.1:{closed_port()}"
    )
    cfg = tfhydra.compose([*TINY, "trainer.epochs=2", "logger=[mlflow,csv]", f"logger.mlflow.tracking_uri={uri}"])
    with caplog.at_level(logging.WARNING, logger="tfhydra"):
        tfhydra.run(cfg, run_dir=tmp_path / "run")
    warnings = [r.getMessage() for r in caplog.records if "logger.mlflow" in r.getMessage()]
    assert len(warnings) == 1 and "the run goes on without mlflow" in warnings[0], warnings
    assert read_run_record(tmp_path / "run")["status"] == "completed"
    assert (tmp_path / "run" / "metrics.csv").read_text().count("\n") == 3  # the other tracker went on


def test_wandb_runs_offline_and_leaves_the_epoch_metrics_in_its_files(tmp_path):
    from wandb_records import history, records

    run_dir = tmp_path / "run"
    tfhydra.run(tfhydra.compose([*TINY, "trainer.epochs=2", "logger=[wandb]", "export.formats=[]"]), run_dir=run_dir)
    [offline] = (run_dir / "wandb").glob("offline-run-*")  # offline by default: no account, no network
    [log_file] = offline.glob("run-*.wandb")
    rows = history(log_file)
    assert [r["epoch"] for r in rows] == [1, 2] and [r["_step"] for r in rows] == [1, 2]
    record = read_run_record(run_dir)
    for row, epoch in zip(rows, record["history"], strict=True):
        assert row["val_accuracy"] == pytest.approx(epoch["val_accuracy"]) and "learning_rate" in row
    [run] = [r.run for r in records(log_file) if r.WhichOneof("record_type") == "run"]
    assert run.display_name == "run" and run.project == "tfhydra"
    assert (offline / "files" / "metrics.json").is_file()
    [exit_record] = [r.exit for r in records(log_file) if r.WhichOneof("record_type") == "exit"]
    assert exit_record.exit_code == 0


# ---- the trackers without training: statuses, isolation, each epoch once ---------------------------------


class FakeTracker:
    def __init__(self, name, fail_on=None, logged=0):
        self.name, self.fail_on, self.logged, self.epochs, self.ended = name, fail_on, logged, [], None

    def start(self, saved):
        return {"logged": self.logged}

    def log_epoch(self, epoch, values):
        if self.fail_on == "log":
            raise OSError(28, "No space left on device")
        self.epochs.append(epoch)

    def end(self, status, paths):
        self.ended = status


def test_a_tracker_that_raises_is_dropped_and_the_others_go_on(tmp_path, caplog):
    from tfhydra.logger.trackers import Trackers
    from tfhydra.record.rundir import RunPaths

    good, bad = FakeTracker("good"), FakeTracker("bad", fail_on="log")
    trackers = Trackers([good, bad], RunPaths(tmp_path)).start(resume=True)
    with caplog.at_level(logging.WARNING, logger="tfhydra"):
        trackers.log_history([{"loss": 1.0}])
        trackers.log_history([{"loss": 1.0}, {"loss": 0.5}])
        trackers.end("completed", [{"loss": 1.0}, {"loss": 0.5}, {"loss": 0.4}])
    assert good.epochs == [1, 2, 3] and good.ended == "completed" and bad.ended is None
    assert [r.getMessage() for r in caplog.records] == [
        "logger.bad: logging epoch 1 failed (OSError: [Errno 28] No space left on device); the run goes on without bad"
    ]


def test_a_resumed_tracker_gets_only_the_epochs_it_does_not_have(tmp_path):
    from tfhydra.logger.trackers import Trackers
    from tfhydra.record.rundir import RunPaths

    resumed = FakeTracker("resumed", logged=2)  # its store has epochs 1 and 2 already
    trackers = Trackers([resumed], RunPaths(tmp_path)).start(resume=True)
    trackers.log_history([{"loss": 1.0}, {"loss": 0.9}, {"loss": 0.8}, {}])  # {}: an epoch whose figures were lost
    assert resumed.epochs == [3]


@pytest.mark.parametrize(
    "status,expected",
    [
        ("completed", "FINISHED"),
        ("pruned", "FINISHED"),
        ("diverged", "FAILED"),
        ("failed", "FAILED"),
        ("interrupted", "KILLED"),
    ],
)
def test_every_record_status_has_a_tracker_status(status, expected):
    from tfhydra.logger.trackers import TRACKER_STATUS
    from tfhydra.record.run_record import STATUSES

    assert set(TRACKER_STATUS) == set(STATUSES) - {"not started"} and TRACKER_STATUS[status] == expected


# ---- real processes: killed and resumed, a sweep ------------------------------------------------------------


@pytest.mark.slow
def test_a_run_killed_and_resumed_is_still_one_mlflow_run(tmp_path):
    args = [*BASE, "trainer.epochs=4", "logger=[tensorboard,mlflow,csv]"]
    run_dir = tmp_path / "run"
    process = start(run_dir, *args)
    try:
        assert wait_for(process, lambda: epochs_recorded(run_dir) >= 2), (tmp_path / "run.stderr").read_text()[-2000:]
    finally:
        kill(process)
    client, [killed] = mlflow_runs(f"sqlite:///{tmp_path / 'mlflow.db'}")
    assert killed.info.status == "RUNNING"  # SIGKILL: nothing could end it
    finish(run_dir, *args, epochs=4)
    client, [run] = mlflow_runs(f"sqlite:///{tmp_path / 'mlflow.db'}")
    assert run.info.run_id == killed.info.run_id and run.info.status == "FINISHED"
    assert steps(client, run) == [1, 2, 3, 4] and steps(client, run, "val_accuracy") == [1, 2, 3, 4]
    assert "resumed from" in (run_dir / "train.log").read_text()
    with (run_dir / "metrics.csv").open() as handle:
        assert [r["epoch"] for r in csv.DictReader(handle)] == ["1", "2", "3", "4"]


@pytest.mark.slow
def test_a_tracking_server_down_is_one_warning_in_train_log(tmp_path):
    run_dir = tmp_path / "run"
    port = closed_port()
    result = run_cli(
        *TINY,
        "trainer.epochs=1",
        "export.formats=[]",
        "logger=[tensorboard,mlflow]",
        f"logger.mlflow.tracking_uri=http://127.0.0.1:{port}",
        f"hydra.run.dir={run_dir}",
        env={"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0", "MLFLOW_HTTP_REQUEST_TIMEOUT": "2"},
    )
    assert result.returncode == 0, result.stderr[-2000:]
    log = (run_dir / "train.log").read_text()
    assert log.count("the run goes on without mlflow") == 1 and log.count("][WARNING] - ") == 1  # tfhydra's own lines
    assert read_run_record(run_dir)["status"] == "completed"


@pytest.mark.slow
def test_a_sweep_is_a_parent_mlflow_run_with_its_jobs_as_children(tmp_path):
    sweep = tmp_path / "sweep"
    result = run_cli(
        "-m",
        *TINY,
        "trainer.epochs=1",
        "export.formats=[]",
        "logger=[mlflow]",
        "optimizer.lr=1e-3,5e-4",
        f"hydra.sweep.dir={sweep}",
    )
    assert result.returncode == 0, result.stderr[-3000:]
    client, runs = mlflow_runs(f"sqlite:///{sweep / 'mlflow.db'}")
    [parent] = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id]
    assert len(runs) == 3 and len(children) == 2
    assert parent.info.status == "FINISHED" and parent.info.run_name == "sweep"
    assert {"summary.csv", "summary.md"} <= artefacts(client, parent)
    assert sorted(c.data.params["optimizer.lr"] for c in children) == ["0.0005", "0.001"]
    assert {c.info.run_name for c in children} == {p.name for p in sweep.glob("[01]_optimizer.lr=*")}
    for child in children:
        assert child.info.status == "FINISHED" and child.data.tags["sweep"] == "sweep"
        assert steps(client, child) == [1]
