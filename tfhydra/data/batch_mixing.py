"""`data.augment`'s `mixup` and `cutmix`: training batches mixed pairwise, images and labels together.

Plain TensorFlow ops on a whole batch (the same for tf_keras and Keras 3, which tf_keras has no layers for), run
in the input pipeline's map after batching, so they cost CPU threads while the accelerator trains. Each example is
mixed with a partner drawn by a seeded permutation of the batch, with its own mixing weight (timm's "elem" mode):
a batch of 32 averages 32 draws, not one. The class labels become mixed one-hot rows, what the loss's categorical
twin trains on (tfhydra/trainer/mixed_targets.py); validation and test keep their class indices.

- MixUp (Zhang et al. 2018): `lam ~ Beta(alpha, alpha)`; image `lam * x + (1 - lam) * partner`, target likewise.
- CutMix (Yun et al. 2019): a box of about `(1 - lam)` of the image, centred uniformly and clipped at the edges,
  is pasted from the partner; the partner's weight in the target is the box's exact share of the pixels.
- Both listed: each example takes one of them, with equal chance.

Every draw is stateless, from `seed` (two integers): the pipeline gives each batch its own, from the run's seed.
"""

from __future__ import annotations

import tensorflow as tf

# Offsets of the draws within one batch's seed, so each draw is independent of the others.
PARTNER, MIXUP_WEIGHT, CUTMIX_WEIGHT, BOX_ROW, BOX_COLUMN, CHOICE = range(6)


def draw_seed(seed, which: int) -> tf.Tensor:
    """The seed of one draw: the batch's seed folded with the draw's offset."""
    return tf.random.experimental.stateless_fold_in(tf.cast(seed, tf.int64), which)


def one_hot_targets(labels, num_classes: int) -> tf.Tensor:
    """Class indices (shape (batch,) or (batch, 1)) as float32 one-hot rows."""
    return tf.one_hot(tf.reshape(tf.cast(labels, tf.int32), [-1]), num_classes, dtype=tf.float32)


def beta(shape, alpha: float, seed) -> tf.Tensor:
    """Beta(alpha, alpha) draws as the ratio of two Gamma(alpha) ones (TensorFlow has no stateless beta)."""
    pair = tf.random.stateless_gamma([2, *shape], seed=seed, alpha=alpha, dtype=tf.float32)
    return pair[0] / tf.maximum(pair[0] + pair[1], 1e-12)


def partners(batch, seed) -> tf.Tensor:
    """A seeded permutation of the batch: example i is mixed with example partners[i]."""
    return tf.argsort(tf.random.stateless_uniform([batch], seed=draw_seed(seed, PARTNER)))


def mixup(images, targets, alpha: float, seed, partner=None) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """(mixed images, mixed targets, each example's own weight `lam`)."""
    batch = tf.shape(images)[0]
    partner = partners(batch, seed) if partner is None else partner
    lam = beta([batch], alpha, draw_seed(seed, MIXUP_WEIGHT))
    pixels = tf.reshape(lam, [-1] + [1] * (len(images.shape) - 1))
    mixed = pixels * images + (1.0 - pixels) * tf.gather(images, partner)
    return mixed, lam[:, None] * targets + (1.0 - lam[:, None]) * tf.gather(targets, partner), lam


def cutmix_boxes(batch, height, width, alpha: float, seed) -> tf.Tensor:
    """Per example, (top, bottom, left, right) pixel bounds (int32, end exclusive) of the box pasted from the
    partner: sides `sqrt(1 - lam)` of the image's, centred uniformly, clipped at the edges (so near an edge the box
    is smaller than drawn, and the label weight follows the box actually pasted)."""
    lam = beta([batch], alpha, draw_seed(seed, CUTMIX_WEIGHT))
    side = tf.sqrt(1.0 - lam)
    h, w = tf.cast(height, tf.float32), tf.cast(width, tf.float32)
    cut_h, cut_w = tf.cast(tf.round(side * h), tf.int32), tf.cast(tf.round(side * w), tf.int32)
    rows = tf.random.stateless_uniform([batch], draw_seed(seed, BOX_ROW), 0, height, dtype=tf.int32)
    columns = tf.random.stateless_uniform([batch], draw_seed(seed, BOX_COLUMN), 0, width, dtype=tf.int32)
    top, bottom = tf.clip_by_value(rows - cut_h // 2, 0, height), tf.clip_by_value(rows + (cut_h + 1) // 2, 0, height)
    left = tf.clip_by_value(columns - cut_w // 2, 0, width)
    right = tf.clip_by_value(columns + (cut_w + 1) // 2, 0, width)
    return tf.stack([top, bottom, left, right], axis=1)


def box_masks(boxes, height, width) -> tf.Tensor:
    """(batch, height, width, 1) float32: 1 inside each example's box."""
    rows, columns = tf.range(height)[None, :, None], tf.range(width)[None, None, :]
    top, bottom, left, right = (boxes[:, i, None, None] for i in range(4))
    inside = (rows >= top) & (rows < bottom) & (columns >= left) & (columns < right)
    return tf.cast(inside, tf.float32)[..., None]


def cutmix(images, targets, alpha: float, seed, partner=None) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """(images with the partner's box pasted in, mixed targets, each example's own weight: 1 - the box's share)."""
    shape = tf.shape(images)
    batch, height, width = shape[0], shape[1], shape[2]
    partner = partners(batch, seed) if partner is None else partner
    masks = box_masks(cutmix_boxes(batch, height, width, alpha, seed), height, width)
    pasted = masks * tf.gather(images, partner) + (1.0 - masks) * images
    kept = 1.0 - tf.reduce_mean(masks, axis=[1, 2, 3])
    return pasted, kept[:, None] * targets + (1.0 - kept[:, None]) * tf.gather(targets, partner), kept


def mix_batch(images, labels, num_classes: int, seed, mixup_alpha=None, cutmix_alpha=None):
    """A training batch of class indices -> (mixed images, mixed one-hot targets): MixUp, CutMix, or each example
    one of the two when both alphas are given."""
    targets = one_hot_targets(labels, num_classes)
    partner = partners(tf.shape(images)[0], seed)
    if cutmix_alpha is None:
        return mixup(images, targets, mixup_alpha, seed, partner)[:2]
    if mixup_alpha is None:
        return cutmix(images, targets, cutmix_alpha, seed, partner)[:2]
    mixed_images, mixed_targets, _ = mixup(images, targets, mixup_alpha, seed, partner)
    cut_images, cut_targets, _ = cutmix(images, targets, cutmix_alpha, seed, partner)
    cut = tf.random.stateless_uniform([tf.shape(images)[0]], draw_seed(seed, CHOICE)) < 0.5
    pixels = tf.reshape(cut, [-1] + [1] * (len(images.shape) - 1))
    return tf.where(pixels, cut_images, mixed_images), tf.where(cut[:, None], cut_targets, mixed_targets)
