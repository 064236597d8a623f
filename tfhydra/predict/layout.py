"""What a finished run's served model takes, read from the run without running anything but its export.

`read_run` checks the directory through the trust boundary (tfhydra/trust `completed_run`, with evaluate's
description of a usable run) and takes the class names from the run record. `Run.layout` loads the SavedModel
(evaluate's `load_served_model`) and reads its `serving_default` input: that, with a few plain values of the
run's `data` section (the CSV's columns, the text column, how training decoded image files), says which inputs
the run can answer on and how each becomes what the signature takes. A run that exported only TFLite is answered
by its model.tflite through LiteRT (tfhydra/export/served.py): the file holds no preprocessing, so it takes image
files (decoded to [0, 1] floats, as the pipeline feeds them) and arrays of the model's inputs, nothing stored
otherwise (raw CSV columns, texts).
"""

from __future__ import annotations

import csv
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from tfhydra.config.errors import ConfigError

IMAGE_SOURCES_CHANNELS = {"grayscale": 1, "rgb": 3, "rgba": 4}  # image_folder's data.color_mode (tfhydra/data/files.py)


@dataclass
class Layout:
    """One example as `serving_default` takes it, and how the run's data name their parts."""

    signature: Any  # the ConcreteFunction
    input_key: str
    output_key: str
    shape: tuple[int, ...]  # one example, no batch axis
    dtype: Any  # tf.DType
    kind: str  # text | features | images | arrays (anything else: only arrays in the stored layout)
    channels: int = 0  # image files: decode to this many channels as training did (0: the file's must fit)
    features: list[str] = field(default_factory=list)  # CSV runs: the feature columns, in the model's order
    text_column: str = "text"
    label_column: str | None = None  # a CSV column holding the label: carried through and scored
    delimiter: str = ","
    npz_array: str | None = None  # the array of an .npz the run's own data name for validation (data.x_val)
    served: Any = None  # the loaded SavedModel: its variables live as long as the signature is used
    predict: Callable | None = None  # a batch of `inputs` -> probabilities (NumPy); the signature's call by default
    export: str = "saved_model"  # which file answers: saved_model, or tflite for a run that exported only that
    max_pixels: int | None = None  # image files: the most pixels a header may state (`Run.pixel_limit`)
    max_pixels_from: str = ""  # where that limit comes from, in the words of a refusal's `accepted`

    def probabilities(self, batch):
        if self.predict is not None:
            return self.predict(batch.numpy())
        return self.signature(**{self.input_key: batch})[self.output_key].numpy()

    @property
    def image_shape(self) -> tuple[int, int, int]:
        """(height, width, channels) of an image example (a grayscale (H, W) layout has one channel)."""
        height, width = self.shape[:2]
        return height, width, self.shape[2] if len(self.shape) == 3 else 1

    def takes(self) -> str:
        """What the model takes, in the words of an error's `accepted`."""
        example = f"{self.dtype.name} examples of shape {self.shape}"
        return {
            "text": "a text file (one text per line), a CSV with a "
            f"{self.text_column!r} column, or an .npy/.npz of strings",
            "features": f"a CSV with the feature columns {self.features}, or an .npy/.npz of {example}",
            "images": f"image files (PNG, JPEG, GIF, BMP), folders of them, or an .npy/.npz of {example}",
        }.get(self.kind, f"an .npy/.npz of {example}")


@dataclass
class Run:
    run_dir: Path
    data: dict  # the run's `data` section as plain, inert values
    class_names: tuple[str, ...]  # the outputs' names: classes, labels or targets (docs/tasks.md)
    batch_size: int
    task: Any = None  # the run's task as its record names it (tfhydra/task/ `task_of_record`): what outputs mean
    outputs: int = 0  # the model's output units (the record's data.head; before tasks, one per class)

    def layout(self) -> Layout:
        """Load the SavedModel and read what its `serving_default` takes (a TFLite-only run: `tflite_layout`)."""
        from tfhydra.evaluate import RUN_ACCEPTED, load_served_model
        from tfhydra.export.served import TFLITE, served_export

        if served_export(self.run_dir)[0] == TFLITE:
            return self.tflite_layout()
        served, _ = load_served_model(self.run_dir)
        if "serving_default" not in served.signatures:
            raise ConfigError(str(self.run_dir), None, RUN_ACCEPTED, "its SavedModel has no serving_default signature")
        signature = served.signatures["serving_default"]
        ((input_key, spec),) = signature.structured_input_signature[1].items()
        output_key, out = next(iter(signature.structured_outputs.items()))
        if out.shape[-1] != self.outputs:
            raise ConfigError(
                str(self.run_dir),
                None,
                RUN_ACCEPTED,
                f"its model predicts {out.shape[-1]} outputs but its metrics.json names {self.outputs}",
            )
        shape, dtype, data = tuple(int(d) for d in spec.shape[1:]), spec.dtype, self.data
        layout = Layout(
            signature,
            input_key,
            output_key,
            shape,
            dtype,
            kind_of(shape, dtype, data),
            delimiter=str(data.get("delimiter") or ","),
            served=served,
        )
        return self.described(layout)

    def tflite_layout(self) -> Layout:
        """The run's model.tflite, run by LiteRT: it takes the model's inputs, so image files (the pipeline's
        [0, 1] floats) or arrays of them; CSV columns and texts only as the pipeline's arrays."""
        import tensorflow as tf

        from tfhydra.evaluate import RUN_ACCEPTED
        from tfhydra.export.served import TFLITE, load_tflite

        tflite = load_tflite(self.run_dir, RUN_ACCEPTED)
        if tflite.classes != self.outputs:
            raise ConfigError(
                str(self.run_dir),
                None,
                RUN_ACCEPTED,
                f"its model predicts {tflite.classes} outputs but its metrics.json names {self.outputs}",
            )
        kind = kind_of(tflite.input_shape, tflite.input_dtype, self.data)
        kind = kind if kind == "images" and tflite.input_dtype == tf.float32 else "arrays"
        layout = Layout(
            None,
            "inputs",
            "probabilities",
            tflite.input_shape,
            tflite.input_dtype,
            kind,
            predict=tflite.predict,
            export=TFLITE,
        )
        return self.described(layout)

    def described(self, layout: Layout) -> Layout:
        """The run's data section's say on the layout: CSV columns, the label column, how images were decoded."""
        data = self.data
        if data.get("name") in ("csv", "text_csv"):
            layout.label_column = str(data.get("label") or "label")
            layout.text_column = str(data.get("text") or "text")
        if layout.kind == "features":
            layout.features = feature_columns(data, layout.shape[0])
        if layout.kind == "images":
            layout.max_pixels, layout.max_pixels_from = self.pixel_limit()
        if data.get("name") == "image_folder":
            layout.channels = IMAGE_SOURCES_CHANNELS.get(str(data.get("color_mode")), 0)
        elif data.get("name") == "tfrecord" and data.get("encoding") in ("png", "jpeg"):
            layout.channels = int(data.get("channels") or 0)
        if data.get("name") == "npz" and data.get("x_val"):
            layout.npz_array = str(data.get("x_val"))
        return layout

    def pixel_limit(self) -> tuple[int, str]:
        """(the most pixels an image file's header may state before predict decodes it, where that comes from):
        the run's `data.max_pixels` (an image_folder run records the limit it trained under), else that key's
        value in tfhydra's conf/data/image_folder.yaml, the one default of the rule (`--max-pixels` overrides
        both). A small file can decode to gigabytes: the limit is what keeps a hostile one from doing so."""
        from tfhydra.config.schema import is_int

        recorded = self.data.get("max_pixels")
        if is_int(recorded) and recorded >= 1:
            return int(recorded), "the run's data.max_pixels; --max-pixels N sets another"
        from tfhydra.config.project import CONFIG_DIR
        from tfhydra.trust.readers import plain_file  # the one YAML reader, here of tfhydra's own conf/

        default = (plain_file(CONFIG_DIR / "data" / "image_folder.yaml", CONFIG_DIR) or {})["max_pixels"]
        return int(default), "data.max_pixels of conf/data/image_folder.yaml; --max-pixels N sets another"


def kind_of(shape: tuple[int, ...], dtype, data: dict) -> str:
    if dtype.name == "string" and shape == ():
        return "text"
    if len(shape) == 1 and data.get("name") == "csv":
        return "features"
    if len(shape) in (2, 3) and (dtype.is_floating or dtype.name in ("uint8", "uint16")):
        return "images"
    return "arrays"


def feature_columns(data: dict, count: int) -> list[str]:
    """The CSV run's feature columns: `data.features`, else every column of the training CSV's header but the
    label (what training took; only the header is read)."""
    if data.get("features"):
        features = [str(f) for f in data["features"]]
    else:
        path, label = Path(str(data.get("path"))).expanduser(), str(data.get("label") or "label")
        try:
            with open(path, newline="", encoding="utf-8") as file:
                header = next(csv.reader(file, delimiter=str(data.get("delimiter") or ",")), [])
        except (OSError, UnicodeDecodeError, csv.Error) as error:
            raise ConfigError(
                str(path),
                None,
                "the run's training CSV, whose header names the feature columns "
                "(the run was trained with data.features: null)",
                f"cannot read it ({error})",
            ) from None
        features = [name for name in header if name != label]
    if len(features) != count:
        raise ConfigError(
            "data.features",
            features,
            f"{count} columns (what the run's model takes)",
            f"the run's config names {len(features)} feature columns",
        )
    return features


def read_run(run_dir: Path, trusted: bool = False, project: Path | None = None) -> Run:
    """The run in `run_dir`, checked through the trust boundary as tfhydra-evaluate checks it. The config is taken
    inert (`composed=False`): predict reads plain values of `data` and composes nothing, so neither the run's
    configs nor its training data need to exist where it predicts."""
    import sys

    from omegaconf import OmegaConf

    from tfhydra.evaluate import RUN_ACCEPTED
    from tfhydra.export.served import served_export
    from tfhydra.record.run_record import load_record
    from tfhydra.trust.readers import completed_run, trusted_warning

    if trusted:
        print(trusted_warning("--trust-run", run_dir), file=sys.stderr, flush=True)
    config = completed_run(
        run_dir,
        str(run_dir),
        None,
        RUN_ACCEPTED,
        [served_export(run_dir)[1]],
        primary=project,
        trusted=trusted,
        composed=False,
    )
    data = cast(dict, OmegaConf.to_container(config.data, resolve=False))  # the data node: a DictConfig
    from tfhydra.task.build import task_of_record

    record = load_record(run_dir)
    spec = record.data or {}
    names = spec.get("class_names")
    if not isinstance(names, list) or not names:
        raise ConfigError(str(run_dir), None, RUN_ACCEPTED, "its metrics.json names no class (data.class_names)")
    batch = data.get("batch_size")
    head = spec.get("head")
    units = head.get("units") if isinstance(head, dict) else None
    units = units if isinstance(units, int) and units > 0 else len(names)  # a record before tasks: one per class
    return Run(
        Path(run_dir),
        data,
        tuple(str(n) for n in names),
        batch if isinstance(batch, int) and batch > 0 else 32,
        task_of_record(record.task if isinstance(record.task, dict) else None),
        units,
    )
