"""`data.augment`: what training batches go through inside tf.data, after batching.

They run in the input pipeline, not in the model, so the exported model serves raw images and validation data is
never augmented. Each item is `{name: <name>, <argument>: value}`; a bare name takes the defaults.
- `random_flip`, `random_rotation`, `random_zoom`, `random_translation`, `random_contrast`: the Keras
  preprocessing layer, with the layer's own arguments (e.g. `factor`, `mode`, `height_factor`);
- `randaugment` (`ops`, `magnitude`): tfhydra/data/randaugment.py;
- `mixup` and `cutmix` (`alpha`): tfhydra/data/batch_mixing.py; the labels become mixed one-hot targets.
Applied in that order, whatever the list's: the layers, then RandAugment, then the mixing.
"""

from __future__ import annotations

from dataclasses import dataclass

import tensorflow as tf

from tfhydra.config.errors import ConfigError
from tfhydra.data.augment_checks import BATCH_AUGMENTATIONS, augment_items, batch_arguments
from tfhydra.data.batch_mixing import mix_batch
from tfhydra.data.randaugment import randaugment
from tfhydra.data.source import DataSpec
from tfhydra.platform.keras_lib import keras

AUGMENTATION_LAYERS = {
    "random_flip": keras.layers.RandomFlip,
    "random_rotation": keras.layers.RandomRotation,
    "random_zoom": keras.layers.RandomZoom,
    "random_translation": keras.layers.RandomTranslation,
    "random_contrast": keras.layers.RandomContrast,
}


@dataclass
class Augmentation:
    """The training batches' transforms. `layers`: the Keras ones (their generator is state outside the pipeline);
    the others draw statelessly from the seed each batch is given (tfhydra/data/pipeline.py `augmented`)."""

    layers: keras.Sequential | None
    num_classes: int
    randaugment: dict | None = None  # {ops, magnitude}
    mixup: dict | None = None  # {alpha}
    cutmix: dict | None = None  # {alpha}

    @property
    def mixes_labels(self) -> bool:
        """Training targets are mixed one-hot rows (the trainer compiles the loss's categorical twin)."""
        return self.mixup is not None or self.cutmix is not None

    def __call__(self, images, labels, seed) -> tuple[tf.Tensor, tf.Tensor]:
        if self.layers is not None:
            images = self.layers(images, training=True)
        if self.randaugment is not None:
            images = randaugment(images, self.randaugment["ops"], self.randaugment["magnitude"], seed)
        if self.mixes_labels:
            alphas = [None if options is None else float(options["alpha"]) for options in (self.mixup, self.cutmix)]
            images, labels = mix_batch(images, labels, self.num_classes, seed, *alphas)
        return images, labels


def build_augmentation(items, spec: DataSpec, seed: int) -> Augmentation | None:
    """The listed transforms, or None for an empty list.

    Layers are float32 whatever the precision policy (the pipeline feeds float32 images) and seeded from the run's
    seed unless an item gives its own `seed`.
    """
    items = augment_items(items)
    if not items:
        return None
    if len(spec.input_shape) != 3 or not spec.dtype.startswith("float"):
        raise ConfigError(
            "data.augment",
            items,
            "[] for data that are not images",
            f"image augmentation needs (height, width, channels) images; the data are {spec.dtype} "
            f"of shape {spec.input_shape}",
        )
    layers, batch = [], {}
    for i, item in enumerate(items):
        arguments = dict(item)
        name = arguments.pop("name", None)
        if name in BATCH_AUGMENTATIONS:
            batch[name] = batch_arguments(i, item)
            continue
        if name not in AUGMENTATION_LAYERS:
            names = sorted((*AUGMENTATION_LAYERS, *BATCH_AUGMENTATIONS))
            raise ConfigError(f"data.augment[{i}].name", name, names, "unknown augmentation layer")
        layer = AUGMENTATION_LAYERS[name]
        try:
            layers.append(layer(**{"seed": seed + i, "dtype": "float32", **arguments}))
        except (TypeError, ValueError) as error:
            raise ConfigError(
                f"data.augment[{i}]",
                item,
                f"the arguments of tf.keras.layers.{layer.__name__}",
                f"cannot build it ({error})",
            ) from None
    sequential = keras.Sequential(layers, name="augment") if layers else None
    return Augmentation(sequential, spec.num_classes, batch.get("randaugment"), batch.get("mixup"), batch.get("cutmix"))
