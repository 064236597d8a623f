"""Feature vectors (rank-1 float examples) are standardised on the training split for every source that carries
them, as data=csv's columns are: npz tables and a user's `_target_` source; the statistics go with the export as a
Normalization layer (tfhydra/data/features.py). Images and integer arrays keep their own scaling."""

import numpy as np
import pytest

from tfhydra.data.pipeline import build_datasets

PLAIN = ["data.shuffle_buffer=0", "data.cache=false", "data.batch_size=16"]


def examples(dataset):
    xs, ys = zip(*[(x.numpy(), y.numpy()) for x, y in dataset], strict=True)
    return np.concatenate(xs), np.concatenate(ys)


def table_npz(path, rows=60, seed=0, **arrays):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(rows, 3)) * [300.0, 0.01, 2.0] + [1000.0, 0.0, -5.0]
    y = rng.integers(0, 3, size=rows)
    np.savez(path, x_train=x[:40], y_train=y[:40], x_val=x[40:50], y_val=y[40:50], x_test=x[50:], y_test=y[50:])
    return x, y


def normalization(datasets):
    (layer,) = datasets.serving.layers
    return np.asarray(layer.mean).reshape(-1), np.asarray(layer.variance).reshape(-1)


def test_an_npz_table_is_standardised_with_the_training_split_statistics(tmp_path, compose_cfg):
    x, _ = table_npz(tmp_path / "t.npz")
    cfg = compose_cfg(["data=npz", f"data.path={tmp_path / 't.npz'}", "data.x_val=x_val", "data.y_val=y_val", *PLAIN])
    datasets = build_datasets(cfg.data, 0)
    assert datasets.spec.input_shape == (3,) and datasets.spec.train_size == 40
    mean, variance = normalization(datasets)
    np.testing.assert_allclose(mean, x[:40].mean(axis=0), rtol=1e-6)
    np.testing.assert_allclose(variance, x[:40].var(axis=0), rtol=1e-5)
    train = examples(datasets.train)[0]
    np.testing.assert_allclose(train.mean(axis=0), 0, atol=1e-4)
    np.testing.assert_allclose(train.std(axis=0), 1, atol=1e-4)
    # validation, test and the served model's first step: the training split's statistics, on the raw rows
    expected = (x[40:50] - x[:40].mean(axis=0)) / x[:40].std(axis=0)
    np.testing.assert_allclose(examples(datasets.validation)[0], expected, rtol=1e-4, atol=1e-4)
    raw = datasets.serving.raw_validation[0]
    np.testing.assert_allclose(raw, x[40:50].astype(np.float32))
    np.testing.assert_allclose(datasets.serving.prepare(raw).numpy(), expected, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(examples(datasets.test)[0], (x[50:] - mean) / np.sqrt(variance), rtol=1e-4, atol=1e-4)


def test_a_held_out_validation_split_leaves_the_statistics_to_the_training_rows(tmp_path, compose_cfg):
    table_npz(tmp_path / "t.npz")
    datasets = build_datasets(compose_cfg(["data=npz", f"data.path={tmp_path / 't.npz'}", *PLAIN]).data, 0)
    assert (datasets.spec.train_size, datasets.spec.val_size) == (32, 8)
    train = examples(datasets.train)[0]  # standardised exactly when the statistics are these 32 rows'
    np.testing.assert_allclose(train.mean(axis=0), 0, atol=1e-4)
    np.testing.assert_allclose(train.std(axis=0), 1, atol=1e-4)
    assert np.abs(examples(datasets.validation)[0].mean(axis=0)).max() > 1e-3


def test_integer_arrays_of_one_axis_keep_their_scaling(tmp_path, compose_cfg):
    rng = np.random.default_rng(0)
    x = rng.integers(0, 256, size=(40, 6)).astype(np.uint8)
    np.savez(tmp_path / "u.npz", x_train=x, y_train=np.arange(40) % 2, x_test=x[:8], y_test=np.arange(8) % 2)
    datasets = build_datasets(compose_cfg(["data=npz", f"data.path={tmp_path / 'u.npz'}", *PLAIN]).data, 0)
    assert datasets.serving.layers == () and examples(datasets.train)[0].max() <= 1.0  # scaled by 1/255, as before


@pytest.mark.parametrize("fraction", [1.0, 0.5])
def test_a_target_sources_feature_vectors_are_standardised_on_its_training_split(compose_cfg, fraction):
    from user_code import scaled_feature_source

    stored = scaled_feature_source(seed=0)
    x_train = np.concatenate([x.numpy()[None] for x, _ in stored.train])
    cfg = compose_cfg(["~data", "+data._target_=user_code.scaled_feature_source", f"data.fraction={fraction}", *PLAIN])
    datasets = build_datasets(cfg.data, 0)
    mean, variance = normalization(datasets)
    np.testing.assert_allclose(mean, x_train.mean(axis=0), rtol=1e-5)
    np.testing.assert_allclose(variance, x_train.var(axis=0), rtol=1e-4)
    train = examples(datasets.train)[0]
    if fraction == 1.0:
        np.testing.assert_allclose(train.mean(axis=0), 0, atol=1e-3)
        np.testing.assert_allclose(train.std(axis=0), 1, atol=1e-3)
    raw, _ = datasets.serving.raw_validation
    np.testing.assert_allclose(
        datasets.serving.prepare(raw).numpy(), examples(datasets.validation)[0], rtol=1e-4, atol=1e-4
    )
