"""TensorBoard HParams records for a sweep, so `tensorboard --logdir <sweep dir>` shows every
job in the HParams dashboard with its swept values and metrics.

Layout (checked against the real TensorBoard server, tests/sweep/test_sweep.py,
tests/trainer/test_tensorboard_graph.py):
- `<sweep dir>/events.out.tfevents.*`: the experiment (swept keys and their values, the
  metrics to show). Written once, when the sweep starts: the sweep's one run of its own.
- `<job>/tensorboard/validation/events.out.tfevents.*.tfhydra`: the job's trial (session start with
  its swept values, later its end status and `best_<monitor>`), beside the Keras TensorBoard
  callback's validation scalars, so a job is two runs (`train`, `validation`), not three: a 2x2
  sweep lists 9 runs. TensorBoard makes the run holding a session start one session and looks its
  metrics up in that run and the runs below it (`os.path.join(session, group)`, no `..`), so the
  HParams table shows the validation metrics (what a sweep chooses by) and `best_<monitor>`; the
  training curves are in the job's `train` run (Scalars, Time Series).
- The trial id is the job directory's name (not a hash of the values), so the HParams
  table names the directory to open.

Event files are written here with TensorBoard's own protos and record writer (no
TensorFlow): the sweep's launching process writes the experiment without importing it.
"""

from __future__ import annotations

import math
import os
import socket
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from tensorboard.compat.proto import event_pb2, summary_pb2
from tensorboard.plugins.hparams import api_pb2, metadata, plugin_data_pb2
from tensorboard.plugins.hparams import summary_v2 as hp
from tensorboard.summary.writer.record_writer import RecordWriter

from tfhydra.record.monitor import MODES, Monitor
from tfhydra.record.run_record import Status, test_name

Value = Any  # bool | int | float | str


class EventFile:
    """One TensorBoard event file, flushed after every event (a sweep is watched while it runs)."""

    def __init__(self, log_dir: Path) -> None:
        log_dir.mkdir(parents=True, exist_ok=True)
        name = f"events.out.tfevents.{int(time.time()):010d}.{socket.gethostname()}.{os.getpid()}.tfhydra"
        self.path = log_dir / name
        self._writer = RecordWriter(open(self.path, "wb"))
        self._add(event_pb2.Event(wall_time=time.time(), file_version="brain.Event:2"))

    def write(self, summary: summary_pb2.Summary, step: int = 0) -> None:
        self._add(event_pb2.Event(wall_time=time.time(), step=step, summary=summary))

    def _add(self, event: event_pb2.Event) -> None:
        self._writer.write(event.SerializeToString())
        self._writer.flush()

    def close(self) -> None:
        self._writer.close()

    def __enter__(self) -> EventFile:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def metric_names(monitor: str, metrics: Iterable[str]) -> list[api_pb2.MetricInfo]:
    """The columns of the HParams table: each logged metric on the validation split, and the best monitored
    value."""
    # The trial lives in the job's validation run (Trial): its metrics are in that run itself (group "").
    infos = [hp.Metric(f"epoch_{name}", display_name=f"val_{name}").as_proto() for name in ["loss", *metrics]]
    infos.append(hp.Metric(f"best_{monitor}", display_name=f"best {monitor}").as_proto())
    name = test_name(monitor)  # the kept weights on the test split: beside the choice, not part of it
    infos.append(hp.Metric(f"test_{name}", display_name=f"test {name} (not used to choose)").as_proto())
    return infos


def domain(values: list[Value]) -> hp.Domain | None:
    """Discrete values when all are of one kind (numbers count as one kind); None lets TensorBoard infer."""
    if not values:
        return None
    if all(isinstance(v, bool) for v in values) or all(isinstance(v, str) for v in values):
        return hp.Discrete(sorted(set(values), key=str))
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
        return hp.Discrete(sorted({float(v) for v in values}))
    return None


def write_experiment(sweep_dir: Path, swept: dict[str, list[Value]], monitor: str, metrics: Iterable[str]) -> Path:
    """The sweep's HParams experiment: `swept` maps each swept key to its values ([] if not known yet)."""
    infos = []
    for key in sorted(swept):
        info = api_pb2.HParamInfo(name=key)
        values = domain(list(swept[key]))
        if values is not None:
            values.update_hparam_info(info)
        infos.append(info)
    experiment = api_pb2.Experiment(
        hparam_infos=infos, metric_infos=metric_names(monitor, metrics), time_created_secs=time.time()
    )
    with EventFile(sweep_dir) as events:
        events.write(_summary(metadata.EXPERIMENT_TAG, plugin_data_pb2.HParamsPluginData(experiment=experiment)))
    return events.path


class Trial:
    """One job's HParams session: opened when the job starts, closed with its status."""

    # tfhydra.record.Status.hparams in HParams' terms (a pruned trial ended early by choice: unknown).
    STATUS = {"success": api_pb2.STATUS_SUCCESS, "failure": api_pb2.STATUS_FAILURE, "unknown": api_pb2.STATUS_UNKNOWN}

    def __init__(self, log_dir: Path, trial_id: str, values: dict[str, Value]) -> None:
        self.events = EventFile(log_dir)
        self.events.write(hp.hparams_pb({k: plain(v) for k, v in values.items()}, trial_id=trial_id))

    def end(
        self,
        status: str,
        monitor: str,
        best: float | None,
        best_epoch: int | None,
        test: float | None = None,
        history: list | None = None,
        mode: str = "max",
    ) -> None:
        """`test`: the monitored metric on the test split (the record's test block), shown beside `best`.
        Each is written as a line TensorBoard can draw, not a single point (drawn as an empty chart):
        `best_<monitor>` is the best so far at each epoch of `history`, ending at `best`; `test_<metric>` is
        flat from the first to the last epoch (measured once, on the exported weights). The HParams table
        reads the last point of each."""
        steps = len(history or ())
        for tag, points in (
            (f"best_{monitor}", best_line(history or [], monitor, best, mode)),
            (f"test_{test_name(monitor)}", [(0, test), (max(steps - 1, 1), test)]),
        ):
            for step, figure in points:
                if figure is not None and math.isfinite(figure):
                    value = summary_pb2.Summary.Value(tag=tag, simple_value=figure)
                    self.events.write(summary_pb2.Summary(value=[value]), step=step)
        end = plugin_data_pb2.SessionEndInfo(status=self.STATUS[Status(status).hparams], end_time_secs=time.time())
        data = plugin_data_pb2.HParamsPluginData(session_end_info=end)
        self.events.write(_summary(metadata.SESSION_END_INFO_TAG, data))
        self.events.close()


def best_line(history: list, monitor: str, best: float | None, mode: str) -> list[tuple[int, float | None]]:
    """(step, best so far) for each epoch of `history` (step = epoch - 1, as Keras' TensorBoard callback counts)
    whose running best by `mode` ends at the record's `best`; otherwise (a phase that chose from later epochs
    only, a history without the monitor, a run of one epoch) `best` flat over the run, so the card is still a
    line."""
    ranking = Monitor(monitor, mode if mode in MODES else "max")
    running: list[tuple[int, float | None]] = []
    current: float | None = None
    for step, logs in enumerate(history):
        figure = logs.get(monitor) if isinstance(logs, dict) else None
        if figure is not None and ranking.better(figure, current):  # a figure, better than the best so far
            current = float(figure)
        running.append((step, current))
    if best is not None and len(running) > 1 and running[-1][1] == best:
        return running
    return [(0, best), (max(len(history) - 1, 1), best)]


def plain(value: Any) -> Value:
    """HParams take bool, number or string: anything else (a list, null) is shown as its text."""
    if isinstance(value, (bool, int, float, str)):
        return value
    return "null" if value is None else str(value)


def _summary(tag: str, data: plugin_data_pb2.HParamsPluginData) -> summary_pb2.Summary:
    value = summary_pb2.Summary.Value(
        tag=tag, metadata=metadata.create_summary_metadata(data), tensor=metadata.NULL_TENSOR
    )
    return summary_pb2.Summary(value=[value])
