"""A ResNet for small images: He et al. 2016's CIFAR family (ResNet-20/32/44/56/110) and its kin.

Unlike ImageNet ResNets there is no strided 7x7 stem or max-pool: a 3x3 stem conv keeps
the full resolution, so 32x32 images end at 8x8 after three stages. For 224x224 images
use `model=keras_app model.arch=ResNet50`.
"""

from __future__ import annotations

from tfhydra.config.contracts import DataSpec
from tfhydra.config.errors import ConfigError
from tfhydra.model.base import MODELS, require_images
from tfhydra.model.head import task_head
from tfhydra.model.schemas import ResnetModelConfig
from tfhydra.platform.keras_lib import keras


def stage_blocks(depth: int | None, blocks_per_stage) -> list[int]:
    """Basic blocks per stage; `depth` = 2 * blocks + 2 (stem conv + two convs per block + head)."""
    if blocks_per_stage is None:
        if depth is None:
            raise ConfigError(
                "model.depth",
                None,
                "6n+2 (8, 14, 20, 32, 44, 56, 110) or a model.blocks_per_stage list",
                "one of the two must give the network's size",
            )
        return [(depth - 2) // 6] * 3
    blocks = list(blocks_per_stage)
    implied = 2 * sum(blocks) + 2
    if depth is not None and depth != implied:
        raise ConfigError(
            "model.depth",
            depth,
            f"null or {implied} (2 * sum(blocks_per_stage) + 2)",
            f"disagrees with model.blocks_per_stage={blocks}",
        )
    return blocks


@MODELS.register("resnet", schema=ResnetModelConfig)
def build_resnet(cfg, spec: DataSpec) -> keras.Model:
    """Stem conv, then stages of basic blocks; every stage after the first halves the image and doubles the width."""
    height, width, _ = require_images(spec, "resnet")
    blocks = stage_blocks(cfg.depth, cfg.blocks_per_stage)
    smallest = min(height, width)
    needed = 2 ** (len(blocks) - 1)  # each downsampling needs at least 2 pixels to halve
    if smallest < needed:
        fits = smallest.bit_length()  # stages whose input is still >= 2 pixels, plus the first
        key, value = (
            ("model.blocks_per_stage", blocks) if cfg.blocks_per_stage is not None else ("model.depth", cfg.depth)
        )
        raise ConfigError(
            key,
            value,
            f"at most {fits} stage(s) for {height}x{width} images",
            f"resnet with {len(blocks)} stages halves the images {len(blocks) - 1} times and needs "
            f"at least {needed}x{needed}; the data's are {height}x{width}",
        )

    inputs = keras.Input(spec.input_shape)
    x = conv_bn(inputs, cfg.width, 1, name="stem")
    x = keras.layers.ReLU(name="stem_relu")(x)
    for stage, count in enumerate(blocks):
        for block in range(count):
            stride = 2 if stage > 0 and block == 0 else 1
            x = basic_block(x, cfg.width * 2**stage, stride, name=f"stage{stage + 1}_block{block + 1}")
    x = keras.layers.GlobalAveragePooling2D(name="pool")(x)
    for layer in task_head(spec):
        x = layer(x)
    return keras.Model(inputs, x, name=f"resnet{2 * sum(blocks) + 2}")


def conv_bn(x, filters: int, stride: int, name: str, kernel_size: int = 3):
    x = keras.layers.Conv2D(
        filters,
        kernel_size,
        strides=stride,
        padding="same",
        use_bias=False,
        kernel_initializer="he_normal",
        name=f"{name}_conv",
    )(x)
    return keras.layers.BatchNormalization(name=f"{name}_bn")(x)


def basic_block(x, filters: int, stride: int, name: str):
    """Two 3x3 convs with batch norm; a 1x1 projection shortcut where the shape changes (He et al.'s option B)."""
    shortcut = x
    if stride != 1 or x.shape[-1] != filters:
        shortcut = conv_bn(x, filters, stride, f"{name}_shortcut", kernel_size=1)
    y = keras.layers.ReLU(name=f"{name}_relu1")(conv_bn(x, filters, stride, f"{name}_1"))
    y = conv_bn(y, filters, 1, f"{name}_2")
    return keras.layers.ReLU(name=f"{name}_out")(keras.layers.Add(name=f"{name}_add")([shortcut, y]))
