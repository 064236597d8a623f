"""The types of the data options: dataclass schemas,
stored in Hydra's ConfigStore as `schema/<name>` (tfhydra/runner/plan.py `store_schemas`) and named by each YAML's
defaults list. The values and their comments stay in conf/; ranges and
choices are checked by the rules in this room's checks (docs/design.md, "Typed configs"). No TensorFlow.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from omegaconf import MISSING

from tfhydra.config.typed import Choice


class ProcessingMode(Choice):
    distributed_epoch = "distributed_epoch"
    parallel_epochs = "parallel_epochs"


class ColorMode(Choice):
    grayscale = "grayscale"
    rgb = "rgb"
    rgba = "rgba"


class LabelMode(Choice):
    fine = "fine"
    coarse = "coarse"


class LabelDtype(Choice):
    int64 = "int64"
    float32 = "float32"


class Encoding(Choice):
    png = "png"
    jpeg = "jpeg"
    raw = "raw"


class RawDtype(Choice):
    uint8 = "uint8"
    uint16 = "uint16"
    int8 = "int8"
    int16 = "int16"
    int32 = "int32"
    int64 = "int64"
    float16 = "float16"
    float32 = "float32"
    float64 = "float64"


@dataclass
class ServiceConfig:
    address: str | None = MISSING
    processing_mode: ProcessingMode = MISSING
    timeout: float = MISSING
    progress_timeout: float = MISSING


@dataclass
class DataConfig:
    """What every data option has: its name and conf/tfhydra.yaml's shared pipeline keys. `cache`, `cache_budget`,
    `prefetch` mix a word with a number, a size or a path, and `augment` holds names or mappings: Any (their rules
    check them). Keys that take one name or a list (`label`, `image_size`, `class_names`) are Any too."""

    name: str = MISSING
    batch_size: int = MISSING
    val_fraction: float = MISSING
    test_fraction: float = MISSING
    split_seed: int | None = MISSING
    folds: int | None = MISSING
    fold: int | None = MISSING
    fraction: float = MISSING
    shuffle_buffer: int = MISSING
    cache: Any = MISSING
    cache_budget: Any = MISSING
    snapshot: str | None = MISSING
    service: ServiceConfig = MISSING
    prefetch: Any = MISSING
    drop_remainder: bool = MISSING
    augment: list[Any] = MISSING


@dataclass
class DigitsDataConfig(DataConfig):
    image_size: Any = MISSING


@dataclass
class KerasDatasetConfig(DataConfig):
    """mnist, fashion_mnist, cifar10: Keras' own downloads."""

    cache_dir: str | None = MISSING


@dataclass
class Cifar100DataConfig(KerasDatasetConfig):
    label_mode: LabelMode = MISSING


@dataclass
class LabelledDataConfig(DataConfig):
    """Sources that read their class count and names from the data unless told."""

    num_classes: int | None = MISSING
    class_names: Any = MISSING


@dataclass
class CsvDataConfig(LabelledDataConfig):
    path: str | None = MISSING
    label: Any = MISSING
    features: list[str] | None = MISSING
    delimiter: str = MISSING


@dataclass
class TextCsvDataConfig(LabelledDataConfig):
    path: str | None = MISSING
    text: str = MISSING
    label: Any = MISSING
    sequence_length: int = MISSING
    vocab_size: int = MISSING
    delimiter: str = MISSING


@dataclass
class NpzDataConfig(LabelledDataConfig):
    path: str | None = MISSING
    x_train: str = MISSING
    y_train: str = MISSING
    x_val: str | None = MISSING
    y_val: str | None = MISSING
    x_test: str | None = MISSING
    y_test: str | None = MISSING


@dataclass
class SyntheticDataConfig(DataConfig):
    shape: list[int] = MISSING
    num_classes: int = MISSING
    train_size: int = MISSING
    val_size: int = MISSING
    test_size: int = MISSING
    signal: float = MISSING
    shift: int = MISSING


@dataclass
class ImageFolderDataConfig(DataConfig):
    path: str | None = MISSING
    image_size: Any = MISSING
    color_mode: ColorMode = MISSING
    verify: bool = MISSING
    on_bad_file: str = MISSING
    max_pixels: int = MISSING
    labels_csv: str | None = MISSING


@dataclass
class TfdsDataConfig(DataConfig):
    dataset: str | None = MISSING
    data_dir: str | None = MISSING
    download: bool = MISSING
    split: str = MISSING
    validation_split: str | None = MISSING
    test_split: str | None = MISSING
    image_size: Any = MISSING
    sequence_length: int = MISSING
    vocab_size: int = MISSING


@dataclass
class TfrecordDataConfig(LabelledDataConfig):
    train: Any = MISSING
    validation: Any = MISSING
    test: Any = MISSING
    image_key: str = MISSING
    label_key: str = MISSING
    label_dtype: LabelDtype = MISSING
    label_length: int = MISSING
    encoding: Encoding = MISSING
    channels: int = MISSING
    raw_shape: list[int] | None = MISSING
    raw_dtype: RawDtype = MISSING
    image_size: Any = MISSING


SCHEMAS: dict[str, type] = {
    "data/digits": DigitsDataConfig,
    "data/mnist": KerasDatasetConfig,
    "data/fashion_mnist": KerasDatasetConfig,
    "data/cifar10": KerasDatasetConfig,
    "data/cifar100": Cifar100DataConfig,
    "data/csv": CsvDataConfig,
    "data/text_csv": TextCsvDataConfig,
    "data/npz": NpzDataConfig,
    "data/synthetic": SyntheticDataConfig,
    "data/image_folder": ImageFolderDataConfig,
    "data/tfds": TfdsDataConfig,
    "data/tfrecord": TfrecordDataConfig,
}
