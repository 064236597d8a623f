"""Data sources and the one tf.data pipeline every source goes through.

A source is a registered builder `build_x(cfg_data, seed) -> Source`: two unbatched
datasets of `(image float32 in [0,1], int label)` plus the `DataSpec` that model
builders read (no model hard-codes a shape or a class count). `build_datasets` then
applies the shared pipeline options: cache, seeded shuffle, batch (GLOBAL batch size,
i.e. summed over replicas), prefetch.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import tensorflow as tf

from tfhydra.errors import ConfigError
from tfhydra.registry import Registry

DATA = Registry("data")
AUTOTUNE = tf.data.AUTOTUNE


@dataclass(frozen=True)
class DataSpec:
    input_shape: tuple[int, ...]  # one example, without the batch axis
    num_classes: int
    class_names: tuple[str, ...]
    train_size: int
    val_size: int
    dtype: str = "float32"  # of one example: float32 images/features, int32/int64 token ids
    vocab_size: int | None = None  # token-id sources only: ids are in [0, vocab_size)

    def as_dict(self) -> dict:
        return {"input_shape": list(self.input_shape), "num_classes": self.num_classes,
                "class_names": list(self.class_names), "train_size": self.train_size,
                "val_size": self.val_size, "dtype": self.dtype, "vocab_size": self.vocab_size}


@dataclass
class Source:
    train: tf.data.Dataset  # unbatched (x, y)
    validation: tf.data.Dataset
    spec: DataSpec


@dataclass
class Datasets:
    train: tf.data.Dataset  # batched with the global batch size, prefetched
    validation: tf.data.Dataset
    spec: DataSpec
    batch_size: int
    steps_per_epoch: int = field(init=False)

    def __post_init__(self) -> None:
        self.steps_per_epoch = -(-self.spec.train_size // self.batch_size)


def build_datasets(cfg_data, seed: int) -> Datasets:
    source = DATA.build(cfg_data, seed=seed)
    train, validation = source.train, source.validation
    if cfg_data.cache:
        train, validation = train.cache(), validation.cache()
    if cfg_data.shuffle_buffer > 0:
        train = train.shuffle(cfg_data.shuffle_buffer, seed=seed, reshuffle_each_iteration=True)
    train = train.batch(cfg_data.batch_size).prefetch(AUTOTUNE)
    validation = validation.batch(cfg_data.batch_size).prefetch(AUTOTUNE)
    return Datasets(train, validation, source.spec, cfg_data.batch_size)


def source_from_arrays(x_train, y_train, x_val, y_val, class_names, preprocess=None, vocab_size=None) -> Source:
    """Wrap in-memory arrays; `preprocess(x, y)` runs in a parallel map before the cache."""
    def to_dataset(x, y):
        ds = tf.data.Dataset.from_tensor_slices((x, y.astype(np.int64)))
        return ds.map(preprocess, num_parallel_calls=AUTOTUNE) if preprocess else ds

    train = to_dataset(x_train, y_train)
    example = train.element_spec[0]
    spec = DataSpec(tuple(int(d) for d in example.shape), len(class_names), tuple(class_names), len(x_train),
                    len(x_val), dtype=example.dtype.name, vocab_size=vocab_size)
    return Source(train, to_dataset(x_val, y_val), spec)


def stratified_split(y: np.ndarray, val_fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Index arrays (train, validation), the same for the same seed, every class in both."""
    from sklearn.model_selection import train_test_split

    indices = np.arange(len(y))
    try:
        return train_test_split(indices, test_size=val_fraction, random_state=seed, stratify=y)
    except ValueError as error:
        raise ConfigError("data.val_fraction", val_fraction, "a fraction leaving every class in both splits",
                          f"cannot split {len(y)} examples ({error})") from None


@DATA.register("digits")
def build_digits(cfg, seed: int) -> Source:
    from sklearn.datasets import load_digits

    digits = load_digits()
    x = (digits.images / 16.0).astype(np.float32)[..., np.newaxis]  # (1797, 8, 8, 1) in [0, 1]
    y = digits.target
    train_idx, val_idx = stratified_split(y, cfg.val_fraction, seed)
    size = cfg.image_size

    def upscale(image, label):
        return tf.image.resize(image, (size, size), method="bilinear"), label

    return source_from_arrays(x[train_idx], y[train_idx], x[val_idx], y[val_idx],
                              [str(c) for c in digits.target_names], preprocess=upscale)


@DATA.register("synthetic")
def build_synthetic(cfg, seed: int) -> Source:
    rng = np.random.default_rng(seed)
    shape, classes = tuple(cfg.shape), cfg.num_classes
    patterns = rng.uniform(0.0, 1.0, size=(classes, *shape)).astype(np.float32)

    def sample(n):
        y = rng.integers(0, classes, size=n)
        noise = rng.uniform(0.0, 1.0, size=(n, *shape)).astype(np.float32)
        x = (1.0 - cfg.signal) * noise + cfg.signal * patterns[y]
        return x, y

    x_train, y_train = sample(cfg.train_size)
    x_val, y_val = sample(cfg.val_size)
    return source_from_arrays(x_train, y_train, x_val, y_val, [str(c) for c in range(classes)])
