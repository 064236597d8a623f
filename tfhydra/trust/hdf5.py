"""The one reader of HDF5 weight files: every `.h5` tfhydra hands to Keras is opened here first, and only its
metadata is read (links, storage, filters, dtypes, declared shapes), never a dataset's bytes.

A weights file may come from anyone (`model.weights`, a keras-hub preset, an earlier run's checkpoints for
`compression.from_run`, this run's own `checkpoints/` on resume), and HDF5 can make a read of it read elsewhere or
allocate without bound. What a file is refused for, each in one line naming the file, the dataset and why:

- **bytes stored outside the file**: a dataset with external storage (`Dataset.external`: raw bytes at an offset
  of any file the process can read), a virtual dataset (`is_virtual`: a mapping from other files), an external
  link (an object of another HDF5 file), a soft link (a path that resolves elsewhere, perhaps through an external
  link), or a link of any other class. Links are listed with `visititems_links`, which reports a link without
  following it (`visititems` follows hard links only, so an external link would go unseen there);
- **filters that are not HDF5's own**: deflate, shuffle, Fletcher-32, szip, n-bit and scale-offset are built into
  the library; any other filter id makes HDF5 look for a plugin (code loaded from `HDF5_PLUGIN_PATH`;
  CVE-2026-2492 is TensorFlow's side of the same door);
- **types that are not plain numbers**: a dataset must be an integer, a float or a boolean (h5py's enum of
  FALSE/TRUE); compound, variable-length, reference, opaque, array and string types are refused (Keras writes none
  of them into a weights file). Attributes may also hold strings (tf_keras' `weight_names`), and are bounded in size;
- **sizes the model does not have**: every model weight in the file must have the shape of one of the model's own
  weights (a file may hold one variable twice: a pruning wrapper's kernel is also its layer's), every other array
  (the optimizer's slots, metric totals) the shape of a model weight or at most `SMALL_ARRAY` values, and all of
  them together at most `BOUND_FACTOR` times the model's values (weights, two Adam slots, EMA, AMSGrad's maximum)
  plus `SMALL_ARRAY`.
  So a file declaring a (100000, 10000) array is refused before 4 GB are allocated for it, whatever it stores.

The rules are Keras 3's (`keras/src/saving/saving_lib.py`: `safe_get_h5_group`, `safe_get_h5_dataset`, which
`keras/src/legacy/saving/legacy_h5_format.py` reads through, and `keras/src/saving/file_editor.py`), and the same
guards on tf-keras' main branch, not in any tf-keras release: tf-keras 2.21 reads external storage as it comes.
Keras 3 bounds a declared size only above 4 GiB and relative to the bytes stored; here the bound is the model, which
tfhydra knows before it loads. No TensorFlow here: shapes come in as tuples of ints.
"""

from __future__ import annotations

import io
import math
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import h5py  # type: ignore[import-untyped]
import numpy as np

from tfhydra.config.errors import ConfigError

# HDF5's own filters (H5Zpublic.h): deflate 1, shuffle 2, Fletcher-32 3, szip 4, n-bit 5, scale-offset 6. Any other
# id is a plugin that HDF5 would look for on disk.
BUILT_IN_FILTERS = {1: "deflate", 2: "shuffle", 3: "fletcher32", 4: "szip", 5: "nbit", 6: "scaleoffset"}
# Top-level groups of a weights file that are not the model's weights: Keras' `.weights.h5` of a compiled model
# keeps its optimizer's slots and its metrics' totals; a whole-model legacy `.h5` keeps `optimizer_weights` beside
# `model_weights`.
NOT_MODEL_WEIGHTS = ("optimizer", "metrics", "optimizer_weights")
SMALL_ARRAY = 1 << 20  # values: a scalar step count, a metric's thresholds, AUC's confusion counts
BOUND_FACTOR = 6  # the model, two Adam slots, EMA, AMSGrad's running maximum, and one to spare
MAX_RANK = 64  # Keras 3's limit on a dataset's rank (file_editor.py)
MAX_ATTRIBUTE_BYTES = 16 * 2**20  # an attribute's declared size: tf_keras' `weight_names` lists are a few kB
NUMBER_CLASSES = (h5py.h5t.INTEGER, h5py.h5t.FLOAT)
ACCEPTED = (
    "an HDF5 weights file whose arrays are all stored in it (no external storage, virtual dataset, external or soft "
    "link), plain numbers with HDF5's own filters only, each the shape of one of the model's weights (Keras' "
    "save_weights writes such files)"
)


@dataclass(frozen=True)
class WeightArray:
    """One dataset of a checked file: its path in the file, declared shape and dtype (nothing of it read)."""

    name: str
    shape: tuple[int, ...]
    dtype: np.dtype
    model: bool  # a model weight (not an optimizer slot nor a metric's total)
    stored: int = 0  # bytes the file stores for it (HDF5's storage size: a never-written chunked array stores 0)


class UnsafeWeights(ConfigError):
    """A weights file refused before a byte of its arrays is read: `<key>=<file>: dataset <name>: <why>` (or
    `<file>: ...` when no config key names it, as a run's own checkpoint)."""

    def __init__(self, path: Path | str, problem: str, key: str | None = None, misfit: bool = False):
        super().__init__(key or str(path), str(path) if key else None, ACCEPTED, problem)
        self.misfit = misfit  # safe to read, only not this model's: a caller may say it as a misfit


def checked_weights(
    path: Path | str, model_shapes: Sequence[Sequence[int]] | None, key: str | None = None, data: bytes | None = None
) -> list[WeightArray]:
    """Every dataset of the HDF5 file at `path` as declared, after the rules above; `model_shapes`: the shapes of
    the model's weights the file will be loaded into (None: the rules of storage, links, filters and types only, for a
    file whose model is not built yet). Raises UnsafeWeights, naming `key` when given; OSError when h5py cannot open
    the file (damaged, truncated, not HDF5), which each caller says in its own words or falls back from. `data`:
    the file's bytes, already read (a `.keras` archive's member, keras_archive.py), `path` then only names it."""
    source = io.BytesIO(data) if data is not None else path
    with h5py.File(source, "r") as file:  # an unreadable file's OSError is the caller's: a damaged one falls back
        arrays = _declared(file, path, key)
    if model_shapes is not None:
        _check_sizes(arrays, [tuple(int(d) for d in s) for s in model_shapes], path, key)
    return arrays


def checked_shards(
    paths: Sequence[Path], model_shapes: Sequence[Sequence[int]], key: str, whole: Path | str
) -> list[WeightArray]:
    """`checked_weights` of each file of one model's weights split in shards (Keras' sharded `.weights.json`), and
    the sizes again over all of them together, said of `whole` (the JSON naming the shards): a model cannot be made
    to allocate more by splitting a file."""
    arrays = [array for path in paths for array in checked_weights(path, model_shapes, key)]
    _check_sizes(arrays, [tuple(int(d) for d in s) for s in model_shapes], whole, key)
    return arrays


def model_array_count(arrays: Iterable[WeightArray]) -> int:
    return sum(array.model for array in arrays)


def weight_shapes(model) -> list[tuple[int, ...]]:
    """The shapes of a built Keras model's weights (either Keras: a TensorShape or a tuple), as ints."""
    return [tuple(int(d) for d in weight.shape) for weight in model.weights]


def checked_load(model, path: Path | str, key: str | None = None) -> None:
    """`model.load_weights(path)` once the file passed `checked_weights` against `model`'s own weights."""
    checked_weights(path, weight_shapes(model), key)
    model.load_weights(str(path))


def _declared(file: h5py.File, path: Path | str, key: str | None) -> list[WeightArray]:
    def refuse(name: str, why: str) -> UnsafeWeights:
        return UnsafeWeights(path, f"dataset {name}: {why}; refused before reading it", key)

    links: list[tuple[str, object]] = []
    file.visititems_links(lambda name, link: links.append((name, link)))  # reports links, follows none
    for name, link in links:
        if isinstance(link, h5py.ExternalLink):
            raise refuse(name, f"an external link to {link.filename}:{link.path}, outside the file")
        if isinstance(link, h5py.SoftLink):
            raise refuse(name, f"a soft link to {link.path} (a weights file holds its arrays, not links)")
        if not isinstance(link, h5py.HardLink):
            raise refuse(name, f"a link of another class ({type(link).__name__})")
    _check_attributes(file, "/", refuse)
    model_root = "model_weights" if "model_weights" in file else None
    arrays = []
    for name, _ in links:
        kind = file.get(name, getclass=True)
        item = file[name]
        _check_attributes(item, name, refuse)
        if kind is h5py.Group:
            continue
        if kind is not h5py.Dataset:
            raise refuse(name, f"an object of another kind ({getattr(kind, '__name__', kind)})")
        arrays.append(_dataset(item, name, refuse, model_root))
    return arrays


def _dataset(dataset: h5py.Dataset, name: str, refuse, model_root: str | None) -> WeightArray:
    plist = dataset.id.get_create_plist()
    if plist.get_external_count():
        where = ", ".join(os.fsdecode(entry[0]) for entry in dataset.external or [])
        raise refuse(name, f"its bytes are stored in another file ({where})")
    if plist.get_layout() == h5py.h5d.VIRTUAL:
        raise refuse(name, "a virtual dataset (its bytes are mapped from other files)")
    for index in range(plist.get_nfilters()):
        code = plist.get_filter(index)[0]
        if code not in BUILT_IN_FILTERS:
            raise refuse(name, f"filter {code} is not one of HDF5's own ({', '.join(BUILT_IN_FILTERS.values())})")
    type_class = dataset.id.get_type().get_class()
    dtype = dataset.dtype
    boolean = type_class == h5py.h5t.ENUM and dtype == np.bool_
    if not (type_class in NUMBER_CLASSES or boolean) or dtype.fields or dtype.subdtype or dtype.itemsize > 8:
        raise refuse(name, f"its type is {_type_name(dataset)}, not a plain number")
    shape = tuple(int(d) for d in (dataset.shape or ()))
    if dataset.shape is None or len(shape) > MAX_RANK:
        raise refuse(name, "its shape is null or of more than 64 dimensions")
    return WeightArray(name, shape, dtype, is_model_weight(name, model_root), dataset.id.get_storage_size())


def is_model_weight(name: str, model_root: str | None) -> bool:
    """A model's weight, not an optimizer's slot nor a metric's total: those sit in an `optimizer` or `metrics`
    group at the top or below a nested model (Keras 3 writes a nested compiled model's own optimizer under
    `layers/<model>/optimizer/`); a layer named so sits right below `layers`."""
    parts = name.split("/")
    if model_root:
        return parts[0] == model_root
    return not any(p in NOT_MODEL_WEIGHTS and (i == 0 or parts[i - 1] != "layers") for i, p in enumerate(parts[:-1]))


def _type_name(dataset: h5py.Dataset) -> str:
    names = {
        h5py.h5t.STRING: "a string",
        h5py.h5t.VLEN: "variable-length",
        h5py.h5t.REFERENCE: "a reference",
        h5py.h5t.COMPOUND: "compound",
        h5py.h5t.OPAQUE: "opaque",
        h5py.h5t.ARRAY: "an array type",
        h5py.h5t.ENUM: "an enumeration",
    }
    return names.get(dataset.id.get_type().get_class(), str(dataset.dtype))


def _check_attributes(item, name: str, refuse) -> None:
    """Attributes are read by Keras (tf_keras' `layer_names`, `weight_names`): numbers or strings, bounded."""
    for attribute in item.attrs:
        info = item.attrs.get_id(attribute)
        type_class = info.get_type().get_class()
        if type_class not in (*NUMBER_CLASSES, h5py.h5t.STRING, h5py.h5t.ENUM) and not (
            type_class == h5py.h5t.VLEN and h5py.check_string_dtype(info.dtype) is not None
        ):
            raise refuse(name, f"attribute {attribute} is not numbers or strings")
        values = math.prod(info.shape or ())
        if values * max(info.get_type().get_size(), 1) > MAX_ATTRIBUTE_BYTES:
            raise refuse(name, f"attribute {attribute} declares {values} values, beyond {MAX_ATTRIBUTE_BYTES} bytes")


def _check_sizes(arrays: list[WeightArray], model_shapes: list[tuple[int, ...]], path, key) -> None:
    shapes = set(model_shapes)
    values = sum(math.prod(s) for s in model_shapes)
    for array in arrays:
        if array.model and array.shape not in shapes:
            why = f"shape {array.shape}, which no weight of the model has (its shapes: {_said_shapes(shapes)})"
            raise UnsafeWeights(path, f"dataset {array.name}: {why}; refused before reading it", key, misfit=True)
        if not array.model and array.shape not in shapes and math.prod(array.shape) > SMALL_ARRAY:
            raise UnsafeWeights(
                path,
                f"dataset {array.name}: shape {array.shape} ({math.prod(array.shape)} values) is no weight's shape "
                f"and above {SMALL_ARRAY} values; refused before reading it",
                key,
            )
    total = sum(math.prod(array.shape) for array in arrays)
    bound = BOUND_FACTOR * values + SMALL_ARRAY
    if total > bound:
        raise UnsafeWeights(
            path,
            f"its datasets declare {total} values, more than {BOUND_FACTOR} x the model's {values} parameters "
            f"+ {SMALL_ARRAY}; refused before reading them",
            key,
        )


def _said_shapes(shapes: set) -> str:
    listed = [str(s) for s in sorted(shapes, key=lambda s: -math.prod(s))[:6]]
    more = len(shapes) - len(listed)
    return ", ".join(listed) + (f" and {more} more" if more > 0 else "")
