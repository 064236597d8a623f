"""Sources streamed from image files and decoded in the pipeline: `tfrecord` and `image_folder`.

Both check their inputs when the source is built, before any model exists, so a bad file
is reported by name in one line instead of as a TensorFlow error mid-epoch:
- tfrecord reads every record once (CRC-checked by the reader) and parses only the label
  feature: this finds corrupt or truncated shards and labels outside the classes, and gives
  the labels that `data.fraction` and the validation split need. Cost: one sequential read
  of the files (see docs/data.md for figures). Only the first record's image is decoded.
- image_folder decodes every image once in a parallel map when `data.verify` is true
  (the default), to name unreadable files; the cost is one extra decode per image.
"""
from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np
import tensorflow as tf
from google.protobuf.message import DecodeError

from tfhydra.data.source import (AUTOTUNE, DATA, DataSpec, Source, class_labels, image_size, stratified_split,
                                 take_examples)
from tfhydra.errors import ConfigError, first_line

IMAGE_EXTENSIONS = (".png", ".jpg", ".jpeg", ".gif", ".bmp")  # what tf.io.decode_image reads
CHANNELS = {"grayscale": 1, "rgb": 3, "rgba": 4}


def float_image(image: tf.Tensor, size: tuple[int, int] | None, shape: tuple[int, int, int] | None) -> tf.Tensor:
    """Integer pixels scaled to [0, 1] by their dtype's maximum (floats kept), resized when `size` is set;
    `shape` makes the static shape known (and mismatching images fail with a shape error)."""
    image = tf.image.convert_image_dtype(image, tf.float32)
    if size is not None:
        image = tf.image.resize(image, size)
    return image if shape is None else tf.ensure_shape(image, shape)


def split_or_validation(train, labels: np.ndarray, validation, val_labels, cfg, seed: int):
    """(train, validation, train labels, validation size): the given validation data, else a stratified split."""
    if validation is not None:
        return train, validation, labels, len(val_labels)
    train_idx, val_idx = (np.sort(i) for i in stratified_split(labels, cfg.val_fraction, seed))
    return (take_examples(train, train_idx, len(labels)), take_examples(train, val_idx, len(labels)),
            labels[train_idx], len(val_idx))


# --- tfrecord ---------------------------------------------------------------------------------------------


@DATA.register("tfrecord")
def build_tfrecord(cfg, seed: int) -> Source:
    """tf.train.Example records: an encoded image (or raw bytes) and an int64 class index per record."""
    if cfg.encoding == "raw" and cfg.raw_shape is None:
        raise ConfigError("data.raw_shape", None, "[height, width, channels] of the stored images",
                          "data.encoding=raw needs the image shape")
    train_files = matching_files(cfg.train, "data.train")
    first_file, first = first_record(train_files, cfg)
    labels, names = class_labels(scan_labels(train_files, cfg.label_key), f"{cfg.train} ({cfg.label_key} feature)",
                                 cfg.class_names, cfg.num_classes)
    validation = val_labels = None
    if cfg.validation is not None:
        val_files = matching_files(cfg.validation, "data.validation")
        first_record(val_files, cfg)
        val_labels, _ = class_labels(scan_labels(val_files, cfg.label_key),
                                     f"{cfg.validation} ({cfg.label_key} feature)", names)
        validation = read_records(val_files)
    train, validation, train_labels, val_size = split_or_validation(read_records(train_files), labels, validation,
                                                                    val_labels, cfg, seed)
    size = image_size(cfg.image_size)
    try:
        image, _ = example_decoder(cfg, size, None)(first)
    except (tf.errors.InvalidArgumentError, ValueError) as error:
        raise ConfigError("data.encoding", cfg.encoding, "the encoding of the stored images: png, jpeg, or raw with "
                          "data.raw_shape and data.raw_dtype", f"cannot decode the first image of {first_file} "
                          f"({first_line(error)})") from None
    shape = tuple(int(d) for d in image.shape)
    spec = DataSpec(shape, len(names), names, len(train_labels), val_size)
    return Source(train, validation, spec, decode=example_decoder(cfg, size, shape), train_labels=train_labels)


def matching_files(patterns, key: str) -> list[str]:
    """Sorted files matching every glob pattern (a string or a list); each pattern must match."""
    patterns = [patterns] if isinstance(patterns, str) else list(patterns)
    files = set()
    for pattern in patterns:
        try:
            matched = tf.io.gfile.glob(os.path.expanduser(pattern))
        except tf.errors.OpError as error:
            matched, reason = [], f" ({first_line(error)})"
        else:
            reason = ""
        if not matched:
            raise ConfigError(key, pattern, "a glob pattern (or a list of them) matching TFRecord files, e.g. "
                              "/data/train-*.tfrecord", f"no file matches it{reason}")
        files.update(matched)
    return sorted(files)


def read_records(files: list[str]) -> tf.data.Dataset:
    """Serialized records, shards read in parallel but interleaved in a fixed order, so a record's
    position (which `data.fraction` and the validation split select by) is the same in every pass."""
    return tf.data.Dataset.from_tensor_slices(files).interleave(
        tf.data.TFRecordDataset, cycle_length=min(len(files), 16), num_parallel_calls=AUTOTUNE, deterministic=True)


def first_record(files: list[str], cfg) -> tuple[str, tf.Tensor]:
    """The first record (of the first non-empty file), after checking it has the configured features."""
    for file in files:
        try:
            records = list(tf.data.TFRecordDataset(file).take(1))
        except tf.errors.DataLossError as error:
            raise _corrupt(file, error) from None
        if not records:
            continue
        try:
            features = tf.train.Example.FromString(records[0].numpy()).features.feature
        except DecodeError:
            raise ConfigError(file, None, "TFRecord files of tf.train.Example protos",
                              "its first record is not a tf.train.Example") from None
        kinds = {key: features[key].WhichOneof("kind") for key in features}
        for key, name, kind in [("data.image_key", cfg.image_key, "bytes_list"),
                                ("data.label_key", cfg.label_key, "int64_list")]:
            if name not in kinds:
                raise ConfigError(key, name, sorted(kinds), f"no such feature in the first record of {file}")
            if kinds[name] != kind:
                raise ConfigError(key, name, f"a feature holding a {kind}",
                                  f"it holds a {kinds[name]} in the first record of {file}")
        return file, records[0]
    raise ConfigError(", ".join(files), None, "TFRecord files holding at least one record", "they are all empty")


def scan_labels(files: list[str], label_key: str) -> np.ndarray:
    """Every record's label, in `read_records` order: one pass that also finds corrupt or truncated shards."""
    feature = {label_key: tf.io.FixedLenFeature([], tf.int64)}
    batches = read_records(files).batch(4096).map(lambda b: tf.io.parse_example(b, feature)[label_key],
                                                  num_parallel_calls=AUTOTUNE)
    try:
        return np.concatenate([batch.numpy() for batch in batches] or [np.zeros(0, np.int64)])
    except tf.errors.DataLossError as error:
        for file in files:  # which shard? (read alone, the damaged one fails again)
            try:
                for _ in tf.data.TFRecordDataset(file):
                    pass
            except tf.errors.DataLossError as file_error:
                raise _corrupt(file, file_error) from None
        raise _corrupt(", ".join(files), error) from None
    except tf.errors.InvalidArgumentError as error:
        raise ConfigError("data.label_key", label_key, "a feature that every record has, holding one int64 class "
                          "index", f"some records lack it or hold something else ({first_line(error)})") from None


def example_decoder(cfg, size, shape):
    """serialized tf.train.Example -> (float32 image in [0, 1], int64 label)."""
    features = {cfg.image_key: tf.io.FixedLenFeature([], tf.string), cfg.label_key: tf.io.FixedLenFeature([], tf.int64)}
    image_key, label_key, encoding, channels = cfg.image_key, cfg.label_key, cfg.encoding, cfg.channels
    raw_shape, raw_dtype = cfg.raw_shape and tuple(cfg.raw_shape), cfg.raw_dtype

    def decode(serialized):
        example = tf.io.parse_single_example(serialized, features)
        data = example[image_key]
        if encoding == "png":
            image = tf.io.decode_png(data, channels=channels)
        elif encoding == "jpeg":
            image = tf.io.decode_jpeg(data, channels=channels)
        else:
            image = tf.reshape(tf.io.decode_raw(data, raw_dtype), raw_shape)
        return float_image(image, size, shape), example[label_key]

    return decode


def _corrupt(file: str, error: Exception) -> ConfigError:
    found = re.search(r"(corrupted|truncated) record at \d+", str(error))
    return ConfigError(file, None, "complete TFRecord files (rewrite the shard, or leave it out of the pattern)",
                       f"corrupt or truncated TFRecord ({found.group(0) if found else first_line(error)})")


# --- image_folder -----------------------------------------------------------------------------------------


@DATA.register("image_folder")
def build_image_folder(cfg, seed: int) -> Source:
    """`<path>/train/<class>/*.png` (+ optional `<path>/val/<class>/...`), or `<path>/<class>/*.png`.

    A `train/` sub-folder selects the first layout; without `val/`, a stratified split of
    train by `data.val_fraction`. Class names are the sorted folder names.
    """
    root = Path(cfg.path).expanduser()
    if not root.is_dir():
        raise ConfigError("data.path", cfg.path, "a directory of class sub-folders of images", "not a directory")
    train_dir = root / "train" if (root / "train").is_dir() else root
    names = tuple(class_folders(train_dir))
    if len(names) < 2:
        raise ConfigError(str(train_dir), None, "at least 2 class sub-folders of images, e.g. train/cat/*.png and "
                          "train/dog/*.png", f"found {len(names)} class folder(s){': ' if names else ''}"
                          f"{', '.join(names)}")
    paths, labels = list_images(train_dir, names)
    validation = val_paths = val_labels = None
    if train_dir != root and (root / "val").is_dir():
        val_paths, val_labels = list_images(root / "val", names, required=False)
        validation = tf.data.Dataset.from_tensor_slices((val_paths, val_labels))
    channels, size = CHANNELS[cfg.color_mode], image_size(cfg.image_size)
    every = paths + (val_paths or [])
    sizes = readable_sizes(every, channels) if cfg.verify else None
    if size is None:
        size = one_size(sizes or readable_sizes(every[:1], channels))
    train, validation, train_labels, val_size = split_or_validation(
        tf.data.Dataset.from_tensor_slices((paths, labels)), labels, validation, val_labels, cfg, seed)

    def decode(path, label):
        image = tf.io.decode_image(tf.io.read_file(path), channels=channels, expand_animations=False)
        return float_image(image, size, (*size, channels)), label

    spec = DataSpec((*size, channels), len(names), names, len(train_labels), val_size)
    return Source(train, validation, spec, decode=decode, train_labels=train_labels)


def class_folders(folder: Path) -> list[str]:
    return sorted(d.name for d in folder.iterdir() if d.is_dir() and not d.name.startswith("."))


def list_images(folder: Path, names: tuple[str, ...], required: bool = True) -> tuple[list[str], np.ndarray]:
    """Image files under each class folder (recursively, sorted) and their labels; other files are ignored.

    `required`: every class must have images here (training); validation may lack some classes.
    """
    unknown = sorted(set(class_folders(folder)) - set(names))
    if unknown:
        raise ConfigError(str(folder / unknown[0]), None, f"the class folders of the training images "
                          f"({', '.join(names)})", "a validation class folder with no training folder")
    paths, labels = [], []
    for label, name in enumerate(names):
        files = sorted(str(p) for p in (folder / name).rglob("*") if p.suffix.lower() in IMAGE_EXTENSIONS
                       and p.is_file()) if (folder / name).is_dir() else []
        if not files and required:
            raise ConfigError(str(folder / name), None, f"image files ({', '.join(IMAGE_EXTENSIONS)})",
                              "an empty class folder")
        paths += files
        labels += [label] * len(files)
    return paths, np.array(labels, dtype=np.int64)


def readable_sizes(paths: list[str], channels: int) -> dict[str, tuple[int, int]]:
    """(height, width) of every image, decoding them all in a parallel map; an unreadable one is a ConfigError."""
    def size_of(path):
        image = tf.io.decode_image(tf.io.read_file(path), channels=channels, expand_animations=False)
        return path, tf.shape(image)[:2]

    decoded = tf.data.Dataset.from_tensor_slices(paths).map(size_of, num_parallel_calls=AUTOTUNE).ignore_errors()
    sizes = {}
    for batch_paths, batch_sizes in decoded.batch(1024).as_numpy_iterator():
        sizes.update((p.decode(), (int(h), int(w))) for p, (h, w) in zip(batch_paths, batch_sizes))
    unreadable = [p for p in paths if p not in sizes]
    if unreadable:
        raise ConfigError(unreadable[0], None, "image files TensorFlow can decode (PNG, JPEG, GIF, BMP)",
                          f"cannot decode it as an image ({len(unreadable)} of {len(paths)} files are unreadable)")
    return sizes


def one_size(sizes: dict[str, tuple[int, int]]) -> tuple[int, int]:
    """The images' common size, for `data.image_size: null` (keep the stored size)."""
    distinct = {}
    for path, size in sizes.items():
        distinct.setdefault(size, path)
    if len(distinct) > 1:
        examples = "; ".join(f"{p} is {h}x{w}" for (h, w), p in list(distinct.items())[:2])
        raise ConfigError("data.image_size", None, "[height, width] to resize every image to",
                          f"the images differ in size ({examples})")
    return next(iter(distinct))
