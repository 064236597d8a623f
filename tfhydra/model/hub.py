"""model=keras_hub: a keras-hub task model from a local preset directory (keras=3; pip install "tfhydra[hub]").

On text (data=text_csv, which gives this model raw strings: the builder declares `inputs=raw_text`) the preset
becomes a keras-hub `TextClassifier` (BertTextClassifier for a BERT preset: the subclass the preset's backbone
names), on images an `ImageClassifier` (ViT, ResNet ...); its backbone weights are the preset's and its classifier
Dense is new, `spec.outputs` wide (keras-hub loads no task head when `num_classes` is given: the run's task decides
the head). The model is

    text (string) -> the preset's preprocessor (tokenizer, [CLS]/[SEP], padding) -> classifier -> output_layer
    images [0, 1] -> x 255, gray to RGB -> the preset's image converter (size, scale, offset) -> classifier -> ...

so it takes what the export serves, its preprocessing runs in the graph (on text no XLA: Keras' jit_compile="auto"
sees the string ops), and the last layer is the task's float32 activation (mixed precision keeps float32 outputs).
`model.freeze=base` freezes the backbone (freeze.py looks inside the one weighted layer, the classifier, and keeps
its Dense trainable), which recipe=finetune's head phase uses.

Nothing reaches the network: the preset is the absolute path of a directory checked to hold a preset (checks.py,
before TensorFlow), so keras-hub reads its files and never asks Kaggle or Hugging Face (a bare name such as
`bert_tiny_en_uncased` would be a download: it is taken as a directory, relative to the working directory), and
Hugging Face's client is told it is offline.
"""

from __future__ import annotations

import os
from pathlib import Path

from tfhydra.config.contracts import RAW_TEXT, DataSpec
from tfhydra.config.errors import ConfigError, library_reason
from tfhydra.model.base import IMAGES, MODELS, describe_data
from tfhydra.model.checks import HUB_INSTALL, PRESET_ACCEPTED, preset_problem
from tfhydra.model.head import output_layer
from tfhydra.model.preset_files import preset_weight_files
from tfhydra.model.schemas import KerasHubModelConfig
from tfhydra.platform.keras_lib import keras
from tfhydra.trust.hdf5 import checked_shards, weight_shapes

TEXT_OR_IMAGES = f"raw text: one string per example (data=text_csv), or {IMAGES}"
PRESET_KINDS = "text: BERT, DistilBERT, RoBERTa ...; images: ViT, ResNet, EfficientNet ..."


@MODELS.register("keras_hub", schema=KerasHubModelConfig, inputs=RAW_TEXT)
def build_keras_hub(cfg, spec: DataSpec) -> keras.Model:
    """The preset's classifier behind its own preprocessor, ending with the run's task's output layer: a
    TextClassifier on raw text, an ImageClassifier on images."""
    text = tuple(spec.input_shape) == () and spec.dtype == "string"
    if not text and (len(spec.input_shape) != 3 or not spec.dtype.startswith("float")):
        raise ConfigError("model", "keras_hub", TEXT_OR_IMAGES, f"needs raw text or images; {describe_data(spec)}")
    preset = preset_directory(cfg.preset)
    kind = "TextClassifier" if text else "ImageClassifier"
    task = classifier_of(import_keras_hub(), kind, preset, cfg, spec.outputs)
    preprocessor = task.preprocessor
    task.preprocessor = None  # preprocessing is a layer of the model below, so `model(inputs)` works everywhere
    if text:
        if preprocessor is None:
            raise ConfigError("model.preset", cfg.preset, "a preset saved with its tokenizer", "it has no preprocessor")
        if cfg.sequence_length is not None:
            preprocessor.sequence_length = int(cfg.sequence_length)
        inputs = keras.Input(shape=(), dtype="string", name="text")
        features = preprocessor(inputs)
    else:
        inputs = keras.Input(shape=tuple(spec.input_shape), name="images")
        features = preset_pixels(inputs, spec.input_shape[-1], preprocessor)
    outputs = output_layer(spec)(task(features))
    return keras.Model(inputs, outputs, name=f"{task.name}_on_{'text' if text else 'images'}")


def classifier_of(hub, kind: str, preset: Path, cfg, outputs: int):
    """keras-hub's `kind` (TextClassifier | ImageClassifier) of the preset, with a new `outputs`-wide Dense.

    Built without weights, then its backbone filled from the preset's weights file(s) once the trust boundary's
    HDF5 reader has checked them against this backbone (tfhydra/trust/hdf5.py), as keras-hub's own loader would
    (`KerasPresetLoader._load_backbone_weights`: `backbone.load_weights` of `model.weights.h5` or the sharded
    `model.weights.json`)."""
    accepted = f"a keras-hub preset with a {kind} ({PRESET_KINDS})"
    try:
        task = getattr(hub.models, kind).from_preset(
            str(preset), num_classes=outputs, activation=None, dropout=cfg.dropout, load_weights=False
        )
    except (ValueError, TypeError, KeyError) as error:  # e.g. an image preset on text: no such classifier of it
        raise ConfigError("model.preset", cfg.preset, accepted, library_reason(error)) from None
    files, loaded = preset_weight_files(preset, accepted)
    try:
        checked_shards(files, weight_shapes(task.backbone), "model.preset", loaded)
        task.backbone.load_weights(str(loaded))
    except (ValueError, OSError, KeyError) as error:
        reason = f"its weights cannot be loaded ({library_reason(error)})"
        raise ConfigError("model.preset", cfg.preset, accepted, reason) from None
    return task


def preset_pixels(images, channels: int, preprocessor):
    """tfhydra's images ([0, 1] floats at the data's size, 1 or 3 channels) as the preset's image converter takes
    them: [0, 255] RGB, then its own resizing and scaling (its `scale`/`offset`, e.g. ImageNet's mean and deviation)."""
    pixels = keras.layers.Rescaling(255.0, name="to_0_255")(images)
    if channels == 1:
        pixels = keras.layers.Concatenate(name="gray_to_rgb")([pixels, pixels, pixels])
    return preprocessor(pixels) if preprocessor is not None else pixels


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
