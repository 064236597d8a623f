"""Evaluate a finished run's exported model on a dataset, without retraining.

    python -m tfhydra.evaluate [--json] [--split test|validation|train] <run_dir> [data=<source> data.<key>=<value> ...]

The run directory is checked before use (a completed run: metrics.json status completed, readable .hydra/ files,
export/saved_model or, for a run that exported only TFLite, export/tflite/model.tflite), each problem a one-line
error. The run's own overrides (`.hydra/overrides.yaml`) are composed again from the config directory the run was
made with, followed by the new ones; with none it evaluates on the run's own test split (`--split` chooses another:
the same examples the run was tested, validated or trained on, docs/data.md), and says when the run has none. The
exported SavedModel is loaded as a SavedModel (no Python code from the run directory is executed), wrapped, and
compiled with the run's loss and metrics, so the figures mean what they meant during training. A TFLite-only run's
model.tflite is run by LiteRT (tfhydra/export/served.py, the export's own predictor) on the pipeline's inputs,
wrapped and compiled the same way. The result (`export` and `split` say which) is printed as a short table
(`--json`: one JSON line, for scripts) and written to `<run_dir>/evaluations/` (a run directory it cannot write:
the figures printed, then one line saying where they did not go, exit 1). TensorFlow's start-up lines are held back
as in training (tfhydra/platform/quiet.py).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import tfhydra.platform.keras_env  # noqa: F401  (TF_USE_LEGACY_KERAS before TensorFlow)

# isort: split
from tfhydra.config.errors import ConfigError
from tfhydra.record.rundir import RunPaths, contained

USAGE = (
    "usage: tfhydra-evaluate [--trust-run] [--json] [--split test|validation|train] [--config-dir DIR] RUN_DIR "
    "[data=<source>] [data.<key>=<value> ...] (also python -m tfhydra.evaluate)"
)
SPLITS = ("test", "validation", "train")  # the first is the default: the figure nothing chose on


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE, file=sys.stdout if argv else sys.stderr)
        return 0 if argv else 2
    trust_run, as_json = "--trust-run" in argv, "--json" in argv
    argv = [a for a in argv if a not in ("--trust-run", "--json")]
    from tfhydra.platform.quiet import QUIET

    QUIET.start()  # TensorFlow's C++ start-up lines held back, as tfhydra-train does
    try:
        split, argv = split_flag(argv)
        from tfhydra.config.project import import_from_working_directory, project_config_dir, without_config_dir_flags

        project = project_config_dir(argv)  # the project's own conf/, as tfhydra-train finds it
        import_from_working_directory()
        argv = without_config_dir_flags(argv)
        if not argv:
            print(USAGE, file=sys.stderr)
            return 2
        result = evaluate_run(Path(argv[0]), argv[1:], trust_run=trust_run, project=project, split=split)
    except ConfigError as error:
        print(f"Error: {error}", file=sys.stderr)
        return 1
    finally:
        QUIET.release()
    from tfhydra.record.report import evaluation_in_words

    print(json.dumps(result) if as_json else evaluation_in_words(result), flush=True)
    if result.get("not_written"):
        print(f"Error: not written: {result['not_written']} (the figures above are the whole result)", file=sys.stderr)
        return 1
    return 0


def split_flag(argv: list[str]) -> tuple[str, list[str]]:
    """`--split NAME` or `--split=NAME` anywhere on the line: (the split, the other arguments)."""
    split, rest, args = SPLITS[0], [], iter(argv)
    for arg in args:
        if arg == "--split" or arg.startswith("--split="):
            value = arg.partition("=")[2] if "=" in arg else next(args, None)
            if value not in SPLITS:
                raise ConfigError("--split", value, list(SPLITS), "unknown split")
            split = value
        else:
            rest.append(arg)
    return split, rest


RUN_ACCEPTED = "the directory of a completed run with .hydra/ and export/saved_model or export/tflite/model.tflite"
# What an evaluation may change: the data it measures on and how it measures. The model is the run's export,
# so `model=`, `optimizer.*`, `compression=` and the rest would be recorded and then ignored.
EVALUATE_CHANGES = ("data", "trainer.loss", "trainer.metrics", "trainer.seed")


def load_run_config(run_dir: Path, overrides: list[str], trust_run: bool = False, project: Path | None = None):
    """The run's config with `overrides` applied, composed from the command's configs (the `project`'s conf/,
    then tfhydra's: tfhydra/config/project.py) and validated like a new command line.

    A run directory may come from anyone, so what it says is read through the trust boundary (tfhydra/trust): its
    overrides pass the allowlist and its saved config holds nothing that their composition does not, before anything
    is composed or imported; `--trust-run` lifts that, and says so. The run directory is checked first (a completed
    run, .hydra/ files that parse, the export), so a broken or foreign directory is a one-line error, not a
    traceback."""
    from hydra import compose

    from tfhydra import CONFIG_DIR
    from tfhydra.cli.preflight import check_overrides
    from tfhydra.export.served import served_export
    from tfhydra.trust.allowlist import trusted_hydra
    from tfhydra.trust.readers import completed_run, run_overrides, trusted_warning

    check_evaluate_overrides(overrides)
    if trust_run:
        print(trusted_warning("--trust-run", run_dir), file=sys.stderr, flush=True)
    needs = [served_export(run_dir)[1]]  # the SavedModel, else the TFLite file (tfhydra/export/served.py)
    completed_run(run_dir, str(run_dir), None, RUN_ACCEPTED, needs, primary=project, trusted=trust_run)
    every = run_overrides(run_dir, project, trusted=trust_run) + list(overrides)
    primary = project or CONFIG_DIR
    check_overrides(primary, "config", every)
    with trusted_hydra(primary):
        return compose(config_name="config", overrides=every)


def check_evaluate_overrides(overrides: list[str]) -> None:
    """Overrides evaluate would record and then ignore are refused: it measures the run's exported model."""
    for override in overrides:
        key = override.split("=", 1)[0].lstrip("+~")
        if not (key == "data" or key.startswith(tuple(f"{k}." for k in EVALUATE_CHANGES)) or key in EVALUATE_CHANGES):
            raise ConfigError(
                key,
                override.partition("=")[2] or None,
                "data=<source>, data.<key>=..., trainer.loss=..., "
                "trainer.metrics=[...] or trainer.seed=... (the model is the run's export)",
                "evaluate does not use it",
            )


def load_served_model(run_dir: Path):
    """The run's SavedModel, its ops read first (trust/saved_model_ops.py), loaded as a SavedModel: its graph runs,
    no Python code from the run directory (no pickle, no custom-object lookup, no Keras file: export/model.keras
    is never loaded here; a reader that must load one passes safe_mode=True)."""
    from tfhydra.export.served import saved_model_with_its_ops

    try:
        served = saved_model_with_its_ops(str(RunPaths(run_dir).saved_model), RUN_ACCEPTED)
        signature = served.signatures["serve" if "serve" in served.signatures else "serving_default"]
    except ConfigError:  # its graph refused before loading (tfhydra/trust/saved_model_ops.py): said as it is
        raise
    except Exception as error:  # a truncated or foreign SavedModel: TensorFlow's message, on one line
        problem = " ".join(str(error).split())[:200]
        why = f"its export/saved_model cannot be loaded ({type(error).__name__}: {problem})"
        raise ConfigError(str(run_dir), None, RUN_ACCEPTED, why) from error
    return served, signature


def _takes(signature, shape: tuple, dtype: str) -> bool:
    expected = tuple(signature.structured_input_signature[1].values())[0]
    return (tuple(expected.shape[1:]), expected.dtype.name) == (shape, dtype)


def _served_model_layer():
    from tfhydra.platform.keras_lib import keras

    class ServedModel(keras.layers.Layer):
        """A loaded SavedModel's `serve` endpoint as a Keras layer, so Keras metrics can evaluate it."""

        def __init__(self, served, endpoint="serve", **kwargs):
            super().__init__(trainable=False, **kwargs)
            self.served, self.endpoint = served, endpoint

        def call(self, inputs):
            outputs = getattr(self.served, self.endpoint)(inputs)  # a task's named output: a dict of one
            return next(iter(outputs.values())) if isinstance(outputs, dict) else outputs

    return ServedModel


def chosen_split(datasets, split: str, run_dir: Path):
    """(the split's batched model inputs, a function giving its raw examples and labels as stored or None, how
    many examples): `--split`. A run without a test split is one line saying so."""
    serving = datasets.serving
    if split == "test":
        if datasets.test is None:
            no_test = f"{run_dir} has no test split (data.test_fraction=0)"
            raise ConfigError("--split", "test", "--split validation (the run has no test split)", no_test)
        raw = (lambda: serving.raw_test) if serving is not None and serving.raw_test is not None else None
        return datasets.test, raw, datasets.spec.test_size
    if split == "validation":
        return datasets.validation, (lambda: serving.raw_validation) if serving else None, datasets.spec.val_size
    return datasets.train, None, datasets.spec.train_size


def recorded_before_test_split(run_dir: Path) -> str | None:
    """A run recorded before the three splits (schema_version < 2) may have trained or validated on what is now
    the test split: said on stderr and in the result, then measured as asked."""
    from tfhydra.record.run_record import read_record

    record = read_record(run_dir)
    if record is None or not record.before_test_split:
        return None
    note = (
        f"{run_dir} was recorded before the test split (metrics.json schema_version {record.schema_version}): "
        "it has no test figures, and its training may have seen some of these examples"
    )
    print(f"Note: {note}", file=sys.stderr, flush=True)
    return note


def evaluate_run(
    run_dir: Path, overrides: list[str], trust_run: bool = False, project: Path | None = None, split: str = SPLITS[0]
) -> dict:
    cfg = load_run_config(
        run_dir, overrides, trust_run, project
    )  # before TensorFlow is imported: a bad directory is a quick error
    contained(RunPaths(run_dir).evaluations, run_dir)  # where the result goes, checked before the work
    note = recorded_before_test_split(run_dir)
    from tfhydra.data.augment_checks import mixes_labels
    from tfhydra.data.pipeline import build_datasets
    from tfhydra.export.served import TFLITE, served_export
    from tfhydra.record.report import write_json
    from tfhydra.trainer.objectives import build_loss, build_metrics

    mixed = mixes_labels(cfg.data.augment)  # mixup/cutmix: the run compiled its loss's twin, which takes indices too
    if split == "train":  # every training example once: no shuffle, no augmentation, no dropped batch
        cfg.data.shuffle_buffer, cfg.data.augment, cfg.data.drop_remainder = 0, [], False
    from tfhydra.task.build import build_task

    datasets = build_datasets(cfg.data, cfg.trainer.seed, task=build_task(cfg.task))  # the labels as the run read them
    measured, raw_examples, count = chosen_split(datasets, split, run_dir)
    export, _ = served_export(run_dir)
    evaluated = tflite_evaluated if export == TFLITE else saved_model_evaluated
    model, batches, given = evaluated(run_dir, cfg, datasets, measured, raw_examples)
    loss = build_loss(cfg.trainer.loss, cfg.trainer.label_smoothing, mixed)
    model.compile(loss=loss, metrics=build_metrics(cfg.trainer.metrics, mixed))
    started = time.perf_counter()
    figures = model.evaluate(batches, verbose=0, return_dict=True)
    result = {
        "run_dir": str(run_dir),
        "overrides": list(overrides),
        "trusted": trust_run,
        "data": cfg.data.get("name"),
        "task": cfg.task.get("name"),
        "split": split,
        "export": export,
        "input": given,
        "examples": count,
        "metrics": {k: float(v) for k, v in figures.items()},
        "seconds": time.perf_counter() - started,
        **({"note": note} if note else {}),
    }
    stamp = f"{time.strftime('%Y%m%d-%H%M%S')}_{time.time_ns() % 10**6:06d}"
    out = contained(RunPaths(run_dir).evaluations / f"{cfg.data.get('name')}_{split}_{stamp}.json", run_dir)
    try:  # a run directory shared read-only still answers: the figures are printed, and where they did not go
        out.parent.mkdir(exist_ok=True)
        write_json(out, result)
        result["written_to"] = str(out)
    except OSError as error:
        result["not_written"] = f"{out}: {error.strerror or error}"
    return result


def saved_model_evaluated(run_dir: Path, cfg, datasets, measured, raw_examples):
    """(the SavedModel as a Keras model, the batches of the chosen split it is evaluated on, "raw" or "features");
    `raw_examples`: the split's examples as stored, for the export's own preprocessing (None: none kept)."""
    import tensorflow as tf

    from tfhydra.platform.keras_lib import keras

    ServedModel = _served_model_layer()
    served, signature = load_served_model(run_dir)
    spec = datasets.spec
    # The deployed path when there is one: the data as stored, through the export's own preprocessing (other data
    # stored differently, e.g. 28x28 uint8 images for a model trained on 8x8 floats, go through their pipeline).
    raw = (
        raw_examples is not None
        and "serve_raw" in served.signatures
        and _takes(served.signatures["serve_raw"], tuple(datasets.serving.raw.shape), datasets.serving.raw.dtype.name)
    )
    if raw:
        signature = served.signatures["serve_raw"]
        examples, stored = tf.data.Dataset.from_tensor_slices(raw_examples()), datasets.serving.raw
        validation, given = examples.batch(datasets.batch_size), (tuple(stored.shape), stored.dtype.name)
    else:
        validation, given = datasets.prefetched(measured), (tuple(spec.input_shape), spec.dtype)
    expected = tuple(signature.structured_input_signature[1].values())[0]
    check_takes(
        cfg,
        datasets,
        (tuple(expected.shape[1:]), expected.dtype.name),
        given,
        tuple(signature.structured_outputs.values())[0].shape[-1],
    )
    inputs = keras.Input(expected.shape[1:], dtype=expected.dtype)
    return (
        keras.Model(inputs, ServedModel(served, "serve_raw" if raw else "serve")(inputs)),
        validation,
        "raw" if raw else "features",
    )


def tflite_evaluated(run_dir: Path, cfg, datasets, measured, raw_examples=None):
    """(the run's TFLite file, run by LiteRT through the export's own predictor, as a Keras model; the pipeline's
    batches of the chosen split, which are what the file takes; "features")."""
    import tensorflow as tf

    from tfhydra.export.served import load_tflite
    from tfhydra.platform.keras_lib import keras

    tflite = load_tflite(run_dir, RUN_ACCEPTED)
    spec = datasets.spec
    check_takes(
        cfg,
        datasets,
        (tflite.input_shape, tflite.input_dtype.name),
        (tuple(spec.input_shape), spec.dtype),
        tflite.classes,
    )

    def predict(x):
        return tflite.predict(x).astype("float32")

    inputs = keras.Input(tflite.input_shape, dtype=tflite.input_dtype)
    probabilities = keras.layers.Lambda(
        lambda x: tf.ensure_shape(tf.numpy_function(predict, [x], tf.float32, stateful=True), [None, tflite.classes])
    )(inputs)
    return keras.Model(inputs, probabilities), datasets.prefetched(measured), "features"


def check_takes(cfg, datasets, expected: tuple, given: tuple, classes: int) -> None:
    """The data's examples ((shape, dtype name) as given) are what the export takes, and as many classes."""
    if tuple(expected[0]) != tuple(given[0]) or expected[1] != given[1]:
        raise ConfigError(
            "data",
            cfg.data.get("name"),
            f"data whose examples are {expected[1]} of shape {tuple(expected[0])}",
            f"its examples are {given[1]} of shape {tuple(given[0])}, which the run's model does not take",
        )
    if classes != datasets.spec.outputs:
        raise ConfigError(
            "data",
            cfg.data.get("name"),
            f"data with {classes} outputs (classes, labels or targets)",
            f"it has {datasets.spec.outputs}, the run's model predicts {classes}",
        )


if __name__ == "__main__":
    sys.exit(main())
