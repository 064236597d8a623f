"""Data sources and the one tf.data pipeline every source goes through.

A source is a registered builder `build_x(cfg_data, seed) -> Source`: two unbatched
datasets plus the `DataSpec` that model builders read (no model hard-codes a shape or a
class count). `build_datasets` applies the shared pipeline options of the `data:` section.

Rooms: source.py (the types builders share), pipeline.py (build_datasets), augment.py,
and one module per family of sources: arrays.py (digits, synthetic, npz),
keras_datasets.py (mnist, fashion_mnist, cifar10, cifar100), files.py (tfrecord,
image_folder), tables.py (csv, text_csv).
"""
from tfhydra.data import arrays, files, keras_datasets, tables  # noqa: F401  (register the builders)
from tfhydra.data.pipeline import Datasets, build_datasets, limit_steps
from tfhydra.data.source import DATA, DataSpec, Source, source_from_arrays, stratified_split

__all__ = ["DATA", "DataSpec", "Source", "Datasets", "build_datasets", "limit_steps", "source_from_arrays", "stratified_split"]
