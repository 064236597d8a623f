"""The command line's INPUTs as one stream of examples in the layout `serving_default` takes.

Every input becomes a tf.data dataset of elements `{name, inputs, extra}`: the name the output gives it, one
example as the signature takes it, and the other CSV columns carried through (strings). Image files are first
read at their two ends, as image_folder reads its files (image_checks.py: empty, foreign, truncated, more pixels
than the limit by the header: refused before anything decodes them), then decoded and fitted in a parallel map
(a file the model still cannot take fails its batch, and is then named); arrays are checked whole before
anything runs and read from a memory map in chunks, so a large `.npy` stays on disk until its batch is due.

`--on-error skip` (the default): an INPUT that cannot be read or does not fit the model is left out and named
(`Inputs.skipped`; an image file's decode failure drops that example only, `ignore_errors`, and `unread_images`
says why afterwards); `--on-error fail` stops at the first, as one `Error:` line (a refused image file: before
anything is decoded).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import tensorflow as tf

from tfhydra.config.errors import ConfigError
from tfhydra.config.paths import special_kind
from tfhydra.data.files import IMAGE_EXTENSIONS
from tfhydra.predict.image_checks import DECODABLE, refused_images
from tfhydra.predict.layout import Layout
from tfhydra.predict.stream import Inputs, no_extra
from tfhydra.predict.tables import read_table_input, read_text_lines

AUTOTUNE = tf.data.AUTOTUNE
ARRAY_SUFFIXES = (".npy", ".npz")
CHUNK = 1024  # array rows read from disk at a time


def read_inputs(texts: list[str], layout: Layout, on_error: str = "fail") -> Inputs:
    """All INPUTs, in the order given (a folder's images sorted by path), as one dataset; with `on_error="skip"`
    an INPUT that cannot be used is left out and named in `skipped` instead of stopping the command."""
    parts: list = []  # datasets, one per run of images or per file of tensors
    images: list = []
    skipped: list[ConfigError] = []
    skip = on_error == "skip"
    for text in texts:
        try:
            images = read_input(text, layout, parts, images, skip)
        except ConfigError as error:
            if not skip:
                raise
            skipped.append(error)
    if images:
        parts.append(image_part(images, layout, skip))
    found = joined(parts, layout)
    found.skipped = skipped + found.skipped  # the INPUTs that could not be used, then the image files refused
    return found


def read_input(text: str, layout: Layout, parts: list[Inputs], images: list[str], skip: bool) -> list[str]:
    """One INPUT into `parts` (consecutive image files are gathered into one part): the image files still to
    gather."""
    path = Path(text).expanduser()
    suffix = path.suffix.lower()
    if not path.exists() and not (".npz:" in text and Path(text.rsplit(":", 1)[0]).expanduser().is_file()):
        raise ConfigError(text, None, layout.takes(), "no such file or directory")
    kind = special_kind(path)  # before any open: a FIFO would block it, a device never end
    if kind:
        raise ConfigError(text, None, layout.takes(), f"{kind}, which tfhydra never reads")
    if path.is_dir() or suffix in IMAGE_EXTENSIONS:
        return images + image_files(text, path, layout)
    if suffix in ARRAY_SUFFIXES or ".npz:" in text:
        part = array_part(text, layout)
    elif suffix == ".csv" and layout.kind in ("features", "text"):
        part = read_table_input(path, layout)
    elif suffix == ".txt" and layout.kind == "text":
        part = read_text_lines(path, layout)
    else:
        raise ConfigError(text, None, layout.takes(), "not an input this run's model can take")
    if images:  # consecutive image files are one dataset (one parallel map)
        parts.append(image_part(images, layout, skip))
    parts.append(part)
    return []


def joined(parts: list[Inputs], layout: Layout) -> Inputs:
    """One dataset; the carried columns are those of every input in order of appearance (a file without one of
    them carries an empty cell: a text file beside a CSV of texts)."""
    columns = list(dict.fromkeys(c for p in parts for c in p.extra_columns))
    dataset = None
    for part in parts:
        part_data = part.dataset
        if part.extra_columns != columns:
            where = tf.constant(
                [part.extra_columns.index(c) if c in part.extra_columns else len(part.extra_columns) for c in columns],
                tf.int32,
            )
            part_data = part_data.map(
                lambda e, where=where: {**e, "extra": tf.gather(tf.concat([e["extra"], [""]], 0), where)}
            )
        dataset = part_data if dataset is None else dataset.concatenate(part_data)
    label = next((p.label_column for p in parts if p.label_column), None)
    return Inputs(
        dataset,
        columns,
        label,
        [f for p in parts for f in p.image_files],
        layout.takes(),
        [error for p in parts for error in p.skipped],
    )


# --- image files ------------------------------------------------------------------------------------------


def image_files(text: str, path: Path, layout: Layout) -> list[str]:
    if layout.kind != "images":
        raise ConfigError(text, None, layout.takes(), "images, but the run's model does not take images")
    if not path.is_dir():
        return [text]
    found = sorted(str(p) for p in path.rglob("*") if p.suffix.lower() in IMAGE_EXTENSIONS and p.is_file())
    if not found:
        raise ConfigError(
            text, None, layout.takes(), f"no image file in it (searched recursively for {', '.join(IMAGE_EXTENSIONS)})"
        )
    return found


def image_part(files: list[str], layout: Layout, skip: bool = False) -> Inputs:
    """Image files decoded in a parallel map, once the files image_folder would refuse are out (`refused_images`:
    never decoded; the first is the error without `skip`, each is in `skipped` with it); with `skip`, a file that
    fails its decoding is dropped (`unread_images` names it)."""
    refused = refused_images(files, layout, count=not skip)
    if refused and not skip:
        raise next(iter(refused.values()))
    usable = [f for f in files if f not in refused]
    decode = image_decoder(layout)
    dataset = tf.data.Dataset.from_tensor_slices(tf.constant(usable, tf.string))
    dataset = dataset.map(decode, num_parallel_calls=AUTOTUNE, deterministic=True)
    return Inputs(dataset.ignore_errors() if skip else dataset, image_files=usable, skipped=list(refused.values()))


def image_decoder(layout: Layout):
    """image file -> element: decoded as training decoded image files (`data.color_mode` of an image_folder run)
    or with the file's own channels, which must be the model's; then fitted to the model's size and dtype. A file
    that fails here (unreadable, other channels) fails its batch, and `bad_images` then names it: the happy path
    spends nothing on checks (about 2x the files per second of a per-example check on 2 cores)."""
    channels, forced = layout.image_shape[2], layout.channels

    def decode(path):
        image = tf.io.decode_image(tf.io.read_file(path), channels=forced, expand_animations=False)
        return {
            "name": path,
            "inputs": fitted(tf.ensure_shape(image, [None, None, channels]), layout),
            "extra": tf.constant([], tf.string),
        }

    return decode


def bad_images(files: list[str], layout: Layout) -> ConfigError | None:
    """The error naming the first of `files` the model cannot take (undecodable, or other channels), if any: a
    second, parallel pass, made only once a batch has failed."""
    problems = image_problems(files, layout)
    return next(iter(problems.values()), None)


def unread_images(found: Inputs, predicted: set[str], layout: Layout) -> list[ConfigError]:
    """The image files of `found` that were given but not predicted (dropped by `--on-error skip`), each named
    with why: a second pass over those files only."""
    missing = list(dict.fromkeys(f for f in found.image_files if f not in predicted))
    problems = image_problems(missing, layout, count=False) if missing else {}
    return [problems.get(f) or ConfigError(f, None, layout.takes(), "TensorFlow cannot read it") for f in missing]


def image_problems(files: list[str], layout: Layout, count: bool = True) -> dict[str, ConfigError]:
    """{file: the error naming it} for each of `files` the model cannot take, in order (`count`: an unreadable
    file's line says how many of `files` are unreadable)."""

    def channels_of(path):
        image = tf.io.decode_image(tf.io.read_file(path), channels=layout.channels, expand_animations=False)
        return path, tf.shape(image)[-1]

    decoded = tf.data.Dataset.from_tensor_slices(files).map(channels_of, num_parallel_calls=AUTOTUNE)
    found = {path.decode(): int(c) for path, c in decoded.ignore_errors().as_numpy_iterator()} if files else {}
    unreadable = [f for f in files if f not in found]
    wanted, problems = layout.image_shape[2], {}
    for path in files:
        if path not in found:
            problems[path] = ConfigError(
                path,
                None,
                DECODABLE,
                "cannot decode it as an image"
                + (f" ({len(unreadable)} of {len(files)} files are unreadable)" if count else ""),
            )
        elif found[path] != wanted:
            problems[path] = ConfigError(
                path, None, layout.takes(), f"it has {found[path]} channel(s); the run's model takes {wanted}"
            )
    return problems


def fitted(image: tf.Tensor, layout: Layout) -> tf.Tensor:
    """An (h, w, c) image in its file's integer dtype -> the signature's example: the float pipeline's ops for a
    float model ([0, 1], bilinear resize: tfhydra/data/files.py `float_image`; a resize to the same size is the
    identity), the stored dtype for a model that takes stored pixels (resized in [0, 1] floats only when the size
    differs, then back to that dtype)."""
    height, width, channels = layout.image_shape
    if layout.dtype.is_floating:
        unit = tf.image.resize(tf.image.convert_image_dtype(image, tf.float32), (height, width))
        result = tf.cast(unit, layout.dtype)
    else:

        def resized():
            unit = tf.image.resize(tf.image.convert_image_dtype(image, tf.float32), (height, width))
            return tf.image.convert_image_dtype(unit, layout.dtype, saturate=True)

        same = tf.reduce_all(tf.equal(tf.shape(image)[:2], [height, width]))
        result = tf.cond(same, lambda: tf.image.convert_image_dtype(image, layout.dtype), resized)
    result = tf.ensure_shape(result, (height, width, channels))
    return result[..., 0] if len(layout.shape) == 2 else result


# --- arrays -----------------------------------------------------------------------------------------------


def array_part(text: str, layout: Layout) -> Inputs:
    """An .npy (memory-mapped) or one array of an .npz (`FILE.npz:NAME`, else its only array, else the one the
    run's own data use for validation) whose examples are in the layout the model takes."""
    array, where = load_array(text, layout)
    fit = check_array(array, where, layout)
    if array.dtype.kind in "US":
        examples = tf.data.Dataset.from_tensor_slices(np.asarray(array).astype(str))
    else:
        native = array.dtype.newbyteorder("=")

        def rows(start):
            return np.asarray(array[int(start) : int(start) + CHUNK], dtype=native)

        examples = (
            tf.data.Dataset.range(0, len(array), CHUNK)
            .map(
                lambda start: tf.ensure_shape(
                    tf.numpy_function(rows, [start], tf.as_dtype(native)), [None, *array.shape[1:]]
                )
            )
            .unbatch()
        )

    def element(index, example):
        name = tf.strings.join([f"{where}[", tf.strings.as_string(index), "]"])
        return {"name": name, "inputs": fit(example), "extra": no_extra()}

    dataset = examples.enumerate().map(element, num_parallel_calls=AUTOTUNE, deterministic=True)
    return Inputs(dataset)


def load_array(text: str, layout: Layout) -> tuple[np.ndarray, str]:
    """(the array, its name in the output)."""
    named = None
    if ".npz:" in text:
        text, named = text.rsplit(":", 1)
    path = Path(text).expanduser()
    accepted = "a NumPy .npy or .npz file (numpy.save / numpy.savez) of numbers (or strings, for a text run)"
    try:
        if path.suffix.lower() == ".npy":
            return np.load(path, mmap_mode="r", allow_pickle=False), text
        with np.load(path, allow_pickle=False) as file:
            found = list(file.files)
            name = named or (found[0] if len(found) == 1 else layout.npz_array if layout.npz_array in found else None)
            if name not in found:
                raise ConfigError(
                    f"{text}:{named}" if named else text,
                    None,
                    f"FILE.npz:ARRAY naming one of its arrays: {', '.join(found)}",
                    "no such array" if named else "it holds several arrays",
                )
            return file[name], f"{text}:{name}"
    except (OSError, ValueError, EOFError) as error:
        raise ConfigError(text, None, accepted, f"cannot read it ({' '.join(str(error).split())})") from None


def check_array(array: np.ndarray, where: str, layout: Layout):
    """The array's examples fit the model (checked once, before anything runs); the per-example fit to apply:
    a cast to the model's dtype, a channel axis added or dropped, another image size resized."""
    if array.ndim == 0 or len(array) == 0:
        raise ConfigError(where, None, layout.takes(), "it holds no example")
    check_dtype(array, where, layout)
    shape, target = tuple(array.shape[1:]), layout.shape
    if layout.kind != "images":
        if shape != target:
            raise ConfigError(where, None, layout.takes(), f"its examples have shape {shape}")
        return lambda x: tf.cast(x, layout.dtype) if layout.dtype.name != "string" else x
    height, width, channels = layout.image_shape
    given = shape + (1,) if len(shape) == 2 else shape
    if len(given) != 3 or given[2] != channels:
        raise ConfigError(
            where, None, layout.takes(), f"its examples have shape {shape} (the model takes {channels} channel(s))"
        )

    def fit(x):
        x = tf.reshape(x, given)
        if given[:2] != (height, width):
            unit = tf.image.resize(tf.cast(x, tf.float32), (height, width))
            x = unit if layout.dtype.is_floating else tf.round(unit)
        x = tf.cast(x, layout.dtype)
        return tf.reshape(x, layout.shape)

    return fit


def check_dtype(array: np.ndarray, where: str, layout: Layout) -> None:
    """Stored values only: floats for a float model, integers that fit for an integer one, strings for text. An
    integer image for a float model is refused rather than guessed at (by 255? by its maximum?)."""
    target, kind = layout.dtype, array.dtype.kind
    if target.name == "string":
        ok = kind in "US"
    elif target.is_floating:
        ok = kind == "f" and array.dtype.itemsize <= 8
    elif target.is_integer:
        ok = kind in "iub" and (array.size == 0 or (int(array.min()) >= target.min and int(array.max()) <= target.max))
    else:
        ok = array.dtype == target.as_numpy_dtype
    if not ok:
        raise ConfigError(
            where,
            None,
            layout.takes(),
            f"its dtype is {array.dtype}: the run's model takes {target.name} values as the run's data store them",
        )
