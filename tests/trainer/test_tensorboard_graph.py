"""TensorBoard shows what the docs promise (issue 33, item 6): the Graphs tab shows the model's layers under both
loops (both write the same graph file, which headless Chromium shows against the real TensorBoard server: a
screenshot and the page's text); a 2x2 sweep is nine TensorBoard runs (two per job and the sweep's own); a sweep's
jobs tag every line they print, and their CUDA probe lines are filtered as in a single run."""

from __future__ import annotations

import re
import struct
import subprocess
import sys
import zlib

import pytest
from conftest import FAST, compose_config, run_cli
from tb_browser import page_text, screenshot, svg_labels
from tb_server import tensorboard_server
from trainer_runs import gradients_run

SMALL = [
    *FAST,
    "data=synthetic",
    "data.train_size=256",
    "data.val_size=64",
    "export.formats=[]",
    "trainer.steps_per_epoch=2",
    "trainer.validation_steps=1",
]
LAYERS = {"conv2d", "max_pooling2d", "conv2d_1", "max_pooling2d_1", "flatten", "dense", "logits"}


def small_cnn():
    import tf_keras as keras

    # Named: Keras numbers unnamed layers per process (conv2d_3 after other tests), and tests run in any order.
    inputs = keras.Input((28, 28, 1))
    x = keras.layers.Conv2D(4, 3, activation="relu", name="conv2d")(inputs)
    x = keras.layers.MaxPooling2D(name="max_pooling2d")(x)
    x = keras.layers.Flatten(name="flatten")(x)
    return keras.Model(inputs, keras.layers.Dense(3, name="dense")(x))


def graph_nodes(log_dir) -> list[str]:
    import tensorflow as tf

    names = []
    for path in sorted(log_dir.glob("events.out.tfevents.*")):
        for event in tf.compat.v1.train.summary_iterator(str(path)):
            if event.graph_def:
                graph = tf.compat.v1.GraphDef()
                graph.ParseFromString(event.graph_def)
                names.append([node.name for node in graph.node])
    assert len(names) == 1, f"{len(names)} graphs written"
    return names[0]


def test_the_graph_written_is_the_forward_pass_with_the_layers_at_the_top(tmp_path):
    from tfhydra.trainer.graph import write_model_graph

    assert write_model_graph(small_cnn(), tmp_path / "train")
    nodes = graph_nodes(tmp_path / "train")
    tops = {name.split("/")[0] for name in nodes}
    assert {"conv2d", "max_pooling2d", "flatten", "dense"} <= tops, tops
    assert not any("while" in name.lower() for name in nodes)  # not the steps_per_execution loop
    assert "conv2d/Conv2D" in nodes and "max_pooling2d/MaxPool" in nodes and "dense/MatMul" in nodes


def test_a_model_with_no_declared_inputs_writes_no_graph_and_trains_on(tmp_path):
    import tf_keras as keras

    from tfhydra.trainer.graph import write_model_graph

    class Subclassed(keras.Model):
        def call(self, x):
            return x

    assert write_model_graph(Subclassed(), tmp_path / "train") is False
    assert not (tmp_path / "train").exists()


def test_keras_own_graph_is_off_and_the_model_graph_goes_to_the_train_run(tmp_path):
    import tf_keras as keras

    from tfhydra.record.rundir import RunPaths
    from tfhydra.trainer.callbacks import RunRecorder, build_callbacks
    from tfhydra.trainer.graph import ModelGraph

    cfg = compose_config(["logger=[tensorboard]"])
    paths = RunPaths(tmp_path)
    callbacks = build_callbacks(cfg.trainer, cfg.logging, paths, RunRecorder())
    boards = [c for c in callbacks if isinstance(c, keras.callbacks.TensorBoard)]
    graphs = [c for c in callbacks if isinstance(c, ModelGraph)]
    assert len(boards) == 1 and boards[0].write_graph is False
    assert len(graphs) == 1 and graphs[0].log_dir == paths.tensorboard_train
    cfg.logging.write_graph = False
    assert not any(isinstance(c, ModelGraph) for c in build_callbacks(cfg.trainer, cfg.logging, paths, RunRecorder()))


TAGGED_WORKER = r"""
import os, sys
from tfhydra.platform.quiet import TaggedLines
tagged = TaggedLines().start()
print("before any job")
tagged.for_job("[job 3 lr=0.001]")
print("epoch 1/1 loss=1.0")
os.write(2, b"E0000 cuda_platform.cc:52] failed call to cuInit: UNKNOWN ERROR (303)\n")
os.write(2, b"W0000 cudart_stub.cc:31] Could not find cuda drivers on your machine, GPU will not be used.\n")
print("")
sys.stderr.write("a warning\n")
tagged.for_job("[job 4 lr=0.01]")
print("next job", end="")
tagged.release()
os.write(1, b"\nafter release\n")
"""


@pytest.mark.parametrize("quiet", ["1", "0"])
def test_a_worker_tags_each_line_with_its_job_and_drops_the_cuda_probe(quiet):
    result = subprocess.run(
        [sys.executable, "-c", TAGGED_WORKER],
        capture_output=True,
        text=True,
        timeout=60,
        env={**__import__("os").environ, "TFHYDRA_QUIET_START": quiet},
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "before any job",
        "[job 3 lr=0.001] epoch 1/1 loss=1.0",
        "",
        "[job 4 lr=0.01] next job",
        "after release",
    ]
    probe = [
        "[job 3 lr=0.001] E0000 cuda_platform.cc:52] failed call to cuInit: UNKNOWN ERROR (303)",
        "[job 3 lr=0.001] W0000 cudart_stub.cc:31] Could not find cuda drivers on your machine, GPU will not be used.",
    ]
    assert result.stderr.splitlines() == [*(probe if quiet == "0" else []), "[job 3 lr=0.001] a warning"]
    assert "tfhydra-drained" not in result.stdout + result.stderr


def png_size_and_colours(data: bytes) -> tuple[int, int, int]:
    """(width, height, distinct pixel values) of an 8-bit RGB(A) PNG, decoded with zlib (no imaging library)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    width, height, depth, colour = struct.unpack(">IIBB", data[16:26])
    assert depth == 8 and colour in (2, 6), (depth, colour)
    chunks, at = [], 8
    while at < len(data):
        length, kind = struct.unpack(">I4s", data[at : at + 8])
        if kind == b"IDAT":
            chunks.append(data[at + 8 : at + 8 + length])
        at += 12 + length
    raw = zlib.decompress(b"".join(chunks))
    channels = 3 if colour == 2 else 4
    stride = width * channels + 1
    # Each row starts with its filter byte; distinct bytes of unfiltered rows are enough to tell a blank page.
    values = {
        raw[row * stride + 1 : (row + 1) * stride][i : i + channels]
        for row in range(0, height, 25)
        for i in range(0, width * channels, channels * 7)
    }
    return width, height, len(values)


@pytest.mark.slow  # trains the fit loop's gradients run, which no other test of plain `pytest` trains
def test_both_loops_write_the_same_model_graph(tmp_path_factory):
    """The graph file the browser test below draws (custom loop's) is the one the fit loop writes too: the same
    nodes, the layers at the top, no steps loop; so the browser is started for one loop only."""
    fit, custom = (graph_nodes(gradients_run(tmp_path_factory, loop) / "tensorboard" / "train") for loop in LOOPS)
    assert sorted(fit) == sorted(custom)
    assert LAYERS <= {name.split("/")[0] for name in fit}
    assert not any("while" in name.lower() for name in fit)


LOOPS = ("fit", "custom")


@pytest.mark.slow
def test_the_graphs_page_shows_the_model_layers_in_chromium(tmp_path, tmp_path_factory):
    run_dir = gradients_run(tmp_path_factory, "custom")  # the default CNN's run, shared with the gradients tests
    with tensorboard_server(run_dir / "tensorboard", tmp_path / "tensorboard.log") as board:
        board.wait_until(lambda b: "train" in b.runs(), timeout=90)
        # 10 s of the page's virtual time (network fetches pause it): the labels are drawn by 3 s; the default 30 s
        # of TensorBoard's own timers cost 7 s of wall here for nothing more to read
        text = page_text(board.base_url, "/#graphs", budget_ms=10000)
        shot = screenshot(board.base_url, "/#graphs", tmp_path / "graphs.png")
    labels = svg_labels(text)
    assert LAYERS <= labels, sorted(labels)  # the layers, drawn as the graph's top-level nodes
    assert not any("while" in label.lower() for label in labels)
    assert "Malformed GraphDef" not in text and "Graph visualization failed" not in text
    width, height, colours = png_size_and_colours(shot.read_bytes())
    assert (width, height) == (1400, 1000)
    assert colours > 20, f"a nearly blank screenshot: {colours} distinct pixel values sampled"


@pytest.mark.slow
def test_a_2x2_sweep_is_nine_tensorboard_runs_and_every_job_line_is_tagged(tmp_path):
    sweep = tmp_path / "sweep"
    result = run_cli(
        "-m",
        "optimizer.lr=1e-3,5e-4",
        "data.batch_size=32,64",
        *SMALL,
        "model=mlp",
        f"hydra.sweep.dir={sweep}",
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    output = result.stdout + result.stderr
    jobs = {
        0: "lr=0.001,batch_size=32",
        1: "lr=0.001,batch_size=64",
        2: "lr=0.0005,batch_size=32",
        3: "lr=0.0005,batch_size=64",
    }
    for number, values in jobs.items():  # each job's epoch line starts with its own tag
        assert re.search(rf"^\[job {number} {re.escape(values)}\] .*epoch 1/1 loss=", output, re.M), output[-3000:]
    job_lines = [line for line in output.splitlines() if "[tfhydra]" in line and "[HYDRA]" not in line]
    assert job_lines and all(line.startswith("[job ") for line in job_lines), job_lines
    assert "failed call to cuInit" not in output and "Could not find cuda drivers" not in output
    names = sorted(p.name for p in sweep.iterdir() if p.is_dir())
    expected = {".", *(f"{name}/tensorboard/{split}" for name in names for split in ("train", "validation"))}
    with tensorboard_server(sweep, tmp_path / "tensorboard.log") as board:
        board.wait_until(lambda b: len(b.session_groups()) == 4 and set(b.runs()) >= expected, timeout=90)
        runs, groups = board.runs(), board.session_groups()
    assert len(names) == 4 and set(runs) == expected and len(runs) == 9, runs
    for group in groups:  # each trial sees its validation metrics in its own run
        shown = {m["name"]["tag"] for m in group["metricValues"]}
        assert {"epoch_accuracy", "epoch_loss", "best_val_accuracy"} <= shown, group
