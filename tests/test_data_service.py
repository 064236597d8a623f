"""`data.service.address`: the training pipeline on TensorFlow's tf.data service, on loopback with one
dispatcher and two workers started by `python -m tfhydra.data.service`; an unreachable address is one line
within seconds."""
from __future__ import annotations

import socket
import subprocess
import sys
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import data_files
from conftest import FAST, ROOT, last_line, read_run_record, run_cli
from tfhydra.errors import ConfigError


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


@pytest.fixture(scope="module")
def service():
    dispatcher = free_port()
    module = [sys.executable, "-m", "tfhydra.data.service"]
    processes = [subprocess.Popen([*module, "dispatcher", "--port", str(dispatcher)], cwd=ROOT,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
    wait_listening(dispatcher)
    for _ in range(2):
        port = free_port()
        processes.append(subprocess.Popen([*module, "worker", "--port", str(port), "--dispatcher",
                                           f"localhost:{dispatcher}"], cwd=ROOT, stdout=subprocess.DEVNULL,
                                          stderr=subprocess.DEVNULL))
        wait_listening(port)
    yield f"grpc://localhost:{dispatcher}"
    for process in processes:
        process.kill()
        process.wait()


def records(tmp_path):
    train = data_files.write_tfrecords(tmp_path / "d", "train", n=96, shards=8, shape=(6, 6, 1), classes=4,
                                       encoding="raw")
    val = data_files.write_tfrecords(tmp_path / "d", "val", n=16, shards=2, shape=(6, 6, 1), classes=4,
                                     encoding="raw", seed=1)
    return ["data=tfrecord", f"data.train={train}", f"data.validation={val}", "data.encoding=raw",
            "data.raw_shape=[6,6,1]", "data.cache=false", "data.batch_size=16"]


def test_distributed_epoch_sees_each_training_example_once_per_epoch(service, tmp_path, compose_cfg, monkeypatch):
    from tfhydra.data import build_datasets

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
    from tfhydra.data import build_datasets

    monkeypatch.setenv("TFHYDRA_CACHE_DIR", str(tmp_path / "c"))
    port = free_port()
    with pytest.raises(ConfigError) as error:  # the connection's own 5 s limit ends the wait (no wall clock here)
        build_datasets(compose_cfg([*records(tmp_path), f"data.service.address=grpc://127.0.0.1:{port}"]).data, 0)
    assert str(error.value) == (f"data.service.address=grpc://127.0.0.1:{port}: cannot connect to 127.0.0.1:{port} "
                                "within 5 s (Connection refused); accepted: the address of a running tf.data service "
                                "dispatcher (python -m tfhydra.data.service dispatcher --port <port>)")


@pytest.mark.parametrize("address", ["localhost", "http://localhost:5050", "grpc://:5050"])
def test_a_service_address_that_is_not_grpc_host_port_is_refused_by_the_plan(compose_cfg, address):
    from tfhydra.data.checks import check_streaming

    with pytest.raises(ConfigError) as error:
        check_streaming(compose_cfg([f"data.service.address='{address}'"]))
    assert str(error.value).endswith("not a grpc://host:port address; accepted: grpc://host:port of a tf.data "
                                     "service dispatcher")


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


@pytest.mark.parametrize("value", [[], [1], 5050, {"a": 1}])
def test_an_address_that_is_not_text_is_refused_by_the_plan(compose_cfg, value):
    from tfhydra.data.checks import check_streaming

    cfg = compose_cfg([])
    cfg.data.service.address = value
    with pytest.raises(ConfigError, match="^data.service.address="):
        check_streaming(cfg)


@pytest.mark.slow
def test_cli_a_run_on_the_data_service_completes(service, tmp_path):
    run_dir = tmp_path / "run"
    result = run_cli("model=mlp", *records(tmp_path), f"data.service.address={service}", *FAST,
                     f"hydra.run.dir={run_dir}", env={"TFHYDRA_CACHE_DIR": str(tmp_path / "c")})
    assert result.returncode == 0, last_line(result.stderr)
    record = read_run_record(run_dir)
    assert record["status"] == "completed" and record["data"]["pipeline"]["service"] == service
