"""Each data source on small real files: what it yields and the DataSpec it reports (in-process, fast)."""

import dataclasses
import urllib.request

import data_files
import numpy as np
import pytest

from tfhydra.config.errors import ConfigError
from tfhydra.data.keras_datasets import KERAS_DATASETS
from tfhydra.data.pipeline import build_datasets

PLAIN = ["data.shuffle_buffer=0", "data.cache=false"]  # file order, nothing kept between builds


def examples(dataset):
    xs, ys = zip(*[(x.numpy(), y.numpy()) for x, y in dataset], strict=True)
    return np.concatenate(xs), np.concatenate(ys)


def test_npz_scales_integer_images_adds_a_channel_and_tests_on_the_test_arrays(tmp_path, compose_cfg):
    """Issue 34: x_test is the test split; validation is 0.2 of x_train (10 of 48), no longer x_test."""
    path = data_files.write_npz(tmp_path / "mnist.npz", n_train=48, n_test=16, shape=(12, 10), classes=4)
    datasets = build_datasets(compose_cfg(["data=npz", f"data.path={path}", "data.batch_size=16", *PLAIN]).data, 0)
    assert datasets.spec.input_shape == (12, 10, 1) and datasets.spec.dtype == "float32"
    spec = datasets.spec
    assert (spec.train_size, spec.val_size, spec.test_size, spec.num_classes) == (38, 10, 16, 4)
    assert datasets.spec.class_names == ("0", "1", "2", "3")
    with np.load(path) as stored:
        x, y = examples(datasets.test)
        np.testing.assert_allclose(x[..., 0], stored["x_test"] / 255.0, rtol=1e-6)
        np.testing.assert_array_equal(y, stored["y_test"])
        validated = {np.round(v[..., 0] * 255).astype(np.uint8).tobytes() for v in examples(datasets.validation)[0]}
        assert validated <= {v.tobytes() for v in stored["x_train"]}


def test_npz_array_names_are_configurable_and_without_validation_arrays_a_split_is_held_out(tmp_path, compose_cfg):
    path = data_files.write_npz(tmp_path / "d.npz", n_train=40, classes=4, x_train="images", y_train="targets")
    cfg = compose_cfg(
        [
            "data=npz",
            f"data.path={path}",
            "data.x_train=images",
            "data.y_train=targets",
            "data.x_val=null",
            "data.y_val=null",
            "data.val_fraction=0.25",
            "data.class_names=[a,b,c,d]",
            *PLAIN,
        ]
    )
    datasets = build_datasets(cfg.data, 0)
    assert (datasets.spec.train_size, datasets.spec.val_size) == (30, 10)
    assert datasets.spec.class_names == ("a", "b", "c", "d")
    assert sorted(set(examples(datasets.validation)[1])) == [0, 1, 2, 3]  # stratified


def test_a_class_without_a_training_example_is_one_line_naming_it(tmp_path, compose_cfg):
    """Three classes in the file, four named: the fourth is never learnt, yet every figure would count it."""
    path = data_files.write_npz(tmp_path / "d.npz", n_train=40, classes=3)
    cfg = compose_cfg(["data=npz", f"data.path={path}", "data.class_names=[a,b,c,d]", *PLAIN])
    with pytest.raises(ConfigError) as caught:
        build_datasets(cfg.data, 0)
    assert str(caught.value) == (
        "data=npz: 1 of its 4 classes have no training example (d) among 32 training rows; accepted: a training "
        "split holding every class: more rows of the missing ones, or data.class_names / data.num_classes naming "
        "only the classes the data holds"
    )


def test_tfrecord_reads_sharded_png_records_with_their_labels(tmp_path, compose_cfg):
    train = data_files.write_tfrecords(tmp_path, "train", n=40, shards=4, shape=(14, 12, 1), classes=4, seed=1)
    val = data_files.write_tfrecords(tmp_path, "val", n=12, shards=2, shape=(14, 12, 1), classes=4, seed=2)
    test = data_files.write_tfrecords(tmp_path, "test", n=8, shards=1, shape=(14, 12, 1), classes=4, seed=3)
    cfg = compose_cfg(
        [
            "data=tfrecord",
            f"data.train={train}",
            f"data.validation={val}",
            f"data.test={test}",
            "data.batch_size=8",
            *PLAIN,
        ]
    )
    datasets = build_datasets(cfg.data, 0)
    assert datasets.spec.input_shape == (14, 12, 1) and datasets.spec.num_classes == 4
    assert (datasets.spec.train_size, datasets.spec.val_size, datasets.spec.test_size) == (40, 12, 8)
    tested = examples(datasets.test)[1]
    assert sorted(tested) == sorted(data_files.class_images(8, (14, 12, 1), 4, seed=3)[1])
    x, y = examples(datasets.train)
    images, labels = data_files.class_images(40, (14, 12, 1), 4, seed=1)
    assert sorted(y) == sorted(labels)
    # every stored image comes back exactly (PNG is lossless), with its own label
    stored = {image.tobytes(): label for image, label in zip(images, labels, strict=True)}
    assert all(
        stored[np.round(image * 255).astype(np.uint8).tobytes()] == label for image, label in zip(x, y, strict=True)
    )


def test_tfrecord_raw_encoding_custom_keys_and_a_split_without_validation_files(tmp_path, compose_cfg):
    train = data_files.write_tfrecords(
        tmp_path,
        "raw",
        n=40,
        shards=3,
        shape=(6, 5, 2),
        classes=2,
        encoding="raw",
        image_key="pixels",
        label_key="target",
    )
    cfg = compose_cfg(
        [
            "data=tfrecord",
            f"data.train={train}",
            "data.encoding=raw",
            "data.raw_shape=[6,5,2]",
            "data.image_key=pixels",
            "data.label_key=target",
            "data.image_size=[8,8]",
            "data.val_fraction=0.25",
            *PLAIN,
        ]
    )
    datasets = build_datasets(cfg.data, 0)
    assert datasets.spec.input_shape == (8, 8, 2)
    # issue 34: test (0.2 of all 40) first, then validation (0.25 of all: 10 of the 32 left), 22 to train
    assert (datasets.spec.train_size, datasets.spec.val_size, datasets.spec.test_size) == (22, 10, 8)
    assert len(examples(datasets.train)[1]) == 22 and sorted(set(examples(datasets.validation)[1])) == [0, 1]
    assert sorted(set(examples(datasets.test)[1])) == [0, 1]


def test_image_folder_takes_classes_from_folder_names_and_val_from_val(tmp_path, compose_cfg):
    root = data_files.write_image_folder(
        tmp_path / "pets", per_class=6, val_per_class=2, test_per_class=1, size=(20, 24)
    )
    cfg = compose_cfg(
        ["data=image_folder", f"data.path={root}", "data.image_size=[16,16]", "data.color_mode=grayscale", *PLAIN]
    )
    datasets = build_datasets(cfg.data, 0)
    spec = datasets.spec
    assert spec.class_names == ("cat", "dog", "owl") and spec.input_shape == (16, 16, 1)
    assert (spec.train_size, spec.val_size, spec.test_size) == (18, 6, 3)  # train/, val/ and test/ as they are
    x, y = examples(datasets.validation)
    assert x.shape == (6, 16, 16, 1) and 0.0 <= x.min() and x.max() <= 1.0 and sorted(y) == [0, 0, 1, 1, 2, 2]
    assert sorted(examples(datasets.test)[1]) == [0, 1, 2]


def test_image_folder_of_class_folders_keeps_the_stored_size_and_splits_by_seed(tmp_path, compose_cfg):
    root = data_files.write_image_folder(tmp_path / "pets", per_class=10, size=(20, 24))
    flat = tmp_path / "flat"
    (root / "train").rename(flat)  # <path>/<class>/*.png, no train/ level
    cfg = compose_cfg(["data=image_folder", f"data.path={flat}", "data.image_size=null", *PLAIN])
    first, again = (build_datasets(cfg.data, seed) for seed in (0, 1))  # trainer.seed does not move the split
    cfg.data.split_seed = 1
    other = build_datasets(cfg.data, 0)
    spec = first.spec
    assert spec.input_shape == (20, 24, 3) and (spec.train_size, spec.val_size, spec.test_size) == (18, 6, 6)
    np.testing.assert_array_equal(examples(first.validation)[0], examples(again.validation)[0])
    assert not np.array_equal(examples(first.validation)[0], examples(other.validation)[0])


def test_csv_standardises_features_with_training_statistics_only(tmp_path, compose_cfg):
    path = data_files.write_csv(tmp_path / "iris.csv", n=60)
    datasets = build_datasets(compose_cfg(["data=csv", f"data.path={path}", *PLAIN]).data, 0)
    assert datasets.spec.input_shape == (3,) and datasets.spec.class_names == ("setosa", "versicolor", "virginica")
    x_train, _ = examples(datasets.train)
    x_val, _ = examples(datasets.validation)
    np.testing.assert_allclose(x_train.mean(axis=0), 0.0, atol=1e-5)
    np.testing.assert_allclose(x_train[:, :2].std(axis=0), 1.0, atol=1e-5)  # x2 was on a 1000x larger scale
    assert np.all(x_train[:, 2] == 0) and np.all(x_val[:, 2] == 0)  # a constant column
    assert np.abs(x_val.mean(axis=0)[:2]).max() > 1e-3  # validation was not used for the statistics


def test_csv_feature_columns_are_configurable(tmp_path, compose_cfg):
    path = data_files.write_csv(tmp_path / "iris.csv", n=30)
    cfg = compose_cfg(["data=csv", f"data.path={path}", "data.features=[x2]", *PLAIN])
    assert build_datasets(cfg.data, 0).spec.input_shape == (1,)


def test_text_csv_yields_token_ids_from_a_vocabulary_fitted_on_training_rows(tmp_path, compose_cfg):
    """Each row has a word of its own: only the training rows' words are in the vocabulary."""
    path = data_files.write_text_csv(tmp_path / "reviews.csv", n=40, tag_rows=True)
    cfg = compose_cfg(["data=text_csv", f"data.path={path}", "data.sequence_length=12", "data.vocab_size=100", *PLAIN])
    datasets = build_datasets(cfg.data, 0)
    spec = datasets.spec
    assert spec.input_shape == (12,) and spec.dtype == "int64" and spec.class_names == ("neg", "pos")
    class_words = len(data_files.WORDS["pos"] + data_files.WORDS["neg"])
    assert spec.vocab_size == 2 + 7 + class_words + spec.train_size  # padding, unknown, filler, class, row words
    x_train, _ = examples(datasets.train)
    x_val, _ = examples(datasets.validation)
    assert x_train.dtype == np.int64 and x_train.max() < spec.vocab_size
    assert (x_train == 1).sum() == 0  # no unknown words in training rows
    assert ((x_val == 1).sum(axis=1) == 1).all()  # each validation row's own word is unknown


def test_text_csv_vocabulary_size_is_capped(tmp_path, compose_cfg):
    path = data_files.write_text_csv(tmp_path / "reviews.csv", n=40, tag_rows=True)
    cfg = compose_cfg(["data=text_csv", f"data.path={path}", "data.vocab_size=5", *PLAIN])
    datasets = build_datasets(cfg.data, 0)
    assert datasets.spec.vocab_size == 5 and examples(datasets.train)[0].max() == 4
    assert datasets.spec.input_shape == (64,)  # the default sequence_length, padded with 0


@pytest.mark.parametrize(
    "name,shape,classes,first_name",
    [
        ("mnist", (28, 28, 1), 10, "0"),
        ("fashion_mnist", (28, 28, 1), 10, "T-shirt/top"),
        ("cifar10", (32, 32, 3), 10, "c10_0"),
        ("cifar100", (32, 32, 3), 100, "fine0"),
    ],
)
def test_keras_datasets_are_read_from_the_keras_cache_without_network(
    tmp_path, compose_cfg, monkeypatch, name, shape, classes, first_name
):
    data_files.write_keras_cache(tmp_path / "keras", name, n_train=5 * classes, n_test=20)
    monkeypatch.setenv("KERAS_HOME", str(tmp_path / "keras"))

    def refuse(*args):
        raise AssertionError("downloaded although the files are cached")

    monkeypatch.setitem(KERAS_DATASETS, name, dataclasses.replace(KERAS_DATASETS[name], download=refuse))
    datasets = build_datasets(compose_cfg([f"data={name}", *PLAIN]).data, 0)
    spec = datasets.spec
    assert (spec.input_shape, spec.num_classes, spec.class_names[0]) == (shape, classes, first_name)
    # issue 34: the cached test images are the test split; validation is 0.2 of the training images
    assert (spec.train_size, spec.val_size, spec.test_size) == (4 * classes, classes, 20)
    x, _ = examples(datasets.test)
    assert x.shape == (20, *shape) and 0.0 <= x.min() and x.max() <= 1.0


def test_cifar100_coarse_labels(tmp_path, compose_cfg):
    data_files.write_keras_cache(tmp_path, "cifar100", n_train=100, n_test=20)
    cfg = compose_cfg(["data=cifar100", f"data.cache_dir={tmp_path}", "data.label_mode=coarse", *PLAIN])
    assert build_datasets(cfg.data, 0).spec.class_names[:2] == ("coarse0", "coarse1")


def test_keras_dataset_offline_and_not_cached_is_a_one_line_error(tmp_path, compose_cfg, monkeypatch):
    """The real Keras download path runs, against a proxy on a closed local port: refused at once, never a hang."""
    for variable in ("no_proxy", "NO_PROXY"):
        monkeypatch.delenv(variable, raising=False)
    for variable in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY"):
        monkeypatch.setenv(variable, "http://127.0.0.1:9")
    monkeypatch.setattr(urllib.request, "_opener", None)  # build a new opener that reads the proxy variables
    monkeypatch.setenv("KERAS_HOME", str(tmp_path))
    with pytest.raises(ConfigError) as error:
        build_datasets(compose_cfg(["data=mnist"]).data, 0)
    message = str(error.value)
    assert message.startswith("data=mnist: the dataset could not be downloaded (") and "\n" not in message
    assert f"not in the Keras cache ({tmp_path / 'datasets' / 'mnist.npz'})" in message
    assert "data=npz data.path=/path/to/mnist.npz" in message
    assert not (tmp_path / "datasets" / "mnist.npz").exists()
