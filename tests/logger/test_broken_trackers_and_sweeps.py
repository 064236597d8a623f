"""Trackers and sweeps when what they stand on is broken (issue 24, item 4): a read-only MLflow store is one
warning and no MLflow traceback; W&B writes nothing outside the run directory; a damaged Optuna study database
is one line before any job; a sweep job killed on a cluster (SIGKILL) leaves the other jobs, the summary and
one line naming the job and the launcher's reason."""

import csv
import logging
import os
import sqlite3
import subprocess
from pathlib import Path

import pytest
from conftest import last_line, read_run_record, run_cli
from ray_head import ray_cluster  # noqa: F401  (a fixture: a Ray head on 127.0.0.1)
from submitit_sweep import COMPLETED, FAILED, KILLED, submitit_sweep  # noqa: F401  (a fixture)

TINY = ["model=mlp", "logging.histogram_freq=0", "trainer.epochs=1", "export.formats=[]"]
TRACKER_VARIABLES = (
    "MLFLOW_TRACKING_URI",
    "WANDB_MODE",
    "WANDB_API_KEY",
    "WANDB_DIR",
    "WANDB_CACHE_DIR",
    "WANDB_CONFIG_DIR",
    "WANDB_DATA_DIR",
    "WANDB_ARTIFACT_DIR",
    "TFHYDRA_MLFLOW_PARENT",
)


@pytest.fixture(autouse=True)
def no_tracker_environment(monkeypatch):
    for name in TRACKER_VARIABLES:
        monkeypatch.delenv(name, raising=False)


# ---- 1. MLflow: a store it cannot write is the guard's one warning, never MLflow's own traceback ---------------


@pytest.fixture
def immutable(tmp_path):
    """chattr +i on paths (root ignores file modes; an immutable inode refuses even root), undone after."""
    made = []

    def make(path: Path) -> None:
        if subprocess.run(["chattr", "+i", str(path)], capture_output=True).returncode != 0:
            reason = "chattr +i is not available here (needs root on a file system that supports it)"
            pytest.fail(reason) if os.environ.get("CI") else pytest.skip(reason)  # CI runs as root: it must run
        made.append(path)

    yield make
    for path in reversed(made):
        subprocess.run(["chattr", "-i", str(path)], capture_output=True)


def mlflow_store(path: Path) -> str:
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{path}"
    MlflowClient(uri).create_experiment("tfhydra")
    return uri


@pytest.mark.slow
@pytest.mark.parametrize("what", ["directory", "database"])
def test_a_read_only_mlflow_store_is_one_warning_and_no_traceback(tmp_path, immutable, what):
    store = tmp_path / "store"
    store.mkdir()
    if what == "database":
        mlflow_store(store / "mlflow.db")
        immutable(store / "mlflow.db")
    immutable(store)
    run_dir = tmp_path / "run"
    result = run_cli(
        *TINY,
        "logger=[tensorboard,mlflow]",
        f"logger.mlflow.tracking_uri=sqlite:///{store / 'mlflow.db'}",
        f"hydra.run.dir={run_dir}",
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Traceback" not in result.stderr and "mlflow" not in result.stderr, result.stderr[-3000:]
    warnings = [line for line in (run_dir / "train.log").read_text().splitlines() if "WARNING" in line]
    target = store / "mlflow.db" if what == "database" else store
    assert len(warnings) == 1 and warnings[0].endswith(
        f"logger.mlflow: starting its run failed (PermissionError: the MLflow store {store / 'mlflow.db'} cannot be "
        f"written ({target} is read-only)); the run goes on without mlflow"
    ), warnings
    assert read_run_record(run_dir)["status"] == "completed"


def test_mlflow_s_own_logging_is_silent_inside_tfhydra_s_calls_and_restored_after(tmp_path, monkeypatch, capfd, caplog):
    """A store MLflow opens but cannot write (SQLite's read-only mode): MLflow logs the SQLAlchemy error with its
    traceback (`_logger.exception`) before raising. Inside the guard only tfhydra's warning is said."""
    from omegaconf import OmegaConf

    from tfhydra.logger.mlflow_run import MLflowTracker
    from tfhydra.logger.trackers import RunInfo, Trackers
    from tfhydra.record.rundir import RunPaths

    monkeypatch.chdir(tmp_path)  # MLflow makes the URI form's "file:" folders in the working directory
    mlflow_store(tmp_path / "mlflow.db")
    capfd.readouterr()
    node = OmegaConf.create(
        {"tracking_uri": f"sqlite:///file:{tmp_path / 'mlflow.db'}?mode=ro&uri=true", "timeout": 60}
    )
    paths = RunPaths(tmp_path / "run")
    tracker = MLflowTracker(node, paths, RunInfo(name="run", config={"optimizer": {"lr": 0.1}}, tags={}))
    level = logging.getLogger("mlflow").level
    with caplog.at_level(logging.WARNING, logger="tfhydra"):
        trackers = Trackers([tracker], paths).start(resume=False)
    out, err = capfd.readouterr()
    assert "Traceback" not in err + out and "mlflow.store" not in err + out, err
    [warning] = [r.getMessage() for r in caplog.records if r.name == "tfhydra"]
    assert (
        warning.startswith("logger.mlflow: starting its run failed (MlflowException: ")
        and "attempt to write a readonly database" in warning
        and warning.endswith("the run goes on without mlflow")
    )
    assert trackers.failed == {"mlflow"} and logging.getLogger("mlflow").level == level  # put back after the call


# ---- 2. W&B: its debug logs, cache, staging and settings stay in the run directory ---------------------------


def every_file(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}


@pytest.mark.slow
def test_wandb_writes_nothing_outside_the_run_directory(tmp_path):
    home, temp, run_dir = tmp_path / "home", tmp_path / "tmp", tmp_path / "run"
    home.mkdir()
    temp.mkdir()
    result = run_cli(
        *TINY,
        "logger=[tensorboard,wandb]",
        f"hydra.run.dir={run_dir}",
        cwd=tmp_path,
        env={"HOME": str(home), "TMPDIR": str(temp)},
    )  # W&B's variables: unset (the fixture)
    assert result.returncode == 0, result.stderr[-3000:]
    assert every_file(home) <= {".keras/keras.json"}, every_file(home)  # Keras' own settings file, not W&B's
    assert not [p for p in every_file(temp) if "wandb" in p.lower()], every_file(temp)
    assert not (tmp_path / "artifacts").exists() and not (tmp_path / "wandb").exists()
    files = every_file(run_dir / "wandb")
    assert {"debug.log", "debug-internal.log"} <= files, files
    assert [p for p in files if p.startswith("cache/wandb/logs/core-debug-")], files  # was ~/.cache/wandb/logs
    assert [p for p in files if p.startswith("offline-run-") and p.endswith("/files/metrics.json")], files


def test_wandb_directories_are_set_for_the_run_only_and_the_user_s_own_are_kept(tmp_path, monkeypatch):
    from tfhydra.logger.wandb_run import restore, set_directories

    monkeypatch.setenv("WANDB_CACHE_DIR", "/somewhere/of/mine")
    before = set_directories(tmp_path / "wandb", online=False)
    assert os.environ["WANDB_CACHE_DIR"] == "/somewhere/of/mine"
    assert os.environ["WANDB_DATA_DIR"] == str(tmp_path / "wandb" / "data")
    assert os.environ["WANDB_ARTIFACT_DIR"] == str(tmp_path / "wandb" / "artifacts")
    assert os.environ["WANDB_CONFIG_DIR"] == str(tmp_path / "wandb" / "config")
    restore(before)
    assert os.environ["WANDB_CACHE_DIR"] == "/somewhere/of/mine"
    assert not {"WANDB_DATA_DIR", "WANDB_ARTIFACT_DIR", "WANDB_CONFIG_DIR"} & set(os.environ)
    online = set_directories(tmp_path / "wandb", online=True)  # online: `wandb login`'s settings stay the user's
    assert "WANDB_CONFIG_DIR" not in os.environ and "WANDB_CONFIG_DIR" not in online
    restore(online)


# ---- 3. Optuna: a damaged study database is one line before any job --------------------------------------

ACCEPTED = (
    "accepted: sqlite:///<file> of an Optuna study (or a file not there yet), a database URL Optuna opens "
    "(postgresql://..., mysql://...), or null for <sweep dir>/optuna.db"
)


def garbage(path: Path) -> str:
    path.write_bytes(bytes(range(256)) * 20)
    return "is not a readable SQLite database (file is not a database)"


def truncated(path: Path) -> str:
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    whole = path.with_name("whole.db")
    optuna.create_study(storage=f"sqlite:///{whole}").optimize(lambda t: t.suggest_float("x", 0, 1), n_trials=2)
    data = whole.read_bytes()
    path.write_bytes(data[: len(data) // 3])
    return "is not a readable SQLite database (database disk image is malformed)"


def another_program(path: Path) -> str:
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE notes (text)")
    return "is an SQLite database of another program (tables notes), not an Optuna study"


@pytest.mark.parametrize("damage", [garbage, truncated, another_program])
def test_a_damaged_optuna_study_database_is_refused_naming_it_and_left_as_it_was(tmp_path, damage):
    """What the search checks before any job (tfhydra.sweep.search.open_study), for each damage, in-process; the
    command's one line and its sweep without jobs: test_a_damaged_optuna_study_database_is_one_line_before_any_job."""
    from tfhydra.config.errors import ConfigError
    from tfhydra.sweep.search import open_study

    db = tmp_path / "study.db"
    problem = damage(db)
    before = db.read_bytes()
    url = f"sqlite:///{db}"
    with pytest.raises(ConfigError) as error:
        open_study(url, url, study_name="tfhydra", direction="maximize")
    assert str(error.value) == f"hydra.sweeper.storage={url}: {db} {problem}; {ACCEPTED}"
    assert db.read_bytes() == before  # another program's database is left as it was


def test_a_damaged_optuna_study_database_is_one_line_before_any_job(tmp_path):
    db = tmp_path / "study.db"
    problem = another_program(db)
    before = db.read_bytes()
    sweep = tmp_path / "sweep"
    result = run_cli(
        "-m",
        "hparams_search=optuna",
        f"hydra.sweeper.storage=sqlite:///{db}",
        "hydra.sweeper.n_trials=1",
        f"hydra.sweep.dir={sweep}",
        "debug=fast",
        cwd=tmp_path,
    )
    assert result.returncode == 1
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    assert last_line(result.stderr) == f"Error: hydra.sweeper.storage=sqlite:///{db}: {db} {problem}; {ACCEPTED}"
    assert not [p for p in sweep.iterdir() if p.is_dir()]  # no job started
    assert db.read_bytes() == before  # another program's database is left as it was


@pytest.mark.parametrize(
    "url, reason",
    [
        ("nosuch://host/db", "Can't load plugin: sqlalchemy.dialects:nosuch"),
        ("sqlite:////no/such/folder/study.db", "unable to open database file"),
    ],
)
def test_a_storage_optuna_cannot_open_is_a_config_error_naming_it(url, reason):
    from tfhydra.config.errors import ConfigError
    from tfhydra.sweep.search import open_study

    with pytest.raises(ConfigError) as error:
        open_study(url, url, study_name="tfhydra", direction="maximize")
    assert str(error.value) == f"hydra.sweeper.storage={url}: Optuna cannot open the study there ({reason}); {ACCEPTED}"


def test_a_default_study_database_that_is_damaged_names_its_file(tmp_path):
    from tfhydra.config.errors import ConfigError
    from tfhydra.sweep.search import open_study, storage_url

    url = storage_url(tmp_path, None)
    garbage(tmp_path / "optuna.db")
    with pytest.raises(ConfigError) as error:
        open_study(url, None, study_name="tfhydra", direction="maximize")
    assert str(error.value).startswith(
        f"hydra.sweeper.storage (null: {url}): {(tmp_path / 'optuna.db').resolve()} is not a readable SQLite database"
    )


# ---- 4. a job killed on a cluster: the other jobs, the summary, one line, exit 1 -------------------------------

KILL_AT = "trainer.callbacks=[{_target_: sweep_code.KillAtLearningRate, lr: %s}]"


def summary_rows(sweep: Path) -> list[tuple]:
    return [(r["job"], r["status"], r["directory"]) for r in csv.DictReader((sweep / "summary.csv").open())]


@pytest.mark.slow
def test_a_submitit_job_killed_by_sigkill_leaves_the_summary_and_one_line(
    submitit_sweep,  # noqa: F811  (pytest passes the fixture imported from submitit_sweep)
):
    """The first job is the one killed: submitit raises while the others are still running; they are waited for.
    The session's submitit sweep (tests/submitit_sweep.py), also read by tests/launch/test_sweep_cluster.py."""
    result, sweep, _ = submitit_sweep
    assert result.returncode == 1, result.stderr[-3000:]
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    assert [line for line in result.stderr.splitlines() if line.startswith("Error:")] == [last_line(result.stderr)]
    line = last_line(result.stderr)
    assert line.startswith(
        f"Error: 2 of 3 jobs did not complete: {KILLED} lost by the launcher (UncompletedJobError: Job "
    ) and line.endswith(f"has not produced any output (state: FINISHED)); {FAILED} (failed)"), line
    assert summary_rows(sweep) == [("2", "completed", COMPLETED), ("0", "failed", KILLED), ("1", "failed", FAILED)]
    killed = read_run_record(sweep / KILLED)
    assert killed["error"].startswith(
        "lost by the launcher (killed on the cluster? out of memory, a lost node, SIGKILL): UncompletedJobError: Job "
    ), killed["error"]
    assert read_run_record(sweep / COMPLETED)["epochs_run"] == 1
    assert f"{KILLED}` (failed): lost by the launcher" in (sweep / "summary.md").read_text()


def test_only_a_launcher_s_own_exceptions_count_as_a_lost_job():
    from submitit.core.utils import UncompletedJobError

    from tfhydra.launch.lost_jobs import is_lost_job, launcher_reason

    error = UncompletedJobError(
        "Job 7_1 (task: 0) with path /x/7_1_0_result.pkl\nhas not produced any output "
        "(state: OUT_OF_MEMORY)\nError stream produced:\n----\nKilled\n"
    )
    assert is_lost_job(error) and not is_lost_job(RuntimeError("a job's own error"))
    assert launcher_reason(error) == (
        "UncompletedJobError: Job 7_1 (task: 0) with path /x/7_1_0_result.pkl has not "
        "produced any output (state: OUT_OF_MEMORY)"
    )


@pytest.mark.slow
def test_a_ray_job_whose_worker_is_killed_leaves_the_summary_and_one_line(
    ray_cluster,  # noqa: F811  (pytest passes the fixture imported from ray_head)
    tmp_path,
):
    """Ray's worker process SIGKILLed (what Ray's own OOM killer or a lost node does): WorkerCrashedError. Ray
    retries a crashed task by default; max_retries=0 keeps the test to one attempt."""
    sweep = tmp_path / "sweep"
    result = run_cli(
        "-m",
        "hydra/launcher=ray",
        f"hydra.launcher.ray.init.address={ray_cluster}",
        "+hydra.launcher.ray.remote.max_retries=0",
        f"hydra.sweep.dir={sweep}",
        "optimizer.lr=1e-3,5e-4",
        "model=mlp",
        "debug=fast",
        KILL_AT % "0.0005",
        cwd=tmp_path,
        timeout=400,
        env={"RAY_AUTH_MODE": "disabled"},
    )
    assert result.returncode == 1, result.stderr[-3000:]
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    assert [line for line in result.stderr.splitlines() if line.startswith("Error:")] == [last_line(result.stderr)]
    assert last_line(result.stderr).startswith(
        "Error: 1 of 2 jobs did not complete: 1_optimizer.lr=0.0005 lost by the launcher (WorkerCrashedError: "
    ), last_line(result.stderr)
    assert summary_rows(sweep) == [("0", "completed", "0_optimizer.lr=0.001"), ("1", "failed", "1_optimizer.lr=0.0005")]
    assert "WorkerCrashedError" in read_run_record(sweep / "1_optimizer.lr=0.0005")["error"]
