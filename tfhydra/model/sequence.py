"""Sequence models over token ids: a stacked LSTM/GRU and a small Transformer encoder.

Input is `(sequence_length,)` int ids in [0, spec.vocab_size). With `mask_zero` id 0 is
padding (Keras' TextVectorization convention): the embedding's mask makes recurrent
layers skip it and attention and mean pooling ignore it.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from tfhydra.config.contracts import DataSpec
from tfhydra.config.errors import ConfigError
from tfhydra.model.base import MODELS, TOKEN_KIND, require_tokens
from tfhydra.model.head import task_head
from tfhydra.model.schemas import LstmModelConfig, TransformerModelConfig
from tfhydra.platform.keras_lib import keras

RECURRENT_CELLS = {"lstm": keras.layers.LSTM, "gru": keras.layers.GRU}


def token_inputs(spec: DataSpec, model: str, embedding_dim: int, mask_zero: bool):
    """(inputs, embedded): an int Input of the data's dtype and its embedding."""
    length = require_tokens(spec, model)
    inputs = keras.Input((length,), dtype=spec.dtype, name="tokens")
    embedded = keras.layers.Embedding(spec.vocab_size, embedding_dim, mask_zero=mask_zero, name="embedding")(inputs)
    return inputs, embedded


def classify(inputs, x, spec: DataSpec, name: str) -> keras.Model:
    for layer in task_head(spec):
        x = layer(x)
    return keras.Model(inputs, x, name=name)


@MODELS.register("lstm", schema=LstmModelConfig)
def build_lstm(cfg, spec: DataSpec) -> keras.Model:
    """Embedding -> stacked LSTM/GRU layers (the last returns only its final state) -> head."""
    inputs, x = token_inputs(spec, "lstm", cfg.embedding_dim, cfg.mask_zero)
    layer_type = RECURRENT_CELLS[cfg.cell]
    for i, units in enumerate(cfg.units):
        last = i == len(cfg.units) - 1
        layer = layer_type(units, return_sequences=not last, name=f"{cfg.cell}{i + 1}")
        x = keras.layers.Bidirectional(layer, name=f"bi_{cfg.cell}{i + 1}")(x) if cfg.bidirectional else layer(x)
        if cfg.dropout > 0:
            x = keras.layers.Dropout(cfg.dropout, name=f"dropout{i + 1}")(x)
    return classify(inputs, x, spec, f"{'bi' if cfg.bidirectional else ''}{cfg.cell}")


@keras.saving.register_keras_serializable("tfhydra")
class PositionEncoding(keras.layers.Layer):
    """Adds position information to token embeddings of shape (batch, length, width).

    sinusoidal: the fixed sine/cosine encoding of Vaswani et al. 2017 (no weights);
    learned: one trained vector per position. The embedding's padding mask passes through.
    """

    def __init__(self, kind: str = "sinusoidal", **kwargs):
        super().__init__(**kwargs)
        self.kind = kind
        self.supports_masking = True

    def build(self, input_shape):
        length, width = int(input_shape[-2]), int(input_shape[-1])
        if self.kind == "learned":
            self.positions = self.add_weight("positions", shape=(length, width), initializer="random_normal")
        else:
            angles = np.arange(length)[:, None] / np.power(10000.0, (2 * (np.arange(width) // 2)) / width)
            table = np.where(np.arange(width) % 2 == 0, np.sin(angles), np.cos(angles))
            self.positions = tf.constant(table, dtype=tf.float32)
        super().build(input_shape)

    def call(self, embedded):
        return embedded + tf.cast(self.positions, embedded.dtype)

    def get_config(self):
        return {**super().get_config(), "kind": self.kind}

    def get_prunable_weights(self):
        """Nothing to prune, said so because the Model Optimization Toolkit wraps every layer of a pruned model
        and refuses a custom one that does not say which weights it may prune; the position table (fixed, or
        one vector per position) stays dense."""
        return []


@keras.saving.register_keras_serializable("tfhydra")
class MaskedMeanPooling(keras.layers.Layer):
    """The mean of (batch, length, width) over the positions the mask keeps; zeros where it keeps none.

    Keras' GlobalAveragePooling1D divides the masked sum by the count of kept positions, so an input of
    padding only (an empty text, or one of punctuation only) is 0 / 0 = NaN, and the model's probabilities
    with it. Dividing by max(count, 1) pools such a sequence to zeros, and the head then answers its
    prior (softmax of its bias): finite probabilities that sum to 1. Without a mask, the plain mean.
    """

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.supports_masking = True

    def call(self, inputs, mask=None):
        if mask is None:
            return tf.reduce_mean(inputs, axis=1)
        kept = tf.cast(mask, inputs.dtype)[..., tf.newaxis]
        count = tf.reduce_sum(kept, axis=1)
        return tf.reduce_sum(inputs * kept, axis=1) / tf.maximum(count, tf.ones_like(count))

    def compute_mask(self, inputs, mask=None):
        return None  # one vector per sequence: nothing left to mask

    def get_prunable_weights(self):
        return []  # no weights; said so for the Model Optimization Toolkit (see PositionEncoding)


@MODELS.register("transformer", schema=TransformerModelConfig, default_for=TOKEN_KIND)  # auto's pick for token ids
def build_transformer(cfg, spec: DataSpec) -> keras.Model:
    """Embedding + position encoding -> N pre-norm encoder blocks -> masked mean pool -> head."""
    if cfg.width % cfg.heads:
        raise ConfigError(
            "model.heads", cfg.heads, f"a divisor of model.width={cfg.width}", "each head gets width / heads dimensions"
        )
    inputs, x = token_inputs(spec, "transformer", cfg.width, cfg.mask_zero)
    x = PositionEncoding(cfg.positions, name="positions")(x)
    x = keras.layers.Dropout(cfg.dropout, name="embedding_dropout")(x)
    for block in range(1, cfg.blocks + 1):
        x = encoder_block(x, cfg.width, cfg.heads, cfg.mlp_dim, cfg.dropout, f"block{block}")
    x = keras.layers.LayerNormalization(epsilon=1e-6, name="final_norm")(x)
    x = MaskedMeanPooling(name="mean_pool")(x)  # averages unmasked positions only; zeros for padding only
    return classify(inputs, x, spec, "transformer")


def encoder_block(x, width: int, heads: int, mlp_dim: int, dropout: float, name: str):
    """Pre-norm block (more stable without warm-up than the original post-norm): x + MHA(LN(x)), then x + MLP(LN(x))."""
    y = keras.layers.LayerNormalization(epsilon=1e-6, name=f"{name}_norm1")(x)
    y = keras.layers.MultiHeadAttention(heads, width // heads, dropout=dropout, name=f"{name}_attention")(y, y)
    x = keras.layers.Add(name=f"{name}_add1")([x, keras.layers.Dropout(dropout, name=f"{name}_dropout1")(y)])
    y = keras.layers.LayerNormalization(epsilon=1e-6, name=f"{name}_norm2")(x)
    y = keras.layers.Dense(mlp_dim, activation="gelu", name=f"{name}_mlp1")(y)
    y = keras.layers.Dense(width, name=f"{name}_mlp2")(y)
    return keras.layers.Add(name=f"{name}_add2")([x, keras.layers.Dropout(dropout, name=f"{name}_dropout2")(y)])
