"""The task's head on a model. `task_head(spec)`: the output layers every builder ends with, a user's own
(`model._target_`) too, so one builder trains every task (docs/models.md). `fit_to_task`: what `build_model` does
with whatever a builder returned: a model whose output does not fit the head the run's task chose (`spec.head`,
tfhydra/task/) is one line before training, naming what it outputs and the head the task expects; and a regression's
`task.standardize` is applied to a model that does not end in the head itself (its outputs are scaled back to the
targets' units), never left out.

What a model outputs is read from its graph (the layer that made the output, through layers that pass values on
unchanged, into nested models) under either Keras; a model whose graph cannot be read (a subclassed one) is checked
by its output's width and dtype only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from tfhydra.config.contracts import DataSpec, Head
from tfhydra.config.errors import ConfigError
from tfhydra.platform.keras_lib import keras
from tfhydra.platform.private_api import made_by, nested_layers

# What the one line points at: the helper, with the call the docs show
HELPER = (
    "a model ending in the task's head: `for layer in task_head(spec): x = layer(x)`, "
    "with `from tfhydra.model.head import task_head` (docs/models.md)"
)
# Final activations whose range is that of a probability: under another head they cannot reach the labels
PROBABILITIES = ("softmax", "sigmoid", "hard_sigmoid")
# Layers (and tf_keras' TFOpLambda functions) that hand their input on with its range unchanged; Dropout and
# GaussianNoise are the identity outside training
PASSING = ("flatten", "reshape", "identity", "cast", "gaussian_noise")
# Keras' activations by name: another name (a function of the user's own) is an unknown activation
KNOWN = (
    "softmax", "log_softmax", "sigmoid", "hard_sigmoid", "linear", "relu", "relu6", "leaky_relu", "elu", "selu",
    "gelu", "tanh", "softplus", "softsign", "swish", "silu", "hard_silu", "hard_swish", "mish", "exponential",
)  # fmt: skip
# Layers whose output is an affine map of their input: a linear output
AFFINE = ("rescaling", "normalization")


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


@dataclass(frozen=True)
class Output:
    """What a model outputs, per example: its shape (no batch axis), dtype and final activation (None: unknown)."""

    shape: tuple
    dtype: str
    activation: str | None

    def describe(self) -> str:
        size = f"{self.shape[0]} wide" if len(self.shape) == 1 else f"of shape {self.shape} per example"
        kind = self.activation or "activation unknown"
        return f"{size}, {kind}" + ("" if self.dtype.startswith("float") else f", {self.dtype}")


def fit_to_task(model: keras.Model, spec: DataSpec, option: tuple[str, Any]) -> keras.Model:
    """`model`, checked to fit the run's task's head and, under `task.standardize`, ending in the standardisation.
    `option`: (key, value) of the model option the line names: ("model", "cnn") or ("model._target_", "pkg.build")."""
    check_output(model, spec, option)
    return with_standardization(model, spec, option)


def check_output(model: keras.Model, spec: DataSpec, option: tuple[str, Any]) -> None:
    """One ConfigError when what `model` outputs cannot train on the task's labels: integer outputs, a shape other
    than the head's units, a probability activation the head does not have (a softmax under binary, multi-label or
    regression; a sigmoid under classification or regression), or under `task.standardize` an activation other than
    linear (the model outputs standardised targets, which tfhydra scales back). Nothing is said of a model whose
    output cannot be read, nor of other activations (relu for counts, tanh ...) nor of linear outputs under a
    probability head (logits, for a loss of your own with from_logits)."""
    found = output_of(model, spec)
    if found is None:
        return
    head = spec.head or Head(spec.num_classes)
    why = misfit(found, head)
    if why:
        expected = f"{head.units} wide, {head.activation}: {head.output}"
        expected += ", standardised targets scaled back" if head.scale is not None else ""
        raise ConfigError(
            option[0],
            option[1],
            HELPER,
            f"its output ({found.describe()}) does not fit the task's head ({expected}): {why}",
        )


def misfit(found: Output, head: Head) -> str:
    """Why an output of `found` cannot train for `head`, in a few words; empty: it can."""
    if not found.dtype.startswith("float"):
        return f"a loss has no gradient through {found.dtype} outputs"
    if found.shape != (head.units,):
        return f"the task predicts {head.units} value(s) per example"
    activation = found.activation
    if activation is None or activation == head.activation:
        return ""
    if activation == "softmax" and head.units == 1:
        return "a softmax over one output is always 1.0"
    if activation == "softmax" and head.activation in PROBABILITIES:
        return "a softmax makes the outputs sum to 1, where each is a probability of its own"
    if activation in PROBABILITIES and head.activation in PROBABILITIES:
        return f"{activation} outputs are not one distribution over the classes"
    if activation in PROBABILITIES:
        return f"a {activation} keeps every output between 0 and 1"
    if head.scale is not None and activation != "linear":
        return f"under task.standardize the model outputs standardised targets (mean 0, std 1), which {activation} cuts"
    return ""


def output_of(model: keras.Model, spec: DataSpec) -> Output | None:
    """What `model` outputs, from its graph; a model without one (subclassed) is called once on a batch of one
    zero example to learn its output's width. None: it has several outputs, or it cannot be called so."""
    tensor = symbolic_output(model)
    activation = final_activation(tensor) if tensor is not None else None
    if tensor is None:
        tensor = called_output(model, spec)
        if tensor is None:
            return None
        last = model.layers[-1] if isinstance(model, keras.Sequential) and model.layers else None
        activation = activation_of(last) if last is not None else None
    dtype = getattr(tensor.dtype, "name", str(tensor.dtype))
    return Output(tuple(tensor.shape[1:]), dtype, None if activation == "pass" else activation)


def symbolic_output(model: keras.Model) -> Any | None:
    """The model's one symbolic output (a functional or built Sequential model; tf_keras: a subclassed model once
    called on a `keras.Input`), else None."""
    try:
        outputs = model.outputs
    except (AttributeError, ValueError):  # Keras 3: a subclassed model, a Sequential not built yet
        outputs = None
    if outputs is None:
        try:
            outputs = [model.output]
        except (AttributeError, ValueError):
            return None
    return outputs[0] if isinstance(outputs, (list, tuple)) and len(outputs) == 1 else None


def called_output(model: keras.Model, spec: DataSpec) -> Any | None:
    """The model's output on a batch of one zero example of the data's shape and dtype (a subclassed model builds
    its weights on its first call, as `fit` would); None when it has several outputs or refuses the call (its
    own error then comes in training, where it always came)."""
    if spec.dtype == "string":
        return None
    try:
        output = model(np.zeros((1, *spec.input_shape), spec.dtype), training=False)
    except Exception:  # noqa: BLE001  (a user's model: whatever it raises is said by Keras in training)
        return None
    return output if hasattr(output, "shape") and hasattr(output, "dtype") else None


def final_activation(tensor: Any) -> str | None:
    """The activation that made a model's symbolic output: that of the layer (Keras 3: the operation) that made it,
    seen through layers that pass values on unchanged and into nested models. None: unknown (a layer of its own)."""
    for _ in range(100):  # a bound on the walk back, never reached by a real head
        found = made_by(tensor)
        if found is None:
            return None
        layer, inputs = found
        if isinstance(layer, keras.Model):  # a nested model: its own output, unless that is this very tensor
            inner = symbolic_output(layer)  # (tf_keras: a subclassed model called on an Input)
            tensor = None if inner is tensor else inner
        else:
            activation = activation_of(layer)
            if activation != "pass":
                return activation
            tensor = inputs[0] if len(inputs) == 1 else None
        if tensor is None:
            return None
    return None


def activation_of(layer: Any) -> str | None:
    """A layer's (or Keras 3 operation's) activation by name: `softmax`, `sigmoid`, `linear`, `relu` ...; "pass"
    for a layer that hands its input on unchanged; None when it says nothing (a layer of the user's own)."""
    kind = activation_name(re.sub(r"(?<!^)(?=[A-Z])", "_", type(layer).__name__))  # Softmax, ReLU, Keras 3's Sigmoid
    if kind in AFFINE:
        return "linear"
    function = getattr(layer, "activation", None) or getattr(layer, "function", None)  # tf_keras' TFOpLambda
    name = activation_name(getattr(function, "__name__", "")) if callable(function) else kind
    if name in PASSING or kind in PASSING or kind.endswith("dropout") or (name == "linear" and kind == "activation"):
        return "pass"
    return name if name in KNOWN else None


def activation_name(name: str) -> str:
    """A function's or layer's name as Keras names the activation: `softmax_v2` (tf.nn.softmax) is softmax, the
    ReLU layer relu, Keras 3's Exp operation exponential."""
    name = name.rsplit(".", 1)[-1].lower().removesuffix("_v2")
    return {"re_lu": "relu", "exp": "exponential", "leaky_re_lu": "leaky_relu"}.get(name, name)


def with_standardization(model: keras.Model, spec: DataSpec, option: tuple[str, Any]) -> keras.Model:
    """Under `task.standardize` (the head has a scale), `model` ending in `outputs * std + mean`: as it is when it
    holds the head's own Rescaling (task_head's, every built-in model), else with it appended, so the network
    learns unit-scale values and every figure and export is in the targets' units. A model whose class brings its
    own train_step/test_step cannot be wrapped without losing them: one line asks for the head instead."""
    head = spec.head
    if head is None or head.scale is None or holds_scaling(model, head):
        return model
    if any(getattr(type(model), step) is not getattr(keras.Model, step) for step in ("train_step", "test_step")):
        raise ConfigError(
            option[0],
            option[1],
            HELPER + ", which standardises itself",
            "task.standardize=true scales the model's outputs back to the targets' units, and a model whose class "
            "has its own train_step/test_step cannot be wrapped without losing them",
        )
    taken = {layer.name for layer in model.layers}
    scaling = output_layer(spec, None if head.output in taken else head.output)
    output = symbolic_output(model)
    if output is not None and getattr(model, "inputs", None):
        return keras.Model(model.inputs, scaling(output), name=model.name)
    inputs = keras.Input(spec.input_shape, dtype=spec.dtype)  # subclassed: nested in a functional model
    return keras.Model(inputs, scaling(model(inputs)), name=model.name)


def holds_scaling(model: keras.Model, head: Head) -> bool:
    """Whether a Rescaling inside `model` is the head's own (the training split's std and mean, as task_head
    builds it): fitted statistics, which no other layer holds by chance."""
    wanted = np.array([head.scale or (), head.offset or (0.0,) * head.units], np.float64)
    for layer in (model, *nested_layers(model)):
        if type(layer).__name__ == "Rescaling":
            scale, offset = np.ravel(layer.scale), np.ravel(layer.offset if layer.offset is not None else 0.0)
            if {scale.size, offset.size} - {1, head.units}:
                continue
            held = np.array([np.broadcast_to(scale, (head.units,)), np.broadcast_to(offset, (head.units,))])
            if np.allclose(held, wanted, rtol=1e-6, atol=0.0):
                return True
    return False
