"""The Python API refuses as the command does (issue 46, item 7; docs/notebook.md, "Refusals"): each refusal of
`python train.py` is raised by tfhydra.train / tfhydra.multirun as one ConfigError carrying the very line the
command prints; an argument of the wrong kind is refused naming the argument; load_result of a directory with no
readable record names `run_dir`; a refused second sweep returns no results; and what a run would write, its readers
read back (one set of limits, tfhydra/config/bounded.py), a refused value blamed on its key.

Every case is refused by the pre-flight, before TensorFlow trains: the command's side is one short process per
case (run_cli), the API's side in this process."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import compose_config, run_cli
from omegaconf import OmegaConf

import tfhydra
from tfhydra.config.bounded import MAX_DEPTH, check_yaml_shape
from tfhydra.record.run_record import RunRecord, Status
from tfhydra.record.rundir import RunPaths

FAST = ["model=mlp", "debug=fast", "logging.histogram_freq=0"]
SWEPT = [*FAST, "optimizer.lr=0.001,0.002"]
LIST = "a list of key=value strings"
EXAMPLE = f"{LIST}, e.g. ['model=mlp', 'trainer.epochs=3']"


def _nested(levels: int) -> str:
    return "[" * levels + "1" + "]" * levels


def _run(folder: Path, overrides: list[str], status: Status) -> Path:
    """A run directory as a run leaves it: its saved config and its record (nothing trained)."""
    (folder / ".hydra").mkdir(parents=True)
    OmegaConf.save(compose_config(overrides), RunPaths(folder).config)
    RunPaths(folder).overrides.write_text(OmegaConf.to_yaml(OmegaConf.create(overrides)))
    RunRecord(status=status, run_dir=str(folder)).write(folder)
    return folder


@pytest.fixture(scope="module")
def dirs(tmp_path_factory) -> dict[str, Path]:
    """A completed run, an interrupted one of optimizer.lr=0.5, a sweep whose first job ran with trainer.seed=1,
    and a file where a directory goes."""
    root = tmp_path_factory.mktemp("refusals")
    (root / "a_file").write_text("not a directory")
    return {
        "done": _run(root / "done", FAST, Status.COMPLETED),
        "stopped": _run(root / "stopped", [*FAST, "optimizer.lr=0.5"], Status.INTERRUPTED),
        "sweep": _run(
            root / "sweep" / "0_optimizer.lr=0.001", [*FAST, "optimizer.lr=0.001", "trainer.seed=1"], Status.COMPLETED
        ).parent,
        "file": root / "a_file",
    }


# (id, call, overrides, directory argument: a key of `dirs`, or None)
CASES = [
    ("unknown key", "train", ["trainer.epochz=1"], None),
    ("several values without -m", "train", ["optimizer.lr=1e-3,1e-4"], None),
    ("not read back: nested too deep", "train", [*FAST, f"+trainer.note={_nested(MAX_DEPTH)}"], None),
    ("a completed run", "train", FAST, "done"),
    ("an unfinished run of another config", "train", FAST, "stopped"),
    ("a file for the run directory", "train", FAST, "file"),
    ("a sweep whose job ran with another config", "multirun", SWEPT, "sweep"),
    ("a file for the sweep directory", "multirun", SWEPT, "file"),
]


@pytest.mark.parametrize(("call", "overrides", "folder"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_the_api_raises_the_commands_line(call, overrides, folder, dirs):
    key = "hydra.run.dir" if call == "train" else "hydra.sweep.dir"
    where = [f"{key}={dirs[folder]}"] if folder else []
    command = run_cli(*(["-m"] if call == "multirun" else []), *overrides, *where)
    assert command.returncode == 1, command.stderr
    line = command.stderr.strip().splitlines()[-1]
    before = sorted(p.stat().st_mtime_ns for p in dirs["sweep"].rglob("*"))

    argument = {("run_dir" if call == "train" else "sweep_dir"): dirs[folder]} if folder else {}
    with pytest.raises(tfhydra.ConfigError) as caught:
        getattr(tfhydra, call)(overrides, quiet=True, **argument)
    assert f"Error: {caught.value}" == line
    assert sorted(p.stat().st_mtime_ns for p in dirs["sweep"].rglob("*")) == before  # nothing written


def test_a_sweep_its_command_refuses_returns_no_results(dirs, monkeypatch):
    """The child command's refusal is raised even when the kernel's own check lets the sweep through (here: that
    check switched off), never the records of the sweep that was there before: the worst case of item 7."""
    import tfhydra.cli.preflight

    monkeypatch.setattr(tfhydra.cli.preflight, "check_overrides", lambda *args, **kwargs: None)
    with pytest.raises(
        tfhydra.ConfigError, match=r"^hydra.sweep.dir=.*its job 0_optimizer.lr=0.001 was run with another config"
    ):
        tfhydra.multirun([*SWEPT, "trainer.seed=2"], sweep_dir=dirs["sweep"], quiet=True)


@pytest.mark.parametrize(
    ("arguments", "line"),
    [
        (
            {"overrides": "model=mlp trainer.epochz=1"},
            "overrides='model=mlp trainer.epochz=1': a string of several overrides; accepted: "
            f"{LIST}: ['model=mlp', 'trainer.epochz=1']",
        ),
        (
            {"overrides": {"model": "mlp"}},
            "overrides=\"{'model': 'mlp'}\": a mapping; accepted: a list of key=value strings: ['model=mlp']",
        ),
        (
            {"overrides": 3},
            f"overrides=3: not a list (int); accepted: {EXAMPLE}",
        ),
        (
            {"overrides": ["model=mlp", None]},
            f"overrides[1]=None: not a string (NoneType); accepted: {EXAMPLE}",
        ),
        (
            {"overrides": ["-m", "model=mlp"]},
            "overrides[0]=-m: a flag of the command, not an override; accepted: tfhydra.multirun(overrides) to sweep",
        ),
        (
            {"overrides": FAST, "run_dir": 5},
            "run_dir=5: not a path (int); accepted: a directory, as a str or pathlib.Path",
        ),
        (
            {"overrides": FAST, "config_dir": ""},
            "config_dir='': an empty path; accepted: a directory, as a str or pathlib.Path",
        ),
        ({"overrides": FAST, "quiet": "no"}, "quiet='no': not a bool (str); accepted: True or False"),
    ],
    ids=[
        "several in a string",
        "a mapping",
        "a number",
        "an item not a string",
        "a flag",
        "run_dir",
        "config_dir",
        "quiet",
    ],
)
def test_an_argument_of_the_wrong_kind_is_refused_naming_it(arguments, line, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(tfhydra.ConfigError) as caught:
        tfhydra.train(**arguments)
    assert str(caught.value) == line
    assert list(tmp_path.iterdir()) == []


def test_one_override_may_be_a_string(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(tfhydra.ConfigError, match=r"^trainer.epochz=1: unknown key"):
        tfhydra.train("trainer.epochz=1")
    assert tfhydra.compose("model=mlp").model.name == "mlp"


def test_load_result_names_run_dir_and_why(dirs, tmp_path):
    half = _run(tmp_path / "half", FAST, Status.COMPLETED)
    RunPaths(half).metrics.write_text(RunPaths(dirs["done"]).metrics.read_text()[:40])  # cut while written
    (tmp_path / "nested").mkdir()
    (tmp_path / "nested" / "metrics.json").write_text("[" * 100_000 + "]" * 100_000)
    (tmp_path / "empty").mkdir()
    why = {
        tmp_path / "nowhere": "no such directory",
        dirs["file"]: "a file, not a directory",
        tmp_path
        / "empty": "it has no metrics.json (not a run directory, or a run that has not written its record yet)",
        dirs["sweep"]: "a sweep's directory: each of its jobs has a record (tfhydra.multirun returns them all)",
        half: "its metrics.json cannot be read (not JSON (",
        tmp_path / "nested": "its metrics.json cannot be read (not JSON (it nests too deep to read))",
    }
    for folder, problem in why.items():
        with pytest.raises(tfhydra.ConfigError) as caught:
            tfhydra.load_result(folder)
        assert str(caught.value).startswith(f"run_dir={folder}: {problem}"), str(caught.value)
    with pytest.raises(tfhydra.ConfigError, match=r"^run_dir: not given"):
        tfhydra.load_result(None)
    assert tfhydra.load_result(dirs["done"]).status == Status.COMPLETED


def test_what_the_pre_flight_accepts_its_readers_read_back():
    """One set of limits: a value nested to the last level a saved config may hold is accepted and its
    config.yaml passes the readers' measure; one level more is refused on its key; 200 levels (a RecursionError
    in OmegaConf before) likewise; overrides larger than a saved config are refused before Hydra parses them."""
    from tfhydra.cli.preflight import check_overrides
    from tfhydra.config.project import CONFIG_DIR

    deepest = f"+trainer.note={_nested(MAX_DEPTH - 2)}"  # trainer and note are two levels
    check_overrides(CONFIG_DIR, "config", ["model=mlp", deepest])
    cfg = compose_config(["model=mlp", deepest])
    check_yaml_shape(OmegaConf.to_yaml(cfg))
    for levels in (MAX_DEPTH - 1, 200):
        with pytest.raises(tfhydra.ConfigError, match=rf"^trainer.note: it nests {levels + 2} levels deep"):
            check_overrides(CONFIG_DIR, "config", ["model=mlp", f"+trainer.note={_nested(levels)}"])
    with pytest.raises(tfhydra.ConfigError, match=r"^trainer.note: the overrides are \d+ bytes, above"):
        check_overrides(CONFIG_DIR, "config", ["model=mlp", "+trainer.note=" + "a" * (17 * 2**20)])


def test_a_run_started_from_another_thread_while_one_trains_is_one_line(tmp_path):
    """Keras' policy and seeds, TensorFlow's threads and the logging handlers are the process's: a second run from
    another thread is refused before it composes anything, naming the way to run several; the same thread nests."""
    import threading

    from tfhydra.api import one_run_at_a_time
    from tfhydra.config.errors import ConfigError

    caught: list[BaseException] = []

    def second():
        try:
            tfhydra.train([*FAST], run_dir=tmp_path / "second")
        except BaseException as error:  # noqa: BLE001  (what the thread raised, asserted below)
            caught.append(error)

    with one_run_at_a_time("tfhydra.train"), one_run_at_a_time("tfhydra.run"):  # nesting in one thread is allowed
        thread = threading.Thread(target=second, name="second")
        thread.start()
        thread.join(60)
    assert len(caught) == 1 and isinstance(caught[0], ConfigError), caught
    assert str(caught[0]) == (
        f"tfhydra.train: another run is training in this process (thread {threading.current_thread().name}); "
        "accepted: one run at a time in "
        "a process: wait for the other to return, or tfhydra.multirun([...]) for several (each job in a process of "
        "its own)"
    )
    assert not (tmp_path / "second").exists()  # refused before anything was written
    with one_run_at_a_time("tfhydra.run"):  # released: the next run may start
        pass
