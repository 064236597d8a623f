"""An MLflow tracking server that stops answering (issue 46, item 5): every call tfhydra makes into MLflow is waited
on for `logger.mlflow.timeout` seconds at most, then one warning names the server and the key, and the run goes on
without MLflow; a signal taken while a call is waited on is acted on within a fraction of a second
(tfhydra/platform/deadline.py, the guard in tfhydra/logger/trackers.py).

The hung server is a loopback socket that takes connections and never answers: what a stopped `mlflow server` (or
one whose worker hangs) looks like to its clients, whose kernel still completes the TCP handshake. The client is
MLflow's own, over HTTP."""

import logging
import signal
import socket
import threading
import time
from types import SimpleNamespace

import pytest
from conftest import ROOT, TESTS, last_line, read_run_record, run_cli, start_cli

TINY = ["model=mlp", "logging.histogram_freq=0", "trainer.epochs=1", "export.formats=[]", "data.fraction=0.2"]


@pytest.fixture(autouse=True)
def no_tracker_environment(monkeypatch):
    for name in ("MLFLOW_TRACKING_URI", "TFHYDRA_MLFLOW_PARENT"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def hung_server():
    """(socket, URI): listening on 127.0.0.1; connections are taken (by the kernel, or by the test) and never
    answered."""
    server = socket.create_server(("127.0.0.1", 0), backlog=64)
    try:
        yield server, f"http://127.0.0.1:{server.getsockname()[1]}"
    finally:
        server.close()


def tracker_on(uri: str, tmp_path, timeout: float):
    from omegaconf import OmegaConf

    from tfhydra.logger.mlflow_run import MLflowTracker
    from tfhydra.logger.trackers import RunInfo
    from tfhydra.record.rundir import RunPaths

    node = OmegaConf.create({"tracking_uri": uri, "experiment_name": "tfhydra", "timeout": timeout})
    paths = RunPaths(tmp_path / "run")
    paths.root.mkdir(parents=True, exist_ok=True)
    return MLflowTracker(node, paths, RunInfo(name="run", config={"optimizer": {"lr": 0.1}}, tags={})), paths


def one_warning(caplog, action) -> tuple[str, float]:
    """tfhydra's one warning while `action()` ran, and how long it took."""
    began = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="tfhydra"):
        action()
    [warning] = [r.getMessage() for r in caplog.records if r.name == "tfhydra"]
    return warning, time.monotonic() - began


def test_a_tracking_server_that_never_answers_is_one_warning_within_the_deadline(tmp_path, hung_server, caplog):
    import mlflow  # noqa: F401  (its import, seconds, is not the wait)

    from tfhydra.logger.trackers import Trackers

    _, uri = hung_server
    tracker, paths = tracker_on(uri, tmp_path, timeout=1.5)
    trackers = Trackers([tracker], paths)

    def start_log_and_end() -> None:
        trackers.start(resume=False)
        trackers.log_history([{"loss": 1.0}])  # left alone from then on: no second wait
        trackers.end("completed", [{"loss": 1.0}])

    warning, waited = one_warning(caplog, start_log_and_end)
    assert warning == (
        f"logger.mlflow: starting its run: {uri} gave no answer within logger.mlflow.timeout=1.5 s; the run goes "
        "on without mlflow (its run stays RUNNING there: the same command resumes it)"
    )
    assert 1.5 <= waited < 3.5 and trackers.failed == {"mlflow"}


def test_a_signal_taken_while_an_epoch_is_waited_on_ends_the_wait_at_once(tmp_path, hung_server, caplog):
    """Mid-run: the run's MLflow run was started (its id is known), then its server stops answering; SIGTERM
    during training only sets the flag (tfhydra.trainer.state.StopOnSignal), and the wait on the epoch's figures ends
    so that the next step boundary saves and stops the run."""
    from mlflow.tracking import MlflowClient

    from tfhydra.logger.trackers import Trackers

    _, uri = hung_server
    tracker, paths = tracker_on(uri, tmp_path, timeout=600)
    tracker.client, tracker.run_id = MlflowClient(tracking_uri=uri), "0123456789abcdef"
    stop = SimpleNamespace(signum=None)
    trackers = Trackers([tracker], paths, saved={"mlflow": {"run_id": tracker.run_id, "logged": 0}}, stop=stop)
    threading.Timer(0.5, lambda: setattr(stop, "signum", signal.SIGTERM)).start()
    warning, waited = one_warning(caplog, lambda: trackers.log_history([{"loss": 1.0}]))
    assert warning == (
        f"logger.mlflow: logging epoch 1: {uri} was still waited on when SIGTERM came: given up, so the run "
        "stops at once, without mlflow"
    )
    assert 0.5 <= waited < 1.5 and trackers.failed == {"mlflow"}


@pytest.mark.slow
def test_cli_a_run_whose_tracking_server_hangs_completes_with_one_warning(tmp_path, hung_server):
    _, uri = hung_server
    run_dir = tmp_path / "run"
    began = time.monotonic()
    result = run_cli(
        *TINY,
        "logger=[mlflow]",
        f"logger.mlflow.tracking_uri={uri}",
        "logger.mlflow.timeout=3",
        f"hydra.run.dir={run_dir}",
    )
    took = time.monotonic() - began
    print(f"the run took {took:.1f} s with a 3 s MLflow deadline")
    assert result.returncode == 0, result.stderr[-2000:]
    said = result.stdout + result.stderr  # Hydra's console handler writes the run's log lines to stdout
    lines = [line for line in said.splitlines() if "mlflow" in line.lower() and "overrides:" not in line]
    assert len(lines) == 1 and f"{uri} gave no answer within logger.mlflow.timeout=3 s" in lines[0], lines
    assert "Traceback" not in said and "urllib3" not in said and read_run_record(run_dir)["status"] == "completed"


@pytest.mark.slow
def test_cli_sigterm_ends_a_run_waiting_on_a_hung_tracking_server(tmp_path, hung_server):
    server, uri = hung_server
    run_dir = tmp_path / "run"
    process = start_cli(  # forked from the test server, as run_cli: the run's answer to SIGTERM, not its start-up
        *TINY,
        "logger=[mlflow]",
        f"logger.mlflow.tracking_uri={uri}",  # logger.mlflow.timeout: its default, 120 s
        f"hydra.run.dir={run_dir}",
        cwd=ROOT,
        env={**__import__("os").environ, "PYTHONPATH": str(TESTS)},
        stderr=tmp_path / "stderr",
    )
    server.settimeout(120)
    connection, _ = server.accept()  # MLflow's client asks; nothing answers
    time.sleep(1)
    process.send_signal(signal.SIGTERM)
    signalled = time.monotonic()
    process.wait(timeout=60)
    ended = time.monotonic() - signalled
    stderr = (tmp_path / "stderr").read_text()
    connection.close()
    print(f"ended {ended:.1f} s after SIGTERM: {last_line(stderr)}")
    assert process.returncode == 128 + signal.SIGTERM and ended < 10, stderr[-2000:]
    assert last_line(stderr).startswith("Stopped: interrupted by SIGTERM") and "Traceback" not in stderr
    assert read_run_record(run_dir)["status"] == "interrupted"
