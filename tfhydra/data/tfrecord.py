"""`tfrecord`: sharded files of tf.train.Example, streamed and decoded in the pipeline.

Checked when the source is built, before any model exists, so a bad file is named in one line instead of
failing as a TensorFlow error mid-epoch: the first record of each split (its features and the image's
encoding); each shard's record count and labels (counts set the steps per epoch, labels the classes, the
stratified split and `data.fraction`). A shard does not say how many records it holds, so the counts and
labels cost one read of every shard (CRC-checked by the reader: it also finds corrupt or truncated ones);
they are kept in the label index (tfhydra/data/index.py), so that read happens once per dataset, not once
per run. A record whose image bytes are damaged but whose CRC is intact still fails mid-epoch, in one line.

Reading: shards interleaved with parallel reads (`cycle_length` up to 16 files); `deterministic=False`, the
faster order, unless `trainer.deterministic` turned op determinism on. Records are selected (the split,
the fraction) by (shard, position in the shard), never by position in the interleaved stream, so any
interleave order selects the same records, and multi-worker file sharding keeps them.
"""

from __future__ import annotations

import os
import re

import numpy as np
import tensorflow as tf
from google.protobuf.message import DecodeError

from tfhydra.config.errors import ConfigError, first_line
from tfhydra.data.files import float_image
from tfhydra.data.index import indexed_labels
from tfhydra.data.schemas import TfrecordDataConfig
from tfhydra.data.source import AUTOTUNE, DATA, DataSpec, Source, deterministic_reads, image_size, read_labels
from tfhydra.data.splits import hold_out, wants_test

CYCLE_LENGTH = 16  # shards read at once: enough to hide one file's latency, few enough to bound open files


@DATA.register("tfrecord", schema=TfrecordDataConfig)
def build_tfrecord(cfg, seed: int) -> Source:
    """tf.train.Example records: an encoded image (or raw bytes) and a label feature per record, read by the run's
    task (a class index; `data.label_dtype`/`data.label_length`: floats, or a fixed-length row)."""
    if cfg.encoding == "raw" and cfg.raw_shape is None:
        raise ConfigError(
            "data.raw_shape",
            None,
            "[height, width, channels] of the stored images",
            "data.encoding=raw needs the image shape",
        )
    train_files = matching_files(cfg.train, "data.train")
    first_file, first = first_record(train_files, cfg)
    per_file = file_labels(train_files, cfg)
    labels, names = read_labels(np.concatenate(per_file), f"{cfg.train} ({cfg.label_key} feature)", cfg)
    counts = [len(p) for p in per_file]
    shipped = {
        key: shipped_records(cfg, key, names)
        for key in ("validation", "test")
        if cfg.get(key) is not None and (key == "validation" or wants_test(cfg))
    }
    held = hold_out(labels, cfg, seed, ships_validation="validation" in shipped, ships_test="test" in shipped)
    train_idx = held.train
    validation, val_size = shipped.get("validation") or (
        read_records(train_files, counts, held.validation, deterministic=True),
        len(held.validation),
    )
    test, test_size = shipped.get("test") or (
        (read_records(train_files, counts, held.test, deterministic=True), len(held.test))
        if len(held.test)
        else (None, 0)
    )
    subset = ShardSubset(train_files, counts, None if len(train_idx) == len(labels) else train_idx)
    size = image_size(cfg.image_size)
    decode = example_decoder(cfg, label_form(labels, cfg))
    try:
        image = float_image(decode(first)[0], size, None)
    except (tf.errors.InvalidArgumentError, ValueError) as error:
        raise ConfigError(
            "data.encoding",
            cfg.encoding,
            "the encoding of the stored images: png, jpeg, or raw with data.raw_shape and data.raw_dtype",
            f"cannot decode the first image of {first_file} ({first_line(error)})",
        ) from None
    shape = tuple(int(d) for d in image.shape)
    spec = DataSpec(shape, len(names), names, len(train_idx), val_size, test_size=test_size)
    return Source(
        subset(None),
        validation,
        spec,
        decode=decode,
        train_labels=labels[train_idx],
        prepare=lambda x, y: (float_image(x, size, shape), y),
        subset=subset,
        files=train_files,
        test=test,
    )


def shipped_records(cfg, key: str, names) -> tuple[tf.data.Dataset, int]:
    """`data.validation` or `data.test`: the records of those files (labels checked against the classes), and
    how many."""
    files = matching_files(cfg[key], f"data.{key}")
    first_record(files, cfg)
    per_file = file_labels(files, cfg)
    read_labels(np.concatenate(per_file), f"{cfg[key]} ({cfg.label_key} feature)", cfg, names)
    return read_records(files, [len(p) for p in per_file], deterministic=True), sum(len(p) for p in per_file)


def label_feature(cfg) -> tuple[tf.dtypes.DType, list[int]]:
    """The label feature as stored: `data.label_dtype` (int64 | float32) and `data.label_length` values."""
    length = int(cfg.label_length)
    return (tf.float32 if cfg.label_dtype == "float32" else tf.int64), ([] if length == 1 else [length])


def file_labels(files: list[str], cfg) -> list[np.ndarray]:
    """Each shard's labels in record order. Class indices (one int64 per record) come from the label index;
    floats and fixed-length rows are read again each run (the index holds integers only)."""
    dtype, shape = label_feature(cfg)
    if dtype == tf.int64 and not shape:
        return indexed_labels(files, cfg.label_key, lambda f: scan_file(f, cfg.label_key))
    return [scan_file(file, cfg.label_key, dtype, shape) for file in files]


def label_form(labels: np.ndarray, cfg) -> tuple[tf.dtypes.DType, tuple[int, ...]] | None:
    """What the decoder turns a record's label into so it matches the task's reading of the training labels
    (None: keep the int64 class index); a reading that changes the values' number (one-hot rows of two read as
    0/1) is refused, since the pipeline reshapes each record's label in the graph."""
    if labels.ndim == 1 and labels.dtype == np.int64:
        return None
    shape, stored = tuple(int(d) for d in labels.shape[1:]), int(cfg.label_length)
    if int(np.prod(shape)) != stored:
        raise ConfigError(
            "data.label_length",
            stored,
            f"{int(np.prod(shape))} value(s) per record, as the task reads the labels",
            f"the task reads each record's {stored} values as {shape}",
        )
    return tf.as_dtype(labels.dtype), shape


class ShardSubset:
    """The training records at given indices (into the training labels), read by shard and position."""

    def __init__(self, files: list[str], counts: list[int], base: np.ndarray | None):
        self.files, self.counts, self.base = files, counts, base

    def __call__(self, indices: np.ndarray | None) -> tf.data.Dataset:
        chosen = self.base if indices is None else (indices if self.base is None else self.base[indices])
        return read_records(self.files, self.counts, chosen)


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
            raise ConfigError(
                key,
                pattern,
                "a glob pattern (or a list of them) matching TFRecord files, e.g. /data/train-*.tfrecord",
                f"no file matches it{reason}",
            )
        files.update(matched)
    return sorted(files)


def read_records(
    files: list[str], counts: list[int], indices: np.ndarray | None = None, deterministic: bool | None = None
) -> tf.data.Dataset:
    """Serialized records of the shards, interleaved; with `indices` (into the records in file order) only those.

    The (file, first index) pairs travel together, so sharding by file under multi-worker keeps the selection.
    """
    offsets = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
    shards = tf.data.Dataset.from_tensor_slices((files, offsets))
    if indices is None:

        def read(file, offset):
            return tf.data.TFRecordDataset(file)
    else:
        keep = np.zeros(int(sum(counts)), dtype=bool)
        keep[indices] = True
        keep = tf.constant(keep)

        def read(file, offset):
            records = tf.data.TFRecordDataset(file).enumerate()
            return records.filter(lambda i, _: keep[offset + i]).map(lambda _, record: record)

    return shards.interleave(
        read,
        cycle_length=min(len(files), CYCLE_LENGTH),
        num_parallel_calls=AUTOTUNE,
        deterministic=deterministic_reads() if deterministic is None else deterministic,
    )


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
            raise ConfigError(
                file, None, "TFRecord files of tf.train.Example protos", "its first record is not a tf.train.Example"
            ) from None
        kinds = {key: features[key].WhichOneof("kind") for key in features}
        label_kind = "float_list" if label_feature(cfg)[0] == tf.float32 else "int64_list"
        for key, name, kind in [
            ("data.image_key", cfg.image_key, "bytes_list"),
            ("data.label_key", cfg.label_key, label_kind),
        ]:
            if name not in kinds:
                raise ConfigError(key, name, sorted(kinds), f"no such feature in the first record of {file}")
            if kinds[name] != kind:
                raise ConfigError(
                    key,
                    name,
                    f"a feature holding a {kind}" + " (data.label_dtype sets it)" * (key == "data.label_key"),
                    f"it holds a {kinds[name]} in the first record of {file}",
                )
        return file, records[0]
    raise ConfigError(", ".join(files), None, "TFRecord files holding at least one record", "they are all empty")


def scan_file(file: str, label_key: str, dtype=tf.int64, shape=()) -> np.ndarray:
    """Every record's label in one shard: one sequential read that also finds a corrupt or truncated shard."""
    feature = {label_key: tf.io.FixedLenFeature(list(shape), dtype)}
    batches = (
        tf.data.TFRecordDataset(file, buffer_size=4 << 20)
        .batch(4096)
        .map(lambda b: tf.io.parse_example(b, feature)[label_key], num_parallel_calls=AUTOTUNE)
    )
    try:
        return np.concatenate([batch.numpy() for batch in batches] or [np.zeros((0, *shape), dtype.as_numpy_dtype)])
    except tf.errors.DataLossError as error:
        raise _corrupt(file, error) from None
    except tf.errors.InvalidArgumentError as error:
        raise ConfigError(
            "data.label_key",
            label_key,
            f"a feature that every record has, holding {shape[0] if shape else 1} {dtype.name} value(s) "
            "(data.label_dtype, data.label_length)",
            f"some records of {file} lack it or hold something else ({first_line(error)})",
        ) from None


def example_decoder(cfg, form: tuple[tf.dtypes.DType, tuple[int, ...]] | None = None):
    """serialized tf.train.Example -> (image in its stored dtype, label): what a cache holds. The label is the
    int64 class index, or (`form`) cast and shaped as the task reads the training labels.

    The float scaling and resizing (`Source.prepare`) come after the cache, so a cache costs the stored size.
    """
    dtype, shape = label_feature(cfg)
    features = {cfg.image_key: tf.io.FixedLenFeature([], tf.string), cfg.label_key: tf.io.FixedLenFeature(shape, dtype)}
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
        label = example[label_key]
        return image, (label if form is None else tf.reshape(tf.cast(label, form[0]), form[1]))

    return decode


def _corrupt(file: str, error: Exception) -> ConfigError:
    found = re.search(r"(corrupted|truncated) record at \d+", str(error))
    return ConfigError(
        file,
        None,
        "complete TFRecord files (rewrite the shard, or leave it out of the pattern)",
        f"corrupt or truncated TFRecord ({found.group(0) if found else first_line(error)})",
    )
