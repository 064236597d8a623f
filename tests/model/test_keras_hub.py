"""model=keras_hub (tfhydra/model/hub.py): a tiny randomly initialised BERT, saved as a preset with keras-hub's own
`save_to_preset` (tests/hub_presets.py, in a Keras 3 process of its own), fine-tunes from that directory on raw
text (data=text_csv), offline; its test accuracy is recorded and its SavedModel serves raw strings; recipe=finetune
keeps the backbone bit for bit in the head phase and moves it after; a preset that is missing, or a directory that
is not a preset, or keras=2, is one line before TensorFlow."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import TESTS, read_run_record, run_cli, run_module
from data_files import write_text_csv
from shared_runs import made_once

from tfhydra.config.errors import ConfigError
from tfhydra.runner.plan import plan_run

pytest.importorskip("keras_hub", reason="the hub extra: pip install -e '.[hub]'")

# A real process (env given: not forked from the tf_keras server), told that no hub is reachable
OFFLINE = {"HF_HUB_OFFLINE": "1"}
TEXT_RUN = [
    "keras=3",
    "model=keras_hub",
    "data=text_csv",
    "data.batch_size=16",
    "optimizer.lr=0.01",
    "logging.histogram_freq=0",
    "logging.images_freq=0",
    "logging.write_graph=false",
]

# Gray 16x16 images, two classes with strong patterns: the ViT preset's converter takes them as [0, 255] RGB
IMAGE_RUN = [
    "keras=3",
    "model=keras_hub",
    "data=synthetic",
    "data.shape=[16,16,1]",
    "data.num_classes=2",
    "data.signal=1.0",
    "data.train_size=128",
    "data.val_size=32",
    "data.test_size=32",
    "data.batch_size=32",
    "optimizer.lr=0.01",
    "trainer.epochs=3",
    "logging.histogram_freq=0",
]


def keras3_helper(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": f"{TESTS}{os.pathsep}{TESTS.parent}", **OFFLINE}
    return subprocess.run(
        [sys.executable, str(TESTS / "hub_presets.py"), *args], env=env, capture_output=True, text=True, timeout=240
    )


# Both presets written by one Keras 3 process (hub_presets.py's functions), once a session across xdist workers
WRITE_PRESETS = """
import sys
from pathlib import Path
import hub_presets  # chooses Keras 3 before TensorFlow loads
hub_presets.write_preset(Path(sys.argv[1]) / "tiny_bert")
hub_presets.write_image_preset(Path(sys.argv[1]) / "tiny_vit")
"""


@pytest.fixture(scope="session")
def presets(tmp_path_factory) -> dict[str, Path]:
    """A 2-layer, hidden-16 BERT with a 21-word WordPiece vocabulary, its tokenizer, preprocessor and a
    TextClassifier ("bert"), and a 1-layer ViT on 16x16 RGB images with its image converter and a
    ViTImageClassifier ("vit"): randomly initialised (a fixed seed) and saved with `save_to_preset`."""

    def write(home: Path) -> None:
        home.mkdir(parents=True)
        env = {**os.environ, "PYTHONPATH": f"{TESTS}{os.pathsep}{TESTS.parent}", **OFFLINE}
        done = subprocess.run(
            [sys.executable, "-c", WRITE_PRESETS, str(home)], env=env, capture_output=True, text=True, timeout=240
        )
        assert done.returncode == 0, done.stderr[-3000:]

    home = made_once(tmp_path_factory, "keras-hub-presets", write)
    return {"bert": home / "tiny_bert", "vit": home / "tiny_vit"}


def backbone_changes(preset: Path, *weights: Path) -> list[dict]:
    """How far each weights file's backbone is from the preset's, all measured in one Keras 3 process."""
    done = keras3_helper("backbone", str(preset), *map(str, weights))
    assert done.returncode == 0, done.stderr[-3000:]
    return [json.loads(line) for line in done.stdout.strip().splitlines()[-len(weights) :]]


def hub_run(tmp_path: Path, *overrides: str) -> Path:
    """`python train.py OVERRIDES` completed, offline, in a real process: the run's directory."""
    run = tmp_path / "run"
    done = run_cli(*overrides, f"hydra.run.dir={run}", env=OFFLINE)
    assert done.returncode == 0, done.stderr[-3000:]
    return run


def fine_tune(preset: Path, tmp_path: Path, rows: int, *overrides: str) -> Path:
    """`python train.py keras=3 model=keras_hub model.preset=PRESET` on `rows` reviews: the run's directory."""
    data = write_text_csv(tmp_path / "reviews.csv", n=rows)
    return hub_run(tmp_path, *TEXT_RUN, f"model.preset={preset}", f"data.path={data}", *overrides)


# One BERT run holds both fine-tune tests: recipe=finetune's head phase (1 epoch at 0.1, the base frozen), then 4
# epochs of the whole model under float16 compute at the recipe's lower rate, 0.01 (optimizer.lr x lr_factor 0.1:
# the rate the loss falls at in 4 epochs; at 0.001 it did not, 0.6922 -> 0.6939). It was two runs (4 mixed epochs
# at 0.01; the recipe in 2 epochs on 64 reviews), trained one after the other in the same fixture.
FINETUNE_MIXED = (
    "recipe=finetune",
    "optimizer.lr=0.1",
    "trainer.finetune.head_epochs=1",
    "trainer.epochs=5",
    "model.dropout=0",
    "precision=mixed",
)


@pytest.fixture(scope="session")
def bert_runs(presets, tmp_path_factory) -> dict:
    """The BERT fine-tune of this file, trained once a session across xdist workers, and its backbones measured
    against the preset's in one Keras 3 process: recipe=finetune under mixed precision on 96 reviews, its head
    phase's last weights (`head`) and the run's last weights (`finetune`)."""

    def train(home: Path) -> None:
        (home / "finetune").mkdir(parents=True)
        run = fine_tune(presets["bert"], home / "finetune", 96, *FINETUNE_MIXED)
        files = [run / "phases" / "0_head" / "checkpoints" / "last.weights.h5", run / "checkpoints" / "last.weights.h5"]
        kept, tuned = backbone_changes(presets["bert"], *files)
        (home / "backbones.json").write_text(json.dumps({"head": kept, "finetune": tuned}))

    home = made_once(tmp_path_factory, "keras-hub-bert-finetune", train)
    return {"run": home / "finetune" / "run", "backbones": json.loads((home / "backbones.json").read_text())}


def test_a_missing_preset_directory_is_one_line_before_tensorflow(tmp_path):
    missing, data = tmp_path / "no_such_preset", write_text_csv(tmp_path / "reviews.csv")
    done = run_cli(*TEXT_RUN, f"model.preset={missing}", f"data.path={data}", env=OFFLINE)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert (
        done.stderr.strip()
        .splitlines()[-1]
        .startswith(f"Error: model.preset={missing}: no such directory; accepted: a local keras-hub preset directory")
    )
    assert not (tmp_path / "outputs").exists()


@pytest.mark.parametrize(
    ("preset", "problem"),
    [
        (None, "model=keras_hub needs one (model.preset=/path/to/preset)"),
        ("file", "a file, not a directory"),
        ("empty", "not a keras-hub preset: it has no config.json and no metadata.json"),
        ("torn", "its config.json cannot be parsed (Expecting ',' delimiter: line 1 column 31"),
        ("listed", "its config.json is not a JSON object (list)"),
        ("nameless", "its config.json names no backbone (a class_name and its config"),
        ("deep", "its metadata.json cannot be parsed (it nests too deep to read)"),
        ("fifo", "a FIFO, which tfhydra never reads (it could block or never end)"),
    ],
)
def test_a_preset_that_is_not_one_is_refused_by_the_plan(compose_cfg, tmp_path, preset, problem):
    """Files keras-hub could not parse are one line before TensorFlow, read bounded (a preset comes from anywhere)."""
    (tmp_path / "file").write_text("x")
    (tmp_path / "empty").mkdir()
    os.mkfifo(tmp_path / "fifo")
    configs = {
        "torn": '{"class_name": "BertBackbone" "config": {}}',
        "listed": "[]",
        "nameless": '{"config": {"num_layers": 2}}',
        "deep": '{"class_name": "BertBackbone", "config": {}}',
    }
    for name, config in configs.items():
        (tmp_path / name).mkdir()
        (tmp_path / name / "config.json").write_text(config)
        metadata = "[" * 100_000 + "]" * 100_000 if name == "deep" else '{"keras_version": "3.15.1"}'
        (tmp_path / name / "metadata.json").write_text(metadata)
    value = "null" if preset is None else str(tmp_path / preset)
    data = write_text_csv(tmp_path / "reviews.csv")
    with pytest.raises(ConfigError) as refused:
        plan_run(compose_cfg([*TEXT_RUN, f"model.preset={value}", f"data.path={data}"]))
    assert refused.value.key == "model.preset" and problem in str(refused.value)


def test_data_that_are_neither_text_nor_images_are_one_line_before_the_preset_is_read(tmp_path):
    from omegaconf import OmegaConf

    from tfhydra.config.contracts import DataSpec
    from tfhydra.model.hub import build_keras_hub

    node = OmegaConf.create({"name": "keras_hub", "preset": str(tmp_path), "sequence_length": None, "dropout": 0.1})
    with pytest.raises(ConfigError) as refused:
        build_keras_hub(node, DataSpec((4,), 2, ("a", "b"), 1, 1))
    assert str(refused.value).startswith(
        "model=keras_hub: needs raw text or images; the data's examples are float32 of shape (4,); accepted: raw text"
    )


def test_keras_hub_under_keras_2_is_one_line_naming_keras_3(compose_cfg, tmp_path):
    data, preset = write_text_csv(tmp_path / "reviews.csv"), tmp_path / "preset"
    preset.mkdir()  # the Keras is checked first: no preset is read under keras=2
    with pytest.raises(ConfigError) as refused:
        plan_run(compose_cfg([o for o in TEXT_RUN if o != "keras=3"] + [f"model.preset={preset}", f"data.path={data}"]))
    assert str(refused.value).startswith("model=keras_hub: keras-hub's models are Keras 3 models")
    assert "accepted: keras=3" in str(refused.value)


@pytest.mark.slow
@pytest.mark.timeout(600)  # the first asker trains the run of `bert_runs`
def test_a_tiny_bert_fine_tunes_from_its_preset_on_raw_text_under_mixed_precision(bert_runs, tmp_path):
    """4 epochs of the whole model after the head phase, float16 compute: the loss falls, the backbone moves, the
    test accuracy is recorded, and the SavedModel takes the raw strings the CSV holds and answers float32
    probabilities."""
    run = bert_runs["run"]
    record = read_run_record(run)
    assert record["status"] == "completed" and record["data"]["dtype"] == "string"
    assert record["policy"] == "mixed_float16" and record["keras"]["major"] == 3
    accuracy = record["test"]["metrics"]["accuracy"]
    assert isinstance(accuracy, float) and 0.0 <= accuracy <= 1.0 and record["test"]["examples"] > 0
    losses = [epoch["loss"] for epoch in record["history"]]
    assert len(losses) == 4 and losses[-1] < losses[0]
    moved = bert_runs["backbones"]["finetune"]
    assert moved["weights"] > 20 and not moved["identical"] and moved["max_change"] > 1e-4
    assert moved["connections"] == []  # built from the directory alone, every connection refused

    import tensorflow as tf

    served = tf.saved_model.load(str(run / record["exports"]["saved_model"]))
    probabilities = served.signatures["serving_default"](tf.constant(["A great fun film!", "The plot was dull!"]))
    (answer,) = probabilities.values()
    assert answer.dtype == tf.float32 and answer.shape == (2, 2)
    np.testing.assert_allclose(answer.numpy().sum(axis=1), 1.0, rtol=1e-5)
    # tfhydra-predict in a process of its own (forked from the tests' server, which holds tf_keras and no keras-hub):
    # TensorFlow Text's ops registered on demand
    texts, out = tmp_path / "new.csv", tmp_path / "predictions.csv"
    texts.write_text("text\nA great fun film!\nThe plot was dull!\n")
    env = {**os.environ, "PYTHONPATH": str(TESTS.parent), **OFFLINE}
    done = run_module("tfhydra.predict", str(run), str(texts), f"--output={out}", env=env, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = out.read_text().splitlines()
    assert rows[0].startswith("input,class_1,probability_1") and len(rows) == 3
    assert {row.split(",")[1] for row in rows[1:]} <= {"neg", "pos"}


@pytest.mark.slow
@pytest.mark.timeout(600)  # the first asker trains the run of `bert_runs`
def test_recipe_finetune_trains_the_head_alone_then_the_backbone(bert_runs):
    """recipe=finetune: the head phase (model.freeze=base) leaves every backbone weight bit-identical to the
    preset's and trains the classifier; the phase after it moves the backbone, at the lower rate."""
    head, tuned = read_run_record(bert_runs["run"])["phases"]
    assert head["label"] == "head" and head["layers"]["freeze"] == "base"
    assert 0 < head["layers"]["trainable_params"] < head["layers"]["frozen_params"]
    assert tuned["layers"]["frozen_params"] == 0
    kept, moved = bert_runs["backbones"]["head"], bert_runs["backbones"]["finetune"]
    assert kept["weights"] > 20 and kept["identical"]  # bit for bit
    assert not moved["identical"]


@pytest.mark.slow
@pytest.mark.timeout(420)
def test_a_tiny_vit_trains_from_its_preset_on_gray_images_with_its_base_frozen(presets, tmp_path):
    """data=synthetic's [0, 1] gray 16x16 images through the preset's image converter (as [0, 255] RGB): the head
    alone trains (model.freeze=base), the loss falls, and the SavedModel answers float32 probabilities."""
    run = hub_run(tmp_path, *IMAGE_RUN, f"model.preset={presets['vit']}", "model.freeze=base")
    record = read_run_record(run)
    assert record["status"] == "completed" and record["model"].endswith("_on_images")
    assert 0 < record["layers"]["trainable_params"] < record["layers"]["frozen_params"]
    losses = [epoch["loss"] for epoch in record["history"]]
    assert losses[-1] < losses[0] and 0.0 <= record["test"]["metrics"]["accuracy"] <= 1.0

    import tensorflow as tf

    served = tf.saved_model.load(str(run / record["exports"]["saved_model"]))
    (answer,) = served.signatures["serving_default"](tf.random.uniform((3, 16, 16, 1))).values()
    assert answer.dtype == tf.float32 and answer.shape == (3, 2)
    np.testing.assert_allclose(answer.numpy().sum(axis=1), 1.0, rtol=1e-5)


@pytest.mark.slow
def test_a_preset_whose_weights_declare_a_bomb_is_one_line_before_a_run_exists(presets, tmp_path):
    """The preset's model.weights.h5 goes through tfhydra's HDF5 reader (tfhydra/trust/hdf5.py) in the pre-flight:
    a kernel declared (100000, 10000) in a file a few kB larger is one line naming the file and the dataset, before
    TensorFlow and before a run directory exists (the four kinds in process: tests/trust/test_weight_paths.py)."""
    from hostile_h5 import poison

    preset = tmp_path / "preset"
    shutil.copytree(presets["bert"], preset)
    hostile = poison(presets["bert"] / "model.weights.h5", preset / "model.weights.h5", "shape_bomb")
    data = write_text_csv(tmp_path / "reviews.csv", n=32)
    run = tmp_path / "run"
    done = run_cli(*TEXT_RUN, f"model.preset={preset}", f"data.path={data}", f"hydra.run.dir={run}", env=OFFLINE)
    line = done.stderr.strip().splitlines()[-1]
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert line.startswith(f"Error: model.preset={hostile.path}: dataset {hostile.dataset}: "), line
    assert "declares 4000000000 bytes and stores 0" in line, line
    assert not run.exists()
