"""`tfds`: a TensorFlow Datasets dataset prepared in `data.data_dir`, through its supervised keys.

`python train.py data=tfds data.dataset=<dataset> data.split=train data.test_split=test` (validation is held
out of the training split unless `data.validation_split` names one). The dataset
must be prepared (`tfds build <dataset> --data_dir <data.data_dir>`, or once with `data.download=true`);
a dataset tfhydra has no code for is read from its prepared files (dataset_info.json says what they hold).
Images are read as their encoded bytes and decoded in the pipeline (to uint8: what a cache holds), then
scaled to [0, 1] and resized after the cache, as for the other image sources; the export takes the uint8
images as stored. Text features become token ids with a `TextVectorization` fitted on the training split
(one pass over its texts, as text_csv does). Labels are read (without decoding images) only when a split
or `data.fraction` needs them. The `tensorflow-datasets` package is the `tfds` extra.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any, cast

import numpy as np
import tensorflow as tf

from tfhydra.config.errors import ConfigError, first_line, suggestion
from tfhydra.data.schemas import TfdsDataConfig
from tfhydra.data.source import AUTOTUNE, DATA, DataSpec, Serving, Source, image_size, take_examples
from tfhydra.data.splits import hold_out, wants_test


class LazyServing(Serving):
    """A Serving whose validation examples are read on first use (evaluate), not when the data are built: its
    `raw_validation` argument is the function that reads them."""

    _raw: tuple[np.ndarray, np.ndarray] | None
    _read: Callable[[], tuple[np.ndarray, np.ndarray]]

    @property
    def raw_validation(self):
        if self._raw is None:
            self._raw = self._read()
        return self._raw

    @raw_validation.setter
    def raw_validation(self, read):
        self._read, self._raw = read, None


def tfds_builder(cfg):
    try:
        import tensorflow_datasets as tfds
    except ImportError:
        raise ConfigError(
            "data", "tfds", "the tensorflow-datasets package: pip install 'tfhydra[tfds]'", "it is not installed"
        ) from None
    where = cfg.data_dir or "the TFDS default ($TFDS_DATA_DIR, else ~/tensorflow_datasets)"
    prepare = (
        f"tfds build {cfg.dataset}"
        + (f" --data_dir {cfg.data_dir}" if cfg.data_dir else "")
        + ", or run once with data.download=true"
    )
    try:
        builder = tfds.builder(cfg.dataset, data_dir=cfg.data_dir)
    except tfds.core.registered.DatasetNotFoundError:  # no such name: no `tfds build` would help
        names = tfds.list_builders(with_community_datasets=False)
        base = str(cfg.dataset).split(":")[0].split("/")[0]
        raise ConfigError(
            "data.dataset",
            cfg.dataset,
            f"the name of a TFDS dataset (tfds.list_builders(): {len(names)} names, e.g. mnist, cifar10, imagenette)",
            f"no such TFDS dataset{suggestion(base, names)}",
        ) from None
    except Exception as error:  # noqa: BLE001  (a config or version that does not exist ...)
        raise ConfigError(
            "data.dataset",
            cfg.dataset,
            f"a TFDS dataset prepared in data.data_dir ({where}); prepare it with: {prepare}",
            f"not found ({first_line(error)[:200]})",
        ) from None
    if not builder.is_prepared():
        if not cfg.download:
            raise ConfigError(
                "data.data_dir",
                cfg.data_dir,
                f"a data directory where {cfg.dataset} is prepared; prepare it with: {prepare}",
                f"{cfg.dataset} is not prepared in {where}",
            )
        builder.download_and_prepare()
    return tfds, builder


@DATA.register("tfds", schema=TfdsDataConfig)
def build_tfds(cfg, seed: int) -> Source:
    tfds, builder = tfds_builder(cfg)
    info = builder.info
    if not info.supervised_keys or len(info.supervised_keys) != 2:
        raise ConfigError(
            "data.dataset",
            cfg.dataset,
            "a classification dataset with supervised keys (input, label)",
            f"{cfg.dataset} has none",
        )
    x_key, y_key = info.supervised_keys
    label, feature = info.features[y_key], info.features[x_key]
    if not isinstance(label, tfds.features.ClassLabel):
        raise ConfigError(
            "data.dataset",
            cfg.dataset,
            "a label feature that is a ClassLabel (classification)",
            f"its label {y_key} is a {type(label).__name__}",
        )
    names = tuple(label.names)
    splits = {s: info.splits[s].num_examples for s in info.splits}
    for key in ("split", "validation_split", "test_split"):
        if cfg.get(key) is not None and cfg[key].split("[")[0] not in splits:
            raise ConfigError(f"data.{key}", cfg[key], sorted(splits), f"no such split of {cfg.dataset}")
    image = isinstance(feature, tfds.features.Image)
    decoders = {x_key: tfds.decode.SkipDecoding()} if image else None
    read = tfds.ReadConfig(interleave_cycle_length=16, shuffle_seed=seed)

    def split_of(name):
        dataset = builder.as_dataset(split=name, decoders=decoders, read_config=read, shuffle_files=False)
        return dataset.map(lambda e: (e[x_key], e[y_key]), num_parallel_calls=AUTOTUNE)

    def labels_of(name):
        labels = builder.as_dataset(
            split=name,
            decoders={x_key: tfds.decode.SkipDecoding()} if image else None,
            read_config=read,
            shuffle_files=False,
        ).map(lambda e: e[y_key])
        return np.concatenate([b.numpy() for b in labels.batch(4096)] or [np.zeros(0, np.int64)])

    train, validation, test, sizes, train_labels = three_splits(cfg, seed, builder, split_of, labels_of)
    source = (
        image_source(cfg, feature, train, validation, names, sizes[0], sizes[1], train_labels)
        if image
        else text_source(cfg, train, validation, names, sizes[0], sizes[1], train_labels)
    )
    source.test, source.spec = test, replace(source.spec, test_size=sizes[2])
    return source


def three_splits(cfg, seed: int, builder, split_of, labels_of):
    """(train, validation, test, (their sizes), train labels or None): `data.validation_split` and
    `data.test_split` when given, and what is not held out of `data.split` (tfhydra/data/splits.py)."""

    def count(name):
        return int(builder.info.splits[name].num_examples)

    ships_test = cfg.get("test_split") is not None or not wants_test(cfg)
    ships_validation = cfg.validation_split is not None
    train, size = split_of(cfg.split), count(cfg.split)
    test, test_size = (split_of(cfg.test_split), count(cfg.test_split)) if ships_test and wants_test(cfg) else (None, 0)
    if ships_validation and ships_test:
        validation, val_size = split_of(cfg.validation_split), count(cfg.validation_split)
        return train, validation, test, (size, val_size, test_size), labels_of(cfg.split) if cfg.fraction < 1 else None
    labels = labels_of(cfg.split)
    held = hold_out(labels, cfg, seed, ships_validation=ships_validation, ships_test=ships_test)
    validation, val_size = (
        (split_of(cfg.validation_split), count(cfg.validation_split))
        if ships_validation
        else (take_examples(split_of(cfg.split), held.validation, size), len(held.validation))
    )
    if not ships_test:
        test, test_size = take_examples(split_of(cfg.split), held.test, size), len(held.test)
    return (
        take_examples(train, held.train, size),
        validation,
        test,
        (len(held.train), val_size, test_size),
        labels[held.train],
    )


def image_source(cfg, feature, train, validation, names, size, val_size, train_labels) -> Source:
    stored = tuple(feature.shape)
    resize = image_size(cfg.image_size)
    if resize is None and None in stored[:2]:
        raise ConfigError(
            "data.image_size",
            None,
            "[height, width] to resize every image to",
            f"the images of {cfg.dataset} differ in size (shape {list(stored)})",
        )
    channels = stored[2] if stored[2] is not None else 3
    shape = (*(resize or stored[:2]), channels)

    def decode(encoded, y):
        return feature.decode_example(encoded), y

    def to_model_input(images):
        images = tf.image.convert_image_dtype(images, tf.float32)
        return tf.image.resize(images, shape[:2]) if resize else images

    def prepare(x, y):
        return tf.ensure_shape(to_model_input(x), shape), y

    def read_validation():
        images, labels = zip(*[(x.numpy(), y.numpy()) for x, y in validation.map(decode).batch(1024)], strict=True)
        return np.concatenate(images), np.concatenate(labels)

    spec = DataSpec(shape, len(names), names, size, val_size)
    raw = tf.TensorSpec(stored if None not in stored else (*shape[:2], channels), feature.dtype)
    serving = LazyServing(
        raw,
        to_model_input,
        cast(Any, read_validation),  # the reader: raw_validation's setter takes it
        description=(
            f"{feature.dtype.name} images of shape {list(raw.shape)} as stored, scaled to [0, 1]"
            f"{f' and resized to {list(resize)}' if resize else ''} in the graph"
        ),
    )
    return Source(
        train,
        validation,
        spec,
        decode=decode,
        train_labels=train_labels,
        prepare=prepare,
        serving=serving if None not in stored else None,
    )


def text_source(cfg, train, validation, names, size, val_size, train_labels) -> Source:
    from tfhydra.platform.keras_lib import keras

    vectorize = keras.layers.TextVectorization(max_tokens=cfg.vocab_size, output_sequence_length=cfg.sequence_length)
    vectorize.adapt(train.map(lambda x, y: x).batch(1024))

    def prepare(x, y):
        return vectorize(x), y

    def read_validation():
        texts, labels = zip(*[(x.numpy(), y.numpy()) for x, y in validation.batch(1024)], strict=True)
        return np.concatenate(texts).astype(str), np.concatenate(labels)

    spec = DataSpec(
        (cfg.sequence_length,),
        len(names),
        names,
        size,
        val_size,
        dtype="int64",
        vocab_size=int(vectorize.vocabulary_size()),
    )
    serving = LazyServing(
        tf.TensorSpec((), tf.string),
        vectorize,
        cast(Any, read_validation),  # the reader: raw_validation's setter takes it
        (vectorize,),
        f"raw text, split into the {vectorize.vocabulary_size()}-word vocabulary fitted on the "
        "training split in the graph",
    )
    return Source(
        train, validation, spec, decode=lambda x, y: (x, y), train_labels=train_labels, prepare=prepare, serving=serving
    )  # `decode`: the texts are read from files, so data.cache=auto may keep them
