"""Hostile copies of a real Keras weights file, made with h5py: issue 57's four kinds, shared by the tests through the
command (tests/trust/test_weight_files.py, tests/model/test_keras_hub.py) and by benchmarks/hostile_weights.py.

    external_storage  a model bias whose bytes are stored in `<name>.outside.bin` beside the copy
    virtual_dataset   a model bias mapped from dataset /x of `<name>.outside.h5`
    external_link     a model bias that is a link to /x of `<name>.outside.h5`
    shape_bomb        a model kernel declared (100000, 10000) float32 (4 GB), chunked and compressed, never written

The outside bytes are `outside_values(n)` (1e6 + 0.25, 2e6 + 0.25, ...: no trained weight holds them), so a test
can look for them in everything a run wrote; the shape bomb keeps the file a few kB larger than the original.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

import h5py
import numpy as np

KINDS = ("external_storage", "virtual_dataset", "external_link", "shape_bomb")
BOMB = (100000, 10000)
# What tfhydra's line says of each kind (tfhydra/trust/hdf5.py)
SAID = {
    "external_storage": "its bytes are stored in another file",
    "virtual_dataset": "a virtual dataset",
    "external_link": "an external link to",
    "shape_bomb": f"shape {BOMB}, which no weight of the model has",
}
NOT_MODEL = ("optimizer", "metrics", "optimizer_weights")


@dataclass(frozen=True)
class Poisoned:
    path: Path  # the hostile weights file
    dataset: str  # the dataset made hostile
    outside: Path | None  # the file its bytes would come from (None: the shape bomb reads nothing elsewhere)
    secret: bytes  # those bytes ("" for the shape bomb)


def outside_values(n: int) -> np.ndarray:
    return np.arange(1, n + 1, dtype=np.float32) * 1e6 + 0.25


def model_datasets(file: h5py.File) -> list[tuple[str, tuple[int, ...]]]:
    """(name, shape) of every model weight of a Keras weights file, in the file's order."""
    found: list[tuple[str, tuple[int, ...]]] = []

    def visit(name: str, item) -> None:
        if isinstance(item, h5py.Dataset) and name.split("/")[0] not in NOT_MODEL and "/optimizer/" not in name:
            found.append((name, tuple(item.shape)))

    file.visititems(visit)
    return found


def poison(weights: Path, to: Path, kind: str) -> Poisoned:
    """A copy of `weights` at `to` with one model weight made hostile in the way `kind` names."""
    shutil.copy(weights, to)
    with h5py.File(to, "a") as file:
        datasets = model_datasets(file)
        rank = 2 if kind == "shape_bomb" else 1
        name, shape = next((n, s) for n, s in datasets if len(s) == rank)
        dtype = file[name].dtype
        del file[name]
        if kind == "shape_bomb":
            file.create_dataset(name, shape=BOMB, dtype="float32", chunks=(1000, 1000), compression="gzip")
            return Poisoned(to, name, None, b"")
        secret = outside_values(shape[0]).astype(dtype)
        if kind == "external_storage":
            outside = to.with_name(f"{to.name}.outside.bin")
            outside.write_bytes(secret.tobytes())
            file.create_dataset(name, shape=shape, dtype=dtype, external=[(str(outside), 0, secret.nbytes)])
        else:
            outside = to.with_name(f"{to.name}.outside.h5")
            with h5py.File(outside, "w") as other:
                other["x"] = secret
            if kind == "virtual_dataset":
                layout = h5py.VirtualLayout(shape=shape, dtype=dtype)
                layout[:] = h5py.VirtualSource(str(outside), "x", shape=shape)
                file.create_virtual_dataset(name, layout)
            elif kind == "external_link":
                file[name] = h5py.ExternalLink(str(outside), "/x")
            else:
                raise ValueError(f"no such kind: {kind} (one of {', '.join(KINDS)})")
    return Poisoned(to, name, outside, secret.tobytes())


def files_holding(root: Path, secret: bytes) -> list[Path]:
    """Every file under `root` whose bytes contain `secret` (the outside bytes, as stored)."""
    if not secret or not root.exists():
        return []
    return [p for p in sorted(root.rglob("*")) if p.is_file() and not p.is_symlink() and secret in p.read_bytes()]
