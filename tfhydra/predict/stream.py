"""The one element type every INPUT becomes, whatever it was read from (tfhydra/predict/inputs.py, tables.py)."""

from __future__ import annotations

from dataclasses import dataclass, field

import tensorflow as tf


@dataclass
class Inputs:
    dataset: tf.data.Dataset  # unbatched elements {name, inputs, extra}
    extra_columns: list[str] = field(default_factory=list)
    label_column: str | None = None  # an extra column the run's data call the label: scored against the classes
    image_files: list[str] = field(default_factory=list)  # to name an unusable one (`bad_images`)
    accepted: str = ""  # what the model takes, for an input TensorFlow cannot read
    skipped: list = field(default_factory=list)  # ConfigErrors naming the INPUTs left out (`--on-error skip`)


def no_extra() -> tf.Tensor:
    return tf.constant([], tf.string)
