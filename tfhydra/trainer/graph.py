"""The model in TensorBoard's Graphs tab: the op graph of its forward pass, written once per run, in both loops.

Keras' own `write_graph` writes the graph of the function it trains with: under `fit` that is the
`steps_per_execution` while-loop (the layers hidden inside a loop body), and under tfhydra's custom loop, where
Keras never builds a train function, a GraphDef TensorBoard cannot read ("Malformed GraphDef"). So tfhydra turns
it off and traces `model.call(x, training=False)` once in a `tf.function` of its own: `model.call`, not
`model(x)`, so the layers (conv2d, max_pooling2d, dense ...) are the graph's top-level nodes rather than one
node named after the model. The graph goes to the run's `tensorboard/train/` (no run of its own), at step 0.
"""

from __future__ import annotations

import logging

import tensorflow as tf

from tfhydra.platform.keras_lib import keras

log = logging.getLogger("tfhydra")


def input_signature(model: keras.Model):
    """The model's inputs as TensorSpecs (the batch dimension left open), or None when it declares none (a
    subclassed model that was never called on a Keras input)."""
    try:
        declared = getattr(model, "inputs", None)  # Keras 3: a Sequential has `inputs` but no `input`
        inputs = (declared[0] if len(declared) == 1 else model.input) if declared else model.input
    except (AttributeError, ValueError):
        return None
    return tf.nest.map_structure(lambda t: tf.TensorSpec(t.shape, t.dtype, name=getattr(t, "name", None)), inputs)


def forward_graph(model: keras.Model) -> tf.Graph | None:
    """The traced op graph of one inference forward pass, or None when the model has no declared inputs."""
    signature = input_signature(model)
    if signature is None:
        return None

    @tf.function(autograph=False)
    def forward(x):
        return model.call(x, training=False)

    return forward.get_concrete_function(signature).graph


def write_model_graph(model: keras.Model, log_dir) -> bool:
    """The forward pass's graph into the event files of `log_dir`; False (and one warning) when it cannot be."""
    try:
        graph = forward_graph(model)
    except Exception as error:  # noqa: BLE001  (a model the trace refuses must not stop training: the graph is a view of it)
        log.warning(
            "TensorBoard's Graphs tab: the model's forward pass could not be traced (%s: %s)",
            type(error).__name__,
            str(error).splitlines()[0][:200] if str(error) else "",
        )
        return False
    if graph is None:
        log.info(
            "TensorBoard's Graphs tab: the model declares no inputs (subclassed, never built on a Keras "
            "Input); no graph written"
        )
        return False
    writer = tf.summary.create_file_writer(str(log_dir))
    with writer.as_default():
        tf.summary.graph(graph)
    writer.close()
    return True


class ModelGraph(keras.callbacks.Callback):
    """`write_model_graph` when training begins (a resumed run writes it again; TensorBoard shows the latest)."""

    def __init__(self, log_dir) -> None:
        super().__init__()
        self.log_dir = log_dir

    def on_train_begin(self, logs=None):
        write_model_graph(self.model, self.log_dir)
