"""`data.augment`: Keras preprocessing layers applied to training batches inside tf.data.

They run in the input pipeline, not in the model, so the exported model serves raw images
and validation data is never augmented. Each item is `{name: <layer>, <argument>: value}`;
the arguments are the Keras layer's own (e.g. `factor`, `mode`, `height_factor`); a
bare name uses the layer's defaults.
"""

from __future__ import annotations

from omegaconf import ListConfig, OmegaConf

from tfhydra.config.errors import ConfigError
from tfhydra.data.source import DataSpec
from tfhydra.platform.keras_lib import keras

AUGMENTATION_LAYERS = {
    "random_flip": keras.layers.RandomFlip,
    "random_rotation": keras.layers.RandomRotation,
    "random_zoom": keras.layers.RandomZoom,
    "random_translation": keras.layers.RandomTranslation,
    "random_contrast": keras.layers.RandomContrast,
}


def build_augmentation(items, spec: DataSpec, seed: int) -> keras.Sequential | None:
    """One Sequential of the listed layers, or None for an empty list.

    Layers are float32 whatever the precision policy (the pipeline feeds float32 images)
    and seeded from the run's seed unless an item gives its own `seed`.
    """
    if not items:
        return None
    items = OmegaConf.to_container(items) if isinstance(items, ListConfig) else list(items)
    items = [{"name": item} if isinstance(item, str) else dict(item) for item in items]
    if len(spec.input_shape) != 3 or not spec.dtype.startswith("float"):
        raise ConfigError(
            "data.augment",
            items,
            "[] for data that are not images",
            f"image augmentation needs (height, width, channels) images; the data are {spec.dtype} "
            f"of shape {spec.input_shape}",
        )
    layers = []
    for i, item in enumerate(items):
        arguments = dict(item)
        name = arguments.pop("name", None)
        if name not in AUGMENTATION_LAYERS:
            raise ConfigError(
                f"data.augment[{i}].name", name, sorted(AUGMENTATION_LAYERS), "unknown augmentation layer"
            )
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
    return keras.Sequential(layers, name="augment")
