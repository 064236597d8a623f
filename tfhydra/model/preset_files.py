"""What a keras-hub preset directory holds besides its JSON files, read before TensorFlow (no Keras here): which
HDF5 files keras-hub's loader will open for the backbone's weights, and whether the backbone config.json asks for
sizes those files do not declare.

The weights files are the ones Keras opens: `model.weights.h5`, or for a sharded preset `model_00000.weights.h5`
and every file the `weight_map` of `model.weights.json` names beside it (Keras' `ShardedH5IOStore` opens any name
there, not only `model_*.weights.h5`). Each goes through the trust boundary's HDF5 reader (tfhydra/trust/hdf5.py):
here, in the pre-flight, without a model (bytes stored elsewhere, links, filters, types), and in the job again
against the built backbone's shapes (tfhydra/model/hub.py).

A weights file that declares an array far larger than the bytes it stores (a shape bomb, Keras 3's rule from
1 MiB up) is refused here too: what the files declare bounds what the config may ask.

A config.json may ask keras-hub to build a backbone of any size (`vocabulary_size: 1000000000`), and keras-hub
allocates the backbone's variables while it builds it, before a weight is loaded. The files of a preset that loads
declare every weight of that backbone, so no size the config asks for can exceed the largest dimension they declare
(an embedding's rows are the vocabulary, a kernel's the hidden and intermediate widths, a position embedding's the
sequence length), nor a count exceed their number of arrays. A size-like key (`num_*`, `*_size`, `*_dim`,
`*_length`, `*_shape`) above that is one line naming config.json and the key, before TensorFlow is imported; an
image's sides (a key naming `image`) may reach `IMAGE_SIDE` besides, since a patch or a convolution does not
declare them.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

from tfhydra.config.bounded import load_json_bounded, read_text_bounded
from tfhydra.config.errors import ConfigError, clip, library_reason
from tfhydra.config.paths import special_refusal

SIZE_KEY = re.compile(r"^num_|_size$|_dim$|_dims$|_length$|_shape$")
# Keras 3's rule for a shape bomb (saving_lib.py: 1000 x the bytes stored), from 1 MiB up instead of 4 GiB: the
# dimensions a preset's weights declare bound the backbone config.json may ask for, so they must be stored.
EXPANSION, SMALL_BYTES = 1000, 2**20
IMAGE_SIDE = 4096  # an image key's sides: a 4096 x 4096 image at patch 1 is 16.8M positions, not an allocation bomb


def preset_weight_files(preset: Path, accepted: str) -> tuple[list[Path], Path]:
    """(every HDF5 file keras-hub opens for the backbone's weights, the file `load_weights` is given)."""
    single, index = preset / "model.weights.h5", preset / "model.weights.json"
    if single.is_file():
        return [single], single
    if index.is_file():
        return shard_files(index, accepted), index
    raise ConfigError("model.preset", str(preset), accepted, "it has no model.weights.h5 (nor model.weights.json)")


def shard_files(index: Path, accepted: str) -> list[Path]:
    """Every file Keras' sharded loader (`ShardedH5IOStore`) opens for `index` (model.weights.json): the first shard
    `model_00000.weights.h5`, then each file its `weight_map` names, beside the index. The JSON is read bounded, and a
    name that is not a plain file name beside it (a path, a special file, a missing file) is one line naming it: the
    reader checks exactly the files Keras will open."""
    try:
        weight_map = load_json_bounded(read_text_bounded(index)).get("weight_map")
    except (OSError, UnicodeDecodeError, ValueError, AttributeError) as error:
        raise ConfigError(
            "model.preset", str(index), accepted, f"it cannot be read ({library_reason(error)})"
        ) from None
    if not isinstance(weight_map, dict):
        raise ConfigError("model.preset", str(index), accepted, "its weight_map is not a JSON object")
    named = [n for value in weight_map.values() for n in (value if isinstance(value, list) else [value])]
    files: set[Path] = set()
    for name in [f"{index.name.removesuffix('.weights.json')}_00000.weights.h5", *named]:
        path = (
            index.with_name(name)
            if isinstance(name, str) and name not in ("", ".", "..") and Path(name).name == name
            else None
        )
        problem = "not a file name beside it" if path is None else special_refusal(path)
        if path is not None and not problem and not path.is_file():
            problem = "no such file beside it"
        if problem or path is None:
            raise ConfigError(
                "model.preset", str(index), accepted, f"its weight_map names {str(name)[:100]!r}: {problem}"
            )
        files.add(path)
    return sorted(files)


def check_preset_weights(preset: Path, accepted: str) -> None:
    """The preset's weights files through the HDF5 reader without a model, then config.json's sizes against what they
    declare (the module's docstring); ConfigError (UnsafeWeights) naming the file and the dataset or key."""
    from tfhydra.trust.hdf5 import UnsafeWeights, checked_weights  # h5py: only when a preset is named

    files, _ = preset_weight_files(preset, accepted)
    shapes = []
    for file in files:
        try:
            arrays = [array for array in checked_weights(file, None, key="model.preset") if array.model]
        except OSError as error:
            raise ConfigError("model.preset", str(file), accepted, f"not HDF5 ({library_reason(error)})") from None
        for array in arrays:
            declared = math.prod(array.shape) * array.dtype.itemsize
            if declared > EXPANSION * array.stored + SMALL_BYTES:
                raise UnsafeWeights(
                    file,
                    f"dataset {array.name}: declares {declared} bytes and stores {array.stored}; refused before the "
                    "backbone is built (a preset's weights are stored, not declared)",
                    key="model.preset",
                )
        shapes += [array.shape for array in arrays]
    largest = max([d for shape in shapes for d in shape] + [len(shapes)])
    config = load_json_bounded(read_text_bounded(preset / "config.json"))  # a JSON object naming a backbone: checked
    for key, value in config["config"].items():
        sizes = [v for v in (value if isinstance(value, list) else [value]) if type(v) is int]
        bound = max(largest, IMAGE_SIDE) if "image" in key else largest
        if SIZE_KEY.search(str(key)) and sizes and max(sizes) > bound:
            raise ConfigError(
                "model.preset",
                str(preset / "config.json"),
                accepted,
                f"its {key}={clip(str(value), 60)} asks for a size its weights files do not declare (their "
                f"largest dimension or count: {largest}); refused before the backbone is built",
            )
