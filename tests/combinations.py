"""Features drawn together, a fault injected, the run contract asserted (issue 35, item 4).

One case is a combination of task x loop x precision x strategy x EMA x recovery x histograms/gradients/images x
compression x data source (one that gives the task's labels) x launcher (a single run, or a one-job `-m` sweep
under tfhydra's launcher) x Keras (`keras=3` drawn without compression, which it refuses), and one
fault: none, a blow-up to NaN/inf (SGD at lr 50: the loss passes `trainer.max_loss` in the first epoch), SIGTERM
or SIGKILL once an epoch is recorded. The contract, whatever the combination:
- the pre-flight may refuse it: exit 1, one `Error:` line, no run directory;
- no fault: `completed`; a blow-up: `diverged` without recovery trials, `completed` (with recoveries recorded)
  with them; SIGTERM: the process exits 143 with an `interrupted` record and a `Stopped:` line; SIGKILL: no
  record claims the run finished; after a signal the same command finishes the run (`completed`);
- never a traceback on stderr, never a record that says `completed` without the export it promises.
Used by tests/properties/test_combinations.py (a few drawn cases in CI, seed in pytest's header) and by
benchmarks/combinations.py (as many as you like, locally).
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import time
from dataclasses import dataclass, replace
from pathlib import Path

from conftest import start_process

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "tests"
FAULTS = ("none", "nan", "sigterm", "sigkill")


@dataclass(frozen=True)
class Case:
    loop: str = "fit"
    precision: str = "fp32"
    strategy: str = "default"
    ema: bool = False
    recovery: int = 0
    histograms: bool = True
    gradients: bool = False
    images: bool = False
    compression: str = "none"
    data: str = "digits"
    sweep: bool = False
    fault: str = "none"
    accumulate: int = 1  # trainer.accumulate_steps (pinned cases; not drawn yet: CI's seed is known to pass)
    task: str = "classification"
    keras: int = 2  # keras=2 (tf_keras) | 3 (Keras 3): drawn with compression only under 2 (docs/keras.md)

    def overrides(self) -> list[str]:
        args = [
            "model=mlp",
            f"task={self.task}",
            f"trainer.loop={self.loop}",
            f"precision={self.precision}",
            f"data={self.data}",
            f"compression={self.compression}",
            f"logging.histogram_freq={int(self.histograms)}",
            f"logging.gradients={str(self.gradients).lower()}",
            f"logging.images_freq={int(self.images)}",
            f"trainer.recovery.max_trials={self.recovery}",
            "trainer.recovery.lr_factor=0.01",
            "export.formats=[saved_model]",
            "trainer.epochs=3",
            "data.batch_size=16",
            f"trainer.accumulate_steps={self.accumulate}",
            f"keras={self.keras}",
        ]
        if self.strategy == "mirrored":
            args += ["strategy=mirrored", "strategy.logical_cpus=2"]
        if self.ema:
            args.append("trainer.ema.decay=0.9")
        if self.data == "synthetic":
            args += ["data.train_size=512", "data.val_size=128", "data.shape=[8,8,1]"]
        if self.fault == "nan":
            args += ["optimizer=sgd", "optimizer.momentum=0.0", "optimizer.lr=50", "trainer.max_loss=1e3"]
        return args


# The dimensions drawn, and their values (strategies() and draw(); the task is drawn after them, below).
DRAWN = {
    "loop": ("fit", "custom"),
    "precision": ("fp32", "mixed"),
    "strategy": ("default", "mirrored"),
    "ema": (False, True),
    "recovery": (0, 3),
    "histograms": (False, True),
    "gradients": (False, True),
    "images": (False, True),
    "compression": ("none", "prune"),
    "data": ("digits", "synthetic"),
    "sweep": (False, True),
    "fault": FAULTS,
    "keras": (2, 3),
}
TASKS = ("classification", "binary", "multilabel", "regression")
# The tasks whose labels each source gives (docs/tasks.md): digits reads class indices only, synthetic generates
# every task's labels (0/1, multi-hot rows, numbers).
TASKS_OF = {"digits": ("classification",), "synthetic": TASKS}


def strategies():
    """Hypothesis' strategy of cases: the task is drawn last, among those the drawn source gives labels for.

    Every combination is drawn. Until 2026-12-07 a pruned model under mirrored in the custom loop was left out, an
    open bug (the Model Optimization Toolkit's mask update failed at the first epoch's end on a MirroredVariable:
    the custom loop ran its callbacks outside the strategy's scope, fixed in tfhydra/trainer/custom.py), and before
    2026-12-06 a pruned model under mirrored trained twice (recovery's bug under mirrored, fixed in
    tfhydra/platform/private_api.py: make_current_rate_variable)."""
    from hypothesis import strategies as st

    # DRAWN's dimensions in its order; the yes/no ones as st.booleans(), as CI's seed has always drawn them
    cases = st.builds(
        Case,
        **{
            name: st.booleans() if values == (False, True) else st.sampled_from(values)
            for name, values in DRAWN.items()
        },
    ).map(as_run)
    return cases.flatmap(lambda case: st.sampled_from(TASKS_OF[case.data]).map(lambda task: replace(case, task=task)))


def draw(rng: random.Random) -> Case:
    """One case drawn with a seeded random (benchmarks/combinations.py's long run), by strategies()'s rules: the
    same dimensions, compression only under Keras 2, the task last."""
    case = as_run(Case(**{name: rng.choice(values) for name, values in DRAWN.items()}))
    return replace(case, task=rng.choice(TASKS_OF[case.data]))


def as_run(case: Case) -> Case:
    """A drawn case as it can run: compression only under keras=2 (docs/keras.md)."""
    return replace(case, compression="none") if case.keras == 3 else case


def trains_twice(case: Case) -> bool:
    """The case's run trains a second time in one process or after a restart: a recovered blow-up, a resume."""
    return case.fault in ("sigterm", "sigkill") or (case.fault == "nan" and case.recovery > 0)


def command(case: Case, where: Path) -> list[str]:
    """The case's `python train.py` arguments."""
    target = f"hydra.sweep.dir={where}" if case.sweep else f"hydra.run.dir={where}"
    sweep = ["-m", "trainer.seed=choice(0)"] if case.sweep else []  # a one-job grid
    return [*sweep, *case.overrides(), target]


def run_dir_of(case: Case, where: Path) -> Path | None:
    """The run's directory: `where` itself, or the sweep's one job directory once it exists."""
    if not case.sweep:
        return where
    jobs = [d for d in where.glob("*") if d.is_dir() and (d / ".hydra").is_dir()]
    return jobs[0] if jobs else None


def _env() -> dict:
    env = {**os.environ, "PYTHONPATH": str(TESTS)}
    env.pop("HYDRA_FULL_ERROR", None)
    return env


def _epochs(run: Path | None) -> int:
    try:
        return len(json.loads((run / "checkpoints" / "history.json").read_text())["epochs"])
    except (OSError, ValueError, KeyError, TypeError):
        return 0


def _record(run: Path | None) -> dict | None:
    try:
        return json.loads((run / "metrics.json").read_text())
    except (OSError, ValueError, TypeError):
        return None


def run_once(case: Case, where: Path, start=start_process, timeout: float = 900) -> tuple[int, str, bool]:
    """Run the case's command, sending its fault once an epoch is recorded; (exit code, stderr, fault sent)."""
    errors = where.parent / f"{where.name}.stderr"
    process = start(*command(case, where), cwd=ROOT, env=_env(), stderr=errors)
    sent = False
    if case.fault in ("sigterm", "sigkill"):
        deadline = time.monotonic() + timeout
        while process.poll() is None and time.monotonic() < deadline:
            if _epochs(run_dir_of(case, where)) >= 1:
                process.send_signal(signal.SIGTERM if case.fault == "sigterm" else signal.SIGKILL)
                sent = True
                break
            time.sleep(0.01)
    try:
        process.wait(timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        raise
    return process.returncode, errors.read_text(errors="replace"), sent


def check_case(case: Case, where: Path, start=start_process) -> str:
    """Run the case and assert the contract (module docstring); returns what happened, for the log. `start`
    starts `python train.py ARGS` (conftest's `start_process` by default, as benchmarks/combinations.py runs it;
    the tests pass `start_cli`, the same command forked from the server that has imported TensorFlow once)."""
    code, stderr, sent = run_once(case, where, start)
    assert "Traceback" not in stderr, f"{case}: a traceback\n{stderr[-3000:]}"
    last = stderr.strip().splitlines()[-1] if stderr.strip() else ""
    run = run_dir_of(case, where)
    if code == 1 and last.startswith("Error: ") and (run is None or _record(run) is None) and not sent:
        assert not where.exists() or case.sweep, f"{case}: refused ({last}) but a run directory was made"
        return f"refused by the pre-flight: {last[:120]}"
    record = _record(run)
    if case.fault in ("sigterm", "sigkill") and sent:
        if case.fault == "sigterm":
            assert code == 143, f"{case}: SIGTERM exit {code}\n{stderr[-2000:]}"
            assert record is not None and record["status"] == "interrupted", f"{case}: {record and record['status']}"
            assert last.startswith("Stopped: ") or case.sweep, f"{case}: last line {last!r}"
        else:
            assert record is None or record["status"] in ("running", "interrupted"), f"{case}: {record['status']}"
        again, stderr, _ = run_once(Case(**{**case.__dict__, "fault": "none"}), where, start)
        assert again == 0 and "Traceback" not in stderr, f"{case}: the same command again: {stderr[-3000:]}"
        record = _record(run_dir_of(case, where))
        assert record["status"] == "completed", f"{case}: after the resume {record['status']}"
        _check_completed(case, run_dir_of(case, where), record)
        return f"{case.fault} at epoch >= 1, then completed"
    assert record is not None, f"{case}: exit {code}, no record\n{stderr[-3000:]}"
    if case.fault == "nan":
        expected = "completed" if case.recovery else "diverged"
        assert record["status"] == expected, f"{case}: {record['status']} ({record.get('error')})"
        if case.recovery:
            assert record["recoveries"], f"{case}: completed without a recorded recovery"
    else:
        assert record["status"] == "completed" and code == 0, f"{case}: {record['status']} {record.get('error')}"
    if record["status"] == "completed":
        _check_completed(case, run, record)
    return f"{case.fault}: {record['status']}"


def _check_completed(case: Case, run: Path, record: dict) -> None:
    assert record["epochs_run"] == 3 == len(record["history"]), f"{case}: {record['epochs_run']} epochs"
    assert (run / "export" / "saved_model" / "saved_model.pb").is_file(), f"{case}: completed without its export"
    assert not (run / "checkpoints" / "state").exists(), f"{case}: completed with resumable state left"
