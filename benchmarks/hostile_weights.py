"""Issue 57's first acceptance line, measured: each hostile HDF5 kind through each path that hands a file to Keras,
as a child process, against a normal run of the same command.

    python benchmarks/hostile_weights.py [--paths weights2,weights3,preset3,preset2,from_run,resume_last,resume_best]
                                         [--kinds external_storage,virtual_dataset,external_link,shape_bomb]
                                         [--strace] [--work DIR] [--json FILE]

Made first, not measured (in a temporary directory, removed at the end unless --work is given): a tf_keras run and a
Keras 3 run of `model=mlp trainer.epochs=1` on the bundled digits (their checkpoints are the good weights files and
the run directories to resume or start from), and a 1-layer ViT keras-hub preset (tests/hub_presets.py, keras-hub's
own save_to_preset). Each hostile file is a copy of a good one with one model weight made hostile
(tests/hostile_h5.py): its bytes stored in, mapped from or linked to a file beside it holding known float32 values
(1e6 + 0.25, 2e6 + 0.25 ...: a step of Adam cannot change them in float32, so a model that read them keeps them in
every file it writes), or a kernel declared (100000, 10000), 4 GB, in a file a few kB larger.

Paths (the normal run is the same command on the untouched file or directory):
    weights2      python train.py model=mlp trainer.epochs=1 model.weights=F                (tf_keras, the default)
    weights3      the same with keras=3
    preset3       python train.py keras=3 model=keras_hub model.preset=P data=synthetic ... trainer.epochs=1
    preset2       the same under keras=2 (keras-hub's models are Keras 3 models: refused before the preset is read,
                  the normal run too; its ratio is to preset3's normal run)
    from_run      python train.py model=mlp trainer.epochs=1 compression=prune compression.from_run=RUN
                  (RUN's checkpoints/best.weights.h5 hostile)
    resume_last   python train.py <RUN's overrides> hydra.run.dir=RUN, RUN stopped after training (metrics.json and
                  export/ removed), its checkpoints/last.weights.h5 hostile (read to finish the run)
    resume_best   the same with checkpoints/best.weights.h5 hostile (read before the export)

Each row: the exit status; whether stderr's last line is tfhydra's one `Error:` line naming the file and the dataset,
with no traceback; the files under the run directory (and stdout/stderr) holding the outside bytes (must be none);
the peak RSS (os.wait4's ru_maxrss of that child) and its ratio to the normal run's (goal <= 1.2).
`--strace` runs each hostile command once more under `strace -f -e trace=open,openat,openat2` and counts the opens of
the outside file (must be 0; the RSS pass runs without strace).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from hostile_h5 import KINDS, files_holding, poison  # noqa: E402  (tests/: the same files the tests make)

MLP = ["model=mlp", "trainer.epochs=1", "logging.histogram_freq=0"]
PRESET = [
    "model=keras_hub",
    "data=synthetic",
    "data.shape=[16,16,1]",
    "data.num_classes=2",
    "data.train_size=128",
    "data.val_size=32",
    "data.test_size=32",
    "data.batch_size=32",
    "trainer.epochs=1",
    "logging.histogram_freq=0",
]
PATHS = ("weights2", "weights3", "preset3", "preset2", "from_run", "resume_last", "resume_best")


@dataclass
class Row:
    path: str
    kind: str  # one of KINDS, or "normal"
    rc: int
    one_line: bool
    leaked_into: list[str]
    outside_opens: int | None
    peak_rss_mb: float
    seconds: float
    line: str


def env_for(work: Path) -> dict:
    return {
        **os.environ,
        "PYTHONPATH": f"{ROOT / 'tests'}{os.pathsep}{ROOT}",
        "HF_HUB_OFFLINE": "1",
        "TF_CPP_MIN_LOG_LEVEL": "2",
        "TMPDIR": str(work),
    }


def child(command: list[str], log: Path, env: dict, wrapper: list[str] | None = None) -> tuple[int, float, float]:
    """(exit status, peak RSS in MB, seconds) of `command` run as a child, its stdout and stderr into `log`.*"""
    started = time.perf_counter()
    with open(log.with_suffix(".out"), "wb") as out, open(log.with_suffix(".err"), "wb") as err:
        process = subprocess.Popen([*(wrapper or []), *command], cwd=ROOT, env=env, stdout=out, stderr=err)
        _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    return process.returncode, usage.ru_maxrss / 1024, time.perf_counter() - started


def train(*overrides: str) -> list[str]:
    return [sys.executable, "train.py", *overrides]


def prepare(work: Path, paths: list[str], env: dict) -> dict[str, Path]:
    """The good files and runs every path starts from."""
    made: dict[str, Path] = {}
    if {"weights2", "from_run", "resume_last", "resume_best"} & set(paths):
        made["k2"] = work / "source-k2"
        ready(train(*MLP, f"hydra.run.dir={made['k2']}"), work / "source-k2", env)
    if "weights3" in paths:
        made["k3"] = work / "source-k3"
        ready(train("keras=3", *MLP, f"hydra.run.dir={made['k3']}"), work / "source-k3", env)
    if {"preset3", "preset2"} & set(paths):
        made["preset"] = work / "preset"
        ready(
            [sys.executable, str(ROOT / "tests" / "hub_presets.py"), "write-image", str(made["preset"])],
            work / "p",
            env,
        )
    return made


def ready(command: list[str], name: Path, env: dict) -> None:
    rc, _, _ = child(command, name.with_name(name.name + "-setup"), env)
    if rc:
        sys.exit(f"setup failed ({' '.join(command)}): see {name}-setup.err")


def case(path: str, kind: str | None, made: dict[str, Path], home: Path) -> tuple[list[str], Path, object]:
    """(command, run directory, Poisoned or None) of one path on a hostile copy (`kind`) or the good one (None)."""
    home.mkdir(parents=True)
    run_dir = home / "run"
    hostile = None
    if path in ("weights2", "weights3"):
        good = made["k2" if path == "weights2" else "k3"] / "checkpoints" / "best.weights.h5"
        weights = good
        if kind:
            hostile = poison(good, home / "given.weights.h5", kind)
            weights = hostile.path
        keras = ["keras=3"] if path == "weights3" else []
        return train(*keras, *MLP, f"model.weights={weights}", f"hydra.run.dir={run_dir}"), run_dir, hostile
    if path in ("preset3", "preset2"):
        preset = home / "preset"
        shutil.copytree(made["preset"], preset)
        if kind:
            hostile = poison(made["preset"] / "model.weights.h5", preset / "model.weights.h5", kind)
        keras = "keras=3" if path == "preset3" else "keras=2"
        return train(keras, *PRESET, f"model.preset={preset}", f"hydra.run.dir={run_dir}"), run_dir, hostile
    source = shutil.copytree(made["k2"], home / "source", symlinks=True)
    if path == "from_run":
        if kind:
            best = source / "checkpoints" / "best.weights.h5"
            hostile = poison(best, home / "best.weights.h5", kind)
            shutil.move(hostile.path, best)
        overrides = ["compression=prune", f"compression.from_run={source}", f"hydra.run.dir={run_dir}"]
        return train(*MLP, *overrides), run_dir, hostile
    (source / "metrics.json").unlink()  # stopped after training: the record not final, nothing exported
    shutil.rmtree(source / "export")
    if kind:
        target = source / "checkpoints" / ("last.weights.h5" if path == "resume_last" else "best.weights.h5")
        hostile = poison(target, home / target.name, kind)
        shutil.move(hostile.path, target)
    return train(*MLP, f"hydra.run.dir={source}"), source, hostile


def measure(path: str, kind: str | None, made: dict, work: Path, env: dict, use_strace: bool) -> Row:
    home = work / path / (kind or "normal")
    command, run_dir, hostile = case(path, kind, made, home)
    rc, rss, seconds = child(command, home / "child", env)
    stdout, stderr = (home / "child.out").read_bytes(), (home / "child.err").read_bytes()
    text = stderr.decode(errors="replace")
    lines = [line for line in text.strip().splitlines() if line.strip()]
    line = lines[-1] if lines else ""
    leaked: list[str] = []
    one_line = rc == 0 and not kind
    opens = None
    if hostile is not None:
        one_line = (
            rc != 0
            and "Traceback" not in text
            and line.startswith("Error: ")
            and ("keras-hub" in line or hostile.dataset in line)
        )
        leaked = [str(p) for p in files_holding(run_dir, hostile.secret)]
        leaked += [
            name for name, data in (("stdout", stdout), ("stderr", stderr)) if hostile.secret and hostile.secret in data
        ]
        if use_strace and hostile.outside is not None:
            opens = outside_opens(command, hostile.outside, home, env)
    return Row(path, kind or "normal", rc, one_line, leaked, opens, round(rss, 1), round(seconds, 1), line[:400])


def outside_opens(command: list[str], outside: Path, home: Path, env: dict) -> int:
    """How many times the hostile command, run again under strace, opens the outside file."""
    again = home / "strace"
    shutil.rmtree(again, ignore_errors=True)
    trace = home / "strace.log"
    command = [c.replace(str(home / "run"), str(again)) for c in command]
    child(
        command,
        home / "strace-child",
        env,
        ["strace", "-f", "-qq", "-e", "trace=open,openat,openat2", "-o", str(trace)],
    )
    return sum(str(outside) in line for line in trace.read_text(errors="replace").splitlines())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--paths", default=",".join(PATHS))
    parser.add_argument("--kinds", default=",".join(KINDS))
    parser.add_argument("--strace", action="store_true", help="count opens of the outside file under strace")
    parser.add_argument("--work", type=Path, help="keep everything here (default: a temporary directory, removed)")
    parser.add_argument("--json", type=Path, help="write the rows here too")
    args = parser.parse_args()
    paths, kinds = args.paths.split(","), args.kinds.split(",")
    work = args.work or Path(tempfile.mkdtemp(prefix="hostile-weights-"))
    work.mkdir(parents=True, exist_ok=True)
    env = env_for(work)
    try:
        made = prepare(work, paths, env)
        rows: list[Row] = []
        for path in paths:
            normal = measure(path, None, made, work, env, False)
            rows.append(normal)
            for kind in kinds:
                rows.append(measure(path, kind, made, work, env, args.strace))
        report(rows, kinds)
        if args.json:
            args.json.write_text(json.dumps([asdict(r) for r in rows], indent=1))
    finally:
        if not args.work:
            shutil.rmtree(work, ignore_errors=True)


def report(rows: list[Row], kinds: list[str]) -> None:
    normal = {r.path: r for r in rows if r.kind == "normal"}
    if "preset3" in normal and "preset2" in normal:  # no normal run under keras=2: keras-hub is Keras 3's
        normal["preset2"] = normal["preset3"]
    heads = ("rc", "one line", "leaked", "opens", "peak MB", "ratio", "s")
    print(f"{'path':12} {'kind':17} " + " ".join(f"{h:>{max(len(h), 5)}}" for h in heads))
    for r in rows:
        ratio = r.peak_rss_mb / normal[r.path].peak_rss_mb if normal[r.path].peak_rss_mb else float("nan")
        opens = "-" if r.outside_opens is None else str(r.outside_opens)
        print(
            f"{r.path:12} {r.kind:17} {r.rc:>5} {str(r.one_line):>8} {len(r.leaked_into):>6} {opens:>5} "
            f"{r.peak_rss_mb:>7.0f} {ratio:>5.2f} {r.seconds:>5.1f}"
        )
    print()
    for r in rows:
        if r.kind != "normal":
            print(f"{r.path} {r.kind}: {r.line}")
    bad = [r for r in rows if r.kind != "normal" and not (r.one_line and not r.leaked_into and not r.outside_opens)]
    worst = max((r.peak_rss_mb / normal[r.path].peak_rss_mb for r in rows if r.kind != "normal"), default=0.0)
    print(
        f"\nhostile rows: {sum(r.kind != 'normal' for r in rows)}, not refused cleanly: {len(bad)}; "
        f"largest peak RSS ratio to the normal run: {worst:.2f} (goal <= 1.2); kinds: {', '.join(kinds)}"
    )


if __name__ == "__main__":
    main()
