"""The record room: what a run leaves on disk about itself, on the ground floor (every room may read it).

- run_record.py: the run record, `metrics.json`, typed and versioned (`RunRecord`, `Status`, `read_record`,
  `load_record`): its only writer and reader;
- rundir.py: the run directory map (every path a run writes; a sweep job's name: tfhydra/config/jobnames.py);
- lifecycle.py: a run's status, how it continues, and the one writer of a stopped run's record;
- resume.py: how a run starts (new, resumed from its saved state, or kept), the one answer the record keeps;
- report.py: the history and JSON files written atomically; monitor.py: "is epoch B better than A" (name, mode);
- headline.py: what a reader sees first (the task's headline figures, a tie in words, the summary block).

This face only hands the run record's names on, so a tool reading metrics.json keeps `from tfhydra.record import
load_record, Status`; tfhydra's own modules import them from run_record.py. Nothing here imports TensorFlow.
"""

from tfhydra.record.run_record import (
    FIELDS,
    PACKAGES,
    SCHEMA_VERSION,
    STATUSES,
    TEST_SPLIT_VERSION,
    RecordError,
    RunRecord,
    Status,
    git_state,
    load_record,
    provenance,
    read_record,
    rounded,
    run_status,
    test_name,
)

__all__ = [
    "FIELDS",
    "PACKAGES",
    "SCHEMA_VERSION",
    "STATUSES",
    "TEST_SPLIT_VERSION",
    "RecordError",
    "RunRecord",
    "Status",
    "git_state",
    "load_record",
    "provenance",
    "read_record",
    "rounded",
    "run_status",
    "test_name",
]
