"""`python -m tfhydra.predict RUN INPUT...` (issue 29): a finished run answers on new data as stored.

Acceptance: for npz, image-folder, CSV and text-CSV runs, predict on the validation inputs as stored (the
.npz's array, the val/ folder of PNGs, a CSV of the held-out rows, a text file of their texts) gives, for every
example, the class the served model gives on the validation split exactly as tfhydra-evaluate builds it
(`load_run_config` + `build_datasets`, its raw `serve_raw` path where the model takes the raw data, else `serve`
on the pipeline's inputs). Bad input is one `Error:` line naming the file.
"""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path

import data_files
import numpy as np
import pytest
import tensorflow as tf
from conftest import FAST, ROOT, TESTS, last_line, run_module

import tfhydra
from tfhydra.platform.terminal import figure

RUNS = {
    "npz": lambda tmp: ["data=npz", f"data.path={data_files.write_npz(tmp / 'images.npz', 96, 40, (28, 28))}"],
    "image_folder": lambda tmp: [
        "data=image_folder",
        "data.image_size=[16,16]",
        f"data.path={data_files.write_image_folder(tmp / 'pets', per_class=12, val_per_class=5)}",
    ],
    "csv": lambda tmp: ["data=csv", f"data.path={data_files.write_csv(tmp / 'iris.csv', n=90)}"],
    "text_csv": lambda tmp: [
        "data=text_csv",
        f"data.path={data_files.write_text_csv(tmp / 'reviews.csv', n=90)}",
        "data.sequence_length=16",
        "data.vocab_size=200",
        "model=lstm",
        "model.units=[8]",
        "model.embedding_dim=8",
    ],
}


ENV = {"PATH": "/usr/bin:/bin", "PYTHONPATH": f"{ROOT}:{TESTS}"}


def predict(*args, timeout=300) -> subprocess.CompletedProcess:
    return run_module("tfhydra.predict", *map(str, args), env=ENV, timeout=timeout)


def predict_with_peak_rss(*args, timeout=300) -> tuple[subprocess.CompletedProcess, int]:
    """`predict(*args)` and the child's own peak resident set size in bytes (its ru_maxrss from os.wait4: not
    RUSAGE_CHILDREN, the largest of every child this process has waited for)."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        process = subprocess.Popen(
            [sys.executable, "-m", "tfhydra.predict", *map(str, args)],
            cwd=ROOT,
            stdout=out,
            stderr=err,
            stdin=subprocess.DEVNULL,
            text=True,
            env=ENV,
        )
        deadline = time.monotonic() + timeout
        while not (waited := os.wait4(process.pid, os.WNOHANG))[0]:
            if time.monotonic() > deadline:
                process.kill()
                os.wait4(process.pid, 0)
                pytest.fail(f"tfhydra-predict {args} did not end in {timeout} s")
            time.sleep(0.05)
        process.returncode = os.waitstatus_to_exitcode(waited[1])
        out.seek(0)
        err.seek(0)
        return subprocess.CompletedProcess(process.args, process.returncode, out.read(), err.read()), (
            waited[2].ru_maxrss * 1024
        )


def write_black_png(path: Path, side: int) -> Path:
    """A grayscale PNG of side x side black pixels, written row by row (never the whole image in memory): for
    20000, 1.7 MB on disk (zlib level 1, quick), 400 MB decoded, 1.6 GB as the float32 a resize makes."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    packer, rows = zlib.compressobj(1), bytes(side + 1) * 100  # each row: filter byte 0, then the pixels
    body = b"".join(packer.compress(rows) for _ in range(side // 100)) + packer.compress(bytes(side + 1) * (side % 100))
    header = struct.pack(">IIBBBBB", side, side, 8, 0, 0, 0, 0)  # 8-bit grayscale, no interlace
    path.write_bytes(
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", body + packer.flush()) + chunk(b"IEND", b"")
    )
    return path


def rows(result: subprocess.CompletedProcess) -> list[dict]:
    assert result.returncode == 0, result.stderr[-2000:]
    return list(csv.DictReader(io.StringIO(result.stdout)))


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """One short run of each source, trained on first use: {name: run directory}."""
    made = {}

    def run(name):
        if name not in made:
            tmp = tmp_path_factory.mktemp(name)
            cfg = tfhydra.compose(["model=mlp", "data.batch_size=16", *FAST, *RUNS[name](tmp)])
            tfhydra.run(cfg, run_dir=tmp / "run")
            made[name] = tmp / "run"
        return made[name]

    return run


def evaluate_classes(run_dir, split: str = "validation") -> tuple[list[str], object]:
    """(the class names the served model gives on the run's `split` (validation or test), as tfhydra-evaluate feeds
    it, the composed config). Evaluate prints metrics, not classes: this is its input path with argmax."""
    from tfhydra.data.pipeline import build_datasets
    from tfhydra.evaluate import _takes, load_run_config, load_served_model
    from tfhydra.record.run_record import load_record

    cfg = load_run_config(run_dir, [])
    datasets = build_datasets(cfg.data, cfg.trainer.seed)
    served, _ = load_served_model(run_dir)
    serving = datasets.serving
    if serving is not None and _takes(served.signatures["serve_raw"], tuple(serving.raw.shape), serving.raw.dtype.name):
        raw, _ = serving.raw_test if split == "test" else serving.raw_validation
        batches = [served.serve_raw(tf.constant(raw[i : i + 16])) for i in range(0, len(raw), 16)]
    else:
        batches = [served.serve(x) for x, _ in (datasets.test if split == "test" else datasets.validation)]
    names = load_record(run_dir).data["class_names"]
    classes = [names[i] for i in np.concatenate([b.numpy().argmax(-1) for b in batches])]
    assert len(classes) == (datasets.spec.test_size if split == "test" else datasets.spec.val_size)
    return classes, cfg


def held_out_rows(cfg, tmp_path, extra_id: bool = True):
    """The run's validation rows of its CSV, as stored (a new file with an `id` column in front)."""
    from tfhydra.data.tables import read_table, split_rows

    path, columns = read_table(cfg.data.path, ",")
    val_idx = split_rows(cfg.data, path, columns, cfg.trainer.seed)[2].validation
    out = tmp_path / "held_out.csv"
    with open(out, "w", newline="") as file:
        writer = csv.writer(file)
        writer.writerow(["id", *columns])
        for i in val_idx:
            writer.writerow([f"row{i}", *(columns[c][i] for c in columns)])
    return out, [columns[cfg.data.text][i] for i in val_idx] if "text" in cfg.data else None


@pytest.mark.slow
def test_npz_arrays_and_their_pngs_predict_the_evaluated_classes(runs, tmp_path):
    run_dir = runs("npz")
    expected, cfg = evaluate_classes(run_dir, "test")  # x_test is the npz's test split (issue 34)
    found = rows(predict(run_dir, f"{cfg.data.path}:x_test", "--top-k", "2"))
    assert [r["input"] for r in found] == [f"{cfg.data.path}:x_test[{i}]" for i in range(len(expected))]
    assert [r["class_1"] for r in found] == expected
    assert all(float(r["probability_1"]) >= float(r["probability_2"]) for r in found)
    images = np.load(cfg.data.path)["x_test"]
    np.save(tmp_path / "x.npy", images)  # the same (N, 28, 28) uint8 layout, on its own
    folder = tmp_path / "pngs"
    folder.mkdir()
    for i, image in enumerate(images):
        (folder / f"{i:03d}.png").write_bytes(tf.io.encode_png(image[..., None]).numpy())
    big = tmp_path / "big"  # each pixel 2x2: resized back to 28x28 (bilinear, as training resizes), the same pixels
    big.mkdir()
    for i, image in enumerate(images):
        (big / f"{i:03d}.png").write_bytes(tf.io.encode_png(image.repeat(2, 0).repeat(2, 1)[..., None]).numpy())
    every = rows(predict(run_dir, tmp_path / "x.npy", folder, big))
    assert [r["class_1"] for r in every] == expected * 3  # lossless PNGs: the same pixels, the same classes
    assert every[-1]["input"] == str(big / f"{len(images) - 1:03d}.png")


@pytest.mark.slow
def test_an_image_folder_predicts_the_evaluated_classes(runs, tmp_path):
    from tfhydra.data.files import list_images

    run_dir = runs("image_folder")
    expected, cfg = evaluate_classes(run_dir)
    val = f"{cfg.data.path}/val"
    paths, _ = list_images(Path(val), ("cat", "dog", "owl"))
    result = predict(run_dir, val, "--output", tmp_path / "out.jsonl")
    assert result.returncode == 0, result.stderr[-2000:]
    lines = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert {line["input"]: line["classes"][0] for line in lines} == dict(zip(paths, expected, strict=True))
    assert last_line(result.stderr).startswith(f"predicted {len(paths)} input(s) in ")
    assert not list(tmp_path.glob(".*.partial"))


@pytest.mark.slow
def test_held_out_csv_rows_predict_the_evaluated_classes_and_carry_their_columns(runs, tmp_path):
    run_dir = runs("csv")
    expected, cfg = evaluate_classes(run_dir)
    held_out, _ = held_out_rows(cfg, tmp_path)
    result = predict(run_dir, held_out, "--top-k", "3", "--output", tmp_path / "out.csv")
    found = list(csv.DictReader(open(tmp_path / "out.csv")))
    assert list(found[0]) == [
        "input",
        "id",
        "label",
        "class_1",
        "probability_1",
        "class_2",
        "probability_2",
        "class_3",
        "probability_3",
    ]
    assert [r["class_1"] for r in found] == expected
    assert [r["input"] for r in found] == [f"{held_out}:{line}" for line in range(2, len(expected) + 2)]
    original = list(csv.DictReader(open(held_out)))
    assert [(r["id"], r["label"]) for r in found] == [(r["id"], r["label"]) for r in original]
    accuracy = np.mean([r["class_1"] == r["label"] for r in found])
    assert f"accuracy {figure(accuracy)} on the {len(found)} row(s) with a label (column label)" in last_line(
        result.stderr
    )
    assert all(abs(sum(float(r[f"probability_{k}"]) for k in (1, 2, 3)) - 1) < 1e-5 for r in found)


@pytest.mark.slow
def test_held_out_texts_predict_the_evaluated_classes_from_a_csv_and_a_text_file(runs, tmp_path):
    run_dir = runs("text_csv")
    expected, cfg = evaluate_classes(run_dir)
    held_out, texts = held_out_rows(cfg, tmp_path)
    (tmp_path / "texts.txt").write_text("\n".join(texts) + "\n")
    found = rows(predict(run_dir, held_out, tmp_path / "texts.txt"))
    assert [r["class_1"] for r in found] == expected * 2
    assert [r["id"] for r in found[len(expected) :]] == [""] * len(expected)  # the text file has no other columns
    assert found[-1]["input"] == f"{tmp_path / 'texts.txt'}:{len(expected)}"


# --- bad input: one line ------------------------------------------------------------------------------------


def assert_one_line(result, message):
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr[-2000:]
    assert last_line(result.stderr) == f"Error: {message}"


@pytest.mark.slow
def test_an_image_with_other_channels_or_unreadable_is_named(runs, tmp_path):
    run_dir = runs("npz")
    rgb = tmp_path / "rgb" / "b.png"
    rgb.parent.mkdir()
    (tmp_path / "rgb" / "a.png").write_bytes(tf.io.encode_png(np.zeros((28, 28, 1), np.uint8)).numpy())
    rgb.write_bytes(tf.io.encode_png(np.zeros((30, 30, 3), np.uint8)).numpy())
    takes = "image files (PNG, JPEG, GIF, BMP), folders of them, or an .npy/.npz of uint8 examples of shape (28, 28)"
    assert_one_line(
        predict(run_dir, rgb.parent, "--on-error", "fail"),
        f"{rgb}: it has 3 channel(s); the run's model takes 1; accepted: {takes}",
    )
    skipped = predict(run_dir, rgb.parent)  # the default, --on-error skip: the good file is predicted
    assert skipped.returncode == 1 and "Traceback" not in skipped.stderr, skipped.stderr[-2000:]
    assert [r["input"] for r in csv.DictReader(io.StringIO(skipped.stdout))] == [str(tmp_path / "rgb" / "a.png")]
    assert f"Skipped {rgb}: it has 3 channel(s); the run's model takes 1; accepted: {takes}" in skipped.stderr
    assert last_line(skipped.stderr).endswith("; 1 input(s) skipped (named above)")
    png = (tmp_path / "rgb" / "a.png").read_bytes()  # a PNG's signature, header and end, a damaged body:
    rgb.write_bytes(png[:33] + b"x" * 40 + png[-12:])  # passes the checks before decoding, fails the decoding
    assert_one_line(
        predict(run_dir, rgb.parent, "--on-error", "fail"),
        f"{rgb}: cannot decode it as an image (1 of "
        "2 files are unreadable); accepted: image files TensorFlow can decode (PNG, JPEG, GIF, BMP)",
    )
    (tmp_path / "empty").mkdir()
    assert_one_line(
        predict(run_dir, tmp_path / "empty", "--on-error", "fail"),
        f"{tmp_path / 'empty'}: no image "
        f"file in it (searched recursively for .png, .jpg, .jpeg, .gif, .bmp); accepted: {takes}",
    )
    nothing = f"{tmp_path / 'empty'}: no image file in it (searched recursively for .png, .jpg, .jpeg, .gif, .bmp)"
    assert_one_line(predict(run_dir, tmp_path / "empty"), f"{nothing}; accepted: {takes}")  # the only input: its error
    both = predict(run_dir, tmp_path / "empty", tmp_path / "missing.png")  # nothing left of several: named, then one
    assert (
        both.returncode == 1
        and f"Skipped {nothing}" in both.stderr
        and f"Skipped {tmp_path / 'missing.png'}: no such file or directory" in both.stderr
    )
    assert last_line(both.stderr) == f"Error: INPUT: no example to predict (2 input(s) skipped); accepted: {takes}"


@pytest.mark.slow
def test_a_csv_without_a_feature_column_is_named(runs, tmp_path):
    run_dir = runs("csv")
    (tmp_path / "new.csv").write_text("x1,x3,label\n1.0,7,setosa\n")
    assert_one_line(
        predict(run_dir, tmp_path / "new.csv"),
        f"{tmp_path / 'new.csv'}: it has no column 'x2' (its columns: x1, x3, label); accepted: a CSV "
        "with the run's feature columns ['x1', 'x2', 'x3']; other columns are carried through to the "
        "output",
    )


@pytest.mark.slow
def test_a_run_without_a_saved_model_or_with_an_untrusted_config_is_refused(runs, tmp_path):
    run_dir = tmp_path / "copy"
    shutil.copytree(runs("csv"), run_dir, symlinks=True)
    shutil.rmtree(run_dir / "export" / "saved_model")
    assert_one_line(
        predict(run_dir, "x.csv"),
        f"{run_dir}: it has no export/saved_model/saved_model.pb; accepted: "
        "the directory of a completed run with .hydra/ and export/saved_model or "
        "export/tflite/model.tflite",
    )
    run_dir = tmp_path / "edited"
    shutil.copytree(runs("csv"), run_dir, symlinks=True)
    config = run_dir / ".hydra" / "config.yaml"
    config.write_text(config.read_text() + "extra:\n  _target_: os.system\n  _args_: ['touch pwned']\n")
    result = predict(run_dir, "x.csv")
    assert result.returncode == 1 and last_line(result.stderr).startswith(
        f"Error: {config}: it holds extra._target_: os.system, which your own configs do not name"
    )
    trusted = predict("--trust-run", run_dir, tmp_path / "missing.csv")
    assert "Warning: --trust-run:" in trusted.stderr
    assert last_line(trusted.stderr).startswith(f"Error: {tmp_path / 'missing.csv'}: no such file or directory")


def test_the_command_line_is_checked_in_one_line(tmp_path):
    assert_one_line(
        predict(tmp_path, "x.png", "--top-k", "0"),
        "--top-k=0: no class to print; accepted: an integer >= 1 (at most the run's number of classes)",
    )
    assert_one_line(
        predict(tmp_path, "x.png", "--output", "p.xlsx"),
        "--output=p.xlsx: tfhydra-predict writes CSV or "
        "JSON Lines, not .xlsx; accepted: a file ending in .csv or .jsonl (or --format csv|jsonl)",
    )
    assert_one_line(
        predict(tmp_path, "x.png"),
        f"{tmp_path}: not a completed run (status: None); accepted: the "
        "directory of a completed run with .hydra/ and export/saved_model or export/tflite/model.tflite",
    )


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_huge_png_among_good_files_is_named_undecoded_and_the_peak_memory_stays(runs, tmp_path, capsys):
    """Issue 46 item 6: a 20000x20000 PNG among good files (decoded and resized, it took the command from 0.6 to
    2.6 GB): the good files predicted as without it, the big one named from its header, peak RSS within 1.2x."""
    run_dir = runs("npz")
    good, mixed = tmp_path / "good", tmp_path / "mixed"
    good.mkdir()
    pixels = np.random.default_rng(0).integers(0, 256, (8, 28, 28, 1), dtype=np.uint8)
    for i, image in enumerate(pixels):
        (good / f"{i}.png").write_bytes(tf.io.encode_png(image).numpy())
    shutil.copytree(good, mixed)
    huge = write_black_png(mixed / "4_huge.png", 20000)
    alone, alone_rss = predict_with_peak_rss(run_dir, good)
    among, among_rss = predict_with_peak_rss(run_dir, mixed)
    assert among.returncode == 1 and "Traceback" not in among.stderr, among.stderr[-2000:]
    assert [
        {**r, "input": r["input"].replace(str(mixed), str(good))} for r in csv.DictReader(io.StringIO(among.stdout))
    ] == rows(alone)
    assert len(rows(alone)) == 8
    assert (
        f"Skipped {huge}: 20000x20000 = 400000000 pixels by its header (not decoded); accepted: images of at most "
        "50000000 pixels (data.max_pixels of conf/data/image_folder.yaml; --max-pixels N sets another)"
    ) in among.stderr.splitlines()
    assert last_line(among.stderr).endswith("; 1 input(s) skipped (named above)")
    assert among_rss <= 1.2 * alone_rss, (
        f"peak RSS {among_rss / 2**20:.0f} MiB with it, {alone_rss / 2**20:.0f} MiB without"
    )

    from tfhydra.predict.cli import parse_arguments
    from tfhydra.predict.cli import predict as predict_in_process

    capsys.readouterr()
    summary, skipped = predict_in_process(parse_arguments([str(run_dir), str(mixed), "--max-pixels", "784"]))
    assert skipped == 1 and summary.startswith("predicted 8 input(s) in ")  # 28 x 28 = 784: the good ones fit
    assert (
        f"Skipped {huge}: 20000x20000 = 400000000 pixels by its header (not decoded); accepted: images of at most "
        "784 pixels (--max-pixels)" in capsys.readouterr().err
    )


def test_image_folders_rules_refuse_image_files_before_decoding(tmp_path):
    """Empty, foreign and truncated files (tfhydra/data/files.py `looks_complete`) and more pixels than the limit
    by the header (image_headers.py, here a JPEG's) are left out of the pipeline and named; `fail`: the first."""
    from tfhydra.config.errors import ConfigError
    from tfhydra.predict.inputs import read_inputs
    from tfhydra.predict.layout import Layout

    layout = Layout(None, "x", "y", (28, 28), tf.uint8, "images", max_pixels=28 * 28, max_pixels_from="--max-pixels")
    png = tf.io.encode_png(np.zeros((28, 28, 1), np.uint8)).numpy()
    files = {
        "cut.png": png[:60],
        "empty.png": b"",
        "good.png": png,
        "text.png": b"hello",
        "z_big.jpg": tf.io.encode_jpeg(np.zeros((28, 29, 1), np.uint8)).numpy(),
    }
    for name, content in files.items():
        (tmp_path / name).write_bytes(content)
    decodable = "image files TensorFlow can decode (PNG, JPEG, GIF, BMP)"
    found = read_inputs([str(tmp_path)], layout, "skip")
    assert found.image_files == [str(tmp_path / "good.png")]
    assert [str(error) for error in found.skipped] == [
        f"{tmp_path / 'cut.png'}: cannot decode it as an image: truncated (it does not end as the format does); "
        f"accepted: {decodable}",
        f"{tmp_path / 'empty.png'}: cannot decode it as an image: an empty file; accepted: {decodable}",
        f"{tmp_path / 'text.png'}: cannot decode it as an image: not a PNG, JPEG, GIF or BMP file (its first bytes); "
        f"accepted: {decodable}",
        f"{tmp_path / 'z_big.jpg'}: 28x29 = 812 pixels by its header (not decoded); accepted: images of at most 784 "
        "pixels (--max-pixels)",
    ]
    with pytest.raises(ConfigError) as stopped:
        read_inputs([str(tmp_path)], layout, "fail")
    assert str(stopped.value) == (
        f"{tmp_path / 'cut.png'}: cannot decode it as an image (3 of 5 files are unreadable): truncated (it does not "
        f"end as the format does); accepted: {decodable}"
    )


def test_the_pixel_limit_is_the_runs_else_image_folders_default(compose_cfg):
    from tfhydra.config.errors import ConfigError
    from tfhydra.predict.cli import parse_arguments
    from tfhydra.predict.layout import Run

    recorded = Run(Path("run"), {"name": "image_folder", "max_pixels": 1234}, ("a", "b"), 8)
    assert recorded.pixel_limit() == (1234, "the run's data.max_pixels; --max-pixels N sets another")
    other = Run(Path("run"), {"name": "npz"}, ("a", "b"), 8)
    assert other.pixel_limit() == (
        compose_cfg(["data=image_folder", "data.path=."]).data.max_pixels,
        "data.max_pixels of conf/data/image_folder.yaml; --max-pixels N sets another",
    )
    with pytest.raises(ConfigError) as refused:
        parse_arguments(["run", "x.png", "--max-pixels", "0"])
    assert str(refused.value) == "--max-pixels=0: no image fits; accepted: an integer >= 1 (height x width)"
