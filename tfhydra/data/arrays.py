"""Sources held in memory as NumPy arrays: scikit-learn's digits, synthetic images, `.npz` files."""

from __future__ import annotations

import zipfile
import zlib
from pathlib import Path

import numpy as np
import tensorflow as tf

from tfhydra.config.errors import ConfigError
from tfhydra.data.features import feature_source
from tfhydra.data.labels import BINARY, CLASSES, MULTI_HOT, NUMBERS, label_reader
from tfhydra.data.schemas import DigitsDataConfig, NpzDataConfig, SyntheticDataConfig
from tfhydra.data.source import (
    DATA,
    Serving,
    Source,
    check_examples,
    check_finite,
    image_size,
    read_labels,
    source_from_arrays,
)
from tfhydra.data.splits import hold_out, wants_test


def image_source(
    x_train,
    y_train,
    x_val,
    y_val,
    class_names,
    size: tuple[int, int] | None = None,
    test: tuple[np.ndarray, np.ndarray] | None = None,
) -> Source:
    """Images as stored (integers, or floats already in [0, 1]), converted in the pipeline.

    Integer images are scaled to [0, 1] by 255 when every training pixel fits in 8 bits
    (8-bit images in any integer dtype), else by their dtype's maximum (e.g. 65535 for
    uint16). A grayscale (N, H, W) array gets a channel axis. Scaling and resizing run in
    the pipeline's parallel map, so the arrays stay in their compact stored dtype. `test`: (x_test, y_test) as
    stored, or None (no test split).
    """
    stored_val, stored_test = x_val, test
    x_train, x_val = (x[..., np.newaxis] if x.ndim == 3 else x for x in (x_train, x_val))
    if test is not None:
        test = (test[0][..., np.newaxis] if test[0].ndim == 3 else test[0], test[1])
    if x_train.dtype.kind in "iub":
        scale = 255.0 if x_train.size == 0 or int(x_train.max()) <= 255 else float(np.iinfo(x_train.dtype).max)
    else:
        scale = 1.0

    def to_model_input(images):
        """Images (one, or a batch) as stored -> float32 in [0, 1] at the model's size: the pipeline's map and
        the served model's first step."""
        images = tf.cast(images, tf.float32) / scale
        return tf.image.resize(images, size) if size and images.shape.rank in (3, 4) else images

    def to_unit_range(image, label):
        return to_model_input(image), label

    def prepare(raw):
        return to_model_input(raw[..., tf.newaxis] if stored_val.ndim == 3 else raw)

    # float32 examples as the model takes them (scale 1, no resize, e.g. a table of features): no per-example map,
    # whose only work would be a cast to float32 and a division by 1 on tf.data's threads (docs/performance.md, "Tasks")
    stored = [x_train, x_val, *([test[0]] if test is not None else [])]
    unchanged = scale == 1.0 and not size and all(x.dtype == np.float32 for x in stored)
    preprocess = None if unchanged else to_unit_range
    source = source_from_arrays(x_train, y_train, x_val, y_val, class_names, preprocess=preprocess, test=test)
    source.serving = Serving(
        tf.TensorSpec(stored_val.shape[1:], tf.as_dtype(stored_val.dtype)),
        prepare,
        (stored_val, np.asarray(y_val)),
        raw_test=stored_test and (stored_test[0], np.asarray(stored_test[1])),
        description=(
            f"{stored_val.dtype.name} images of shape {stored_val.shape[1:]} as stored"
            f"{f', scaled by 1/{scale:g}' if scale != 1 else ''}"
            f"{f' and resized to {list(size)}' if size else ''} in the graph"
        ),
    )
    return source


@DATA.register("digits", schema=DigitsDataConfig)
def build_digits(cfg, seed: int) -> Source:
    images, y = read_digits()
    x = (images / 16.0).astype(np.float32)  # (1797, 8, 8) in [0, 1]
    held = hold_out(y, cfg, seed)  # one split: validation and test held out of all 1,797 (tfhydra/data/splits.py)
    return image_source(
        x[held.train],
        y[held.train],
        x[held.validation],
        y[held.validation],
        [str(c) for c in range(10)],
        size=image_size(cfg.image_size),
        test=(x[held.test], y[held.test]) if len(held.test) else None,
    )


def read_digits() -> tuple[np.ndarray, np.ndarray]:
    """The 1,797 8x8 digits (images 0-16, labels) that `sklearn.datasets.load_digits` reads, from the copy of its
    file that tfhydra ships (tfhydra/data/digits.txt says where it comes from): the default run needs neither
    scikit-learn nor its import, which took 0.6 s to several seconds before the first step (docs/performance.md).
    tests/data/test_split_parity.py compares the two."""
    import gzip
    from importlib.resources import files

    with files("tfhydra.data").joinpath("digits.csv.gz").open("rb") as raw, gzip.open(raw, "rt") as file:
        table = np.loadtxt(file, delimiter=",")  # both closed: gzip leaves a file object it was given open
    return table[:, :-1].reshape(-1, 8, 8), table[:, -1].astype(int)


@DATA.register("synthetic", schema=SyntheticDataConfig)
def build_synthetic(cfg, seed: int) -> Source:
    if cfg.num_classes is None:
        raise ConfigError("data.num_classes", None, "an integer >= 2", "synthetic data need a number of classes")
    shift = cfg.get("shift") or 0  # conf/data/synthetic.yaml: 0
    if not (isinstance(shift, int) and not isinstance(shift, bool) and 0 <= shift < min(cfg.shape[:2])):
        raise ConfigError(
            "data.shift",
            shift,
            f"an integer from 0 to {min(cfg.shape[:2]) - 1} (pixels)",
            "each pattern moves by at most this many pixels along each image axis",
        )
    rng = np.random.default_rng(seed)
    kind = label_reader().label_kind  # what the run's task trains on (tfhydra/data/labels.py)
    shape, classes = tuple(cfg.shape), 2 if kind == BINARY else cfg.num_classes
    patterns = class_patterns(rng, classes, shape, shift)
    sample = synthetic_sampler(kind, rng, patterns, cfg.signal, shift)
    x_train, y_train = sample(cfg.train_size)
    x_val, y_val = sample(cfg.val_size)
    # Drawn after the others, so the training and validation examples do not depend on whether there is a test split
    test = sample(cfg.test_size) if wants_test(cfg) and cfg.get("test_size") else None
    names = tuple(str(c) for c in range(classes))
    if kind != CLASSES:  # through the task's reader: its dtype, shape and output names
        y_train, names = read_labels(y_train, "data=synthetic", cfg)
        y_val, y_test = (read_labels(y, "data=synthetic", cfg, names)[0] for y in (y_val, test[1] if test else y_val))
        test = (test[0], y_test) if test else None
    return source_from_arrays(x_train, y_train, x_val, y_val, names, test=test)


def synthetic_sampler(kind: str, rng: np.random.Generator, patterns: np.ndarray, signal: float, shift: int):
    """`sample(n) -> (x, y)` for a task's label kind. Classes (and 0/1): one class pattern per example.
    Multi-hot: each class pattern present with probability 1/2, the present ones averaged. Numbers: one target
    per class pattern, uniform in [0, 1), the image the patterns weighted by their targets (a linear regression
    a small network learns)."""

    def sample(n):
        if kind not in (MULTI_HOT, NUMBERS):  # the draws of earlier versions, seed for seed
            y = rng.integers(0, len(patterns), size=n)
            noise = rng.uniform(0.0, 1.0, size=(n, *patterns.shape[1:])).astype(np.float32)
            return (1.0 - signal) * noise + signal * shifted(patterns[y], shift, rng), y
        drawn = rng.uniform(size=(n, len(patterns)))
        y = (drawn < 0.5) if kind == MULTI_HOT else drawn
        noise = rng.uniform(0.0, 1.0, size=(n, *patterns.shape[1:])).astype(np.float32)
        mixed = np.tensordot(y.astype(np.float32) / max(1, len(patterns) // 2), patterns, axes=1)
        return (1.0 - signal) * noise + signal * np.clip(mixed, 0.0, 1.0).astype(np.float32), y.astype(np.float32)

    return sample


def class_patterns(rng: np.random.Generator, classes: int, shape: tuple, shift: int) -> np.ndarray:
    """One pattern per class: uniform pixels; with a shift, uniform blocks of PATTERN_BLOCK x PATTERN_BLOCK pixels
    instead, so that moving a pattern by a few pixels moves a shape (as a stroke moves in a photo) rather than
    turning it into other noise, which no model of a few thousand examples could learn."""
    if shift == 0:
        return rng.uniform(0.0, 1.0, size=(classes, *shape)).astype(np.float32)
    height, width = (-(-side // PATTERN_BLOCK) for side in shape[:2])
    blocks = rng.uniform(0.0, 1.0, size=(classes, height, width, *shape[2:])).astype(np.float32)
    return blocks.repeat(PATTERN_BLOCK, axis=1).repeat(PATTERN_BLOCK, axis=2)[:, : shape[0], : shape[1]]


PATTERN_BLOCK = 4  # pixels per side of a shifted pattern's blocks


def shifted(patterns: np.ndarray, shift: int, rng: np.random.Generator) -> np.ndarray:
    """Each example's class pattern moved (wrapping around) by its own random offset of -shift..shift pixels along
    height and width: where the pattern sits carries no information, as in real photos, so a model has to learn
    the pattern wherever it is, which translation augmentation rewards. shift=0 draws nothing (the data of
    earlier versions, seed for seed)."""
    if shift == 0:
        return patterns
    offsets = rng.integers(-shift, shift + 1, size=(len(patterns), 2))
    moved = np.empty_like(patterns)
    for dy, dx in np.unique(offsets, axis=0):
        rows = np.flatnonzero((offsets[:, 0] == dy) & (offsets[:, 1] == dx))
        moved[rows] = np.roll(patterns[rows], (int(dy), int(dx)), axis=(1, 2))
    return moved


@DATA.register("npz", schema=NpzDataConfig)
def build_npz(cfg, seed: int) -> Source:
    """A `.npz` in the Keras mnist.npz layout: `x_test` is the test split, validation is held out of the training
    arrays unless `x_val` names one; without `x_test`, test is held out of them too (tfhydra/data/splits.py).
    Float arrays of shape (examples, features) are a table: standardised with the training rows' statistics as
    data=csv's columns are (tfhydra/data/features.py); images and integer arrays are scaled as `image_source` says."""
    path = Path(cfg.path).expanduser()
    for split in ("val", "test"):
        if (cfg[f"x_{split}"] is None) != (cfg[f"y_{split}"] is None):
            raise ConfigError(
                f"data.x_{split}",
                cfg[f"x_{split}"],
                f"both data.x_{split} and data.y_{split}, or both null",
                f"data.y_{split} is {cfg[f'y_{split}']}",
            )
    keys = ("x_train", "y_train", "x_val", "y_val") + (("x_test", "y_test") if wants_test(cfg) else ())
    arrays = read_npz(path, {key: cfg[key] for key in keys if cfg[key] is not None})
    x_train, y_train = arrays["x_train"], arrays["y_train"]
    for key in ("x_train", "x_val", "x_test"):
        if key in arrays:
            check_real_numbers(arrays[key], f"{path}[{cfg[key]}]")
    check_examples(x_train, arrays.get("x_val"), str(path), (cfg.x_train, cfg.x_val))
    check_examples(x_train, arrays.get("x_test"), str(path), (cfg.x_train, cfg.x_test))
    for key in ("x_train", "x_val", "x_test"):
        if key in arrays:
            check_finite(arrays[key], f"{path}[{cfg[key]}]")
    if len(x_train) != len(y_train):
        raise ConfigError(
            str(path),
            None,
            "as many labels as images",
            f"{cfg.x_train} has {len(x_train)} examples but {cfg.y_train} has {len(y_train)}",
        )
    y_train, names = read_labels(y_train, f"{path}[{cfg.y_train}]", cfg)
    shipped = {
        split: (arrays[f"x_{split}"], read_labels(arrays[f"y_{split}"], f"{path}[{cfg[f'y_{split}']}]", cfg, names)[0])
        for split in ("val", "test")
        if f"x_{split}" in arrays
    }
    held = hold_out(y_train, cfg, seed, ships_validation="val" in shipped, ships_test="test" in shipped)
    validation = shipped.get("val") or (x_train[held.validation], y_train[held.validation])
    test = shipped.get("test") or ((x_train[held.test], y_train[held.test]) if len(held.test) else None)
    x_val, y_val = validation
    if x_train.ndim == 2 and x_train.dtype.kind == "f":  # a table: feature vectors, standardised on training rows
        return feature_source(x_train[held.train], y_train[held.train], x_val, y_val, names, test=test)
    return image_source(x_train[held.train], y_train[held.train], x_val, y_val, names, test=test)


# NumPy dtype kinds the pipeline turns into float32 pixels: booleans, signed and unsigned integers, and floats
# of at most 64 bits (TensorFlow has no dtype for NumPy's longdouble).
REAL_KINDS = "biuf"


def check_real_numbers(array: np.ndarray, where: str) -> None:
    """Examples must be real numbers: the pipeline's cast to float32 silently drops a complex array's imaginary
    part, and fails mid-graph on strings, dates or records (numpy.savez stores them all without complaint)."""
    if array.dtype.kind in REAL_KINDS and not (array.dtype.kind == "f" and array.dtype.itemsize > 8):
        return
    kinds = {
        "c": "complex numbers, whose imaginary part the cast to float32 would drop (save np.abs(x) or x.real "
        "as float32)",
        "f": "floats wider than TensorFlow's float64",
        "U": "strings",
        "S": "byte strings",
        "M": "dates",
        "m": "time spans",
        "V": "records (a structured dtype)",
    }
    raise ConfigError(
        where,
        None,
        "an array of integers (e.g. uint8 images) or real floats (float16, float32, float64)",
        f"its dtype is {array.dtype}: {kinds.get(array.dtype.kind, 'not numbers')}",
    )


def read_npz(path: Path, wanted: dict[str, str]) -> dict[str, np.ndarray]:
    """`wanted` maps config keys (x_train, ...) to array names; a missing name is the config key's error."""
    if path.is_dir() or (path.is_file() and not zipfile.is_zipfile(path)):  # np.load would try it as .npy or pickle
        raise ConfigError(
            str(path),
            None,
            "a NumPy .npz file (numpy.savez) of numeric arrays",
            "cannot read it (a directory, not a file)"
            if path.is_dir()
            else "cannot read it (not a .npz file: not a zip archive)",
        )
    try:
        with np.load(path, allow_pickle=False) as file:
            found = list(file.files)
            for key, name in wanted.items():
                if name not in found:
                    raise ConfigError(f"data.{key}", name, found, f"no array of that name in {path}")
            return {key: file[name] for key, name in wanted.items()}
    except (
        OSError,
        ValueError,
        EOFError,
        zipfile.BadZipFile,
        zlib.error,
    ) as error:  # not an npz, damaged, object arrays
        raise ConfigError(
            str(path), None, "a NumPy .npz file (numpy.savez) of numeric arrays", f"cannot read it ({error})"
        ) from None
