"""Precision policies and tf.distribute strategies, on a CPU-only machine.

Multi-replica runs use `strategy.logical_cpus=2` (two logical CPU devices) or two worker
processes on the loopback interface; each needs a fresh process, so they go through the CLI.
"""

import json
import socket

import numpy as np
import pytest
import tensorflow as tf
from cluster_workers import free_ports, start_workers
from conftest import assert_failed_record, last_line, read_run_record, run_cli
from run_processes import kill
from shared_runs import trained_run

import tfhydra

# One optimizer step per epoch on one fixed global batch: the loss after that step shows
# whether the replicas' gradients were combined into the single-device gradient.
ONE_STEP = [
    "data=synthetic",
    "data.train_size=64",
    "data.val_size=64",
    "data.batch_size=64",
    "data.shuffle_buffer=0",
    "trainer.epochs=1",
    "trainer.deterministic=true",
    "logging.histogram_freq=0",
    "model=mlp",
    "model.dropout=0.0",
    "optimizer.lr=0.01",
]


def figures(run_dir):
    metrics = read_run_record(run_dir)
    return metrics, metrics["history"][0]


def one_device(tmp_path_factory, loop="fit"):
    """The single-device run of ONE_STEP in `loop`, trained once per session (tests/shared_runs.py): the reference
    of the mirrored run and of both two-worker clusters (trainer.loop=fit is the default they run)."""
    return trained_run(tmp_path_factory, *ONE_STEP, f"trainer.loop={loop}")


@pytest.mark.slow
@pytest.mark.parametrize("loop", ["fit", "custom"])
def test_mirrored_on_two_cpus_matches_one_device(tmp_path, tmp_path_factory, loop):
    strategy = ["strategy=mirrored", "strategy.logical_cpus=2"]
    result = run_cli(*ONE_STEP, f"trainer.loop={loop}", *strategy, f"hydra.run.dir={tmp_path / 'mirrored'}")
    assert result.returncode == 0, result.stderr[-2000:]
    (single, first), (mirrored, second) = figures(one_device(tmp_path_factory, loop)), figures(tmp_path / "mirrored")
    assert mirrored["replicas"] == 2 and mirrored["strategy"] == "MirroredStrategy" and len(mirrored["devices"]) == 2
    assert single["replicas"] == 1
    assert second["loss"] == pytest.approx(first["loss"], rel=1e-5)  # the step's forward pass
    assert second["val_loss"] == pytest.approx(first["val_loss"], rel=1e-5)  # after the combined update
    assert (tmp_path / "mirrored" / "export" / "saved_model" / "saved_model.pb").is_file()


def consecutive_free_ports(count):
    """`count` free ports in a row (SLURM's resolver gives a host's tasks port, port + 1, ...)."""
    for _ in range(50):
        first = free_ports(1)[0]
        sockets = []
        try:
            for port in range(first, first + count):
                sockets.append(socket.socket())
                sockets[-1].bind(("127.0.0.1", port))
            return list(range(first, first + count))
        except OSError:
            continue
        finally:
            for s in sockets:
                s.close()
    raise RuntimeError("no free consecutive ports")


def run_two_workers(tmp_path, environments, *args):
    """Two `train.py` workers (worker `i` in tmp_path/worker<i> with environments[i], forked from the test server as
    tests/cluster_workers.py starts them) to the end."""
    processes = start_workers(tmp_path, [*ONE_STEP, *args], environments, attempt=1)
    try:
        codes = [p.wait(timeout=300) for p in processes]
    finally:
        for p in processes:
            kill(p)
    errors = [(tmp_path / f"worker{i}.1.stderr").read_text()[-1500:] for i in range(len(processes))]
    assert codes == [0, 0], errors


def assert_two_workers_match_one_process(tmp_path, tmp_path_factory):
    chief, other = tmp_path / "worker0", tmp_path / "worker1"
    assert (chief / "export" / "saved_model" / "saved_model.pb").is_file() and (chief / "metrics.json").is_file()
    assert (chief / "tensorboard").is_dir() and (chief / "checkpoints" / "best.weights.h5").is_file()
    assert not (other / "export").exists() and not (other / "metrics.json").exists()
    assert not (other / "tensorboard").exists() and not (other / "checkpoints").exists()

    (distributed, first), (_, single) = figures(chief), figures(one_device(tmp_path_factory))
    assert distributed["replicas"] == 2 and distributed["strategy"] == "MultiWorkerMirroredStrategy"
    assert first["loss"] == pytest.approx(single["loss"], rel=1e-5)
    assert first["val_loss"] == pytest.approx(single["val_loss"], rel=1e-5)


@pytest.mark.slow
def test_multi_worker_on_loopback_matches_one_process(tmp_path, tmp_path_factory):
    workers = [f"127.0.0.1:{port}" for port in free_ports(2)]
    run_two_workers(
        tmp_path,
        [
            {"TF_CONFIG": json.dumps({"cluster": {"worker": workers}, "task": {"type": "worker", "index": index}})}
            for index in range(2)
        ],
        "strategy=multi_worker",
    )
    assert_two_workers_match_one_process(tmp_path, tmp_path_factory)


def slurm_environment(rank: int, tasks: int = 2, host: str = "127.0.0.1") -> dict:
    """What `srun --ntasks=2` sets for task `rank` of a one-node step (the variables TensorFlow's resolver reads)."""
    return {
        "SLURM_PROCID": str(rank),
        "SLURM_STEP_NODELIST": host,
        "SLURM_STEP_TASKS_PER_NODE": str(tasks),
        "SLURM_STEP_NUM_TASKS": str(tasks),
        "SLURM_JOB_ID": "4242",
        "SLURM_NTASKS": str(tasks),
    }


@pytest.mark.slow
def test_multi_worker_resolved_from_slurms_environment_matches_one_process(tmp_path, tmp_path_factory):
    port = consecutive_free_ports(2)[0]
    environments = [{**slurm_environment(rank), "TF_CONFIG": ""} for rank in range(2)]  # no TF_CONFIG: SLURM's only
    run_two_workers(
        tmp_path, environments, "strategy=multi_worker", "strategy.cluster_resolver=slurm", f"strategy.port={port}"
    )
    assert_two_workers_match_one_process(tmp_path, tmp_path_factory)


def test_the_slurm_resolver_outside_a_slurm_step_is_one_line(tmp_path):
    env = {k: "" for k in slurm_environment(0)}
    result = run_cli(
        *ONE_STEP,
        "strategy=multi_worker",
        "strategy.cluster_resolver=slurm",
        f"hydra.run.dir={tmp_path / 'run'}",
        env=env,
    )
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert last_line(result.stderr) == (
        "Error: strategy.cluster_resolver=slurm: SLURM_PROCID, SLURM_STEP_NODELIST, SLURM_STEP_TASKS_PER_NODE, "
        "SLURM_STEP_NUM_TASKS not set: not inside a SLURM job step; accepted: a step started by srun (SLURM_PROCID, "
        "SLURM_STEP_NODELIST, SLURM_STEP_TASKS_PER_NODE, SLURM_STEP_NUM_TASKS in the environment; docs/distribute.md "
        "has an sbatch script)"
    )
    assert_failed_record(tmp_path / "run", "not inside a SLURM job step")


class FakeKubernetesApi:
    """The one call of the Kubernetes API that TensorFlow's resolver makes (list_pod_for_all_namespaces), answered
    from a fixed list of pods: the cluster a manifest like docs/distribute.md's would start."""

    def __init__(self, pods):
        from types import SimpleNamespace as NS

        self.pods = [NS(metadata=NS(name=name), status=NS(phase=phase, host_ip=ip)) for name, ip, phase in pods]
        self.selectors = []

    def list_pod_for_all_namespaces(self, label_selector):
        from types import SimpleNamespace

        self.selectors.append(label_selector)
        return SimpleNamespace(items=list(reversed(self.pods)))


def test_the_kubernetes_resolver_finds_the_workers_and_this_pods_index(compose_cfg):
    from tfhydra.strategy.build import kubernetes_resolver_from

    cfg = compose_cfg(["strategy=multi_worker", "strategy.cluster_resolver=kubernetes", "strategy.port=2222"]).strategy
    api = FakeKubernetesApi([("train-worker-0", "10.0.0.5", "Running"), ("train-worker-1", "10.0.0.6", "Running")])
    resolver = kubernetes_resolver_from(api, cfg, "train-worker-1", "accepted")
    assert resolver.cluster_spec().as_dict() == {"worker": ["10.0.0.5:2222", "10.0.0.6:2222"]}
    assert (resolver.task_type, resolver.task_id) == ("worker", 1)
    assert set(api.selectors) == {"job-name=tfhydra-worker"}
    with pytest.raises(tfhydra.ConfigError, match="this pod \\(elsewhere\\) is not among the 2 pods it selects"):
        kubernetes_resolver_from(api, cfg, "elsewhere", "accepted")
    pending = FakeKubernetesApi([("train-worker-0", "10.0.0.5", "Running"), ("train-worker-1", "", "Pending")])
    with pytest.raises(tfhydra.ConfigError, match='Pod "train-worker-1" is not running; phase: "Pending"'):
        kubernetes_resolver_from(pending, cfg, "train-worker-0", "accepted")


TF_CONFIG_MISTAKES = [
    (
        None,
        "TF_CONFIG: strategy=multi_worker needs the TF_CONFIG environment variable on every worker; it is not set",
    ),
    ("{not json", "not valid JSON"),
    ('{"cluster": {}, "task": {"type": "worker", "index": 0}}', "cluster.worker (a list of host:port) is missing"),
    ('{"cluster": {"worker": ["127.0.0.1:1"]}}', "task.type and task.index are missing"),
    (
        '{"cluster": {"worker": ["127.0.0.1:1"]}, "task": {"type": "worker", "index": 3}}',
        "task worker:3 is not in the cluster",
    ),
]


@pytest.mark.parametrize("tf_config,message", TF_CONFIG_MISTAKES)
def test_multi_worker_tf_config_errors_are_one_line(monkeypatch, tf_config, message):
    """What strategy=multi_worker reads of TF_CONFIG (tfhydra/strategy/build.py: read_tf_config), each mistake one
    line naming it and the accepted form; how a run ends on one is the test below (one mistake, the whole job)."""
    from tfhydra.strategy.build import read_tf_config

    if tf_config is None:
        monkeypatch.delenv("TF_CONFIG", raising=False)
    else:
        monkeypatch.setenv("TF_CONFIG", tf_config)
    with pytest.raises(tfhydra.ConfigError) as refused:
        read_tf_config()
    line = str(refused.value)
    assert "\n" not in line and message in line and "accepted: TF_CONFIG=" in line, line


def test_a_tf_config_mistake_ends_the_run_in_one_line_with_its_record(tmp_path, monkeypatch):
    """One of TF_CONFIG_MISTAKES (none set: the command is forked from the tests' server, as a variable set for it
    would not be) through `python train.py`: exit 1, the one line last on stderr, no traceback, the failed record."""
    tf_config, message = TF_CONFIG_MISTAKES[0]
    assert tf_config is None
    monkeypatch.delenv("TF_CONFIG", raising=False)
    result = run_cli("strategy=multi_worker", "trainer.epochs=1", f"hydra.run.dir={tmp_path}")
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert message in last_line(result.stderr) and "accepted: TF_CONFIG=" in last_line(result.stderr)
    assert_failed_record(tmp_path, message)


def test_global_batch_not_divisible_by_replicas_is_refused(tmp_path):
    result = run_cli("strategy=mirrored", "strategy.logical_cpus=2", "data.batch_size=33", f"hydra.run.dir={tmp_path}")
    assert result.returncode == 1
    assert last_line(result.stderr) == (
        "Error: data.batch_size=33: not divisible by the replica count; accepted: a "
        "multiple of the 2 replicas (it is the global batch; each replica gets "
        "batch_size / 2)"
    )


@pytest.mark.parametrize("precision,policy", [("mixed", "mixed_float16"), ("bf16", "mixed_bfloat16")])
@pytest.mark.parametrize("loop", ["fit", "custom"])
def test_low_precision_trains_with_float32_output(tmp_path, compose_cfg, precision, policy, loop):
    import tf_keras as keras

    cfg = compose_cfg(
        [
            f"precision={precision}",
            f"trainer.loop={loop}",
            "data=synthetic",
            "data.train_size=64",
            "data.val_size=32",
            "trainer.epochs=1",
            "logging.histogram_freq=0",
        ]
    )
    tfhydra.run(cfg, run_dir=tmp_path)
    metrics = read_run_record(tmp_path)
    assert metrics["status"] == "completed" and metrics["policy"] == policy
    assert (metrics["loss_scale"] is None) == (precision == "bf16")  # bf16 needs no loss scaling
    assert np.isfinite(metrics["final"]["loss"])
    served = tf.saved_model.load(str(tmp_path / "export" / "saved_model"))
    output = served.serve(tf.zeros((2, 28, 28, 1)))
    assert output.dtype == tf.float32
    assert keras.mixed_precision.global_policy().name == "float32"  # restored after the run


def test_fp32_job_after_a_mixed_job_in_one_process_is_float32(tmp_path, compose_cfg):
    from tfhydra.data.pipeline import build_datasets
    from tfhydra.model.build import build_model

    base = ["data=synthetic", "data.train_size=64", "data.val_size=32", "trainer.epochs=1", "logging.histogram_freq=0"]
    tfhydra.run(compose_cfg(["precision=mixed", *base]), run_dir=tmp_path / "mixed")
    cfg = compose_cfg(["precision=fp32", *base])
    tfhydra.run(cfg, run_dir=tmp_path / "fp32")
    assert read_run_record(tmp_path / "fp32")["policy"] == "float32"
    model = build_model(cfg.model, build_datasets(cfg.data, 0).spec)  # as the fp32 job built it, after the mixed one
    assert {layer.compute_dtype for layer in model.layers} == {"float32"}
    assert {v.dtype for v in model.variables} == {tf.float32}


def test_user_model_with_float16_output_gets_a_float32_cast(compose_cfg):
    import tf_keras as keras

    from tfhydra.config.contracts import DataSpec
    from tfhydra.model.build import build_model
    from tfhydra.precision.build import float32_output, policy_scope

    cfg = compose_cfg(["~model", "+model._target_=user_code.build_tiny_model", "precision=mixed"])
    with policy_scope(cfg.precision):
        model = build_model(cfg.model, DataSpec((8, 8, 1), 3, ("a", "b", "c"), 1, 1))
        assert model.output.dtype == tf.float16  # the user's softmax follows the mixed policy
        fixed = float32_output(model)
    assert fixed.output.dtype == tf.float32 and fixed.layers[-1].name == "float32_output"
    assert (
        float32_output(keras.Sequential([keras.Input((2,)), keras.layers.Dense(2)])).layers[-1].name != "float32_output"
    )
