"""A model's own `train_step` / `test_step` (issue 33, item 5): honoured by `trainer.loop=fit` (Keras does it) and
by `trainer.loop=custom` (tfhydra calls them inside its compiled, strategy-run step), never ignored.

`user_code.OwnStepModel` reports `own_loss` (the compiled loss + 10) and counts its own steps (`own_steps`): the
values in metrics.json's history say that the model's steps ran, how often, and that tfhydra's did not replace them.
"""

from __future__ import annotations

import pytest
import user_code
from conftest import FAST, read_run_record, run_cli

import tfhydra

STEPS, VAL_BATCHES = 5, 12  # trainer.steps_per_epoch; digits' 360 validation examples in batches of 32
LEAN = ["export.formats=[]", "logging.write_graph=false"]  # neither the export nor the graph is read here


@pytest.mark.slow
@pytest.mark.parametrize("loop", ["fit", "custom"])
def test_a_models_own_train_and_test_step_run_under_both_loops(loop, tmp_path):
    from tfhydra.record.run_record import load_record

    cfg = tfhydra.compose(
        [
            "~model",
            "+model._target_=user_code.build_own_step_model",
            f"trainer.loop={loop}",
            *FAST,
            *LEAN,
            "trainer.epochs=2",
            f"trainer.steps_per_epoch={STEPS}",
            "trainer.steps_per_execution=2",
        ]
    )
    tfhydra.run(cfg, run_dir=tmp_path / "run")
    record = load_record(tmp_path / "run")
    assert record.status == "completed"
    assert len(record.history) == 2
    for epoch in record.history:
        assert epoch["own_steps"] == STEPS  # the model's train_step ran once per batch, reset each epoch
        assert epoch["val_own_steps"] == VAL_BATCHES  # and its test_step once per validation batch
        assert epoch["own_loss"] == pytest.approx(epoch["loss"] + user_code.OWN_STEP_EXTRA_LOSS, rel=1e-6)
        assert epoch["val_own_loss"] == pytest.approx(epoch["val_loss"] + user_code.OWN_STEP_EXTRA_LOSS, rel=1e-6)


@pytest.mark.slow
@pytest.mark.parametrize("loop", ["fit", "custom"])
def test_a_models_own_steps_run_on_every_replica_of_a_mirrored_strategy(loop, tmp_path):
    """Two CPU replicas (a process of its own: logical devices are set before TensorFlow starts). `own_steps` is a
    Keras metric, summed over the replicas, so it counts every replica's steps; a value the step computes itself
    (`own_loss`) is reduced as model.fit reduces it (tf_keras' "auto": the sum over the replicas), in both loops.
    The best weights are restored though the model's class holds a variable the .h5 file does not
    (trainer/weights.py)."""
    run_dir = tmp_path / "run"
    result = run_cli(
        "~model",
        "+model._target_=user_code.build_own_step_model",
        f"trainer.loop={loop}",
        "strategy=mirrored",
        "strategy.logical_cpus=2",
        *FAST,
        *LEAN,
        f"trainer.steps_per_epoch={STEPS}",
        f"hydra.run.dir={run_dir}",
    )
    assert result.returncode == 0, result.stderr[-2000:]
    record = read_run_record(run_dir)
    assert record["status"] == "completed" and record["replicas"] == 2
    (epoch,) = record["history"]
    assert epoch["own_steps"] == 2 * STEPS and epoch["val_own_steps"] == 2 * VAL_BATCHES
    assert epoch["own_loss"] == pytest.approx(2 * (epoch["loss"] + user_code.OWN_STEP_EXTRA_LOSS), rel=1e-6)


def test_own_steps_are_told_apart_from_keras_own():
    import tf_keras as keras

    from tfhydra.trainer.custom import has_own_steps, plain_logs

    class OnlyTestStep(keras.Model):
        def test_step(self, data):
            return {}

    inputs = keras.Input((3,))
    functional = keras.Model(inputs, keras.layers.Dense(2)(inputs))
    assert not has_own_steps(functional) and not has_own_steps(keras.Sequential([keras.layers.Dense(2)]))
    assert has_own_steps(user_code.OwnStepModel(inputs, keras.layers.Dense(2)(inputs)))
    assert has_own_steps(OnlyTestStep())
    import numpy as np

    assert plain_logs({"loss": np.float32(1.5), "pair": {"a": 2.0}, "vector": np.zeros(3)}) == {"loss": 1.5, "a": 2.0}
