"""Hostile run and sweep directories, generated (issue 24): nothing a directory names ever runs.

For every reader of a directory's files (evaluate, `compression.from_run`, the continuation check of
`hydra.run.dir`, the pre-flight's check of a sweep's job directories, `tfhydra-sweep resume`, the sweep
summary), Hypothesis writes directories whose files hold interpolations of every resolver OmegaConf and
Hydra register (and one, `marker`, that writes a file when resolved: a stand-in for any resolver a
process may have), nested, escaped and quoted forms, `_target_` nodes and unicode look-alikes of it,
`+`/`++`/`~` keys, hydra settings, YAML tags and links out of the directory. Each reader must either refuse
with one ConfigError line, or return a config that, fully resolved, holds only tfhydra's own `_target_`s,
and the marker file must never exist. The seed is in pytest's header (TFHYDRA_HYPOTHESIS_SEED replays it);
TFHYDRA_TRUST_CASES sets how many directories each reader gets (CI: the default).
"""

from __future__ import annotations

import functools
import os
import shutil
import tempfile
from pathlib import Path

import pytest
import trust_dirs
import yaml
from conftest import CONFIG_DIR, HYPOTHESIS_SEED, counts_cases
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st
from omegaconf import DictConfig, OmegaConf
from props_compositions import compositions_kept

from tfhydra.config.errors import ConfigError

CASES = int(os.environ.get("TFHYDRA_TRUST_CASES", "25"))
RESOLVERS = [
    "marker",
    "oc.env",
    "oc.create",
    "oc.decode",
    "oc.deprecated",
    "oc.select",
    "oc.dict.keys",
    "oc.dict.values",
    "hydra",
    "now",
    "python_version",
    "tfhydra.job_dirname",
]
LOOKALIKES = ["_target_", "_tаrget_", "＿target＿", "_target\u200b_", "_TARGET_", "_args_", "_partial_", " _target_"]
KEYS = [
    "model.name",
    "model.units",
    "trainer.loss",
    "trainer.callbacks",
    "trainer.metrics",
    "data.name",
    "data.cache",
    "optimizer.lr",
    "optimizer.schedule.name",
    "compression.name",
    "trainer.monitor",
    "logger.mlflow.tracking_uri",
    "hydra.callbacks.evil",
    "hydra.searchpath",
    "hydra.job.env_set.PYTHONPATH",
    "hydra.run.dir",
    "hydra.launcher._target_",
    "hydra.sweeper._target_",
    "hydra.job.env_set.TFHYDRA_SWEPT_KEYS",
    "model",
    "hydra/launcher",
    "data",
    "nosuchgroup",
]
SETTINGS = dict(max_examples=CASES, deadline=None, suppress_health_check=list(HealthCheck))


@st.composite
def interpolations(draw) -> str:
    resolver = draw(st.sampled_from(RESOLVERS))
    inner = draw(st.sampled_from(["", "x", "HOME", "'{_target_: marker_code.touch}'", "${marker:}", "trainer.seed"]))
    text = "${" + resolver + ":" + inner + "}" if resolver != "oc.select" else "${oc.select:" + inner + ",1}"
    form = draw(
        st.sampled_from(["{}", "\\{}", "\\\\{}", "'{}'", '"{}"', "[{}]", "{{a: {}}}", "x{}y", "${{marker:{}}}"])
    )
    return form.format(text)


@st.composite
def target_nodes(draw) -> dict:
    return {
        draw(st.sampled_from(LOOKALIKES)): draw(st.sampled_from(["marker_code.touch", "os.system"])),
        "path": draw(st.sampled_from(["MARKER", "/tmp/x"])),
    }


def values():
    return st.one_of(
        interpolations(),
        target_nodes(),
        st.lists(target_nodes(), min_size=1, max_size=2),
        st.sampled_from(["/tmp/outside/cache", "../../x", "mlp", "0.1", "null", "memory", "[a,b]"]),
    )


@st.composite
def hostile_overrides(draw) -> str:
    key = draw(st.sampled_from(KEYS))
    prefix = draw(st.sampled_from(["", "+", "++", "~"]))
    value = draw(values())
    text = value if isinstance(value, str) else yaml.safe_dump(value, default_flow_style=True).strip()
    return f"{prefix}{key}={text}" if prefix != "~" or draw(st.booleans()) else f"~{key}"


@st.composite
def hostile_config(draw) -> dict:
    """A saved config.yaml: the real one with one hostile value put at a path."""
    import tfhydra

    saved = OmegaConf.to_container(_job_config(tfhydra), resolve=False, enum_to_str=True)  # as .hydra/ holds it
    path = draw(
        st.sampled_from(
            [
                "model.name",
                "trainer.loss",
                "data.cache",
                "compression.name",
                "trainer.callbacks",
                "trainer.early_stopping.monitor",
                "model.extra",
                "compression.target_sparsity",
            ]
        )
    )
    node = saved
    *parents, leaf = path.split(".")
    for parent in parents:
        node = node.setdefault(parent, {})
    node[leaf] = draw(values())
    return saved


_JOB = {}


def _job_config(tfhydra) -> DictConfig:
    if "cfg" not in _JOB:
        cfg = tfhydra.compose(trust_dirs.RUN_OVERRIDES)
        _JOB["cfg"] = OmegaConf.masked_copy(cfg, [k for k in cfg if k != "hydra"])
    return _JOB["cfg"]


@st.composite
def hostile_run(draw) -> tuple[str, object]:
    kind = draw(st.sampled_from(["overrides", "config", "link", "tag"]))
    if kind == "overrides":
        return kind, draw(st.lists(hostile_overrides(), min_size=1, max_size=3))
    if kind == "config":
        return kind, draw(hostile_config())
    if kind == "link":
        return kind, draw(st.sampled_from(["overrides.yaml", "config.yaml"]))
    return kind, draw(
        st.sampled_from(
            [
                "!!python/object/apply:marker_code.touch []",
                "!!binary aGk=",
                "!!set {a, b}",
                "2024-01-01",
                "!!timestamp 2024-01-01",
            ]
        )
    )


def build_run(root: Path, attack, status: str = "completed") -> Path:
    run = trust_dirs.write_run(root / "run", status=status)
    kind, payload = attack
    hydra_dir = run / ".hydra"
    if kind == "overrides":
        (hydra_dir / "overrides.yaml").write_text(yaml.safe_dump(trust_dirs.RUN_OVERRIDES + payload))
    elif kind == "config":
        (hydra_dir / "config.yaml").write_text(yaml.safe_dump(payload))
    elif kind == "link":
        outside = root / "outside.yaml"
        shutil.copy(hydra_dir / payload, outside)
        (hydra_dir / payload).unlink()
        (hydra_dir / payload).symlink_to(outside)
    else:
        (hydra_dir / "overrides.yaml").write_text(f"- model=mlp\n- {payload}\n")
    return run


def assert_harmless(cfg, marker: Path) -> None:
    """A config a reader accepted runs nothing when it is resolved, and names only tfhydra's own code."""
    from tfhydra.config.schema import nodes_with_target

    try:
        OmegaConf.to_container(cfg, resolve=True)
    except Exception:  # noqa: BLE001  (an inert or unresolvable value: what matters is that nothing ran)
        pass
    assert not marker.exists(), "a hostile directory ran code"
    if isinstance(cfg, DictConfig):
        targets = {str(node.get("_target_")) for _, node in nodes_with_target(cfg)}
        assert targets <= _trusted_targets(), targets


_trusted_targets = functools.cache(trust_dirs.trusted_targets)  # conf/'s YAML parsed once, not per drawn case


def refused_in_one_line(error: ConfigError) -> None:
    assert "\n" not in str(error) and str(error).strip(), str(error)


def check_reader(read, attack, status="completed"):
    trust_dirs.register_marker_resolver()
    with tempfile.TemporaryDirectory() as folder, compositions_kept():
        marker = trust_dirs.marker(Path(folder))
        try:
            run = build_run(Path(folder), attack, status)
            cfg = read(run)
        except ConfigError as error:
            refused_in_one_line(error)
            assert not marker.exists()
            return
        assert_harmless(cfg, marker)


@pytest.mark.slow  # 13-29 s each: .ci/run runs them
@counts_cases()
@seed(HYPOTHESIS_SEED)
@settings(**SETTINGS)
@given(hostile_run())
def test_evaluate_reads_no_code_from_a_run(attack):
    from tfhydra.evaluate import load_run_config

    check_reader(lambda run: load_run_config(run, []), attack)


@pytest.mark.slow  # 13-29 s each: .ci/run runs them
@counts_cases()
@seed(HYPOTHESIS_SEED)
@settings(**SETTINGS)
@given(hostile_run())
def test_compression_from_run_reads_no_code_from_a_run(attack):
    from tfhydra.compression.plan import check_run, saved_run_config

    def read(run):
        check_run(run, _job_config(__import__("tfhydra")).model)
        return saved_run_config(run)

    check_reader(read, attack)


@pytest.mark.slow  # 13-29 s each: .ci/run runs them
@counts_cases()
@seed(HYPOTHESIS_SEED)
@settings(**SETTINGS)
@given(hostile_run())
def test_continuing_a_run_reads_no_code_from_it(attack):
    from tfhydra.trust.continuation import check_continuable

    def read(run):
        check_continuable(run, _job_config(__import__("tfhydra")))
        return None

    check_reader(read, attack, status="interrupted")


@pytest.mark.slow  # 13-29 s each: .ci/run runs them
@counts_cases()
@seed(HYPOTHESIS_SEED)
@settings(**SETTINGS)
@given(hostile_run())
def test_predict_reads_no_code_from_a_run(attack):
    from tfhydra.predict.layout import read_run

    def read(run):
        from tfhydra.record.run_record import RunRecord, load_record

        record = load_record(run)  # predict names the classes from the record's data spec
        RunRecord(**{**record.as_dict(), "data": {"class_names": ["a", "b"]}}).write(run)
        return OmegaConf.create(read_run(run).data)  # what predict then reads: the run's data section

    check_reader(read, attack)


@st.composite
def hostile_sweep(draw) -> dict:
    task = list(trust_dirs.SWEEP_TASK)
    hydra = ["hydra.mode=MULTIRUN"]
    extra = {}
    for _ in range(draw(st.integers(1, 3))):
        where = draw(st.sampled_from(["task", "hydra", "config_dir", "monitor", "callbacks", "sweeper"]))
        if where == "task":
            task.append(draw(hostile_overrides()))
        elif where == "hydra":
            hydra.append(draw(hostile_overrides()))
        elif where == "config_dir":
            extra["hydra.runtime.config_sources"] = [{"path": "HOSTILE_CONF", "schema": "file", "provider": "main"}]
        elif where == "monitor":
            extra["trainer.monitor"] = draw(interpolations())
        elif where == "callbacks":
            extra["hydra.callbacks"] = {"evil": {"_target_": "marker_code.TouchCallback"}}
        else:
            extra["hydra.sweeper._target_"] = "marker_code.TouchCallback"
    return {"task": task, "hydra": hydra, "extra": extra, "job_config": draw(st.one_of(st.none(), hostile_config()))}


def build_sweep(root: Path, attack: dict) -> Path:
    conf = root / "hostile_conf"
    conf.mkdir()
    (conf / "config.yaml").write_text(
        "defaults: [tfhydra, _self_]\nhydra:\n  callbacks:\n    evil:\n      _target_: marker_code.TouchCallback\n"
    )
    extra = yaml.safe_load(yaml.safe_dump(attack["extra"]).replace("HOSTILE_CONF", str(conf)))
    sweep = trust_dirs.write_sweep(root / "sweep", attack["task"], attack["hydra"], extra)
    if attack["job_config"] is not None:
        job = trust_dirs.write_run(sweep / "0_optimizer.lr=1e-3", trust_dirs.SWEEP_TASK[:1], status="interrupted")
        (job / ".hydra" / "config.yaml").write_text(yaml.safe_dump(attack["job_config"]))
    return sweep


@pytest.mark.slow  # 13-29 s each: .ci/run runs them
@counts_cases()
@seed(HYPOTHESIS_SEED)
@settings(**SETTINGS)
@given(hostile_sweep())
def test_sweep_resume_summary_and_preflight_read_no_code_from_a_sweep(attack):
    from tfhydra.cli.preflight import check_overrides
    from tfhydra.sweep.__main__ import resume_command
    from tfhydra.sweep.summary import summarize

    trust_dirs.register_marker_resolver()
    with tempfile.TemporaryDirectory() as folder, compositions_kept():
        marker = trust_dirs.marker(Path(folder))
        sweep = build_sweep(Path(folder), attack)
        summarize(sweep, write=False).report()  # displays only: never refuses, never runs
        assert not marker.exists()
        try:
            command = resume_command(sweep)
        except ConfigError as error:
            refused_in_one_line(error)
        else:
            assert "--config-dir" not in command, command  # never the directory the file names
            overrides = [c for c in command[command.index("-m", 3) + 1 :]]
            assert_harmless(_compose_first_job(overrides), marker)
        try:
            check_overrides(CONFIG_DIR, "config", trust_dirs.SWEEP_TASK + [f"hydra.sweep.dir={sweep}"], multirun=True)
        except ConfigError as error:
            refused_in_one_line(error)
        assert not marker.exists()


def _compose_first_job(overrides: list[str]):
    """The first job's config of a resumed sweep, as the resumed command composes it."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    from tfhydra.trust.allowlist import compose_trusted

    job = [
        o.input_line if not o.is_sweep_override() else f"{o.input_line.split('=')[0]}={next(o.sweep_string_iterator())}"
        for o in OverridesParser.create().parse_overrides(overrides)
    ]
    try:
        cfg = compose_trusted(None, job)
    except Exception:  # noqa: BLE001  (the resumed command's pre-flight refuses it in one line)
        return None
    callbacks = {str(c.get("_target_")) for c in (cfg.hydra.callbacks or {}).values()}
    assert callbacks <= {"tfhydra.sweep.callback.SweepCallback", "tfhydra.trust.locks.DirectoryLock"}, (
        callbacks
    )  # conf/'s own
    return OmegaConf.masked_copy(cfg, [k for k in cfg if k != "hydra"])


@pytest.mark.parametrize(
    "line",
    [
        "trainer.loss=${oc.create:{_target_:marker_code.touch}}",
        "+trainer.callbacks=[{_target_:marker_code.touch}]",
        "data.cache=/tmp/elsewhere/c",
        "+hydra.callbacks.x._target_=marker_code.TouchCallback",
        "~trainer",
        "model=../../../tmp/x",
        "trainer.loss={_tаrget_:marker_code.touch}",
    ],
)
def test_the_issues_examples_are_refused_by_the_allowlist(line):
    from tfhydra.trust.allowlist import Untrusted, check_overrides

    with compositions_kept(), pytest.raises(Untrusted, match="--trust-x"):  # Hydra's groups listed once a process
        check_overrides(["model=mlp", line], Path("overrides.yaml"), "--trust-x", None, multirun=True)
