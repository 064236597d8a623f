"""Issue 37 item 1: `data.cache=auto` caches only a split the run reads again. One epoch (a one-epoch screen
stage sets trainer.epochs the same way), a steps_per_epoch cap that reads at most one pass in total or less
than a pass an epoch, and the test split (read once, after training) stream; several epochs keep the memory
cache; an explicit `data.cache=memory` is obeyed. Asserted on the record's words and on the dataset graph."""

from __future__ import annotations

import data_files
import numpy as np
import pytest
from conftest import read_run_record
from data_runs import tfrecord_one_epoch


@pytest.fixture(autouse=True)
def index_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("TFHYDRA_CACHE_DIR", str(tmp_path / "tfhydra-cache"))


def records(tmp_path, n=32, prefix="train", seed=0):
    return data_files.write_tfrecords(
        tmp_path / "data", prefix, n=n, shards=4, shape=(8, 8, 3), classes=4, encoding="raw", seed=seed
    )


def built(compose_cfg, tmp_path, *overrides, val=8, epochs=None, steps=None, validation_steps=None):
    """The run's datasets as the job builds them: 32 train, `val` validation and 8 test records; batches of 8."""
    from tfhydra.data.caching import Reads
    from tfhydra.data.pipeline import build_datasets

    splits = (records(tmp_path), records(tmp_path, val, "val", 1), records(tmp_path, 8, "test", 2))
    cfg = compose_cfg(
        [
            "data=tfrecord",
            *(f"data.{k}={v}" for k, v in zip(("train", "validation", "test"), splits, strict=True)),
            "data.encoding=raw",
            "data.raw_shape=[8,8,3]",
            "data.batch_size=8",
            *overrides,
        ]
    )
    return build_datasets(cfg.data, 0, Reads(epochs, steps, validation_steps))


def dataset_ops(dataset) -> set[str]:
    """The op names of a dataset's graph (its functions too): what tf.data will run."""
    import tensorflow as tf

    graph = tf.compat.v1.GraphDef()
    graph.ParseFromString(tf.raw_ops.DatasetToGraphV2(input_dataset=dataset._variant_tensor).numpy())
    return {node.op for node in graph.node} | {node.op for f in graph.library.function for node in f.node_def}


def caches(dataset) -> bool:
    return any(op.startswith("CacheDataset") for op in dataset_ops(dataset))


def test_one_epoch_streams_every_split_and_says_why(tmp_path, compose_cfg):
    datasets = built(compose_cfg, tmp_path, epochs=1)
    plan = datasets.spec.pipeline
    assert (datasets.spec.train_size, datasets.spec.val_size, datasets.spec.test_size) == (32, 8, 8)
    assert plan["train"] == {
        "cache": "off",
        "reason": "one pass: trainer.epochs=1: streamed from the source",
        "estimated_bytes": None,
        "passes": 1.0,
    }
    assert plan["validation"]["cache"] == "off" and plan["validation"]["reason"].startswith("one pass")
    assert plan["test"]["cache"] == "off" and plan["test"]["reason"].startswith("read once, after training")
    assert not any(caches(d) for d in (datasets.train, datasets.validation, datasets.test))
    assert sum(len(y) for _, y in datasets.train) == 32  # every example still read, decoded and scaled
    x, _ = next(iter(datasets.validation))
    assert x.dtype.name == "float32" and 0 <= float(np.min(x)) and float(np.max(x)) <= 1.0


def test_three_epochs_cache_training_and_validation_in_memory_but_not_the_test_split(tmp_path, compose_cfg):
    datasets = built(compose_cfg, tmp_path, epochs=3)
    plan = datasets.spec.pipeline
    assert (plan["train"]["cache"], plan["validation"]["cache"], plan["test"]["cache"]) == ("memory", "memory", "off")
    assert (plan["train"]["passes"], plan["validation"]["passes"], plan["test"]["passes"]) == (3.0, 3.0, 1.0)
    assert "fits the memory cache budget" in plan["train"]["reason"]
    assert caches(datasets.train) and caches(datasets.validation) and not caches(datasets.test)


def test_an_explicit_memory_cache_is_kept_for_one_epoch(tmp_path, compose_cfg):
    datasets = built(compose_cfg, tmp_path, "data.cache=memory", epochs=1)
    assert datasets.spec.pipeline["train"]["cache"] == "memory" and caches(datasets.train)
    assert datasets.spec.pipeline["train"]["reason"].startswith("data.cache=memory")


@pytest.mark.parametrize(
    "epochs, steps, cache, reason",
    [
        (2, 2, "off", "trainer.steps_per_epoch=2 reads 16 of its 32 examples an epoch"),  # 1 pass in all, half an epoch
        (1, 4, "off", "one pass: trainer.epochs=1, trainer.steps_per_epoch=4"),  # exactly one pass
        (1, 8, "memory", "about "),  # two passes in one epoch: the second reads the cache
    ],
)
def test_steps_per_epoch_caches_only_when_a_full_pass_is_read_again(
    tmp_path, compose_cfg, epochs, steps, cache, reason
):
    datasets = built(compose_cfg, tmp_path, epochs=epochs, steps=steps)
    assert datasets.spec.pipeline["train"]["cache"] == cache and caches(datasets.train) == (cache == "memory")
    assert datasets.spec.pipeline["train"]["reason"].startswith(reason)
    assert datasets.spec.pipeline["train"]["passes"] == epochs * steps * 8 / 32


def test_a_validation_cap_below_one_pass_streams_validation(tmp_path, compose_cfg):
    datasets = built(compose_cfg, tmp_path, val=16, epochs=5, validation_steps=1)
    plan = datasets.spec.pipeline
    assert plan["train"]["cache"] == "memory" and plan["validation"]["cache"] == "off"
    assert plan["validation"]["reason"].startswith("trainer.validation_steps=1 reads 8 of its 16 examples an epoch")
    assert plan["validation"]["passes"] == 2.5 and not caches(datasets.validation)


def test_without_reads_auto_decides_on_the_budget_alone(tmp_path, compose_cfg):
    plan = built(compose_cfg, tmp_path).spec.pipeline  # a Python caller that does not say
    assert (plan["train"]["cache"], plan["test"]["cache"]) == ("memory", "memory")
    assert plan["train"]["passes"] is None


@pytest.mark.slow
def test_a_one_epoch_cli_run_records_why_it_did_not_cache(tmp_path_factory):
    """The CLI's wiring of trainer.epochs to the cache decision, on the one-epoch tfrecord run test_data_cli reads."""
    pipeline = read_run_record(tfrecord_one_epoch(tmp_path_factory))["data"]["pipeline"]
    assert pipeline["train"]["cache"] == pipeline["validation"]["cache"] == "off"
    assert pipeline["train"]["reason"] == "one pass: trainer.epochs=1: streamed from the source"
    assert pipeline["train"]["passes"] == 1.0
