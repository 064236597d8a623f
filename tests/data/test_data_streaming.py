"""Issue 26: data bigger than memory. `data.cache=auto` and its budget (stored dtype), the label index
(once per dataset, a changed shard rebuilt, a bad index never trusted), image_folder's cheap check and its
bad files found later, sharding by file, and the record of what the pipeline decided."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import data_files
import numpy as np
import pytest
from conftest import last_line, read_run_record, run_cli

from tfhydra.config.errors import ConfigError


@pytest.fixture(autouse=True)
def index_dir(tmp_path, monkeypatch):
    folder = tmp_path / "tfhydra-cache"
    monkeypatch.setenv("TFHYDRA_CACHE_DIR", str(folder))
    return folder / "index"


def raw_records(tmp_path, n=40, shards=4, shape=(8, 8, 3), seed=0, prefix="train"):
    return data_files.write_tfrecords(
        tmp_path / "data", prefix, n=n, shards=shards, shape=shape, classes=4, encoding="raw", seed=seed
    )


def tfrecord_cfg(compose_cfg, pattern, *extra):
    return compose_cfg(
        [
            "data=tfrecord",
            f"data.train={pattern}",
            "data.encoding=raw",
            "data.raw_shape=[8,8,3]",
            "data.batch_size=8",
            *extra,
        ]
    )


def build(cfg):
    from tfhydra.data.pipeline import build_datasets

    return build_datasets(cfg.data, 0)


def test_auto_caches_a_split_that_fits_in_its_stored_dtype_and_streams_one_that_does_not(tmp_path, compose_cfg, caplog):
    pattern = raw_records(tmp_path)
    caplog.set_level(logging.INFO, "tfhydra")
    fits = build(tfrecord_cfg(compose_cfg, pattern, "data.val_fraction=0.25", "data.test_fraction=0"))  # 30 / 10
    plan = fits.spec.pipeline
    # uint8 8x8x3 images (192 bytes) and an int64 label, plus tf.data's per-tensor overhead: stored size, not 4x
    assert plan["train"]["cache"] == "memory" and plan["train"]["estimated_bytes"] == 30 * (192 + 8 + 2 * 96)
    assert plan["validation"]["estimated_bytes"] == 10 * (192 + 8 + 2 * 96)
    assert "fits the memory cache budget" in plan["train"]["reason"]
    assert fits.spec.as_dict()["pipeline"] == plan  # what the run record's `data` section gets
    x, _ = next(iter(fits.train))
    assert x.dtype.name == "float32" and float(x.numpy().max()) <= 1.0  # scaled after the cache

    small = build(
        tfrecord_cfg(compose_cfg, pattern, "data.val_fraction=0.25", "data.test_fraction=0", "data.cache_budget=1kB")
    )
    assert small.spec.pipeline["train"]["cache"] == "off"
    assert small.spec.pipeline["train"]["reason"].startswith(
        "about 11.8 kB as stored is more than the memory cache budget of 1.0 kB left (data.cache_budget=1kB)"
    )
    assert "data.cache=auto: train not cached: about 11.8 kB" in caplog.text
    np.testing.assert_array_equal(sorted(labels_of(small.train)), sorted(labels_of(fits.train)))


def test_a_memory_cache_forced_beyond_the_budget_is_a_warning_with_the_figures(tmp_path, compose_cfg, caplog):
    pattern = raw_records(tmp_path)
    forced = build(tfrecord_cfg(compose_cfg, pattern, "data.cache=memory", "data.cache_budget=2kB"))
    assert forced.spec.pipeline["train"]["cache"] == "memory"
    warning = next(r.getMessage() for r in caplog.records if r.levelno == logging.WARNING)
    assert warning.startswith("data.cache=memory: the train split takes about ")
    assert "over the memory cache budget of 2.0 kB left (data.cache_budget=2kB)" in warning


def test_sources_already_in_memory_are_not_copied_again_by_auto(compose_cfg):
    datasets = build(compose_cfg(["data=synthetic", "data.train_size=16", "data.val_size=8"]))
    assert datasets.spec.pipeline["train"] == {
        "cache": "off",
        "estimated_bytes": None,
        "passes": None,
        "reason": "the examples are in memory already, the source decodes nothing",
    }


def test_the_budget_comes_from_the_available_memory_and_a_cgroup_limit(monkeypatch):
    from tfhydra.data import budget
    from tfhydra.platform import hostmemory

    monkeypatch.setattr(hostmemory, "_meminfo", lambda: {"MemAvailable": 16 * 10**9})
    monkeypatch.setattr(hostmemory, "_cgroup_room", lambda: None)
    monkeypatch.delenv("TF_CONFIG", raising=False)
    assert budget.cache_budget("auto") == (10**9, "1/16 of 16.0 GB available (MemAvailable)")
    monkeypatch.setattr(hostmemory, "_cgroup_room", lambda: (4 * 10**9, "cgroup memory.max 5.0 GB less 1.0 GB used"))
    monkeypatch.setenv(
        "TF_CONFIG",
        json.dumps({"cluster": {"worker": ["localhost:1", "localhost:2"]}, "task": {"type": "worker", "index": 0}}),
    )
    assert budget.cache_budget("auto") == (
        125 * 10**6,
        "1/16 of 4.0 GB available (cgroup memory.max 5.0 GB less 1.0 GB used), divided by 2 processes on this host",
    )
    assert budget.parse_size("1.5GiB") == 3 * 2**29 and budget.parse_size("lots") is None


@pytest.mark.parametrize(
    "value, shown", [("lots", "lots"), ("'12 parsecs'", "'12 parsecs'"), ("true", "true"), ("0", "0"), ("1.5", "1.5")]
)
def test_a_budget_that_is_not_a_size_is_refused_by_the_plan(compose_cfg, value, shown):
    from tfhydra.runner.plan import plan_run

    with pytest.raises(ConfigError) as error:
        plan_run(compose_cfg([f"data.cache_budget={value}"]))
    assert str(error.value) == (
        f"data.cache_budget={shown}: not a size; "
        "accepted: auto, a number of bytes, or a size such as 2GB, 500MB, 1.5GiB"
    )


@pytest.mark.parametrize("value, size", [("1", 1), ("4096", 4096), ("2GB", 2 * 10**9), ("'1.5GiB'", 3 * 2**29)])
def test_a_budget_in_bytes_or_as_a_size_is_taken(compose_cfg, value, size):
    """An integer is bytes (issue 35: `data.cache_budget=1` was refused as the wrong type)."""
    from tfhydra.data.budget import cache_budget
    from tfhydra.runner.plan import plan_run

    cfg = compose_cfg([f"data.cache_budget={value}"])
    plan_run(cfg)
    assert cache_budget(cfg.data.cache_budget)[0] == size


def labels_of(dataset) -> np.ndarray:
    return np.concatenate([y.numpy() for _, y in dataset])


def test_labels_are_read_once_per_dataset_and_a_changed_shard_is_read_again(tmp_path, compose_cfg, caplog, index_dir):
    pattern = raw_records(tmp_path, n=40)
    caplog.set_level(logging.INFO, "tfhydra")
    first = build(tfrecord_cfg(compose_cfg, pattern))
    assert "read the labels of 4 of 4 file(s) (not indexed yet)" in caplog.text
    index = next(index_dir.glob("labels-*.json"))
    assert not list((tmp_path / "data").glob("*.json"))  # nothing beside the user's data
    caplog.clear()
    again = build(tfrecord_cfg(compose_cfg, pattern))
    assert "labels of 4 file(s) from the label index" in caplog.text and "read the labels" not in caplog.text
    assert sorted(labels_of(again.validation)) == sorted(labels_of(first.validation))

    # one shard rewritten with other records (another size): its entry is stale, read again, never used
    data_files.write_tfrecords(
        tmp_path / "other", "train", n=80, shards=4, shape=(8, 8, 3), classes=4, encoding="raw", seed=5
    )
    (tmp_path / "other" / "train-00001-of-00004.tfrecord").replace(tmp_path / "data" / "train-00001-of-00004.tfrecord")
    caplog.clear()
    changed = build(tfrecord_cfg(compose_cfg, pattern))
    assert "read the labels of 1 of 4 file(s) (1 changed since the index was written)" in caplog.text
    assert changed.spec.train_size + changed.spec.val_size + changed.spec.test_size == 50
    entries = json.loads(index.read_text())["files"]
    assert [len(e["labels"]) for e in entries] == [10, 20, 10, 10]


def test_a_shard_rewritten_with_the_same_size_and_mtime_is_read_again(tmp_path, compose_cfg, caplog, index_dir):
    """Issue 35: other records of the same byte size, the mtime set back (`touch -r`): the label index must not
    answer with the old labels (the local stamp holds the inode and ctime, which nobody sets back)."""
    pattern = raw_records(tmp_path, n=40)
    shard = tmp_path / "data" / "train-00001-of-00004.tfrecord"
    build(tfrecord_cfg(compose_cfg, pattern))
    before = shard.stat()
    data_files.write_tfrecords(
        tmp_path / "other", "train", n=40, shards=4, shape=(8, 8, 3), classes=4, encoding="raw", seed=11
    )
    other = tmp_path / "other" / "train-00001-of-00004.tfrecord"
    assert other.stat().st_size == before.st_size and other.read_bytes() != shard.read_bytes()
    shard.write_bytes(other.read_bytes())
    os.utime(shard, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert (shard.stat().st_size, shard.stat().st_mtime_ns) == (before.st_size, before.st_mtime_ns)
    caplog.set_level(logging.INFO, "tfhydra")
    build(tfrecord_cfg(compose_cfg, pattern))
    assert "read the labels of 1 of 4 file(s) (1 changed since the index was written)" in caplog.text
    entries = {
        Path(e["path"]).name: e["labels"]
        for e in json.loads(next(index_dir.glob("labels-*.json")).read_text())["files"]
    }
    import tensorflow as tf

    records = [tf.train.Example.FromString(r.numpy()) for r in tf.data.TFRecordDataset(str(shard))]
    assert entries[shard.name] == [int(e.features.feature["label"].int64_list.value[0]) for e in records]


@pytest.mark.parametrize(
    "content",
    [
        "not json",
        '{"version": 1, "label_key": "label", "files": [{"path": "x", "size": "1", "mtime_ns": 0, "labels": []}]}',
        '{"version": 1, "label_key": "label", "files": [{"path": "x", "size": 1, '
        '"mtime_ns": 0, "labels": [{"__class__": "os.system"}]}]}',
        "[1, 2]",
    ],
)
def test_an_index_file_that_is_not_a_valid_index_is_ignored_and_rebuilt(
    tmp_path, compose_cfg, caplog, index_dir, content
):
    pattern = raw_records(tmp_path, n=16, shards=2)
    split = "data.test_fraction=0"  # 16 records of 4 classes: too few for a test split too
    build(tfrecord_cfg(compose_cfg, pattern, split))
    index = next(index_dir.glob("labels-*.json"))
    index.write_text(content)
    caplog.set_level(logging.INFO, "tfhydra")
    rebuilt = build(tfrecord_cfg(compose_cfg, pattern, split))
    assert f"data: ignoring the label index {index} (" in caplog.text
    assert "read the labels of 2 of 2 file(s)" in caplog.text
    assert rebuilt.spec.train_size + rebuilt.spec.val_size + rebuilt.spec.test_size == 16
    assert json.loads(index.read_text())["version"] == 2


def test_sharding_is_by_file_with_enough_shards_and_by_example_otherwise(tmp_path, compose_cfg, monkeypatch):
    import tensorflow as tf

    pattern = raw_records(tmp_path, shards=4)
    monkeypatch.setenv(
        "TF_CONFIG",
        json.dumps({"cluster": {"worker": ["localhost:1", "localhost:2"]}, "task": {"type": "worker", "index": 0}}),
    )
    by_file = build(tfrecord_cfg(compose_cfg, pattern))
    assert by_file.spec.pipeline["sharding"] == "by file: 4 training shards for 2 workers"
    policy = by_file.train.options().experimental_distribute.auto_shard_policy
    assert policy == tf.data.experimental.AutoShardPolicy.FILE
    monkeypatch.setenv(
        "TF_CONFIG",
        json.dumps(
            {"cluster": {"worker": [f"localhost:{i}" for i in range(6)]}, "task": {"type": "worker", "index": 0}}
        ),
    )
    by_data = build(tfrecord_cfg(compose_cfg, pattern))
    assert by_data.spec.pipeline["sharding"] == "by example: 4 training shard(s) for 6 workers"


def png_that_does_not_decode(path):
    """A PNG signature and IEND ending around garbage: passes the cheap check, fails to decode."""
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + b"\x00" * 64 + b"\x00\x00\x00\x00IEND\xaeB`\x82")


def test_image_folder_checks_files_cheaply_up_front_and_names_a_bad_file_found_later(tmp_path, compose_cfg):
    import tensorflow as tf

    root = data_files.write_image_folder(tmp_path / "pets", per_class=4)
    (root / "train" / "cat" / "0000.png").write_bytes(b"")  # empty: found up front, no decoding
    base = ["data=image_folder", f"data.path={root}", "data.image_size=[8,8]", "data.shuffle_buffer=0"]
    with pytest.raises(ConfigError) as error:
        build(compose_cfg(base))
    assert str(error.value).startswith(
        f"{root / 'train' / 'cat' / '0000.png'}: cannot decode it as an image (1 of 12 files are unreadable)"
    )
    (root / "train" / "cat" / "0000.png").unlink()
    bad = root / "train" / "dog" / "0009.png"
    png_that_does_not_decode(bad)
    datasets = build(compose_cfg([*base, "data.val_fraction=0.25", "data.test_fraction=0"]))  # passes the cheap check
    with pytest.raises(tf.errors.InvalidArgumentError) as found:
        for _ in datasets.train:
            pass
        for _ in datasets.validation:
            pass
    assert f"data.on_bad_file=fail: cannot decode] [{bad}] [as an image" in str(found.value).replace("\n", " ")


def test_image_folder_skips_a_bad_file_found_later_and_keeps_the_epoch_length(tmp_path, compose_cfg, capfd):
    root = data_files.write_image_folder(tmp_path / "pets", per_class=4)
    png_that_does_not_decode(root / "train" / "dog" / "0009.png")
    cfg = compose_cfg(
        [
            "data=image_folder",
            f"data.path={root}",
            "data.image_size=[8,8]",
            "data.val_fraction=0.25",
            "data.on_bad_file=skip",
            "data.cache=false",
        ]
    )
    datasets = build(cfg)
    seen = len(labels_of(datasets.train)) + len(labels_of(datasets.validation)) + len(labels_of(datasets.test))
    assert seen == datasets.spec.train_size + datasets.spec.val_size + datasets.spec.test_size == 12
    assert (
        f'data.on_bad_file=skip: left out "{root / "train" / "dog" / "0009.png"}" (cannot decode it as an image)'
        in capfd.readouterr().err
    )


@pytest.mark.slow
def test_cli_tfrecord_run_records_the_cache_decision_and_streams_under_a_small_budget(tmp_path, monkeypatch):
    monkeypatch.setenv("TFHYDRA_CACHE_DIR", str(tmp_path / "c"))  # inherited by the command run_cli forks
    train = raw_records(tmp_path, n=64, shards=4)
    val = raw_records(tmp_path, n=16, shards=2, seed=1, prefix="val")
    run_dir = tmp_path / "run"
    result = run_cli(
        "model=mlp",
        "data=tfrecord",
        f"data.train={train}",
        f"data.validation={val}",
        "data.encoding=raw",
        "data.raw_shape=[8,8,3]",
        "data.cache_budget=8kB",
        "trainer.epochs=2",
        "logging.histogram_freq=0",  # two epochs: validation is read again (one epoch caches nothing)
        f"hydra.run.dir={run_dir}",
    )
    assert result.returncode == 0, last_line(result.stderr)
    pipeline = read_run_record(run_dir)["data"]["pipeline"]
    assert (pipeline["train"]["cache"], pipeline["validation"]["cache"]) == ("off", "memory")
    assert pipeline["validation"]["estimated_bytes"] == 16 * (192 + 8 + 2 * 96)
    assert pipeline["deterministic_reads"] is False and pipeline["sharding"] == "single worker"


def test_the_cache_line_says_each_decision_once():
    from tfhydra.data.caching import CachePlan
    from tfhydra.data.pipeline import said_plans

    same = CachePlan("off", "the examples are in memory already, the source decodes nothing", None, None)
    assert said_plans({"train": same, "validation": same}) == (
        "train and validation not cached: the examples are in memory already, the source decodes nothing"
    )
    cached = CachePlan("memory", "about 1.0 kB as stored fits the memory cache budget of 2.0 kB left (x)", 1000, 2)
    line = said_plans({"train": cached, "validation": same})
    assert line == (
        "train cached in memory: about 1.0 kB as stored fits the memory cache budget of 2.0 kB left (x); "
        "validation not cached: the examples are in memory already, the source decodes nothing"
    )
    assert max(line.count("(") for line in line.split(";")) <= 1  # never two deep
