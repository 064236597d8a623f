"""A regression's tabular MLP starts as the linear model (tfhydra/model/linear_start.py): built straight from a
DataSpec and a few in-memory rows, no training."""

import numpy as np
import pytest
import tensorflow as tf

from tfhydra.config.contracts import DataSpec, Head
from tfhydra.model import linear_start
from tfhydra.model.build import build_model
from tfhydra.model.linear_start import start_at_linear_fit, starts_linear

HEAD = Head(1, "linear", "predictions", scale=(4.0,), offset=(10.0,), pictures="scatter", signature="predictions")
TABLE = DataSpec((3,), 1, ("target",), 40, 10, head=HEAD)
CLASSES = DataSpec((3,), 2, ("a", "b"), 40, 10)


def rows(count=40, seed=0):
    """Standardised-looking features and a target linear in them plus noise (not exactly linear: a fit, not a copy)."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(count, 3)).astype(np.float32)
    y = (10 + 6 * x[:, 0] - 2 * x[:, 1] + rng.normal(scale=0.5, size=count)).astype(np.float32)
    return x, y


def test_the_model_starts_at_the_least_squares_fit_in_the_targets_units(compose_cfg):
    model = build_model(compose_cfg(["task=regression"]).model, TABLE)
    x, y = rows()
    assert start_at_linear_fit(model, tf.data.Dataset.from_tensor_slices((x, y[:, None])).batch(16), HEAD) == 40
    design = np.column_stack([x, np.ones(len(x))])
    expected = design @ np.linalg.lstsq(design, y, rcond=None)[0]  # scikit-learn's LinearRegression, in numpy
    np.testing.assert_allclose(model(x, training=False).numpy()[:, 0], expected, rtol=1e-4, atol=1e-4)
    assert not model.get_layer("outputs").kernel.numpy().any()  # the deep output starts at zero


def test_the_deep_path_carries_deep_l2_and_the_wide_path_none(compose_cfg):
    model = build_model(compose_cfg(["task=regression", "model.tabular.deep_l2=0.5"]).model, TABLE)
    penalised = [layer.name for layer in model.layers if getattr(layer, "kernel_regularizer", None) is not None]
    assert penalised == [*(layer.name for layer in model.layers if layer.name.startswith("dense")), "outputs"]
    weights = [float(r.l2) for r in (model.get_layer(n).kernel_regularizer for n in penalised)]
    assert weights == pytest.approx([0.5 * 4.0**2] * 3)  # against the unit-scale loss: the loss is in target units
    assert len(model.losses) == 3


@pytest.mark.parametrize(
    "overrides, spec",
    [
        (["task=regression", "model.tabular.linear_start=false"], TABLE),
        (["task=regression", "model.tabular.wide=false"], TABLE),
        (["task=regression", "model=mlp"], TABLE),  # the seed MLP: no wide path, no linear start
        (["task=binary"], CLASSES),  # a classification starts at random (docs/design.md, round seven)
    ],
)
def test_what_starts_at_random(compose_cfg, overrides, spec):
    cfg = compose_cfg(overrides).model
    assert not starts_linear(cfg, spec)
    assert not build_model(cfg, spec).losses  # and carries no deep_l2


def test_the_fit_is_bounded(compose_cfg, monkeypatch):
    x, y = rows()
    batches = tf.data.Dataset.from_tensor_slices((x, y[:, None])).batch(16)
    monkeypatch.setattr(linear_start, "MAX_VALUES", 60)  # 20 rows of 3 features
    model = build_model(compose_cfg(["task=regression"]).model, TABLE)
    assert start_at_linear_fit(model, batches, HEAD) == 20
    monkeypatch.setattr(linear_start, "MAX_FEATURES", 2)
    before = [w.copy() for w in model.get_layer("wide").get_weights()]
    assert start_at_linear_fit(build_model(compose_cfg(["task=regression"]).model, TABLE), batches, HEAD) == 0
    assert start_at_linear_fit(model, None, HEAD) == 0  # no rows (a source without feature vectors)
    assert all((a == b).all() for a, b in zip(before, model.get_layer("wide").get_weights(), strict=True))
