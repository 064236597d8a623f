"""`data.augment`'s mixup, cutmix and randaugment in a real run, one per Keras (issue 59): trained on mixed one-hot
targets with the loss's categorical twin, validated and tested on class indices. The smallest runs that reach every
part: both mixings and RandAugment, two steps of one epoch; tf_keras through the custom loop over two replicas (its
checkpointed data iterator holds the batches' draws), Keras 3 through fit."""

import pytest
from conftest import read_run_record, run_cli

AUGMENT = "data.augment=[{name: randaugment, ops: 1}, mixup, {name: cutmix, alpha: 0.5}]"
SMALL = ["trainer.epochs=1", "trainer.steps_per_epoch=2", "data.batch_size=16", "export.formats=[]", "logger=[]"]


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize(
    "keras", [["keras=2", "trainer.loop=custom", "strategy=mirrored", "strategy.logical_cpus=2"], ["keras=3"]]
)
def test_mixed_targets_train_under_both_kerases(tmp_path, keras):
    run_dir = tmp_path / "run"
    result = run_cli(*keras, AUGMENT, *SMALL, f"hydra.run.dir={run_dir}")
    assert result.returncode == 0, result.stderr[-3000:]
    record = read_run_record(run_dir)
    assert record["status"] == "completed", record.get("error")
    assert record["keras"]["major"] == int(keras[0][-1])
    (epoch,) = record["history"]
    for key in ("loss", "accuracy", "val_loss", "val_accuracy"):  # the names of a run without mixing
        assert 0 <= epoch[key] < 10 and (key.endswith("loss") or epoch[key] <= 1)
    assert record["test"]["examples"] == 360 and 0 <= record["test"]["metrics"]["accuracy"] <= 1
