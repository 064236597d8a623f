"""data=synthetic data.shift: class patterns of 4x4-pixel blocks at a random place per example (issue 37 item 4's
harder proxy, where position carries no information); shift=0 keeps the data of earlier versions."""

import numpy as np
import pytest
from omegaconf import open_dict

from tfhydra.config.errors import ConfigError
from tfhydra.data.arrays import build_synthetic

SMALL = ["data=synthetic", "data.shape=[12,12,1]", "data.num_classes=3", "data.train_size=90", "data.val_size=9"]


def train_arrays(cfg, seed=5):
    pairs = list(build_synthetic(cfg.data, seed).train.as_numpy_iterator())
    return np.stack([x for x, _ in pairs]), np.array([y for _, y in pairs])


def test_each_example_is_its_class_pattern_moved_by_at_most_shift_pixels(compose_cfg):
    x, y = train_arrays(compose_cfg([*SMALL, "data.signal=1.0", "data.shift=2"]))  # no noise: the pattern alone
    for label in range(3):
        images = x[y == label][..., 0]
        first = images[0]
        for image in images:  # a roll of the class's first example by at most 2 + 2 pixels along each axis
            assert any(
                np.array_equal(np.roll(first, (dy, dx), axis=(0, 1)), image)
                for dy in range(-4, 5)
                for dx in range(-4, 5)
            )
        assert len({image.tobytes() for image in images}) > 3  # the pattern moves between examples
        rolled_back = [image for image in images if np.array_equal(image, first)]
        assert len(rolled_back) < len(images)
    unshifted = train_arrays(compose_cfg([*SMALL, "data.signal=1.0", "data.shift=0"]))[0][..., 0]
    assert len({image.tobytes() for image in unshifted}) == 3  # without a shift: one image per class


def test_shift_zero_draws_the_data_of_earlier_versions(compose_cfg):
    cfg = compose_cfg(SMALL)
    assert cfg.data.shift == 0
    with open_dict(cfg.data):
        del cfg.data["shift"]  # a config written before the key existed
    before = train_arrays(cfg)
    np.testing.assert_array_equal(train_arrays(compose_cfg(SMALL))[0], before[0])


@pytest.mark.parametrize("shift", [-1, 12, 1.5])
def test_a_shift_outside_the_image_is_a_config_error(compose_cfg, shift):
    with pytest.raises(ConfigError, match="data.shift"):
        build_synthetic(compose_cfg([*SMALL, f"data.shift={shift}"]).data, 0)
