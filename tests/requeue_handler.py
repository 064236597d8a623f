"""`python -m requeue_handler MARKER <train.py arguments>` (tests/ on the path): the training command in a process
that already has a SIGUSR2 handler of its own, as a submitit job does (submitit's handler requeues the job, then
exits).

The handler writes the run record's status as it finds it into MARKER and exits 3: the test reads whether
tfhydra saved the state and wrote `interrupted` before handing the signal over."""

import json
import signal
import sys
from pathlib import Path

marker = Path(sys.argv.pop(1))


def requeue(signum, frame):
    run_dir = next(a.split("=", 1)[1] for a in sys.argv if a.startswith("hydra.run.dir="))
    record = Path(run_dir) / "metrics.json"
    status = json.loads(record.read_text())["status"] if record.exists() else "no record"
    marker.write_text(f"{signal.Signals(signum).name} {status}")
    sys.exit(3)


signal.signal(signal.SIGUSR2, requeue)

from tfhydra.__main__ import main  # noqa: E402

main()
