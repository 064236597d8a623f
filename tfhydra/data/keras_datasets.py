"""`mnist`, `fashion_mnist`, `cifar10`, `cifar100`: the `tf.keras.datasets` files, read from the Keras cache.

Files already in the cache are read directly; `tf.keras.datasets.<name>.load_data` runs
only when they are absent, to download them (with its own URLs and hash checks) into the
same place. Reading directly is what lets an offline machine use a cache filled elsewhere
or by hand: the Keras loaders re-download a file whose hash differs and require a
`.tar.gz` next to the extracted CIFAR folders. The cache is trusted as it is; a damaged
file is reported by name when it cannot be read.

Cache root: `data.cache_dir`, else `$KERAS_HOME`, else `~/.keras`; files live under
`<root>/datasets/` exactly as the Keras loaders leave them.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import os
import pickle
import socket
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tfhydra.config.errors import ConfigError
from tfhydra.data.arrays import image_source, read_npz
from tfhydra.data.schemas import SCHEMAS
from tfhydra.data.source import DATA, Source, class_labels
from tfhydra.data.splits import hold_out, wants_test

DOWNLOAD_TIMEOUT_S = 60  # per socket operation: an unreachable host fails instead of hanging
Arrays = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, "list[str] | None"]


@dataclass(frozen=True)
class KerasDataset:
    files: Callable[[object], list[str]]  # cfg -> paths under <root>/datasets/ that must exist
    read: Callable[[Path, object], Arrays]  # (<root>/datasets, cfg) -> x_train, y_train, x_test, y_test, class names
    download: Callable[[str, object], object]  # (root, cfg) -> anything; leaves the files in the cache


def _read_mnist(datasets: Path, cfg) -> Arrays:
    arrays = read_npz(datasets / "mnist.npz", {k: k for k in ("x_train", "y_train", "x_test", "y_test")})
    return arrays["x_train"], arrays["y_train"], arrays["x_test"], arrays["y_test"], None


_FASHION = [
    "train-images-idx3-ubyte.gz",
    "train-labels-idx1-ubyte.gz",
    "t10k-images-idx3-ubyte.gz",
    "t10k-labels-idx1-ubyte.gz",
]
_FASHION_NAMES = [
    "T-shirt/top",
    "Trouser",
    "Pullover",
    "Dress",
    "Coat",
    "Sandal",
    "Shirt",
    "Sneaker",
    "Bag",
    "Ankle boot",
]


def _read_idx(path: Path) -> np.ndarray:
    """An IDX file (gzipped): 2 zero bytes, a dtype byte (0x08 = uint8), the rank, big-endian uint32 dims, data."""
    data = _read_bytes(path, gzip.open)
    if len(data) < 4 or data[:2] != b"\0\0" or data[2] != 0x08:
        raise ConfigError(str(path), None, "a gzipped IDX file of uint8 values", "not an IDX file")
    rank = data[3]
    dims = np.frombuffer(data, ">u4", count=rank, offset=4).astype(int)
    values = np.frombuffer(data, np.uint8, offset=4 + 4 * rank)
    if values.size != np.prod(dims):
        raise ConfigError(str(path), None, "a complete IDX file", f"{values.size} values for dimensions {list(dims)}")
    return values.reshape(dims)


def _read_fashion(datasets: Path, cfg) -> Arrays:
    x_train, y_train, x_test, y_test = (_read_idx(datasets / "fashion-mnist" / name) for name in _FASHION)
    return x_train, y_train, x_test, y_test, _FASHION_NAMES


_CIFAR10 = ["data_batch_1", "data_batch_2", "data_batch_3", "data_batch_4", "data_batch_5", "test_batch"]


class _ArraysOnlyUnpickler(pickle.Unpickler):
    """Unpickles plain containers, strings, numbers and NumPy arrays, and nothing else.

    A pickle can name any importable callable and have it called while loading (`os.system` ...). The
    CIFAR python-version files hold a dict of bytes, lists and one uint8 array, so every global they
    may name is one of NumPy's array-rebuilding functions; any other name is refused before it is
    imported. `data.cache_dir` may point anywhere, so the files are not trusted.
    """

    ALLOWED = {
        ("numpy.core.multiarray", "_reconstruct"),
        ("numpy._core.multiarray", "_reconstruct"),
        ("numpy", "ndarray"),
        ("numpy", "dtype"),
        ("numpy.core.multiarray", "scalar"),
        ("numpy._core.multiarray", "scalar"),
        ("_codecs", "encode"),
    }  # bytes in a protocol-2 pickle written by Python 3: str -> bytes, nothing else

    def find_class(self, module: str, name: str):
        if (module, name) not in self.ALLOWED:
            raise pickle.UnpicklingError(
                f"it names {module}.{name}, which a CIFAR batch file never holds (refused without importing it)"
            )
        return super().find_class(module, name)


def _read_pickle(path: Path, *needs: str) -> dict:
    """A CIFAR python-version file: a pickled dict with bytes keys, read with `_ArraysOnlyUnpickler`; `needs`
    are the entries it must have. Images come back as (N, 32, 32, 3) uint8."""
    try:
        loaded = _ArraysOnlyUnpickler(io.BytesIO(_read_bytes(path, open)), encoding="bytes").load()
        if not isinstance(loaded, dict):
            raise ValueError(f"it holds a {type(loaded).__name__}, not a dict")
        batch = {key.decode() if isinstance(key, bytes) else key: value for key, value in loaded.items()}
        missing = [key for key in needs if key not in batch]
        if missing:
            raise ValueError(f"it has no {', '.join(missing)} entry")
        if "data" in needs:
            batch["data"] = np.asarray(batch["data"], np.uint8).reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1)
        return batch
    except (pickle.UnpicklingError, EOFError, AttributeError, ValueError, TypeError, IndexError, KeyError) as error:
        raise ConfigError(str(path), None, "a CIFAR python-version batch file", f"cannot read it ({error})") from None


def _label_names(path: Path, key: str) -> list[str] | None:
    if not path.is_file():
        return None
    return [n.decode() if isinstance(n, bytes) else str(n) for n in _read_pickle(path, key)[key]]


def _read_cifar10(datasets: Path, cfg) -> Arrays:
    folder = datasets / "cifar-10-batches-py"
    train = [_read_pickle(folder / name, "data", "labels") for name in _CIFAR10[:-1]]
    test = _read_pickle(folder / _CIFAR10[-1], "data", "labels")
    return (
        np.concatenate([b["data"] for b in train]),
        np.concatenate([b["labels"] for b in train]),
        test["data"],
        np.asarray(test["labels"]),
        _label_names(folder / "batches.meta", "label_names"),
    )


def _read_cifar100(datasets: Path, cfg) -> Arrays:
    folder, key = datasets / "cifar-100-python", f"{cfg.label_mode}_labels"
    train, test = _read_pickle(folder / "train", "data", key), _read_pickle(folder / "test", "data", key)
    return (
        train["data"],
        np.asarray(train[key]),
        test["data"],
        np.asarray(test[key]),
        _label_names(folder / "meta", f"{cfg.label_mode}_label_names"),
    )


def _read_bytes(path: Path, opener) -> bytes:
    try:
        with opener(path, "rb") as file:
            return file.read()
    except (OSError, EOFError, zlib.error) as error:  # gzip.BadGzipFile is an OSError; a damaged stream is zlib's
        raise ConfigError(
            str(path), None, "a readable file as the Keras loader leaves it", f"cannot read it ({error})"
        ) from None


def _keras_loader(name: str) -> Callable[[str, object], object]:
    def download(root: str, cfg):
        from tfhydra.platform.keras_lib import keras

        load_data = getattr(keras.datasets, name).load_data
        return load_data(cache_dir=root, label_mode=cfg.label_mode) if name == "cifar100" else load_data(cache_dir=root)

    return download


KERAS_DATASETS = {
    "mnist": KerasDataset(lambda cfg: ["mnist.npz"], _read_mnist, _keras_loader("mnist")),
    "fashion_mnist": KerasDataset(
        lambda cfg: [f"fashion-mnist/{n}" for n in _FASHION], _read_fashion, _keras_loader("fashion_mnist")
    ),
    "cifar10": KerasDataset(
        lambda cfg: [f"cifar-10-batches-py/{n}" for n in _CIFAR10], _read_cifar10, _keras_loader("cifar10")
    ),
    "cifar100": KerasDataset(
        lambda cfg: ["cifar-100-python/train", "cifar-100-python/test"], _read_cifar100, _keras_loader("cifar100")
    ),
}


def keras_cache_root(cache_dir: str | None) -> Path:
    return Path(cache_dir or os.environ.get("KERAS_HOME") or "~/.keras").expanduser()


def build_keras_dataset(cfg, seed: int) -> Source:
    """The Keras test split is the test split; validation is `data.val_fraction` of the training split."""
    dataset = KERAS_DATASETS[cfg.name]
    root = keras_cache_root(cfg.cache_dir)
    datasets = root / "datasets"
    missing = [name for name in dataset.files(cfg) if not (datasets / name).is_file()]
    if missing:
        try:
            with _socket_timeout(DOWNLOAD_TIMEOUT_S):
                dataset.download(str(root), cfg)
        except Exception as error:  # noqa: BLE001  (URL fetch failure, hash mismatch, no space left ...)
            reason = " ".join(str(error).split())[:300]
            raise ConfigError(
                "data",
                cfg.name,
                f"network access for the first run, or a local copy: data=npz "
                f"data.path=/path/to/{cfg.name}.npz (arrays x_train, y_train, x_test, y_test)",
                f"the dataset could not be downloaded ({reason}) and is not in the Keras cache "
                f"({datasets / missing[0]})",
            ) from None
        if not os.access(root, os.W_OK):  # the Keras loaders then download into /tmp/.keras instead
            datasets = Path("/tmp/.keras/datasets")
    x_train, y_train, x_test, y_test, stored_names = dataset.read(datasets, cfg)
    y_train, names = class_labels(y_train, f"{datasets}: {cfg.name} training labels", stored_names)
    y_test, _ = class_labels(y_test, f"{datasets}: {cfg.name} test labels", names)
    held = hold_out(y_train, cfg, seed, ships_test=True)
    return image_source(
        x_train[held.train],
        y_train[held.train],
        x_train[held.validation],
        y_train[held.validation],
        names,
        test=(x_test, y_test) if wants_test(cfg) else None,
    )


for _name in KERAS_DATASETS:
    DATA.register(_name, schema=SCHEMAS[f"data/{_name}"])(build_keras_dataset)


@contextlib.contextmanager
def _socket_timeout(seconds: float):
    previous = socket.getdefaulttimeout()
    socket.setdefaulttimeout(seconds)
    try:
        yield
    finally:
        socket.setdefaulttimeout(previous)
