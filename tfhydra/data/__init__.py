"""Data sources and the one tf.data pipeline every source goes through.

A source is a registered builder `build_x(cfg_data, seed) -> Source`: two unbatched
datasets plus the `DataSpec` that model builders read (no model hard-codes a shape or a
class count). `build_datasets` applies the shared pipeline options of the `data:` section.

Rooms: source.py (the types builders share), pipeline.py (build_datasets), augment.py (with batch_mixing.py and
randaugment.py: data.augment's mixup, cutmix and randaugment), and one module per family of sources: arrays.py
(digits, synthetic, npz), keras_datasets.py (mnist, fashion_mnist, cifar10, cifar100), files.py (image_folder;
image_labels.py its labels), tfrecord.py, tfds_source.py (tfds), tables.py (csv, text_csv; csv streams through
csv_stream.py, its lines read within their limits by csv_lines.py, its passes kept by csv_index.py); features.py
(feature vectors standardised on the training split: csv, npz tables, a `_target_` source's); labels.py (how the
run's task reads, splits and subsets the labels: tfhydra/task/); label_checks.py (a source's training labels against
its task: their kind, every class); inputs.py (what the model takes: prepared examples or raw text); splits.py
(training, validation and test held apart); caching.py, budget.py, file_cache.py, index.py, image_headers.py,
service.py, service_watch.py (what the pipeline decides and reads, and the tf.data service's watchdog); checks.py
holds what the run plan checks (augment_checks.py `data.augment`'s), label_sample.py the labels it reads for the
task to judge, digest.py the digest of the data a run read (its record's `data.digest`; tfhydra-compare) (no
TensorFlow).

This face names nothing, so importing the package (the run plan reads checks.py before TensorFlow is loaded)
imports no TensorFlow. The names are imported from their module: `from tfhydra.data.source import DATA, Source,
source_from_arrays, stratified_split` (`DATA` imports every source's module on its first lookup),
`from tfhydra.data.pipeline import Datasets, build_datasets, limit_steps`, `from tfhydra.data.caching import
Reads`, and the spec every source hands on, `from tfhydra.config.contracts import DataSpec`.
schemas.py: the options' types (dataclasses named by conf/'s YAML; docs/design.md
"Typed configs").
"""
