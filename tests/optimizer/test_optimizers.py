"""The optimizer group's options (issue 38 item 2): each is the tf_keras class it names, at optimizer.lr shaped by
optimizer.schedule, with the trainer's clipping; a user's `_target_` optimizer gets the rate and the schedule when
its constructor takes `learning_rate`, and is refused in one line when it cannot take them."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras
from conftest import compose_config, run_cli
from omegaconf import OmegaConf

from tfhydra.config.errors import ConfigError
from tfhydra.config.project import CONFIG_DIR
from tfhydra.optimizer.build import KERAS_CLASSES, OPTIMIZERS, build_optimizer

LR, STEPS, EPOCHS = 3e-3, 2, 2
COSINE_AFTER_ONE_STEP = LR * 0.5 * (1 + math.cos(math.pi * 1 / (STEPS * EPOCHS)))  # CosineDecay, no warm-up


def one_step(optimizer, steps: int = 1) -> tuple[float, np.ndarray]:
    """The rate the optimizer used for its last step (what the record logs at an epoch's end) after `steps` applied
    steps, and how far they moved a variable."""
    variable = tf.Variable(np.ones((4, 3), np.float32))
    for _ in range(steps):
        optimizer.apply_gradients([(tf.fill((4, 3), 0.5), variable)])
    rate = optimizer.learning_rate
    rate = rate(optimizer.iterations) if isinstance(rate, keras.optimizers.schedules.LearningRateSchedule) else rate
    return float(keras.backend.get_value(rate)), 1.0 - variable.numpy()


def test_every_option_has_its_config_and_its_class():
    assert sorted(p.stem for p in (CONFIG_DIR / "optimizer").glob("*.yaml")) == sorted(OPTIMIZERS.names())
    assert set(OPTIMIZERS.names()) == set(KERAS_CLASSES) >= {"adamw", "rmsprop", "nadam", "lion", "adafactor"}


@pytest.mark.parametrize("name", sorted(KERAS_CLASSES))
def test_each_option_is_its_class_at_the_scheduled_rate_after_a_step(name):
    cfg = compose_config(
        [f"optimizer={name}", f"optimizer.lr={LR}", "optimizer.schedule.name=cosine", f"trainer.epochs={EPOCHS}"]
    )
    optimizer = build_optimizer(cfg.optimizer, STEPS, EPOCHS, {"clipnorm": 1.0, "clipvalue": None})
    assert type(optimizer) is getattr(keras.optimizers, KERAS_CLASSES[name])
    assert optimizer.clipnorm == 1.0
    rate, moved = one_step(optimizer, steps=2)  # the second step's rate: the schedule after one step
    assert int(optimizer.iterations) == 2
    assert rate == pytest.approx(COSINE_AFTER_ONE_STEP, rel=1e-5)
    assert np.all(moved > 0)  # the step went against the gradient
    for key, value in OmegaConf.to_container(cfg.optimizer).items():  # the option's keys reach the class
        if key not in ("name", "lr", "schedule") and value is not None:
            assert optimizer.get_config()[key] == pytest.approx(value), key


def test_the_option_keys_take_their_values():
    cfg = compose_config(["optimizer=adamw", "optimizer.weight_decay=0.1", "optimizer.lr=0.01"])
    optimizer = build_optimizer(cfg.optimizer, STEPS, EPOCHS)
    assert optimizer.get_config()["weight_decay"] == pytest.approx(0.1)
    assert one_step(optimizer)[0] == pytest.approx(0.01)


@pytest.mark.parametrize("name", sorted(KERAS_CLASSES))
def test_an_added_key_the_class_does_not_take_is_one_line_naming_it(name):
    """Found by the run property (`+optimizer.extra=1e-127`): tf_keras raised "kwargs should be empty"."""
    cfg = compose_config([f"optimizer={name}", "+optimizer.extra=0.5"])
    with pytest.raises(ConfigError) as refused:
        build_optimizer(cfg.optimizer, STEPS, EPOCHS, {"clipnorm": 1.0})
    line = str(refused.value)
    assert line.startswith(f"optimizer.extra=0.5: not an argument of {KERAS_CLASSES[name]}") and "\n" not in line
    accepted = line.split("accepted: one of ", 1)[1].split(", ")
    assert "weight_decay" in accepted and "clipnorm" not in accepted and "learning_rate" not in accepted


def test_a_target_optimizer_gets_the_rate_and_the_schedule():
    schedule = compose_config(["optimizer.schedule.name=cosine"]).optimizer.schedule
    node = OmegaConf.create({"_target_": "tf_keras.optimizers.Adamax", "lr": LR, "schedule": schedule})
    optimizer = build_optimizer(node, STEPS, EPOCHS)
    assert type(optimizer) is keras.optimizers.Adamax
    assert one_step(optimizer, steps=2)[0] == pytest.approx(COSINE_AFTER_ONE_STEP, rel=1e-5)
    constant = OmegaConf.create(
        {"_target_": "tf_keras.optimizers.Adamax", "learning_rate": 0.02, "schedule": {"name": "constant"}}
    )
    assert one_step(build_optimizer(constant, STEPS, EPOCHS))[0] == pytest.approx(0.02)


def fixed_rate_sgd(momentum: float = 0.0):
    """A user's optimizer factory that sets its own rate and takes none."""
    return keras.optimizers.SGD(0.1, momentum=momentum)


def test_a_target_optimizer_that_takes_no_rate_is_refused_a_schedule():
    node = OmegaConf.create({"_target_": "test_optimizers.fixed_rate_sgd", "schedule": {"name": "cosine"}})
    with pytest.raises(
        ConfigError,
        match=r"optimizer.schedule.name=cosine: test_optimizers.fixed_rate_sgd takes no "
        r"learning_rate; accepted: constant",
    ):
        build_optimizer(node, STEPS, EPOCHS)
    node = OmegaConf.create({"_target_": "test_optimizers.fixed_rate_sgd", "lr": 0.5, "schedule": {"name": "constant"}})
    with pytest.raises(ConfigError, match=r"optimizer.lr=0.5: .* takes no learning_rate"):
        build_optimizer(node, STEPS, EPOCHS)
    node = OmegaConf.create(
        {"_target_": "test_optimizers.fixed_rate_sgd", "momentum": 0.5, "schedule": {"name": "constant"}}
    )
    assert one_step(build_optimizer(node, STEPS, EPOCHS))[0] == pytest.approx(0.1)  # its own rate, unchanged


@pytest.mark.slow
def test_the_command_trains_with_adamw_at_the_rate_and_schedule_and_records_them(tmp_path):
    result = run_cli(
        "optimizer=adamw",
        "optimizer.lr=3e-3",
        "optimizer.schedule.name=cosine",
        "trainer.epochs=2",
        "model=mlp",
        "export.formats=[]",
        f"hydra.run.dir={tmp_path}/run",
    )
    assert result.returncode == 0, result.stderr[-2000:]
    record = json.loads((tmp_path / "run" / "metrics.json").read_text())
    rates = [epoch["learning_rate"] for epoch in record["history"]]
    steps = math.ceil(1077 / 32)  # digits: 1077 training examples (360 validate, 360 test), batch 32
    # the rate of each epoch's last step, the cosine from 3e-3 over the run's 2 * steps steps
    expected = [3e-3 * 0.5 * (1 + math.cos(math.pi * (e * steps - 1) / (2 * steps))) for e in (1, 2)]
    assert rates == pytest.approx(expected, rel=1e-4, abs=1e-9)
    saved = (tmp_path / "run" / ".hydra" / "config.yaml").read_text()
    assert "name: adamw" in saved and "lr: 0.003" in saved
