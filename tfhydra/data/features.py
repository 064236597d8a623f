"""Feature vectors (rank-1 float examples: a table's rows) standardised on the training split, for every source that
carries them: `csv`, `npz` tables, a user's `_target_` source. The statistics are the training split's only (mean,
standard deviation; a constant feature becomes zeros), and they go with the model as a Keras `Normalization` layer
in the source's `Serving`, so the export, tfhydra-predict and tfhydra-evaluate's raw inputs take the features as
stored and apply exactly what training applied. Images and integer arrays keep their own scaling (arrays.py).
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from tfhydra.config.contracts import DataSpec
from tfhydra.data.source import AUTOTUNE, Serving, Source, source_from_arrays


def is_feature_vector(spec: DataSpec) -> bool:
    """Rank-1 float examples (a table's rows), without a vocabulary (token ids are integers)."""
    return len(spec.input_shape) == 1 and spec.dtype.startswith("float") and spec.vocab_size is None


def statistics(x_train: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(mean, standard deviation) of each feature over the training rows, float64; a constant feature's deviation
    is 1, so it becomes zeros."""
    rows = np.asarray(x_train, dtype=np.float64).reshape(len(x_train), -1)
    mean, std = rows.mean(axis=0), rows.std(axis=0)
    return mean, np.where(std > 0, std, 1.0)


def normalization(mean: np.ndarray, std: np.ndarray):
    """The statistics as a built Keras layer, saved with the export: (x - mean) / sqrt(variance)."""
    from tfhydra.platform.keras_lib import keras

    layer = keras.layers.Normalization(mean=mean.astype(np.float32), variance=(std**2).astype(np.float32))
    layer.build((None, len(mean)))
    return layer


def feature_source(
    x_train, y_train, x_val, y_val, names, test=None, label_kind=None, what: str = "the raw features"
) -> Source:
    """A source of feature vectors as stored (`x_*` of shape (rows, features)), standardised with the training rows'
    statistics: the arrays are standardised once, here (no per-example map), and the same statistics are the
    served model's first layer. `what`: the stored features, said in the serving description."""
    mean, std = statistics(x_train)

    def standardized(x):
        return ((np.asarray(x, dtype=np.float64) - mean) / std).astype(np.float32)

    test_set = (standardized(test[0]), test[1]) if test is not None else None
    source = source_from_arrays(
        standardized(x_train), y_train, standardized(x_val), y_val, names, test=test_set, label_kind=label_kind
    )
    layer = normalization(mean, std)
    source.serving = Serving(
        tf.TensorSpec((len(mean),), tf.float32),
        layer,
        (np.asarray(x_val, dtype=np.float32), np.asarray(y_val)),
        (layer,),
        f"{what} as float32, standardised with the training rows' mean and deviation in the graph",
        (np.asarray(test[0], dtype=np.float32), np.asarray(test[1])) if test is not None else None,
    )
    return source


def standardize_features(source: Source) -> Source:
    """A source built elsewhere (a user's `_target_`) whose examples are feature vectors: standardised in the
    pipeline's `prepare`, after the source's own, with its training split's statistics (read once, here). The
    export serves the features as the source's own preparation leaves them and standardises them in the graph.
    Any other source is returned as it is."""
    if not is_feature_vector(source.spec):
        return source
    features, labels = arrays(source, source.train)
    if not len(features):
        return source
    mean, std = statistics(features)
    layer, shift, scale = normalization(mean, std), tf.constant(mean, tf.float32), tf.constant(std, tf.float32)
    before = source.prepare

    def prepare(x, y):
        if before is not None:
            x, y = before(x, y)
        return (tf.cast(x, tf.float32) - shift) / scale, y

    if source.serving is None:
        source.serving = Serving(
            tf.TensorSpec(source.spec.input_shape, tf.float32),
            layer,
            arrays(source, source.validation),
            (layer,),
            "the source's feature vectors as float32, standardised with the training split's mean and deviation "
            "in the graph",
        )
    else:  # the source's own serving first, then the standardisation
        served, raw_prepare = source.serving, source.serving.prepare
        served.prepare = lambda raw: layer(raw_prepare(raw))
        served.layers = (*served.layers, layer)
        served.description += "; then standardised with the training split's mean and deviation in the graph"
    source.prepare = prepare
    return source


def arrays(source: Source, dataset: tf.data.Dataset) -> tuple[np.ndarray, np.ndarray]:
    """A split's examples as the source's own decoding and preparation leave them, and its labels, as arrays."""
    if source.decode:
        dataset = dataset.map(source.decode, num_parallel_calls=AUTOTUNE)
    if source.prepare is not None:
        dataset = dataset.map(source.prepare, num_parallel_calls=AUTOTUNE)
    batches = [(x.numpy(), y.numpy()) for x, y in dataset.batch(4096)]
    if not batches:
        return np.zeros((0, *source.spec.input_shape), np.float32), np.zeros((0,))
    return np.concatenate([x for x, _ in batches]), np.concatenate([y for _, y in batches])
