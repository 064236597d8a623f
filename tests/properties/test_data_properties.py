"""No traceback for any data file, by construction: generated damaged files for every file source.

Each case writes real files (npz, CSV, text CSV, TFRecord shards, an image folder, the Keras caches of
mnist / fashion_mnist / cifar10), damages them the way disks, copies and hand edits do, and builds the
data as a run would, then reads every batch of both splits. The source must either work or refuse with
one ConfigError line; any other exception is a traceback a user would see. Marked slow; the number of
cases per source is TFHYDRA_DATA_CASES (default 12). Replay with the seed in pytest's header.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import data_files
import numpy as np
import pytest
import tensorflow as tf
from conftest import HYPOTHESIS_SEED, counts_cases
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st
from props_compositions import composed_config

from tfhydra.config.errors import ConfigError

CASES = int(os.environ.get("TFHYDRA_DATA_CASES", "12"))
pytestmark = pytest.mark.slow


def damage(path: Path, how: str, where: float, byte: int) -> None:
    data = bytearray(path.read_bytes())
    cut = int(len(data) * where)
    if how == "truncate":
        data = data[:cut]
    elif how == "flip" and data:
        data[min(cut, len(data) - 1)] ^= byte or 0xFF
    elif how == "garbage":
        data = bytearray(np.random.default_rng(byte).integers(0, 256, size=max(1, cut), dtype=np.uint8).tobytes())
    elif how == "empty":
        data = bytearray()
    path.write_bytes(bytes(data))


DAMAGE = st.tuples(
    st.sampled_from(["none", "truncate", "flip", "garbage", "empty"]),
    st.floats(min_value=0.0, max_value=1.0),
    st.integers(min_value=0, max_value=255),
)


def npz_case(draw, folder: Path) -> list[str]:
    n = draw(st.integers(min_value=0, max_value=24))
    shape = draw(st.sampled_from([(8, 8), (8, 8, 1), (8, 8, 3), (6,), (1, 1)]))
    dtype = draw(st.sampled_from(["uint8", "float32", "float64", "int16", "bool"]))
    x = np.random.default_rng(0).random((n, *shape)) * 255
    if dtype.startswith("float") and n and draw(st.booleans()):
        x.flat[draw(st.integers(min_value=0, max_value=x.size - 1))] = draw(st.sampled_from([np.nan, np.inf]))
    labels = draw(st.sampled_from(["index", "one_hot", "soft", "names", "one_class", "negative", "column"]))
    y = np.arange(n) % 3
    y = {
        "index": y,
        "one_hot": np.eye(3)[y],
        "soft": np.full((n, 3), 1 / 3),
        "names": np.array(["a", "b", "c"])[y],
        "one_class": np.zeros(n, int),
        "negative": y - 1,
        "column": y.reshape(-1, 1),
    }[labels]
    arrays = {"x_train": x.astype(dtype), "y_train": y}
    if draw(st.booleans()):
        val_shape = draw(st.sampled_from([shape, (5, 5)]))
        arrays.update(x_test=np.zeros((4, *val_shape), dtype), y_test=np.arange(4) % 3)
    np.savez(folder / "d.npz", **arrays)
    damage(folder / "d.npz", *draw(DAMAGE))
    overrides = ["data=npz", f"data.path={folder / 'd.npz'}"]
    return overrides + (["data.x_val=x_test", "data.y_val=y_test"] if "x_test" in arrays else [])


def csv_case(draw, folder: Path) -> list[str]:
    path = data_files.write_csv(folder / "t.csv", n=draw(st.integers(min_value=6, max_value=30)))
    lines = path.read_text().splitlines()
    for _ in range(draw(st.integers(min_value=0, max_value=3))):
        row = draw(st.integers(min_value=0, max_value=len(lines) - 1))
        cells = lines[row].split(",")
        column = draw(st.integers(min_value=0, max_value=len(cells) - 1))
        cells[column] = draw(st.sampled_from(["", "nan", "inf", "x", "1e999", '"', "1,2", "label", "  "]))
        lines[row] = ",".join(cells)
    if draw(st.booleans()):
        lines = [lines[0]] + lines[1 : draw(st.integers(min_value=1, max_value=len(lines)))]
    path.write_text("\n".join(lines) + "\n")
    damage(path, *draw(DAMAGE))
    return ["data=csv", f"data.path={path}", "model=mlp"]


def text_csv_case(draw, folder: Path) -> list[str]:
    path = data_files.write_text_csv(folder / "t.csv", n=draw(st.integers(min_value=6, max_value=30)))
    lines = path.read_text().splitlines()
    if draw(st.booleans()):  # texts with nothing to vectorise
        lines = [lines[0]] + [
            f"{draw(st.sampled_from(['', '!!!', ' ', '?']))},{line.rsplit(',', 1)[1]}" for line in lines[1:]
        ]
    path.write_text("\n".join(lines) + "\n")
    damage(path, *draw(DAMAGE))
    return ["data=text_csv", f"data.path={path}", "model=lstm"]


def tfrecord_case(draw, folder: Path) -> list[str]:
    sizes = draw(st.lists(st.sampled_from([(8, 8, 1), (6, 6, 1), (8, 8, 3)]), min_size=1, max_size=3))
    records = []
    for i, shape in enumerate(sizes):
        images, labels = data_files.class_images(8, shape, 2, seed=i)
        records += data_files.serialized_examples(images, labels)
    with tf.io.TFRecordWriter(str(folder / "train-0.tfrecord")) as writer:
        for record in records:
            writer.write(record)
    damage(folder / "train-0.tfrecord", *draw(DAMAGE))
    return ["data=tfrecord", f"data.train={folder}/train-*.tfrecord", "model.filters=[4]"]


def image_folder_case(draw, folder: Path) -> list[str]:
    root = folder / "images"
    data_files.write_image_folder(root, classes=("a", "b"), per_class=draw(st.integers(min_value=1, max_value=5)))
    files = sorted(root.rglob("*.png"))
    for file in draw(st.lists(st.sampled_from(files), max_size=2, unique=True)):
        damage(file, *draw(DAMAGE))
    if draw(st.booleans()):
        (files[0].parent / "notes.txt").write_text("not an image\n")
    return ["data=image_folder", f"data.path={root}", "model.filters=[4]"]


def keras_cache_case(draw, folder: Path) -> list[str]:
    name = draw(st.sampled_from(["mnist", "fashion_mnist", "cifar10"]))
    datasets = data_files.write_keras_cache(folder / "keras", name, n_train=20, n_test=10)
    files = sorted(p for p in datasets.rglob("*") if p.is_file())
    damage(draw(st.sampled_from(files)), *draw(DAMAGE))
    return [f"data={name}", f"data.cache_dir={folder / 'keras'}", "model.filters=[4]"]


SOURCES = {
    "npz": npz_case,
    "csv": csv_case,
    "text_csv": text_csv_case,
    "tfrecord": tfrecord_case,
    "image_folder": image_folder_case,
    "keras_cache": keras_cache_case,
}


@pytest.mark.parametrize("source", sorted(SOURCES))
def test_any_damaged_file_works_or_is_one_line(source, tmp_path_factory):
    from tfhydra.config.errors import one_line_tensorflow_errors
    from tfhydra.data.pipeline import build_datasets
    from tfhydra.runner.plan import plan_run

    @counts_cases()
    @seed(HYPOTHESIS_SEED)
    @settings(max_examples=CASES, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(data=st.data())
    def case(data):
        folder = tmp_path_factory.mktemp(source)
        try:
            overrides = SOURCES[source](data.draw, folder)
            cfg = composed_config([*overrides, "data.cache=false"])  # the source's config composed once
            plan_run(cfg)
            datasets = build_datasets(cfg.data, 0)
            with one_line_tensorflow_errors(cfg):  # what the job wraps training in
                for split in (datasets.train, datasets.validation):
                    for _ in split:
                        pass
        except ConfigError as error:
            assert "\n" not in str(error) and str(error).strip()
        finally:
            shutil.rmtree(folder, ignore_errors=True)

    case()
