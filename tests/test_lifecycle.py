"""One owner for a run's lifecycle (issue 25): `tfhydra.record.Status` and `tfhydra/lifecycle.py`.

The rules are read from the package's source (no status word spelled outside the record module, one writer of a
failed record, the recipe importing nothing of the command line, no default repeated from conf/), and the
lifecycle's decisions are tested directly on real run directories (no training).
"""
from __future__ import annotations

import ast

import pytest

import trust_dirs
from conftest import ROOT
from tfhydra.errors import ConfigError
from tfhydra.record import STATUSES, RunRecord, Status, load_record

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
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get" and node.args:
            skip.add(id(node.args[0]))
        elif isinstance(node, ast.Subscript):
            skip.add(id(node.slice))
        elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            skip.add(id(node.value))
    return skip


def status_literals() -> list[str]:
    found = []
    for name, tree in sources():
        if name == "tfhydra/record.py":
            continue
        skip = keys_and_docstrings(tree)
        found += [f"{name}:{node.lineno} {node.value!r}" for node in ast.walk(tree)
                  if isinstance(node, ast.Constant) and node.value in STATUSES and id(node) not in skip]
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
                    if keyword.arg == "status" and ast.unparse(keyword.value).endswith(("FAILED", "INTERRUPTED", "status")):
                        writers.append(name)
    assert writers == ["tfhydra/lifecycle.py"]


def test_the_recipe_imports_nothing_of_the_command_line():
    command_line = {"tfhydra.preflight", "tfhydra.console", "tfhydra.startup", "tfhydra.__main__", "tfhydra.composition"}
    tree = ast.parse((PACKAGE / "job.py").read_text())
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)} | {
        a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    assert not imported & command_line


def conf_keys() -> set[str]:
    return {str(key) for node in trust_dirs.conf_nodes() for key in node} - {"_target_"}


# `.get(key, default)` calls whose key is spelled like a conf/ key but reads something else (file, key: what).
NOT_CONFIG = {("tfhydra/sweep/jobs.py", "epochs"): "checkpoints/history.json's epoch list",
              ("tfhydra/trainer/checks.py", "name"): "a metric node's name, else its _target_'s last part",
              ("tfhydra/optimizer/build.py", "lr"): "a _target_ optimizer's own node: else its constructor's default"}


def test_no_default_of_a_conf_key_is_repeated_in_code():
    """Defaults live in conf/ only: code reads the composed config (`cfg.trainer.max_loss`), never
    `cfg.get("max_loss", "auto")`, whose second copy of the default can drift from the YAML."""
    keys, repeated = conf_keys(), []
    for name, tree in sources():
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get" \
                    and len(node.args) == 2 and isinstance(node.args[0], ast.Constant) and node.args[0].value in keys \
                    and not (isinstance(node.args[1], ast.Constant) and node.args[1].value is None) \
                    and (name, node.args[0].value) not in NOT_CONFIG:
                repeated.append(f"{name}:{node.lineno} .get({node.args[0].value!r}, {ast.unparse(node.args[1])})")
            found = _select_default(node, keys)
            if found is not None:
                repeated.append(f"{name}:{node.lineno} {found}")
    assert repeated == []


def _select_default(node, keys: set[str]) -> str | None:
    """`OmegaConf.select(cfg, "a.key", default=<literal>)` whose key is a conf/ key: a second default (issue 36).
    A sentinel (`default=_ABSENT`, a name) only asks whether the key exists, and None says "unset"."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "select"
            and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str)):
        return None
    default = next((k.value for k in node.keywords if k.arg == "default"), None)
    if not isinstance(default, ast.Constant) or default.value is None:
        return None
    key = node.args[1].value
    if key.startswith("hydra.") or key.split(".")[-1] not in keys:
        return None  # Hydra's own node, whose defaults are Hydra's
    return f"select({key!r}, default={default.value!r})"


# ---- the statuses' meanings ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("status,succeeded,finished,tracker,hparams", [
    (Status.RUNNING, False, False, "KILLED", "failure"), (Status.COMPLETED, True, True, "FINISHED", "success"),
    (Status.PRUNED, True, True, "FINISHED", "unknown"), (Status.DIVERGED, False, True, "FAILED", "failure"),
    (Status.FAILED, False, True, "FAILED", "failure"), (Status.INTERRUPTED, False, True, "KILLED", "failure")])
def test_each_status_says_what_it_means_to_the_summary_trackers_and_hparams(status, succeeded, finished, tracker,
                                                                            hparams):
    assert (status.succeeded, status.finished, status.tracker, status.hparams) == (succeeded, finished, tracker,
                                                                                  hparams)
    assert f"{status}" == str(status) == status.value and status == status.value


def test_a_record_reads_back_its_status_as_a_status_and_refuses_an_unknown_one(tmp_path):
    from tfhydra.record import RecordError

    RunRecord(status=Status.PRUNED).write(tmp_path)
    assert load_record(tmp_path).status is Status.PRUNED
    (tmp_path / "metrics.json").write_text('{"schema_version": 1, "status": "finished"}')
    with pytest.raises(RecordError, match="status 'finished' is not one of running, completed"):
        load_record(tmp_path)


# ---- the lifecycle's decisions, on real directories ---------------------------------------------------------------

def test_record_stopped_says_interrupted_for_a_signal_and_failed_for_an_error(tmp_path):
    from tfhydra.lifecycle import record_stopped
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
    from tfhydra.lifecycle import record_stopped

    (tmp_path / "run").mkdir()
    RunRecord(status=Status.RUNNING, model="mlp", epochs_run=3).write(tmp_path / "run")
    record = record_stopped(tmp_path / "run", RuntimeError("boom"))
    assert (record.model, record.epochs_run, record.status) == ("mlp", 3, Status.FAILED)
    (tmp_path / "file").write_text("a file where a directory should be")
    record_stopped(tmp_path / "file" / "run", RuntimeError("boom"))  # logged, not raised over the error itself
    assert "could not be written" in caplog.text


def test_a_completed_run_is_kept_and_never_continued(tmp_path):
    from tfhydra.lifecycle import check_continuable, is_complete, kept_record

    run = trust_dirs.write_run(tmp_path / "run")
    assert is_complete(run) and kept_record(run).status is Status.COMPLETED
    with pytest.raises(ConfigError, match="it holds a completed run, which is never overwritten"):
        check_continuable(run, _job())


def test_an_unfinished_run_continues_only_with_its_config(tmp_path):
    from tfhydra.lifecycle import check_continuable, is_complete, kept_record

    run = trust_dirs.write_run(tmp_path / "run", status="interrupted")
    assert not is_complete(run) and kept_record(run) is None
    check_continuable(run, _job())  # the same config
    check_continuable(run, _job(["trainer.epochs=5"]))  # what a resumed run may change
    check_continuable(run, _job(["data.service.timeout=90", "data.service.progress_timeout=900"]))  # deadlines too
    with pytest.raises(ConfigError, match="its saved config differs in optimizer.lr"):
        check_continuable(run, _job(["optimizer.lr=0.5"]))


def _job(extra=()):
    import tfhydra
    from omegaconf import OmegaConf

    cfg = tfhydra.compose([*trust_dirs.RUN_OVERRIDES, *extra])
    return OmegaConf.masked_copy(cfg, [k for k in cfg if k != "hydra"])
