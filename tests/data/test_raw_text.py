"""data=text_csv gives raw strings to a model that takes them (tfhydra/data/inputs.py): no vocabulary fitted, the
same rows and labels as the token-id pipeline, the export's strings the same as training's."""

from __future__ import annotations

import numpy as np
from data_files import write_text_csv

from tfhydra.config.contracts import PREPARED, RAW_TEXT
from tfhydra.data.pipeline import build_datasets
from tfhydra.task.build import build_task


def test_text_csv_gives_raw_strings_with_the_same_splits_and_labels(compose_cfg, tmp_path):
    path = write_text_csv(tmp_path / "reviews.csv", n=40, tag_rows=True)
    cfg = compose_cfg(["data=text_csv", f"data.path={path}", "task=binary", "data.shuffle_buffer=0"])
    raw = build_datasets(cfg.data, 0, None, build_task(cfg.task), RAW_TEXT)
    ids = build_datasets(cfg.data, 0, None, build_task(cfg.task), PREPARED)

    assert raw.spec.dtype == "string" and raw.spec.input_shape == () and raw.spec.vocab_size is None
    assert ids.spec.dtype == "int64" and ids.spec.vocab_size > 2
    assert (raw.spec.train_size, raw.spec.val_size, raw.spec.test_size) == (
        ids.spec.train_size,
        ids.spec.val_size,
        ids.spec.test_size,
    )
    texts, labels = (np.concatenate(part) for part in zip(*raw.validation.as_numpy_iterator(), strict=True))
    _, id_labels = (np.concatenate(part) for part in zip(*ids.validation.as_numpy_iterator(), strict=True))
    np.testing.assert_array_equal(labels, id_labels)  # the same rows, in the same order
    every_row = {line.split(",")[0] for line in path.read_text().splitlines()[1:]}
    assert {t.decode() for t in texts} <= every_row and all(b" row" in t for t in texts)  # the texts as written
    served, served_labels = raw.serving.raw_validation
    np.testing.assert_array_equal(served.astype(str), [t.decode() for t in texts])
    np.testing.assert_array_equal(served_labels.ravel(), labels.ravel())
