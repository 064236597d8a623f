"""An image's size from its header, before decoding (issue 35, items 7-8): the sizes PIL writes are the sizes read
back for PNG, JPEG (baseline and progressive), GIF and BMP; image_folder refuses an image over data.max_pixels and,
with data.image_size=null, images of different sizes, each in one line naming the file, before any decoding."""

from __future__ import annotations

import data_files
import pytest
from conftest import HYPOTHESIS_SEED, counts_cases
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st
from PIL import Image

from tfhydra.config.errors import ConfigError
from tfhydra.data.image_headers import header_size, pixels_over

FORMATS = {"png": {}, "jpg": {}, "progressive.jpg": {"progressive": True}, "gif": {}, "bmp": {}}


@counts_cases()
@seed(HYPOTHESIS_SEED)
@settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    height=st.integers(1, 3000),
    width=st.integers(1, 3000),
    kind=st.sampled_from(sorted(FORMATS)),
    mode=st.sampled_from(["L", "RGB"]),
)
def test_the_header_gives_the_size_the_image_was_written_with(tmp_path_factory, height, width, kind, mode):
    path = tmp_path_factory.mktemp("img") / f"image.{kind}"
    Image.new(mode, (width, height), 128).save(path, **FORMATS[kind])
    assert header_size(path) == (height, width)
    assert pixels_over(path, height * width) is None and pixels_over(path, height * width - 1) == (height, width)


def test_what_is_not_an_image_header_has_no_size(tmp_path):
    for name, content in {
        "text.png": b"hello",
        "cut.png": b"\x89PNG\r\n\x1a\n\x00\x00",
        "cut.jpg": b"\xff\xd8\xff",
    }.items():
        (tmp_path / name).write_bytes(content)
        assert header_size(tmp_path / name) is None
    assert header_size(tmp_path / "missing.png") is None


def test_a_huge_image_is_refused_before_it_is_decoded(tmp_path, compose_cfg):
    """A 20000 x 20000 PNG is a few hundred kB on disk and 1.2 GB decoded: refused by its header."""
    from tfhydra.data.pipeline import build_datasets

    root = data_files.write_image_folder(tmp_path / "pets", per_class=4, size=(8, 8))
    huge = root / "train" / next(p.name for p in (root / "train").iterdir()) / "huge.png"
    Image.new("L", (20000, 20000), 0).save(huge)
    assert huge.stat().st_size < 1_000_000
    with pytest.raises(ConfigError) as refused:
        build_datasets(compose_cfg(["data=image_folder", f"data.path={root}", "data.image_size=[8,8]"]).data, 0)
    assert str(refused.value) == (
        f"{huge}: 20000x20000 = 400000000 pixels; accepted: images of at most "
        "data.max_pixels=50000000 pixels (or raise it)"
    )


def test_images_of_several_sizes_without_an_image_size_are_refused(tmp_path, compose_cfg):
    from tfhydra.data.pipeline import build_datasets

    root = data_files.write_image_folder(tmp_path / "pets", per_class=4, size=(8, 8))
    other = sorted((root / "train").rglob("*.png"))[-1]
    Image.new("RGB", (12, 10), 0).save(other)
    with pytest.raises(ConfigError) as refused:
        build_datasets(compose_cfg(["data=image_folder", f"data.path={root}", "data.image_size=null"]).data, 0)
    message = str(refused.value)
    assert message.startswith("data.image_size: null keeps each stored size, and they differ: ") and message.endswith(
        f"{other} is 10x12; accepted: [height, width] to resize every image to (e.g. data.image_size=[8,8])"
    ), message
