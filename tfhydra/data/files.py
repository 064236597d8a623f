"""`image_folder` (class sub-folders of image files, decoded in the pipeline) and what image sources share.

Checked up front, cheaply: every file's size and first bytes (the PNG, JPEG, GIF or BMP signature), no
decoding; one image is decoded for the size when `data.image_size` is null. A file that passes that check
but still cannot be decoded is found when it is first read: `data.on_bad_file=fail` stops the run with one
line naming it, `skip` leaves it out (one stderr line naming it) and tops the epoch up with the next example,
so epochs keep their length. The TFRecord source lives in tfrecord.py.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import tensorflow as tf

from tfhydra.config.errors import ConfigError, first_line
from tfhydra.data.schemas import ImageFolderDataConfig
from tfhydra.data.source import AUTOTUNE, DATA, DataSpec, Source, image_size, take_examples
from tfhydra.data.splits import hold_out, wants_test

IMAGE_EXTENSIONS = (".png", ".jpg", ".jpeg", ".gif", ".bmp")  # what tf.io.decode_image reads
CHANNELS = {"grayscale": 1, "rgb": 3, "rgba": 4}


def float_image(image: tf.Tensor, size: tuple[int, int] | None, shape: tuple[int, ...] | None) -> tf.Tensor:
    """Integer pixels scaled to [0, 1] by their dtype's maximum (floats kept), resized when `size` is set;
    `shape` makes the static shape known (and mismatching images fail with a shape error)."""
    image = tf.image.convert_image_dtype(image, tf.float32)
    if size is not None:
        image = tf.image.resize(image, size)
    return image if shape is None else tf.ensure_shape(image, shape)


def split_or_shipped(train, labels: np.ndarray, shipped: dict, cfg, seed: int):
    """(train, validation, test, train labels, validation size, test size): the shipped `val` and `test` splits
    ({split: (dataset, size)}), and what is not shipped held out of `train` (tfhydra/data/splits.py)."""
    held = hold_out(labels, cfg, seed, ships_validation="val" in shipped, ships_test="test" in shipped)
    count = len(labels)
    out = {
        split: shipped.get(split) or (take_examples(train, getattr(held, attr), count), len(getattr(held, attr)))
        for split, attr in (("val", "validation"), ("test", "test"))
    }
    if "test" not in shipped and not len(held.test):
        out["test"] = (None, 0)
    return (
        take_examples(train, held.train, count),
        out["val"][0],
        out["test"][0],
        labels[held.train],
        out["val"][1],
        out["test"][1],
    )


# --- image_folder -----------------------------------------------------------------------------------------


@DATA.register("image_folder", schema=ImageFolderDataConfig)
def build_image_folder(cfg, seed: int) -> Source:
    """`<path>/train/<class>/*.png` (+ optional `<path>/val/<class>/...`), or `<path>/<class>/*.png`.

    A `train/` sub-folder selects the first layout; `val/` and `test/` beside it are the validation and test
    splits, and what is missing is held out of train (tfhydra/data/splits.py). Class names are the sorted
    folder names. `data.labels_csv` lists the images and their labels instead (tfhydra/data/image_labels.py),
    and the splits are held out of its rows.
    """
    from tfhydra.data.image_labels import folder_labels, labels_table

    root = Path(cfg.path).expanduser()
    if not root.is_dir():
        raise ConfigError("data.path", cfg.path, "a directory of class sub-folders of images", "not a directory")
    if cfg.get("labels_csv"):
        paths, labels, names = labels_table(cfg, root)
        if cfg.verify:
            paths, labels = readable_files(paths, labels, cfg.on_bad_file)
        return image_source(cfg, seed, paths, labels, names, {}, [])
    train_dir = root / "train" if (root / "train").is_dir() else root
    folders = tuple(class_folders(train_dir))
    if len(folders) < 2:
        raise ConfigError(
            str(train_dir),
            None,
            "at least 2 class sub-folders of images, e.g. train/cat/*.png and train/dog/*.png",
            f"found {len(folders)} class folder(s){': ' if folders else ''}{', '.join(folders)}",
        )
    paths, indices = list_images(train_dir, folders)
    labels, names = folder_labels(indices, folders, train_dir, cfg)
    if cfg.verify:
        paths, labels = readable_files(paths, labels, cfg.on_bad_file)
    shipped, shipped_paths = {}, []  # the val/ and test/ folders beside train/ (test/ only while the test split is on)
    for split in ("val", "test") if wants_test(cfg) else ("val",):
        if train_dir != root and (root / split).is_dir():
            split_paths, split_indices = list_images(root / split, folders, required=False)
            split_labels = folder_labels(split_indices, folders, root / split, cfg, names)[0]
            if cfg.verify:
                split_paths, split_labels = readable_files(split_paths, split_labels, cfg.on_bad_file)
            shipped[split] = (tf.data.Dataset.from_tensor_slices((split_paths, split_labels)), len(split_labels))
            shipped_paths += list(split_paths)
    return image_source(cfg, seed, paths, labels, names, shipped, shipped_paths)


def image_source(cfg, seed: int, paths: list[str], labels: np.ndarray, names, shipped: dict, shipped_paths) -> Source:
    """The source of image files and their labels (as the task read them), with the shipped splits' files."""
    channels, size = CHANNELS[cfg.color_mode], image_size(cfg.image_size)
    check_image_headers(paths + shipped_paths, cfg.max_pixels, size is None)
    if size is None:
        size = first_size(paths[0], channels)
    train, validation, test, train_labels, val_size, test_size = split_or_shipped(
        tf.data.Dataset.from_tensor_slices((paths, labels)), labels, shipped, cfg, seed
    )

    def decode(path, label):
        image = tf.io.decode_image(tf.io.read_file(path), channels=channels, expand_animations=False)
        return image, label

    def prepare(image, label):
        return float_image(image, size, (*size, channels)), label

    spec = DataSpec((*size, channels), len(names), names, len(train_labels), val_size, test_size=test_size)
    return Source(
        train,
        validation,
        spec,
        decode=decode,
        train_labels=train_labels,
        prepare=prepare,
        test=test,
        decode_all=lambda dataset, count: guarded_decode(dataset, decode, count, cfg.on_bad_file, channels),
    )


def class_folders(folder: Path) -> list[str]:
    return sorted(d.name for d in folder.iterdir() if d.is_dir() and not d.name.startswith("."))


def list_images(folder: Path, names: tuple[str, ...], required: bool = True) -> tuple[list[str], np.ndarray]:
    """Image files under each class folder (recursively, sorted) and their labels; other files are ignored.

    `required`: every class must have images here (training); validation may lack some classes.
    """
    unknown = sorted(set(class_folders(folder)) - set(names))
    if unknown:
        raise ConfigError(
            str(folder / unknown[0]),
            None,
            f"the class folders of the training images ({', '.join(names)})",
            "a validation class folder with no training folder",
        )
    paths, labels = [], []
    for label, name in enumerate(names):
        files = (
            sorted(str(p) for p in (folder / name).rglob("*") if p.suffix.lower() in IMAGE_EXTENSIONS and p.is_file())
            if (folder / name).is_dir()
            else []
        )
        if not files and required:
            raise ConfigError(
                str(folder / name), None, f"image files ({', '.join(IMAGE_EXTENSIONS)})", "an empty class folder"
            )
        paths += files
        labels += [label] * len(files)
    return paths, np.array(labels, dtype=np.int64)


# The first bytes of each format tf.io.decode_image reads, and how a complete file of it ends.
SIGNATURES = {
    b"\x89PNG\r\n\x1a\n": b"IEND\xaeB`\x82",
    b"\xff\xd8\xff": b"\xff\xd9",
    b"GIF87a": b";",
    b"GIF89a": b";",
    b"BM": None,
}


def looks_complete(path: str) -> str | None:
    """None when the file starts with an image signature and ends as that format ends (two small reads, no
    decoding: catches empty, foreign and truncated files), else why not."""
    try:
        with open(path, "rb") as file:
            head = file.read(8)
            size = file.seek(0, os.SEEK_END)
            file.seek(max(0, size - 64))
            tail = file.read()
    except OSError as error:
        return f"cannot read it ({error.strerror})"
    ending = next((end for start, end in SIGNATURES.items() if head.startswith(start)), False)
    if ending is False:
        return "an empty file" if not head else "not a PNG, JPEG, GIF or BMP file (its first bytes)"
    if ending is None:  # BMP: the header gives the file's size
        with open(path, "rb") as file:
            header = file.read(6)
        stated = int.from_bytes(header[2:6], "little") if len(header) == 6 else size + 1
        return None if stated <= size else f"truncated ({size} of {stated} bytes)"
    return None if ending in tail else "truncated (it does not end as the format does)"


def readable_files(paths: list[str], labels: np.ndarray, on_bad_file: str) -> tuple[list[str], np.ndarray]:
    """The files that `looks_complete`; others are a ConfigError naming the first (`fail`), or left out with a
    log line naming them (`skip`)."""
    bad = [(path, why) for path in paths for why in [looks_complete(path)] if why is not None]
    if not bad:
        return paths, labels
    if on_bad_file == "fail":
        raise ConfigError(
            bad[0][0],
            None,
            "image files TensorFlow can decode (PNG, JPEG, GIF, BMP)",
            f"cannot decode it as an image ({len(bad)} of {len(paths)} files are unreadable)",
        )
    import logging

    logging.getLogger("tfhydra").warning(
        "data.on_bad_file=skip: left out %d unreadable file(s): %s",
        len(bad),
        "; ".join(f"{p} ({why})" for p, why in bad[:5]) + (" ..." if len(bad) > 5 else ""),
    )
    dropped = {p for p, _ in bad}
    keep = [i for i, p in enumerate(paths) if p not in dropped]
    return [paths[i] for i in keep], labels[keep]


def guarded_decode(dataset: tf.data.Dataset, decode, count: int, on_bad_file: str, channels: int):
    """`decode` on (path, label) pairs, where a file that cannot be decoded names itself instead of failing as
    an anonymous TensorFlow error: each element is decoded in a dataset of its own whose errors are dropped,
    and an empty result stands for the file. `skip` leaves it out and repeats the split as needed, so the
    split keeps `count` elements (tfhydra and Keras both rely on the count)."""

    def one(path, label):
        good = tf.data.Dataset.from_tensors((path, label)).map(decode).ignore_errors()
        good = good.map(lambda image, y: (image, y, path, True))
        bad = tf.data.Dataset.from_tensors((tf.zeros([0, 0, channels], tf.uint8), label, path, False))
        return good.concatenate(bad).take(1)

    checked = dataset.interleave(one, cycle_length=AUTOTUNE, num_parallel_calls=AUTOTUNE, deterministic=True)
    if on_bad_file == "fail":

        def assert_good(image, label, path, ok):
            check = tf.debugging.Assert(ok, ["data.on_bad_file=fail: cannot decode", path, "as an image"])
            with tf.control_dependencies([check]):
                return tf.identity(image), label

        return checked.map(assert_good, num_parallel_calls=AUTOTUNE)

    def report(image, label, path, ok):
        if not ok:
            tf.print(
                "data.on_bad_file=skip: left out",
                path,
                "(cannot decode it as an image)",
                output_stream="file:///dev/stderr",
            )
        return ok

    kept = checked.filter(report).map(lambda image, label, path, ok: (image, label))
    return kept.repeat().take(count)


def check_image_headers(paths: list[str], max_pixels: int, one_size: bool) -> None:
    """From each file's header, before any decoding (tfhydra/data/image_headers.py): no image over `max_pixels`
    (`data.max_pixels`: a small file can decode to gigabytes), and with `data.image_size: null` (`one_size`) all of
    one size, since nothing resizes them then."""
    from tfhydra.data.image_headers import header_size

    first = None
    for path in paths:
        size = header_size(path)
        if size is None:
            continue  # not a header this reads: the decoder's checks answer for the file
        if size[0] * size[1] > max_pixels:
            raise ConfigError(
                path,
                None,
                f"images of at most data.max_pixels={max_pixels} pixels (or raise it)",
                f"{size[0]}x{size[1]} = {size[0] * size[1]} pixels",
            )
        if one_size and first is not None and size != first[1]:
            raise ConfigError(
                "data.image_size",
                None,
                f"[height, width] to resize every image to (e.g. data.image_size=[{first[1][0]},{first[1][1]}])",
                f"null keeps each stored size, and "
                f"they differ: {first[0]} is {first[1][0]}x{first[1][1]}, {path} is {size[0]}x{size[1]}",
            )
        first = first or (path, size)


def first_size(path: str, channels: int) -> tuple[int, int]:
    """(height, width) of one image, for `data.image_size: null` (every image must then have it)."""
    try:
        image = tf.io.decode_image(tf.io.read_file(path), channels=channels, expand_animations=False)
    except (tf.errors.InvalidArgumentError, tf.errors.NotFoundError) as error:
        raise ConfigError(
            path,
            None,
            "image files TensorFlow can decode (PNG, JPEG, GIF, BMP)",
            f"cannot decode it as an image ({first_line(error)})",
        ) from None
    return int(image.shape[0]), int(image.shape[1])
