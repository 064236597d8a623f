"""Predict and evaluate on every export (issue 33, item 7): a run that exported only TFLite is answered by LiteRT
with the same CSV and JSON as a SavedModel run; one bad file among good ones is named and skipped, the others
predicted, the exit code says that some failed; TensorFlow's start-up lines stay hidden."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
from conftest import FAST, ROOT, TESTS, last_line, run_module

import tfhydra

NOISE = ("oneDNN", "XNNPACK", "cuda", "cpu_feature_guard", "absl::InitializeLog")


def command(module: str, *args) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", module, *map(str, args)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": f"{ROOT}:{TESTS}"},
    )


def answer(module: str, *args) -> subprocess.CompletedProcess:
    """The same command forked from the tests' server (conftest.run_module), where only its answer is asserted, not
    what a fresh process prints at start-up (`command` is for that)."""
    return run_module(module, *map(str, args), env={"PATH": "/usr/bin:/bin", "PYTHONPATH": f"{ROOT}:{TESTS}"})


def classes(result: subprocess.CompletedProcess) -> list[tuple[str, int]]:
    return [(row["input"], int(row["class_1"])) for row in csv.DictReader(io.StringIO(result.stdout))]


@pytest.fixture(scope="module")
def tflite_run(tmp_path_factory):
    """A 1-epoch digits run that exported only model.tflite, and its validation split as the pipeline feeds it."""
    from tfhydra.data.pipeline import build_datasets
    from tfhydra.evaluate import load_run_config

    run_dir = tmp_path_factory.mktemp("tflite") / "run"
    tfhydra.run(tfhydra.compose([*FAST, "export.formats=[tflite]"]), run_dir=run_dir)
    assert sorted(p.name for p in (run_dir / "export").iterdir()) == ["README.md", "tflite"]
    cfg = load_run_config(run_dir, [])
    pairs = [(x.numpy(), y.numpy()) for x, y in build_datasets(cfg.data, cfg.trainer.seed).validation]
    return run_dir, np.concatenate([x for x, _ in pairs]), np.concatenate([y for _, y in pairs])


@pytest.mark.slow
def test_a_tflite_only_run_is_predicted_and_evaluated_through_litert(tflite_run, tmp_path):
    from tfhydra.record.run_record import load_record

    run_dir, x, y = tflite_run
    np.save(tmp_path / "x.npy", x)
    result = command("tfhydra.predict", run_dir, tmp_path / "x.npy")
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.splitlines()[0] == "input,class_1,probability_1"  # the SavedModel's CSV
    found = classes(result)
    assert [name for name, _ in found] == [f"{tmp_path / 'x.npy'}[{i}]" for i in range(len(y))]
    record = load_record(run_dir)
    measured = record.compression["artefacts"]["export/tflite/model.tflite"]  # the export's own LiteRT accuracy
    assert measured["runtime"].startswith(("ai-edge-litert", "tf.lite.Interpreter"))
    assert np.mean([c for _, c in found] == y) == pytest.approx(measured["val_accuracy"], abs=1e-9)
    assert last_line(result.stderr).startswith(f"predicted {len(y)} input(s) in ")
    assert "by export/tflite" in last_line(result.stderr)
    assert not any(noise in result.stderr for noise in NOISE), result.stderr

    evaluated = command("tfhydra.evaluate", "--json", "--split", "validation", run_dir)  # the split x.npy holds
    assert evaluated.returncode == 0, evaluated.stderr[-2000:]
    figures = json.loads(evaluated.stdout.strip().splitlines()[-1])
    assert (figures["export"], figures["input"], figures["examples"]) == ("tflite", "features", len(y))
    assert figures["metrics"]["accuracy"] == pytest.approx(measured["val_accuracy"], abs=1e-6)
    tested = json.loads(answer("tfhydra.evaluate", "--json", run_dir).stdout.strip().splitlines()[-1])  # default: test
    assert tested["split"] == "test" and tested["metrics"]["accuracy"] == pytest.approx(
        measured["test_accuracy"], abs=1e-6
    )
    assert figures["metrics"]["loss"] == pytest.approx(record.best["val_loss"], rel=1e-3)  # TFLite vs Keras float
    assert not any(noise in evaluated.stderr for noise in NOISE), evaluated.stderr


@pytest.mark.slow
def test_one_bad_file_among_good_ones_is_named_and_the_others_predicted(tflite_run, tmp_path):
    run_dir, x, _ = tflite_run
    folder = tmp_path / "pngs"
    folder.mkdir()
    pixels = np.round(x[:12] * 255).astype(np.uint8)
    good = [folder / f"{i:02d}.png" for i in range(12)]
    for path, image in zip(good, pixels, strict=True):
        path.write_bytes(tf.io.encode_png(image).numpy())
    rgb, cut = folder / "05_rgb.png", folder / "07_cut.png"
    rgb.write_bytes(tf.io.encode_png(np.zeros((28, 28, 3), np.uint8)).numpy())
    cut.write_bytes(good[7].read_bytes()[:60])  # a truncated PNG
    np.save(tmp_path / "same.npy", pixels.astype(np.float32) / 255)  # the same pixels as the PNGs decode to

    result = command("tfhydra.predict", run_dir, folder)
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr[-2000:]
    found = classes(result)
    assert [name for name, _ in found] == [str(p) for p in good]
    reference = classes(answer("tfhydra.predict", run_dir, tmp_path / "same.npy"))
    assert [c for _, c in found] == [c for _, c in reference]
    lines = result.stderr.strip().splitlines()
    # the truncated file is refused before decoding (tfhydra/predict/image_checks.py), the RGB one once decoded
    assert [line.split(":")[0] for line in lines if line.startswith("Skipped")] == [f"Skipped {cut}", f"Skipped {rgb}"]
    assert f"Skipped {rgb}: it has 3 channel(s); the run's model takes 1;" in result.stderr
    assert f"Skipped {cut}: cannot decode it as an image: truncated (it does not end as the format does);" in (
        result.stderr
    )
    assert last_line(result.stderr).startswith("predicted 12 input(s) in ")
    assert "; 2 input(s) skipped (named above)" in last_line(result.stderr)
    assert not any(noise in result.stderr for noise in NOISE), result.stderr

    stopped = answer("tfhydra.predict", run_dir, folder, "--on-error", "fail")  # the first, before any decoding
    assert stopped.returncode == 1 and last_line(stopped.stderr).startswith(
        f"Error: {cut}: cannot decode it as an image (1 of 14 files are unreadable): truncated"
    )
    assert "Skipped" not in stopped.stderr
