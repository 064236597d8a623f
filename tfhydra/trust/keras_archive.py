"""The `.keras` file a run exports, opened here before Keras reads it (`tfhydra.Result.load_model("keras")`).

A `.keras` file is a zip of `metadata.json`, `config.json` (the model's architecture) and `model.weights.h5` (its
weights, an HDF5 file). Keras reads the weights member whole into memory and hands it to h5py, so a run directory
written by anyone could make that read allocate what the zip's header declares, or, through an HDF5 file that
stores its bytes elsewhere (hdf5.py), put the bytes of any file the process can read into the model. Before Keras
opens it:

- the zip holds only those three members (and an `assets/` folder, where Keras keeps a layer's files), at most
  `MAX_MEMBERS`; `config.json` at most `MAX_CONFIG_BYTES`;
- the architecture is built from `config.json` by the caller (`shapes_of`: Keras deserialises it in safe mode, no
  weights read), so the weights are checked against the model they will be loaded into;
- the weights member's declared size is bounded by that model (`BOUND_FACTOR` times its values, as hdf5.py
  bounds the arrays, plus room for HDF5's own metadata), read no further than the bound, and checked by hdf5.py's
  rules: no bytes stored outside the file, no links, plain numbers, the model's shapes.

No TensorFlow here: the caller builds the model. The file is checked, then Keras opens it by its path again; a
file replaced between the two is the same race as every checked weights file (docs/reliability.md).
"""

from __future__ import annotations

import json
import math
import zipfile
from collections.abc import Callable, Sequence
from pathlib import Path

from tfhydra.config.errors import ConfigError
from tfhydra.trust.hdf5 import BOUND_FACTOR, SMALL_ARRAY, checked_weights

MEMBERS = ("metadata.json", "config.json", "model.weights.h5")
MAX_MEMBERS = 1024  # the three, and a layer's assets (a text vectorizer's vocabulary)
MAX_CONFIG_BYTES = 64 * 2**20  # an architecture's JSON: a few kB for tfhydra's models, MBs for the largest
METADATA_BYTES = 2**20  # HDF5's headers per dataset and group, and the optimizer's step counters
ACCEPTED = (
    "a .keras file as Keras writes it: a zip of metadata.json, config.json and model.weights.h5 (and assets/), "
    "whose weights fit the model its config.json describes"
)


def checked_keras_archive(path: Path | str, shapes_of: Callable[[dict], Sequence[Sequence[int]]]) -> None:
    """Raise ConfigError (UnsafeWeights for the weights member; one line naming the file) unless the `.keras` file
    at `path` passes the rules above; `shapes_of(config)` builds the architecture of `config.json` and returns its
    weights' shapes."""
    try:
        with zipfile.ZipFile(path) as archive:
            members = archive.infolist()
            if len(members) > MAX_MEMBERS:
                raise _refused(path, f"it holds {len(members)} files, more than {MAX_MEMBERS}")
            named = {member.filename: member for member in members}
            unknown = sorted(n for n in named if n not in MEMBERS and not n.startswith("assets/"))
            if unknown or any(n not in named for n in MEMBERS[1:]):
                missing = [n for n in MEMBERS[1:] if n not in named]
                said = f"unexpected {', '.join(unknown[:3])}" if unknown else f"no {', '.join(missing)}"
                raise _refused(path, f"{said} in the archive")
            config = json.loads(_read(archive, named["config.json"], MAX_CONFIG_BYTES, path))
            if not isinstance(config, dict):
                raise _refused(path, "config.json is not an object")
            shapes = [tuple(int(d) for d in s) for s in shapes_of(config)]
            values = sum(math.prod(s) for s in shapes)
            bound = 8 * (BOUND_FACTOR * values + SMALL_ARRAY) + METADATA_BYTES
            weights = _read(archive, named["model.weights.h5"], bound, path)
    except (zipfile.BadZipFile, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise _refused(path, f"not a readable .keras archive ({type(error).__name__})") from None
    try:
        checked_weights(f"{path} (model.weights.h5)", shapes, data=weights)
    except OSError:  # h5py: not an HDF5 file
        raise _refused(path, "its model.weights.h5 is not a readable HDF5 file") from None


def _read(archive: zipfile.ZipFile, member: zipfile.ZipInfo, bound: int, path: Path | str) -> bytes:
    """The member's bytes, refused when its header declares more than `bound` or it inflates past it."""
    if member.file_size > bound:
        raise _refused(path, f"{member.filename} declares {member.file_size} bytes, more than this model's {bound}")
    with archive.open(member) as stream:
        data = stream.read(bound + 1)
    if len(data) > bound:
        raise _refused(path, f"{member.filename} inflates past {bound} bytes")
    return data


def _refused(path: Path | str, problem: str) -> ConfigError:
    return ConfigError(str(path), None, ACCEPTED, f"{problem}; refused before Keras reads it")
