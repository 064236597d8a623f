"""Which built-in compression schemes the Model Optimization Toolkit can apply to which built-in model. No TensorFlow.

Measured with tensorflow-model-optimization 0.8.1 on tf_keras 2.21 (each scheme applied to the model built
from the option's config and trained one epoch on a text CSV; tests/data/test_bad_data_and_models.py):

- Quantization-aware training (quantize, prune_quantize, cluster_quantize) of the token models (lstm, with
  either cell, and transformer) fails with a TypeError traceback: the toolkit puts a fake-quant layer on the
  model's input, which holds int64 token ids, and its 8-bit scheme supports none of their layers (Embedding,
  LSTM/GRU cells, MultiHeadAttention, LayerNormalization are commented out of, or missing from, its registry).
- Pruning does not support `Bidirectional` (model.bidirectional=true); clustering does not support the
  Transformer's learned position table (model.positions=learned: a custom layer with weights would have to be
  a tfmot `ClusterableLayer`). Both were one line found only once the data were loaded.
- Everything else works: prune and cluster of lstm (lstm or gru cells), prune of the Transformer (its custom
  layers say they have no prunable weights) and cluster of it with sinusoidal positions.

`check_model_support` refuses exactly those in the run plan, before any directory exists. A model of your
own (`_target_`) is not judged here: the scheme's builder still reports what the toolkit refuses.
"""

from __future__ import annotations

from omegaconf import DictConfig

from tfhydra.config.errors import ConfigError

SCHEMES = ("none", "prune", "cluster", "quantize", "prune_quantize", "cluster_quantize")  # conf/compression/
QUANTIZATION_AWARE = ("quantize", "prune_quantize", "cluster_quantize")
QAT_TOKENS = (
    "the Model Optimization Toolkit fake-quantizes the model's int64 token-id input, and its 8-bit scheme "
    "supports no Embedding, LSTM/GRU, MultiHeadAttention or LayerNormalization layer"
)


def refusals(cfg_model: DictConfig) -> dict[str, tuple[str, str, str]]:
    """{scheme: (the model setting it fails with, why, the setting that works)} for the built-in models."""
    name = cfg_model.get("name") if "_target_" not in cfg_model else None
    refused: dict[str, tuple[str, str, str]] = {}
    if name in ("lstm", "transformer"):
        refused.update((scheme, ("", QAT_TOKENS, "")) for scheme in QUANTIZATION_AWARE)
    if name == "lstm" and cfg_model.get("bidirectional"):
        refused["prune"] = (
            " with model.bidirectional=true",
            "the Model Optimization Toolkit's pruning does not support Bidirectional layers",
            "model.bidirectional=false",
        )
    if name == "transformer" and cfg_model.get("positions") == "learned":
        refused["cluster"] = (
            " with model.positions=learned",
            "the Model Optimization Toolkit's clustering does not "
            "support a custom layer with weights, as the learned position table is",
            "model.positions=sinusoidal",
        )
    return refused


def check_model_support(cfg: DictConfig) -> None:
    """A built-in scheme the toolkit cannot apply to the chosen built-in model: one line, before anything trains."""
    scheme = cfg.compression.get("name") if "_target_" not in cfg.compression else None
    refused = refusals(cfg.model)
    if scheme in refused:
        model, (setting, why, instead) = cfg.model.get("name"), refused[scheme]
        working = [s for s in SCHEMES if s not in refused]
        accepted = (
            f"compression={', '.join(working[:-1])} or {working[-1]} with model={model}"
            f"{f' (or {instead})' if instead else ''}"
        )
        raise ConfigError("compression", scheme, accepted, f"model={model}{setting} cannot be trained with it ({why})")
