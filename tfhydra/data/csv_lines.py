"""A CSV file's lines, read in chunks with stated limits: what every CSV reader of tfhydra opens a file through.

A file has no size limit (the `csv` source streams it: csv_stream.py); what is bounded is what one reading holds at
once: a physical line is at most `MAX_LINE_BYTES`, a header at most `MAX_COLUMNS` columns, a field (Python's `csv`
readers: text_csv, predict, labels CSVs) at most `MAX_FIELD_CHARS`. Beyond any of them is one line naming the file,
the line number and the limit. A special file (a FIFO, /dev/zero) is refused before it is opened. No TensorFlow.
"""

from __future__ import annotations

import csv
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from tfhydra.config.errors import ConfigError
from tfhydra.config.paths import special_refusal

MAX_LINE_BYTES = 8 * 2**20  # one physical line: 8 MiB (a row of 10,000 numbers is ~200 kB)
MAX_COLUMNS = 10_000  # columns of the header row
MAX_FIELD_CHARS = csv.field_size_limit()  # one field, for Python's csv module: its default, 131,072 characters
CHUNK_BYTES = 4 * 2**20  # read at a time


def line_too_long(path: Path, number: int) -> ConfigError:
    return ConfigError(
        f"{path}:{number}",
        None,
        f"lines of at most {MAX_LINE_BYTES // 2**20} MiB (a limit of tfhydra's CSV reader; the file may be any size)",
        f"line {number} is longer than {MAX_LINE_BYTES} bytes",
    )


def unreadable(path: Path, reason: str) -> ConfigError:
    return ConfigError(str(path), None, "a UTF-8 CSV file with a header row", f"cannot read it ({reason})")


def opened(path: Path):
    """The file open for binary reads; a special file is refused before `open` could block on it."""
    refusal = special_refusal(path)
    if refusal:
        raise ConfigError(str(path), None, "a regular CSV file", refusal)
    try:
        return open(path, "rb")
    except OSError as error:
        raise unreadable(path, str(error)) from None


def bounded_lines(path: Path, start: int = 1) -> Iterator[tuple[int, bytes]]:
    """(line number, physical line with its end) from line `start` on, each at most `MAX_LINE_BYTES`: the file is
    read in chunks, so a line without end (or a file of no newline at all) stops at the limit, in one line."""
    number, pending = 0, b""
    with opened(path) as file:
        while chunk := file.read(CHUNK_BYTES):
            begin = 0
            while (end := chunk.find(b"\n", begin)) >= 0:
                line, pending, begin = pending + chunk[begin : end + 1], b"", end + 1
                number += 1
                if len(line) > MAX_LINE_BYTES:
                    raise line_too_long(path, number)
                if number >= start:
                    yield number, line
            pending += chunk[begin:]
            if len(pending) > MAX_LINE_BYTES:
                raise line_too_long(path, number + 1)
    if pending and number + 1 >= start:
        yield number + 1, pending


def count_lines(path: Path) -> int:
    """The physical lines of the file, every one checked against `MAX_LINE_BYTES` (vectorised: about the disk's
    speed), so the TensorFlow reader that follows never meets a line beyond it."""
    lines, since = 0, 0  # `since`: bytes of the current line read so far
    with opened(path) as file:
        while chunk := file.read(CHUNK_BYTES):
            ends = np.flatnonzero(np.frombuffer(chunk, np.uint8) == 10)
            if len(ends):
                lengths = np.diff(ends, prepend=-1)
                lengths[0] += since
                if lengths.max() > MAX_LINE_BYTES:
                    raise line_too_long(path, lines + 1 + int(np.argmax(lengths > MAX_LINE_BYTES)))
                lines, since = lines + len(ends), len(chunk) - 1 - int(ends[-1])
            else:
                since += len(chunk)
            if since > MAX_LINE_BYTES:
                raise line_too_long(path, lines + 1)
    return lines + (since > 0)


def text(path: Path, number: int, line: bytes) -> str:
    try:
        return line.decode("utf-8")
    except UnicodeDecodeError as error:
        raise unreadable(path, f"line {number} is not UTF-8: {error.reason} at byte {error.start}") from None


def records(path: Path, delimiter: str, start: int = 1) -> Iterator[tuple[int, list[str]]]:
    """(line number where it starts, fields) of every CSV record from line `start` on, Python's `csv` module over
    `bounded_lines` (a quoted field may span lines, as before); a field over `MAX_FIELD_CHARS` is named by line."""
    reader = csv.reader((text(path, n, line) for n, line in bounded_lines(path, start)), delimiter=delimiter)
    before = 0  # lines the reader had taken before this record
    while True:
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as error:
            at = start - 1 + max(reader.line_num, 1)
            if "field larger" in str(error):
                raise ConfigError(
                    f"{path}:{at}",
                    None,
                    f"fields of at most {MAX_FIELD_CHARS} characters (a limit of tfhydra's CSV reader)",
                    f"a field on line {at} is longer",
                ) from None
            raise unreadable(path, f"line {at}: {error}") from None
        yield start + before, row
        before = reader.line_num


def read_header(path: Path, delimiter: str) -> list[str]:
    """The header row, checked: at most `MAX_COLUMNS` distinct names."""
    first = next(records(path, delimiter), None)
    if first is None:
        raise ConfigError(str(path), None, "a header row and at least one data row", "the file is empty")
    header = first[1]
    if len(header) > MAX_COLUMNS:
        raise ConfigError(
            f"{path}:1",
            None,
            f"at most {MAX_COLUMNS} columns (a limit of tfhydra's CSV reader)",
            f"the header has {len(header)} columns",
        )
    check_header(header, path)
    return header


def check_header(header: list[str], path: Path) -> None:
    """Column names must be distinct: columns are looked up by name, so a second `a` would silently replace
    the first (as a feature, the label or the text). Names are compared without surrounding spaces, since
    `a, a` is as ambiguous to the reader as `a,a`."""
    first: dict[str, int] = {}
    for number, name in enumerate(header, start=1):
        seen = first.setdefault(name.strip(), number)
        if seen != number:
            shown = repr(name) if name == header[seen - 1] else f"{header[seen - 1]!r} and {name!r}"
            raise ConfigError(
                f"{path}:1",
                None,
                "a header row of distinct column names (rename one of them)",
                f"column {shown} appears twice in the header (columns {seen} and {number})",
            )


def numbers(values: list[str], name: str, path: Path, accepted: str | None = None, first_row: int = 2) -> np.ndarray:
    """A feature column as float64; a cell that is not a finite number is named by its line (`accepted`: what to
    say instead of training's advice, e.g. for tfhydra-predict's inputs; `first_row`: the line of `values[0]`)."""
    result = np.empty(len(values), dtype=np.float64)
    for row, value in enumerate(values):
        try:
            result[row] = float(value)
        except ValueError:
            result[row] = np.nan
        if not np.isfinite(result[row]):
            raise ConfigError(
                f"{path}:{row + first_row}",
                None,
                accepted
                or f"a finite number in every row of column {name} (or leave the column out with data.features)",
                f"column {name} holds {value!r}",
            )
    return result
