"""Issue 57's four hostile kinds (tests/hostile_h5.py: external storage, a virtual dataset, an external link, a
(100000, 10000) kernel declared in a file a few kB larger) through each path that hands an HDF5 file to Keras, in
process: `model.weights` (tfhydra/model/weights.py), a resume (tfhydra/trainer/weights.py: the last weights after
training, the best ones before the export), `compression.from_run` (tfhydra/compression/phases.py) and a keras-hub
preset's weights files (tfhydra/model/preset_files.py, and hub.py against the built backbone), with the sizes its
config.json asks for bounded by what those files declare. Each is one line naming the file, the dataset and why, and
the model's weights are untouched: nothing of the outside bytes reaches it. The same commands as child processes,
with their peak RSS against a normal run, are benchmarks/hostile_weights.py's (docs/reliability.md)."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from conftest import compose_config
from hostile_h5 import KINDS, SAID, outside_values, poison
from shared_runs import DIGITS_MLP, copy_run, trained_run

from tfhydra.config.errors import ConfigError
from tfhydra.trust.hdf5 import UnsafeWeights


@pytest.fixture(scope="module")
def tiny():
    """A tf_keras MLP 64 -> 8 -> 10, built once; each test saves its weights with Keras' own save_weights."""
    import tf_keras as keras

    return keras.Sequential([keras.Input((64,)), keras.layers.Dense(8), keras.layers.Dense(10)])


def saved(model, path: Path) -> Path:
    model.save_weights(str(path))
    return path


def values(model) -> list[np.ndarray]:
    return [np.array(w) for w in model.get_weights()]


def one_line(error: BaseException, starts: str, kind: str, dataset: str) -> None:
    message = str(error)
    assert message.startswith(starts) and "\n" not in message, message
    assert SAID[kind] in message and dataset in message, message


def unchanged(model, before: list[np.ndarray]) -> None:
    assert all(np.array_equal(a, b) for a, b in zip(values(model), before, strict=True))
    assert max(float(np.abs(w).max()) for w in values(model)) < outside_values(1)[0]  # none of 1e6 + 0.25, ...


@pytest.mark.parametrize("kind", KINDS)
def test_model_weights_refuses_each_kind_and_the_model_keeps_its_values(tiny, tmp_path, kind):
    from tfhydra.model.weights import load_weights_file

    hostile = poison(saved(tiny, tmp_path / "good.weights.h5"), tmp_path / "given.weights.h5", kind)
    before = values(tiny)
    with pytest.raises(ConfigError) as caught:
        load_weights_file(tiny, str(hostile.path))
    one_line(caught.value, f"model.weights={hostile.path}: ", kind, hostile.dataset)
    unchanged(tiny, before)


@pytest.mark.parametrize("kind", KINDS)
def test_a_resume_refuses_each_kind_in_its_last_and_best_weights(tiny, tmp_path, kind):
    """A refused file is the run's error, not the fallback a damaged checkpoint gets (load_last_weights returns
    False for damage only), and restore_best does not fall back to the last weights either."""
    import tensorflow as tf

    from tfhydra.record.run_record import RunRecord
    from tfhydra.record.rundir import RunPaths
    from tfhydra.trainer.weights import load_last_weights, restore_best

    paths = RunPaths(tmp_path / "run")
    paths.checkpoints.mkdir(parents=True)
    strategy = tf.distribute.get_strategy()
    record = RunRecord(monitor="val_loss", best={"epoch": 1, "val_loss": 0.5}, final={"epoch": 2, "val_loss": 0.7})
    before = values(tiny)
    for target in (paths.last_weights, paths.best_weights):
        good = saved(tiny, tmp_path / "good.weights.h5")
        shutil.copy(good, paths.last_weights)
        hostile = poison(good, tmp_path / target.name, kind)
        shutil.move(hostile.path, target)
        with pytest.raises(UnsafeWeights) as caught:
            load_last_weights(tiny, paths, strategy) if target == paths.last_weights else restore_best(
                tiny, paths, strategy, record
            )
        one_line(caught.value, f"{target}: dataset {hostile.dataset}: ", kind, hostile.dataset)
        unchanged(tiny, before)


@pytest.fixture(scope="module")
def mlp_run(tmp_path_factory) -> Path:
    return trained_run(tmp_path_factory, *DIGITS_MLP)


@pytest.mark.slow  # about 4 s after the shared run: load_run_model rebuilds the run's scheme for each file
def test_compression_from_run_refuses_each_kind_in_the_runs_best_weights(mlp_run, tmp_path):
    """The earlier run's directory is not trusted: its checkpoints/best.weights.h5 is read through the reader against
    the model rebuilt from its saved config (load_run_model, as `compression.from_run=RUN` calls it)."""
    from tfhydra.compression.phases import load_run_model
    from tfhydra.config.contracts import DataSpec
    from tfhydra.model.build import build_model

    spec = DataSpec((28, 28, 1), 10, tuple("0123456789"), 1, 1)
    model = build_model(compose_config(list(DIGITS_MLP)).model, spec, load_weights=False)
    before = values(model)
    for kind in KINDS:
        run = copy_run(mlp_run, tmp_path / kind)
        best = run / "checkpoints" / "best.weights.h5"
        hostile = poison(best, tmp_path / f"{kind}.weights.h5", kind)
        shutil.move(hostile.path, best)
        with pytest.raises(ConfigError) as caught:
            load_run_model(run, model, spec, steps_per_epoch=1)
        one_line(caught.value, f"compression.from_run={best}: dataset {hostile.dataset}: ", kind, hostile.dataset)
        unchanged(model, before)


# ---- a keras-hub preset's shards: every file Keras' sharded loader opens, and only those, goes through the reader --


def shard_index(preset: Path, weight_map: dict) -> Path:
    index = preset / "model.weights.json"
    index.write_text(__import__("json").dumps({"metadata": {"total_size": 0}, "weight_map": weight_map}))
    return index


def test_the_shards_a_preset_names_are_exactly_what_keras_opens(tiny, tmp_path):
    """ShardedH5IOStore opens model_00000.weights.h5 first, then each file the weight_map names beside the index
    (`Path.with_name`): a shard named anything, not only model_*.weights.h5, is listed, so the reader sees it."""
    from tfhydra.model.preset_files import shard_files

    first, other = saved(tiny, tmp_path / "model_00000.weights.h5"), saved(tiny, tmp_path / "weights-b.h5")
    index = shard_index(
        tmp_path, {"/layers/dense/vars": "model_00000.weights.h5", "/layers/dense_1/vars": [other.name]}
    )
    assert shard_files(index, "a preset") == [first, other]


@pytest.mark.parametrize(
    ("name", "problem"),
    [("../outside.weights.h5", "not a file name beside it"), ("/etc/passwd", "not a file name beside it"),
     ("..", "not a file name beside it"), (7, "not a file name beside it"), ("gone.h5", "no such file beside it"),
     ("fifo.h5", "a FIFO")],
)  # fmt: skip
def test_a_shard_name_that_is_not_a_file_beside_the_index_is_one_line(tiny, tmp_path, name, problem):
    import os

    from tfhydra.model.preset_files import shard_files

    saved(tiny, tmp_path / "model_00000.weights.h5")
    os.mkfifo(tmp_path / "fifo.h5")
    index = shard_index(tmp_path, {"/layers/dense/vars": name})
    with pytest.raises(ConfigError) as caught:
        shard_files(index, "a preset")
    message = str(caught.value)
    assert message.startswith(f"model.preset={index}: its weight_map names {str(name)!r}: ") and problem in message


@pytest.mark.parametrize("kind", KINDS)
def test_a_hostile_shard_under_any_name_is_refused_and_the_shards_are_bounded_together(tiny, tmp_path, kind):
    from tfhydra.trust.hdf5 import checked_shards, weight_shapes

    good = saved(tiny, tmp_path / "model_00000.weights.h5")
    hostile = poison(good, tmp_path / "b.h5", kind)
    shapes = weight_shapes(tiny)
    with pytest.raises(ConfigError) as caught:
        checked_shards([good, hostile.path], shapes, "model.preset", tmp_path / "model.weights.json")
    one_line(caught.value, f"model.preset={hostile.path}: dataset {hostile.dataset}: ", kind, hostile.dataset)


def test_shards_are_bounded_together(tmp_path):
    """8 shards each declaring a 10^6-value kernel (never written: a few kB each): each alone fits a 10^6-value
    model, all of them are past 6 x the model + 2^20 values."""
    import h5py

    from tfhydra.trust.hdf5 import checked_shards

    many = []
    for i in range(8):
        with h5py.File(tmp_path / f"s{i}.weights.h5", "w") as file:
            file.create_dataset("layers/dense/vars/0", shape=(1000, 1000), dtype="float32", chunks=(100, 100))
        many.append(tmp_path / f"s{i}.weights.h5")
    assert len(checked_shards(many[:7], [(1000, 1000)], "model.preset", tmp_path / "model.weights.json")) == 7
    with pytest.raises(UnsafeWeights, match=r"json: its datasets declare 8000000 values, more than 6 x the model"):
        checked_shards(many, [(1000, 1000)], "model.preset", tmp_path / "model.weights.json")


# ---- a preset's config.json asks for no size its weights files do not declare ---------------------------------


def preset_of(tmp_path: Path, **config) -> Path:
    """A preset directory as keras-hub's save_to_preset lays it out (config.json, metadata.json, model.weights.h5),
    the weights file of a 2-layer BERT of vocabulary 21, hidden 16, intermediate 32, sequence 16, written by h5py."""
    import json

    import h5py

    preset = tmp_path / "preset"
    preset.mkdir()
    sizes = {"vocabulary_size": 21, "num_layers": 2, "num_heads": 2, "hidden_dim": 16, "intermediate_dim": 32,
             "max_sequence_length": 16, "num_segments": 2, "dropout": 0.1, "trainable": True, **config}  # fmt: skip
    (preset / "config.json").write_text(json.dumps({"class_name": "BertBackbone", "config": sizes}))
    (preset / "metadata.json").write_text("{}")
    with h5py.File(preset / "model.weights.h5", "w") as file:
        for name, shape in [("token_embedding", (21, 16)), ("position_embedding", (16, 16)), ("segment", (2, 16))]:
            file.create_dataset(f"layers/{name}/vars/0", data=np.zeros(shape, np.float32))
        for layer in range(2):
            for i, shape in enumerate([(16, 2, 8), (2, 8, 16), (16, 32), (32, 16), (32,), (16,)]):
                file.create_dataset(f"layers/transformer_layer_{layer}/vars/{i}", data=np.zeros(shape, np.float32))
    return preset


def test_a_presets_config_within_what_its_weights_declare_passes(tmp_path):
    from tfhydra.model.preset_files import check_preset_weights

    check_preset_weights(preset_of(tmp_path, image_shape=[224, 224, 3], layer_norm_epsilon=1e-12), "a preset")


@pytest.mark.parametrize(
    ("key", "value"),
    [("vocabulary_size", 10**9), ("hidden_dim", 10**6), ("num_layers", 10**9), ("max_sequence_length", 33),
     ("image_shape", [10**6, 10**6, 3])],
)  # fmt: skip
def test_a_presets_config_asking_beyond_its_weights_is_one_line_naming_file_and_key(tmp_path, key, value):
    """Before keras-hub builds (and allocates) the backbone: the largest size the weights declare here is 32."""
    from tfhydra.model.preset_files import check_preset_weights

    preset = preset_of(tmp_path, **{key: value})
    with pytest.raises(ConfigError) as caught:
        check_preset_weights(preset, "a preset")
    message = str(caught.value)
    assert message.startswith(f"model.preset={preset / 'config.json'}: its {key}=") and "\n" not in message
    assert "their largest dimension or count: 32" in message and "before the backbone is built" in message


@pytest.mark.parametrize("kind", KINDS)
def test_the_preflight_refuses_each_kind_in_a_presets_weights_before_tensorflow(tmp_path, kind):
    """keras=3 model=keras_hub: storage and links need no model, and a preset's arrays must be stored (they bound
    what its config.json may ask), so the pre-flight's check (check_keras_hub, in the run plan's CHECKS, no
    TensorFlow) refuses all four kinds."""
    from omegaconf import OmegaConf

    from tfhydra.model.checks import check_keras_hub

    pytest.importorskip("keras_hub", reason="the hub extra")
    preset = preset_of(tmp_path)
    hostile = poison(preset / "model.weights.h5", tmp_path / "hostile.h5", kind)
    shutil.move(hostile.path, preset / "model.weights.h5")
    with pytest.raises(ConfigError) as caught:
        check_keras_hub(OmegaConf.create({"keras": 3, "model": {"name": "keras_hub", "preset": str(preset)}}))
    starts = f"model.preset={preset / 'model.weights.h5'}: dataset {hostile.dataset}: "
    if kind == "shape_bomb":
        assert str(caught.value).startswith(f"{starts}declares 4000000000 bytes and stores 0; refused before the ")
    else:
        one_line(caught.value, starts, kind, hostile.dataset)
