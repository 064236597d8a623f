"""Seeing into training and recovering from it (issue 27): eager debugging, the op that made a NaN, recovery from
a blow-up, EMA weights."""

import re

import numpy as np
import pytest
import tensorflow as tf
from conftest import read_run_record, run_cli

import tfhydra
from tfhydra.trainer.debugging import numeric_failure

FAST = ["logging.histogram_freq=0", "logging.write_graph=false", "export.formats=[]"]
PRINTING = "trainer.loss={_target_:user_code.PrintingCrossEntropy}"
RANGE = re.compile(r"^PRED_RANGE (.+?) (\S+|Tensor\(.*\))$", re.M)


# ---- 1. eager debugging -----------------------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("loop", ["fit", "custom"])
def test_a_print_in_a_user_loss_shows_numbers_when_eager(tmp_path, loop):
    result = run_cli(
        "debug=eager", f"trainer.loop={loop}", "model=mlp", PRINTING, f"hydra.run.dir={tmp_path}", "logger=[]"
    )
    assert result.returncode == 0, result.stderr[-2000:]
    ranges = [(float(low), float(high)) for low, high in RANGE.findall(result.stdout)]
    assert len(ranges) >= 4  # at least one per training step (debug=eager: 4) and validation batch
    assert all(0.0 <= low <= high <= 1.0 for low, high in ranges), ranges  # softmax probabilities
    assert read_run_record(tmp_path)["status"] == "completed"


@pytest.mark.slow
def test_the_same_print_fails_without_eager(tmp_path):
    result = run_cli("debug=fast", "model=mlp", PRINTING, f"hydra.run.dir={tmp_path}", "logger=[]")
    assert result.returncode == 0, result.stderr[-2000:]
    printed = RANGE.findall(result.stdout)
    assert printed  # autograph turns float() of a traced tensor into the tensor: printed once per trace ...
    assert all(value.startswith("Tensor(") for pair in printed for value in pair)  # ... as a symbol, never a number


# ---- 2. where the NaN came from -----------------------------------------------------------------------------------
NAN_MESSAGE = """

!!! Detected Infinity or NaN in output 0 of graph op "Log" (# of outputs: 1) !!!
  dtype: <dtype: 'float32'>
  shape: (32, 4)

  Input tensor: Tensor("while/model/nan_layer/sub:0", shape=(32, 4), dtype=float32)
  Graph name: "while_body_2251"

  Stack trace of op's creation ("->": inferred user code):
    + ...3.11/site-packages/tf_keras/src/engine/training.py (L1147) train_step
 -> |
    + /home/me/mymodel.py (L11) call
 -> |
"""


def test_a_check_numerics_message_names_the_op_the_layer_and_the_code():
    found = numeric_failure(tf.errors.InvalidArgumentError(None, None, NAN_MESSAGE))
    assert found == {
        "op": "Log",
        "where": "model/nan_layer",
        "input": "while/model/nan_layer/sub",
        "code": "/home/me/mymodel.py:11 call",
    }
    assert numeric_failure(tf.errors.InvalidArgumentError(None, None, "Incompatible shapes")) is None


NAN_MODEL = [
    "~model",
    "+model._target_=user_code.build_nan_model",
    "+model.after=5",
    "trainer.epochs=2",
    "trainer.steps_per_execution=1",
    *FAST,
]


@pytest.mark.slow
@pytest.mark.parametrize("loop", ["fit", "custom"])
def test_debug_numerics_names_the_op_and_layer_that_made_it(tmp_path, compose_cfg, loop, caplog):
    assert np.isnan(tfhydra.run(compose_cfg(["debug=numerics", f"trainer.loop={loop}", *NAN_MODEL]), run_dir=tmp_path))
    record = read_run_record(tmp_path)
    assert record["status"] == "diverged", record["error"]
    diverged = record["diverged"]
    assert diverged["op"] == "Log" and "nan_layer" in diverged["where"], diverged
    assert diverged["epoch"] == 1 and diverged["step"] == 5  # step 6 made it: 5 steps were done
    assert "user_code.py" in diverged["code"]
    assert "an op made NaN or Inf: Log in nan_model/nan_layer" in caplog.text
    assert np.isnan(float(tf.math.log(tf.constant(-1.0))))  # the checks are off again: no error for a NaN now


# ---- 5. recovery from a blow-up ------------------------------------------------------------------------------------
BLOW_UP = [
    "model=mlp",
    "optimizer=sgd",
    "optimizer.momentum=0.0",
    "trainer.max_loss=1e3",
    "trainer.epochs=3",
    "trainer.deterministic=true",
    *FAST,
]


@pytest.mark.slow
@pytest.mark.parametrize("loop", ["fit", "custom"])
def test_a_blow_up_is_recovered_with_a_lower_learning_rate(tmp_path, compose_cfg, loop, caplog):
    cfg = compose_cfg(
        [
            *BLOW_UP,
            f"trainer.loop={loop}",
            "optimizer.lr=50",
            "trainer.recovery.max_trials=3",
            "trainer.recovery.lr_factor=0.01",
            "export.formats=[saved_model]",
        ]
    )
    tfhydra.run(cfg, run_dir=tmp_path)
    record = read_run_record(tmp_path)
    assert record["status"] == "completed" and record["diverged"] is None and record["epochs_run"] == 3
    recoveries = record["recoveries"]
    assert 1 <= len(recoveries) <= 3
    assert [r["lr"] for r in recoveries] == pytest.approx([50 * 0.01 ** (i + 1) for i in range(len(recoveries))])
    assert all(r["loss"] is None or r["loss"] > 1e3 for r in recoveries)
    assert "recovery 1 of 3" in caplog.text
    served = tf.saved_model.load(str(tmp_path / "export" / "saved_model"))
    x = tf.random.uniform([8, *record["data"]["input_shape"]])
    assert np.isfinite(served.serve(x).numpy()).all()


@pytest.mark.slow
def test_without_trials_left_the_blow_up_ends_the_run_diverged(tmp_path, compose_cfg):
    cfg = compose_cfg([*BLOW_UP, "optimizer.lr=50", "trainer.recovery.max_trials=1", "trainer.recovery.lr_factor=0.99"])
    assert np.isnan(tfhydra.run(cfg, run_dir=tmp_path))
    record = read_run_record(tmp_path)
    assert record["status"] == "diverged" and len(record["recoveries"]) == 1


# ---- 6. EMA weights ------------------------------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("loop", ["fit", "custom"])
def test_the_exported_weights_are_the_moving_averages(tmp_path, compose_cfg, loop):
    seen = tmp_path / "seen.npz"
    cfg = compose_cfg(
        [
            "model=mlp",
            f"trainer.loop={loop}",
            "trainer.epochs=1",
            "trainer.ema.decay=0.9",
            f"trainer.callbacks=[{{_target_:user_code.WeightsSeen,path:'{seen}'}}]",
            "logging.histogram_freq=0",
            "export.formats=[saved_model]",
        ],
    )
    tfhydra.run(cfg, run_dir=tmp_path / "run")
    arrays = np.load(seen)
    count = len(arrays.files) // 2
    raw, ema = [arrays[f"raw_{i}"] for i in range(count)], [arrays[f"ema_{i}"] for i in range(count)]
    served = tf.saved_model.load(str(tmp_path / "run" / "export" / "saved_model"))
    exported = [v.numpy() for v in served.trainable_variables]
    assert len(exported) == count
    for r, e in zip(raw, ema, strict=True):
        assert not np.allclose(r, e)  # the average is not the last weights
        assert any(x.shape == e.shape and np.allclose(x, e, atol=1e-6) for x in exported)
        assert not any(x.shape == r.shape and np.allclose(x, r, atol=1e-6) for x in exported)


@pytest.mark.slow
def test_a_resumed_run_ends_with_the_same_moving_averages(tmp_path, compose_cfg):
    """The custom loop checkpoints its data iterator and random generators. Under fit, a resume in the same process
    (this test's SIGTERM) was not exact even without EMA (epoch 2 differed; not investigated), so fit is not
    asserted here. Without EMA the same exact resume is tests/contract/test_resume.py's (killed mid-epoch), and an
    in-process SIGTERM resume is tests/runner/test_finetune.py's."""
    decay = 0.9
    from tfhydra.trainer.state import Interrupted

    def config(marker):
        return compose_cfg(
            [
                "model=mlp",
                "trainer.loop=custom",
                "trainer.epochs=2",
                "trainer.deterministic=true",
                f"trainer.ema.decay={decay}",
                f"trainer.callbacks=[{{_target_:user_code.SignalOnce,marker:'{marker}',epoch:0}}]",
                *FAST,
            ]
        )

    (tmp_path / "never").touch()  # the reference run's marker exists: it is never signalled
    tfhydra.run(config(tmp_path / "never"), run_dir=tmp_path / "reference")
    with pytest.raises(Interrupted):
        tfhydra.run(config(tmp_path / "once"), run_dir=tmp_path / "stopped")
    assert read_run_record(tmp_path / "stopped")["status"] == "interrupted"
    tfhydra.run(config(tmp_path / "once"), run_dir=tmp_path / "stopped")
    a, b = (read_run_record(tmp_path / d) for d in ("reference", "stopped"))
    assert a["status"] == b["status"] == "completed" and a["history"] == b["history"]
    import h5py

    def weights(path):
        with h5py.File(path, "r") as f:
            found = []
            f.visititems(lambda name, obj: found.append(np.asarray(obj)) if isinstance(obj, h5py.Dataset) else None)
            return found

    for x, y in zip(
        *(weights(tmp_path / d / "checkpoints" / "last.weights.h5") for d in ("reference", "stopped")), strict=True
    ):
        np.testing.assert_array_equal(x, y)
