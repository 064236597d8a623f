"""One owner for a run's lifecycle (issue 25): `tfhydra.record.Status` and `tfhydra/record/lifecycle.py`.

The rules are read from the package's source (no status word spelled outside the record module, one writer of a
failed record, the recipe importing nothing of the command line, no default repeated from conf/), and the
lifecycle's decisions are tested directly on real run directories (no training).
"""

from __future__ import annotations

import ast

import pytest
import trust_dirs
from conftest import ROOT

from tfhydra.config.errors import ConfigError
from tfhydra.record.run_record import STATUSES, RunRecord, Status, load_record

PACKAGE = ROOT / "tfhydra"


def sources():
    for path in sorted(PACKAGE.rglob("*.py")):
        yield str(path.relative_to(ROOT)), ast.parse(path.read_text())


def keys_and_docstrings(tree) -> set[int]:
    """ids of the string constants that are dict keys, `.get()`/subscript keys or docstrings: names, not statuses."""
    skip = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            skip |= {id(k) for k in node.keys if k is not None}
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "get"
            and node.args
        ):
            skip.add(id(node.args[0]))
        elif isinstance(node, ast.Subscript):
            skip.add(id(node.slice))
        elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            skip.add(id(node.value))
    return skip


def status_literals() -> list[str]:
    found = []
    for name, tree in sources():
        if name == "tfhydra/record/run_record.py":
            continue
        skip = keys_and_docstrings(tree)
        found += [
            f"{name}:{node.lineno} {node.value!r}"
            for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and node.value in STATUSES and id(node) not in skip
        ]
    return found


def test_no_status_is_spelled_outside_the_record_module():
    assert status_literals() == []
    assert STATUSES == tuple(s.value for s in Status) and len(set(STATUSES)) == 7


def test_the_one_writer_of_a_failed_or_interrupted_record_is_the_lifecycle():
    writers = []
    for name, tree in sources():
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "update":
                for keyword in node.keywords:
                    if keyword.arg == "status" and ast.unparse(keyword.value).endswith(
                        ("FAILED", "INTERRUPTED", "status")
                    ):
                        writers.append(name)
    assert writers == ["tfhydra/record/lifecycle.py"]


def test_the_recipe_imports_nothing_of_the_command_line():
    command_line = {
        "tfhydra.cli.preflight",
        "tfhydra.cli.console",
        "tfhydra.platform.startup",
        "tfhydra.__main__",
        "tfhydra.config.composition",
    }
    tree = ast.parse((PACKAGE / "runner" / "job.py").read_text())
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)} | {
        a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names
    }
    assert not imported & command_line


def conf_keys() -> set[str]:
    return {str(key) for node in trust_dirs.conf_nodes() for key in node} - {"_target_"}


def conf_defaults() -> dict[str, set]:
    """key (its last part) -> the literal values conf/ gives it anywhere ((type, value) pairs; nulls and
    interpolations left out: they are not a value code could contradict)."""
    found: dict[str, set] = {}
    for node in trust_dirs.conf_nodes():
        for key, value in node.items():
            if value is not None and not isinstance(value, (dict, list)) and "${" not in str(value):
                found.setdefault(str(key), set()).add((type(value), value))
    return found


# `.get(key, default)` calls whose key is spelled like a conf/ key but reads something else (file, key: what).
NOT_CONFIG = {
    ("tfhydra/sweep/jobs.py", "epochs"): "checkpoints/history.json's epoch list",
    ("tfhydra/trainer/checks.py", "name"): "a metric node's name, else its _target_'s last part",
    ("tfhydra/optimizer/build.py", "lr"): "a _target_ optimizer's own node: else its constructor's default",
    ("tfhydra/compression/plan.py", "name"): "a _target_ scheme has no name: its phase's label",
}


def test_no_default_of_a_conf_key_is_repeated_in_code():
    """Defaults live in conf/ only: code reads the composed config (`cfg.trainer.max_loss`), never
    `cfg.get("max_loss", "auto")`, whose second copy of the default can drift from the YAML; nor does it fall back
    on a value conf/ does not give the key (`cfg.get("x") or 3`, `if "x" not in cfg: return 3`)."""
    keys, defaults, repeated = conf_keys(), conf_defaults(), []
    for name, tree in sources():
        repeated += [
            f"{name}:{line}" for key, line in repeated_defaults(tree, keys, defaults) if (name, key) not in NOT_CONFIG
        ]
    assert repeated == []


def repeated_defaults(tree, keys: set[str], defaults: dict[str, set]) -> list[tuple[str, str]]:
    """(key, "<line> <what>") of every default a module gives a conf/ key: `.get("k", literal)` (or `default=`),
    `getattr(x, "k", literal)`, `select(x, "a.k", default=literal)`: any literal but None; and a literal that acts
    as the key's default where conf/ gives it another value: `x.get("k") or literal`, `x.k if "k" in x else
    literal`, `if "k" not in x: return literal` / `if value is None: return literal` (value read from the key)."""
    found = []
    for node in ast.walk(tree):
        key, default = _literal_default(node, keys)
        if key is not None:
            found.append((key, f"{node.lineno} {ast.unparse(node)}"))
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            found += [
                (key, f"{line} {what}")
                for key, line, what in _fallbacks(node, keys)
                if _contradicts(defaults, key, what)
            ]
    return found


def _literal_default(node, keys: set[str]):
    """(key, default) of a `.get` / `getattr` / `select` call that names a conf/ key and a literal default."""
    if not isinstance(node, ast.Call) or len(node.args) < 1:
        return None, None
    name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", None)
    keyword = next((k.value for k in node.keywords if k.arg == "default"), None)
    if name == "get" and isinstance(node.func, ast.Attribute):
        key, default = node.args[0], node.args[1] if len(node.args) > 1 else keyword
    elif name == "getattr" and len(node.args) == 3:
        key, default = node.args[1], node.args[2]
    elif name == "select" and len(node.args) >= 2:
        key, default = node.args[1], keyword
    else:
        return None, None
    if not (
        isinstance(key, ast.Constant)
        and isinstance(key.value, str)
        and isinstance(default, ast.Constant)
        and default.value is not None
    ) or key.value.startswith("hydra."):
        return None, None  # a sentinel (`default=_ABSENT`) asks whether the key exists; None says "unset"
    last = key.value.split(".")[-1]
    return (last, default.value) if last in keys else (None, None)


def _key_read(node, keys: set[str]) -> str | None:
    """The conf/ key an expression reads: `x.get("k")`, `select(x, "a.k")`, `x.k`, or tests: `"k" in x`."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("get", "select"):
        arg = node.args[0 if node.func.attr == "get" else 1] if len(node.args) > (node.func.attr == "select") else None
        key = arg.value.split(".")[-1] if isinstance(arg, ast.Constant) and isinstance(arg.value, str) else None
        return key if key in keys and not arg.value.startswith("hydra.") else None
    if isinstance(node, ast.Attribute) and node.attr in keys:
        return node.attr
    if isinstance(node, ast.Compare) and isinstance(node.left, ast.Constant) and node.left.value in keys:
        return node.left.value if any(isinstance(op, (ast.In, ast.NotIn)) for op in node.ops) else None
    if isinstance(node, ast.Compare):
        return _key_read(node.left, keys)
    if isinstance(node, ast.UnaryOp):
        return _key_read(node.operand, keys)
    return None


def _fallbacks(function, keys: set[str]):
    """(key, line, literal) of every literal a function falls back on for a conf/ key it reads, where the key is
    absent or null (a truthiness or value test chooses between values; it is not a default)."""
    bound = {
        target.id: _key_read(node.value, keys)
        for node in ast.walk(function)
        if isinstance(node, ast.Assign)
        for target in node.targets
        if isinstance(target, ast.Name) and _key_read(node.value, keys)
    }

    def read(node) -> str | None:
        return bound.get(node.id) if isinstance(node, ast.Name) else _key_read(node, keys)

    def absent(test) -> str | None:
        """The key `"k" not in x`, `value is None`, `not x.get("k")` ask about."""
        if isinstance(test, ast.Compare) and len(test.ops) == 1:
            if isinstance(test.ops[0], (ast.In, ast.NotIn)) and isinstance(test.left, ast.Constant):
                return _key_read(test, keys)
            if isinstance(test.comparators[0], ast.Constant) and test.comparators[0].value is None:
                return read(test.left)
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            return read(test.operand)
        return None

    def literal(node) -> bool:
        return isinstance(node, ast.Constant) and node.value is not None

    for node in ast.walk(function):
        if (
            isinstance(node, ast.BoolOp)
            and isinstance(node.op, ast.Or)
            and isinstance(node.values[0], ast.Call)
            and _key_read(node.values[0], keys)
        ):
            for value in node.values[1:]:
                if literal(value) and value.value:  # `or 0`, `or ""`: what null means, not a default
                    yield _key_read(node.values[0], keys), node.lineno, value.value
        elif isinstance(node, ast.IfExp) and absent(node.test):
            key = absent(node.test)
            for value, other in ((node.body, node.orelse), (node.orelse, node.body)):
                if literal(value) and (read(other) == key or _key_read(other, keys) == key):
                    yield key, node.lineno, value.value
        elif isinstance(node, ast.If) and absent(node.test):
            for statement in node.body:
                if isinstance(statement, ast.Return) and literal(statement.value):
                    yield absent(node.test), statement.lineno, statement.value.value


def _contradicts(defaults: dict[str, set], key: str, literal) -> bool:
    """A literal conf/ never gives the key, where conf/ gives it a value (a null default: code says what null
    means)."""
    given = defaults.get(key, set())
    return bool(given) and (type(literal), literal) not in given


CONTRADICTING = {  # sources that give logging.tensorboard (conf/: false, true) or trainer.max_loss a second default
    "return cfg.get('tensorboard', True)": "tensorboard",
    "x = cfg.get('max_loss', default='auto')": "max_loss",
    "x = getattr(cfg.logging, 'tensorboard', False)": "tensorboard",
    "x = OmegaConf.select(cfg, 'logging.tensorboard', default=True)": "tensorboard",
    "def f(cfg):\n    return cfg.get('delimiter') or ';'": "delimiter",
    "def f(cfg):\n    if 'delimiter' not in cfg.data:\n        return ';'\n    return cfg.data.delimiter": "delimiter",
    (
        "def f(cfg):\n    value = cfg.data.get('delimiter')\n"
        "    if value is None:\n        return ';'\n    return value"
    ): "delimiter",
    "def f(cfg):\n    return cfg.data.delimiter if 'delimiter' in cfg.data else ';'": "delimiter",
}


@pytest.mark.parametrize("source", sorted(CONTRADICTING))
def test_the_defaults_rule_sees_a_planted_second_default(source):
    found = repeated_defaults(ast.parse(source), conf_keys(), conf_defaults())
    assert [key for key, _ in found] == [CONTRADICTING[source]], found


@pytest.mark.parametrize(
    "source",
    [
        "x = cfg.get('tensorboard')",
        "x = OmegaConf.select(cfg, 'logging.tensorboard', default=_ABSENT)",
        "def f(cfg):\n    return cfg.get('delimiter') or ','",
        "def f(cfg):\n    return cfg.get('channels') or 0",
        "x = OmegaConf.select(cfg, 'hydra.run.dir', default='')",
        "x = os.environ.get('TF_CONFIG') or '{}'",
    ],
)
def test_the_defaults_rule_lets_reads_and_what_null_means_pass(source):
    assert repeated_defaults(ast.parse(source), conf_keys(), conf_defaults()) == []


# ---- the statuses' meanings ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "status,succeeded,finished,tracker,hparams",
    [
        (Status.RUNNING, False, False, "KILLED", "failure"),
        (Status.COMPLETED, True, True, "FINISHED", "success"),
        (Status.PRUNED, True, True, "FINISHED", "unknown"),
        (Status.DIVERGED, False, True, "FAILED", "failure"),
        (Status.FAILED, False, True, "FAILED", "failure"),
        (Status.INTERRUPTED, False, True, "KILLED", "failure"),
    ],
)
def test_each_status_says_what_it_means_to_the_summary_trackers_and_hparams(
    status, succeeded, finished, tracker, hparams
):
    assert (status.succeeded, status.finished, status.tracker, status.hparams) == (
        succeeded,
        finished,
        tracker,
        hparams,
    )
    assert f"{status}" == str(status) == status.value and status == status.value


def test_a_record_reads_back_its_status_as_a_status_and_refuses_an_unknown_one(tmp_path):
    from tfhydra.record.run_record import RecordError

    RunRecord(status=Status.PRUNED).write(tmp_path)
    assert load_record(tmp_path).status is Status.PRUNED
    (tmp_path / "metrics.json").write_text('{"schema_version": 1, "status": "finished"}')
    with pytest.raises(RecordError, match="status 'finished' is not one of running, completed"):
        load_record(tmp_path)


# ---- the lifecycle's decisions, on real directories ---------------------------------------------------------------


def test_record_stopped_says_interrupted_for_a_signal_and_failed_for_an_error(tmp_path):
    from tfhydra.record.lifecycle import record_stopped
    from tfhydra.trainer.state import Interrupted

    record = record_stopped(tmp_path / "a", Interrupted(15, "epoch 2, step 5"), epochs_run=1)
    assert (record.status, record.epochs_run) == (Status.INTERRUPTED, 1)
    assert "SIGTERM" in record.error and "epoch 2, step 5" in record.error
    assert load_record(tmp_path / "a").status is Status.INTERRUPTED
    failed = record_stopped(tmp_path / "b", ConfigError("data.path", "x.npz", "an npz file", "no such file"))
    assert failed.error == "data.path=x.npz: no such file; accepted: an npz file"
    odd = record_stopped(tmp_path / "c", ValueError("one\n  two"))
    assert odd.error == "ValueError: one two"


def test_record_stopped_keeps_what_the_run_recorded_and_survives_an_unwritable_directory(tmp_path, caplog):
    from tfhydra.record.lifecycle import record_stopped

    (tmp_path / "run").mkdir()
    RunRecord(status=Status.RUNNING, model="mlp", epochs_run=3).write(tmp_path / "run")
    record = record_stopped(tmp_path / "run", RuntimeError("boom"))
    assert (record.model, record.epochs_run, record.status) == ("mlp", 3, Status.FAILED)
    (tmp_path / "file").write_text("a file where a directory should be")
    record_stopped(tmp_path / "file" / "run", RuntimeError("boom"))  # logged, not raised over the error itself
    assert "could not be written" in caplog.text


def test_a_completed_run_is_kept_and_never_continued(tmp_path):
    from tfhydra.record.lifecycle import is_complete, kept_record
    from tfhydra.trust.continuation import check_continuable

    run = trust_dirs.write_run(tmp_path / "run")
    assert is_complete(run) and kept_record(run).status is Status.COMPLETED
    with pytest.raises(ConfigError, match="it holds a completed run, which is never overwritten"):
        check_continuable(run, _job())


def test_an_unfinished_run_continues_only_with_its_config(tmp_path):
    from tfhydra.record.lifecycle import is_complete, kept_record
    from tfhydra.trust.continuation import check_continuable

    run = trust_dirs.write_run(tmp_path / "run", status="interrupted")
    assert not is_complete(run) and kept_record(run) is None
    check_continuable(run, _job())  # the same config
    check_continuable(run, _job(["trainer.epochs=5"]))  # what a resumed run may change
    deadlines = ["data.service.timeout=90", "data.service.progress_timeout=900", "sweep.cluster_timeout=30"]
    check_continuable(run, _job(deadlines))  # deadlines too
    with pytest.raises(ConfigError, match="its saved config differs in optimizer.lr"):
        check_continuable(run, _job(["optimizer.lr=0.5"]))


def _job(extra=()):
    from omegaconf import OmegaConf

    import tfhydra

    cfg = tfhydra.compose([*trust_dirs.RUN_OVERRIDES, *extra])
    return OmegaConf.masked_copy(cfg, [k for k in cfg if k != "hydra"])
