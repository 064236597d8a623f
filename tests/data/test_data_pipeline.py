"""The pipeline options of the `data:` section, shared by every source (in-process, fast)."""

import data_files
import numpy as np
import pytest

from tfhydra.config.errors import ConfigError
from tfhydra.data.pipeline import build_datasets
from tfhydra.runner.plan import check_config as validate


def labels_of(dataset):
    return np.concatenate([y.numpy() for _, y in dataset])


def images_of(dataset):
    return np.concatenate([x.numpy() for x, _ in dataset])


def test_fraction_trains_on_a_stratified_seeded_tenth_with_every_class(compose_cfg):
    full = build_datasets(compose_cfg().data, seed=0)
    cfg = compose_cfg(["data.fraction=0.1"])
    tenth = build_datasets(cfg.data, seed=0)
    labels = labels_of(tenth.train)
    assert len(labels) == tenth.spec.train_size and abs(len(labels) - 0.1 * full.spec.train_size) <= 5
    assert sorted(set(labels)) == list(range(10))  # every class present
    full_counts, counts = np.bincount(labels_of(full.train)), np.bincount(labels)
    assert np.all(np.abs(counts - 0.1 * full_counts) <= 1)  # stratified: each class at its share
    assert tenth.spec.val_size == full.spec.val_size  # validation is left whole
    assert tenth.steps_per_epoch == -(-len(labels) // 32)
    same, other = (build_datasets(cfg.data, seed=s) for s in (0, 1))
    assert sorted(images_of(same.train).sum(axis=(1, 2, 3))) == sorted(images_of(tenth.train).sum(axis=(1, 2, 3)))
    assert sorted(images_of(other.train).sum(axis=(1, 2, 3))) != sorted(images_of(tenth.train).sum(axis=(1, 2, 3)))


def test_fraction_of_a_file_source_selects_records_before_decoding_them(tmp_path, compose_cfg):
    train = data_files.write_tfrecords(tmp_path, "train", n=200, shards=4, shape=(8, 8, 1), classes=4)
    cfg = compose_cfg(["data=tfrecord", f"data.train={train}", "data.fraction=0.1", "data.val_fraction=0.2"])
    datasets = build_datasets(cfg.data, seed=0)
    labels = labels_of(datasets.train)
    # issue 34: 40 test and 40 validation records held out of 200 first, so 0.1 of the 120 left: 3 per class
    assert datasets.spec.train_size == len(labels) == 12 and np.all(np.bincount(labels) == 3)


def test_cache_in_memory_in_files_or_off(tmp_path, compose_cfg):
    path = data_files.write_npz(tmp_path / "d.npz", n_train=24, n_test=8, shape=(6, 6), classes=2)
    prefix = tmp_path / "cache" / "d"
    base = ["data=npz", f"data.path={path}", "data.shuffle_buffer=0"]
    on_disk = build_datasets(compose_cfg([*base, f"data.cache={prefix}"]).data, seed=0)
    first = images_of(on_disk.train)
    images_of(on_disk.validation)
    names = sorted(p.name for p in prefix.parent.glob("*.index"))
    assert [n.split("-")[0] for n in names] == ["d.train", "d.validation"]
    assert names[0].split("-")[1] == names[1].split("-")[1]  # one digest of the data config and seed

    with np.load(path) as stored:  # the file changes on disk: a complete cache is still read (docs/data.md)
        np.savez(path, **{**stored, "x_train": np.zeros((24, 6, 6), np.uint8)})
    again = build_datasets(compose_cfg([*base, f"data.cache={prefix}"]).data, seed=0)
    np.testing.assert_array_equal(images_of(again.train), first)  # read back from the cache files, not the npz
    other_seed = build_datasets(compose_cfg([*base, f"data.cache={prefix}"]).data, seed=1)
    assert images_of(other_seed.train).max() == 0  # another config (seed) gets its own files, from the new npz
    assert len(list(prefix.parent.glob("d.train-*.index"))) == 2
    for cache in ("memory", "false"):
        assert images_of(build_datasets(compose_cfg([*base, f"data.cache={cache}"]).data, seed=0).train).max() == 0


def test_drop_remainder_and_prefetch(compose_cfg):
    base = ["data=synthetic", "data.train_size=50", "data.val_size=10", "data.batch_size=16"]
    kept = build_datasets(compose_cfg(base).data, seed=0)
    assert kept.steps_per_epoch == 4 and [len(y) for _, y in kept.train] == [16, 16, 16, 2]
    dropped = build_datasets(compose_cfg([*base, "data.drop_remainder=true", "data.prefetch=2"]).data, seed=0)
    assert dropped.steps_per_epoch == 3 and [len(y) for _, y in dropped.train] == [16, 16, 16]
    assert dropped.train.element_spec[0].shape[0] == 16  # a static batch size
    assert sum(len(y) for _, y in dropped.validation) == 10  # validation keeps every example
    unfetched = build_datasets(compose_cfg([*base, "data.prefetch=0"]).data, seed=0)
    assert sum(len(y) for _, y in unfetched.train) == 50
    with pytest.raises(ConfigError, match="no complete training batch"):
        build_datasets(compose_cfg([*base, "data.drop_remainder=true", "data.batch_size=64"]).data, seed=0)


def test_augment_changes_training_batches_only(compose_cfg):
    base = ["data=synthetic", "data.train_size=32", "data.val_size=16", "data.shuffle_buffer=0"]
    plain = build_datasets(compose_cfg(base).data, seed=0)
    cfg = compose_cfg(
        [
            *base,
            "data.augment=[{name: random_flip, mode: horizontal}, {name: random_rotation, "
            "factor: 0.1}, {name: random_zoom, height_factor: 0.1}, {name: random_translation, "
            "height_factor: 0.1, width_factor: 0.1}, {name: random_contrast, factor: 0.2}]",
        ]
    )
    validate(cfg)
    augmented = build_datasets(cfg.data, seed=0)
    np.testing.assert_array_equal(labels_of(augmented.train), labels_of(plain.train))
    epoch1, epoch2 = images_of(augmented.train), images_of(augmented.train)
    assert epoch1.shape == images_of(plain.train).shape and epoch1.dtype == np.float32
    assert not np.allclose(epoch1, images_of(plain.train)) and not np.allclose(epoch1, epoch2)  # new draws each epoch
    np.testing.assert_array_equal(images_of(augmented.validation), images_of(plain.validation))


def test_augment_by_bare_name(compose_cfg):
    cfg = compose_cfg(["data=synthetic", "data.train_size=8", "data.val_size=8", "data.augment=[random_flip]"])
    validate(cfg)
    assert images_of(build_datasets(cfg.data, seed=0).train).shape == (8, 28, 28, 1)


@pytest.mark.parametrize(
    "augment,fragments",
    [
        (
            "[{name: random_blur}]",
            [
                "data.augment[0].name=random_blur: unknown augmentation layer; accepted: one of cutmix, mixup, "
                "randaugment, random_contrast, random_flip, random_rotation, random_translation, random_zoom"
            ],
        ),
        (
            "[random_flip, {name: random_rotation, factr: 0.1}]",
            [
                "data.augment[1]=",
                "cannot build it",
                "factr",
                "accepted: the arguments of tf.keras.layers.RandomRotation",
            ],
        ),
        ("[{name: random_flip, mode: diagonal}]", ["data.augment[0]=", "unknown mode argument diagonal"]),
    ],
)
def test_augment_mistakes_are_config_errors(compose_cfg, augment, fragments):
    with pytest.raises(ConfigError) as error:
        build_datasets(compose_cfg(["data=synthetic", "data.train_size=8", f"data.augment={augment}"]).data, seed=0)
    for fragment in fragments:
        assert fragment in str(error.value)


def test_augment_needs_images(tmp_path, compose_cfg):
    path = data_files.write_csv(tmp_path / "t.csv", n=40)  # the tables' 10% validation holds each of 3 classes
    with pytest.raises(
        ConfigError,
        match=r"image augmentation needs \(height, width, channels\) images; the data "
        r"are float32 of shape \(3,\)",
    ):
        build_datasets(compose_cfg(["data=csv", f"data.path={path}", "data.augment=[random_flip]"]).data, seed=0)


@pytest.mark.parametrize(
    "override,accepted",
    [
        ("data.cache=true", "auto, memory, false, or a path prefix for cache files"),
        ("data.prefetch=-1", "auto or an integer >= 0"),
        ("data.prefetch=lots", "auto or an integer >= 0"),
        ("data.augment=[{mode: horizontal}]", "a list of layer names or {name: <layer>"),
        ("data.fraction=1.5", "a number in (0, 1]"),
    ],
)
def test_pipeline_values_are_checked_before_tensorflow_work(compose_cfg, override, accepted):
    with pytest.raises(ConfigError, match="accepted: " + accepted.replace("(", r"\(").replace("[", r"\[")):
        validate(compose_cfg([override]))


def test_a_stream_checkpointed_in_its_first_epoch_resumes_the_next_epochs_exactly(compose_cfg, tmp_path):
    """The custom loop's one iterator over every epoch: restored from a save in epoch 1, the following
    epochs' shuffles match an uninterrupted stream. (With the prefetch placed before `repeat()`,
    epoch 2 came out in another order, and a resumed run was no longer identical.)"""
    import tensorflow as tf

    cfg = compose_cfg()

    def stream():  # as each process of a run builds it
        datasets = build_datasets(cfg.data, seed=42)
        return iter(datasets.prefetched(datasets.train.repeat()))

    steps = build_datasets(cfg.data, seed=42).steps_per_epoch
    reference = stream()
    expected = [next(reference)[1].numpy() for _ in range(3 * steps)]
    interrupted = stream()
    for _ in range(steps - 3):
        next(interrupted)
    saved = tf.train.Checkpoint(iterator=interrupted).save(str(tmp_path / "ckpt"))
    resumed = stream()
    tf.train.Checkpoint(iterator=resumed).restore(saved)
    got = [next(resumed)[1].numpy() for _ in range(2 * steps + 3)]
    for i, batch in enumerate(got):
        np.testing.assert_array_equal(batch, expected[steps - 3 + i], err_msg=f"batch {steps - 3 + i}")
