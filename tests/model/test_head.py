"""The task's head on a model (tfhydra/model/head.py): a model whose output does not fit the run's task is one line
before training; `task_head(spec)` fits every task; `task.standardize` is applied to a user's model that does not end
in the head itself. Tiny models built here and checked directly: milliseconds each, no training. The same table runs
under Keras 3 in a process of its own (this one holds tf_keras)."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
from conftest import ROOT, TESTS, counts_cases
from hypothesis import given, settings
from hypothesis import strategies as st

from tfhydra.config.contracts import DataSpec, Head
from tfhydra.config.errors import ConfigError
from tfhydra.model.head import fit_to_task, output_of, task_head
from tfhydra.platform.keras_lib import KERAS3, keras

HEADS = {
    "classification": Head(3),
    "binary": Head(1, "sigmoid", pictures="none", signature="probabilities"),
    "multilabel": Head(3, "sigmoid", pictures="none", signature="probabilities"),
    "regression": Head(1, "linear", "predictions", pictures="scatter", signature="predictions"),
    "standardised": Head(1, "linear", "predictions", (2.0,), (10.0,), pictures="scatter", signature="predictions"),
    "counts": Head(2, "exponential", "rates", pictures="none"),  # a user's own task (tests/user_code.py)
}
OPTION = ("model._target_", "mymodels.build_tiny")


def spec_of(task: str) -> DataSpec:
    """A data spec of 4 features whose `num_classes` is what a source gives for the task (binary: 2 names, 1 output)."""
    head = HEADS[task]
    names = ("no", "yes") if task == "binary" else tuple("abc"[: head.units])
    return DataSpec((4,), len(names), names, 8, 4, head=head)


def body():
    inputs = keras.Input((4,))
    return inputs, keras.layers.Dense(8, activation="relu")(inputs)


def dense(width, activation=None):
    inputs, x = body()
    return keras.Model(inputs, keras.layers.Dense(width, activation=activation)(x))


def docs_softmax(spec):
    """The builder docs/models.md used to show: a softmax over `spec.num_classes`, whatever the task."""
    return dense(spec.num_classes, "softmax")


def softmax_layer_then_passing(spec):
    """A Softmax layer seen through Dropout and a float32 linear Activation (the cast tfhydra appends)."""
    inputs, x = body()
    x = keras.layers.Softmax()(keras.layers.Dense(1)(x))
    x = keras.layers.Activation("linear", dtype="float32")(keras.layers.Dropout(0.2)(x))
    return keras.Model(inputs, x)


def softmax_op(spec):
    """The activation as an op on a tensor (tf_keras: a TFOpLambda of tf.nn.softmax; Keras 3: an operation)."""
    inputs, x = body()
    return keras.Model(inputs, keras.activations.softmax(keras.layers.Dense(1)(x)))


def nested_sigmoid(spec):
    """A functional model whose last layer is a Sequential ending in a sigmoid."""
    inputs = keras.Input((4,))
    inner = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1, activation="sigmoid")])
    return keras.Model(inputs, inner(inputs))


def integer_outputs(spec):
    import tensorflow as tf

    inputs, x = body()
    x = keras.layers.Dense(1)(x)
    return keras.Model(inputs, keras.ops.cast(x, "int32") if KERAS3 else tf.cast(x, tf.int32))


def own_function(spec):
    """An output through a Lambda of the user's own: its activation is unknown, its width is checked."""
    inputs, x = body()
    return keras.Model(inputs, keras.layers.Lambda(lambda t: 2.0 * t)(keras.layers.Dense(spec.outputs)(x)))


class SoftmaxNet(keras.Model):
    """A subclassed model (no graph to read, never called before the check): checked by its output's width."""

    def __init__(self, width: int):
        super().__init__()
        self.hidden = keras.layers.Dense(8, activation="relu")
        self.out = keras.layers.Dense(width, activation="softmax")

    def call(self, inputs):
        return self.out(self.hidden(inputs))


def helper(spec):
    inputs, x = body()
    for layer in task_head(spec):
        x = layer(x)
    return keras.Model(inputs, x)


BUILDERS = {
    "docs_softmax": docs_softmax,
    "softmax_layer": softmax_layer_then_passing,
    "softmax_op": softmax_op,
    "nested_sigmoid": nested_sigmoid,
    "integers": integer_outputs,
    "own_function": own_function,
    "sigmoid3": lambda spec: dense(3, "sigmoid"),
    "relu": lambda spec: dense(1, "relu"),
    "logits": lambda spec: dense(spec.outputs),
    "wide5": lambda spec: dense(5),
    "subclassed3": lambda spec: SoftmaxNet(3),
    "subclassed1": lambda spec: SoftmaxNet(1),
    "helper": helper,
}
ONE = "a softmax over one output is always 1.0"
BOUNDED = "keeps every output between 0 and 1"
# (builder, task) -> the reason in the one line, or None: the model trains
CASES = {
    ("docs_softmax", "classification"): None,
    ("docs_softmax", "regression"): ONE,  # issue 55: 1 target, one softmax unit, 1.0 forever
    ("docs_softmax", "standardised"): ONE,
    ("docs_softmax", "binary"): "its output (2 wide, softmax)",  # two names, one output
    ("docs_softmax", "multilabel"): "a softmax makes the outputs sum to 1",
    ("softmax_layer", "binary"): ONE,
    ("softmax_op", "binary"): ONE,
    ("softmax_op", "regression"): ONE,
    ("nested_sigmoid", "regression"): BOUNDED,
    ("nested_sigmoid", "binary"): None,
    ("integers", "regression"): "a loss has no gradient through int32 outputs",
    ("own_function", "regression"): None,  # unknown activation, the right width
    ("own_function", "standardised"): None,
    ("sigmoid3", "classification"): "sigmoid outputs are not one distribution over the classes",
    ("sigmoid3", "multilabel"): None,
    ("relu", "regression"): None,  # a one-sided output can be meant (counts)
    ("relu", "standardised"): "which relu cuts",  # but standardised targets are below 0 half the time
    ("logits", "classification"): None,  # logits, for a loss of the user's own with from_logits
    ("logits", "regression"): None,
    ("wide5", "regression"): "the task predicts 1 value(s) per example",
    ("wide5", "counts"): "the task predicts 2 value(s) per example",
    ("subclassed3", "regression"): "its output (3 wide, activation unknown)",
    ("subclassed1", "regression"): None,  # width only: the softmax inside a subclassed model is not seen
    **{("helper", task): None for task in HEADS},
}


def outcome(builder: str, task: str) -> str | None:
    """The line fit_to_task says of the builder's model under the task's head, or None when it takes it."""
    spec = spec_of(task)
    try:
        fit_to_task(BUILDERS[builder](spec), spec, OPTION)
    except ConfigError as error:
        return str(error)
    return None


def outcomes() -> dict[str, str | None]:
    return {f"{builder}/{task}": outcome(builder, task) for builder, task in CASES}


def agrees(case: str, line: str | None) -> bool:
    expected = CASES[tuple(case.split("/"))]  # type: ignore[index]
    return line is None if expected is None else line is not None and expected in line


@pytest.mark.parametrize(("builder", "task"), list(CASES), ids=[f"{b}/{t}" for b, t in CASES])
def test_a_head_that_does_not_fit_its_task_is_one_line(builder, task):
    line = outcome(builder, task)
    assert agrees(f"{builder}/{task}", line), line
    if line is not None:
        head = HEADS[task]
        assert "\n" not in line and line.startswith("model._target_=mymodels.build_tiny: its output (")
        assert f"does not fit the task's head ({head.units} wide, {head.activation}: {head.output}" in line
        assert "`for layer in task_head(spec): x = layer(x)`" in line
        assert "`from tfhydra.model.head import task_head` (docs/models.md)" in line


def test_the_issue_builder_under_a_standardised_regression_names_model_output_and_head():
    assert outcome("docs_softmax", "standardised") == (
        "model._target_=mymodels.build_tiny: its output (1 wide, softmax) does not fit the task's head (1 wide, "
        "linear: predictions, standardised targets scaled back): a softmax over one output is always 1.0; accepted: "
        "a model ending in the task's head: `for layer in task_head(spec): x = layer(x)`, with "
        "`from tfhydra.model.head import task_head` (docs/models.md)"
    )


def test_what_a_model_outputs_is_read_through_passing_layers_nested_models_and_ops():
    spec = spec_of("regression")
    assert output_of(softmax_layer_then_passing(spec), spec).activation == "softmax"
    assert output_of(nested_sigmoid(spec), spec).activation == "sigmoid"
    assert output_of(helper(spec_of("multilabel")), spec).activation == "sigmoid"
    unbuilt = keras.Sequential([keras.layers.Dense(2, activation="tanh")])  # no Input: built by one call
    assert output_of(unbuilt, spec) == output_of(dense(2, "tanh"), spec)
    found = output_of(SoftmaxNet(3), spec)
    assert found is not None and (found.shape, found.dtype, found.activation) == ((3,), "float32", None)


def test_a_subclassed_model_called_on_an_input_is_read_by_its_width():
    """tf_keras gives it an output made by the model itself: the walk stops there, the activation unknown."""
    import user_code

    spec = spec_of("classification")
    found = output_of(user_code.build_subclassed_net(spec), spec)
    assert found is not None and (found.shape, found.activation) == ((3,), None)


def test_a_built_in_model_fits_every_task(compose_cfg):
    from tfhydra.model.build import build_model

    node = compose_cfg(["model=mlp", "model.units=[8]"]).model
    for task in HEADS:
        spec = spec_of(task)
        model = build_model(node, spec)
        assert model.output_shape == (None, spec.outputs), task


def test_build_model_names_the_users_target(compose_cfg):
    from tfhydra.model.build import build_model

    node = compose_cfg(["~model", "+model._target_=user_code.build_tiny_model"]).model
    with pytest.raises(ConfigError, match=r"^model._target_=user_code.build_tiny_model: its output \(1 wide, softmax"):
        build_model(node, spec_of("regression"))


# ---- task.standardize on a user's model ------------------------------------------------------------------------


def test_a_users_linear_model_is_scaled_back_to_the_targets_units():
    spec = spec_of("standardised")  # std 2, mean 10
    model = dense(1)
    fitted = fit_to_task(model, spec, OPTION)
    x = np.random.default_rng(0).normal(size=(5, 4)).astype("float32")
    np.testing.assert_allclose(fitted(x).numpy(), model(x).numpy() * 2.0 + 10.0, rtol=1e-6)
    assert fitted.layers[-1].name == "predictions" and fitted.layers[-1].dtype_policy.compute_dtype == "float32"
    assert fitted.name == model.name and fit_to_task(fitted, spec, OPTION) is fitted  # applied once, not twice


def test_a_model_ending_in_the_head_is_not_scaled_twice():
    spec = spec_of("standardised")
    model = helper(spec)
    assert fit_to_task(model, spec, OPTION) is model


def test_a_subclassed_model_is_wrapped_and_a_layer_named_like_the_output_is_left_alone():
    spec = spec_of("standardised")
    inner = SoftmaxNet(1)
    inner.out.activation = keras.activations.linear  # a linear subclassed model: its width is all that is read
    fitted = fit_to_task(inner, spec, OPTION)
    x = np.ones((2, 4), "float32")
    np.testing.assert_allclose(fitted(x).numpy(), inner(x).numpy() * 2.0 + 10.0, rtol=1e-6)
    inputs, x = body()
    named = keras.Model(inputs, keras.layers.Dense(1, name="predictions")(x))  # a name Keras examples use
    assert [layer.name for layer in fit_to_task(named, spec, OPTION).layers][-2] == "predictions"


def test_a_model_with_its_own_train_step_under_standardize_asks_for_the_head():
    import user_code

    spec = DataSpec((4,), 1, ("y",), 8, 4, head=HEADS["standardised"])
    inputs = keras.Input((4,))
    model = user_code.OwnStepModel(inputs, keras.layers.Dense(1)(inputs))
    with pytest.raises(ConfigError, match=r"own train_step/test_step cannot be wrapped without losing them") as error:
        fit_to_task(model, spec, OPTION)
    assert "task_head(spec)" in str(error.value) and "which standardises itself" in str(error.value)
    assert fit_to_task(model, spec_of("regression"), OPTION) is model  # not standardised: nothing to wrap


@counts_cases()
@settings(max_examples=25, deadline=None, database=None)
@given(
    activation=st.sampled_from(["softmax", "sigmoid", "linear", "exponential"]),
    units=st.integers(1, 4),
    standardised=st.booleans(),
    mixed=st.booleans(),
)
def test_the_helper_fits_every_head(activation, units, standardised, mixed):
    """Whatever the task's head, a model ending in task_head(spec) is taken as it is, answers float32 values of the
    head's width (under mixed precision too) and, standardised, in the targets' units."""
    scale = tuple(float(1 + i) for i in range(units)) if standardised and activation == "linear" else None
    offset = tuple(float(10 * i - 5) for i in range(units)) if scale else None
    head = Head(units, activation, "out", scale, offset, pictures="none")
    spec = DataSpec((4,), units, tuple(str(i) for i in range(units)), 8, 4, head=head)
    keras.mixed_precision.set_global_policy("mixed_float16" if mixed else "float32")
    try:
        model = helper(spec)
        assert fit_to_task(model, spec, OPTION) is model
        x = np.random.default_rng(units).normal(size=(3, 4)).astype("float32")
        y = model(x)
        assert y.dtype == "float32" and tuple(y.shape) == (3, units)
        if scale:
            dense_out = keras.Model(model.inputs, model.layers[-2].output)(x).numpy().astype("float32")
            np.testing.assert_allclose(y.numpy(), dense_out * scale + np.array(offset), rtol=1e-5, atol=1e-5)
    finally:
        keras.mixed_precision.set_global_policy("float32")


# ---- the same table under Keras 3 ------------------------------------------------------------------------------

KERAS3_TABLE = """
import json, sys
sys.path[:0] = [sys.argv[1], sys.argv[2]]
from tfhydra.platform.keras_lib import KERAS3
assert KERAS3
import test_head
print(json.dumps(test_head.outcomes()))
"""


@pytest.mark.slow
@pytest.mark.timeout(200)
def test_the_table_holds_under_keras3():
    result = subprocess.run(
        [sys.executable, "-c", KERAS3_TABLE, str(TESTS), str(TESTS / "model")],
        capture_output=True,
        text=True,
        timeout=180,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "TFHYDRA_KERAS": "3"},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    lines = json.loads(result.stdout.strip().splitlines()[-1])
    wrong = {case: line for case, line in lines.items() if not agrees(case, line)}
    assert not wrong and len(lines) == len(CASES), wrong
