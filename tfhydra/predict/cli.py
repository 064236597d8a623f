"""Answer on new, unlabelled data with a finished run's exported model.

    tfhydra-predict [--trust-run] RUN INPUT... [--output FILE] [--batch-size N] [--top-k K] [--format csv|jsonl]
                    [--on-error skip|fail] [--max-pixels N]   (also python -m tfhydra.predict)

INPUT is what the run's data are stored as: image files or folders of them (recursively), a CSV of the training
feature columns, a text file (one text per line) or a CSV of texts for a text run, an `.npy` or `.npz` array in
the stored layout. Everything goes through one tf.data pipeline (decoded in a parallel map, batched, prefetched)
into the SavedModel's `serving_default` signature, which holds the run's own preprocessing (tfhydra/export/);
an image file of another size is resized as training resized it. Each input becomes one row (CSV) or one line
(JSON Lines), by the output's extension, on stdout without `--output`: the input's name, the columns a CSV
carried besides the features, and the top-k class names with their probabilities.

A run that exported only TFLite (`export.formats=[tflite]`) is answered by its model.tflite through LiteRT, with
the same output (tfhydra/predict/layout.py says what such a file takes). An INPUT that cannot be read or does not
fit the model (one RGB PNG among grayscale ones, a truncated file) is, by default (`--on-error skip`), one
`Skipped <file>: <why>` line on stderr while the others are predicted, and the exit code is 1; `--on-error fail`
stops at the first, as one `Error:` line. Image files are held to image_folder's rules before anything decodes
them (image_checks.py): an empty, foreign or truncated file, or one whose header states more pixels than
`--max-pixels` (default: the run's `data.max_pixels`, else conf/data/image_folder.yaml's), is refused undecoded.
TensorFlow's start-up lines are held back as in training.

Trust, as in tfhydra-evaluate: the run directory is read through tfhydra/trust only (`completed_run`, the
same check of a completed run with `export/saved_model` that evaluate makes), its config comes back inert (plain
values, nothing composed, resolved or imported) and `--trust-run` lifts the allowlist, loudly. The one thing
executed is the SavedModel's graph (`load_served_model`), its ops read first (tfhydra/trust/saved_model_ops.py: none
that reads or writes files, runs Python or connects): a SavedModel is still a program, so predict only on runs you
trust as you would trust code. Class names come from the run record (`metrics.json` `data.class_names`). Nothing
needs the training data, except a CSV run trained with `data.features: null`, whose feature columns are the
training CSV's header (read, not the rows).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import tfhydra.platform.keras_env  # noqa: F401  (TF_USE_LEGACY_KERAS before TensorFlow)

# isort: split
from tfhydra.config.errors import ConfigError
from tfhydra.platform.terminal import figure

USAGE = (
    "usage: tfhydra-predict [--trust-run] [--config-dir DIR] RUN_DIR INPUT... [--output FILE.csv|FILE.jsonl] "
    "[--batch-size N] [--top-k K] [--format csv|jsonl] [--on-error skip|fail] [--max-pixels N] "
    "| tfhydra-predict RUN_DIR --info (its model card) (also python -m tfhydra.predict)"
)
FORMATS = {".csv": "csv", ".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "jsonl"}


class _Parser(argparse.ArgumentParser):
    """argparse whose mistakes are one `Error:` line like every other tfhydra command's."""

    def error(self, message: str):
        raise ConfigError("command line", None, USAGE.removeprefix("usage: "), message)


def parse_arguments(argv: list[str]) -> argparse.Namespace:
    parser = _Parser(prog="tfhydra-predict", add_help=False)
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("inputs", nargs="+")
    parser.add_argument("--output", "-o", default=None)
    parser.add_argument("--batch-size", type=int, default=None)
    parser.add_argument("--top-k", type=int, default=1)
    parser.add_argument("--format", choices=("csv", "jsonl"), default=None)
    parser.add_argument("--trust-run", action="store_true")
    parser.add_argument("--on-error", choices=("skip", "fail"), default="skip")
    parser.add_argument("--max-pixels", type=int, default=None)  # None: the run's limit (`Run.pixel_limit`)
    args = parser.parse_intermixed_args(argv)
    if args.batch_size is not None and args.batch_size < 1:
        raise ConfigError("--batch-size", args.batch_size, "an integer >= 1", "no batch")
    if args.max_pixels is not None and args.max_pixels < 1:
        raise ConfigError("--max-pixels", args.max_pixels, "an integer >= 1 (height x width)", "no image fits")
    if args.top_k < 1:
        raise ConfigError(
            "--top-k", args.top_k, "an integer >= 1 (at most the run's number of classes)", "no class to print"
        )
    if args.format is None:
        suffix = Path(args.output).suffix.lower() if args.output else ".csv"
        if suffix not in FORMATS:
            raise ConfigError(
                "--output",
                args.output,
                "a file ending in .csv or .jsonl (or --format csv|jsonl)",
                f"tfhydra-predict writes CSV or JSON Lines, not {suffix or 'a file without extension'}",
            )
        args.format = FORMATS[suffix]
    return args


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE, file=sys.stdout if argv else sys.stderr)
        return 0 if argv else 2
    if "--info" in argv:
        return print_info([a for a in argv if a != "--info"])
    from tfhydra.platform.quiet import QUIET

    QUIET.start()  # TensorFlow's C++ start-up lines held back, as tfhydra-train does
    try:
        from tfhydra.config.project import import_from_working_directory, project_config_dir, without_config_dir_flags

        import_from_working_directory()  # a run's own `_target_` source resolves as under tfhydra-train
        project = project_config_dir(argv)  # the project's own conf/, as tfhydra-train finds it
        args = parse_arguments(without_config_dir_flags(argv))
        args.project = project
        summary, skipped = predict(args)
    except ConfigError as error:
        print(f"Error: {error}", file=sys.stderr)
        return 1
    finally:
        QUIET.release()
    print(summary, file=sys.stderr)
    return 1 if skipped else 0


def print_info(argv: list[str]) -> int:
    """`tfhydra-predict RUN_DIR --info`: the run's model card (export/README.md's text, made again from the
    record, which is read as data by its bounded reader; control characters a hostile record may hold are shown
    escaped), without loading a model or TensorFlow."""
    from tfhydra.export.card import model_card
    from tfhydra.platform.command import reproduce_command
    from tfhydra.record.run_record import RecordError, load_record

    if len(argv) != 1:
        print(f"Error: --info takes one RUN_DIR and nothing else; {USAGE}", file=sys.stderr)
        return 2
    try:
        record = load_record(Path(argv[0]))
    except (OSError, RecordError) as error:
        print(f"Error: {argv[0]}: no run record to describe ({str(error).splitlines()[0]})", file=sys.stderr)
        return 1
    card = model_card(record, reproduce_command([str(o) for o in record.overrides]))
    print("".join(c if c in "\n\t" or (c.isprintable()) else repr(c)[1:-1] for c in card), end="")
    return 0


def predict(args: argparse.Namespace) -> tuple[str, int]:
    """Predict every input of `args`: (the one-line summary for stderr, how many INPUTs were skipped); the
    predictions go to the output, a `Skipped` line per skipped INPUT to stderr."""
    from tfhydra.predict.layout import read_run

    run = read_run(
        args.run_dir, args.trust_run, getattr(args, "project", None)
    )  # before TensorFlow: a wrong directory is a quick error
    if args.top_k > len(run.class_names):
        raise ConfigError(
            "--top-k",
            args.top_k,
            f"an integer from 1 to {len(run.class_names)} (the run's classes)",
            "more classes than the model predicts",
        )
    if args.output:
        from tfhydra.record.rundir import check_creatable

        check_creatable("--output", args.output, Path(args.output).expanduser().absolute().parent)
    from tfhydra.predict.inputs import read_inputs, unread_images
    from tfhydra.predict.output import PredictionWriter, run_batches

    layout = run.layout()
    if args.max_pixels is not None and layout.max_pixels is not None:  # an image model: the user's limit
        layout.max_pixels, layout.max_pixels_from = args.max_pixels, "--max-pixels"
    found = read_inputs(args.inputs, layout, args.on_error)
    batch_size = args.batch_size or run.batch_size
    started = time.perf_counter()
    writer = PredictionWriter(args.output, args.format, found.extra_columns, args.top_k, run.class_names, run.task)
    with writer:
        counted = run_batches(layout, found, batch_size, writer)
        skipped = found.skipped + unread_images(found, counted.predicted_images, layout)
        if not counted.examples and len(skipped) == 1:
            raise skipped[0]  # the one input there was: its own one-line error, as with --on-error fail
        for error in skipped:
            print(f"Skipped {error}", file=sys.stderr)
        if not counted.examples:
            raise ConfigError(
                "INPUT",
                None,
                found.accepted,
                "no example to predict" + (f" ({len(skipped)} input(s) skipped)" if skipped else ""),
            )
    seconds = time.perf_counter() - started
    line = (
        f"predicted {counted.examples} input(s) in {seconds:.2f} s ({counted.examples / max(seconds, 1e-9):.0f}/s, "
        f"batches of {batch_size})"
    )
    if counted.labelled:
        line += (
            f"; accuracy {figure(counted.correct / counted.labelled)} on the {counted.labelled} row(s) with a "
            f"label (column {found.label_column})"
        )
    if skipped:
        line += f"; {len(skipped)} input(s) skipped (named above)"
    if layout.export != "saved_model":
        line += f"; by export/{layout.export}"
    return line + (f"; written to {args.output}" if args.output else ""), len(skipped)
