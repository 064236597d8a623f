"""`recipe=finetune` (conf/recipe/finetune.yaml): the head alone, then the base at lr x factor, as two phases of one
run (tfhydra/compression/plan.py plans them, tfhydra/runner/job.py runs them): stage 1 leaves the base bit for bit,
stage 2 moves it at the lower rate, the record says what trained in each, and an interrupted stage resumes."""

from __future__ import annotations

import json
import signal
import subprocess
import time

import numpy as np
import pytest
from conftest import CONFIG_DIR, read_run_record, run_cli
from run_processes import epochs_recorded, kill, kill_when_ready, start

import tfhydra
from tfhydra.cli.preflight import check_overrides
from tfhydra.config.contracts import DataSpec
from tfhydra.config.errors import ConfigError
from tfhydra.runner.plan import plan_run

# A ResNet-8 (BatchNorm in every block: a frozen base's moving statistics must stay too) on tiny images.
TINY = [
    "model=resnet",
    "model.depth=8",
    "model.width=4",
    "data=synthetic",
    "data.shape=[8,8,1]",
    "data.num_classes=4",
    "data.train_size=128",
    "data.val_size=32",
    "data.test_size=0",
    "data.batch_size=32",
    "logging.histogram_freq=0",
    "logging.write_graph=false",
    "export.formats=[]",
    "recipe=finetune",
    "trainer.finetune.head_epochs=1",
    "trainer.epochs=3",
    # 4 batches an epoch: the default 16 per compiled call traced each phase's steps as a while loop, 2.4 s of
    # the first test's 11.6 s for no step fewer
    "trainer.steps_per_execution=1",
]
LIGHT = [*(o for o in TINY if not o.startswith("model")), "model=mlp", "model.units=[8]"]  # for the resumes: quicker
SPEC = DataSpec((8, 8, 1), 4, tuple("0123"), 1, 1)
HEAD = "logits"  # the classifier head every builder ends with


def test_the_plan_puts_a_head_phase_first_and_lowers_the_rate_after_it(compose_cfg):
    cfg = compose_cfg(["recipe=finetune", "trainer.epochs=10", "optimizer.lr=0.01"])
    phases = plan_run(cfg).phases
    assert [(p.label, p.epochs, p.directory) for p in phases] == [("head", 5, "phases/0_head"), ("finetune", 5, None)]
    assert phases[0].overrides == {"model.freeze": "base", "optimizer.lr": 0.01}
    assert phases[1].overrides == {"optimizer.lr": pytest.approx(0.001)}
    # with compression: the head's epochs count towards compression.start_epoch, the later phases at the lower rate
    pruned = ["recipe=finetune", "trainer.epochs=10", "compression=prune", "compression.start_epoch=7"]
    phases = plan_run(compose_cfg(pruned)).phases
    assert [(p.label, p.epochs) for p in phases] == [("head", 5), ("pretrain", 2), ("prune", 3)]
    assert phases[1].overrides == phases[2].overrides == {"optimizer.lr": pytest.approx(1e-4)}
    assert [p.label for p in plan_run(compose_cfg([])).phases] == ["none"]  # off by default


def test_a_head_phase_that_leaves_nothing_to_fine_tune_is_one_line():
    with pytest.raises(ConfigError) as caught:
        check_overrides(CONFIG_DIR, "config", ["recipe=finetune", "trainer.epochs=5"])
    assert str(caught.value) == (
        "trainer.finetune.head_epochs=5: no epochs left to fine-tune the base after the head; accepted: 0 (off) or "
        "an integer below trainer.epochs (5)"
    )


def test_a_floor_above_the_lower_rate_is_one_line():
    """The schedule is built per phase from its own peak: a cosine floor between lr x factor and lr would make
    stage 2's rate rise as it "decays"."""
    with pytest.raises(ConfigError) as caught:
        check_overrides(
            CONFIG_DIR,
            "config",
            [
                "recipe=finetune",
                "optimizer.lr=0.01",
                "optimizer.schedule.name=cosine",
                "optimizer.schedule.min_lr=0.005",
            ],
        )
    assert str(caught.value) == (
        "optimizer.schedule.min_lr=0.005: the floor is above the peak rate; accepted: a rate <= the finetune phase's "
        "rate (0.001: optimizer.lr x trainer.finetune.lr_factor), the peak"
    )


def test_an_optimizer_without_a_rate_to_lower_is_one_line():
    with pytest.raises(ConfigError, match=r"this optimizer has no lr; accepted: 0 \(off\), or an optimizer with"):
        check_overrides(
            CONFIG_DIR, "config", ["~optimizer", "+optimizer._target_=tf_keras.optimizers.SGD", "recipe=finetune"]
        )


def weights_of(compose_cfg, path) -> dict[str, list[np.ndarray]]:
    """Every weight of the file, by top-level layer name (BatchNorm's moving statistics too), read by filling a
    fresh build through `model.weights`."""
    from tfhydra.model.build import build_model

    model = build_model(compose_cfg([*TINY, f"model.weights={path}"]).model, SPEC)
    return {layer.name: [w.numpy() for w in layer.weights] for layer in model.layers if layer.weights}


def same(a: list[np.ndarray], b: list[np.ndarray]) -> bool:
    return all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))


def test_stage_one_trains_the_head_alone_and_stage_two_the_base_at_the_lower_rate(compose_cfg, tmp_path):
    from tfhydra.model.build import build_model

    start = tmp_path / "start.weights.h5"  # the starting point, as a pretrained file would be
    build_model(compose_cfg(TINY).model, SPEC).save_weights(str(start))
    run = tmp_path / "run"
    tfhydra.run(compose_cfg([*TINY, f"model.weights={start}", "optimizer.lr=0.01"]), run_dir=run)

    before, head_done = (
        weights_of(compose_cfg, start),
        weights_of(compose_cfg, run / "phases/0_head/checkpoints/last.weights.h5"),
    )
    after = weights_of(compose_cfg, run / "checkpoints" / "last.weights.h5")
    base = [name for name in before if name != HEAD]
    assert len(base) > 10 and any("_bn" in name for name in base)
    assert all(same(before[name], head_done[name]) for name in base)  # stage 1: the base bit for bit
    assert not same(before[HEAD], head_done[HEAD])  # ... and the head moved
    assert not any(same(head_done[name], after[name]) for name in base if "_conv" in name)  # stage 2 moved the base

    record = read_run_record(run)
    assert record["status"] == "completed" and record["epochs_run"] == 2
    head, tuned = record["phases"]
    assert (head["label"], head["run_dir"], head["epochs"], head["lr"]) == ("head", "phases/0_head", 1, 0.01)
    assert head["layers"]["trained"] == [HEAD] and head["layers"]["freeze"] == "base"
    assert set(head["layers"]["frozen"]) == set(base)
    assert (tuned["label"], tuned["run_dir"], tuned["epochs"]) == ("finetune", ".", 2)
    assert tuned["lr"] == pytest.approx(0.001) and tuned["layers"]["frozen"] == []
    assert set(tuned["layers"]["trained"]) == set(before)
    assert all(epoch["learning_rate"] == pytest.approx(0.001) for epoch in record["history"])  # the optimizer's
    assert read_run_record(run / "phases/0_head")["history"][0]["learning_rate"] == pytest.approx(0.01)


@pytest.mark.parametrize("stage", ["head", "finetune"])
def test_a_stage_interrupted_by_sigterm_resumes_and_the_run_completes(compose_cfg, tmp_path, stage):
    """SIGTERM at the end of an epoch of either stage (SignalOnce, once): the stage saves its state and the run
    stops interrupted; the same config again resumes that stage, keeps a completed head phase as it was, and ends
    with both phases recorded. (SignalOnce is a user's `_target_` in every phase's config: stage 2 reads stage 1's
    config as the run's own, which the trust gate refused before.)"""
    from tfhydra.trainer.state import Interrupted

    head_epochs = 2 if stage == "head" else 1
    epochs = [f"trainer.finetune.head_epochs={head_epochs}", "trainer.epochs=4"]
    at = 0 if stage == "head" else 1  # epoch 0 of the head phase; with one head epoch, epoch 1 is the second stage's
    stop = f"trainer.callbacks=[{{_target_:user_code.SignalOnce,marker:'{tmp_path / 'signalled'}',epoch:{at}}}]"
    cfg = compose_cfg([*LIGHT, *epochs, stop])
    run = tmp_path / "run"
    with pytest.raises(Interrupted):
        tfhydra.run(cfg, run_dir=run)
    stopped = run / "phases/0_head" if stage == "head" else run
    assert read_run_record(stopped)["status"] == "interrupted"
    head_record = (run / "phases/0_head/metrics.json").read_bytes()

    tfhydra.run(cfg, run_dir=run)
    record = read_run_record(run)
    assert record["status"] == "completed" and [p["epochs"] for p in record["phases"]] == [head_epochs, 4 - head_epochs]
    head = read_run_record(run / "phases/0_head")
    assert head["status"] == "completed" and head["epochs_run"] == head_epochs
    if stage == "head":
        assert (head["resumed"]["kind"], head["resumed"]["epoch"]) == ("saved_state", 1)
        assert record["resumed"]["kind"] == "fresh"
    else:
        assert (run / "phases/0_head/metrics.json").read_bytes() == head_record  # kept, not rerun
        assert (record["resumed"]["kind"], record["resumed"]["epoch"]) == ("saved_state", 2)


@pytest.mark.slow
def test_a_run_killed_with_sigkill_in_stage_two_resumes_there_and_keeps_stage_one(tmp_path):
    """SIGKILL (no handler, no record) once stage 2 has saved an epoch's state: the same command keeps the completed
    head phase as it was and continues stage 2 from its saved state."""
    args = [*LIGHT, "trainer.finetune.head_epochs=1", "trainer.epochs=8"]
    run = tmp_path / "run"
    process = start(run, *args)  # forked from the tests' server, as run_cli's commands are
    history = run / "checkpoints" / "history.json"
    # two epochs recorded: the first one's state is saved (the record is written before the state)
    kill_when_ready(process, lambda: history.exists() and len(json.loads(history.read_text())["epochs"]) >= 2)
    assert not (run / "metrics.json").exists() and read_run_record(run / "phases/0_head")["status"] == "completed"
    head_record = (run / "phases/0_head/metrics.json").read_bytes()

    resumed = run_cli(*args, f"hydra.run.dir={run}")
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    record = read_run_record(run)
    assert record["status"] == "completed" and [p["epochs"] for p in record["phases"]] == [1, 7]
    assert record["resumed"]["kind"] == "saved_state" and record["resumed"]["epoch"] >= 1
    assert (run / "phases/0_head/metrics.json").read_bytes() == head_record


def frozen_once(process: subprocess.Popen, condition, timeout: float = 240) -> bool:
    """Poll `condition()` with the process frozen (SIGSTOP) while it is read; True with the process left frozen
    once it holds, so a signal sent then arrives in the state that was read."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and process.poll() is None:
        time.sleep(0.05)
        process.send_signal(signal.SIGSTOP)
        if condition():
            return True
        process.send_signal(signal.SIGCONT)
    return False


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.parametrize("stage", ["head", "finetune"])
def test_a_train_py_process_sent_sigterm_in_either_stage_resumes_there_and_completes_both(tmp_path, stage):
    """A real `python train.py recipe=finetune` sent SIGTERM from outside, mid-stage, once that stage has recorded
    an epoch: it saves that stage's state, records it interrupted and exits 128+15; the same command resumes that
    stage (a completed head phase kept byte for byte), runs the other, and records both phases."""
    head_epochs = 3 if stage == "head" else 1
    args = [*LIGHT, f"trainer.finetune.head_epochs={head_epochs}", "trainer.epochs=6"]
    run = tmp_path / "run"
    stopped = run / "phases/0_head" if stage == "head" else run
    process = start(run, *args)
    try:
        caught = frozen_once(process, lambda: epochs_recorded(stopped) >= 1)
        assert caught, f"the stage ended before the signal: {(tmp_path / 'run.stderr').read_text()[-2000:]}"
        process.send_signal(signal.SIGTERM)
        process.send_signal(signal.SIGCONT)
        assert process.wait(timeout=120) == 128 + signal.SIGTERM, (tmp_path / "run.stderr").read_text()[-2000:]
    finally:
        kill(process)
    interrupted = read_run_record(stopped)
    assert interrupted["status"] == "interrupted" and "SIGTERM" in interrupted["error"]
    assert 1 <= interrupted["epochs_run"] < (head_epochs if stage == "head" else 6 - head_epochs)
    if stage == "head":
        assert not (run / "metrics.json").exists()  # stage 2 never started
    else:
        assert read_run_record(run / "phases/0_head")["status"] == "completed"
        head_record = (run / "phases/0_head/metrics.json").read_bytes()

    resumed = run_cli(*args, f"hydra.run.dir={run}")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    record, head = read_run_record(run), read_run_record(run / "phases/0_head")
    assert record["status"] == "completed" and head["status"] == "completed"
    phases = [(p["label"], p["epochs"]) for p in record["phases"]]
    assert phases == [("head", head_epochs), ("finetune", 6 - head_epochs)]
    assert head["layers"]["freeze"] == "base" and record["phases"][1]["layers"]["frozen"] == []
    again = head if stage == "head" else record  # the stage that was stopped continued from its saved state
    assert (again["resumed"]["kind"], again["resumed"]["epoch"]) == ("saved_state", interrupted["epochs_run"])
    if stage == "head":
        assert record["resumed"]["kind"] == "fresh" and head["epochs_run"] == head_epochs
    else:
        assert (run / "phases/0_head/metrics.json").read_bytes() == head_record  # kept, not rerun
