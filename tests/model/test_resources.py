"""Resources checked before work (issue 35, item 7): a model or a declared dataset that cannot fit in the memory
this process may take is one line before anything is allocated; what fits is estimated from the real model."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import FAST, TESTS, last_line, read_run_record, run_cli

from tfhydra.config.contracts import DataSpec
from tfhydra.config.errors import ConfigError

SPEC = DataSpec((28, 28, 1), 10, tuple(str(i) for i in range(10)), 1000, 200)


@pytest.mark.parametrize("overrides", [["model=mlp"], ["model=cnn"], ["model=mlp", "model.units=[512,256]"]])
def test_the_estimate_counts_the_parameters_keras_builds(compose_cfg, overrides):
    from tfhydra.model.build import build_model
    from tfhydra.model.memory import check_model_fits, estimated_bytes

    cfg = compose_cfg(overrides)
    total, parameters, per_example = estimated_bytes(cfg.model, SPEC, 32, slots=2)
    real = build_model(cfg.model, SPEC)
    assert parameters == real.count_params()
    assert per_example >= 28 * 28 + 10  # at least the flattened input and the softmax
    assert total == parameters * 16 + per_example * 32 * 4 * 2
    check_model_fits(cfg, SPEC)  # fits: no error


def test_the_estimate_holds_after_a_deterministic_run_in_the_same_process():
    """Op determinism is process-wide: after a deterministic run in the same notebook kernel or test session,
    Dropout's unseeded op refused the symbolic build, and the estimate was silently skipped (returned None)."""
    code = (
        "import tensorflow as tf; tf.config.experimental.enable_op_determinism();"
        "from conftest import compose_config; from tfhydra.model.memory import estimated_bytes;"
        "from test_resources import SPEC;"
        "print(estimated_bytes(compose_config(['model=mlp']).model, SPEC, 32, slots=2))"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), str(Path(__file__).parent)])}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env)
    assert out.returncode == 0, out.stderr[-2000:]
    # 784*64+64 + 64*32+32 + 32*10+10 parameters of model=mlp on 28x28x1 with 10 classes
    assert out.stdout.strip().splitlines()[-1].startswith("(") and ", 52650, " in out.stdout, out.stdout


def test_a_model_too_big_for_the_machine_is_refused_without_allocating_it(compose_cfg):
    import resource

    from tfhydra.model.memory import check_model_fits

    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(ConfigError) as refused:
        check_model_fits(compose_cfg(["model=mlp", "model.units=[2147483648]"]), SPEC)
    message = str(refused.value)
    assert message.startswith("model=mlp: it needs at least ") and "1.71e+12 parameters" in message, message
    assert "this process may take" in message and "\n" not in message
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 500 * 1024  # KiB: nothing was allocated


def test_a_declared_dataset_too_big_is_refused_by_the_plan(compose_cfg):
    from tfhydra.runner.plan import plan_run

    with pytest.raises(ConfigError) as refused:
        plan_run(compose_cfg(["data=synthetic", "data.train_size=10000000000"]))
    assert str(refused.value).startswith(
        "data.train_size=10000000000: 7.84e+12 float32 values (train, validation "
        "and test sizes times the shape) need about "
    )
    plan_run(compose_cfg(["data=synthetic", "data.train_size=100000"]))  # 0.9 GB: fits
    with pytest.raises(ConfigError) as refused:  # a shape of which not 64 examples fit: the shape is at fault
        plan_run(compose_cfg(["data=synthetic", "data.shape=[1000000000,1000000000,3]"]))
    assert str(refused.value).startswith(
        "data.shape=[1000000000, 1000000000, 3]: one example is 3e+18 values; 9.22e+21 float32 values (train, "
        "validation and test sizes times the shape) need about 1.11e+23 B to make; accepted: a shape of which 64 "
        "examples fit the "
    )


@pytest.mark.slow
def test_cli_a_layer_of_two_to_the_31_units_is_one_line_and_a_failed_record(tmp_path):
    run = tmp_path / "run"
    result = run_cli("model=mlp", "model.units=[2147483648]", *FAST, f"hydra.run.dir={run}", timeout=900)
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr[-3000:]
    assert last_line(result.stderr).startswith("Error: model=mlp: it needs at least ")
    record = read_run_record(run)
    assert record["status"] == "failed" and "parameters with gradients" in record["error"]


def test_the_estimate_leaves_the_seeded_initial_weights_as_they_were():
    """The symbolic build draws no random number the real one would have drawn (a seeded run's first weights are
    the same with the check as without: tests/trainer/test_trainer.py compares them with a model built by hand)."""
    import numpy as np
    import tf_keras as keras
    from omegaconf import OmegaConf

    from tfhydra.model.build import build_model
    from tfhydra.model.memory import estimated_bytes

    cfg = OmegaConf.create({"name": "mlp", "units": [16], "dropout": 0.0, "activation": "relu"})
    keras.utils.set_random_seed(0)
    alone = build_model(cfg, SPEC).get_weights()
    keras.utils.set_random_seed(0)
    estimated_bytes(cfg, SPEC, 32, slots=2)
    after = build_model(cfg, SPEC).get_weights()
    assert all(np.array_equal(a, b) for a, b in zip(alone, after, strict=True))
