"""Divergence beats logging (issue 35, item 3; docs/reliability.md): whatever observes the model at an epoch's end
(weight histograms, gradients, pictures, the EMA swap, the best checkpoint, trackers, early stopping) takes
non-finite weights and a second training call (trainer.recovery), so a NaN run ends `diverged` with its step, and
recovery recovers, with the default logging on, in both loops, with EMA, and in a staged sweep.

The class is held by the first test: it builds every callback a run gets with every observer switched on and drives
them directly, Keras-callback-test style, through a blow-up and a second attempt; a callback added to
`build_callbacks` later is driven too. The runs below hold the acceptance lines end to end.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras
from conftest import compose_config, last_line, read_run_record, run_cli

import tfhydra
from tfhydra.trainer.histograms import buckets

NAN_ONCE = [
    "~model",
    "+model._target_=user_code.build_nan_once_model",  # NaN at training step model.at, once
    "data.test_fraction=0",
]  # the steps below count 1,437 training digits (45 steps): no test hold-out here


def histogram_counts(log_dir, tag_part: str) -> dict[int, float]:
    """{step: total count} of the histogram summaries under `log_dir` whose tag contains `tag_part`."""
    found = {}
    for path in sorted(log_dir.glob("events.out.tfevents.*")):
        for event in tf.compat.v1.train.summary_iterator(str(path)):
            for value in event.summary.value:
                if value.metadata.plugin_data.plugin_name == "histograms" and tag_part in value.tag:
                    found[event.step] = float(tf.make_ndarray(value.tensor)[:, 2].sum())
    return found


# ---- the class: every epoch-end observer, driven directly ---------------------------------------------------------


def test_a_histogram_counts_the_finite_values_only():
    data = tf.constant([1.0, np.nan, 2.0, np.inf, 3.0, -np.inf], tf.float32)
    counted = buckets(data).numpy()
    np.testing.assert_array_equal(counted, buckets(tf.constant([1.0, 2.0, 3.0])).numpy())
    assert counted[:, 2].sum() == 3 and counted[0, 0] == 1.0 and counted[-1, 1] == 3.0
    empty = buckets(tf.constant([np.nan, np.inf])).numpy()
    assert empty.shape == (30, 3) and not empty.any()  # nothing finite: written as TensorBoard writes no values


def every_observer(tmp_path):
    """The callbacks a run with every observer on gets (tfhydra/trainer/callbacks.py: build_callbacks, the tracker
    callback, the fit loop's resumable state), its model (seed MLP, EMA) and recorder, for digits."""
    from tfhydra.data.pipeline import build_datasets
    from tfhydra.logger.callback import epoch_loggers
    from tfhydra.logger.start import start_trackers
    from tfhydra.logger.trackers import RunInfo
    from tfhydra.record.rundir import RunPaths
    from tfhydra.runner.compiled_model import build_model_and_optimizer
    from tfhydra.strategy.build import build_strategy
    from tfhydra.trainer.base import LoopContext
    from tfhydra.trainer.callbacks import RunRecorder, build_callbacks, loss_bound
    from tfhydra.trainer.loops import backup_callback

    cfg = compose_config(
        [
            "model=mlp",
            "logger=[tensorboard,csv]",
            "logging.histogram_freq=1",
            "logging.gradients=true",
            "logging.images_freq=1",
            "trainer.ema.decay=0.9",
            "trainer.early_stopping.patience=1",
        ]
    )
    paths, strategy = RunPaths(tmp_path / "run"), build_strategy(cfg.strategy)
    paths.root.mkdir()
    datasets = build_datasets(cfg.data, cfg.trainer.seed)
    model, _ = build_model_and_optimizer(cfg, strategy, datasets, paths)
    model.optimizer.build(model.trainable_variables)  # the EMA slots the swap exchanges with
    recorder = RunRecorder(paths.history, max_loss=loss_bound(cfg.trainer))
    trackers = start_trackers(cfg.logger, paths, RunInfo(name="run", config={}, tags={}))
    callbacks = build_callbacks(
        cfg.trainer,
        cfg.logging,
        paths,
        recorder,
        writers=epoch_loggers(trackers, lambda: recorder.epochs),
        datasets=datasets,
    )
    context = LoopContext(strategy, paths, None, lambda: recorder.diverged is not None)
    return model, recorder, [*callbacks, *backup_callback(cfg.trainer, context)], paths, datasets, trackers


def attempt(callbacks, model, epochs, logs, poison=None):
    """One call of a loop: train begin, each epoch (a batch end, validation, the epoch's end), train end, as fit
    calls them. `poison(epoch)` may spoil the weights after an epoch's steps."""
    callback_list = keras.callbacks.CallbackList(callbacks, model=model, epochs=max(epochs) + 1, steps=45, verbose=0)
    model.stop_training = False
    callback_list.on_train_begin()
    for epoch in epochs:
        callback_list.on_epoch_begin(epoch)
        if poison:
            poison(epoch)
        callback_list.on_train_batch_begin(44)
        callback_list.on_train_batch_end(44, {"loss": logs[epoch]["loss"]})
        callback_list.on_test_begin()
        callback_list.on_test_end({k: v for k, v in logs[epoch].items() if k.startswith("val_")})
        callback_list.on_epoch_end(epoch, dict(logs[epoch]))
        if model.stop_training:
            break
    callback_list.on_train_end()


@pytest.mark.slow
def test_every_epoch_end_observer_takes_non_finite_weights_and_a_second_attempt(tmp_path):
    model, recorder, callbacks, paths, datasets, trackers = every_observer(tmp_path)
    kinds = {type(c).__name__ for c in callbacks}
    assert {
        "TensorBoard",
        "GradientSummaries",
        "Pictures",
        "AveragedWeightsForEvaluation",
        "BestCheckpoint",
        "TrackerCallback",
        "EarlyStopping",
        "RunRecorder",
        "ResumableBackup",
    } <= kinds, kinds
    good = model.get_weights()

    def blow_up(epoch):  # the second epoch's steps made NaN kernels and infinite biases, and their averages
        if epoch == 1:
            averages = model.optimizer._model_variables_moving_average
            for variable in [*model.trainable_variables, *averages]:
                variable.assign(np.full(variable.shape, np.nan if "kernel" in variable.name else np.inf, np.float32))

    logs = [
        {"loss": 1.2, "val_loss": 1.0, "val_accuracy": 0.5},  # epoch 1
        {"loss": math.nan, "val_loss": math.nan, "val_accuracy": 0.9},
    ]  # a diverged epoch that looks the best
    attempt(callbacks, model, [0, 1], logs, poison=blow_up)  # raised before: histograms' bincount of NaN
    assert recorder.diverged["epoch"] == 2 and recorder.diverged["step"] == 90 and math.isnan(recorder.diverged["loss"])
    best = keras.models.clone_model(model)
    best.load_weights(paths.best_weights)  # epoch 1's, not the diverged epoch's (which "looked" better)
    assert all(np.isfinite(w).all() for w in best.get_weights())
    kernel = [v.name for v in model.trainable_variables if "kernel" in v.name][0].replace(":", "_")
    counts = histogram_counts(paths.tensorboard_train, f"{kernel}/histogram")
    assert counts[0] == model.trainable_variables[0].shape.num_elements() and counts[1] == 0  # NaN: nothing counted

    # trainer.recovery: the last good state back, the same callbacks again (Keras gives TensorBoard new writers)
    model.set_weights(good)
    recorder.recovered({"epoch": 2, "step": 90, "loss": None, "lr": 0.0005})
    logs[1] = {"loss": 0.9, "val_loss": 0.8, "val_accuracy": 0.6}
    attempt(callbacks, model, [1], logs)  # raised before: the compiled histogram writer held the closed writer
    assert recorder.diverged is None and [e["loss"] for e in recorder.epochs] == [1.2, 0.9]
    counts = histogram_counts(paths.tensorboard_train, f"{kernel}/histogram")
    assert counts[1] == model.trainable_variables[0].shape.num_elements()  # the recovered epoch, counted
    best.load_weights(paths.best_weights)  # the recovered epoch 2 beat epoch 1: saved
    assert all(np.isfinite(w).all() for w in best.get_weights())
    trackers.end("completed", recorder.epochs)
    assert (paths.root / "metrics.csv").read_text().count("\n") >= 3  # header, epoch 1, the diverged epoch 2


# ---- end to end: the default logging, both loops, with and without EMA ---------------------------------------------
# Each rule runs in both loops and with and without EMA, and the two rules together cover the four (loop, EMA)
# pairs: every observer meeting the NaN and the second attempt is driven directly by the first test, so the cross
# product (8 runs) trained each pair twice for what these 4 runs show.
DIVERGED = [("fit", "null"), ("custom", "0.9")]
RECOVERED = [("custom", "null"), ("fit", "0.9")]


@pytest.mark.slow
@pytest.mark.parametrize("loop,ema", DIVERGED)
def test_a_nan_with_the_default_logging_ends_diverged_with_its_step(tmp_path, loop, ema):
    # NaN at step 85 (epoch 2, step 40 of 45): the loss is read at step 77, then at the epoch's end (step 90)
    cfg = compose_config(
        [*NAN_ONCE, "+model.at=85", "trainer.epochs=3", f"trainer.loop={loop}", f"trainer.ema.decay={ema}"]
    )
    assert cfg.logging.histogram_freq == 1 and cfg.logging.tensorboard  # the default logging
    assert math.isnan(tfhydra.run(cfg, run_dir=tmp_path))
    record = read_run_record(tmp_path)
    assert record["status"] == "diverged", record["error"]
    assert record["error"] is None and record["diverged"] == {"epoch": 2, "step": 90, "loss": None}
    assert record["epochs_run"] == 2 and math.isfinite(record["history"][0]["loss"])
    assert not (tmp_path / "export").exists()
    counts = histogram_counts(tmp_path / "tensorboard" / "train", "kernel")
    assert sorted(counts) == [0, 1] and counts[0] > 0  # the diverged epoch is written too


@pytest.mark.slow
@pytest.mark.parametrize("loop,ema", RECOVERED)
def test_recovery_with_the_default_logging_completes(tmp_path, loop, ema):
    cfg = compose_config(
        [
            *NAN_ONCE,
            "+model.at=85",
            "trainer.epochs=3",
            f"trainer.loop={loop}",
            f"trainer.ema.decay={ema}",
            "trainer.recovery.max_trials=3",
        ]
    )
    assert math.isfinite(tfhydra.run(cfg, run_dir=tmp_path))
    record = read_run_record(tmp_path)
    assert record["status"] == "completed", record["error"]
    assert record["diverged"] is None and record["epochs_run"] == 3
    assert record["recoveries"] == [{"epoch": 2, "step": 90, "loss": None, "lr": pytest.approx(0.0005)}]
    assert all(math.isfinite(epoch["loss"]) and math.isfinite(epoch["val_loss"]) for epoch in record["history"])
    served = tf.saved_model.load(str(tmp_path / "export" / "saved_model"))
    probabilities = served.serve(tf.random.uniform([4, *record["data"]["input_shape"]])).numpy()
    assert np.isfinite(probabilities).all() and np.allclose(probabilities.sum(axis=1), 1, atol=1e-4)


@pytest.mark.slow
def test_debug_numerics_with_the_default_logging_names_the_op(tmp_path):
    cfg = compose_config(["debug=numerics", *NAN_ONCE, "+model.at=85", "trainer.epochs=3"])
    assert math.isnan(tfhydra.run(cfg, run_dir=tmp_path))
    record = read_run_record(tmp_path)
    assert record["status"] == "diverged", record["error"]
    assert record["diverged"]["op"] == "Log" and "nan_once" in record["diverged"]["where"]
    assert record["diverged"]["epoch"] == 2 and record["diverged"]["step"] == 77  # the last step before the call


# ---- a staged sweep whose screen job diverges ---------------------------------------------------------------------


@pytest.mark.slow
def test_a_diverging_screen_job_is_recorded_diverged(tmp_path):
    sweep = tmp_path / "sweep"
    # two settings; the one with model.at=30 blows up in the screen's only epoch (the loss is read at step 32)
    done = run_cli(
        "-m",
        *NAN_ONCE,
        "+model.at=30,100000",
        "trainer.epochs=2",
        "sweep.screen.epochs=1",
        "sweep.promote=1",
        "export.formats=[]",  # the promoted job's export is not read here (the default logging is the subject)
        f"hydra.sweep.dir={sweep}",
        cwd=tmp_path,
        timeout=900,
    )
    assert done.returncode == 1, done.stderr[-3000:]  # a sweep with a diverged job says so
    diverged = read_run_record(sweep / "screen" / "0_+model.at=30")
    assert diverged["status"] == "diverged", diverged["error"]
    assert diverged["error"] is None and diverged["diverged"] == {"epoch": 1, "step": 32, "loss": None}
    assert read_run_record(sweep / "screen" / "1_+model.at=100000")["status"] == "completed"
    promoted = read_run_record(sweep / "promote" / "2_+model.at=100000")
    assert promoted["status"] == "completed" and promoted["epochs_run"] == 2
    assert "screen/0_+model.at=30 (diverged)" in last_line(done.stderr)
