"""The task's head on a model: `task_head(spec)`, the output layers every builder ends with, and a user's own
(`model._target_`) can too, so one builder trains every task (docs/models.md)."""

from __future__ import annotations

from tfhydra.config.contracts import DataSpec, Head
from tfhydra.platform.keras_lib import keras


def task_head(spec: DataSpec) -> list[keras.layers.Layer]:
    """The output layers of the run's task (`spec.head`, tfhydra/task/; None: a softmax over the classes): a Dense
    of `spec.outputs` units, then a weightless float32 layer (so the output stays float32 under mixed precision)
    that is the task's activation (softmax, sigmoid, linear), or for a regression with `task.standardize` a fixed
    `outputs * std + mean`, in the targets' units. A list, so a Sequential takes it (`layers + task_head(spec)`) and a
    functional model applies it in turn (`for layer in task_head(spec): x = layer(x)`)."""
    head = spec.head or Head(spec.num_classes)
    dense = keras.layers.Dense(head.units, name="logits" if head.activation != "linear" else "outputs")
    return [dense, output_layer(spec)]


def output_layer(spec: DataSpec, name: str | None = "") -> keras.layers.Layer:
    """The head's last, weightless, float32 layer over `spec.outputs` values: the task's activation, or a
    regression's fixed `outputs * scale + offset`. A model with a Dense of its own (keras-hub's classifier) ends
    with this alone. `name`: the head's output name by default; None lets Keras choose a free one."""
    head = spec.head or Head(spec.num_classes)
    name = head.output if name == "" else name
    if head.scale is not None:
        offset = list(head.offset) if head.offset is not None else 0.0
        return keras.layers.Rescaling(list(head.scale), offset, dtype="float32", name=name)
    return keras.layers.Activation(head.activation, dtype="float32", name=name)
