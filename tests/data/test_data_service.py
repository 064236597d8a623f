"""`data.service.address`: the training pipeline on TensorFlow's tf.data service, on loopback with one
dispatcher and two workers started by `python -m tfhydra.data.service`; an unreachable address, or one where
something else listens, is one line within seconds; a service that goes away mid-run ends the run in one line, and
SIGTERM ends a run blocked on it (tfhydra/data/service_watch.py)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import data_files
import numpy as np
import pytest
from conftest import FAST, ROOT, _server_for, counts_cases, last_line, read_run_record, run_cli, start_cli
from hypothesis import given, settings
from hypothesis import strategies as st

from tfhydra.config.errors import ConfigError


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_listening(port: int, seconds: float = 60) -> None:
    deadline = time.time() + seconds
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.2)
    raise AssertionError(f"nothing listens on {port}")


def start_module(*args: str):
    """`python -m tfhydra.data.service ARGS`, its output discarded: forked from the test server that has imported
    TensorFlow once, as `run_module` forks tfhydra-evaluate (a `subprocess.Popen` when the tests do not fork)."""
    server = _server_for(())
    if server is None:
        command = [sys.executable, "-m", "tfhydra.data.service", *args]
        return subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    streams = {"stdout": os.devnull, "stderr": os.devnull}
    return server.start(list(args), ROOT, dict(os.environ), streams, module="tfhydra.data.service")


def start_service(workers: int = 2) -> tuple[str, list]:
    """A real dispatcher and `workers` workers on loopback: (its address, the processes)."""
    dispatcher = free_port()
    processes = [start_module("dispatcher", "--port", str(dispatcher))]
    wait_listening(dispatcher)
    ports = [free_port() for _ in range(workers)]
    for port in ports:
        processes.append(start_module("worker", "--port", str(port), "--dispatcher", f"localhost:{dispatcher}"))
    for port in ports:
        wait_listening(port)
    return f"grpc://localhost:{dispatcher}", processes


def kill_all(processes: list) -> None:
    for process in processes:
        process.kill()
        process.wait()


@pytest.fixture(scope="module")
def service():
    address, processes = start_service()
    yield address
    kill_all(processes)


def records(tmp_path):
    train = data_files.write_tfrecords(
        tmp_path / "d", "train", n=96, shards=8, shape=(6, 6, 1), classes=4, encoding="raw"
    )
    val = data_files.write_tfrecords(
        tmp_path / "d", "val", n=16, shards=2, shape=(6, 6, 1), classes=4, encoding="raw", seed=1
    )
    return [
        "data=tfrecord",
        f"data.train={train}",
        f"data.validation={val}",
        "data.encoding=raw",
        "data.raw_shape=[6,6,1]",
        "data.cache=false",
        "data.batch_size=16",
        "data.test_fraction=0",
    ]  # every one of the 96 training records trains: each is seen once an epoch


def test_distributed_epoch_sees_each_training_example_once_per_epoch(service, tmp_path, compose_cfg, monkeypatch):
    from tfhydra.data.pipeline import build_datasets

    monkeypatch.setenv("TFHYDRA_CACHE_DIR", str(tmp_path / "c"))
    datasets = build_datasets(compose_cfg([*records(tmp_path), f"data.service.address={service}"]).data, 0)
    assert datasets.spec.pipeline["service"] == service
    images, _ = data_files.class_images(96, (6, 6, 1), 4, seed=0)
    expected = sorted(image.tobytes() for image in images)
    for _ in range(2):  # two epochs: each a new job on the service, each example once
        seen = sorted(np.round(x * 255).astype(np.uint8).tobytes() for batch, _ in datasets.train for x in batch)
        assert seen == expected
    assert datasets.steps_per_epoch == 6 and len(list(datasets.train)) == 6


def test_an_unreachable_service_is_one_line(tmp_path, compose_cfg, monkeypatch):
    from tfhydra.data.pipeline import build_datasets

    monkeypatch.setenv("TFHYDRA_CACHE_DIR", str(tmp_path / "c"))
    port = free_port()
    with pytest.raises(ConfigError) as error:  # the connection's own 5 s limit ends the wait (no wall clock here)
        build_datasets(compose_cfg([*records(tmp_path), f"data.service.address=grpc://127.0.0.1:{port}"]).data, 0)
    assert str(error.value) == (
        f"data.service.address=grpc://127.0.0.1:{port}: cannot connect to 127.0.0.1:{port} "
        "within 5 s (Connection refused); accepted: the address of a running tf.data service "
        "dispatcher (python -m tfhydra.data.service dispatcher --port <port>)"
    )


@pytest.mark.parametrize("address", ["localhost", "http://localhost:5050", "grpc://:5050"])
def test_a_service_address_that_is_not_grpc_host_port_is_refused_by_the_plan(compose_cfg, address):
    from tfhydra.data.checks import check_streaming

    with pytest.raises(ConfigError) as error:
        check_streaming(compose_cfg([f"data.service.address='{address}'"]))
    assert str(error.value).endswith(
        "not a grpc://host:port address; accepted: grpc://host:port of a tf.data service dispatcher"
    )


@counts_cases()
@settings(max_examples=300, deadline=None, database=None)
@given(st.one_of(st.text(), st.text(alphabet="[]:/.@%0123456789abcdefghgrpc")))
def test_any_address_text_is_a_host_and_port_or_the_keys_one_line(address):
    """urlparse raises ValueError for some texts ('[]', found by the pre-flight property): never past here."""
    from tfhydra.data.service import dispatcher_host_port

    try:
        host, port = dispatcher_host_port(address)
    except ConfigError as error:
        assert str(error).startswith("data.service.address=")
    else:
        assert host and 0 <= port <= 65535


@pytest.mark.parametrize("value", ["[]", "[1]", "5050", "{a:1}"])
def test_an_address_that_is_not_text_is_refused_by_the_plan(compose_cfg, value):
    """A list or a mapping is refused by the schema's type while composing; a number is taken as its text
    (docs/design.md, "Typed configs") and refused by the plan as no grpc://host:port."""
    from tfhydra.data.checks import check_streaming

    with pytest.raises(ConfigError, match="^data.service.address="):
        check_streaming(compose_cfg([f"data.service.address={value}"]))


@pytest.mark.slow
def test_cli_a_run_on_the_data_service_completes(service, tmp_path, monkeypatch):
    monkeypatch.setenv("TFHYDRA_CACHE_DIR", str(tmp_path / "c"))  # inherited by the command run_cli forks
    run_dir = tmp_path / "run"
    result = run_cli(
        "model=mlp",
        *records(tmp_path),
        f"data.service.address={service}",
        *FAST,
        f"hydra.run.dir={run_dir}",
    )
    assert result.returncode == 0, last_line(result.stderr)
    record = read_run_record(run_dir)
    assert record["status"] == "completed" and record["data"]["pipeline"]["service"] == service


# --- Nothing waits forever (issue 35 item 5): a wrong server, a service gone mid-run, a signal while blocked ---


class SilentServer:
    """Accepts every connection and never says a word (a port some other program holds open)."""

    def __init__(self):
        self.socket = socket.socket()
        self.socket.bind(("127.0.0.1", 0))
        self.socket.listen()
        self.port, self.held = self.socket.getsockname()[1], []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                self.held.append(self.socket.accept()[0])
            except OSError:
                return

    def close(self):
        self.socket.close()
        for connection in self.held:
            connection.close()


class Http1Server:
    """A plain HTTP/1.1 server (Python's own) on loopback."""

    def __init__(self):
        import http.server

        class Quiet(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(params=["silent", "http1"])
def wrong_server(request):
    server = SilentServer() if request.param == "silent" else Http1Server()
    yield request.param, server.port
    server.close()


def test_a_real_dispatcher_answers_the_http2_probe(service):
    from tfhydra.data.service import dispatcher_host_port, probe

    assert probe(*dispatcher_host_port(service)) is None


@pytest.mark.slow  # the silent server is given the whole 5 s
def test_a_server_that_is_not_a_dispatcher_is_one_line(wrong_server):
    from tfhydra.data.service import check_reachable

    kind, port = wrong_server
    with pytest.raises(ConfigError) as error:
        check_reachable(f"grpc://127.0.0.1:{port}")
    why = "no HTTP/2 answer within 5 s" if kind == "silent" else "it answered "
    assert str(error.value).startswith(
        f"data.service.address=grpc://127.0.0.1:{port}: something listens on "
        f"127.0.0.1:{port} but it is not a tf.data service dispatcher ({why}"
    )


@pytest.mark.slow
@pytest.mark.parametrize("wrong_server", ["http1"], indirect=True)  # the silent one: the same line, 5 s later
def test_cli_a_wrong_server_ends_the_run_in_one_line(wrong_server, tmp_path, monkeypatch):
    """The run's wiring of the check: which server it is and why it is refused is check_reachable's decision, asserted
    for both servers by test_a_server_that_is_not_a_dispatcher_is_one_line."""
    kind, port = wrong_server
    monkeypatch.setenv("TFHYDRA_CACHE_DIR", str(tmp_path / "c"))  # inherited by the command run_cli forks
    run_dir = tmp_path / "run"
    started = time.perf_counter()
    result = run_cli(
        "model=mlp",
        *records(tmp_path),
        f"data.service.address=grpc://127.0.0.1:{port}",
        *FAST,
        f"hydra.run.dir={run_dir}",
        timeout=600,
    )
    print(f"{kind}: ended in {time.perf_counter() - started:.1f} s")  # docs/distribute.md quotes these
    assert result.returncode == 1
    line = last_line(result.stderr)
    assert line.startswith(
        f"Error: data.service.address=grpc://127.0.0.1:{port}: something listens on "
        f"127.0.0.1:{port} but it is not a tf.data service dispatcher"
    ), line
    assert "Traceback" not in result.stderr
    record = read_run_record(run_dir)
    assert record["status"] == "failed" and record["error"] == line.removeprefix("Error: ")


def start_training(tmp_path, address: str, *overrides: str):
    """`python train.py` on the service for many epochs, in the background (forked from the test server, as
    `run_cli`), once its first epoch is recorded: (the process, its run directory, the file of its stderr)."""
    run_dir = tmp_path / "run"
    env = {**os.environ, "PYTHONPATH": str(ROOT / "tests"), "TFHYDRA_CACHE_DIR": str(tmp_path / "c")}
    env.pop("HYDRA_FULL_ERROR", None)
    stderr = tmp_path / "stderr"
    process = start_cli(
        "model=mlp",
        *records(tmp_path),
        f"data.service.address={address}",
        "trainer.epochs=500",
        "logging.histogram_freq=0",
        f"hydra.run.dir={run_dir}",
        *overrides,
        cwd=ROOT,
        env=env,
        stderr=stderr,
    )
    history, deadline = run_dir / "checkpoints" / "history.json", time.time() + 500

    def epochs() -> int:
        try:
            return len(json.loads(history.read_text())["epochs"])
        except (OSError, ValueError, KeyError):
            return 0

    while epochs() < 1:
        assert process.poll() is None and time.time() < deadline, "the run did not start training"
        time.sleep(0.5)
    return process, run_dir, stderr


def ended(process, stderr: Path) -> str:
    """The process's stderr once it has ended (within 300 s)."""
    process.wait(timeout=300)
    return stderr.read_text(errors="replace")


@pytest.mark.slow
def test_cli_a_service_killed_mid_run_ends_it_failed_in_one_line(tmp_path):
    address, processes = start_service()
    try:
        process, run_dir, err = start_training(tmp_path, address, "data.service.timeout=5")
    finally:
        kill_all(processes)  # SIGKILL: dispatcher and workers gone mid-training
    killed = time.perf_counter()
    stderr = ended(process, err)
    print(f"ended {time.perf_counter() - killed:.1f} s after the kill: {last_line(stderr)}")  # docs quote it
    assert process.returncode == 1
    line = last_line(stderr)
    assert line.startswith(f"Error: data.service.address={address}: "), line
    assert "the same command resumes" in line and "Traceback" not in stderr
    record = read_run_record(run_dir)
    assert record["status"] == "failed" and record["error"] == line.removeprefix("Error: ")
    assert record["epochs_run"] >= 1 and (run_dir / "checkpoints" / "state").is_dir()  # what the resume starts from


@pytest.mark.slow
def test_cli_sigterm_ends_a_run_blocked_on_a_dead_service(tmp_path):
    address, processes = start_service()
    try:
        process, run_dir, err = start_training(tmp_path, address, "data.service.timeout=600")
    finally:
        kill_all(processes)
    time.sleep(3)  # the main thread is now waiting inside TensorFlow for a batch that never comes
    process.send_signal(signal.SIGTERM)
    signalled = time.perf_counter()
    stderr = ended(process, err)
    print(f"ended {time.perf_counter() - signalled:.1f} s after SIGTERM: {last_line(stderr)}")  # docs quote it
    assert process.returncode == 128 + signal.SIGTERM, stderr[-2000:]
    assert last_line(stderr).startswith("Stopped: interrupted by SIGTERM") and "Traceback" not in stderr
    record = read_run_record(run_dir)
    assert record["status"] == "interrupted" and "SIGTERM" in record["error"]


@pytest.mark.parametrize("key", ["data.service.timeout", "data.service.progress_timeout"])
@pytest.mark.parametrize("value", ["0", "-5", "soon"])
def test_a_service_deadline_that_is_not_a_positive_number_is_refused_by_the_plan(compose_cfg, key, value):
    from tfhydra.runner.plan import plan_run

    with pytest.raises(ConfigError, match=f"^{key}={value}: .*accepted: a number > 0"):
        plan_run(compose_cfg([f"{key}={value}"]))


@pytest.mark.slow
def test_cli_workers_killed_mid_run_end_it_at_the_progress_deadline(tmp_path):
    """The dispatcher lives and answers; its workers are gone: no batch comes, and no probe fails."""
    address, processes = start_service()
    try:
        process, run_dir, err = start_training(
            tmp_path, address, "data.service.timeout=600", "data.service.progress_timeout=10"
        )
        kill_all(processes[1:])
        killed = time.perf_counter()
        stderr = ended(process, err)
    finally:
        kill_all(processes)
    print(f"ended {time.perf_counter() - killed:.1f} s after the workers' kill: {last_line(stderr)}")
    assert process.returncode == 1, stderr[-2000:]
    line = last_line(stderr)
    assert line.startswith(f"Error: data.service.address={address}: no training step ended for "), line
    assert read_run_record(run_dir)["status"] == "failed"
