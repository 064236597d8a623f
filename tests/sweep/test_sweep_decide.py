"""Decide mode (issue 37 item 3; docs/sweeps.md "Decide mode"): `-m ... sweep.decide=true` runs the grid as a
staged sweep whose screen (data share, epochs, how many promoted) is chosen from the grid's size, the training
split and trainer.epochs, and says how. The rule in-process (with Hypothesis for its bounds), the config's
mistakes through the pre-flight and the command line, and one real sweep on digits end to end."""

import csv
import math
import shlex

import pytest
from conftest import CONFIG_DIR, HYPOTHESIS_SEED, last_line, read_run_record, run_cli
from hypothesis import given, seed, settings
from hypothesis import strategies as st

from tfhydra.cli.preflight import check_overrides
from tfhydra.config.errors import ConfigError
from tfhydra.sweep import decide
from tfhydra.sweep.decide import choose, decided_stages, training_examples
from tfhydra.sweep.stages import stages_of

LRS = ["0.001", "0.0005", "0.0001"]


# ---- the rule ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "settings,examples,epochs,classes,expected",
    [
        (3, 1077, 20, 10, (0.28, 5, 1)),  # digits: a quarter would be 27 a class: raised to 30 a class
        (3, 3200, 20, 10, (0.25, 5, 1)),  # 4,000 MNIST digits less validation: a quarter
        (4, 3200, 5, 10, (0.25, 2, 1)),  # a quarter of 5 epochs rounds up to 2
        (5, 3200, 20, 10, (0.25, 5, 2)),  # more than 4 settings: 2 promoted
        (12, 50000, 10, 100, (0.25, 3, 2)),
        (6, 60000, 2, 1000, (0.5, 2, 2)),  # 1,000 classes: 30 each is half of the data
        (2, 100, 1, 10, (1.0, 1, 1)),  # too small to screen on less: all of it, for the run's one epoch
        (3, None, 8, None, (0.25, 2, 1)),  # the size is not known here: a quarter
        (3, 0, 8, 10, (0.25, 2, 1)),  # hold-outs that leave nothing (the data room refuses them in the job): unknown
    ],
)
def test_the_rule_for_several_grids_and_data(settings, examples, epochs, classes, expected):
    decision = choose(settings, examples, epochs, classes)
    assert (decision.fraction, decision.epochs, decision.promote) == expected
    assert decision.why.startswith(f"decided by sweep.decide from {settings} settings, ")
    assert f"of trainer.epochs={epochs} epochs" in decision.why


@seed(HYPOTHESIS_SEED)
@settings(max_examples=300, deadline=None, database=None)
@given(
    settings_=st.integers(2, 500),
    examples=st.one_of(st.none(), st.integers(1, 10**7)),
    epochs=st.integers(1, 1000),
    classes=st.one_of(st.none(), st.integers(2, 10**4)),
)
def test_the_rule_stays_within_the_grid_the_data_and_the_epochs(settings_, examples, epochs, classes):
    decision = choose(settings_, examples, epochs, classes)
    assert 1 <= decision.promote < settings_  # the screen always leaves a setting out
    assert 0 < decision.fraction <= 1
    assert 1 <= decision.epochs <= epochs and decision.epochs >= min(2, epochs)
    if examples and decision.fraction < 1:  # the share sees MIN_PER_CLASS of each class, or all of the data
        assert decision.fraction * examples >= decide.MIN_PER_CLASS * (classes or decide.ASSUMED_CLASSES) - 1e-6


def test_the_digits_count_is_the_training_split_the_data_room_makes():
    from conftest import compose_config
    from sklearn.datasets import load_digits

    from tfhydra.data.splits import hold_out

    cfg = compose_config(["sweep.decide=true"])
    labels = load_digits().target
    assert len(labels) == decide.DIGITS_EXAMPLES
    assert training_examples(cfg) == (len(hold_out(labels, cfg.data, 0).train), 10)


def test_npz_counts_its_labels_without_reading_images(tmp_path, compose_cfg):
    import numpy as np

    path = tmp_path / "small.npz"
    np.savez(
        path,
        x_train=np.zeros((400, 2, 2), np.uint8),
        y_train=np.arange(400) % 4,
        x_test=np.zeros((50, 2, 2), np.uint8),
        y_test=np.arange(50) % 4,
    )
    cfg = compose_cfg(["data=npz", f"data.path={path}"])
    assert training_examples(cfg) == (320, 4)  # validation (20 %) held out of x_train; x_test is shipped


def test_values_the_command_line_sets_win_over_the_rule(compose_cfg):
    cfg = compose_cfg(["sweep.decide=true", "sweep.promote=2", "trainer.epochs=12"])
    stages = decided_stages(cfg, 6)
    assert (stages.fraction, stages.epochs, stages.promote) == (0.28, 3, 2)
    assert stages.why.endswith("the command line's sweep.promote=2 win")
    assert stages_of(compose_cfg(["sweep.decide=true"])) is None  # decide mode alone sets no stage values


# ---- mistakes ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "argv,key,problem",
    [
        (["sweep.decide=maybe"], "sweep.decide", "not an accepted value"),
        (["sweep.decide=true", "sweep.promote=3"], "sweep.promote", "the grid has 3 settings"),
        (["sweep.decide=true,false"], "sweep.decide", "several values"),
        (["sweep.decide=true", "hydra/sweeper=basic"], "sweep.decide", "does not screen and promote"),
    ],
)
def test_a_bad_decide_command_is_refused_by_the_preflight(argv, key, problem):
    with pytest.raises(ConfigError) as raised:
        check_overrides(CONFIG_DIR, "config", [f"optimizer.lr={','.join(LRS)}", "model=mlp", *argv], multirun=True)
    assert raised.value.key == key and problem in str(raised.value), str(raised.value)


def test_a_grid_of_one_setting_has_nothing_to_decide(compose_cfg):
    with pytest.raises(ConfigError, match="nothing to decide between"):
        decided_stages(compose_cfg(["sweep.decide=true"]), 1)


@pytest.mark.slow
def test_a_bad_decide_value_is_one_error_line_naming_the_key(tmp_path):
    done = run_cli("-m", f"optimizer.lr={','.join(LRS)}", "sweep.decide=maybe", f"hydra.sweep.dir={tmp_path / 's'}")
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert len(done.stderr.strip().splitlines()) == 1
    assert last_line(done.stderr).startswith(
        "Error: sweep.decide=maybe: not an accepted value; accepted: one of True, False"
    ), done.stderr
    assert not (tmp_path / "s").exists()


# ---- end to end --------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_decide_mode_screens_promotes_k_and_says_how(tmp_path):
    """3 learning rates on digits, 2 epochs: the rule screens on 28 % for 2 epochs and promotes 1, the best screen
    job by validation; the terminal, summary.md and summary.csv say how it was decided."""
    sweep = tmp_path / "sweep"
    done = run_cli(
        "-m",
        f"optimizer.lr={','.join(LRS)}",
        "sweep.decide=true",
        "trainer.epochs=2",
        "logging.histogram_freq=0",
        "logging.write_graph=false",
        "export.formats=[]",
        f"hydra.sweep.dir={sweep}",
        cwd=tmp_path,
        timeout=1200,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    screen = {n: read_run_record(sweep / "screen" / f"{n}_optimizer.lr={lr}") for n, lr in enumerate(LRS)}
    for record in screen.values():
        assert record["status"] == "completed" and record["epochs_run"] == 2
        assert "data.fraction=0.28" in record["overrides"]
    full = 1077  # digits' training split (1,797 less 360 validation and 360 test)
    for record in screen.values():  # the seeded, stratified 28 % (rounded per class): at least 30 of each class
        assert 300 <= record["data"]["train_size"] <= math.ceil(0.28 * full) + 10, record["data"]
    best = max(screen, key=lambda n: (screen[n]["best"]["val_accuracy"], -n))  # validation; ties: lower number
    promoted = sorted(p.name for p in (sweep / "promote").iterdir())
    assert promoted == [f"3_optimizer.lr={LRS[best]}"]  # k = 1 for 3 settings
    record = read_run_record(sweep / "promote" / promoted[0])
    assert record["status"] == "completed" and record["data"]["train_size"] == full
    why = (
        f"decided by sweep.decide from 3 settings, {full} training examples of 10 classes: 28%, so each class has >= 30"
    )
    assert why in next(
        line
        for line in done.stdout.splitlines()
        if line.startswith("screen: 3 settings on 28% of the data for 2 epochs (")
    )
    assert f"How the screen was chosen: {why}" in (sweep / "summary.md").read_text()
    rows = list(csv.DictReader((sweep / "summary.csv").open()))
    assert len(rows) == 4 and all(r["decision"].startswith(why) for r in rows)
    assert "decided by sweep.decide from 3 settings" in (sweep / "multirun.yaml").read_text()  # what resume reads
    # the lone promoted job runs in a new worker placed as a single run (TensorFlow's threads, every core), not in
    # a screen worker's share: its reproduce line, run alone, gives the same numbers
    assert all(r["worker"]["threads"]["intra_op"] >= 1 for r in screen.values())  # 3 workers share the cores
    assert record["worker"]["threads"]["intra_op"] == 0 and record["worker"]["job"] == 1
    assert record["worker"]["pid"] not in {r["worker"]["pid"] for r in screen.values()}
    reproduce = next(line for line in done.stdout.splitlines() if line.startswith("reproduce: python train.py "))
    alone = run_cli(
        *shlex.split(reproduce.split("python train.py ", 1)[1]),
        f"hydra.run.dir={tmp_path / 'alone'}",
        cwd=tmp_path,
        timeout=600,
    )
    assert alone.returncode == 0, alone.stderr[-3000:]
    single = read_run_record(tmp_path / "alone")
    assert single["best"] == record["best"] and single["test"]["metrics"] == record["test"]["metrics"]
