"""No traceback for any input, by construction: generated overrides for every leaf key of every option in conf/.

For each case the pre-flight (the very function `python train.py` runs before Hydra makes a directory) must
either accept the command line or refuse it with one ConfigError whose text is one line; any other
exception is a traceback a user would see. The values are what a user could type: wrong types, empty
values, huge and negative numbers, NaN and infinities, unresolved interpolations, deletions, unknown
names, stray punctuation. `test_accepted_cases_run_or_fail_in_one_line` then runs a sample of the
accepted ones for real (slow), so a value the plan lets through cannot crash the job either.

Replay a failure with the seed printed in pytest's header: TFHYDRA_HYPOTHESIS_SEED=<seed> pytest ...
"""

from __future__ import annotations

import functools
import math
import os

import pytest
from conftest import CONFIG_DIR, HYPOTHESIS_SEED, counts_cases
from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st
from omegaconf import DictConfig, ListConfig
from props_compositions import compositions_kept, preflight

from tfhydra.config.errors import ConfigError

GROUPS = ("model", "data", "optimizer", "precision", "strategy", "compression")
SHARED = ("trainer", "logging", "export", "data", "optimizer", "compression", "sweep")
CASES = int(os.environ.get("TFHYDRA_PROPERTY_CASES", "300"))


def _leaves(node, prefix: str = "") -> list[str]:
    if isinstance(node, DictConfig):
        keys = []
        for key in node:
            if key == "_target_":
                continue
            keys += _leaves(node._get_node(key), f"{prefix}{key}.")
        return keys
    return [prefix.rstrip(".")]


@functools.cache
def option_keys() -> list[tuple[str, str]]:
    """(group choice, dotted leaf key) for every leaf of every option of every group, shared sections included.

    Each option is composed as the pre-flight composes a job's group choices (compose_choices), kept for the cases
    that then draw that option (tests/props_compositions.py)."""
    from hydra import compose

    from tfhydra.cli import preflight as checks
    from tfhydra.config.hydra_api import initialize
    from tfhydra.runner.plan import RULES

    groups = sorted(p.name for p in CONFIG_DIR.iterdir() if p.is_dir())  # as check_overrides lists them
    pairs = []
    with compositions_kept(), initialize(CONFIG_DIR):
        for group in GROUPS:
            for option in sorted(p.stem for p in (CONFIG_DIR / group).glob("*.yaml")):
                cfg = checks.compose_choices(compose, "config", [f"{group}={option}"], groups, RULES)
                sections = {group, *SHARED}
                pairs += [
                    (f"{group}={option}", key)
                    for section in sorted(sections)
                    for key in _leaves(cfg[section], f"{section}.")
                ]
    return sorted(set(pairs))


NUMBERS = st.one_of(
    st.integers(min_value=-(10**12), max_value=10**12),
    st.sampled_from([0, -1, 1, 2**31, 2**63, 10**30, -(10**30)]),
    st.floats(allow_nan=True, allow_infinity=True, width=64),
)
WORDS = st.sampled_from(
    [
        "abc",
        "no_such_name",
        "relu",
        "true",
        "false",
        "null",
        "none",
        "None",
        "nan",
        "inf",
        "-inf",
        "''",
        '""',
        "[]",
        "{}",
        "[1,2]",
        "[[]]",
        "[a,b]",
        "{a:1}",
        "{_target_:os.system}",
        "${nope}",
        "${trainer.nope}",
        "${oc.env:TFHYDRA_NO_SUCH_VARIABLE}",
        "${",
        "}",
        "1e400",
        "-0.0",
        "0x10",
        "1_000",
        "🙂",
        "a b",
        "a,b",
        "'a,b'",
        "epoch",
        "auto",
        "memory",
    ]
)
TEXT = st.text(alphabet="ab01.-_,[]{}()'\"=:$~+ ", max_size=12)


def _number(value) -> str:
    if isinstance(value, float) and math.isnan(value):
        return "nan"
    if isinstance(value, float) and math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return repr(value)


VALUES = st.one_of(NUMBERS.map(_number), WORDS, TEXT)


@st.composite
def overrides(draw) -> list[str]:
    choice, key = draw(st.sampled_from(option_keys()))  # composed on first use, not at collection
    kind = draw(st.sampled_from(["set", "set", "set", "delete", "add"]))
    if kind == "delete":
        return [choice, f"~{key}"]
    if kind == "add":
        return [
            choice,
            f"+{key.rsplit('.', 1)[0]}.{draw(st.sampled_from(['extra', 'units', '_target_']))}={draw(VALUES)}",
        ]
    return [choice, f"{key}={draw(VALUES)}"]


@pytest.mark.slow  # each of the 40 group choices composed once, then about 0.1 s a drawn command line
@counts_cases()
@seed(HYPOTHESIS_SEED)
@settings(max_examples=CASES, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(argv=overrides())
def test_any_override_is_accepted_or_refused_in_one_line(argv):
    preflight(argv)


@pytest.mark.parametrize(
    "argv,fragment",
    [
        (["model=cnn", "model.activation=${nope}"], "model.activation"),
        (["model=cnn", "~model"], "model"),
        (["model=cnn", "~trainer"], "trainer"),
        (["model=cnn", "trainer.epochs=${oc.env:TFHYDRA_NO_SUCH_VARIABLE}"], "trainer.epochs"),
        (["model=cnn", "optimizer.lr=nan"], "optimizer.lr=nan"),
        (["model=cnn", "optimizer.lr=inf"], "optimizer.lr=inf"),
        (["model=cnn", "model.activation=no_such_activation"], "model.activation=no_such_activation"),
        (["compression=none", "data.service.address=[]"], "data.service.address=[]"),  # urlparse's ValueError
        (["model=cnn", "sweep.folds=9223372036854775808"], "sweep.folds"),  # its jobs' data.fold list: 21 GB
    ],
)
def test_known_families_are_one_line(argv, fragment):
    """Found by the property above (or listed in issue 14): each is refused by the pre-flight, naming the key."""
    error = preflight(argv)
    assert error is not None and fragment in str(error), str(error)


# An accepted length (trainer.epochs=2147483648, say) runs as long as it says: debug=fast cannot cap a key the
# command line sets, so the run below caps it; the pre-flight property above covers every value of these keys.
RUN_LENGTH_CAPS = {"epochs": 3, "steps_per_epoch": 2, "validation_steps": 2}


SIZE_CAP = 256  # data and model sizes (examples, image sides, units) above it are run at it: an accepted size of
# 2**31 asks for as much memory as it says (a CI run's job reached 24 GB and was killed), as the run length asks time


def _cap_run_length(cfg) -> None:
    for key, cap in RUN_LENGTH_CAPS.items():
        value = cfg.trainer.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > cap:
            cfg.trainer[key] = cap
    for section in (cfg.data, cfg.model):
        _cap_sizes(section)


def _cap_sizes(node) -> None:
    keys = range(len(node)) if isinstance(node, ListConfig) else list(node.keys())
    for key in keys:
        value = node[key]
        if isinstance(value, (DictConfig, ListConfig)):
            _cap_sizes(value)
        elif isinstance(value, int) and not isinstance(value, bool) and value > SIZE_CAP:
            node[key] = SIZE_CAP


@pytest.mark.slow
@counts_cases()  # above @seed and @settings: they must reach the property itself (its deadline, its count)
@seed(HYPOTHESIS_SEED)
@settings(
    max_examples=int(os.environ.get("TFHYDRA_PROPERTY_RUNS", "12")),
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    # a failure is reported as drawn, not shrunk: each example trains a run, and stop 50's CI spent five minutes
    # shrinking one (as tests/properties/test_combinations.py does)
    phases=[Phase.explicit, Phase.generate],
)
@given(argv=overrides())
def test_accepted_cases_run_or_fail_in_one_line(argv, tmp_path_factory):
    """What the pre-flight accepts, the job runs (two batches, one epoch) or refuses in one line: never a traceback."""
    import tfhydra

    if preflight(argv) is not None:
        return
    cfg = (
        tfhydra.compose([*argv, "debug=fast", "logging.histogram_freq=0"])
        if preflight([*argv, "debug=fast", "logging.histogram_freq=0"]) is None
        else None
    )
    if cfg is None:
        return
    _cap_run_length(cfg)
    run_dir = tmp_path_factory.mktemp("run")
    try:
        tfhydra.run(cfg, run_dir=run_dir)
    except ConfigError as error:
        assert "\n" not in str(error)


@pytest.mark.parametrize(
    "argv,fragment",
    [
        # found by the run property (seed 2480132905) as `data.cache_dir=1`, which the schema now takes as the
        # directory "1" (docs/design.md, "Typed configs"); a value that is no path at all is still one line
        (["data=cifar100", "data.cache_dir=[1]"], "data.cache_dir=[1]"),
        (["data=tfds", "data.dataset=mnist", "data.data_dir=[]"], "data.data_dir"),
    ],
)
def test_a_directory_key_takes_a_path(argv, fragment):
    error = preflight(argv)
    assert error is not None and fragment in str(error), str(error)
