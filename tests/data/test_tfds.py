"""`data=tfds`: a real TFDS dataset built offline in tmp_path (a GeneratorBasedBuilder defined here), read
through its supervised keys with the shared pipeline; a dataset that is not prepared is one line."""

from __future__ import annotations

import data_files
import numpy as np
import pytest
from conftest import FAST, last_line, read_run_record, run_cli

from tfhydra.config.errors import ConfigError

tfds = pytest.importorskip("tensorflow_datasets")


class TfhydraToyImages(tfds.core.GeneratorBasedBuilder):
    """12x10x3 uint8 images of 3 classes (each class lights its own rows), train 36 / test 12."""

    VERSION = tfds.core.Version("1.0.0")
    pkg_dir_path = tfds.core.Path(__file__).parent  # a test module, not a package: where TFDS looks for metadata

    def _info(self):
        return self.dataset_info_from_configs(
            features=tfds.features.FeaturesDict(
                {
                    "image": tfds.features.Image(shape=(12, 10, 3)),
                    "label": tfds.features.ClassLabel(names=["a", "b", "c"]),
                }
            ),
            supervised_keys=("image", "label"),
        )

    def _split_generators(self, dl_manager):
        return {"train": self._generate_examples(36, 1), "test": self._generate_examples(12, 2)}

    def _generate_examples(self, n, seed):
        images, labels = data_files.class_images(n, (12, 10, 3), 3, seed=seed)
        for i, (image, label) in enumerate(zip(images, labels, strict=True)):
            yield i, {"image": image, "label": int(label)}


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tfds")
    TfhydraToyImages(data_dir=str(folder)).download_and_prepare()
    return folder


def test_a_prepared_tfds_dataset_goes_through_the_shared_pipeline(data_dir, compose_cfg, tmp_path, monkeypatch):
    from tfhydra.data.pipeline import build_datasets

    monkeypatch.setenv("TFHYDRA_CACHE_DIR", str(tmp_path))
    cfg = compose_cfg(
        [
            "data=tfds",
            "data.dataset=tfhydra_toy_images",
            f"data.data_dir={data_dir}",
            "data.batch_size=12",
            "data.shuffle_buffer=0",
        ]
    )
    datasets = build_datasets(cfg.data, 0)
    spec = datasets.spec
    # issue 34: the `test` split is the test split, validation 0.2 of `train` (8 of 36), no longer `test`
    assert (spec.input_shape, spec.class_names, spec.train_size, spec.val_size, spec.test_size) == (
        (12, 10, 3),
        ("a", "b", "c"),
        28,
        8,
        12,
    )
    assert spec.pipeline["train"]["cache"] == "memory"  # decoded from files: auto keeps what fits (uint8)
    assert spec.pipeline["train"]["estimated_bytes"] == 28 * (12 * 10 * 3 + 8 + 2 * 96)
    x = np.concatenate([b.numpy() for b, _ in datasets.test])
    images, labels = data_files.class_images(12, (12, 10, 3), 3, seed=2)
    assert x.dtype == np.float32 and sorted(np.round(x * 255).astype(np.uint8).sum(axis=(1, 2, 3))) == sorted(
        images.astype(np.int64).sum(axis=(1, 2, 3))
    )
    assert datasets.serving.raw.dtype.name == "uint8" and tuple(datasets.serving.raw.shape) == (12, 10, 3)
    raw, raw_labels = datasets.serving.raw_validation  # read on first use only
    assert raw.shape == (8, 12, 10, 3)

    tenth = build_datasets(
        compose_cfg(
            [
                "data=tfds",
                "data.dataset=tfhydra_toy_images",
                f"data.data_dir={data_dir}",
                "data.validation_split=null",
                "data.val_fraction=0.25",
            ]
        ).data,
        0,
    )
    assert (tenth.spec.train_size, tenth.spec.val_size, tenth.spec.test_size) == (27, 9, 12)
    swapped = build_datasets(
        compose_cfg(
            [
                "data=tfds",
                "data.dataset=tfhydra_toy_images",
                f"data.data_dir={data_dir}",
                "data.validation_split=test",
                "data.test_split=null",
            ]
        ).data,
        0,
    )
    assert (swapped.spec.train_size, swapped.spec.val_size, swapped.spec.test_size) == (28, 12, 8)  # test held out


def test_a_tfds_dataset_that_is_not_prepared_names_the_data_dir_and_the_command(compose_cfg, tmp_path):
    from tfhydra.data.pipeline import build_datasets

    cfg = compose_cfg(["data=tfds", "data.dataset=tfhydra_toy_images", f"data.data_dir={tmp_path}"])
    with pytest.raises(ConfigError) as error:
        build_datasets(cfg.data, 0)
    assert str(error.value) == (
        f"data.data_dir={tmp_path}: tfhydra_toy_images is not prepared in {tmp_path}; "
        f"accepted: a data directory where tfhydra_toy_images is prepared; prepare it with: "
        f"tfds build tfhydra_toy_images --data_dir {tmp_path}, or run once with "
        "data.download=true"
    )


@pytest.mark.parametrize("name, hint", [("mnistt", " (did you mean mnist or "), ("no_such_dataset_at_all", ";")])
def test_an_unknown_tfds_name_is_not_told_to_build_it(compose_cfg, tmp_path, name, hint):
    """Issue 35: `tfds build` cannot build a name TFDS does not have; the answer is the nearest names."""
    from tfhydra.data.pipeline import build_datasets

    cfg = compose_cfg(["data=tfds", f"data.dataset={name}", f"data.data_dir={tmp_path}"])
    with pytest.raises(ConfigError) as error:
        build_datasets(cfg.data, 0)
    message = str(error.value)
    assert message.startswith(f"data.dataset={name}: no such TFDS dataset{hint}") and "tfds build" not in message
    assert "accepted: the name of a TFDS dataset (tfds.list_builders(): " in message


def test_tfds_without_a_dataset_is_refused_by_the_plan(compose_cfg):
    from tfhydra.data.checks import check_streaming

    with pytest.raises(ConfigError) as error:
        check_streaming(compose_cfg(["data=tfds"]))
    assert str(error.value) == (
        "data.dataset: data=tfds needs the dataset to read; accepted: the name of a "
        "TFDS dataset, e.g. data.dataset=mnist"
    )


@pytest.mark.slow
def test_cli_a_tfds_run_completes_from_the_prepared_files(data_dir, tmp_path, monkeypatch):
    """The CLI process has no code for the dataset: TFDS reads it from its prepared files."""
    monkeypatch.setenv("TFHYDRA_CACHE_DIR", str(tmp_path / "c"))  # inherited by the command run_cli forks
    run_dir = tmp_path / "run"
    result = run_cli(
        "model=mlp",
        "data=tfds",
        "data.dataset=tfhydra_toy_images",
        f"data.data_dir={data_dir}",
        *FAST,
        f"hydra.run.dir={run_dir}",
    )
    assert result.returncode == 0, last_line(result.stderr)
    record = read_run_record(run_dir)
    assert record["status"] == "completed" and record["data"]["train_size"] == 28  # 8 of 36 validate (issue 34)
    assert record["data"]["class_names"] == ["a", "b", "c"]
