"""Every HDF5 weights file tfhydra hands to Keras goes through one reader first (tfhydra/trust/hdf5.py): hostile
files built with h5py (external storage pointing at a file of known bytes, a virtual dataset, an external link, a soft
link, a (100000, 10000) array declared in a small file, plugin filters, non-numeric types) are each refused in one
line naming the file, the dataset and why, before a byte of an array is read; through the reader directly
(milliseconds) and through the command: `model.weights` under tf_keras and Keras 3, `compression.from_run` and a
resume, with a normal run's weights and a normal resume as the controls."""

from __future__ import annotations

import json
import math
import os
import re
import resource
import shutil
from pathlib import Path

import h5py
import numpy as np
import pytest
from conftest import HYPOTHESIS_SEED, counts_cases, last_line, run_cli
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st
from shared_runs import DIGITS_MLP, copy_run, trained_run

from tfhydra.config.errors import ConfigError, library_reason
from tfhydra.trust.hdf5 import UnsafeWeights, checked_weights, is_model_weight, model_array_count

# A Keras `.weights.h5` (Keras 3 and tf_keras' save_weights write this layout): an MLP 64 -> 8 -> 10 with Adam's slots
MODEL_SHAPES = [(64, 8), (8,), (8, 10), (10,)]
SECRET = np.arange(1, 11, dtype=np.float32) * 1e6  # the outside bytes: 1e6, 2e6 ... a trained bias never holds


def keras_file(path: Path) -> Path:
    rng = np.random.default_rng(0)
    with h5py.File(path, "w") as file:
        for layer, (kernel, bias) in {"dense": MODEL_SHAPES[:2], "dense_1": MODEL_SHAPES[2:]}.items():
            file.create_dataset(f"layers/{layer}/vars/0", data=rng.random(kernel, dtype=np.float32))
            file.create_dataset(f"layers/{layer}/vars/1", data=np.zeros(bias, np.float32))
        file.create_dataset("optimizer/vars/0", data=np.int64(3))
        for i, shape in enumerate([s for s in MODEL_SHAPES for _ in (0, 1)], start=1):
            file.create_dataset(f"optimizer/vars/{i}", data=np.zeros(shape, np.float32))
        file.create_dataset("metrics/mean/vars/0", data=np.float32(0.5))
        file.create_group("vars")
    return path


def secret_file(directory: Path) -> Path:
    path = directory / "secret.bin"
    path.write_bytes(SECRET.tobytes())
    return path


def replace(file: h5py.File, name: str, **dataset) -> None:
    del file[name]
    file.create_dataset(name, **dataset)


def external_storage(file, tmp):
    replace(file, "layers/dense_1/vars/1", shape=(10,), dtype="float32", external=[(str(secret_file(tmp)), 0, 40)])


def virtual_dataset(file, tmp):
    source = tmp / "source.h5"
    with h5py.File(source, "w") as other:
        other["x"] = SECRET
    layout = h5py.VirtualLayout(shape=(10,), dtype="float32")
    layout[:] = h5py.VirtualSource(str(source), "x", shape=(10,))
    del file["layers/dense_1/vars/1"]
    file.create_virtual_dataset("layers/dense_1/vars/1", layout)


def external_link(file, tmp):
    source = tmp / "source.h5"
    with h5py.File(source, "w") as other:
        other["x"] = SECRET
    del file["layers/dense_1/vars/1"]
    file["layers/dense_1/vars/1"] = h5py.ExternalLink(str(source), "/x")


def soft_link(file, tmp):
    del file["layers/dense_1/vars/1"]
    file["layers/dense_1/vars/1"] = h5py.SoftLink("/optimizer/vars/7")


def shape_bomb(file, tmp):  # 4 GB declared, a few kB stored: chunked, compressed, never written
    replace(
        file, "layers/dense/vars/0", shape=(100000, 10000), dtype="float32", chunks=(1000, 1000), compression="gzip"
    )


def plugin_filter(file, tmp):  # LZF is h5py's filter (id 32000), not HDF5's: any such id is a plugin search
    replace(file, "layers/dense/vars/1", data=np.zeros(8, np.float32), compression="lzf")


def compound(file, tmp):
    replace(file, "layers/dense/vars/1", data=np.zeros(8, dtype=[("a", "f4"), ("b", "f4")]))


def variable_length(file, tmp):
    replace(file, "layers/dense/vars/1", shape=(8,), dtype=h5py.vlen_dtype(np.float32))


def reference(file, tmp):
    replace(file, "layers/dense/vars/1", shape=(8,), dtype=h5py.ref_dtype)


def huge_slot(file, tmp):
    replace(file, "optimizer/vars/1", shape=(3000, 1000), dtype="float32", chunks=(100, 100), compression="gzip")


HOSTILE = {
    external_storage: ("layers/dense_1/vars/1", "its bytes are stored in another file"),
    virtual_dataset: ("layers/dense_1/vars/1", "a virtual dataset"),
    external_link: ("layers/dense_1/vars/1", "an external link to"),
    soft_link: ("layers/dense_1/vars/1", "a soft link to /optimizer/vars/7"),
    shape_bomb: ("layers/dense/vars/0", "shape (100000, 10000), which no weight of the model has"),
    plugin_filter: ("layers/dense/vars/1", "filter 32000 is not one of HDF5's own"),
    compound: ("layers/dense/vars/1", "its type is compound, not a plain number"),
    variable_length: ("layers/dense/vars/1", "its type is variable-length, not a plain number"),
    reference: ("layers/dense/vars/1", "its type is a reference, not a plain number"),
    huge_slot: ("optimizer/vars/1", "is no weight's shape and above 1048576 values"),
}


def hostile(tmp_path: Path, make) -> Path:
    path = keras_file(tmp_path / f"{make.__name__}.weights.h5")
    with h5py.File(path, "a") as file:
        make(file, tmp_path)
    return path


def test_a_keras_weights_file_passes_and_its_model_arrays_are_counted(tmp_path):
    arrays = checked_weights(keras_file(tmp_path / "ok.weights.h5"), MODEL_SHAPES)
    assert model_array_count(arrays) == 4 and len(arrays) == 4 + 9 + 1
    assert {a.name for a in arrays if a.model} == {f"layers/{n}/vars/{i}" for n in ("dense", "dense_1") for i in "01"}


def test_a_nested_models_optimizer_is_not_a_model_weight_but_a_layer_named_so_is():
    """Keras 3 keeps a nested compiled model's optimizer (keras-hub's classifier) under `layers/<model>/optimizer/`."""
    assert not is_model_weight("layers/bert_text_classifier/optimizer/inner_optimizer/vars/0", None)
    assert not is_model_weight("metrics/mean/vars/0", None) and not is_model_weight("optimizer/vars/3", None)
    assert is_model_weight("layers/optimizer/vars/0", None)  # a layer the user named `optimizer`
    assert is_model_weight("model_weights/dense/dense/kernel:0", "model_weights")
    assert not is_model_weight("optimizer_weights/Adam/iter:0", "model_weights")


@pytest.mark.parametrize("make", list(HOSTILE), ids=lambda make: make.__name__)
def test_each_hostile_file_is_one_line_naming_file_dataset_and_why(tmp_path, make):
    path = hostile(tmp_path, make)
    dataset, why = HOSTILE[make]
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(UnsafeWeights) as caught:
        checked_weights(path, MODEL_SHAPES, key="model.weights")
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    message = str(caught.value)
    assert message.startswith(f"model.weights={path}: dataset {dataset}: ") and "\n" not in message, message
    assert why in message and "refused before reading it" in message, message
    assert grown_mb < 50  # the bomb would take 4 GB if read: the refusal comes from its metadata alone


def test_storage_links_and_types_are_refused_without_a_model_too(tmp_path):
    for make in (external_storage, virtual_dataset, external_link, soft_link, plugin_filter, compound):
        with pytest.raises(UnsafeWeights, match=HOSTILE[make][1]):
            checked_weights(hostile(tmp_path, make), None)


def test_a_file_declaring_more_than_the_model_in_all_is_refused(tmp_path):
    """Every array a model shape, but 8 optimizer "slots" of a 10^6-value kernel: past 6 x the model + 2^20 values."""
    path = tmp_path / "many.weights.h5"
    with h5py.File(path, "w") as file:
        file.create_dataset("layers/dense/vars/0", shape=(1000, 1000), dtype="float32", chunks=(100, 100))
        for i in range(8):  # declared, never written: the file stays a few kB
            file.create_dataset(f"optimizer/vars/{i}", shape=(1000, 1000), dtype="float32", chunks=(100, 100))
    assert path.stat().st_size < 100_000
    with pytest.raises(UnsafeWeights, match=r"its datasets declare 9000000 values, more than 6 x the model's 1000000"):
        checked_weights(path, [(1000, 1000)])
    assert len(checked_weights(path, [(1000, 1000)] * 2)) == 9  # a model twice the size takes it


def test_keras_reasons_reach_the_line_whole():
    """Keras 3 says which object failed, a colon, then the reason on the next lines: the line keeps the reason."""
    error = ValueError(
        "A total of 1 objects could not be loaded. Example error message for object <Dense name=logits>:\n\n"
        "Not allowed: H5 file with external Dataset: [('/etc/passwd', 0, 40)]\n\n"
        "List of objects that could not be loaded:\n[<Dense name=logits>, ...]"
    )
    said = library_reason(error)
    assert said.endswith("<Dense name=logits>: Not allowed: H5 file with external Dataset: [('/etc/passwd', 0, 40)]")
    assert "List of objects" not in said


def test_only_the_trust_reader_opens_hdf5_files():
    """h5py is imported by tfhydra/trust/hdf5.py alone: a new loader cannot skip the reader by opening files itself."""
    root = Path(__file__).parents[2] / "tfhydra"
    importers = sorted(
        str(p.relative_to(root)) for p in root.rglob("*.py") if "import h5py" in p.read_text(encoding="utf-8")
    )
    assert importers == ["trust/hdf5.py"]


# ---- through the command ----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def mlp_run(tmp_path_factory) -> Path:
    return trained_run(tmp_path_factory, *DIGITS_MLP)


def poisoned_copy(weights: Path, to: Path) -> Path:
    """`weights` with its output bias's bytes stored in `secret.bin` beside it (1e6, 2e6, ... as float32)."""
    shutil.copy(weights, to)
    with h5py.File(to, "a") as file:
        names: list[str] = []
        file.visititems(lambda n, o: names.append(n) if isinstance(o, h5py.Dataset) and o.shape == (10,) else None)
        bias = next(n for n in names if not n.startswith("optimizer"))
        replace(file, bias, shape=(10,), dtype="float32", external=[(str(secret_file(to.parent)), 0, 40)])
    return to


def refused(result, *fragments: str) -> str:
    line = last_line(result.stderr)
    assert result.returncode != 0 and "Traceback" not in result.stderr, result.stderr[-2000:]
    assert line.startswith("Error: ") and all(f in line for f in fragments), line
    return line


def no_completed_run(run_dir: Path) -> None:
    record = run_dir / "metrics.json"
    assert not record.exists() or json.loads(record.read_text())["status"] != "completed"
    assert not (run_dir / "export" / "saved_model").exists()


@pytest.mark.slow
@pytest.mark.parametrize("keras", ["2", "3"])
def test_model_weights_with_external_storage_is_one_line_under_both_kerases(mlp_run, tmp_path, keras):
    path = poisoned_copy(mlp_run / "checkpoints" / "best.weights.h5", tmp_path / "poisoned.weights.h5")
    run_dir = tmp_path / "run"
    result = run_cli(*DIGITS_MLP, f"keras={keras}", f"model.weights={path}", f"hydra.run.dir={run_dir}")
    refused(result, f"model.weights={path}: dataset layers/", "its bytes are stored in another file", "secret.bin")
    no_completed_run(run_dir)


@pytest.mark.slow
def test_compression_from_run_and_resume_refuse_a_poisoned_checkpoint_and_load_a_normal_one(mlp_run, tmp_path):
    """The run directory is not trusted: `compression.from_run` reads its best weights and a resume after training
    its last weights; a poisoned file is one line, and the same commands on the untouched copy complete."""
    source = copy_run(mlp_run, tmp_path / "source")
    best = source / "checkpoints" / "best.weights.h5"
    poisoned_copy(best, tmp_path / "best.weights.h5")
    shutil.copy(tmp_path / "best.weights.h5", best)
    result = run_cli(*DIGITS_MLP, "compression=prune", f"compression.from_run={source}", f"hydra.run.dir={tmp_path}/c")
    refused(result, f"compression.from_run={best}: dataset layers/", "its bytes are stored in another file")
    no_completed_run(tmp_path / "c")

    # resume after training: the record and export gone, history.json finished, last.weights.h5 kept
    for name, poison in (("clean", False), ("poisoned", True)):
        run_dir = copy_run(mlp_run, tmp_path / name)
        (run_dir / "metrics.json").unlink()
        shutil.rmtree(run_dir / "export")
        last = run_dir / "checkpoints" / "last.weights.h5"
        if poison:
            poisoned_copy(last, tmp_path / "last.weights.h5")
            shutil.copy(tmp_path / "last.weights.h5", last)
        result = run_cli(*DIGITS_MLP, f"hydra.run.dir={run_dir}")
        if poison:
            refused(result, f"Error: {last}: dataset layers/", "its bytes are stored in another file")
            no_completed_run(run_dir)
        else:
            assert result.returncode == 0, result.stderr[-3000:]
            assert "training ended in an earlier attempt" in (run_dir / "train.log").read_text()
            assert json.loads((run_dir / "metrics.json").read_text())["status"] == "completed"


def test_a_config_error_is_what_callers_see(tmp_path):
    """UnsafeWeights is a ConfigError (one line, exit 1), not a ValueError or OSError that a loader's fallback from a
    damaged checkpoint would swallow."""
    assert issubclass(UnsafeWeights, ConfigError)
    assert not issubclass(UnsafeWeights, (ValueError, OSError, KeyError))


@pytest.mark.parametrize("make", [external_storage, virtual_dataset, external_link], ids=lambda make: make.__name__)
def test_the_preflight_refuses_what_needs_no_model_before_tensorflow(tmp_path, make):
    """`model.weights` is looked at by the pre-flight (no TensorFlow, no run directory): storage and links need no
    model, so they are refused there; shapes wait for the model, in the job."""
    from conftest import CONFIG_DIR

    from tfhydra.cli.preflight import check_overrides

    path = hostile(tmp_path, make)
    with pytest.raises(ConfigError) as caught:
        check_overrides(CONFIG_DIR, "config", ["model=mlp", f"model.weights={path}"])
    dataset, why = HOSTILE[make]
    assert str(caught.value).startswith(f"model.weights={path}: dataset {dataset}: {why}")
    check_overrides(CONFIG_DIR, "config", ["model=mlp", f"model.weights={hostile(tmp_path, shape_bomb)}"])


# ---- the family, drawn (Hypothesis): files nobody listed ------------------------------------------------------

CASES = int(os.environ.get("TFHYDRA_TRUST_CASES", "25"))
POOL = [(64, 8), (8,), (8, 10), (10,), (3, 3, 1, 4), (100000, 10000), (5000, 5000), (2, 2)]
# how a dataset is stored or reached, and whether the reader must refuse it: (kind, refused)
HOW = {"contiguous": False, "chunked": False, "gzip": False, "compact": False, "lzf": True, "external": True,
       "virtual": True, "soft": True, "external_link": True, "compound": True, "vlen": True, "float64": False,
       "int64": False, "bool": False}  # fmt: skip


def write_dataset(file: h5py.File, name: str, shape: tuple, how: str, tmp: Path) -> None:
    small = math.prod(shape) <= 64  # written in full; larger ones are declared only (chunked) or refused first
    data = np.ones(shape, np.float32) if small else None
    if how in ("contiguous", "compact") and not small:
        how = "chunked"
    if how == "contiguous":
        file.create_dataset(name, data=data)
    elif how == "compact":
        plist = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
        plist.set_layout(h5py.h5d.COMPACT)
        space = h5py.h5s.create_simple(shape)
        parent, own = name.rsplit("/", 1)
        h5py.h5d.create(file.require_group(parent).id, own.encode(), h5py.h5t.NATIVE_FLOAT, space, plist).write(
            h5py.h5s.ALL, h5py.h5s.ALL, np.ones(shape, np.float32)
        )
    elif how in ("chunked", "gzip", "lzf"):
        chunks = tuple(max(1, min(d, 100)) for d in shape) if shape else None
        compression = None if how == "chunked" else how
        file.create_dataset(name, shape=shape, dtype="float32", chunks=chunks, compression=compression)
    elif how == "external":
        file.create_dataset(
            name, shape=shape, dtype="float32", external=[(str(secret_file(tmp)), 0, h5py.h5f.UNLIMITED)]
        )
    elif how == "virtual":
        layout = h5py.VirtualLayout(shape=shape, dtype="float32")
        layout[...] = h5py.VirtualSource(str(tmp / "source.h5"), "x", shape=shape)
        file.create_virtual_dataset(name, layout)
    elif how == "soft":
        file[name] = h5py.SoftLink("/elsewhere")
    elif how == "external_link":
        file[name] = h5py.ExternalLink(str(tmp / "source.h5"), "/x")
    elif how == "compound":
        file.create_dataset(name, shape=shape, dtype=[("a", "f4"), ("b", "f4")])
    elif how == "vlen":
        file.create_dataset(name, shape=shape, dtype=h5py.vlen_dtype(np.float32))
    else:
        file.create_dataset(name, shape=shape, dtype={"float64": "f8", "int64": "i8", "bool": "?"}[how])


@counts_cases()
@seed(HYPOTHESIS_SEED)
@settings(max_examples=CASES * 2, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["layers", "optimizer", "metrics"]), st.sampled_from(POOL), st.sampled_from(sorted(HOW))
        ),
        min_size=1,
        max_size=6,
    ),
    st.lists(st.sampled_from(POOL[:5]), min_size=1, max_size=5),
)
def test_the_reader_refuses_exactly_the_files_a_rule_refuses(tmp_path_factory, datasets, model):
    """Random files of 1-6 datasets (model weights, optimizer slots, metric totals; every storage, link and type
    kind; shapes from a pool that holds the model's and some far larger) against random models: the reader accepts
    exactly the files that break no rule, computed here independently, refuses the others in one line naming the
    first dataset it meets that breaks one, and never reads an array (the peak memory does not grow)."""
    tmp = tmp_path_factory.mktemp("drawn")
    with h5py.File(tmp / "source.h5", "w") as other:
        other["x"] = np.zeros(4, np.float32)
    path = tmp / "drawn.weights.h5"
    with h5py.File(path, "w") as file:
        for i, (group, shape, how) in enumerate(datasets):
            write_dataset(file, f"{group}/layer{i}/vars/0", shape, how, tmp)
    values = sum(math.prod(s) for s in model)
    broken = [
        i
        for i, (group, shape, how) in enumerate(datasets)
        if HOW[how]
        or (group == "layers" and shape not in model)
        or (group != "layers" and shape not in model and math.prod(shape) > 2**20)
    ]
    too_many = sum(math.prod(s) for _, s, how in datasets if how not in ("soft", "external_link")) > 6 * values + 2**20
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    if not broken and not too_many:
        assert len(checked_weights(path, model)) == len(datasets)
    else:
        with pytest.raises(UnsafeWeights) as caught:
            checked_weights(path, model, key="model.weights")
        message = str(caught.value)
        assert message.startswith(f"model.weights={path}: ") and "\n" not in message
        if broken:
            assert re.search(r": dataset (layers|optimizer|metrics)/layer(\d+)/vars/0: ", message), message
            assert int(re.search(r"/layer(\d+)/", message).group(1)) in broken, message
        else:
            assert "its datasets declare" in message
    assert (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024 < 50


def test_a_damaged_file_is_the_callers_oserror_not_a_refusal(tmp_path):
    """A truncated checkpoint is damage, which a resume falls back from (tests/trust/test_hardening.py); a file that
    reads elsewhere is a refusal, which it does not."""
    path = keras_file(tmp_path / "cut.weights.h5")
    path.write_bytes(path.read_bytes()[:1000])
    with pytest.raises(OSError):
        checked_weights(path, MODEL_SHAPES)
