"""`data.augment`'s `randaugment` (Cubuk et al. 2020): each training image goes through `ops` operations, each
picked uniformly from the list below, at one shared `magnitude` M in [0, 10] (M / 10 of each operation's
strongest setting, its direction drawn at random where it has one).

Plain TensorFlow on the whole batch, for both Kerases: the geometric operations are one projective transform per
image (`ImageProjectiveTransformV3`, bilinear, black fill), the colour ones are computed for the batch and each
image keeps its own pick. Pixels are taken in [0, 1], as tfhydra's image sources scale them, and clipped to it.
Every draw is stateless, from the batch's seed (tfhydra/data/batch_mixing.py `draw_seed`).

The operations, for the small photos and scans tfhydra trains (AutoAugment's, less `equalize`, which needs a
per-image histogram, and `invert`, which timm's RandAugment leaves out too), at M = 10:
identity; autocontrast (each channel stretched to [0, 1]); brightness and contrast (factor 1 +- 0.9) and
sharpness (blend with a 3x3 smoothing, factor 1 +- 0.9); posterize (4 bits kept); solarize (pixels above
1 - M/10 inverted); rotate (+-30 degrees); shear_x and shear_y (+-0.3); translate_x and translate_y (+-45% of the
side, as timm's `translate_pct`).
"""

from __future__ import annotations

import math

import tensorflow as tf

from tfhydra.data.augment_checks import RANDAUGMENT_OPS
from tfhydra.data.batch_mixing import draw_seed

GEOMETRIC = ("rotate", "shear_x", "shear_y", "translate_x", "translate_y")
STRONGEST = {"rotate": math.radians(30.0), "shear_x": 0.3, "shear_y": 0.3, "translate_x": 0.45, "translate_y": 0.45}
FACTOR = 0.9  # brightness, contrast, sharpness: 1 +- 0.9 at M = 10


def transforms(op, level, sign, height, width) -> tf.Tensor:
    """(batch, 8) projective transforms (output pixel -> input pixel) of each image's geometric pick; the identity
    for the colour ones."""
    h, w = tf.cast(height, tf.float32), tf.cast(width, tf.float32)
    cy, cx = (h - 1.0) / 2.0, (w - 1.0) / 2.0
    zeros, ones = tf.zeros_like(sign), tf.ones_like(sign)
    angle = sign * level * STRONGEST["rotate"]
    cos, sin = tf.cos(angle), tf.sin(angle)
    shear = sign * level * STRONGEST["shear_x"]
    move = sign * level * STRONGEST["translate_x"]
    rows = {  # [a0, a1, a2, b0, b1, b2]: x_in = a0 x + a1 y + a2, y_in = b0 x + b1 y + b2
        "rotate": [cos, -sin, cx - cos * cx + sin * cy, sin, cos, cy - sin * cx - cos * cy],
        "shear_x": [ones, shear, -shear * cy, zeros, ones, zeros],
        "shear_y": [ones, zeros, zeros, shear, ones, -shear * cx],
        "translate_x": [ones, zeros, -move * w, zeros, ones, zeros],
        "translate_y": [ones, zeros, zeros, zeros, ones, -move * h],
    }
    identity = [ones, zeros, zeros, zeros, ones, zeros]
    chosen = identity
    for name in GEOMETRIC:
        picked = tf.equal(op, RANDAUGMENT_OPS.index(name))
        chosen = [tf.where(picked, new, old) for new, old in zip(rows[name], chosen, strict=True)]
    return tf.stack([*chosen, zeros, zeros], axis=1)


def blend(images, other, factor) -> tf.Tensor:
    """PIL's ImageEnhance: `other + factor * (images - other)`, per image's factor."""
    return other + factor[:, None, None, None] * (images - other)


def sharpened_base(images) -> tf.Tensor:
    """PIL's SMOOTH filter (a 3x3 kernel weighting the centre 5 and its 8 neighbours 1) inside the border, the
    image itself on it."""
    kernel = tf.constant([[1.0, 1.0, 1.0], [1.0, 5.0, 1.0], [1.0, 1.0, 1.0]]) / 13.0
    channels = images.shape[-1]
    kernel = tf.tile(kernel[:, :, None, None], [1, 1, channels, 1])
    smooth = tf.nn.depthwise_conv2d(images, kernel, [1, 1, 1, 1], "VALID")
    return (
        tf.pad(smooth, [[0, 0], [1, 1], [1, 1], [0, 0]])
        + images
        - tf.pad(images[:, 1:-1, 1:-1], [[0, 0], [1, 1], [1, 1], [0, 0]])
    )


def colour(images, op, level, sign) -> tf.Tensor:
    """Each image's colour pick applied (the geometric picks and identity pass it unchanged)."""
    factor = 1.0 + sign * level * FACTOR
    low = tf.reduce_min(images, axis=[1, 2], keepdims=True)
    high = tf.reduce_max(images, axis=[1, 2], keepdims=True)
    stretched = tf.where(high > low, (images - low) / tf.maximum(high - low, 1e-6), images)
    grey = tf.reduce_mean(images, axis=[1, 2, 3], keepdims=True)
    step = tf.pow(2.0, tf.round(level * 4.0))[:, None, None, None] / 256.0  # posterize: 8 - 4M/10 bits kept
    threshold = (1.0 - level)[:, None, None, None]
    results = {
        "autocontrast": stretched,
        "brightness": blend(images, tf.zeros_like(images), factor),
        "contrast": blend(images, grey, factor),
        "sharpness": blend(images, sharpened_base(images), factor),
        "posterize": tf.floor(images / step) * step,
        "solarize": tf.where((images > threshold) & (threshold < 1.0), 1.0 - images, images),
    }
    for name, result in results.items():
        picked = tf.equal(op, RANDAUGMENT_OPS.index(name))[:, None, None, None]
        images = tf.where(picked, result, images)
    return images


def randaugment(images, ops: int, magnitude: float, seed) -> tf.Tensor:
    """`ops` random operations per image at `magnitude` (0..10), in turn, clipped to [0, 1]."""
    shape = tf.shape(images)
    batch, height, width = shape[0], shape[1], shape[2]
    level = tf.fill([batch], tf.constant(magnitude / 10.0, tf.float32))
    for i in range(ops):
        layer_seed = draw_seed(seed, 16 + i)
        op = tf.random.stateless_uniform([batch], draw_seed(layer_seed, 0), 0, len(RANDAUGMENT_OPS), dtype=tf.int32)
        sign = tf.where(tf.random.stateless_uniform([batch], draw_seed(layer_seed, 1)) < 0.5, -1.0, 1.0)
        moved = tf.raw_ops.ImageProjectiveTransformV3(
            images=images,
            transforms=transforms(op, level, sign, height, width),
            output_shape=tf.stack([height, width]),
            fill_value=0.0,
            interpolation="BILINEAR",
            fill_mode="CONSTANT",
        )
        images = tf.clip_by_value(colour(moved, op, level, sign), 0.0, 1.0)
    return images
