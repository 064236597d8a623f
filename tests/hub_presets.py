"""A tiny keras-hub preset, randomly initialised and saved with keras-hub's own API, and the reading back of what a
run kept of it (tests/model/test_keras_hub.py). Run in a Keras 3 process of its own (`python hub_presets.py ...`
with TF_USE_LEGACY_KERAS=0): the test process holds tf_keras.

    python hub_presets.py write PRESET_DIR          a 2-layer BERT (hidden 16), its WordPiece vocabulary file,
                                                    tokenizer, preprocessor and a TextClassifier: save_to_preset
    python hub_presets.py write-image PRESET_DIR    a 1-layer ViT on 16x16 RGB images, its image converter and
                                                    preprocessor and a ViTImageClassifier: save_to_preset
    python hub_presets.py backbone PRESET_DIR WEIGHTS...  one JSON line per WEIGHTS file: how far the backbone in
                                                    it (a run's checkpoints/*.weights.h5) is from the preset's,
                                                    built as model=keras_hub builds it with every connection
                                                    refused (one Keras 3 process for all of them)
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from data_files import WORDS

from tfhydra.config.keras_choice import choose_keras

choose_keras(3)  # before TensorFlow: keras-hub is Keras 3's, and so is the seam's Keras in this process
os.environ.setdefault("HF_HUB_OFFLINE", "1")

SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
FILLER = ["the", "film", "was", "a", "plot", "and", "it", "!"]  # data_files.write_text_csv's words
SEQUENCE_LENGTH = 16
# The presets' random initial weights, the same in every session: a test that asserts the loss falls in four
# epochs asserts it of one known start (stop 50's clean clone drew one whose loss stayed at ln 2 for four epochs).
PRESET_SEED = 1


def write_preset(directory: Path) -> None:
    import keras
    import keras_hub

    keras.utils.set_random_seed(PRESET_SEED)
    vocabulary = directory.parent / f"{directory.name}_vocab.txt"
    words = SPECIAL + FILLER + [w for class_words in WORDS.values() for w in class_words]
    vocabulary.write_text("\n".join(words) + "\n")
    tokenizer = keras_hub.models.BertTokenizer(vocabulary=str(vocabulary), lowercase=True)
    preprocessor = keras_hub.models.BertTextClassifierPreprocessor(tokenizer, sequence_length=SEQUENCE_LENGTH)
    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=tokenizer.vocabulary_size(),
        num_layers=2,
        num_heads=2,
        hidden_dim=16,
        intermediate_dim=32,
        max_sequence_length=SEQUENCE_LENGTH,
    )
    classifier = keras_hub.models.BertTextClassifier(backbone, num_classes=2, preprocessor=preprocessor)
    classifier.save_to_preset(str(directory))


def write_image_preset(directory: Path) -> None:
    """A 1-layer ViT (16x16 RGB images, 4x4 patches, hidden 16), its image converter (pixels in [0, 255] to
    [0, 1]) and preprocessor, and a ViTImageClassifier: save_to_preset."""
    import keras
    import keras_hub

    keras.utils.set_random_seed(PRESET_SEED)
    converter = keras_hub.layers.ViTImageConverter(image_size=(16, 16), scale=1 / 255.0)
    preprocessor = keras_hub.models.ViTImageClassifierPreprocessor(image_converter=converter)
    backbone = keras_hub.models.ViTBackbone(
        image_shape=(16, 16, 3), patch_size=4, num_layers=1, num_heads=2, hidden_dim=16, mlp_dim=32
    )
    classifier = keras_hub.models.ViTImageClassifier(backbone, num_classes=2, preprocessor=preprocessor)
    classifier.save_to_preset(str(directory))


ATTEMPTS: list[str] = []  # every connection this process tried to open, refused (the guard below)


def refuse_connections() -> None:
    """Any connection but a local one (and any name lookup) is refused and counted: building from a preset reads
    files only."""
    import socket

    connect = socket.socket.connect

    def guarded(self, address):
        if self.family in (socket.AF_INET, socket.AF_INET6):
            ATTEMPTS.append(str(address))
            raise OSError(f"tests/hub_presets.py refuses a connection to {address}")
        return connect(self, address)

    def resolve(host, *args, **kwargs):
        if host not in (None, "localhost", "127.0.0.1", "::1"):  # a name looked up is a connection about to be made
            ATTEMPTS.append(str(host))
            raise socket.gaierror(f"tests/hub_presets.py refuses to look up {host}")
        return lookup(host, *args, **kwargs)

    lookup = socket.getaddrinfo
    socket.socket.connect = guarded  # type: ignore[method-assign]
    socket.getaddrinfo = resolve


def backbone_distance(directory: Path, weights: Path) -> dict:
    """The preset's backbone against the backbone of a model built as model=keras_hub builds it and filled from a
    run's weights file: the largest absolute difference over its weights, and whether every one is bit-identical."""
    import numpy as np
    from omegaconf import OmegaConf

    from tfhydra.config.contracts import DataSpec
    from tfhydra.model.hub import build_keras_hub, import_keras_hub

    hub = import_keras_hub()
    node = OmegaConf.create({"name": "keras_hub", "preset": str(directory), "sequence_length": None, "dropout": 0.1})
    model = build_keras_hub(node, DataSpec((), 2, ("neg", "pos"), 1, 1, dtype="string"))  # task=classification's
    model.load_weights(str(weights))
    trained = next(layer for layer in model.layers if layer.weights).backbone
    preset = hub.models.Backbone.from_preset(str(directory))
    pairs = list(zip(preset.weights, trained.weights, strict=True))
    gaps = [float(np.max(np.abs(np.asarray(a) - np.asarray(b)))) for a, b in pairs]
    found = {"weights": len(pairs), "max_change": max(gaps), "identical": all(g == 0.0 for g in gaps)}
    return {**found, "connections": list(ATTEMPTS)}


if __name__ == "__main__":
    if sys.argv[1] == "write":
        write_preset(Path(sys.argv[2]))
    elif sys.argv[1] == "write-image":
        write_image_preset(Path(sys.argv[2]))
    else:
        refuse_connections()
        for weights_file in sys.argv[3:]:
            print(json.dumps(backbone_distance(Path(sys.argv[2]), Path(weights_file))))
