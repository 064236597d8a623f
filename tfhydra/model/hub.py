"""model=keras_hub: a keras-hub task model from a local preset directory (keras=3; pip install "tfhydra[hub]").

On text (data=text_csv, which gives this model raw strings: the builder declares `inputs=raw_text`) the preset
becomes a keras-hub `TextClassifier` (BertTextClassifier for a BERT preset; the subclass is the one the preset's
backbone names) whose backbone weights are the preset's and whose classifier Dense is new, `spec.outputs` wide
(keras-hub loads no task head when `num_classes` is given: the run's task decides the head). The model is

    text (string) -> the preset's preprocessor (tokenizer, [CLS]/[SEP], padding) -> TextClassifier -> output_layer

so it takes the strings the export serves, its preprocessing runs in the graph (no XLA: Keras' jit_compile="auto"
sees the string ops), and the last layer is the task's float32 activation (mixed precision keeps float32 outputs).
`model.freeze=base` freezes the backbone (freeze.py looks inside the one weighted layer, the TextClassifier, and
keeps its classifier Dense trainable), which recipe=finetune's head phase uses.

Nothing reaches the network: the preset is the absolute path of a directory checked to hold a preset (checks.py,
before TensorFlow), so keras-hub reads its files and never asks Kaggle or Hugging Face (a bare name such as
`bert_tiny_en_uncased` would be a download: it is taken as a directory, relative to the working directory), and
Hugging Face's client is told it is offline.
"""

from __future__ import annotations

import os
from pathlib import Path

from tfhydra.config.contracts import RAW_TEXT, DataSpec
from tfhydra.config.errors import ConfigError
from tfhydra.model.base import MODELS, output_layer, require_text
from tfhydra.model.checks import HUB_INSTALL, PRESET_ACCEPTED, preset_problem
from tfhydra.platform.keras_lib import keras


@MODELS.register("keras_hub", inputs=RAW_TEXT)
def build_keras_hub(cfg, spec: DataSpec) -> keras.Model:
    """The preset's text classifier behind its own preprocessor, ending with the run's task's output layer."""
    require_text(spec, "keras_hub")
    preset = preset_directory(cfg.preset)
    hub = import_keras_hub()
    try:
        task = hub.models.TextClassifier.from_preset(
            str(preset), num_classes=spec.outputs, activation=None, dropout=cfg.dropout
        )
    except (ValueError, TypeError, KeyError) as error:  # an image or LM-only preset: no text classifier of it
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise ConfigError(
            "model.preset", cfg.preset, "a keras-hub preset of a text backbone (BERT, DistilBERT, RoBERTa ...)", first
        ) from None
    preprocessor = task.preprocessor
    if preprocessor is None:
        raise ConfigError(
            "model.preset", cfg.preset, "a preset saved with its tokenizer (tokenizer.json)", "it has no preprocessor"
        )
    if cfg.sequence_length is not None:
        preprocessor.sequence_length = int(cfg.sequence_length)
    task.preprocessor = None  # preprocessing is a layer of the model below, so `model(strings)` works everywhere
    texts = keras.Input(shape=(), dtype="string", name="text")
    outputs = output_layer(spec)(task(preprocessor(texts)))
    return keras.Model(texts, outputs, name=f"{task.name}_on_text")


def preset_directory(value) -> Path:
    """The preset as an absolute directory path, or the pre-flight's line (a run from Python is planned too)."""
    problem = preset_problem(value)
    if problem:
        raise ConfigError("model.preset", value, PRESET_ACCEPTED, problem)
    return Path(str(value)).expanduser().absolute()


def import_keras_hub():
    """keras-hub, told that no hub is reachable (HF_HUB_OFFLINE is read when huggingface_hub is imported)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    try:
        import keras_hub
    except ImportError as error:
        raise ConfigError("model", "keras_hub", HUB_INSTALL, f"keras-hub does not import ({error})") from None
    return keras_hub
