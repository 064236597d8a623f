"""Validation every N optimizer steps (`trainer.val_every_steps`; tfhydra/trainer/validation.py): both loops driven
in-process on a 3-feature softmax and 40 examples (10 steps an epoch, milliseconds a step), asserting where the
validations fall, what they choose and what they leave alone; then one real run stopped by SIGTERM mid-epoch and
resumed, against a run never stopped (slow)."""

from __future__ import annotations

import copy
import json
import re
import signal
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras
from callback_harness import tiny_model
from conftest import compose_config, read_run_record

from tfhydra.config.errors import ConfigError
from tfhydra.config.schema import check_rules
from tfhydra.record.report import validation_summary
from tfhydra.record.rundir import RunPaths
from tfhydra.trainer.base import LoopContext
from tfhydra.trainer.callbacks import BestCheckpoint, EarlyStopping, RunRecorder
from tfhydra.trainer.checks import RULES, check_val_steps
from tfhydra.trainer.custom import CustomLoop
from tfhydra.trainer.loops import evaluate_within_fit
from tfhydra.trainer.stopping import stop_figures
from tfhydra.trainer.validation import StepValidation, Validation, ValidationScalars, kept_validations

RNG = np.random.default_rng(0)
X = RNG.normal(size=(40, 3)).astype(np.float32)
Y = (X[:, 0] > 0).astype(np.int64)


def datasets(flip_validation: bool = False) -> SimpleNamespace:
    """The loops' view of the data room's Datasets: 10 training batches of 4, the validation split (the same
    examples; with `flip_validation` the opposite labels, so validation gets worse as training goes on)."""
    train = tf.data.Dataset.from_tensor_slices((X, Y)).batch(4)
    validation = tf.data.Dataset.from_tensor_slices((X, 1 - Y if flip_validation else Y)).batch(8)
    return SimpleNamespace(train=train, validation=validation, steps_per_epoch=10, prefetched=lambda d: d)


class WeightsSeen(keras.callbacks.Callback):
    """The model's weights at each validation it is handed (a consumer as any other)."""

    def __init__(self) -> None:
        super().__init__()
        self.at: dict[int, list] = {}

    def on_validation(self, validation: Validation) -> None:
        self.at[validation.step] = self.model.get_weights()


def eager_model() -> keras.Model:
    """The harness's softmax, run eagerly: nothing to trace for a few dozen steps."""
    model = tiny_model()
    model.run_eagerly = True
    return model


def same_start(model: keras.Model) -> keras.Model:
    twin = eager_model()
    twin.set_weights(model.get_weights())
    return twin


def events(directory: Path) -> dict[str, list[tuple[int, float]]]:
    found: dict[str, list] = {}
    for path in sorted(directory.glob("events.out.tfevents.*")):
        for event in tf.compat.v1.train.summary_iterator(str(path)):
            for value in event.summary.value:
                found.setdefault(value.tag, []).append((event.step, float(tf.make_ndarray(value.tensor))))
    return found


def fit_with_steps(tmp_path, model, data, every=3, patience=0, epochs=2):
    validation = StepValidation(every)
    validation.evaluate = lambda: evaluate_within_fit(model, data)
    recorder, seen = RunRecorder(), WeightsSeen()
    best = BestCheckpoint(str(tmp_path / "best.weights.h5"), "val_loss", "min", save_weights_only=True)
    callbacks = [validation, recorder, seen, best, ValidationScalars(tmp_path / "validation")]
    if patience:
        callbacks.insert(2, EarlyStopping("val_loss", "min", patience))
    validation.hand_to(callbacks)
    history = model.fit(data.train, epochs=epochs, callbacks=callbacks, verbose=0, shuffle=False)
    return recorder, seen, callbacks, history


def test_fit_validates_every_n_steps_of_an_epoch_and_at_its_end_on_the_step_axis(tmp_path):
    model = eager_model()
    plain = same_start(model).fit(datasets().train, epochs=2, verbose=0, shuffle=False)
    recorder, seen, _, history = fit_with_steps(tmp_path, model, datasets())
    steps = [(v["epoch"], v["step"]) for v in recorder.validations]
    assert steps == [(1, 3), (1, 6), (1, 9), (1, 10), (2, 13), (2, 16), (2, 19), (2, 20)]
    scalars = events(tmp_path / "validation")
    assert [s for s, _ in scalars["evaluation_loss_vs_iterations"]] == [3, 6, 9, 10, 13, 16, 19, 20]
    assert [v for _, v in scalars["evaluation_loss_vs_iterations"]] == pytest.approx(
        [v["val_loss"] for v in recorder.validations]
    )
    # the epochs' training figures cover all their steps, as without validation in between; the epoch's val_ figures
    # are its end validation's
    assert history.history["loss"] == plain.history["loss"]
    assert [e["val_loss"] for e in recorder.epochs] == [recorder.validations[i]["val_loss"] for i in (3, 7)]
    final = model.evaluate(datasets().validation, verbose=0, return_dict=True)
    assert final["loss"] == pytest.approx(recorder.validations[-1]["val_loss"], rel=1e-6)


def test_a_mid_epoch_best_is_kept_and_patience_counts_validations_then_ends_the_epoch(tmp_path):
    """Validation gets worse from the first validation on (its labels are the opposite of training's): the best is
    step 3, in the middle of epoch 1, and patience 2 stops the run after the validations of steps 6 and 9."""
    model = eager_model()
    recorder, seen, callbacks, history = fit_with_steps(tmp_path, model, datasets(flip_validation=True), patience=2)
    assert [v["step"] for v in recorder.validations] == [3, 6, 9]  # stopped at 9: the epoch's end did not validate
    best = validation_summary(recorder.validations, "val_loss", "min")["best"]
    assert (best["epoch"], best["step"]) == (1, 3)
    kept = tiny_model()
    kept.load_weights(str(tmp_path / "best.weights.h5"))
    for saved, at_step in zip(kept.get_weights(), seen.at[3], strict=True):
        np.testing.assert_array_equal(saved, at_step)
    assert len(recorder.epochs) == 1 and recorder.epochs[0]["val_loss"] == recorder.validations[-1]["val_loss"]
    assert stop_figures(callbacks)["stop_reason"] == "patience"


def test_a_resumed_run_replays_the_validations_it_kept_into_best_and_patience():
    recorded = [{"epoch": 1, "step": s, "val_loss": v} for s, v in [(3, 0.5), (6, 0.4), (9, 0.45), (10, 0.47)]] + [
        {"epoch": 2, "step": s, "val_loss": v} for s, v in [(13, 0.46), (16, 0.3)]
    ]
    # resumed at batch 5 of epoch 2 (0-based 1): epoch 1's four and the step-13 one (batch 3) were made before it
    kept = kept_validations(recorded, epoch=1, batch=5, every=3)
    assert [v["step"] for v in kept] == [3, 6, 9, 10, 13]
    assert kept_validations(recorded, epoch=1, batch=2, every=3) == recorded[:4]
    uninterrupted = EarlyStopping("val_loss", "min", patience=5)
    uninterrupted.set_model(tiny_model())
    uninterrupted.on_train_begin()
    for validation in kept:
        uninterrupted.on_validation(Validation(validation["epoch"] - 1, validation["step"], validation))
    resumed = EarlyStopping("val_loss", "min", patience=5)
    resumed.resume_validations(kept)
    assert (resumed.wait, resumed.best_logs) == (uninterrupted.wait, uninterrupted.best_logs) == (3, recorded[1])
    best = BestCheckpoint("unused.weights.h5", "val_loss", "min", save_weights_only=True, from_epoch=1)
    best.resume_validations(kept)
    assert best.best_logs == recorded[4]  # from epoch 2 on (pruning's settled epoch): step 13's
    # a resumed fit numbers its first call with a NumPy integer: the step recorded is still a plain int (JSON)
    validation = StepValidation(3, accumulate_steps=2)
    validation.set_model(tiny_model())
    validation.set_params({"steps": 10, "epochs": 2})
    validation.on_epoch_begin(np.int64(1))
    validation.on_train_batch_begin(np.int64(6))
    assert json.dumps(Validation(1, validation.global_step(), {}).record()) == '{"epoch": 2, "step": 8}'


@pytest.fixture(scope="module")
def base_cfg():
    """The run's config, composed once (a composition costs about a second on a busy machine); copied per use."""
    return compose_config(["trainer.epochs=1", "trainer.run_eagerly=true"])


def with_trainer(cfg, **keys):
    cfg = copy.deepcopy(cfg)
    for key, value in keys.items():
        cfg.trainer[key] = value
    return cfg


def custom_run(tmp_path, cfg, model, every=None) -> RunRecorder:
    """One epoch of the custom loop, 4 steps a compiled call (eager: nothing to trace), validating every `every`
    steps (None: at the end only, by the loop); its recorder."""
    cfg = with_trainer(cfg, loop="custom", steps_per_execution=4, val_every_steps=every)
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss=keras.losses.SparseCategoricalCrossentropy())
    loop = CustomLoop(cfg.trainer, model, datasets(), LoopContext(tf.distribute.get_strategy(), RunPaths(tmp_path)))
    recorder = RunRecorder()
    validation = [StepValidation(every)] if every else []
    callbacks = [*validation, recorder]
    for step_validation in validation:
        step_validation.hand_to(callbacks)
    loop.run(callbacks)
    return recorder


def test_the_custom_loop_ends_its_compiled_calls_on_the_validation_steps(tmp_path, base_cfg):
    model = tiny_model()
    twin = same_start(model)
    recorder = custom_run(tmp_path / "steps", base_cfg, model, every=3)
    assert [v["step"] for v in recorder.validations] == [3, 6, 9, 10]  # not 4, 8: calls of 4 steps are cut
    plain = custom_run(tmp_path / "plain", base_cfg, twin)
    assert recorder.epochs[0]["loss"] == plain.epochs[0]["loss"]  # the training accumulators were put back
    assert recorder.epochs[0]["val_loss"] == plain.epochs[0]["val_loss"]  # the same end validation
    for a, b in zip(model.get_weights(), twin.get_weights(), strict=True):
        np.testing.assert_array_equal(a, b)


def test_the_interval_is_checked_before_tensorflow(base_cfg):
    with pytest.raises(ConfigError, match=r"^trainer\.val_every_steps=0: "):
        check_rules(with_trainer(base_cfg, val_every_steps=0), RULES)
    with pytest.raises(
        ConfigError, match=r"^trainer\.val_every_steps=10: fit validates between its compiled calls only; .*of 16"
    ):
        check_val_steps(with_trainer(base_cfg, val_every_steps=10))
    check_val_steps(with_trainer(base_cfg, val_every_steps=4, accumulate_steps=4))  # 16 batches: one call
    check_val_steps(with_trainer(base_cfg, val_every_steps=10, loop="custom"))


@pytest.mark.slow
def test_a_run_stopped_mid_epoch_resumes_to_the_weights_and_best_of_one_never_stopped(tmp_path):
    """Custom loop, deterministic, validation and saves every 20 steps (135 in its one epoch): SIGTERM once it has
    validated, the same command resumes from the step saved; weights, best and validations equal a run never
    stopped."""
    from run_processes import BASE, finish, kill, start, wait_for, weights_digest

    args = [*BASE, "trainer.loop=custom", "trainer.epochs=1", "trainer.deterministic=true"]
    args += ["trainer.val_every_steps=20", "trainer.save_every=20", "logging.tensorboard=false"]
    run_dir = tmp_path / "run"

    def validated() -> bool:
        try:
            history = json.loads((run_dir / "checkpoints" / "history.json").read_text())
        except (OSError, ValueError):
            return False
        return bool(history.get("validations"))

    process = start(run_dir, *args)
    try:
        assert wait_for(process, validated), "the run ended before it validated"
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=120) == 128 + signal.SIGTERM
    finally:
        kill(process)
    stopped = read_run_record(run_dir)
    assert stopped["status"] == "interrupted" and stopped["epochs_run"] == 0
    resumed = finish(run_dir, *args, epochs=1)
    assert resumed["resumed"]["kind"] == "saved_state"
    assert re.search(r"state saved at epoch 1, step [1-9]", stopped["error"]), stopped["error"]  # mid-epoch
    reference = finish(tmp_path / "reference", *args, epochs=1)
    assert resumed["validations"] == reference["validations"] and len(reference["validations"]) == 7
    assert resumed["best"] == reference["best"] and resumed["val_every_steps"] == 20
    for name in ("last.weights.h5", "best.weights.h5"):
        assert weights_digest(run_dir / "checkpoints" / name) == weights_digest(
            tmp_path / "reference" / "checkpoints" / name
        )
