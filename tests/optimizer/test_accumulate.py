"""`trainer.accumulate_steps=N` (tfhydra/optimizer/accumulate.py): N batches of B train the same weights as one
batch of N*B, for a model without batch-dependent layers, in both loops, under mixed precision and a
distribution strategy; the record says the effective batch."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras
from conftest import ROOT, read_run_record, run_cli

from tfhydra.optimizer.accumulate import accumulating

EXAMPLES = 128


def examples() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(EXAMPLES, 12)).astype("float32")
    return x, (x[:, :3].sum(axis=1) > 0).astype("int64")


def small_model(optimizer) -> keras.Model:
    keras.utils.set_random_seed(1)
    model = keras.Sequential(
        [keras.Input((12,)), keras.layers.Dense(16, activation="tanh"), keras.layers.Dense(2, activation="softmax")]
    )
    model.compile(optimizer=optimizer, loss="sparse_categorical_crossentropy")
    return model


def fitted(batch: int, steps: int, epochs: int = 3, **options) -> list[np.ndarray]:
    x, y = examples()
    model = small_model(accumulating(keras.optimizers.Adam(1e-2, **options), steps))
    model.fit(x, y, batch_size=batch, epochs=epochs, shuffle=False, verbose=0)
    assert int(model.optimizer.iterations) == epochs * EXAMPLES // (batch * steps)  # updates, not batches
    return model.get_weights()


def assert_same_weights(a: list[np.ndarray], b: list[np.ndarray], atol: float = 1e-5) -> None:
    for left, right in zip(a, b, strict=True):
        np.testing.assert_allclose(left, right, atol=atol, rtol=1e-4)


def test_four_batches_of_16_train_the_weights_of_one_batch_of_64_in_fit():
    assert_same_weights(fitted(16, 4), fitted(64, 1))


def test_clipping_applies_to_the_accumulated_gradient():
    clipped = {"global_clipnorm": 0.05}
    assert_same_weights(fitted(16, 4, **clipped), fitted(64, 1, **clipped))
    with pytest.raises(AssertionError):  # the check can fail: clipping each small batch is another update
        assert_same_weights(fitted(16, 4, **clipped), fitted(16, 1, **clipped))


def test_a_tape_loop_that_calls_apply_gradients_accumulates_too():
    """The custom loop's path: `apply_gradients` per batch, the loss a replica's share of the batch mean."""
    x, y = examples()

    def trained(batch: int, steps: int) -> list[np.ndarray]:
        model = small_model(accumulating(keras.optimizers.SGD(0.1), steps))
        loss_of = keras.losses.SparseCategoricalCrossentropy()
        for start in range(0, EXAMPLES, batch):
            with tf.GradientTape() as tape:
                loss = loss_of(y[start : start + batch], model(x[start : start + batch], training=True))
            model.optimizer.apply_gradients(
                zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables, strict=True)
            )
        return model.get_weights()

    assert_same_weights(trained(16, 4), trained(64, 1))
    with pytest.raises(AssertionError):
        assert_same_weights(trained(16, 1), trained(64, 1))  # without accumulation: more, smaller updates


def test_under_a_loss_scale_optimizer_the_unscaled_gradients_accumulate():
    x, y = examples()

    def trained(batch: int, steps: int) -> list[np.ndarray]:
        optimizer = keras.mixed_precision.LossScaleOptimizer(accumulating(keras.optimizers.Adam(1e-2), steps))
        model = small_model(optimizer)
        model.fit(x, y, batch_size=batch, epochs=2, shuffle=False, verbose=0)
        assert float(optimizer.loss_scale) > 1  # scaled, and every step finite
        return model.get_weights()

    assert_same_weights(trained(16, 4), trained(64, 1))


def test_one_step_leaves_the_optimizer_as_built():
    optimizer = keras.optimizers.Adam(1e-3)
    assert accumulating(optimizer, 1) is optimizer and type(optimizer) is keras.optimizers.Adam
    assert isinstance(accumulating(keras.optimizers.Adam(1e-3), 4), keras.optimizers.Adam)


def saved_weights(run_dir) -> list[np.ndarray]:
    """The model's weights in a run's last.weights.h5, by name (the optimizer's variables are not the model's)."""
    import h5py

    found: dict[str, np.ndarray] = {}
    with h5py.File(run_dir / "checkpoints" / "last.weights.h5") as weights:
        weights["layers"].visititems(
            lambda name, item: found.update({name: np.array(item)}) if hasattr(item, "shape") else None
        )
    return [found[name] for name in sorted(found)]


RUN = [
    "model=mlp",
    "model.dropout=0",
    "data=synthetic",
    "data.shape=[6,6,1]",
    "data.train_size=256",
    "data.val_size=64",
    "data.test_size=0",
    "data.shuffle_buffer=0",
    "trainer.epochs=2",
    "export.formats=[]",
    "logging.histogram_freq=0",
    "trainer.steps_per_execution=1",
]


@pytest.mark.slow
@pytest.mark.parametrize("loop,strategy", [("custom", "default"), ("fit", "mirrored")])
def test_a_run_with_accumulate_steps_4_at_batch_16_matches_batch_64(tmp_path, loop, strategy):
    """Through the command, both loops, and `strategy=mirrored` over 2 logical CPUs (the gradients all-reduced
    before they accumulate). The fit loop on the default strategy is the fit loop of the mirrored case, and
    fit's own accumulation is test_four_batches_of_16_train_the_weights_of_one_batch_of_64_in_fit."""
    extra = [f"trainer.loop={loop}"]
    if strategy == "mirrored":
        extra += ["strategy=mirrored", "strategy.logical_cpus=2"]
    runs = {}
    for name, batch, steps in (("accumulated", 16, 4), ("large", 64, 1)):
        run_dir = tmp_path / name
        done = run_cli(
            *RUN,
            *extra,
            f"data.batch_size={batch}",
            f"trainer.accumulate_steps={steps}",
            f"hydra.run.dir={run_dir}",
            cwd=ROOT,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        assert read_run_record(run_dir)["effective_batch_size"] == 64
        runs[name] = saved_weights(run_dir)
    assert_same_weights(runs["accumulated"], runs["large"], atol=1e-4)


def test_accumulate_steps_below_one_is_one_line():
    done = run_cli("trainer.accumulate_steps=0", "trainer.epochs=1")
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1].startswith("Error: trainer.accumulate_steps=0: ")
    assert "Traceback" not in done.stderr


def test_a_legacy_optimizer_cannot_accumulate_and_says_so():
    from tfhydra.config.errors import ConfigError

    with pytest.raises(ConfigError, match=r"^trainer.accumulate_steps=4: Adam is not a tf_keras.optimizers.Optimizer"):
        accumulating(keras.optimizers.legacy.Adam(1e-3), 4)


def test_accumulating_beyond_the_runs_batches_is_one_line_before_training(compose_cfg):
    """`trainer.accumulate_steps=1000000000` made no update in the whole run and ended `completed`: refused where
    the optimizer is built, which knows the run's batches (10 an epoch x 2 epochs here); 20 still updates once."""
    from tfhydra.config.errors import ConfigError
    from tfhydra.optimizer.build import build_optimizer

    cfg = compose_cfg([])
    with pytest.raises(ConfigError) as caught:
        build_optimizer(cfg.optimizer, 10, 2, None, 1_000_000_000)
    assert str(caught.value).startswith(
        "trainer.accumulate_steps=1000000000: no optimizer update in the whole run: it has 20 batches; "
        "accepted: an integer in [1, 20] (the run's batches: 10 an epoch x 2 epoch(s))"
    )
    with pytest.raises(ConfigError, match="it has 20 batches"):
        build_optimizer(cfg.optimizer, 10, 2, None, 21)
    assert build_optimizer(cfg.optimizer, 10, 2, None, 20).accumulate_steps == 20
