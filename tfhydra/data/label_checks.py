"""What the pipeline checks of a source's training labels before anything is batched: the kind of labels a source gives
against the kind its task trains on (`check_label_kind`), and that the training split holds every class
(`check_classes`; a generated source, `data=synthetic`, whose few rows miss a class is a warning). Each answer is
one ConfigError line, never a shape error inside Keras or a run that learns nothing and says completed."""

from __future__ import annotations

import logging

import numpy as np

from tfhydra.config.errors import ConfigError
from tfhydra.data.labels import CLASSES, NUMBERS, LabelReader, label_reader, strata
from tfhydra.data.source import Source, class_labels

log = logging.getLogger("tfhydra")

# The sources whose labels the run's task reads (the others read class indices only)
EVERY_TASK = "data=csv, data=npz, data=text_csv, data=tfrecord, data=image_folder or data=synthetic"
KIND_WORDS = {"classes": "class-index", "binary": "0/1", "multi_hot": "multi-hot", "numbers": "numeric"}  # said
TAKEN_BY = {"classes": "task=classification", "binary": "task=binary", "multi_hot": "task=multilabel",
            "numbers": "task=regression"}  # fmt: skip


def check_label_kind(source: Source, task: LabelReader | None, cfg_data, asked: bool) -> None:
    """A source that did not read its labels through the task (`asked` false) holds class indices, or the kind it
    declares (`Source.label_kind`, a user's `_target_` source): a kind the task does not train on is one line
    naming the task that does, and a declared kind is read by the task (its shape and values checked), so a
    mismatch is a ConfigError rather than a shape error inside Keras."""
    if task is None or asked:
        return
    name, declared = cfg_data.get("name", cfg_data.get("_target_")), source.label_kind
    if declared is None and task.label_kind != CLASSES:
        raise ConfigError(
            "data",
            name,
            f"{EVERY_TASK} (the sources that read every task's labels, docs/tasks.md)",
            f"it reads class indices only, and the task trains on {KIND_WORDS.get(task.label_kind)} labels",
        )
    if declared is None:
        return
    if declared != task.label_kind:
        raise ConfigError(
            "data",
            name,
            TAKEN_BY.get(declared, f"a task whose label_kind is {declared}"),
            f"its labels are {KIND_WORDS.get(declared, declared)} (Source.label_kind={declared!r}), and the task "
            f"trains on {KIND_WORDS.get(task.label_kind, task.label_kind)} labels",
        )
    if source.train_labels is not None:
        where = f"data={name} (its train_labels)"
        task.read_labels(source.train_labels, where, cfg_data, source.spec.class_names, (), class_labels)


def check_classes(source: Source, name: str | None) -> None:
    """At least two classes, every one seen in training: one class builds a one-output softmax that is always
    'right' and learns nothing, and Keras reports it as a finished run; a class without a training example is
    never learnt, yet counted in every figure."""
    labels = strata(source.train_labels) if source.train_labels is not None else None
    if source.train_labels is not None and (labels is None or label_reader().label_kind == NUMBERS):
        return  # a task without classes (multi-label; numbers, whose strata are quantile bins): nothing to count
    present = np.unique(labels) if labels is not None else None
    if source.spec.num_classes < 2 or (present is not None and len(present) < 2):
        names = source.spec.class_names
        shown = [names[int(i)] for i in present if int(i) < len(names)] if present is not None else list(names)
        raise ConfigError(
            "data",
            name,
            "training labels of at least two classes",
            f"the training split holds {len(shown)} class(es): {', '.join(map(str, shown[:3]))}",
        )
    missing = sorted(set(range(source.spec.num_classes)) - {int(i) for i in present}) if present is not None else []
    if missing:  # a class no training example shows is never predicted, yet counted in every figure
        names = source.spec.class_names
        shown = [str(names[i]) if i < len(names) else str(i) for i in missing]
        rows = 0 if labels is None else len(labels)
        if name == "synthetic":  # generated labels, drawn at random: a few rows (a smoke test) miss some; said
            log.warning(
                "data=synthetic: %d of its %d classes have no training example among %d training rows "
                "(more data.train_size draws them all)",
                len(missing),
                source.spec.num_classes,
                rows,
            )
            return
        raise ConfigError(
            "data",
            name,
            "a training split holding every class: more rows of the missing ones, or data.class_names / "
            "data.num_classes naming only the classes the data holds",
            f"{len(missing)} of its {source.spec.num_classes} classes have no training example "
            f"({', '.join(shown[:5])}{', ...' if len(shown) > 5 else ''}) among {rows} training rows",
        )
