"""logger=mlflow: one MLflow run per tfhydra run, and for a sweep a parent run with its jobs as children.

The store: `logger.mlflow.tracking_uri`, else `$MLFLOW_TRACKING_URI`, else a SQLite database (a real MLflow
store; no server) `sqlite:///<outputs dir>/mlflow.db`, where the outputs dir is the nearest directory named
`outputs` above the run (`outputs/<date>/<time>`, `outputs/multirun/<date>/<time>/<job>`), else the directory
that holds the run (for a sweep's job: the sweep directory). Its artefacts go beside it, in `mlartifacts/`
(MLflow's own default, `./mlruns` of whatever directory the command ran in, would scatter them).

Only `MlflowClient` is used, never the fluent `mlflow.start_run`: jobs of one sweep may share a process, and
the fluent API's global active run and its atexit hook would tie them together.

A sweep's jobs may run in other processes or on other machines (joblib, submitit, Ray): the sweep callback
hands the parent run over in the jobs' config (`hydra.job.env_set.TFHYDRA_MLFLOW_PARENT`, JSON with the run
id and the tracking URI), which Hydra sets in the job's environment under every launcher.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from tfhydra.logger.schemas import MlflowConfig
from tfhydra.logger.trackers import (
    LOGGERS,
    TRACKER_STATUS,
    RunInfo,
    Tracker,
    flatten,
    quiet_loggers,
    quietly,
    read_json_map,
)
from tfhydra.platform.deadline import NoAnswer, within
from tfhydra.record.report import write_json
from tfhydra.record.run_record import Status
from tfhydra.record.rundir import RunPaths, SweepPaths

log = logging.getLogger("tfhydra")
PARENT_ENV = "TFHYDRA_MLFLOW_PARENT"  # {"run_id", "tracking_uri", "experiment_id"} of a sweep's parent run
MAX_PARAM = 6000  # MLflow's limit on a parameter's value (characters)


def outputs_dir(run_dir: Path) -> Path:
    """The nearest `outputs` directory above `run_dir`, else its parent: where the default store lives."""
    run_dir = Path(run_dir).absolute()
    return next((d for d in run_dir.parents if d.name == "outputs"), run_dir.parent)


def tracking_uri(node: DictConfig | dict, run_dir: Path) -> str:
    return (
        node.get("tracking_uri")
        or os.environ.get("MLFLOW_TRACKING_URI")
        or f"sqlite:///{outputs_dir(run_dir) / 'mlflow.db'}"
    )


def artifact_root(node: DictConfig | dict, uri: str) -> str | None:
    """A new experiment's artefact root: the configured one; beside a SQLite database; else the server's."""
    if node.get("artifact_location"):
        return str(node.get("artifact_location"))
    path = sqlite_path(uri)
    return (path.parent / "mlartifacts").absolute().as_uri() if path else None


def sqlite_path(uri: str) -> Path | None:
    """The database file of a `sqlite:///` store, also in SQLite's URI form (`sqlite:///file:<path>?mode=ro&uri=true`)."""
    if not uri.startswith("sqlite:///"):
        return None
    path = uri[len("sqlite:///") :]
    if path.startswith("file:"):
        path = path[len("file:") :].split("?", 1)[0]
    return Path(path)


# MLflow's own loggers: a failing store is a traceback (`_logger.exception`), SQLAlchemy's retry lines, Alembic's
# migrations, urllib3's retries of a server; tfhydra's one warning says what failed instead (docs/loggers.md).
MLFLOW_LOGGERS = ("mlflow", "alembic", "sqlalchemy", "huey", "urllib3.connectionpool")


@contextlib.contextmanager
def quiet_mlflow():
    """MLflow's loggers silenced around a call tfhydra makes. mlflow is imported first: its import sets its
    loggers' levels, which would undo the silence if it happened inside."""
    import mlflow  # noqa: F401

    with quiet_loggers(MLFLOW_LOGGERS):
        yield


def client(uri: str):
    """An MlflowClient on `uri`; a SQLite store's directory is made first (SQLite makes the file, not its folder)
    and checked: one MLflow cannot open is retried by MLflow for about 100 s before it gives up."""
    from mlflow.tracking import MlflowClient

    store = sqlite_path(uri)
    if store is not None:
        check_sqlite_store(store)
    return MlflowClient(tracking_uri=uri)


def check_sqlite_store(path: Path) -> None:
    """PermissionError when the database (or the directory its journal goes in) cannot be written: a read-only
    mount, an immutable file, another user's directory. Raised here it is the guard's one warning."""
    path.parent.mkdir(parents=True, exist_ok=True)
    for target in (path, path.parent) if path.exists() else (path.parent,):
        if not os.access(target, os.W_OK):
            raise PermissionError(f"the MLflow store {path} cannot be written ({target} is read-only)")


def experiment_id(mlflow_client, name: str, location: str | None) -> str:
    experiment = mlflow_client.get_experiment_by_name(name)
    if experiment is not None:
        if experiment.lifecycle_stage == "deleted":
            mlflow_client.restore_experiment(experiment.experiment_id)
        return experiment.experiment_id
    try:
        return mlflow_client.create_experiment(name, artifact_location=location)
    except Exception:  # another job of the sweep created it first
        experiment = mlflow_client.get_experiment_by_name(name)
        if experiment is None:
            raise
        return experiment.experiment_id


def parent_run() -> dict | None:
    try:
        parent = json.loads(os.environ.get(PARENT_ENV) or "null")
    except ValueError:
        return None
    return parent if isinstance(parent, dict) and parent.get("run_id") else None


class MLflowTracker(Tracker):
    name = "mlflow"
    address: str  # the tracking URI: the job's own, or the sweep's parent run's

    def __init__(self, node: DictConfig, paths: RunPaths, info: RunInfo) -> None:
        self.node, self.paths, self.info = node, paths, info
        parent = parent_run()
        self.address = parent["tracking_uri"] if parent else tracking_uri(node, paths.root)
        self.deadline = float(node.timeout)  # logger.mlflow.timeout: one call's longest wait (trackers.py's guard)
        # an MlflowClient once started: mlflow (an optional extra) is imported then, not by this module
        self.client: Any = None
        self.run_id: str | None = None

    def quiet(self):
        return quiet_mlflow()

    def start(self, saved: dict) -> dict:
        from mlflow.entities import Param

        parent, uri = parent_run(), self.address
        self.client = client(uri)
        run = self.existing(saved.get("run_id")) if saved.get("tracking_uri") == uri else None
        logged = 0
        if run is not None:  # a resumed run: the same MLflow run, from the epoch after its last one
            self.run_id = run.info.run_id
            self.client.update_run(self.run_id, status="RUNNING")
            logged = self.last_epoch(run)
        else:
            tags = {
                "mlflow.runName": self.info.name,
                "status": Status.RUNNING.value,
                "run_dir": str(self.paths.root.absolute()),
                **{k: str(v) for k, v in self.info.tags.items() if v is not None},
                **{str(k): str(v) for k, v in (self.node.get("tags") or {}).items()},
            }
            if parent:
                tags["mlflow.parentRunId"] = parent["run_id"]
            experiment = parent.get("experiment_id") if parent else None
            experiment = experiment or experiment_id(
                self.client, self.node.get("experiment_name") or "tfhydra", artifact_root(self.node, uri)
            )
            run = self.client.create_run(experiment, tags=tags, run_name=self.info.name)
            self.run_id = run.info.run_id
        # Parameters: the flattened config. A resumed run may change what RESUMABLE_CHANGES allows (the epochs):
        # MLflow refuses a new value for a logged parameter, so those keep their first value.
        have = run.data.params if run is not None else {}
        params = [Param(k, str(v)[:MAX_PARAM]) for k, v in flatten(self.info.config).items() if k not in have]
        for i in range(0, len(params), 100):  # MLflow takes at most 100 parameters a call
            self.client.log_batch(self.run_id, params=params[i : i + 100])
        return {"run_id": self.run_id, "tracking_uri": uri, "experiment_id": run.info.experiment_id, "logged": logged}

    def existing(self, run_id: str | None):
        if not run_id:
            return None
        try:
            return self.client.get_run(run_id)
        except Exception:  # noqa: BLE001  (deleted, or another store: a new run)
            return None

    def last_epoch(self, run) -> int:
        keys = sorted(run.data.metrics)
        if not keys:
            return 0
        return max((m.step for m in self.client.get_metric_history(run.info.run_id, keys[0])), default=0)

    def log_epoch(self, epoch: int, values: dict) -> None:
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        self.client.log_batch(self.run_id, metrics=[Metric(k, v, now, epoch) for k, v in values.items()])

    def end(self, status: str, paths: RunPaths) -> None:
        self.client.set_tag(self.run_id, "status", status)
        for path, where in (
            (paths.metrics, None),
            (paths.train_log, None),
            (paths.hydra, ".hydra"),
            (paths.export, "export"),
        ):
            if where == "export" and not (self.node.log_export and status == Status.COMPLETED):
                continue
            if path.is_file():
                self.client.log_artifact(self.run_id, str(path), where)
            elif path.is_dir():
                self.client.log_artifacts(self.run_id, str(path), where)
        self.client.set_terminated(self.run_id, TRACKER_STATUS.get(status, "FAILED"))


@LOGGERS.register("mlflow", schema=MlflowConfig)
def build_mlflow(node: DictConfig, paths: RunPaths, info: RunInfo) -> Tracker:
    return MLflowTracker(node, paths, info)


# ---- a sweep's parent run (tfhydra/sweep/callback.py, in the process that launched the sweep) ----------


def start_sweep_run(node: DictConfig, sweep_dir: Path, overrides: list[str]) -> dict | None:
    """The sweep's parent run (continued when the sweep is run again into its directory); None when it cannot
    be made, said once: the jobs are then runs of their own."""
    paths = SweepPaths(sweep_dir)
    uri = tracking_uri(node, paths.root / "job")  # where its jobs' runs would go: the same store
    parent = sweep_call(
        node, "starting the sweep's parent run", uri, partial(open_sweep_run, node, paths, uri, overrides)
    )
    if parent is None:
        log.warning("logger.mlflow: the sweep's jobs are runs of their own")
        return None
    paths.root.mkdir(parents=True, exist_ok=True)
    write_json(paths.trackers, {"mlflow": parent})
    return parent


def open_sweep_run(node: DictConfig, paths: SweepPaths, uri: str, overrides: list[str]) -> dict:
    mlflow_client = client(uri)
    saved = read_json_map(paths.trackers).get("mlflow") or {}
    run = None
    if saved.get("run_id") and saved.get("tracking_uri") == uri:
        try:
            run = mlflow_client.get_run(saved["run_id"])
            mlflow_client.update_run(run.info.run_id, status="RUNNING")
        except Exception:  # noqa: BLE001  (deleted, or another store: a new parent run)
            run = None
    if run is None:
        experiment = experiment_id(mlflow_client, node.get("experiment_name") or "tfhydra", artifact_root(node, uri))
        tags = {
            "mlflow.runName": paths.root.name,
            "sweep": paths.root.name,
            "status": Status.RUNNING.value,
            "sweep_dir": str(paths.root.absolute()),
            "overrides": " ".join(overrides)[:5000],
            **{str(k): str(v) for k, v in (node.get("tags") or {}).items()},
        }
        run = mlflow_client.create_run(experiment, tags=tags, run_name=paths.root.name)
    return {"run_id": run.info.run_id, "tracking_uri": uri, "experiment_id": run.info.experiment_id}


def end_sweep_run(node: DictConfig, sweep_dir: Path, succeeded: bool) -> None:
    """FINISHED when every job completed (or was pruned), else FAILED; the summary files as artefacts."""
    paths = SweepPaths(sweep_dir)
    parent = read_json_map(paths.trackers).get("mlflow")
    if parent:
        sweep_call(
            node,
            "ending the sweep's parent run",
            parent["tracking_uri"],
            partial(close_sweep_run, paths, parent, succeeded),
        )


def close_sweep_run(paths: SweepPaths, parent: dict, succeeded: bool) -> bool:
    mlflow_client = client(parent["tracking_uri"])
    for path in (paths.summary_csv, paths.summary_md, paths.summary_png, paths.multirun):
        if path.is_file():
            mlflow_client.log_artifact(parent["run_id"], str(path))
    mlflow_client.set_tag(parent["run_id"], "status", (Status.COMPLETED if succeeded else Status.FAILED).value)
    mlflow_client.set_terminated(parent["run_id"], "FINISHED" if succeeded else "FAILED")
    return True


def sweep_call(node: DictConfig, action: str, uri: str, call: Callable[[], Any]) -> Any:
    """A call for the sweep's parent run, in the launching process: waited on for `logger.mlflow.timeout` at most
    (tfhydra/platform/deadline.py); a failure or no answer is one warning and None (the jobs' runs are kept)."""
    seconds = float(node.timeout)
    try:
        with quiet_mlflow():  # MLflow's own tracebacks: the warning below says it
            return within(seconds, quietly(quiet_mlflow, call))
    except NoAnswer:
        log.warning("logger.mlflow: %s: %s gave no answer within logger.mlflow.timeout=%g s", action, uri, seconds)
    except Exception as error:  # noqa: BLE001  (the sweep goes on as it would)
        log.warning(
            "logger.mlflow: %s failed (%s: %s)", action, type(error).__name__, " ".join(str(error).split())[:300]
        )
    return None


def parent_handover(parent: dict) -> str:
    """The value of hydra.job.env_set.TFHYDRA_MLFLOW_PARENT for every job of the sweep."""
    return json.dumps(parent, sort_keys=True)


def selected(config: DictConfig) -> DictConfig | None:
    """The `logger.mlflow` node of a config, when MLflow is among its loggers."""
    node = OmegaConf.select(config, "logger.mlflow", default=None)
    return node if isinstance(node, DictConfig) else None
