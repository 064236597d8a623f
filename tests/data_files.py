"""Small real input files for the data sources, written the way users' own tools write them.

Every class lights its own band of rows, so a model can tell the classes apart after one
epoch; labels cycle through the classes so every class is present in any file.
"""

from __future__ import annotations

import csv
import gzip
import pickle
from pathlib import Path

import numpy as np


def class_images(n: int, shape: tuple[int, ...], classes: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """uint8 images of `shape` ((H, W) or (H, W, C)) and int labels 0..classes-1."""
    rng = np.random.default_rng(seed)
    labels = rng.permutation(np.arange(n) % classes)
    images = rng.integers(0, 60, size=(n, *shape), dtype=np.uint8)
    band = max(1, shape[0] // classes)
    for image, label in zip(images, labels, strict=True):
        image[label * band : (label + 1) * band] += 180
    return images, labels


def write_npz(path: Path, n_train: int = 64, n_test: int = 32, shape=(28, 28), classes: int = 4, **renamed) -> Path:
    """The Keras mnist.npz layout (uint8 (N, H, W) images, uint8 labels); `renamed` maps x_train=... to other names."""
    x_train, y_train = class_images(n_train, shape, classes, seed=1)
    x_test, y_test = class_images(n_test, shape, classes, seed=2)
    arrays = {
        "x_train": x_train,
        "y_train": y_train.astype(np.uint8),
        "x_test": x_test,
        "y_test": y_test.astype(np.uint8),
    }
    np.savez(path, **{renamed.get(k, k): v for k, v in arrays.items()})
    return path


def serialized_examples(
    images: np.ndarray, labels: np.ndarray, encoding: str = "png", image_key: str = "image", label_key: str = "label"
) -> list[bytes]:
    import tensorflow as tf

    records = []
    for image, label in zip(images, labels, strict=True):
        data = tf.io.encode_png(image).numpy() if encoding == "png" else image.tobytes()
        feature = {
            image_key: tf.train.Feature(bytes_list=tf.train.BytesList(value=[data])),
            label_key: label_feature(np.asarray(label).reshape(-1)),
        }
        records.append(tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString())
    return records


def label_feature(values: np.ndarray):
    """An int64_list of integer labels, a float_list of float ones (one value, or a fixed-length row)."""
    import tensorflow as tf

    if values.dtype.kind == "f":
        return tf.train.Feature(float_list=tf.train.FloatList(value=[float(v) for v in values]))
    return tf.train.Feature(int64_list=tf.train.Int64List(value=[int(v) for v in values]))


def write_tfrecords(
    folder: Path,
    prefix: str,
    n: int = 64,
    shards: int = 4,
    shape=(28, 28, 1),
    classes: int = 4,
    encoding: str = "png",
    seed: int = 0,
    **keys,
) -> str:
    """`shards` files `<prefix>-0000i-of-0000n.tfrecord`; returns their glob pattern."""
    import tensorflow as tf

    folder.mkdir(parents=True, exist_ok=True)
    images, labels = class_images(n, shape, classes, seed)
    records = serialized_examples(images, labels, encoding, **keys)
    for shard in range(shards):
        with tf.io.TFRecordWriter(str(folder / f"{prefix}-{shard:05d}-of-{shards:05d}.tfrecord")) as writer:
            for record in records[shard::shards]:
                writer.write(record)
    return str(folder / f"{prefix}-*.tfrecord")


def write_image_folder(
    root: Path,
    classes=("cat", "dog", "owl"),
    per_class: int = 8,
    size=(20, 24),
    val_per_class: int = 0,
    test_per_class: int = 0,
) -> Path:
    """root/train/<class>/<i>.png (RGB PNGs of `size`), and root/val/<class>/... (root/test/<class>/...) when
    val_per_class (test_per_class) > 0."""
    import tensorflow as tf

    for split, count in [("train", per_class), ("val", val_per_class), ("test", test_per_class)]:
        if not count:
            continue
        images, labels = class_images(count * len(classes), (*size, 3), len(classes), seed=len(split))
        for i, (image, label) in enumerate(zip(images, labels, strict=True)):
            folder = root / split / classes[label]
            folder.mkdir(parents=True, exist_ok=True)
            (folder / f"{i:04d}.png").write_bytes(tf.io.encode_png(image).numpy())
    return root


def write_csv(path: Path, n: int = 64, classes=("setosa", "versicolor", "virginica"), seed: int = 0) -> Path:
    """Columns x1, x2, x3 (x2 on a large scale), label (class names); x3 is constant."""
    rng = np.random.default_rng(seed)
    labels = rng.permutation(np.arange(n) % len(classes))
    with open(path, "w", newline="") as file:
        writer = csv.writer(file)
        writer.writerow(["x1", "x2", "x3", "label"])
        for label in labels:
            writer.writerow(
                [f"{label + rng.normal(0, 0.3):.4f}", f"{1000 * label + rng.normal(0, 50):.2f}", "7", classes[label]]
            )
    return path


WORDS = {"pos": ["great", "lovely", "superb", "fun"], "neg": ["awful", "boring", "dull", "bad"]}


def write_text_csv(path: Path, n: int = 64, seed: int = 0, tag_rows: bool = False) -> Path:
    """Columns text, label: each review uses its class's words among shared filler words
    (and, with `tag_rows`, a word of its own: row<i>)."""
    rng = np.random.default_rng(seed)
    filler = ["the", "film", "was", "a", "plot", "and", "it"]
    with open(path, "w", newline="") as file:
        writer = csv.writer(file)
        writer.writerow(["text", "label"])
        for i in range(n):
            label = ["neg", "pos"][i % 2]
            words = list(rng.choice(filler, size=6)) + list(rng.choice(WORDS[label], size=2))
            text = " ".join(rng.permutation(words)).capitalize() + "!"
            writer.writerow([f"{text} row{i}" if tag_rows else text, label])
    return path


# --- the Keras cache, as tf.keras.datasets leaves it -----------------------------------------------------


def _idx_gz(path: Path, array: np.ndarray) -> None:
    header = bytes([0, 0, 0x08, array.ndim]) + np.asarray(array.shape, ">u4").tobytes()
    with gzip.open(path, "wb") as file:
        file.write(header + array.astype(np.uint8).tobytes())


def _pickle(path: Path, payload: dict) -> None:
    with open(path, "wb") as file:
        pickle.dump(payload, file, protocol=2)


def write_keras_cache(root: Path, name: str, n_train: int = 40, n_test: int = 20) -> Path:
    """A small copy of `name`'s files under `root/datasets/` (the cache layout of a real download)."""
    datasets = root / "datasets"
    datasets.mkdir(parents=True, exist_ok=True)
    if name in ("mnist", "fashion_mnist"):
        x_train, y_train = class_images(n_train, (28, 28), 10, seed=1)
        x_test, y_test = class_images(n_test, (28, 28), 10, seed=2)
        if name == "mnist":
            np.savez(
                datasets / "mnist.npz",
                x_train=x_train,
                y_train=y_train.astype(np.uint8),
                x_test=x_test,
                y_test=y_test.astype(np.uint8),
            )
        else:
            folder = datasets / "fashion-mnist"
            folder.mkdir(exist_ok=True)
            for prefix, x, y in [("train", x_train, y_train), ("t10k", x_test, y_test)]:
                _idx_gz(folder / f"{prefix}-images-idx3-ubyte.gz", x)
                _idx_gz(folder / f"{prefix}-labels-idx1-ubyte.gz", y)
        return datasets
    classes = 10 if name == "cifar10" else 100
    x_train, y_train = class_images(n_train, (32, 32, 3), classes, seed=1)
    x_test, y_test = class_images(n_test, (32, 32, 3), classes, seed=2)
    flat = lambda x: x.transpose(0, 3, 1, 2).reshape(len(x), -1)  # noqa: E731  (rows of R, then G, then B planes)
    if name == "cifar10":
        folder = datasets / "cifar-10-batches-py"
        folder.mkdir(exist_ok=True)
        parts = np.array_split(np.arange(n_train), 5)
        for i, part in enumerate(parts, start=1):
            _pickle(folder / f"data_batch_{i}", {b"labels": y_train[part].tolist(), b"data": flat(x_train[part])})
        _pickle(folder / "test_batch", {b"labels": y_test.tolist(), b"data": flat(x_test)})
        _pickle(folder / "batches.meta", {b"label_names": [f"c10_{i}".encode() for i in range(10)]})
    else:
        folder = datasets / "cifar-100-python"
        folder.mkdir(exist_ok=True)
        for split, x, y in [("train", x_train, y_train), ("test", x_test, y_test)]:
            _pickle(folder / split, {b"fine_labels": y.tolist(), b"coarse_labels": (y // 5).tolist(), b"data": flat(x)})
        _pickle(
            folder / "meta",
            {
                b"fine_label_names": [f"fine{i}".encode() for i in range(100)],
                b"coarse_label_names": [f"coarse{i}".encode() for i in range(20)],
            },
        )
    return datasets


def damage_file(path: Path, how: str = "flip") -> Path:
    """Corrupt a file in place as a failing disk or an interrupted copy would: flip one byte in the middle,
    or cut the last quarter off."""
    data = bytearray(Path(path).read_bytes())
    if how == "truncate":
        data = data[: len(data) * 3 // 4]
    else:
        data[len(data) // 2] ^= 0xFF
    Path(path).write_bytes(bytes(data))
    return Path(path)
