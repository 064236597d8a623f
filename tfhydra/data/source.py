"""What every data source hands to the pipeline: a `Source` (datasets + `DataSpec`), and
the helpers builders share to make one from arrays, split it and check its labels."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import tensorflow as tf
from numpy.typing import ArrayLike

from tfhydra.config.contracts import CLASSES, DataSpec
from tfhydra.config.errors import ConfigError
from tfhydra.config.registry import Registry
from tfhydra.data.labels import label_reader

DATA = Registry(  # the sources, one module per family, imported on the first lookup
    "data",
    locations=[
        "tfhydra.data.arrays",
        "tfhydra.data.files",
        "tfhydra.data.keras_datasets",
        "tfhydra.data.tables",
        "tfhydra.data.tfrecord",
        "tfhydra.data.tfds_source",
    ],
)
AUTOTUNE = tf.data.AUTOTUNE


@dataclass
class Serving:
    """What a deployed model takes, and how it becomes what the trained model takes: the data as the source stores
    them (uint8 images at their stored size, raw CSV feature columns, text), turned into model inputs by TensorFlow
    ops and Keras preprocessing layers fitted on the training split, so the export can carry them (tfhydra/export/).

    `prepare(batch)` maps a batch of raw examples to the model's inputs exactly as the training pipeline does;
    `layers` are the fitted layers it uses (their statistics and vocabularies are saved with the model);
    `raw_validation` are the validation split's raw examples and labels, in the pipeline's order (checks, evaluate);
    `raw_test` the test split's (None: no test split).
    """

    raw: tf.TensorSpec  # one raw example: shape and dtype as stored
    prepare: Callable[[tf.Tensor], tf.Tensor]
    raw_validation: tuple[np.ndarray, np.ndarray]
    layers: tuple = ()
    description: str = ""  # what the served signature takes, for the record and the docs
    raw_test: tuple[np.ndarray, np.ndarray] | None = None


@dataclass
class Source:
    """Two unbatched datasets in a fixed order (three with a test split: tfhydra/data/splits.py), and what the
    pipeline needs to subset them cheaply.

    With `decode`, the datasets hold raw elements (file paths, serialized records, uint8
    arrays) and `build_datasets` maps `decode(element) -> (x, y)` only after it has taken
    `data.fraction` of them, so left-out examples are never decoded. `train_labels` lets it
    take that stratified fraction without reading the examples at all. `decode` yields the
    examples in their stored dtype (what a cache holds); `prepare` makes them model inputs.
    """

    train: tf.data.Dataset  # (x, y) pairs, or raw elements when `decode` is set
    validation: tf.data.Dataset
    spec: DataSpec
    decode: Callable | None = None
    train_labels: np.ndarray | None = None  # the label of each `train` element, in order
    # What the labels are (CLASSES, BINARY, MULTI_HOT, NUMBERS: tfhydra/config/contracts.py), declared by a source
    # that does not read them through the run's task (`read_labels`), e.g. a user's `_target_` source; None: class
    # indices. The pipeline refuses a kind the task does not train on and has the task read `train_labels`.
    label_kind: str | None = None
    serving: Serving | None = None  # None: the export takes the model's inputs (the pipeline's output)
    # `prepare(x, y)` runs after the cache: the float scaling and resizing, so a cache holds the stored dtype.
    prepare: Callable | None = None
    # `subset(indices)`: the training elements at those indices (into `train_labels`), for sources whose read
    # order is not fixed (parallel shard reads); None: `take_examples` by position.
    subset: Callable | None = None
    files: Sequence[str] | None = None  # the training shards, when the source reads files (sharding by file)
    # `decode_all(dataset, count)` instead of a map of `decode` (a source that must name a file it cannot decode)
    decode_all: Callable | None = None
    test: tf.data.Dataset | None = None  # elements as `validation`'s; None: no test split (spec.test_size 0)


def source_from_arrays(
    x_train, y_train, x_val, y_val, class_names, preprocess=None, vocab_size=None, test=None, label_kind=None
) -> Source:
    """Wrap in-memory arrays; `preprocess(x, y)` runs in a parallel map after the fraction and the cache (a
    cache holds the arrays' stored dtype). `test`: (x_test, y_test), or None (no test split). `label_kind`: what
    `y` holds when the caller did not read it through the task (`Source.label_kind`; None: class indices)."""
    floats = label_kind not in (None, CLASSES)  # 0/1, multi-hot rows and targets train as float32

    def to_dataset(x, y):
        y = np.asarray(y)  # class indices as int64; a task's float labels (0/1, multi-hot, targets) as float32
        integers = y.dtype.kind in "iub" and not floats
        return tf.data.Dataset.from_tensor_slices((x, y.astype(np.int64 if integers else np.float32)))

    train = to_dataset(x_train, y_train)
    example = (train.map(preprocess) if preprocess else train).element_spec[0]
    spec = DataSpec(
        tuple(int(d) for d in example.shape),
        len(class_names),
        tuple(class_names),
        len(x_train),
        len(x_val),
        dtype=example.dtype.name,
        vocab_size=vocab_size,
        test_size=len(test[0]) if test is not None else 0,
    )
    return Source(
        train,
        to_dataset(x_val, y_val),
        spec,
        train_labels=np.asarray(y_train).astype(np.float32) if floats else np.asarray(y_train),
        label_kind=label_kind,
        prepare=preprocess,
        test=to_dataset(*test) if test is not None else None,
    )


def deterministic_reads() -> bool:
    """Op determinism (`trainer.deterministic`, turned on before the data are built) asks for a fixed read
    order too; otherwise parallel reads deliver in the faster order they finish."""
    from tfhydra.platform.private_api import op_determinism_enabled  # not public API

    return op_determinism_enabled()


def image_size(value) -> tuple[int, int] | None:
    """`data.image_size`: null (keep), N (square) or [height, width]."""
    if value is None:
        return None
    return (int(value), int(value)) if isinstance(value, int) else (int(value[0]), int(value[1]))


def stratified_split(y: np.ndarray, val_fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Index arrays (train, validation), the same for the same seed, every class in both."""
    from tfhydra.data.splits import stratified_shuffle_split

    try:
        return stratified_shuffle_split(np.asarray(y), val_fraction, seed)
    except ValueError as error:
        raise ConfigError(
            "data.val_fraction",
            val_fraction,
            "a fraction leaving every class in both splits",
            f"cannot split {len(y)} examples ({error})",
        ) from None


def stratified_subset(y: np.ndarray, fraction: float, seed: int) -> np.ndarray:
    """Sorted indices of about `fraction` of each class (at least one example of every class)."""
    rng = np.random.default_rng(seed)
    classes, counts = np.unique(y, return_counts=True)
    picked = [
        rng.permutation(np.flatnonzero(y == c))[: max(1, round(fraction * n))]
        for c, n in zip(classes, counts, strict=True)
    ]
    return np.sort(np.concatenate(picked))


def take_examples(dataset: tf.data.Dataset, indices: np.ndarray, size: int) -> tf.data.Dataset:
    """The elements at `indices` of a dataset of `size` elements, in dataset order.

    Works by position on raw elements, so it skips the others without decoding them.
    """
    keep = np.zeros(size, dtype=bool)
    keep[indices] = True
    keep = tf.constant(keep)
    return dataset.enumerate().filter(lambda i, _: keep[i]).map(lambda _, element: element)


def read_labels(
    values, where: str, cfg_data, names: tuple[str, ...] | None = None, columns: Sequence[str] = ()
) -> tuple[np.ndarray, tuple[str, ...]]:
    """A label column or array as the run's task reads it (tfhydra/config/contracts.py `LabelReader`; outside a
    task, class indices): `names` fix the outputs (a shipped split read with the training split's), `columns` name
    the CSV columns of a 2-D `values`."""
    return label_reader(asking=True).read_labels(values, where, cfg_data, names, tuple(columns), class_labels)


def class_labels(
    values: ArrayLike, where: str, class_names: Sequence | None = None, num_classes: int | None = None
) -> tuple[np.ndarray, tuple[str, ...]]:
    """Integer labels in [0, number of classes) and the class names, from a label column or array.

    `values` are class indices (integers, or strings that spell integers) or class names
    (any other strings, then sorted to give the indices). `class_names` fixes the classes;
    else `num_classes` fixes their number; else the labels found decide. `where` names the
    file or array in the error when a label is not one of the classes.
    """
    if class_names and num_classes and len(class_names) != num_classes:
        raise ConfigError(
            "data.class_names", list(class_names), f"{num_classes} names (data.num_classes)", "as many names as classes"
        )
    values, num_classes = _one_label_each(np.asarray(values), where, num_classes)
    if values.dtype.kind in "US" and not _spell_integers(values):
        return _named_labels([str(v) for v in values], where, class_names)
    if values.dtype.kind in "US":
        values = values.astype(np.int64)
    if values.dtype.kind not in "iub" and not (values.dtype.kind == "f" and np.all(np.mod(values, 1) == 0)):
        raise ConfigError(where, None, "integer class indices", f"the labels are {values.dtype} values")
    labels = values.astype(np.int64)
    if class_names:
        names = tuple(str(n) for n in class_names)
    else:
        count = num_classes or (int(labels.max()) + 1 if labels.size else 0)
        names = tuple(str(i) for i in range(count))
    outside = labels[(labels < 0) | (labels >= len(names))]
    if outside.size:
        raise ConfigError(
            where,
            None,
            f"integer labels in [0, {len(names)}) (data.num_classes / data.class_names set the number of classes)",
            f"{outside.size} label(s) outside [0, {len(names)}), e.g. {outside[0]}",
        )
    return labels, names


def _one_label_each(values: np.ndarray, where: str, num_classes: int | None) -> tuple[np.ndarray, int | None]:
    """`values` as one label per example, shape (examples,): one-hot rows become their class indices (and say the
    number of classes when `num_classes` does not); any other shape is refused."""
    if values.ndim == 2 and values.shape[1] > 1:  # one-hot rows (Keras' to_categorical): their class indices
        one_hot = values.dtype.kind in "iufb" and np.all((values == 0) | (values == 1)) and np.all(values.sum(1) == 1)
        if not one_hot:
            raise ConfigError(
                where,
                None,
                "class indices of shape (examples,), or one-hot rows of shape (examples, classes)",
                f"labels of shape {values.shape} that are not one-hot rows",
            )
        num_classes = num_classes or values.shape[1]
        values = values.argmax(axis=1)
    elif values.ndim > 1 and values.size != len(values):
        raise ConfigError(
            where,
            None,
            "class indices of shape (examples,), or one-hot rows of shape (examples, classes)",
            f"labels of shape {values.shape}",
        )
    return values.reshape(-1), num_classes


def _named_labels(texts: list[str], where: str, class_names: Sequence | None) -> tuple[np.ndarray, tuple[str, ...]]:
    """Labels that are class names: indices into `class_names`, or into the sorted names found."""
    names = tuple(str(n) for n in class_names) if class_names else tuple(sorted(set(texts)))
    index = {name: i for i, name in enumerate(names)}
    unknown = sorted(set(texts) - set(index))
    if unknown:
        raise ConfigError(
            where,
            None,
            f"labels among the classes {', '.join(names)}",
            f"{len(unknown)} unknown label(s), e.g. {unknown[0]!r}",
        )
    return np.array([index[v] for v in texts], dtype=np.int64), names


def check_finite(array: np.ndarray, where: str) -> None:
    """Float examples must be finite: one NaN pixel turns a kernel into NaN while the loss can stay finite."""
    if array.dtype.kind != "f":
        return
    bad = ~np.isfinite(array)
    if bad.any():
        index = tuple(int(i) for i in np.argwhere(bad)[0])
        raise ConfigError(
            where,
            None,
            "finite numbers (no NaN or infinity)",
            f"{int(bad.sum())} non-finite value(s), the first at index {list(index)} ({array[index]})",
        )


def check_examples(x_train: np.ndarray, x_val: np.ndarray | None, where: str, names: tuple[str, str]) -> None:
    """Examples exist, and both splits hold examples of one shape."""
    if len(x_train) == 0:
        raise ConfigError(where, None, "at least one training example", f"{names[0]} holds no example")
    if x_val is not None and tuple(x_val.shape[1:]) != tuple(x_train.shape[1:]):
        raise ConfigError(
            where,
            None,
            "training and validation examples of one shape",
            f"{names[0]} examples have shape {tuple(x_train.shape[1:])}, {names[1]} examples {tuple(x_val.shape[1:])}",
        )


def _spell_integers(values: np.ndarray) -> bool:
    try:
        values.astype(np.int64)
    except ValueError:
        return False
    return True
