"""What the run plan checks in the `data:` section: mistakes the config alone decides. No TensorFlow.

Whether files exist is checked by the schema (tfhydra/config/schema.py RULES); what they hold is only known
once a source reads them, in the job.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from omegaconf import DictConfig, ListConfig

from tfhydra.config.errors import ConfigError
from tfhydra.config.paths import PathRule, is_readable_path
from tfhydra.config.schema import (
    Rule,
    choice,
    integer,
    is_augment_list,
    is_globs,
    is_image_size,
    is_int,
    list_of,
    number,
    optional,
)
from tfhydra.data.augment_checks import check_augment
from tfhydra.data.splits import wants_test


def check_features(cfg: DictConfig) -> None:
    """`data.features` names each column once: a column listed twice would be fed to the model twice."""
    features = cfg.data.get("features")
    if features:
        seen = set()
        for feature in features:
            if feature in seen:
                raise ConfigError(
                    "data.features", list(features), "each column at most once", f"column {feature!r} is listed twice"
                )
            seen.add(feature)
        label = cfg.data.get("label")
        if label in seen:
            raise ConfigError(
                "data.features",
                list(features),
                f"feature columns other than the label ({label})",
                "the label column is also a feature",
            )


def _is_size(value) -> bool:
    from tfhydra.data.budget import parse_size

    return isinstance(value, str) and (parse_size(value) or 0) >= 1


def check_streaming(cfg: DictConfig) -> None:
    """The keys of the streaming pipeline (docs/data.md): a budget that is a size, a service address and mode
    TensorFlow takes, what to do with a bad file, a TFDS dataset named."""
    data = cfg.data
    service = data.service
    mode = service.processing_mode
    if mode not in ("distributed_epoch", "parallel_epochs"):
        raise ConfigError(
            "data.service.processing_mode", mode, ["distributed_epoch", "parallel_epochs"], "unknown processing mode"
        )
    address = service.address
    if address is not None:
        from tfhydra.data.service import dispatcher_host_port

        dispatcher_host_port(address)
    if data.get("on_bad_file") not in (None, "fail", "skip"):  # image_folder's key (conf/data/image_folder.yaml)
        raise ConfigError("data.on_bad_file", data.get("on_bad_file"), ["fail", "skip"], "unknown choice")
    snapshot = data.snapshot
    if snapshot is not None and (not isinstance(snapshot, str) or not snapshot.strip()):
        raise ConfigError("data.snapshot", snapshot, "null, or a directory for the tf.data snapshot", "not a path")
    if data.get("name") == "tfds" and not data.get("dataset"):
        raise ConfigError(
            "data.dataset",
            data.get("dataset"),
            "the name of a TFDS dataset, e.g. data.dataset=mnist",
            "data=tfds needs the dataset to read",
        )


FEWEST_EXAMPLES = 64  # a shape of which fewer fit in memory is the key at fault, not the sizes


def check_declared_size(cfg: DictConfig) -> None:
    """A source that makes its examples in memory from the config (synthetic: sizes and shape) must fit: its arrays
    and the temporaries that make them (about 3x the float32 arrays), against the memory this process may take."""
    from tfhydra.platform.hostmemory import available_memory, human

    data = cfg.data
    sizes = (data.get("train_size"), data.get("val_size"), data.get("test_size"))
    if data.get("name") != "synthetic" or not all(is_int(n) for n in (*sizes, *data.shape)):
        return
    example = float(np.prod([int(n) for n in data.shape], dtype=np.float64))
    values = sum(sizes) * example
    needed, (available, where) = values * 4 * 3, available_memory()
    if needed <= available:
        return
    cost = f"{values:.3g} float32 values (train, validation and test sizes times the shape) need about {human(needed)}"
    if example * 4 * 3 * FEWEST_EXAMPLES > available:  # the shape itself is out of reach, whatever the sizes
        raise ConfigError(
            "data.shape",
            list(data.shape),
            f"a shape of which {FEWEST_EXAMPLES} examples fit the {human(available)} this process may take ({where})",
            f"one example is {example:.3g} values; {cost} to make",
        )
    largest = max(("train_size", "val_size", "test_size"), key=lambda k: int(data.get(k)))  # the key at fault
    raise ConfigError(
        f"data.{largest}",
        data.get(largest),
        f"sizes whose arrays fit the {human(available)} this process may take ({where})",
        f"{cost} to make",
    )


def check_split_fractions(cfg: DictConfig) -> None:
    """A one-split source holds out validation and test from all its examples: both shares must leave some to
    train on (tfhydra/data/splits.py)."""
    val, test = cfg.data.get("val_fraction"), cfg.data.get("test_fraction")
    if isinstance(val, (int, float)) and isinstance(test, (int, float)) and val + test >= 1:
        raise ConfigError(
            "data.test_fraction",
            test,
            f"below {1 - val:g} (1 - data.val_fraction={val:g})",
            "validation and test together leave no training examples",
        )


def check_folds(cfg: DictConfig) -> None:
    """k-fold (`data.folds`, `data.fold`: tfhydra/data/splits.py) needs both keys, a fold among the folds, and a
    source whose validation tfhydra holds out itself: one that ships a validation split has nothing to fold."""
    data = cfg.data
    folds, fold = data.get("folds"), data.get("fold")
    if folds is None and fold is None:
        return
    if folds is None or fold is None:
        key, value = ("data.fold", fold) if folds is None else ("data.folds", folds)
        raise ConfigError(
            key, value, "data.folds=K with data.fold=I (0 <= I < K), or -m sweep.folds=K", "set without the other"
        )
    if is_int(folds) and is_int(fold) and fold >= folds:
        raise ConfigError("data.fold", fold, f"an integer in [0, {folds - 1}] (data.folds={folds})", "no such fold")
    shipped = shipped_validation(data)
    if shipped:
        raise ConfigError(
            "data.folds",
            folds,
            "a source whose validation tfhydra holds out (digits, csv, text_csv, npz without x_val, tfrecord without "
            "data.validation, image_folder without val/, tfds without data.validation_split, a Keras dataset)",
            f"{shipped}: nothing to fold",
        )


def check_folds_sample(data, strata) -> None:
    """More folds than a class has examples outside the test split, told before TensorFlow where the pre-flight read
    every label (`strata`: the task's, of a CSV's or npz's whole label column; None: not known). The test split
    takes at least one example of every class, so only a count that cannot fit is refused here; the job's split
    refuses the others (tfhydra/data/splits.py `fold_split`)."""
    folds = data.get("folds")
    if not is_int(folds) or strata is None or not len(strata):
        return
    classes, counts = np.unique(np.asarray(strata), return_counts=True)
    ships_test = data.get("name") == "npz" and data.get("x_test") is not None
    left = counts - (1 if wants_test(data) and not ships_test else 0)
    if left.min() < folds:
        at = int(left.argmin())
        tested = " (at least one goes to the test split)" if left[at] != counts[at] else ""
        raise ConfigError(
            "data.folds",
            folds,
            f"at most {left[at]} folds" if left[at] >= 2 else "null (no k-fold)",
            f"class {classes[at]} has {counts[at]} examples{tested}: a fold would hold none of it",
        )


def shipped_validation(data) -> str | None:
    """What ships the source's own validation split, as far as its config and folders tell before TensorFlow; None
    when tfhydra holds validation out (tfhydra/data/splits.py). A user's `_target_` source cannot be told."""
    name = data.get("name")
    if data.get("_target_"):
        return f"data._target_={data.get('_target_')} builds its own splits"
    if name == "synthetic":
        return "data=synthetic draws its own validation examples (data.val_size)"
    for source, key in (("npz", "x_val"), ("tfrecord", "validation"), ("tfds", "validation_split")):
        if name == source and data.get(key) is not None:
            return f"data.{key} is the validation split"
    path = data.get("path")
    if name == "image_folder" and isinstance(path, str):
        root = Path(path).expanduser()
        if (root / "train").is_dir() and (root / "val").is_dir():
            return f"{root / 'val'} is the validation split"
    return None


CHECKS = (check_augment, check_features, check_streaming, check_split_fractions, check_declared_size, check_folds)


# The data section's ranges and choices, read by the schema's checks (tfhydra/config/schema.py).
def is_names(value) -> bool:
    """A non-empty list of distinct column names."""
    names = list(value) if isinstance(value, ListConfig) else value
    return (
        isinstance(names, list)
        and bool(names)
        and all(isinstance(n, str) for n in names)
        and len(set(names)) == len(names)
    )


RULES: dict[str, Rule] = {
    "data.batch_size": integer(1),
    "data.val_fraction": number(0, 1),
    "data.test_fraction": number(0, 1, low_open=False),
    "data.split_seed": optional(integer(0, 2**32 - 1)),  # NumPy's seed range, as trainer.seed's
    "data.folds": optional(integer(2)),  # k-fold (tfhydra/data/splits.py); check_folds pairs it with data.fold
    "data.fold": optional(integer(0)),
    "data.test_size": integer(0),
    "data.fraction": number(0, 1, high_open=False),
    "data.shuffle_buffer": integer(0),
    "data.cache": Rule(
        "auto, memory, false, or a path prefix for cache files",
        lambda v: v is False or (isinstance(v, str) and v != ""),
    ),
    # bytes as an integer (a YAML number) or a size text; check_streaming reads the size
    "data.cache_budget": Rule(
        "auto, a number of bytes, or a size such as 2GB, 500MB, 1.5GiB",
        lambda v: v == "auto" or (is_int(v) and v >= 1) or _is_size(v),
        refusal="not a size",
    ),
    "data.prefetch": Rule(
        "auto or an integer >= 0 (batches; 0 = off)", lambda v: v == "auto" or (is_int(v) and v >= 0)
    ),
    "data.augment": Rule("a list of layer names or {name: <layer>, <argument>: <value>} mappings", is_augment_list),
    "data.image_size": optional(Rule("an integer >= 1 or [height, width]", is_image_size)),
    "data.num_classes": optional(integer(2)),
    "data.class_names": optional(list_of(Rule("a name", lambda v: isinstance(v, str) or is_int(v)), min_len=2)),
    "data.train_size": integer(1),
    "data.val_size": integer(1),
    "data.shape": list_of(integer(1)),
    "data.service.timeout": number(0),
    "data.service.progress_timeout": number(0),
    "data.cache_dir": optional(
        Rule(
            "the directory of the Keras dataset cache (files in <dir>/datasets/)",
            lambda v: isinstance(v, str) and v.strip() != "",
            refusal="not a path",
        )
    ),
    "data.data_dir": optional(
        Rule(
            "the directory TFDS prepared the dataset in",
            lambda v: isinstance(v, str) and v.strip() != "",
            refusal="not a path",
        )
    ),
    "data.path": PathRule(
        "the path of an existing file or directory (relative to the working directory)",
        is_readable_path,
        refusal="no such file or directory",
    ),
    "data.train": Rule("a glob pattern of TFRecord files, or a list of them", is_globs),
    "data.validation": optional(Rule("a glob pattern of TFRecord files, or a list of them", is_globs)),
    "data.test": optional(Rule("a glob pattern of TFRecord files, or a list of them", is_globs)),
    "data.encoding": choice("png", "jpeg", "raw"),
    "data.channels": choice(0, 1, 3, 4),
    "data.raw_shape": optional(list_of(integer(1))),
    # tfrecord: the label feature's stored dtype and values per record (docs/data.md, docs/tasks.md)
    "data.label_dtype": choice("int64", "float32"),
    "data.label_length": integer(1),
    "data.raw_dtype": choice("uint8", "uint16", "int8", "int16", "int32", "int64", "float16", "float32", "float64"),
    "data.labels_csv": optional(
        PathRule(
            "the path of an existing CSV file of file,labels rows",
            is_readable_path,
            refusal="no such file or directory",
        )
    ),
    "data.color_mode": choice("grayscale", "rgb", "rgba"),
    "data.max_pixels": integer(1),
    "data.features": optional(list_of(Rule("a column name", lambda v: isinstance(v, str)))),
    # csv: one label column, or several (several targets, or one 0/1 column per label: docs/tasks.md)
    "data.label": Rule("a column name, or a list of column names", lambda v: isinstance(v, str) or is_names(v)),
    "data.delimiter": Rule("a single character", lambda v: isinstance(v, str) and len(v) == 1),
    "data.sequence_length": integer(1),
    "data.vocab_size": integer(3),
    "data.label_mode": choice("fine", "coarse"),
}
