"""model=keras_hub (tfhydra/model/hub.py): a tiny randomly initialised BERT, saved as a preset with keras-hub's own
`save_to_preset` (tests/hub_presets.py, in a Keras 3 process of its own), fine-tunes from that directory on raw
text (data=text_csv), offline; its test accuracy is recorded and its SavedModel serves raw strings; recipe=finetune
keeps the backbone bit for bit in the head phase and moves it after; a preset that is missing, or a directory that
is not a preset, or keras=2, is one line before TensorFlow."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import TESTS, read_run_record, run_cli
from data_files import write_text_csv

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


def keras3_helper(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": f"{TESTS}{os.pathsep}{TESTS.parent}", **OFFLINE}
    return subprocess.run(
        [sys.executable, str(TESTS / "hub_presets.py"), *args], env=env, capture_output=True, text=True, timeout=240
    )


@pytest.fixture(scope="session")
def tiny_preset(tmp_path_factory) -> Path:
    """A 2-layer, hidden-16 BERT with a 21-word WordPiece vocabulary, its tokenizer, preprocessor and a
    TextClassifier, randomly initialised and saved with `save_to_preset` (about 17 s, once per worker)."""
    directory = tmp_path_factory.mktemp("hub") / "tiny_bert"
    done = keras3_helper("write", str(directory))
    assert done.returncode == 0, done.stderr[-3000:]
    return directory


def backbone_change(preset: Path, weights: Path) -> dict:
    done = keras3_helper("backbone", str(preset), str(weights))
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def fine_tune(preset: Path, tmp_path: Path, rows: int, *overrides: str) -> Path:
    """`python train.py keras=3 model=keras_hub model.preset=PRESET` on `rows` reviews: the run's directory."""
    data, run = write_text_csv(tmp_path / "reviews.csv", n=rows), tmp_path / "run"
    done = run_cli(
        *TEXT_RUN, f"model.preset={preset}", f"data.path={data}", *overrides, f"hydra.run.dir={run}", env=OFFLINE
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return run


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
    ],
)
def test_a_preset_that_is_not_one_is_refused_by_the_plan(compose_cfg, tmp_path, preset, problem):
    (tmp_path / "file").write_text("x")
    (tmp_path / "empty").mkdir()
    value = "null" if preset is None else str(tmp_path / preset)
    data = write_text_csv(tmp_path / "reviews.csv")
    with pytest.raises(ConfigError) as refused:
        plan_run(compose_cfg([*TEXT_RUN, f"model.preset={value}", f"data.path={data}"]))
    assert refused.value.key == "model.preset" and problem in str(refused.value)


def test_keras_hub_under_keras_2_is_one_line_naming_keras_3(compose_cfg, tmp_path):
    data, preset = write_text_csv(tmp_path / "reviews.csv"), tmp_path / "preset"
    preset.mkdir()  # the Keras is checked first: no preset is read under keras=2
    with pytest.raises(ConfigError) as refused:
        plan_run(compose_cfg([o for o in TEXT_RUN if o != "keras=3"] + [f"model.preset={preset}", f"data.path={data}"]))
    assert str(refused.value).startswith("model=keras_hub: keras-hub's models are Keras 3 models")
    assert "accepted: keras=3" in str(refused.value)


@pytest.mark.slow
@pytest.mark.timeout(420)
def test_a_tiny_bert_fine_tunes_from_its_preset_on_raw_text(tiny_preset, tmp_path):
    """4 epochs: the loss falls, the backbone moves, the test accuracy is recorded, and the
    SavedModel takes the raw strings the CSV holds and answers float32 probabilities."""
    run = fine_tune(tiny_preset, tmp_path, 96, "trainer.epochs=4", "model.dropout=0")
    record = read_run_record(run)
    assert record["status"] == "completed" and record["data"]["dtype"] == "string"
    accuracy = record["test"]["metrics"]["accuracy"]
    assert isinstance(accuracy, float) and 0.0 <= accuracy <= 1.0 and record["test"]["examples"] > 0
    losses = [epoch["loss"] for epoch in record["history"]]
    assert len(losses) == 4 and losses[-1] < losses[0]
    moved = backbone_change(tiny_preset, run / "checkpoints" / "last.weights.h5")
    assert moved["weights"] > 20 and not moved["identical"] and moved["max_change"] > 1e-4

    import tensorflow as tf

    served = tf.saved_model.load(str(run / record["exports"]["saved_model"]))
    probabilities = served.signatures["serving_default"](tf.constant(["A great fun film!", "The plot was dull!"]))
    (answer,) = probabilities.values()
    assert answer.dtype == tf.float32 and answer.shape == (2, 2)
    np.testing.assert_allclose(answer.numpy().sum(axis=1), 1.0, rtol=1e-5)


@pytest.mark.slow
@pytest.mark.timeout(420)
def test_recipe_finetune_trains_the_head_alone_then_the_backbone(tiny_preset, tmp_path):
    """recipe=finetune: the head phase (model.freeze=base) leaves every backbone weight bit-identical to the
    preset's and trains the classifier; the phase after it moves the backbone, at the lower rate."""
    finetune = ["recipe=finetune", "trainer.finetune.head_epochs=1", "trainer.epochs=2", "export.formats=[]"]
    run = fine_tune(tiny_preset, tmp_path, 64, *finetune)
    head, tuned = read_run_record(run)["phases"]
    assert head["label"] == "head" and head["layers"]["freeze"] == "base"
    assert 0 < head["layers"]["trainable_params"] < head["layers"]["frozen_params"]
    assert tuned["layers"]["frozen_params"] == 0
    kept = backbone_change(tiny_preset, run / "phases" / "0_head" / "checkpoints" / "last.weights.h5")
    assert kept["weights"] > 20 and kept["identical"]  # bit for bit
    moved = backbone_change(tiny_preset, run / "checkpoints" / "last.weights.h5")
    assert not moved["identical"]
