"""The `csv` source streams (issue 57; tfhydra/data/csv_stream.py, csv_lines.py, csv_index.py): its statistics are
numpy's over the training rows, its splits are today's and cover the file, and a line, a header or a label column
beyond its stated limit is one line naming the file, the line and the limit. Built directly, no `train.py`; how
flat its memory stays is benchmarks/csv_stream.py's to measure."""

import os

import numpy as np
import pytest
from omegaconf import OmegaConf

from tfhydra.config.errors import ConfigError
from tfhydra.data import csv_lines, csv_stream
from tfhydra.data.splits import hold_out
from tfhydra.data.tables import build_csv, read_table


@pytest.fixture(autouse=True)
def own_index(tmp_path, monkeypatch):
    monkeypatch.setenv("TFHYDRA_CACHE_DIR", str(tmp_path / "cache"))


def csv_cfg(path, **keys):
    base = {"path": str(path), "label": "label", "features": None, "num_classes": None, "class_names": None}
    return OmegaConf.create(
        {**base, "delimiter": ",", "val_fraction": 0.2, "test_fraction": 0.2, "split_seed": 3, **keys}
    )


def write(path, x, labels, ids=False):
    header = [*(["id"] if ids else []), *(f"f{i}" for i in range(x.shape[1])), "label"]
    lines = [",".join(header)]
    for row, (values, label) in enumerate(zip(x, labels, strict=True)):
        lines.append(",".join([*([str(row)] if ids else []), *(repr(float(v)) for v in values), str(label)]))
    path.write_text("\n".join(lines) + "\n")
    return path


def one_line(error) -> str:
    text = str(error.value)
    assert "\n" not in text and "Traceback" not in text
    return text


def test_the_streaming_passes_give_numpys_training_statistics_and_todays_splits(tmp_path):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(5000, 3)) * [1.0, 30.0, 0.01] + [0.0, -7.0, 2.0]  # more rows than one batch (4,096)
    x[:, 2] = np.where(rng.random(5000) < 0.5, 2.0, x[:, 2])
    labels = rng.choice(["cat", "dog", "eel"], size=5000, p=[0.5, 0.3, 0.2])
    path = write(tmp_path / "t.csv", x, labels, ids=True)
    cfg = csv_cfg(path, features=["f0", "f1", "f2"])
    source = build_csv(cfg, seed=0)
    names = sorted(set(labels))
    held = hold_out(np.searchsorted(names, labels), cfg, seed=0)  # what reading the table whole held out
    assert source.spec.class_names == ("cat", "dog", "eel")
    assert (source.spec.train_size, source.spec.val_size, source.spec.test_size) == (3000, 1000, 1000)
    rows = {}
    for split in ("train", "validation", "test"):
        lines = [line.decode() for batch, _ in getattr(source, split).batch(5000) for line in batch.numpy()]
        rows[split] = np.array([int(line.split(",")[0]) for line in lines])
    assert np.array_equal(rows["train"], held.train)  # the very rows, in file order
    assert np.array_equal(rows["validation"], held.validation) and np.array_equal(rows["test"], held.test)
    everything = np.concatenate(list(rows.values()))
    assert len(np.unique(everything)) == len(everything) == 5000  # disjoint, and they cover the file
    table = csv_stream.Table(path, ["id", "f0", "f1", "f2", "label"], ",", [4], [1, 2, 3])
    scanned = csv_stream.scan(table)
    assert scanned.rows == 5000 and list(scanned.labels[:3, 0]) == list(labels[:3])
    mean, std = csv_stream.train_statistics(table, scanned, held.train)
    np.testing.assert_allclose(mean, x[held.train].mean(axis=0), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(std, x[held.train].std(axis=0), rtol=1e-12)
    examples = np.concatenate([x for x, _ in source.decode_all(source.train, 3000).batch(1000)])
    expected = ((x[held.train] - x[held.train].mean(0)) / x[held.train].std(0)).astype(np.float32)
    np.testing.assert_allclose(examples, expected, atol=1e-6)  # what the in-memory table trained on
    raw_validation = source.serving.raw_validation
    np.testing.assert_array_equal(raw_validation[0], x[held.validation].astype(np.float32))
    again = build_csv(cfg, seed=0)  # from the CSV index: no pass, the same statistics
    np.testing.assert_array_equal(again.serving.layers[0].mean.numpy(), source.serving.layers[0].mean.numpy())
    assert len(os.listdir(tmp_path / "cache" / "index")) == 2  # one JSON, one .npy of label cells


def test_a_line_beyond_the_limit_is_one_line_naming_the_file_the_line_and_the_limit(tmp_path, monkeypatch):
    monkeypatch.setattr(csv_lines, "MAX_LINE_BYTES", 64)
    path = tmp_path / "long.csv"
    path.write_text("a,label\n1,0\n" + "9" * 100 + ",1\n2,0\n")
    with pytest.raises(ConfigError) as error:
        build_csv(csv_cfg(path), seed=0)
    assert one_line(error).startswith(f"{path}:3: line 3 is longer than 64 bytes; accepted: lines of at most")
    with pytest.raises(ConfigError) as error:  # the readers that hold a table whole (text_csv, predict) too
        read_table(str(path), ",")
    assert one_line(error).startswith(f"{path}:3: line 3 is longer than 64 bytes")
    endless = tmp_path / "endless.csv"  # no line end at all: a file like /dev/zero stops at the limit
    endless.write_bytes(b"\0" * 1000)
    for read in (csv_lines.count_lines, lambda p: csv_lines.read_header(p, ",")):
        with pytest.raises(ConfigError, match=r"endless.csv:1: line 1 is longer than 64 bytes"):
            read(endless)


def test_too_many_columns_and_too_many_classes_are_one_line(tmp_path, monkeypatch):
    monkeypatch.setattr(csv_lines, "MAX_COLUMNS", 3)
    wide = write(tmp_path / "wide.csv", np.zeros((4, 4)), [0, 1, 0, 1])
    with pytest.raises(ConfigError) as error:
        build_csv(csv_cfg(wide), seed=0)
    assert f"{wide}:1: the header has 5 columns; accepted: at most 3 columns" in one_line(error)
    monkeypatch.setattr(csv_stream, "MAX_CLASSES", 5)
    many = write(tmp_path / "many.csv", np.ones((40, 1)), [f"c{i % 8}" for i in range(40)])
    with pytest.raises(ConfigError) as error:
        build_csv(csv_cfg(many), seed=0)
    assert "the label column holds 8 distinct values; accepted: at most 5 classes" in one_line(error)


def test_a_bad_cell_past_the_first_batch_is_named_by_its_line_and_column(tmp_path):
    x = np.arange(10000, dtype=float).reshape(5000, 2)
    path = write(tmp_path / "bad.csv", x, [i % 2 for i in range(5000)])
    lines = path.read_text().splitlines()
    lines[4500] = "abc," + lines[4500].split(",", 1)[1]  # line 4501, in the second batch of 4,096
    lines[4800] = "1,2"  # a short row, after it
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(ConfigError) as error:
        build_csv(csv_cfg(path), seed=0)
    assert one_line(error).startswith(f"{path}:4501: column f0 holds 'abc'; accepted: a finite number")
    lines[4500] = "nan," + lines[4500].split(",", 1)[1]  # TensorFlow reads nan: the finiteness check finds it
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(ConfigError, match=r"bad.csv:4501: column f0 holds 'nan'"):
        build_csv(csv_cfg(path), seed=0)
    lines[4500] = "1,2,0"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(ConfigError, match=r"bad.csv:4801: the row has 2 fields; accepted: 3 fields per row"):
        build_csv(csv_cfg(path), seed=0)
    lines[4800] = '1,2,"0\nstill the label"'  # a record of two lines does not stream
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(ConfigError) as error:
        build_csv(csv_cfg(path), seed=0)
    assert "accepted: one CSV record per line (a quoted field holding a line break does not stream)" in one_line(error)


def test_special_files_are_refused_before_open_can_block(tmp_path):
    fifo = tmp_path / "table.csv"
    os.mkfifo(fifo)  # no writer: an open would block forever
    for path in (fifo, "/dev/zero"):
        with pytest.raises(ConfigError) as error:
            build_csv(csv_cfg(path), seed=0)
        assert "which tfhydra never reads (it could block or never end)" in one_line(error)


def test_a_csv_index_that_declares_more_than_its_file_holds_is_ignored_and_rebuilt(tmp_path, caplog):
    path = write(tmp_path / "t.csv", np.arange(40.0).reshape(20, 2), [i % 2 for i in range(20)])
    build_csv(csv_cfg(path), seed=0)
    (cells,) = (tmp_path / "cache" / "index").glob("*.npy")
    header = {"descr": "<U1", "fortran_order": False, "shape": (10**12, 1)}  # 4 TB declared, 100 bytes stored
    with open(cells, "wb") as file:
        np.lib.format.write_array_header_1_0(file, header)
    source = build_csv(csv_cfg(path), seed=0)
    assert "ignoring the CSV index" in caplog.text and "(1000000000000, 1)" in caplog.text
    assert source.spec.train_size == 12 and np.load(cells).shape == (20, 1)  # scanned again, and kept again
