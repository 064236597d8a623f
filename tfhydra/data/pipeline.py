"""The one tf.data pipeline every source goes through, configured by the `data:` section
of conf/tfhydra.yaml (shared by every data option):

    source -> fraction (stratified, seeded; before decoding) -> decode (parallel map)
           -> cache (memory | file | off) -> shuffle (train) -> batch (GLOBAL batch size,
           summed over replicas) -> augment (train batches) -> prefetch

Everything a source decodes is cached; augmentation comes after the cache so every
epoch sees new random transforms.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import tensorflow as tf
from omegaconf import OmegaConf

from tfhydra.rundir import check_creatable
from tfhydra.data.augment import build_augmentation
from tfhydra.data.source import AUTOTUNE, DATA, DataSpec, Serving, Source, stratified_subset, take_examples
from tfhydra.errors import ConfigError

# Pipeline keys that do not change which examples a source yields, so not part of a cache file's name.
_NOT_CACHED_KEYS = ("batch_size", "shuffle_buffer", "cache", "prefetch", "drop_remainder", "augment")


@dataclass
class Datasets:
    train: tf.data.Dataset  # batched with the global batch size; not yet prefetched (see `prefetched`)
    validation: tf.data.Dataset
    spec: DataSpec
    batch_size: int
    drop_remainder: bool = False  # training batches only: validation always covers every example
    prefetch: int | None = None  # batches prepared ahead (tf.data.AUTOTUNE = -1); None = off
    serving: Serving | None = None  # how the export takes the data as stored (tfhydra/data/source.py)
    steps_per_epoch: int = field(init=False)
    examples_per_epoch: int = field(init=False)  # training examples one epoch sees (throughput figures)

    def __post_init__(self) -> None:
        full, partial = divmod(self.spec.train_size, self.batch_size)
        self.steps_per_epoch = full + (1 if partial and not self.drop_remainder else 0)
        self.examples_per_epoch = self.spec.train_size

    def prefetched(self, dataset: tf.data.Dataset) -> tf.data.Dataset:
        """`data.prefetch`, applied by the consumer as the very last step: after `repeat()` in the custom
        loop, because a checkpointed iterator with a prefetch *before* the repeat resumes the rest of its
        epoch exactly but reshuffles the next epoch differently from an uninterrupted run."""
        return dataset if self.prefetch is None else dataset.prefetch(self.prefetch)


def check_classes(source: Source, name: str | None) -> None:
    """At least two classes, both seen in training: one class builds a one-output softmax that is always
    'right' and learns nothing, and Keras reports it as a finished run."""
    present = np.unique(source.train_labels) if source.train_labels is not None else None
    if source.spec.num_classes < 2 or (present is not None and len(present) < 2):
        names = source.spec.class_names
        shown = [names[int(i)] for i in present if int(i) < len(names)] if present is not None else list(names)
        raise ConfigError("data", name, "training labels of at least two classes",
                          f"the training split holds {len(shown)} class(es): {', '.join(map(str, shown[:3]))}")


def build_datasets(cfg_data, seed: int) -> Datasets:
    source = DATA.build(cfg_data, seed=seed)
    spec, train = source.spec, source.train
    check_classes(source, cfg_data.get("name"))
    if cfg_data.fraction < 1:
        labels = training_labels(source)
        keep = stratified_subset(labels, cfg_data.fraction, seed)
        train, spec = take_examples(train, keep, len(labels)), replace(spec, train_size=len(keep))
    if cfg_data.drop_remainder and spec.train_size < cfg_data.batch_size:
        raise ConfigError("data.batch_size", cfg_data.batch_size, f"at most {spec.train_size} (the training "
                          "examples) with data.drop_remainder=true", "no complete training batch")
    augment = build_augmentation(cfg_data.augment, spec, seed)

    train, validation = (decoded(d, source.decode) for d in (train, source.validation))
    train, validation = sized(train, spec.train_size), sized(validation, spec.val_size)
    if cfg_data.cache is not False:
        train = cached(train, cfg_data, seed, "train")
        validation = cached(validation, cfg_data, seed, "validation")
    if cfg_data.shuffle_buffer > 0:
        train = train.shuffle(cfg_data.shuffle_buffer, seed=seed, reshuffle_each_iteration=True)
    train = train.batch(cfg_data.batch_size, drop_remainder=cfg_data.drop_remainder)
    if augment is not None:
        train = train.map(lambda x, y: (augment(x, training=True), y), num_parallel_calls=AUTOTUNE)
    validation = validation.batch(cfg_data.batch_size)
    buffer = None if cfg_data.prefetch == 0 else AUTOTUNE if cfg_data.prefetch == "auto" else cfg_data.prefetch
    return Datasets(train, validation, spec, cfg_data.batch_size, cfg_data.drop_remainder, buffer, source.serving)


def limit_steps(datasets: Datasets, steps_per_epoch: int | None, validation_steps: int | None) -> Datasets:
    """`trainer.steps_per_epoch` / `trainer.validation_steps` (None = the whole split).

    The training data is repeated before it is cut, so any step count works, and cut here
    (rather than passing `steps_per_epoch` to Keras) so both loops see an ordinary finite
    dataset of that many batches per epoch; each epoch still starts a fresh shuffle.
    """
    limited = replace(datasets)
    if steps_per_epoch:
        limited.train = datasets.train.repeat().take(steps_per_epoch)
        limited.steps_per_epoch = steps_per_epoch
        limited.examples_per_epoch = steps_per_epoch * datasets.batch_size
    if validation_steps:
        limited.validation = datasets.validation.take(validation_steps)
    return limited


def training_labels(source: Source) -> np.ndarray:
    """The label of each training element, in order; read from the data when the source does not know them."""
    if source.train_labels is not None:
        return np.asarray(source.train_labels)
    labels = decoded(source.train, source.decode).map(lambda x, y: y, num_parallel_calls=AUTOTUNE)
    return np.concatenate([batch.numpy().reshape(-1) for batch in labels.batch(4096)])


def sized(dataset: tf.data.Dataset, size: int) -> tf.data.Dataset:
    """Tell tf.data how many examples a split has when it cannot know (files, `filter` for
    data.fraction): Keras needs the count to run `trainer.steps_per_execution` > 1 steps per call."""
    if int(dataset.cardinality()) != tf.data.UNKNOWN_CARDINALITY:
        return dataset
    return dataset.apply(tf.data.experimental.assert_cardinality(size))


def decoded(dataset: tf.data.Dataset, decode) -> tf.data.Dataset:
    return dataset.map(decode, num_parallel_calls=AUTOTUNE) if decode else dataset


def cached(dataset: tf.data.Dataset, cfg_data, seed: int, split: str) -> tf.data.Dataset:
    """`memory`, or files `<prefix>.<split>-<digest>.*` named after the data config and seed.

    The digest keeps a run with another source, fraction or split from reading a cache
    written for different examples; it cannot see the input files change on disk. A run
    killed while writing leaves a lockfile that TensorFlow would only trip on mid-epoch.
    """
    if cfg_data.cache == "memory":
        return dataset.cache()
    prefix = Path(cfg_data.cache).expanduser()
    check_creatable("data.cache", cfg_data.cache, prefix.parent)  # as the pre-flight does, for Python callers
    prefix.parent.mkdir(parents=True, exist_ok=True)
    keys = {k: v for k, v in OmegaConf.to_container(cfg_data, resolve=True).items() if k not in _NOT_CACHED_KEYS}
    digest = hashlib.sha256(repr(sorted(keys.items())).encode() + str(seed).encode()).hexdigest()[:12]
    filename = f"{prefix}.{split}-{digest}"
    locks = sorted(prefix.parent.glob(f"{Path(filename).name}_*.lockfile"))
    if locks:  # TensorFlow would fail mid-epoch on it
        raise ConfigError("data.cache", cfg_data.cache, "a cache prefix that no other run is writing",
                          f"{locks[0]} exists: another run is writing this cache, or one was killed while writing "
                          "it (then delete the lockfile)")
    return dataset.cache(filename)
