"""Is the input pipeline ever the bottleneck? Examples per second of each data source's tf.data
pipeline alone (cache off; cache=memory and cache=<file> once the first epoch has filled them),
next to the training throughput of that source's default model on the same batches.

    python benchmarks/pipeline_throughput.py [--examples 16384] [--sources npz,tfrecord,...]

Input files are generated in a temporary folder with the test-suite writers (tests/data_files.py).
The model is timed on one batch repeated (`Dataset.from_tensors(...).repeat()`), so its figure
excludes input work; the pipeline is timed iterating a full epoch without a model. Ratio =
pipeline / model: above 1 the pipeline keeps up; the target is >= 5 with the default cache.
Prints a Markdown table (docs/data.md records one).
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

import tfhydra  # noqa: E402,F401  (TF_USE_LEGACY_KERAS before TensorFlow)

SOURCES = ["digits", "npz", "tfrecord", "image_folder", "csv", "text_csv"]
DEFAULT_MODEL = {"csv": "mlp", "text_csv": "lstm"}  # every other (image) source: cnn


def source_overrides(name: str, folder: Path, n: int) -> list[str]:
    import data_files

    folder.mkdir(parents=True, exist_ok=True)
    if name == "digits":
        return ["data=digits"]
    if name == "npz":
        return ["data=npz", f"data.path={data_files.write_npz(folder / 'd.npz', n_train=n, n_test=n // 4)}"]
    if name == "tfrecord":
        train = data_files.write_tfrecords(folder / "tfr", "train", n=n, shards=8, shape=(28, 28, 1), classes=10)
        val = data_files.write_tfrecords(folder / "tfr", "val", n=n // 4, shards=2, shape=(28, 28, 1), classes=10)
        return ["data=tfrecord", f"data.train={train}", f"data.validation={val}"]
    if name == "image_folder":
        root = data_files.write_image_folder(
            folder / "images", classes=("a", "b", "c", "d"), per_class=n // 8, size=(32, 32), val_per_class=n // 32
        )
        return ["data=image_folder", f"data.path={root}", "data.image_size=[32,32]"]
    if name == "csv":
        return ["data=csv", f"data.path={data_files.write_csv(folder / 't.csv', n=n)}"]
    return ["data=text_csv", f"data.path={data_files.write_text_csv(folder / 'r.csv', n=n)}"]


def compose(overrides: list[str]):
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        return hydra_compose(config_name="config", overrides=overrides)


def pipeline_rate(cfg_data, seed: int = 0) -> tuple[float, float, int]:
    """(examples/second, seconds to build the source, training examples).

    The rate is the best of epochs 2 and 3: epoch 1 fills the cache and traces the functions,
    and the best of two is the least disturbed by other work on a shared machine. Building
    includes each source's eager checks (the TFRecord scan, the image-folder decode pass).
    """
    import tensorflow as tf

    from tfhydra.data.pipeline import build_datasets

    start = time.perf_counter()
    datasets = build_datasets(cfg_data, seed)
    built = time.perf_counter() - start
    # Counted inside TensorFlow (Dataset.reduce), as model.fit consumes it: a Python loop would
    # measure its own per-batch overhead (~0.1 ms) instead of the pipeline.
    count = lambda: int(datasets.prefetched(datasets.train).reduce(0, lambda n, batch: n + tf.shape(batch[1])[0]))  # noqa: E731
    count()
    rates = []
    for _epoch in range(2):
        start = time.perf_counter()
        rates.append(count() / (time.perf_counter() - start))
    return max(rates), built, datasets.spec.train_size


def model_rate(cfg, seconds: float = 4.0) -> float:
    """Training examples/second of the default model on one batch of the source's data, repeated."""
    import tensorflow as tf
    import tf_keras as keras

    from tfhydra.data.pipeline import build_datasets
    from tfhydra.model.build import build_model

    datasets = build_datasets(cfg.data, 0)
    batch = next(iter(datasets.prefetched(datasets.train)))
    model = build_model(cfg.model, datasets.spec)
    model.compile(optimizer=keras.optimizers.Adam(1e-3), loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    data = tf.data.Dataset.from_tensors(batch).repeat()
    model.fit(data, steps_per_epoch=10, epochs=1, verbose=0)  # trace and warm up
    steps, elapsed = 20, 0.0
    while elapsed < seconds / 4:  # find a step count that takes about `seconds`
        start = time.perf_counter()
        model.fit(data, steps_per_epoch=steps, epochs=1, verbose=0)
        elapsed = time.perf_counter() - start
        steps *= 2
    steps = max(20, int(steps / 2 * seconds / max(elapsed, 1e-3)))
    start = time.perf_counter()
    model.fit(data, steps_per_epoch=steps, epochs=1, verbose=0)
    return steps * int(batch[1].shape[0]) / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--examples", type=int, default=16384, help="training examples per generated source")
    parser.add_argument("--sources", default=",".join(SOURCES))
    parser.add_argument("--seconds", type=float, default=4.0, help="timing budget of each model measurement")
    args = parser.parse_args()

    import tensorflow as tf

    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for name in args.sources.split(","):
            overrides = source_overrides(name, Path(folder) / name, args.examples)
            model = DEFAULT_MODEL.get(name, "cnn")
            started = time.perf_counter()
            uncached, built, size = pipeline_rate(compose([*overrides, "data.cache=false"]).data)
            cached, _, _ = pipeline_rate(compose([*overrides, "data.cache=memory"]).data)
            on_disk, _, _ = pipeline_rate(compose([*overrides, f"data.cache={folder}/cache/{name}"]).data)
            trained = model_rate(compose([*overrides, f"model={model}"]), args.seconds)
            rows.append((name, size, built, model, uncached, cached, on_disk, trained))
            print(f"{name}: done in {time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)

    print(
        f"\n{platform.processor() or platform.machine()}, {os.cpu_count()} CPU cores, TensorFlow {tf.__version__}, "
        f"batch size 32, {args.examples} generated training examples per file source\n"
    )
    print(
        "| source | train examples | build (s) | pipeline, cache off (ex/s) | cache=memory (ex/s) | cache=<file> "
        "(ex/s) | default model | model training (ex/s) | ratio, cache off | ratio, memory | ratio, file |"
    )
    print("|---|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|")
    for name, size, built, model, uncached, cached, on_disk, trained in rows:
        print(
            f"| {name} | {size} | {built:.2f} | {uncached:,.0f} | {cached:,.0f} | {on_disk:,.0f} | {model} | "
            f"{trained:,.0f} | {uncached / trained:.1f}x | {cached / trained:.1f}x | {on_disk / trained:.1f}x |"
        )


if __name__ == "__main__":
    main()
