"""`keras=3` (issue 45): a run on Keras 3 beside tf_keras, chosen before TensorFlow loads (docs/keras.md).

Every run here is a real `python train.py keras=3 ...` process (run_cli starts one: the tests' fork server holds
tf_keras), tiny and short; each test asserts what the run left on disk, read by this process (which holds tf_keras:
SavedModels and TensorBoard files do not depend on the Keras that wrote them).
"""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
from conftest import ROOT, TESTS, last_line, read_run_record, run_cli
from tb_events import read_events

import tfhydra

SHORT = ["trainer.epochs=2", "trainer.steps_per_epoch=4", "data.batch_size=16"]


def digits(count: int = 32) -> np.ndarray:
    """Examples as the digits source stores them: (N, 8, 8) float32 in [0, 16]."""
    return np.random.default_rng(0).uniform(0, 16, (count, 8, 8)).astype("float32")


def served_outputs(run_dir, x: np.ndarray) -> np.ndarray:
    """The exported SavedModel's answers on stored examples, through its serving signature."""
    served = tf.saved_model.load(str(run_dir / "export" / "saved_model"))
    signature = served.signatures["serving_default"]
    (output,) = signature(inputs=tf.constant(x)).values()
    assert output.dtype == tf.float32
    return output.numpy()


def completed_on_keras3(run_dir, result) -> dict:
    assert result.returncode == 0, result.stderr[-3000:]
    record = read_run_record(run_dir)
    assert record["status"] == "completed", record.get("error")
    assert record["keras"]["major"] == 3 and record["keras"]["version"].startswith("3.")
    assert record["schema_version"] == 3
    return record


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_the_default_run_on_keras3_checkpoints_logs_and_exports_what_it_trained(tmp_path):
    run_dir = tmp_path / "run"
    formats = "export.formats=[saved_model,tflite]"
    result = run_cli("keras=3", *SHORT, "logging.gradients=true", formats, f"hydra.run.dir={run_dir}")
    record = completed_on_keras3(run_dir, result)
    assert record["policy"] == "float32" and len(record["history"]) == 2
    assert record["exported"]["weights"] == "checkpoints/best.weights.h5"
    assert (run_dir / "checkpoints" / "best.weights.h5").stat().st_size > 0
    train = read_events(run_dir / "tensorboard" / "train")
    assert [step for step, _ in train["scalars"]["epoch_loss"]] == [0, 1]
    assert [v for _, v in train["scalars"]["epoch_loss"]] == pytest.approx([e["loss"] for e in record["history"]])
    assert any(tag.endswith("logits/kernel/histogram") for tag in train["histograms"])  # layer-qualified tags
    assert any(tag.startswith("gradient_norm/") and tag.endswith("logits/kernel") for tag in train["scalars"])
    assert train["graph"]
    probabilities = served_outputs(run_dir, digits())  # the digits as stored: 8x8 floats, no preprocessing
    assert probabilities.shape == (32, 10)
    np.testing.assert_allclose(probabilities.sum(axis=1), 1.0, rtol=1e-5)
    tflite = record["compression"]["artefacts"]["export/tflite/model.tflite"]  # measured by LiteRT
    assert abs(tflite["test_accuracy"] - record["compression"]["keras_test_accuracy"]) <= 0.01


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize("loop", ["fit", "custom"])
def test_mixed_precision_on_keras3_scales_the_loss_and_exports_float32(tmp_path, loop):
    run_dir = tmp_path / loop
    result = run_cli("keras=3", "precision=mixed", f"trainer.loop={loop}", *SHORT, f"hydra.run.dir={run_dir}")
    record = completed_on_keras3(run_dir, result)
    assert record["policy"] == "mixed_float16"
    assert record["loss_scale"] is not None and 1 <= record["loss_scale"] <= 2**15  # Keras 3's dynamic scale
    losses = [epoch["val_loss"] for epoch in record["history"]]  # the whole validation split: learning shows
    assert all(np.isfinite(losses)) and losses[1] < losses[0]
    assert served_outputs(run_dir, digits()).dtype == np.float32


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_mirrored_mixed_on_two_logical_cpus_on_keras3(tmp_path):
    run_dir = tmp_path / "run"
    result = run_cli(
        "keras=3", "precision=mixed", "strategy=mirrored", "strategy.logical_cpus=2", *SHORT, f"hydra.run.dir={run_dir}"
    )
    record = completed_on_keras3(run_dir, result)
    assert record["replicas"] == 2 and record["policy"] == "mixed_float16"
    assert "fit runs 1 step per call (keras-team/keras#19246)" in (run_dir / "train.log").read_text()
    assert served_outputs(run_dir, digits(4)).shape == (4, 10)


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_regression_task_on_keras3_records_its_metrics_from_keras3(tmp_path):
    run_dir = tmp_path / "run"
    data = ["data=synthetic", "data.train_size=256", "data.val_size=64", "data.shape=[8]"]
    result = run_cli("keras=3", "task=regression", "model=mlp", *data, *SHORT, f"hydra.run.dir={run_dir}")
    record = completed_on_keras3(run_dir, result)
    last = record["history"][-1]
    assert {"rmse", "mae", "r2", "val_rmse", "val_mae", "val_r2"} <= set(last)
    assert last["rmse"] == pytest.approx(np.sqrt(last["loss"]), rel=0.05)  # mse loss: its root, batch-averaged
    assert {"rmse", "mae", "r2"} <= set(record["test"]["metrics"])


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize("task", ["regression", "multilabel"])
def test_metrics_that_build_at_their_first_update_train_on_keras3_over_two_replicas(tmp_path, task):
    """R2Score, F1Score and multi-label AUC make their variables at their first update: inside Keras 3's replicated
    train step every such run failed ("You must feed a value for placeholder tensor", found by
    benchmarks/combinations.py). Made before training (tfhydra/platform/keras_lib.py), they count both replicas'
    examples: one target's R2 gives its validation values' variance alike at every epoch, and the test split's
    macro F1 is the mean of the per-label F1s tfhydra computes itself."""
    if task == "regression":  # one target: y = 3a - 2b + noise, variance about 13
        x = np.random.default_rng(0).normal(size=(320, 3))
        y = 3 * x[:, 0] - 2 * x[:, 1] + np.random.default_rng(1).normal(scale=0.2, size=320)
        np.savetxt(tmp_path / "y.csv", np.column_stack([x, y]), delimiter=",", header="a,b,c,y", comments="")
        data = ["data=csv", f"data.path={tmp_path / 'y.csv'}", "data.label=y"]
    else:
        data = ["data=synthetic", "data.num_classes=4", "data.train_size=128", "data.val_size=64", "data.shape=[8]"]
    strategy = ["strategy=mirrored", "strategy.logical_cpus=2"]
    run_dir = tmp_path / "run"
    result = run_cli("keras=3", f"task={task}", "model=mlp", *strategy, *data, *SHORT, f"hydra.run.dir={run_dir}")
    record = completed_on_keras3(run_dir, result)
    assert record["replicas"] == 2 and len(record["history"]) == 2
    if task == "regression":  # R2 = 1 - mse / variance, so variance = mse / (1 - R2)
        variances = [e["val_rmse"] ** 2 / (1 - e["val_r2"]) for e in record["history"]]
        assert variances[1] == pytest.approx(variances[0], rel=1e-3) and 8 < variances[0] < 20, variances
    else:
        test = record["test"]
        labels = test["per_label"].values()
        assert test["metrics"]["f1"] == pytest.approx(np.mean([label["f1"] for label in labels]), abs=1e-4)
        assert test["metrics"]["auc"] == pytest.approx(np.mean([label["auc"] for label in labels]), abs=0.01)


BUILDERS = {  # each conf/model option on data it accepts (DataSpec arguments)
    "cnn": ((16, 16, 1), "float32", None),
    "mlp": ((8, 8), "float32", None),
    "resnet": ((16, 16, 3), "float32", None),
    "keras_app": ((32, 32, 3), "float32", None),
    "lstm": ((12,), "int32", 50),
    "transformer": ((12,), "int32", 50),
}
PROBE = """
import json, sys
import tfhydra
from tfhydra.config.contracts import DataSpec
builders = json.loads(sys.argv[1])
built = {}
for name, (shape, dtype, vocab) in builders.items():
    cfg = tfhydra.compose(["keras=3", f"model={name}"])  # chooses Keras 3 before TensorFlow loads
    from tfhydra.model.build import build_model
    import keras, numpy as np, tensorflow as tf
    spec = DataSpec(tuple(shape), 3, ("a", "b", "c"), 1, 1, dtype=dtype, vocab_size=vocab)
    model = build_model(cfg.model, spec)
    x = np.ones((2, *shape), dtype)
    built[name] = {
        "keras3": isinstance(model, keras.Model) and tf.keras.Model is keras.Model,
        "version": keras.__version__,
        "params": model.count_params(),
        "output": list(model(x).shape),
    }
import tfhydra.runner.job  # every room a run imports (the compression room's `none` included)
from tfhydra.model.memory import estimated_bytes
estimated_bytes(cfg.model, spec, 32, slots=2)  # the memory check restores the random states it drew from
print(json.dumps({"models": built, "tf_keras_loaded": "tf_keras" in sys.modules}))
"""


@pytest.fixture(scope="module")
def built_on_keras3() -> dict:
    """Every conf/model builder run once under keras=3, in one fresh process."""
    result = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(BUILDERS)],
        capture_output=True,
        text=True,
        timeout=280,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": f"{ROOT}:{TESTS}"},
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.splitlines()[-1])


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_every_model_builder_builds_a_keras3_model(built_on_keras3, name):
    built = built_on_keras3["models"][name]
    assert built["keras3"] and built["version"].startswith("3.")
    assert built["params"] > 0 and built["output"] == [2, 3]


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_recovery_on_keras3_restores_the_last_good_state_and_completes(tmp_path):
    """A NaN at step 85 (epoch 2 of 3, 45 steps each) under EMA: back to epoch 1's saved state at half the rate,
    and on to a finite, completed run whose optimizer (its rate a ScaledRate) checkpoints and exports."""
    run_dir = tmp_path / "run"
    model = ["~model", "+model._target_=user_code.build_keras3_nan_once_model", "+model.at=85"]
    result = run_cli(
        "keras=3",
        *model,
        "data.test_fraction=0",
        "trainer.epochs=3",
        "trainer.ema.decay=0.9",
        "trainer.recovery.max_trials=3",
        "export.formats=[saved_model]",
        f"hydra.run.dir={run_dir}",
    )
    record = completed_on_keras3(run_dir, result)
    assert record["diverged"] is None and record["epochs_run"] == 3
    assert record["recoveries"] == [{"epoch": 2, "step": 90, "loss": None, "lr": pytest.approx(0.0005)}]
    assert all(np.isfinite([epoch["loss"], epoch["val_loss"]]).all() for epoch in record["history"])
    # each epoch's end saved the resumable state through the ScaledRate optimizer (the state is removed at the end)
    assert (run_dir / "checkpoints" / "best.weights.h5").stat().st_size > 0
    probabilities = served_outputs(run_dir, digits(4))
    assert np.isfinite(probabilities).all() and np.allclose(probabilities.sum(axis=1), 1, atol=1e-4)


ACCUMULATE_PROBE = """
import json
import tfhydra
cfg = tfhydra.compose(["keras=3", "optimizer.lr=0.01", "optimizer.schedule.name=cosine"])
import keras, numpy as np, tensorflow as tf
from tfhydra.optimizer.build import build_optimizer
from tfhydra.platform.keras_lib import gradients_to_apply, scaled_loss
x = np.random.default_rng(0).normal(size=(128, 12)).astype("float32")
y = (x[:, :3].sum(axis=1) > 0).astype("int64")

def trained(batch, steps, how):
    optimizer = build_optimizer(cfg.optimizer, 128 // batch, 2, {"global_clipnorm": 0.5}, steps)
    optimizer = keras.optimizers.LossScaleOptimizer(optimizer) if how == "mixed" else optimizer
    keras.utils.set_random_seed(1)
    model = keras.Sequential([keras.Input((12,)), keras.layers.Dense(16, activation="tanh"), keras.layers.Dense(2)])
    loss_of = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    model.compile(optimizer=optimizer, loss=loss_of)
    if how != "tape":
        model.fit(x, y, batch_size=batch, epochs=2, shuffle=False, verbose=0)
    for start in range(0, 256 if how == "tape" else 0, batch):  # the custom loop's path
        with tf.GradientTape() as tape:
            loss = scaled_loss(optimizer, loss_of(y[start % 128 :][:batch], model(x[start % 128 :][:batch])))
        gradients = gradients_to_apply(optimizer, tape.gradient(loss, model.trainable_variables))
        optimizer.apply_gradients(zip(gradients, model.trainable_variables))
    return model.get_weights(), int(optimizer.iterations)

def distance(a, b):
    return max(float(np.abs(left - right).max()) for left, right in zip(a, b))

found = {}
for how in ("fit", "mixed", "tape"):
    (small, updates), (large, large_updates) = trained(16, 4, how), trained(64, 1, how)
    found[how] = {"distance": distance(small, large), "updates": [updates, large_updates]}
found["fit"]["unaccumulated"] = distance(trained(16, 1, "fit")[0], large)
print(json.dumps(found))
"""


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_accumulate_steps_on_keras3_trains_the_weights_of_the_larger_batch():
    """`trainer.accumulate_steps=4` at batch 16 is batch 64 under Keras 3's own accumulation (a cosine schedule
    given in updates, global clipping of the summed gradient): in fit, under a loss-scale optimizer, and through
    the custom loop's `apply_gradients`; one fresh Keras 3 process."""
    result = subprocess.run(
        [sys.executable, "-c", ACCUMULATE_PROBE],
        capture_output=True,
        text=True,
        timeout=280,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)},
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    found = json.loads(result.stdout.splitlines()[-1])
    for how in ("fit", "mixed", "tape"):
        assert found[how]["distance"] < 1e-5, (how, found[how])
        assert found[how]["updates"] == [4, 4]  # updates, not batches: the schedule's steps
    assert found["fit"]["unaccumulated"] > 1e-3  # the check can fail: 16 updates of 16 are another training


def test_a_keras3_process_does_not_import_tf_keras_beside_keras3(built_on_keras3):
    """tf_keras's import (0.2 s of CPU) is no part of a keras=3 run: not through the compression room, the
    picture callbacks or the memory check (docs/performance.md, "Keras 3")."""
    assert built_on_keras3["tf_keras_loaded"] is False


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["keras=3", "compression=prune"], "keras=3: the Model Optimization Toolkit supports no Keras 3"),
        (["-m", "keras=2,3"], "keras=3: a sweep runs on one Keras"),
        (["keras=4"], "keras=4"),
        (["keras=3", "trainer.save_every=5"], "trainer.save_every=5: Keras 3's fit starts an epoch only"),
        (
            ["keras=3", "trainer.accumulate_steps=2", "strategy=mirrored"],
            "trainer.accumulate_steps=2: Keras 3's gradient accumulation cannot update over several replicas",
        ),
        (["keras=3", "strategy=multi_worker"], "strategy=multi_worker: Keras 3's trainer fails on MultiWorker"),
    ],
)
def test_what_keras3_does_not_do_is_one_line_before_anything_runs(tmp_path, overrides, message):
    where = "hydra.sweep.dir" if "-m" in overrides else "hydra.run.dir"
    result = run_cli(*overrides, f"{where}={tmp_path / 'run'}", timeout=120)
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr[-2000:]
    assert last_line(result.stderr).startswith(f"Error: {message}")
    assert not (tmp_path / "run").exists()


def test_a_process_that_loaded_tensorflow_with_tf_keras_refuses_keras3_in_one_line():
    """A notebook kernel's second run on the other Keras: this test process imported TensorFlow with tf_keras."""
    assert tf.keras.Model.__module__.startswith("tf_keras")
    with pytest.raises(tfhydra.ConfigError) as refused:
        tfhydra.compose(["keras=3"])
    assert "this process has loaded TensorFlow with Keras 2" in str(refused.value)
    assert "restart the kernel" in str(refused.value)
    assert tfhydra.compose(["keras=2"]).keras == 2  # the Keras it holds still runs


def test_a_keras3_model_in_a_keras2_run_is_refused_naming_keras3():
    """This process holds tf_keras (keras=2): a builder returning Keras 3's model is told about keras=3."""
    from omegaconf import OmegaConf

    from tfhydra.config.contracts import DataSpec
    from tfhydra.model.build import build_model

    node = OmegaConf.create({"_target_": "user_code.build_keras3_model", "units": 4})
    with pytest.raises(tfhydra.ConfigError) as refused:
        build_model(node, DataSpec((8, 8), 10, tuple("0123456789"), 1, 1))
    assert "an `import keras` model runs with keras=3" in str(refused.value)
    assert "the builder returned Sequential" in str(refused.value)


CHOICE_PROBE = """
import os, sys
import tfhydra
from tfhydra.cli.preflight import check_overrides
check_overrides(tfhydra.CONFIG_DIR, "config", sys.argv[1:])  # task=binary: the plan imports its metrics' module
import keras, tensorflow as tf, tf_keras
expected = keras if "keras=3" in sys.argv else tf_keras
assert tf.keras.Model is expected.Model, tf.keras.Model
from tfhydra.platform.keras_lib import keras as rooms_keras
assert rooms_keras is expected
print(os.environ["TF_USE_LEGACY_KERAS"], os.environ["TFHYDRA_KERAS"])
"""


@pytest.mark.slow
@pytest.mark.timeout(200)
@pytest.mark.parametrize("major", [2, 3])
def test_the_pre_flight_chooses_the_keras_before_anything_imports_tensorflow(major):
    """The plan imports the modules `_target_`s name (task=binary's metrics import TensorFlow): the choice is made
    before it, so `tf.keras` and every room's `keras` are the run's Keras."""
    result = subprocess.run(
        [sys.executable, "-c", CHOICE_PROBE, f"keras={major}", "task=binary"],
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)},
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split() == (["0", "3"] if major == 3 else ["1", "2"])
