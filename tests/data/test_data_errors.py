"""Bad input files: each a one-line ConfigError naming the problem, raised while the source is built
(before any model exists). The command-line rows for a missing file and data.fraction=0 are in
test_bad_inputs.py, the table of bad inputs on the command line."""

import data_files
import numpy as np
import pytest

from tfhydra.config.errors import ConfigError
from tfhydra.data.pipeline import build_datasets
from tfhydra.runner.plan import check_config as validate


def error_of(compose_cfg, overrides, checked=False) -> str:
    cfg = compose_cfg(overrides)
    with pytest.raises(ConfigError) as error:
        validate(cfg) if checked else build_datasets(cfg.data, seed=0)
    message = str(error.value)
    assert "\n" not in message
    return message


@pytest.mark.parametrize("source", ["npz", "csv", "text_csv", "image_folder"])
def test_missing_file_or_directory(tmp_path, compose_cfg, source):
    missing = tmp_path / "nope"
    assert error_of(compose_cfg, [f"data={source}", f"data.path={missing}"], checked=True) == (
        f"data.path={missing}: no such file or directory; accepted: the path of an existing file or directory "
        "(relative to the working directory)"
    )


def test_glob_matching_no_files(tmp_path, compose_cfg):
    train = data_files.write_tfrecords(tmp_path, "train", n=8, shards=1)
    message = error_of(
        compose_cfg, ["data=tfrecord", f"data.train={train}", f"data.validation=[{train},{tmp_path}/val-*.tfrecord]"]
    )
    assert message.startswith(f"data.validation={tmp_path}/val-*.tfrecord: no file matches it; accepted: a glob")


def test_tfrecord_feature_keys_not_in_the_records(tmp_path, compose_cfg):
    train = data_files.write_tfrecords(
        tmp_path, "train", n=8, shards=2, image_key="image/encoded", label_key="image/class/label"
    )
    message = error_of(compose_cfg, ["data=tfrecord", f"data.train={train}", "data.label_key=image/class/label"])
    assert message == (
        f"data.image_key=image: no such feature in the first record of {tmp_path}/train-00000-of-"
        "00002.tfrecord; accepted: one of image/class/label, image/encoded"
    )


def test_tfrecord_feature_of_the_wrong_kind(tmp_path, compose_cfg):
    train = data_files.write_tfrecords(tmp_path, "train", n=8, shards=1, image_key="label", label_key="image")
    message = error_of(compose_cfg, ["data=tfrecord", f"data.train={train}"])
    assert message.startswith("data.image_key=image: it holds a int64_list in the first record")


@pytest.mark.parametrize("damage", ["truncated", "corrupted"])
def test_corrupt_or_truncated_tfrecord(tmp_path, compose_cfg, damage):
    train = data_files.write_tfrecords(tmp_path, "train", n=40, shards=4)
    shard = tmp_path / "train-00002-of-00004.tfrecord"
    data = bytearray(shard.read_bytes())
    if damage == "truncated":
        data = data[:-100]
    else:
        data[len(data) // 2] ^= 0xFF
    shard.write_bytes(bytes(data))
    message = error_of(compose_cfg, ["data=tfrecord", f"data.train={train}"])
    assert message.startswith(f"{shard}: corrupt or truncated TFRecord ({damage} record at ")
    assert message.endswith("accepted: complete TFRecord files (rewrite the shard, or leave it out of the pattern)")


def test_image_folder_with_fewer_than_two_classes(tmp_path, compose_cfg):
    root = data_files.write_image_folder(tmp_path / "pets", classes=("cat",), per_class=4)
    assert error_of(compose_cfg, ["data=image_folder", f"data.path={root}"]) == (
        f"{root / 'train'}: found 1 class folder(s): cat; accepted: at least 2 class sub-folders of images, "
        "e.g. train/cat/*.png and train/dog/*.png"
    )


def test_image_folder_with_unreadable_images(tmp_path, compose_cfg):
    root = data_files.write_image_folder(tmp_path / "pets", per_class=4)
    broken = sorted((root / "train" / "dog").iterdir())[1]
    broken.write_bytes(broken.read_bytes()[:40])  # a truncated PNG
    (root / "train" / "owl" / "notes.txt").write_text("not an image, and not named like one: ignored")
    assert error_of(compose_cfg, ["data=image_folder", f"data.path={root}"]) == (
        f"{broken}: cannot decode it as an image (1 of 12 files are unreadable); "
        "accepted: image files TensorFlow can decode (PNG, JPEG, GIF, BMP)"
    )


def test_npz_missing_an_expected_array(tmp_path, compose_cfg):
    path = data_files.write_npz(tmp_path / "d.npz", n_train=8, n_test=4, x_test="x_val")
    assert error_of(compose_cfg, ["data=npz", f"data.path={path}"]) == (
        f"data.x_test=x_test: no array of that name in {path}; accepted: one of x_train, y_train, x_val, y_test"
    )


def test_npz_that_is_not_an_npz(tmp_path, compose_cfg):
    path = tmp_path / "d.npz"
    path.write_bytes(b"PK\x03\x04 truncated zip")
    assert error_of(compose_cfg, ["data=npz", f"data.path={path}"]).startswith(f"{path}: cannot read it (")


@pytest.mark.parametrize(
    "labels,fragment",
    [([0, 1, 2, 5], "1 label(s) outside [0, 3), e.g. 5"), ([0, 1, -1, 2], "1 label(s) outside [0, 3), e.g. -1")],
)
def test_npz_labels_outside_the_classes(tmp_path, compose_cfg, labels, fragment):
    path = tmp_path / "d.npz"
    np.savez(
        path,
        x_train=np.zeros((4, 5, 5), np.uint8),
        y_train=np.array(labels),
        x_test=np.zeros((1, 5, 5)),
        y_test=np.array([0]),
    )
    assert error_of(compose_cfg, ["data=npz", f"data.path={path}", "data.num_classes=3"]) == (
        f"{path}[y_train]: {fragment}; accepted: integer labels in [0, 3) (data.num_classes / data.class_names set "
        "the number of classes)"
    )


def test_tfrecord_labels_outside_the_classes(tmp_path, compose_cfg):
    train = data_files.write_tfrecords(tmp_path, "train", n=12, shards=2, classes=4)
    message = error_of(compose_cfg, ["data=tfrecord", f"data.train={train}", "data.class_names=[a,b,c]"])
    assert message.startswith(f"{train} (label feature): 3 label(s) outside [0, 3), e.g. 3; accepted: integer labels")


def test_csv_label_column_missing_and_non_numeric_features(tmp_path, compose_cfg):
    path = data_files.write_csv(tmp_path / "t.csv", n=12)
    assert error_of(compose_cfg, ["data=csv", f"data.path={path}", "data.label=species"]) == (
        f"data.label=species: no such column in {path}; accepted: one of x1, x2, x3, label"
    )
    assert error_of(compose_cfg, ["data=csv", f"data.path={path}", "data.label=x3"]).startswith(
        f"{path}:2: column label holds 'setosa'"
    )


@pytest.mark.parametrize("fraction", ["0", "-0.5", "1.5"])
def test_fraction_outside_zero_one(compose_cfg, fraction):
    assert error_of(compose_cfg, [f"data.fraction={fraction}"], checked=True) == (
        f"data.fraction={fraction}: out of range; accepted: a number in (0, 1]"
    )
