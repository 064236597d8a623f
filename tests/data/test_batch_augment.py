"""`data.augment`'s mixup, cutmix and randaugment (tfhydra/data/batch_mixing.py, randaugment.py): the functions on a
small batch, their values asserted; the pipeline's training batches; the trainer's twin loss and accuracy. In-process,
milliseconds each (the runs are in tests/trainer/test_mixed_targets_runs.py)."""

import numpy as np
import pytest
import tensorflow as tf

from tfhydra.data.augment_checks import RANDAUGMENT_OPS
from tfhydra.data.batch_mixing import box_masks, cutmix, cutmix_boxes, mix_batch, mixup, one_hot_targets
from tfhydra.data.pipeline import build_datasets
from tfhydra.data.randaugment import colour, randaugment, transforms
from tfhydra.platform.keras_lib import keras
from tfhydra.runner.plan import check_config as validate
from tfhydra.trainer.mixed_targets import MixedTargetAccuracy, MixedTargetCrossentropy

SEED = tf.constant([7, 11], tf.int64)


def batch(n=8, size=6, classes=4):
    rng = np.random.default_rng(0)
    images = rng.uniform(0, 1, (n, size, size, 1)).astype(np.float32)
    labels = (np.arange(n) % classes).astype(np.int64)
    return tf.constant(images), tf.constant(labels), one_hot_targets(labels, classes)


def test_mixup_mixes_each_example_with_its_partner_by_its_own_weight():
    images, labels, targets = batch()
    mixed, mixed_targets, lam = (t.numpy() for t in mixup(images, targets, 0.4, SEED))
    assert mixed.shape == images.shape and mixed.dtype == np.float32
    assert np.all((lam > 0) & (lam < 1)) and len(set(lam.round(6))) == len(lam)  # a weight per example
    np.testing.assert_allclose(mixed_targets.sum(1), 1.0, rtol=1e-6)
    x, y = images.numpy(), targets.numpy()
    for i in range(len(x)):  # the partner is the one example whose mix gives image i
        partner = [j for j in range(len(x)) if np.allclose(lam[i] * x[i] + (1 - lam[i]) * x[j], mixed[i], atol=1e-6)]
        assert len(partner) == 1
        np.testing.assert_allclose(mixed_targets[i], lam[i] * y[i] + (1 - lam[i]) * y[partner[0]], atol=1e-6)


def test_cutmix_pastes_a_box_whose_share_of_pixels_is_the_partner_label_weight():
    images, _, targets = batch(n=16, size=10)
    pasted, mixed_targets, kept = (t.numpy() for t in cutmix(images, targets, 1.0, SEED))
    boxes = cutmix_boxes(16, 10, 10, 1.0, SEED).numpy()
    masks = box_masks(boxes, 10, 10).numpy()[..., 0]
    areas = (boxes[:, 1] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 2])
    np.testing.assert_array_equal(masks.sum((1, 2)), areas)
    np.testing.assert_allclose(1 - kept, areas / 100, atol=1e-6)  # the label weight is the pasted share
    np.testing.assert_allclose(mixed_targets.sum(1), 1.0, rtol=1e-6)
    assert np.all((kept >= 0) & (kept <= 1)) and areas.max() > 0
    x = images.numpy()
    outside = masks == 0
    np.testing.assert_array_equal(pasted[..., 0][outside], x[..., 0][outside])  # only the box changes
    for i in np.flatnonzero(areas):
        inside = masks[i] == 1
        sources = [j for j in range(16) if np.array_equal(pasted[i, ..., 0][inside], x[j, ..., 0][inside])]
        assert sources, f"example {i}'s box is no example's pixels"


def test_both_give_each_example_one_of_them_and_every_draw_comes_from_the_seed():
    images, labels, _ = batch(n=32, size=8)
    mixed, targets = mix_batch(images, labels, 4, SEED, mixup_alpha=0.2, cutmix_alpha=1.0)
    again, again_targets = mix_batch(images, labels, 4, SEED, mixup_alpha=0.2, cutmix_alpha=1.0)
    np.testing.assert_array_equal(mixed.numpy(), again.numpy())
    np.testing.assert_array_equal(targets.numpy(), again_targets.numpy())
    other, _ = mix_batch(images, labels, 4, tf.constant([7, 12], tf.int64), mixup_alpha=0.2, cutmix_alpha=1.0)
    assert not np.allclose(mixed.numpy(), other.numpy())
    # a cut example keeps some of its own pixels exactly; a mixed-up one (0 < lam < 1) none of them
    own = (mixed.numpy() == images.numpy()).reshape(32, -1).any(1)
    assert 0 < own.sum() < 32
    np.testing.assert_allclose(targets.numpy().sum(1), 1.0, rtol=1e-6)


def test_randaugment_keeps_shape_dtype_and_range_and_is_seeded():
    images, _, _ = batch(n=16, size=12)
    out = randaugment(images, 2, 9, SEED).numpy()
    assert out.shape == images.shape and out.dtype == np.float32 and out.min() >= 0 and out.max() <= 1
    np.testing.assert_array_equal(out, randaugment(images, 2, 9, SEED).numpy())
    assert not np.allclose(out, randaugment(images, 2, 9, tf.constant([7, 12], tf.int64)).numpy())
    changed = ~np.isclose(out, images.numpy()).reshape(16, -1).all(1)
    assert changed.sum() >= 8  # most images took an operation that changes them


def test_randaugment_operations_at_full_magnitude():
    image = np.zeros((1, 5, 5, 1), np.float32)
    image[0, 2, 1] = 1.0

    def apply(name, sign=1.0, images=image):
        op, level, signs = tf.constant([RANDAUGMENT_OPS.index(name)]), tf.constant([1.0]), tf.constant([sign])
        moved = tf.raw_ops.ImageProjectiveTransformV3(
            images=images,
            transforms=transforms(op, level, signs, 5, 5),
            output_shape=[5, 5],
            fill_value=0.0,
            interpolation="BILINEAR",
            fill_mode="CONSTANT",
        )
        return colour(moved, op, level, signs).numpy()[0, ..., 0]

    np.testing.assert_array_equal(apply("identity"), image[0, ..., 0])
    moved = apply("translate_x")  # 45% of 5 pixels: 2.25 to the right, shared by two pixels
    assert moved[2, 3] == pytest.approx(0.75) and moved[2, 4] == pytest.approx(0.25) and moved.sum() == pytest.approx(1)
    np.testing.assert_allclose(apply("rotate", images=np.ones((1, 5, 5, 1), np.float32))[2, 2], 1.0)
    ramp = np.linspace(0, 1, 25, dtype=np.float32).reshape(1, 5, 5, 1)
    np.testing.assert_allclose(apply("solarize", images=ramp), np.where(ramp > 0, 1 - ramp, ramp)[0, ..., 0])
    np.testing.assert_allclose(apply("posterize", images=ramp) * 16 % 1, 0, atol=1e-6)  # 4 bits kept
    np.testing.assert_allclose(apply("brightness", sign=-1.0, images=ramp), 0.1 * ramp[0, ..., 0], rtol=1e-5)
    np.testing.assert_allclose(apply("autocontrast", images=0.5 * ramp + 0.2), ramp[0, ..., 0], atol=1e-6)


def test_the_pipeline_mixes_training_batches_only_from_the_run_seed(compose_cfg):
    base = ["data=synthetic", "data.train_size=32", "data.val_size=16", "data.shuffle_buffer=0"]
    cfg = compose_cfg(
        [*base, "data.augment=[{name: mixup, alpha: 0.4}]"]
    )  # randaugment's runs: test_mixed_targets_runs
    validate(cfg)
    mixed = build_datasets(cfg.data, seed=0)
    unaugmented = cfg.data.copy()
    unaugmented.augment = []
    plain = build_datasets(unaugmented, seed=0)
    assert mixed.mixed_targets and not plain.mixed_targets
    epoch1, epoch2 = ([(x.numpy(), y.numpy()) for x, y in mixed.train] for _ in range(2))
    targets = np.concatenate([y for _, y in epoch1])
    assert targets.shape == (32, 10) and targets.dtype == np.float32
    np.testing.assert_allclose(targets.sum(1), 1.0, rtol=1e-6)
    assert (targets.max(1) < 1).any()  # mixed rows, not one-hot
    assert not np.allclose(epoch1[0][0], epoch2[0][0])  # new draws every epoch
    rebuilt = build_datasets(cfg.data, seed=0)
    np.testing.assert_array_equal(next(iter(rebuilt.train))[0].numpy(), epoch1[0][0])  # the same run, the same draws
    for split in ("validation", "test"):
        for (x, y), (px, py) in zip(getattr(mixed, split), getattr(plain, split), strict=True):
            np.testing.assert_array_equal(x.numpy(), px.numpy())
            np.testing.assert_array_equal(y.numpy(), py.numpy())


def test_the_twin_loss_and_accuracy_take_class_indices_and_mixed_rows():
    probabilities = tf.constant([[0.7, 0.2, 0.1], [0.1, 0.3, 0.6]])
    labels = tf.constant([[0], [1]])
    twin = MixedTargetCrossentropy()
    sparse = keras.losses.SparseCategoricalCrossentropy()(labels, probabilities)
    assert float(twin(labels, probabilities)) == pytest.approx(float(sparse), rel=1e-6)
    rows = tf.constant([[0.6, 0.4, 0.0], [0.0, 0.3, 0.7]])
    expected = -(0.6 * np.log(0.7) + 0.4 * np.log(0.2) + 0.3 * np.log(0.3) + 0.7 * np.log(0.6)) / 2
    assert float(twin(rows, probabilities)) == pytest.approx(expected, rel=1e-5)
    logits = tf.math.log(probabilities) + 3.0
    assert float(MixedTargetCrossentropy(from_logits=True)(rows, logits)) == pytest.approx(expected, rel=1e-5)
    accuracy = MixedTargetAccuracy(name="accuracy")
    accuracy.update_state(labels, probabilities)  # right, wrong
    accuracy.update_state(rows, probabilities)  # largest classes 0 and 2: right, right
    assert float(accuracy.result()) == pytest.approx(0.75)
