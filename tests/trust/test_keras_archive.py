"""A run's `.keras` export read back (`tfhydra.Result.load_model("keras")`): the archive is checked before Keras reads
it (tfhydra/trust/keras_archive.py). Without the check, tf_keras 2.21's `load_model` put the bytes of a file outside
the archive into the model (a weights member with external storage: a bias of 1e6 + 0.25, ... came back)."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import numpy as np
import pytest
from hostile_h5 import KINDS, SAID, outside_values, poison

from tfhydra.config.errors import ConfigError
from tfhydra.export.served import loaded_export


@pytest.fixture(scope="module")
def archive(tmp_path_factory) -> tuple[Path, list[np.ndarray]]:
    """A tf_keras MLP 64 -> 8 -> 10 saved by Keras as `export/keras/model.keras`, and its weights."""
    import tf_keras as keras

    model = keras.Sequential([keras.Input((64,)), keras.layers.Dense(8), keras.layers.Dense(10)])
    folder = tmp_path_factory.mktemp("run") / "export" / "keras"
    folder.mkdir(parents=True)
    model.save(str(folder / "model.keras"))
    return folder / "model.keras", model.get_weights()


def rewritten(source: Path, to: Path, **members: bytes | None) -> Path:
    """A copy of the archive at `to/export/keras/model.keras` with `members` replaced (None: left out) or added."""
    target = to / "export" / "keras" / "model.keras"
    target.parent.mkdir(parents=True)
    with zipfile.ZipFile(source) as original, zipfile.ZipFile(target, "w") as copy:
        for member in original.infolist():
            if member.filename not in members:
                copy.writestr(member, original.read(member))
        for name, data in members.items():
            if data is not None:
                copy.writestr(name, data, compress_type=zipfile.ZIP_DEFLATED)
    return target


def refused(path: Path, *said: str) -> str:
    with pytest.raises(ConfigError) as caught:
        loaded_export("keras", path.parent)
    message = str(caught.value)
    assert message.startswith(str(path)) and "\n" not in message, message
    assert all(part in message for part in said), message
    return message


def test_a_run_s_own_archive_loads_from_its_folder_with_its_weights(archive):
    path, weights = archive
    model = loaded_export("keras", path.parent)  # the record names the folder, export/keras
    assert all(np.array_equal(a, b) for a, b in zip(model.get_weights(), weights, strict=True))


@pytest.mark.parametrize("kind", KINDS)
def test_a_weights_member_of_each_hostile_kind_is_refused_naming_the_dataset(archive, tmp_path, kind):
    path, _ = archive
    inner = tmp_path / "inner.weights.h5"
    inner.write_bytes(zipfile.ZipFile(path).read("model.weights.h5"))
    hostile = poison(inner, tmp_path / "hostile.weights.h5", kind)
    target = rewritten(path, tmp_path / "run", **{"model.weights.h5": hostile.path.read_bytes()})
    message = refused(target, "(model.weights.h5)", SAID[kind], hostile.dataset)
    assert str(outside_values(1)[0]) not in message


def test_a_weights_member_declaring_more_than_the_model_is_refused_before_it_is_read(archive, tmp_path):
    path, _ = archive
    # the MLP's 610 values bound the member at 9,466,464 bytes (six times its values and 2**20 small values, as
    # float64, and 1 MB of HDF5's headers); 72 MB of zeros, deflated to 73 kB in the archive
    target = rewritten(path, tmp_path / "run", **{"model.weights.h5": bytes(72 * 2**20)})
    refused(target, "model.weights.h5 declares 75497472 bytes, more than this model's")


@pytest.mark.parametrize(
    ("members", "said"),
    [
        ({"run.py": b"import os"}, "unexpected run.py in the archive"),
        ({"config.json": None}, "no config.json in the archive"),
        ({"config.json": b"[1, 2]"}, "config.json is not an object"),
        ({"config.json": b"\xff\xfe{"}, "not a readable .keras archive (UnicodeDecodeError)"),
        ({"model.weights.h5": b"not hdf5"}, "its model.weights.h5 is not a readable HDF5 file"),
    ],
    ids=["extra-member", "no-config", "config-not-object", "config-not-utf8", "weights-not-hdf5"],
)
def test_an_archive_keras_did_not_write_is_one_line(archive, tmp_path, members, said):
    path, _ = archive
    refused(rewritten(path, tmp_path / "run", **members), said, "refused before Keras reads it")


def test_a_file_that_is_not_a_zip_and_a_missing_model_keras_are_one_line(tmp_path):
    folder = tmp_path / "export" / "keras"
    folder.mkdir(parents=True)
    with pytest.raises(ConfigError, match="holds no model.keras"):
        loaded_export("keras", folder)
    (folder / "model.keras").write_text(json.dumps({"a": 1}))
    refused(folder / "model.keras", "not a readable .keras archive (BadZipFile)")
