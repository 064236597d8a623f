"""Issue 24, item 4: bad inputs of the data and model rooms, each refused in one line or made harmless.

Duplicate CSV column names; complex (and other non-real) npz examples; a file-cache lockfile left by a killed
run (cleared) or held by a live one (refused); a seed NumPy does not take; compression schemes the Model
Optimization Toolkit cannot apply to the sequence models; a Transformer fed padding only.
"""

import logging
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import data_files
import numpy as np
import pytest
import tf_keras as keras
from conftest import TESTS, assert_failed_record, last_line, read_run_record, run_cli

from tfhydra.config.errors import ConfigError

SYNTHETIC = ["data=synthetic", "data.train_size=256", "data.val_size=8", "data.shuffle_buffer=0", "data.batch_size=4"]


def build(compose_cfg, overrides, seed=0):
    from tfhydra.data.pipeline import build_datasets

    return build_datasets(compose_cfg(overrides).data, seed=seed)


def images_of(dataset):
    return np.concatenate([x.numpy() for x, _ in dataset])


# --- 1. duplicate CSV column names ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "source,header,shown,columns",
    [
        ("csv", "a,a,label", "'a'", "1 and 2"),
        ("csv", "a,label,b,label", "'label'", "2 and 4"),
        ("text_csv", "text, text ,label", "'text' and ' text '", "1 and 2"),
    ],
    ids=["csv-features", "csv-label", "text_csv-spaced"],
)
def test_duplicate_csv_columns_are_refused_naming_the_file_and_the_column(
    tmp_path, compose_cfg, source, header, shown, columns
):
    path = tmp_path / "t.csv"
    fields = len(header.split(","))
    path.write_text(
        header + "\n" + "".join(",".join(["good film", *["1"] * (fields - 2), str(i % 2)]) + "\n" for i in range(8))
    )
    with pytest.raises(ConfigError) as info:
        build(compose_cfg, [f"data={source}", f"data.path={path}"])
    assert str(info.value) == (
        f"{path}:1: column {shown} appears twice in the header (columns {columns}); "
        "accepted: a header row of distinct column names (rename one of them)"
    )


def test_distinct_csv_columns_still_read(tmp_path, compose_cfg):
    path = data_files.write_csv(tmp_path / "t.csv", n=24)
    assert build(compose_cfg, ["data=csv", f"data.path={path}"]).spec.input_shape == (3,)


# --- 2. complex and other non-real npz examples --------------------------------------------------------------


def write_npz(path: Path, x_train, x_test=None) -> Path:
    labels = np.arange(len(x_train)) % 2
    x_test = np.zeros((4, *x_train.shape[1:]), np.float32) if x_test is None else x_test
    np.savez(path, x_train=x_train, y_train=labels, x_test=x_test, y_test=np.arange(len(x_test)) % 2)
    return path


REAL = np.random.default_rng(0).random((16, 8, 8))
COMPLEX = "complex numbers, whose imaginary part the cast to float32 would drop (save np.abs(x) or x.real as float32)"


@pytest.mark.parametrize(
    "arrays,name,dtype,problem",
    [
        ({"x_train": (REAL + 1j * REAL).astype(np.complex64)}, "x_train", "complex64", COMPLEX),
        ({"x_train": REAL + 1j * REAL}, "x_train", "complex128", COMPLEX),
        (
            {"x_train": REAL.astype(np.float32), "x_test": np.ones((4, 8, 8), np.complex128)},
            "x_test",
            "complex128",
            COMPLEX,
        ),
        ({"x_train": np.full((16, 8, 8), "a")}, "x_train", "<U1", "strings"),
        ({"x_train": np.zeros((16, 8, 8), "datetime64[s]")}, "x_train", "datetime64[s]", "dates"),
    ],
    ids=["complex64", "complex128", "complex-validation", "strings", "dates"],
)
def test_npz_examples_that_are_not_real_numbers_are_refused(tmp_path, compose_cfg, arrays, name, dtype, problem):
    path = write_npz(tmp_path / "d.npz", arrays["x_train"], arrays.get("x_test"))
    with pytest.raises(ConfigError) as info:
        build(compose_cfg, ["data=npz", f"data.path={path}"])
    assert str(info.value) == (
        f"{path}[{name}]: its dtype is {dtype}: {problem}; accepted: an array of integers "
        "(e.g. uint8 images) or real floats (float16, float32, float64)"
    )


@pytest.mark.parametrize("dtype", ["uint8", "int16", "float16", "float64", "bool"])
def test_npz_examples_of_real_dtypes_still_load(tmp_path, compose_cfg, dtype):
    x = (REAL * (255 if dtype in ("uint8", "int16") else 1)).astype(dtype)
    datasets = build(compose_cfg, ["data=npz", f"data.path={write_npz(tmp_path / 'd.npz', x, x[:4])}"])
    assert datasets.spec.input_shape == (8, 8, 1)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["csv", "npz"])
def test_cli_duplicate_column_and_complex_npz_are_one_line_and_a_failed_record(tmp_path, kind):
    if kind == "csv":
        path = tmp_path / "t.csv"
        path.write_text("a,a,label\n" + "".join(f"{i},{i},{i % 2}\n" for i in range(12)))
        message = (
            f"{path}:1: column 'a' appears twice in the header (columns 1 and 2); accepted: a header row "
            "of distinct column names (rename one of them)"
        )
    else:
        path = write_npz(tmp_path / "d.npz", (REAL + 1j).astype(np.complex64))
        message = (
            f"{path}[x_train]: its dtype is complex64: {COMPLEX}; accepted: an array of integers (e.g. uint8 "
            "images) or real floats (float16, float32, float64)"
        )
    run_dir = tmp_path / "run"
    result = run_cli(
        f"data={kind}",
        f"data.path={path}",
        "model=mlp",
        "trainer.epochs=1",
        "logging.histogram_freq=0",
        f"hydra.run.dir={run_dir}",
    )
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert last_line(result.stderr) == f"Error: {message}"
    assert_failed_record(run_dir, message)
    assert not (run_dir / "export").exists()


# --- 3. a file-cache lockfile: left by a killed run (cleared), held by a live one (refused) ----------------

# A process that starts writing a file cache through tfhydra's pipeline (or, `raw`, through tf.data alone, as a
# program of the user's own would), reads one batch, says so, and then waits: the cache stays half-written.
WRITER = """
import sys, time
import tfhydra
mode, target, overrides = sys.argv[1], sys.argv[2], sys.argv[3:]
if mode == "raw":
    import tensorflow as tf
    iterator = iter(tf.data.Dataset.range(100000).cache(target))
else:
    from conftest import compose_config
    from tfhydra.data.pipeline import build_datasets
    iterator = iter(build_datasets(compose_config(overrides).data, seed=0).train)
next(iterator)
print("reading", flush=True)
time.sleep(300)
"""


def start_writer(mode: str, target: str, overrides=()) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(TESTS)}
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, mode, target, *overrides],
        env=env,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
    )
    assert writer.stdout.readline().strip() == "reading", "the writer did not start"
    return writer


def sigkill(process: subprocess.Popen) -> None:
    process.send_signal(signal.SIGKILL)
    assert process.wait(timeout=60) == -signal.SIGKILL


def test_a_cache_a_live_run_writes_is_refused_and_once_it_is_killed_the_same_build_proceeds(
    tmp_path, compose_cfg, caplog
):
    prefix = tmp_path / "cache" / "c"
    overrides = [*SYNTHETIC, f"data.cache={prefix}"]
    writer = start_writer("tfhydra", "", overrides)
    try:
        (lock,) = prefix.parent.glob("c.train-*_0.lockfile")
        filename = str(lock)[: -len("_0.lockfile")]
        with pytest.raises(ConfigError) as info:
            build(compose_cfg, overrides)
        assert str(info.value) == (
            f"data.cache={prefix}: {filename} is being written by process {writer.pid}; "
            "accepted: a cache prefix that no running process is writing (wait for it to "
            "finish, or give another prefix)"
        )
    finally:
        sigkill(writer)
    left = sorted(p.name for p in prefix.parent.glob(f"{Path(filename).name}_0*"))
    assert [name.split(".", 2)[-1].rstrip("0123456789") for name in left] == [
        "data-00000-of-00001.tempstate",
        "lockfile",
    ]  # what TensorFlow's writer leaves when it is killed
    with caplog.at_level(logging.WARNING, logger="tfhydra"):
        datasets = build(compose_cfg, overrides)
    assert [r.getMessage() for r in caplog.records] == [
        f"data.cache: removed {', '.join(left)}, left by a run killed while writing the cache (no process has them "
        "open); writing it again"
    ]
    uncached = images_of(build(compose_cfg, [*SYNTHETIC, "data.cache=false"]).train)
    np.testing.assert_array_equal(images_of(datasets.train), uncached)
    assert Path(f"{filename}.index").exists() and not list(prefix.parent.glob("*.lockfile"))
    np.testing.assert_array_equal(images_of(build(compose_cfg, overrides).train), uncached)  # read back


def test_a_cache_another_program_writes_is_refused_while_it_has_the_files_open(tmp_path, caplog):
    """A writer that is not tfhydra takes no lock of ours: its open files (/proc/<pid>/fd) say it is alive."""
    from tfhydra.data.file_cache import claim_cache

    target = str(tmp_path / "raw")
    writer = start_writer("raw", target)
    try:
        with pytest.raises(ConfigError) as info:
            claim_cache(target, "x")
        assert str(info.value) == (
            f"data.cache=x: {target}_0.lockfile exists and process {writer.pid} has its files "
            "open; accepted: a cache prefix that no running process is writing (delete the "
            "lockfile if none is)"
        )
    finally:
        sigkill(writer)
    with caplog.at_level(logging.WARNING, logger="tfhydra"):
        claim_cache(target, "x")
    assert not list(tmp_path.glob("raw_*")) and "removed raw_0.data-00000-of-00001.tempstate" in caplog.text


def test_a_stale_lockfile_beside_a_complete_cache_is_removed_and_the_cache_read(tmp_path, compose_cfg, caplog):
    """What the old check refused for ever (tests/data/test_data_pipeline.py wrote the lockfile by hand)."""
    overrides = ["data=synthetic", "data.train_size=8", "data.val_size=8", f"data.cache={tmp_path}/c"]
    first = images_of(build(compose_cfg, overrides).train)
    (written,) = tmp_path.glob("c.train-*.index")
    lock = written.with_name(written.name.replace(".index", "_0.lockfile"))
    lock.write_text("Created at: 0")
    with caplog.at_level(logging.WARNING, logger="tfhydra"):
        np.testing.assert_array_equal(images_of(build(compose_cfg, overrides).train), first)
    assert not lock.exists() and f"removed {lock.name}, left by a run killed" in caplog.text
    assert "reading the complete cache" in caplog.text


@pytest.mark.slow
def test_cli_a_run_killed_while_writing_its_cache_does_not_block_the_same_command(tmp_path):
    from run_processes import kill, start, wait_for

    cache, marker = tmp_path / "cache" / "c", tmp_path / "hold"
    marker.touch()
    # No shuffle buffer or prefetch to read ahead: the paused run has read a few batches of its first pass.
    args = [
        "model=mlp",
        "data=synthetic",
        "data.train_size=512",
        "data.val_size=64",
        "data.batch_size=8",
        "data.shuffle_buffer=0",
        "data.prefetch=0",
        "trainer.steps_per_execution=1",
        f"data.cache={cache}",
        "trainer.epochs=1",
        "logging.histogram_freq=0",
        f"+trainer.callbacks=[{{_target_: user_code.PauseWhileMarker, marker: '{marker}'}}]",
    ]
    run = tmp_path / "run"
    first = start(run, *args)
    try:
        assert wait_for(first, lambda: any(cache.parent.glob("c.train-*_0.lockfile"))), "the cache was not started"
        other = run_cli(*args, f"hydra.run.dir={tmp_path / 'other'}")  # a second run while the first writes
        assert other.returncode == 1 and "Traceback" not in other.stderr
        assert last_line(other.stderr).endswith(
            f"is being written by process {first.pid}; accepted: a cache prefix that no running process is writing "
            "(wait for it to finish, or give another prefix)"
        )
        assert last_line(other.stderr).startswith(f"Error: data.cache={cache}: {cache}.train-")
    finally:
        kill(first)
    assert any(cache.parent.glob("c.train-*_0.lockfile"))  # the killed run left TensorFlow's lockfile
    marker.unlink()
    again = run_cli(*args, f"hydra.run.dir={run}")  # the same command
    assert again.returncode == 0, again.stderr[-3000:]
    logged = (run / "train.log").read_text()
    assert re.search(
        r"\[tfhydra\]\[WARNING\] - data\.cache: removed "
        r"c\.train-\w+_0\.data-00000-of-00001\.tempstate\d+, c\.train-\w+_0\.lockfile, left by a run "
        r"killed while writing the cache \(no process has them open\); writing it again",
        logged,
    ), logged
    assert read_run_record(run)["status"] == "completed"
    assert list(cache.parent.glob("c.train-*.index")) and not list(cache.parent.glob("*.lockfile"))


# --- 4. seeds NumPy does not take -----------------------------------------------------------------------------

SEED_LINE = (
    "trainer.seed={}: out of range; accepted: an integer in [0, 4294967295] (2**32 - 1: the seeds NumPy, "
    "and so Keras' set_random_seed, accept)"
)


@pytest.mark.parametrize("seed", [2**32, 99999999999999999999])
def test_a_seed_beyond_numpys_range_is_refused_by_the_plan(compose_cfg, seed):
    from tfhydra.runner.plan import plan_run
    from tfhydra.trainer.checks import check_seed

    cfg = compose_cfg([f"trainer.seed={seed}"])
    for check in (check_seed, plan_run):
        with pytest.raises(ConfigError) as info:
            check(cfg)
        assert str(info.value) == SEED_LINE.format(seed)


def test_a_negative_seed_is_refused_by_the_plan(compose_cfg):
    from tfhydra.runner.plan import plan_run
    from tfhydra.trainer.checks import check_seed

    cfg = compose_cfg(["trainer.seed=-1"])
    with pytest.raises(ConfigError) as info:
        check_seed(cfg)
    assert str(info.value) == SEED_LINE.format(-1)
    with pytest.raises(ConfigError, match=r"^trainer.seed=-1: out of range; accepted: an integer "):
        plan_run(cfg)  # the schema answers first (its own range text)


def test_the_seed_range_is_what_numpy_keras_tensorflow_and_python_accept(compose_cfg):
    import random

    import tensorflow as tf

    from tfhydra.runner.plan import plan_run
    from tfhydra.trainer.checks import SEED_RANGE

    for seed in SEED_RANGE:
        plan_run(compose_cfg([f"trainer.seed={seed}"]))
        for seed_with in (random.seed, np.random.seed, tf.random.set_seed, keras.utils.set_random_seed):
            seed_with(seed)
    for outside in (SEED_RANGE[0] - 1, SEED_RANGE[1] + 1):
        with pytest.raises(ValueError):
            np.random.seed(outside)
    keras.utils.set_random_seed(0)


def test_cli_a_huge_seed_is_answered_by_the_pre_flight(tmp_path):
    result = run_cli("trainer.seed=99999999999999999999", f"hydra.run.dir={tmp_path / 'run'}")
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert last_line(result.stderr) == "Error: " + SEED_LINE.format(99999999999999999999)
    assert not (tmp_path / "run").exists()


# --- 5. compression schemes the toolkit cannot apply to the sequence models -----------------------------------

QAT_WHY = (
    "the Model Optimization Toolkit fake-quantizes the model's int64 token-id input, and its 8-bit scheme "
    "supports no Embedding, LSTM/GRU, MultiHeadAttention or LayerNormalization layer"
)
VARIANTS = {
    "lstm": ["model=lstm", "model.units=[8]", "model.embedding_dim=8"],
    "gru": ["model=lstm", "model.cell=gru", "model.units=[8]", "model.embedding_dim=8"],
    "bilstm": ["model=lstm", "model.bidirectional=true", "model.units=[8]", "model.embedding_dim=8"],
    "transformer": ["model=transformer", "model.width=16", "model.heads=2", "model.blocks=1", "model.mlp_dim=16"],
    "transformer-learned": [
        "model=transformer",
        "model.positions=learned",
        "model.width=16",
        "model.heads=2",
        "model.blocks=1",
        "model.mlp_dim=16",
    ],
}
SCHEMES = ["none", "prune", "cluster", "quantize", "prune_quantize", "cluster_quantize"]


def refusal(compose_cfg, variant, scheme):
    return refusal_of(compose_cfg([*VARIANTS[variant], f"compression={scheme}"]))


def refusal_of(cfg):
    """check_model_support's one line for a composed config, or None where it lets the scheme through."""
    from tfhydra.compression.checks_models import check_model_support

    try:
        check_model_support(cfg)
    except ConfigError as error:
        return str(error)
    return None


@pytest.mark.parametrize(
    "variant,scheme,expected",
    [
        (
            "lstm",
            "quantize",
            f"compression=quantize: model=lstm cannot be trained with it ({QAT_WHY}); accepted: "
            "compression=none, prune or cluster with model=lstm",
        ),
        (
            "gru",
            "prune_quantize",
            f"compression=prune_quantize: model=lstm cannot be trained with it ({QAT_WHY}); "
            "accepted: compression=none, prune or cluster with model=lstm",
        ),
        (
            "transformer",
            "cluster_quantize",
            f"compression=cluster_quantize: model=transformer cannot be trained with it "
            f"({QAT_WHY}); accepted: compression=none, prune or cluster with "
            "model=transformer",
        ),
        (
            "bilstm",
            "prune",
            "compression=prune: model=lstm with model.bidirectional=true cannot be trained with it (the "
            "Model Optimization Toolkit's pruning does not support Bidirectional layers); accepted: "
            "compression=none or cluster with model=lstm (or model.bidirectional=false)",
        ),
        (
            "transformer-learned",
            "cluster",
            "compression=cluster: model=transformer with model.positions=learned cannot "
            "be trained with it (the Model Optimization Toolkit's clustering does not "
            "support a custom layer with weights, as the learned position table is); "
            "accepted: compression=none or prune with model=transformer (or "
            "model.positions=sinusoidal)",
        ),
    ],
)
def test_schemes_the_toolkit_cannot_apply_are_refused_in_one_line(compose_cfg, variant, scheme, expected):
    assert refusal(compose_cfg, variant, scheme) == expected


@pytest.mark.parametrize(
    "overrides",
    [
        ["model=lstm", "compression=prune"],
        ["model=lstm", "compression=cluster"],
        ["model=lstm", "compression=none"],
        ["model=transformer", "compression=prune"],
        ["model=transformer", "compression=cluster"],
        ["model=cnn", "compression=quantize"],
        ["model=mlp", "compression=cluster_quantize"],
    ],
)
def test_schemes_that_work_pass(compose_cfg, overrides):
    from tfhydra.compression.checks_models import check_model_support

    check_model_support(compose_cfg(overrides))


def test_a_scheme_or_model_of_your_own_is_not_judged_here(compose_cfg):
    """The toolkit's answer on user code is reported when the scheme is applied (tfhydra/compression/schemes.py)."""
    from omegaconf import open_dict

    from tfhydra.compression.checks_models import check_model_support

    for node in ("compression", "model"):
        cfg = compose_cfg(["model=lstm", "compression=quantize"])
        with open_dict(cfg[node]):  # a schema's node is closed until opened itself (as `+compression._target_=` does)
            cfg[node]["_target_"] = "user_code.something"
        check_model_support(cfg)


@pytest.mark.slow
@pytest.mark.parametrize("variant", sorted(VARIANTS))  # one case per variant: five of about 55 s, not one of 280
def test_the_refused_schemes_are_exactly_those_the_toolkit_fails_on(tmp_path, compose_cfg, variant):
    """Every scheme applied to each sequence-model variant through tfhydra's own builders and trained one
    epoch: it fails exactly where check_model_support refuses (so a new tfmot release shows up here)."""
    from tfhydra.compression.schemes import build_scheme
    from tfhydra.config.contracts import Phase
    from tfhydra.data.pipeline import build_datasets
    from tfhydra.model.build import build_model

    path = data_files.write_text_csv(tmp_path / "t.csv", n=32)
    datasets = build_datasets(
        compose_cfg(["data=text_csv", f"data.path={path}", "data.sequence_length=16", "data.batch_size=16"]).data,
        seed=0,
    )
    outcomes = {}
    for scheme in SCHEMES:
        cfg = compose_cfg([*VARIANTS[variant], f"compression={scheme}"])
        try:
            model = build_model(cfg.model, datasets.spec)
            compression = build_scheme(
                cfg.compression, model, datasets.spec, Phase(steps_per_epoch=datasets.steps_per_epoch, epochs=1)
            )
            compression.model.compile("adam", "sparse_categorical_crossentropy")
            compression.model.fit(datasets.train, epochs=1, verbose=0, callbacks=compression.callbacks)
            failed = False
        except Exception:  # noqa: BLE001 (a traceback or a ConfigError: either way the run would not train)
            failed = True
        outcomes[scheme] = (failed, refusal_of(cfg) is not None)  # the config composed once
    assert {k: v for k, v in outcomes.items() if v[0] != v[1]} == {}
    assert not outcomes["none"][0]  # each variant trains uncompressed: a failure here is the set-up's, not a scheme's
    if variant == "transformer":
        assert not outcomes["prune"][0]  # the Transformer's custom layers now say what may be pruned


@pytest.mark.slow
def test_cli_quantize_of_the_lstm_is_answered_by_the_pre_flight(tmp_path):
    path = data_files.write_text_csv(tmp_path / "t.csv", n=32)
    result = run_cli(
        "compression=quantize", "model=lstm", "data=text_csv", f"data.path={path}", f"hydra.run.dir={tmp_path / 'run'}"
    )
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert last_line(result.stderr) == (
        f"Error: compression=quantize: model=lstm cannot be trained with it "
        f"({QAT_WHY}); accepted: compression=none, prune or cluster with model=lstm"
    )
    assert not (tmp_path / "run").exists()


# --- 6. a Transformer fed padding only ----------------------------------------------------------------------


@pytest.mark.parametrize("positions", ["sinusoidal", "learned"])
def test_the_transformer_gives_finite_probabilities_for_padding_only(compose_cfg, positions):
    from tfhydra.config.contracts import DataSpec
    from tfhydra.model.build import build_model

    spec = DataSpec((16,), 3, ("a", "b", "c"), 8, 8, dtype="int64", vocab_size=50)
    model = build_model(compose_cfg(["model=transformer", f"model.positions={positions}"]).model, spec)
    tokens = np.zeros((3, 16), np.int64)  # padding only (an empty text) ...
    tokens[1, :4] = [5, 6, 7, 8]  # ... and real texts beside it
    tokens[2, :] = 9
    for probabilities in (model(tokens, training=False).numpy(), model.predict(tokens, verbose=0)):
        assert np.all(np.isfinite(probabilities))
        np.testing.assert_allclose(probabilities.sum(axis=1), 1.0, rtol=1e-5)
    clone = keras.Model.from_config(model.get_config())  # the pooling layer is registered (tfmot clones models)
    clone.set_weights(model.get_weights())
    np.testing.assert_allclose(clone(tokens).numpy(), model(tokens).numpy(), rtol=1e-5, atol=1e-6)


def test_masked_mean_pooling_is_keras_mean_where_any_position_is_kept():
    import tensorflow as tf

    from tfhydra.model.sequence import MaskedMeanPooling

    x = tf.constant(np.random.default_rng(0).normal(size=(3, 5, 4)), tf.float32)
    mask = tf.constant([[True, True, False, False, False], [True] * 5, [False] * 5])
    pooled = MaskedMeanPooling()(x, mask=mask).numpy()
    keras_mean = keras.layers.GlobalAveragePooling1D()(x, mask=mask).numpy()
    np.testing.assert_allclose(pooled[:2], keras_mean[:2], rtol=1e-6)
    assert np.all(np.isnan(keras_mean[2])) and np.all(pooled[2] == 0)  # Keras' 0 / 0; ours pools to zeros
    np.testing.assert_allclose(MaskedMeanPooling()(x).numpy(), x.numpy().mean(axis=1), rtol=1e-6)
