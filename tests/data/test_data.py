import numpy as np

from tfhydra.data.pipeline import build_datasets


def labels_of(dataset):
    return np.concatenate([y.numpy() for _, y in dataset])


def test_digits_are_28x28_in_unit_range_and_split_by_data_split_seed(compose_cfg):
    """Issue 34: validation and test are held out of all 1,797 (1077 / 360 / 360), seeded by data.split_seed,
    not by the run's seed (every job and seed is measured on the same examples)."""
    cfg = compose_cfg()
    first = build_datasets(cfg.data, seed=1)
    assert first.spec.input_shape == (28, 28, 1) and first.spec.num_classes == 10
    assert (first.spec.train_size, first.spec.val_size, first.spec.test_size) == (1077, 360, 360)
    images, labels = next(iter(first.train))
    assert images.shape == (32, 28, 28, 1) and images.dtype.name == "float32"
    assert 0.0 <= float(images.numpy().min()) and float(images.numpy().max()) <= 1.0
    val_labels = labels_of(first.validation)
    assert sorted(set(val_labels)) == list(range(10))  # stratified: every class in validation
    assert sorted(set(labels_of(first.test))) == list(range(10))  # and in test
    other_seed = labels_of(build_datasets(cfg.data, seed=2).validation)
    np.testing.assert_array_equal(val_labels, other_seed)  # trainer.seed does not move the split
    cfg.data.split_seed = 1
    assert not np.array_equal(val_labels, labels_of(build_datasets(cfg.data, seed=1).validation))
    assert first.steps_per_epoch == 34  # ceil(1077 / 32), global batch


def test_synthetic_has_the_configured_shape_and_classes(compose_cfg):
    cfg = compose_cfg(
        [
            "data=synthetic",
            "data.shape=[12,10,3]",
            "data.num_classes=4",
            "data.train_size=64",
            "data.val_size=16",
            "data.batch_size=16",
        ]
    )
    datasets = build_datasets(cfg.data, seed=0)
    assert datasets.spec.input_shape == (12, 10, 3) and datasets.spec.num_classes == 4
    images, labels = next(iter(datasets.train))
    assert images.shape == (16, 12, 10, 3)
    assert set(labels_of(datasets.train)) <= {0, 1, 2, 3} and len(labels_of(datasets.validation)) == 16


def test_shuffle_is_seeded_and_reshuffles_each_epoch(compose_cfg):
    cfg = compose_cfg()
    train = build_datasets(cfg.data, seed=3).train
    epoch1, epoch2 = labels_of(train), labels_of(train)
    assert not np.array_equal(epoch1, epoch2)
    np.testing.assert_array_equal(epoch1, labels_of(build_datasets(cfg.data, seed=3).train))
