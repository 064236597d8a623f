"""The bad-input matrix: `python train.py ...` as users run it, one table row per mistake.

Every row must end with a non-zero exit code, one `Error: ...` line last on stderr naming the key or
file and what is accepted, no traceback (HYDRA_FULL_ERROR unset), and no run presented as complete.
Rows the TF-free pre-flight (tfhydra/cli/preflight.py) catches must not even create the run directory; rows
marked slow need TensorFlow (files, shapes, devices) and are caught inside the job, before training.
The job's rows run as the command; the pre-flight's are answered by the pre-flight itself, in this process, as
main() calls it first (a few of them also through the command: `THROUGH_THE_COMMAND`).

A new row is one line: `bad(id, argv, fragments, setup=..., env=..., slow=...)`. `{tmp}` in argv and
env values is the test's tmp_path; `setup(tmp)` writes the row's real input files there.
"""

import json
from pathlib import Path

import data_files
import pytest
from conftest import ROOT, assert_failed_record, last_line, run_cli

# Offline on purpose: a proxy on a closed port makes any download attempt fail at once, even where the
# machine has network, and the Keras cache is an empty folder of the test's own.
OFFLINE = {
    "KERAS_HOME": "{tmp}/keras_home",
    "HOME": "{tmp}",
    "https_proxy": "http://127.0.0.1:9",
    "HTTPS_PROXY": "http://127.0.0.1:9",
    "no_proxy": "",
    "NO_PROXY": "",
}


# --- setups: the real files a row needs, written into tmp -------------------------------------------------


def a_file(tmp: Path) -> None:
    (tmp / "afile").write_text("a regular file where a directory is expected\n")


def npz(tmp: Path) -> None:
    data_files.write_npz(tmp / "d.npz", n_train=16, n_test=8, classes=4)


def csv_as_npz(tmp: Path) -> None:
    (tmp / "d.npz").write_text("x_train,y_train\n0,1\n")


def tfrecords(tmp: Path) -> None:
    data_files.write_tfrecords(tmp, "train", n=16, shards=2)


def corrupt_tfrecords(tmp: Path) -> None:
    tfrecords(tmp)
    data_files.damage_file(tmp / "train-00001-of-00002.tfrecord")


def table(tmp: Path) -> None:
    data_files.write_csv(tmp / "t.csv", n=24)


def numeric_target(tmp: Path) -> None:
    """A regression table as scikit-learn's diabetes is written out: a float target (151.0, 75.0, ...)."""
    rows = "".join(f"{i % 7 / 10},{i % 5},{float(25 + 3 * i)}\n" for i in range(40))
    (tmp / "t.csv").write_text("x1,x2,target\n" + rows)


def folder_as_csv(tmp: Path) -> None:
    (tmp / "t.csv").mkdir()


def binary_as_csv(tmp: Path) -> None:
    (tmp / "r.csv").write_bytes(bytes(range(256)) * 4)


def damaged_cifar_cache(tmp: Path) -> None:
    data_files.write_keras_cache(tmp / "keras", "cifar10")
    data_files.damage_file(tmp / "keras" / "datasets" / "cifar-10-batches-py" / "data_batch_3", "truncate")


PREFLIGHT = "pre-flight"  # decided by the config alone: answered by the run plan, before any directory exists
JOB = "in the job"  # needs the data, the machine or the user's code: found after TensorFlow is imported (slow)


def one_class_npz(tmp: Path) -> None:
    import numpy as np

    np.savez(tmp / "d.npz", x_train=np.zeros((16, 8, 8), np.uint8), y_train=np.zeros(16, np.uint8))


def nan_npz(tmp: Path) -> None:
    import numpy as np

    x = np.random.default_rng(0).random((16, 8, 8)).astype(np.float32)
    x[3, 2, 1] = np.nan
    np.savez(tmp / "d.npz", x_train=x, y_train=np.arange(16) % 2)


def empty_texts(tmp: Path) -> None:
    (tmp / "t.csv").write_text("text,label\n" + "".join(f"!!!,{'pos' if i % 2 else 'neg'}\n" for i in range(12)))


def mixed_size_tfrecords(tmp: Path) -> None:
    import tensorflow as tf

    records = []
    for seed, shape in enumerate([(8, 8, 1), (6, 6, 1)]):
        records += data_files.serialized_examples(*data_files.class_images(8, shape, 2, seed=seed))
    with tf.io.TFRecordWriter(str(tmp / "train-0.tfrecord")) as writer:
        for record in records:
            writer.write(record)


def bad(id, argv, fragments, setup=None, env=None, where=PREFLIGHT):
    return pytest.param(
        argv, fragments, setup, env or {}, where, id=id, marks=[pytest.mark.slow] if where == JOB else []
    )


SUBCLASSED = ["~model", "+model._target_=user_code.build_subclassed_net"]
ONE = "trainer.epochs=1"  # a row that reaches the job fails before training; if it did not, it stays short

BAD_INPUTS = [
    # unknown options, keys and groups
    bad(
        "model-option",
        ["model=cnnn"],
        ["model=cnnn", "no such model option", "cnn, keras_app, keras_hub, lstm, mlp, resnet, transformer"],
    ),
    bad(
        "data-option", ["data=imagenet"], ["data=imagenet", "no such data option", "digits", "image_folder", "tfrecord"]
    ),
    bad(
        "optimizer-option",
        ["optimizer=adamx"],
        [
            "optimizer=adamx",
            "no such optimizer option (did you mean adam",
            "one of adafactor, adam, adamw, lion, nadam, rmsprop, sgd",
        ],
    ),
    bad(
        "precision-option", ["precision=fp8"], ["precision=fp8", "no such precision option", "one of bf16, fp32, mixed"]
    ),
    bad(
        "strategy-option",
        ["strategy=tpu"],
        ["strategy=tpu", "no such strategy option", "mirrored, multi_worker, one_device"],
    ),
    bad(
        "compression-option",
        ["compression=distill"],
        ["compression=distill", "no such compression option", "prune_quantize"],
    ),
    bad(
        "launcher-option",
        ["-m", "hydra/launcher=slurm"],
        ["hydra/launcher=slurm", "no such hydra/launcher option", "joblib", "submitit_slurm"],
    ),
    bad(
        "sweeper-option",
        ["-m", "hydra/sweeper=nevergrad"],
        ["hydra/sweeper=nevergrad", "no such hydra/sweeper option", "optuna"],
    ),
    bad(
        "schedule-name",
        ["optimizer.schedule.name=linear"],
        ["optimizer.schedule.name=linear", "constant, cosine, exponential"],
    ),
    bad("group-typo", ["modle=cnn"], ["modle=cnn", "no such group or key (did you mean model?)", "optimizer"]),
    bad("group-typo-precision", ["precison=mixed"], ["precison=mixed", "(did you mean precision?)"]),
    bad("hydra-group-typo", ["-m", "hydra/launchr=joblib"], ["hydra/launchr=joblib", "did you mean hydra/launcher?"]),
    bad(
        "optimizer-key", ["optimizer.lrr=0.1"], ["optimizer.lrr=0.1", "unknown key", "lr", "beta_1", "+optimizer.lrr="]
    ),
    bad("trainer-key", ["trainer.epoch=3"], ["trainer.epoch=3", "unknown key", "a key of trainer", "epochs"]),
    bad("logging-key", ["logging.tensorbord=false"], ["logging.tensorbord=false", "unknown key", "tensorboard"]),
    bad(
        "strategy-key",
        ["strategy=mirrored", "strategy.device=/gpu:0"],
        ["strategy.device=/gpu:0", "unknown key", "devices"],
    ),
    bad(
        "augment-layer", ["data.augment=[{name:random_blur}]", ONE], ["data.augment[0].name=random_blur", "random_flip"]
    ),
    # mixup/cutmix train on mixed one-hot targets: classification, a crossentropy with a categorical twin, accuracy
    bad(
        "mixup-task",
        ["task=regression", "data.augment=[mixup]", ONE],
        ["data.augment[0].name=mixup", "task=regression trains on other labels", "task=classification only"],
    ),
    bad(
        "cutmix-loss",
        ["data.augment=[cutmix]", "trainer.loss=kld", ONE],
        ["trainer.loss=kld", "mixed one-hot targets", "sparse_categorical_crossentropy, or a _target_ node"],
    ),
    bad(
        "mixup-metric",
        ["data.augment=[mixup]", "trainer.metrics=[accuracy,sparse_top_k_categorical_accuracy]", ONE],
        ["trainer.metrics[1]=sparse_top_k_categorical_accuracy", "accepted: accuracy"],
    ),
    bad("mixup-alpha", ["data.augment=[{name:mixup,alpha:0}]", ONE], ["data.augment[0].alpha=0", "a number > 0"]),
    bad(
        "randaugment-argument",
        ["data.augment=[{name:randaugment,magnitude:11}]", ONE],
        ["data.augment[0].magnitude=11", "out of range", "[0, 10]"],
    ),
    # wrong types and unparsable values
    bad("lr-not-number", ["optimizer.lr=abc"], ["optimizer.lr=abc", "not a number", "a number > 0"]),
    bad("activation-type", ["model.activation=3"], ["model.activation=3", "not an accepted value", "relu"]),
    bad(
        "activation-name",
        ["model.activation=rellu"],
        ["model.activation=rellu", "not an accepted value (did you mean relu", "and 9 more"],
    ),
    bad(
        "arch-name",
        ["model=keras_app", "model.arch=MobileNetV5"],
        [
            "model.arch=MobileNetV5",
            "did you mean MobileNetV2",
            "more (all of them: model.arch in tfhydra/model/checks.py)",
        ],
    ),
    bad("seed-not-integer", ["trainer.seed=1.5"], ["trainer.seed=1.5", "not an integer", "an integer >= 0"]),
    bad(
        "tensorboard-type", ["logging.tensorboard=maybe"], ["logging.tensorboard=maybe", "wrong type", "true or false"]
    ),
    bad(
        "formats-not-list",
        ["export.formats=saved_model"],
        ["export.formats=saved_model", "a list", "saved_model, keras, tflite"],
    ),
    bad("unparsable", ["optimizer.lr=[1"], ["optimizer.lr=[1", "cannot parse", "Hydra's override syntax"]),
    bad(
        "run-dir-with-equals",
        ["hydra.run.dir={tmp}/lr=1e-3"],
        ["cannot parse it", "quote a value holding =", "(in the shell: \"hydra.run.dir='{tmp}/lr=1e-3'\")"],
    ),
    bad(
        "unknown-flag",
        ["trainer.epochs=1", "--multirunn"],
        ["--multirunn", "not understood", "flags such as -m before"],
    ),
    # out-of-range numbers and refused choices
    bad("lr-negative", ["optimizer.lr=-1"], ["optimizer.lr=-1", "out of range", "a number > 0"]),
    bad("batch-zero", ["data.batch_size=0"], ["data.batch_size=0", "out of range", "an integer >= 1"]),
    bad("fraction-zero", ["data.fraction=0"], ["data.fraction=0", "out of range", "a number in (0, 1]"]),
    bad("epochs-negative", ["trainer.epochs=-2"], ["trainer.epochs=-2", "out of range", "an integer >= 1"]),
    bad("clip-norm-zero", ["trainer.clip_norm=0"], ["trainer.clip_norm=0", "out of range", "null or a number > 0"]),
    bad(
        "clip-global-norm-negative",
        ["trainer.clip_global_norm=-1"],
        ["trainer.clip_global_norm=-1", "out of range", "null or a number > 0"],
    ),
    bad("save-every-zero", ["trainer.save_every=0"], ["trainer.save_every=0", "'epoch' or an integer >= 1"]),
    bad("loop-choice", ["trainer.loop=foo"], ["trainer.loop=foo", "one of fit, custom"]),
    bad("sweep-value", ["-m", "optimizer.lr=1e-3,-5"], ["optimizer.lr=-5", "out of range", "a number > 0"]),
    bad(
        "sparsity-one",
        ["compression=prune", "compression.target_sparsity=1.0"],
        ["compression.target_sparsity=1.0", "a number in [0, 1)"],
    ),
    bad(
        "clusters-one",
        ["compression=cluster", "compression.number_of_clusters=1"],
        ["compression.number_of_clusters=1", "an integer >= 2"],
    ),
    bad(
        "logical-cpus",
        ["strategy=mirrored", "strategy.logical_cpus=-1"],
        ["strategy.logical_cpus=-1", "out of range", "an integer >= 0"],
    ),
    bad(
        "update-freq",
        ["logging.update_freq=weekly"],
        ["logging.update_freq=weekly", "'epoch', 'batch' or an integer >= 1"],
    ),
    bad("profile-range", ["logging.profile_batch=[5,2]"], ["logging.profile_batch=[5, 2]", "1 <= start <= stop"]),
    bad(
        "export-format", ["export.formats=[coreml]"], ["export.formats=['coreml']", "saved_model, keras, tflite, onnx"]
    ),
    bad(
        "tflite-quantization",
        ["export.tflite.quantization=int4"],
        ["export.tflite.quantization=int4", "none, dynamic, float16, int8"],
    ),
    # empty lists
    bad("cnn-filters-empty", ["model.filters=[]"], ["model.filters=[]", "a list of at least 1 items"]),
    bad("mlp-units-empty", ["model=mlp", "model.units=[]"], ["model.units=[]", "a list of at least 1 items"]),
    bad("synthetic-shape-empty", ["data=synthetic", "data.shape=[]"], ["data.shape=[]", "a list of at least 1 items"]),
    bad(
        "tfrecord-train-empty",
        ["data=tfrecord", "data.train=[]"],
        ["data.train=[]", "a glob pattern of TFRecord files"],
    ),
    # missing files, and required keys left unset
    bad(
        "npz-missing",
        ["data=npz", "data.path={tmp}/no.npz"],
        ["data.path={tmp}/no.npz", "no such file or directory", "the path of an existing file"],
    ),
    bad("csv-missing", ["data=csv", "data.path={tmp}/no.csv"], ["data.path={tmp}/no.csv", "no such file or directory"]),
    bad(
        "image-folder-unset",
        ["data=image_folder"],
        ["data.path: not set (it is required)", "the path of an existing file or directory"],
    ),
    bad(
        "tfrecord-unset",
        ["data=tfrecord"],
        ["data.train: not set (it is required)", "a glob pattern of TFRecord files"],
    ),
    bad(
        "weights-missing",
        ["model=keras_app", "model.weights={tmp}/w.h5"],
        ["model.weights={tmp}/w.h5", "no such file", "imagenet"],
    ),
    bad(
        "from-run-missing",
        ["compression.from_run={tmp}/run0"],
        ["compression.from_run={tmp}/run0", "no such directory", "a completed run"],
    ),
    bad(
        "target-import",
        ["+model._target_=no_such_pkg.build"],
        ["model._target_=no_such_pkg.build", "cannot import", "importable dotted path"],
    ),
    bad(
        "target-with-option-keys",
        ["+model._target_=user_code.build_subclassed_net", ONE],
        ["model._target_=user_code.build_subclassed_net", "unexpected keyword argument 'name'", "~model"],
        where=JOB,
    ),
    bad(
        "head-does-not-fit-task",  # issue 55: the docs' softmax head under a regression trained nothing, "completed"
        [
            "~model",
            "+model._target_=user_code.build_tiny_model",
            "task=regression",
            "task.standardize=true",
            "data=csv",
            "data.path={tmp}/t.csv",
            "data.label=x1",
            "data.features=[x2,x3]",
            ONE,
        ],
        [
            "model._target_=user_code.build_tiny_model: its output (1 wide, softmax) does not fit the task's head "
            "(1 wide, linear: predictions, standardised targets scaled back): a softmax over one output is always 1.0",
            "`for layer in task_head(spec): x = layer(x)`, with `from tfhydra.model.head import task_head`",
        ],
        table,
        where=JOB,
    ),
    bad(
        "callback-import",
        ["trainer.callbacks=[{_target_:nope.Cb}]"],
        ["trainer.callbacks[0]._target_=nope.Cb", "cannot import"],
    ),
    # unwritable output directories (a regular file on the way: refused even for root)
    bad(
        "run-dir-under-file",
        ["hydra.run.dir={tmp}/afile/run"],
        ["hydra.run.dir={tmp}/afile/run", "{tmp}/afile is a file", "a path below a directory"],
        a_file,
    ),
    bad(
        "sweep-dir-under-file",
        ["-m", "optimizer.lr=1e-3", "hydra.sweep.dir={tmp}/afile/s"],
        ["hydra.sweep.dir={tmp}/afile/s", "is a file, not a directory"],
        a_file,
    ),
    bad(
        "cache-under-file",
        ["data.cache={tmp}/afile/c"],
        ["data.cache={tmp}/afile/c", "cannot create {tmp}/afile", "a path below a directory"],
        a_file,
    ),
    # unreadable and corrupt files (tests run as root: a file of the wrong format, or a directory, not chmod 000)
    bad(
        "npz-not-npz",
        ["data=npz", "data.path={tmp}/d.npz", ONE],
        ["{tmp}/d.npz: cannot read it", "not a zip archive", "a NumPy .npz file"],
        csv_as_npz,
        where=JOB,
    ),
    bad(
        "csv-is-directory",
        ["data=csv", "data.path={tmp}/t.csv", "model=mlp", ONE],
        ["{tmp}/t.csv: cannot read it", "a UTF-8 CSV file"],
        folder_as_csv,
        where=JOB,
    ),
    bad(
        "text-csv-binary",
        ["data=text_csv", "data.path={tmp}/r.csv", "model=lstm", ONE],
        ["{tmp}/r.csv: cannot read it", "is not UTF-8", "a UTF-8 CSV file"],
        binary_as_csv,
        where=JOB,
    ),
    bad(
        "image-folder-is-file",
        ["data=image_folder", "data.path={tmp}/afile", ONE],
        ["data.path={tmp}/afile", "not a directory", "class sub-folders"],
        a_file,
        where=JOB,
    ),
    bad(
        "tfrecord-corrupt",
        ["data=tfrecord", "data.train={tmp}/train-*.tfrecord", ONE],
        ["{tmp}/train-00001-of-00002.tfrecord: corrupt or truncated", "complete TFRecord files"],
        corrupt_tfrecords,
        where=JOB,
    ),
    bad(
        "tfrecord-no-match",
        ["data=tfrecord", "data.train={tmp}/val-*.tfrecord", ONE],
        ["data.train={tmp}/val-*.tfrecord", "no file matches it", "a glob pattern"],
        tfrecords,
        where=JOB,
    ),
    bad(
        "cifar10-damaged-cache",
        ["data=cifar10", ONE],
        ["{tmp}/keras/datasets/cifar-10-batches-py/data_batch_3: cannot read it", "a CIFAR python-version batch file"],
        damaged_cifar_cache,
        {"KERAS_HOME": "{tmp}/keras"},
        where=JOB,
    ),
    bad(
        "mnist-not-cached-offline",
        ["data=mnist", ONE],
        [
            "data=mnist",
            "could not be downloaded",
            "not in the Keras cache ({tmp}/keras_home/datasets/mnist.npz)",
            "data=npz data.path=",
        ],
        env=OFFLINE,
        where=JOB,
    ),
    # wrong feature keys and columns
    bad(
        "tfrecord-feature-key",
        ["data=tfrecord", "data.train={tmp}/train-*.tfrecord", "data.image_key=img", ONE],
        ["data.image_key=img", "no such feature", "one of image, label"],
        tfrecords,
        where=JOB,
    ),
    bad(
        "csv-label-column",
        ["data=csv", "data.path={tmp}/t.csv", "data.label=species", "model=mlp", ONE],
        ["data.label=species", "no such column in {tmp}/t.csv", "one of x1, x2, x3, label"],
        table,
        where=JOB,
    ),
    # labels that do not fit the task, read from the file without TensorFlow (a bounded sample: docs/tasks.md)
    bad(
        "csv-numeric-target-classification",
        ["data=csv", "data.path={tmp}/t.csv", "data.label=target", "model=mlp", ONE],
        ["{tmp}/t.csv (target column)", "40 distinct values", "use task=regression"],
        numeric_target,
    ),
    bad(
        "csv-class-names-regression",
        ["data=csv", "data.path={tmp}/t.csv", "task=regression", "model=mlp", ONE],
        ["{tmp}/t.csv (label column)", "class names", "task=regression takes numbers"],
        table,
    ),
    # shape and class-count mismatches between data and model
    bad(
        "digits-too-small-for-cnn",
        ["data.image_size=4", ONE],
        ["model.filters=[32, 64]", "too small", "at most 1 conv blocks for 4x4 images"],
        where=JOB,
    ),
    bad(
        "synthetic-vectors-to-cnn",
        ["data=synthetic", "data.shape=[8]", "model=cnn", ONE],  # model=auto would build the MLP for them
        ["model=cnn", "needs images", "shape (8,)", "image data"],
        where=JOB,
    ),
    bad(
        "images-to-lstm", ["model=lstm", ONE], ["model=lstm", "needs token ids", "(28, 28, 1)", "token data"], where=JOB
    ),
    bad(
        "npz-class-count",
        ["data=npz", "data.path={tmp}/d.npz", "data.num_classes=2", ONE],
        ["{tmp}/d.npz[y_train]", "outside [0, 2)", "integer labels in [0, 2)"],
        npz,
        where=JOB,
    ),
    # incompatible combinations
    bad(
        "compress-subclassed",
        [*SUBCLASSED, "compression=prune", ONE],
        ["compression=prune", "subclassed model (SubclassedNet)", "a Sequential or Functional model"],
        where=JOB,
    ),
    bad(
        "compress-mixed-precision",
        ["compression=quantize", "precision=mixed", ONE],
        ["precision=mixed", "precision=fp32 with compression=quantize"],
    ),
    bad(
        "int8-without-calibration",
        ["export.formats=[tflite]", "export.tflite.quantization=int8", "export.tflite.calibration_samples=0", ONE],
        ["export.tflite.calibration_samples=0", "calibrate", "a number of training examples >= 1"],
    ),
    bad(
        "batch-not-divisible",
        ["strategy=mirrored", "strategy.logical_cpus=2", "data.batch_size=33", ONE],
        ["data.batch_size=33", "not divisible", "a multiple of the 2 replicas"],
    ),
    bad(
        "monitor-not-logged",
        ["trainer.metrics=[]", ONE],
        ["trainer.monitor=val_accuracy", "not a metric this run logs", "one of loss, val_loss"],
    ),
    bad(
        "multi-worker-no-tf-config",
        ["strategy=multi_worker", ONE],
        ["TF_CONFIG", "it is not set", 'accepted: TF_CONFIG=\'{"cluster"'],
        env={"TF_CONFIG": ""},
        where=JOB,
    ),
    bad(
        "sweep-job-compress-mixed",
        ["-m", "compression=none,quantize", "precision=mixed"],
        ["precision=mixed", "precision=fp32 with compression=quantize"],
    ),
    bad(
        "loss-name",
        ["trainer.loss=sparse_categorical_crossentropyy"],
        [
            "trainer.loss=sparse_categorical_crossentropyy",
            "unknown loss",
            "did you mean sparse_categorical_crossentropy",
        ],
    ),
    bad(
        "metric-name",
        ["trainer.metrics=[acuracy]"],
        ["trainer.metrics[0]=acuracy", "unknown metric", "did you mean accuracy"],
    ),
    bad(
        "early-stopping-monitor",
        ["trainer.early_stopping.patience=2", "trainer.early_stopping.monitor=val_acc"],
        ["trainer.early_stopping.monitor=val_acc", "not a metric this run logs", "val_accuracy"],
    ),
    bad(
        "sweep-interval-basic",
        ["-m", "optimizer.lr=interval(0.1,1)"],
        ["optimizer.lr=interval(0.1,1)", "the basic sweeper cannot expand it", "hparams_search=optuna"],
    ),
    bad("sweep-no-job", ["-m", "optimizer.lr=range(0)"], ["optimizer.lr=range(0)", "the sweep expands to no job"]),
    bad(
        "several-values-without-m",
        ["optimizer.lr=1e-3,1e-4"],
        ["optimizer.lr=1e-3,1e-4", "several values without -m", "python train.py -m optimizer.lr=1e-3,1e-4"],
    ),
    # k-fold as a sweep (issue 59, item 4; docs/sweeps.md "k-fold"): what it cannot combine with
    bad("folds-without-m", ["sweep.folds=5"], ["sweep.folds=5", "k-fold runs one job per fold", "-m before"]),
    bad("folds-several", ["-m", "sweep.folds=3,5"], ["sweep.folds=3,5", "several values", "one value"]),
    bad(
        "folds-shipped-validation",
        ["-m", "data=synthetic", "sweep.folds=3"],
        ["sweep.folds=3", "data=synthetic draws its own validation examples", "nothing to fold"],
    ),
    bad(
        "folds-optuna",
        ["-m", "hparams_search=optuna", "sweep.folds=3"],
        ["sweep.folds=3", "hydra/sweeper=tfhydra_optuna does not draw folds", "tfhydra_basic"],
    ),
    bad(
        "folds-promote",
        ["-m", "optimizer.lr=1e-3,1e-4", "sweep.folds=3", "sweep.promote=1", "sweep.screen.epochs=1"],
        ["sweep.folds=3", "screen-then-promote would rank one fold's screen", "sweep.promote=null"],
    ),
    bad(
        "folds-beyond-a-class",
        ["-m", "data=csv", "data.path={tmp}/t.csv", "sweep.folds=8"],
        ["data.folds=8", "class setosa has 8 examples (at least one goes to the test split)", "at most 7 folds"],
        table,
    ),
    bad("folds-and-fold", ["-m", "sweep.folds=3", "data.fold=1"], ["data.fold=1", "set with sweep.folds"]),
    bad("fold-alone", ["data.fold=1"], ["data.fold=1", "set without the other", "data.folds=K"]),
    bad("fold-beyond-folds", ["data.folds=3", "data.fold=3"], ["data.fold=3", "no such fold", "[0, 2]"]),
    bad("run-dir-is-cwd", ["hydra.run.dir=."], ["hydra.run.dir=.", "it is the directory the command runs in"]),
    bad("interpolation-unresolved", ["trainer.monitor=${nope}"], ["trainer.monitor", "cannot resolve it"]),
    bad("deleted-key", ["~trainer.loss"], ["~trainer.loss", "a key tfhydra needs was deleted"]),
    bad("deleted-group", ["~model"], ["model: missing", "a model option"]),
    # issue 24: a deleted group whose shared keys stay (conf/tfhydra.yaml) is no option, not a builder's traceback
    bad("deleted-data-group", ["~data"], ["data: no data option: deleted with ~data", "a data option (conf/data/)"]),
    bad("deleted-optimizer-group", ["~optimizer"], ["optimizer: no optimizer option", "an optimizer option"]),
    bad("deleted-compression-group", ["~compression"], ["compression: no compression option", "+compression._target_"]),
    bad(
        "glob-matches-nothing",
        ["-m", "model=glob(zz*)"],
        ["model=glob(zz*): it matches no option, so the sweep has no job", "cnn, keras_app, keras_hub, lstm, mlp"],
    ),
    bad(
        "schedule-floor-above-peak",
        ["optimizer.schedule.name=cosine", "optimizer.schedule.min_lr=0.1"],
        ["optimizer.schedule.min_lr=0.1", "the floor is above the peak rate"],
    ),
    bad(
        "piecewise-decreasing",
        ["optimizer.schedule.name=piecewise", "optimizer.schedule.boundaries_epochs=[15,10]"],
        ["optimizer.schedule.boundaries_epochs=[15, 10]", "decreasing"],
    ),
    bad(
        "integer-io-without-int8",
        ["export.formats=[tflite]", "export.tflite.integer_io=true"],
        ["export.tflite.integer_io=true", "int8 input and output need an int8 model"],
    ),
    bad(
        "npz-one-class",
        [
            "data=npz",
            "data.path={tmp}/d.npz",
            "data.x_val=null",
            "data.y_val=null",
            "data.x_test=null",
            "data.y_test=null",
            ONE,
        ],
        ["data=npz", "the training split holds 1 class(es)"],
        one_class_npz,
        where=JOB,
    ),
    bad(
        "npz-nan",
        [
            "data=npz",
            "data.path={tmp}/d.npz",
            "data.x_val=null",
            "data.y_val=null",
            "data.x_test=null",
            "data.y_test=null",
            ONE,
        ],
        ["{tmp}/d.npz[x_train]", "the first at index [3, 2, 1]", "finite numbers"],
        nan_npz,
        where=JOB,
    ),
    bad(
        "text-csv-no-words",
        ["data=text_csv", "data.path={tmp}/t.csv", "model=lstm", ONE],
        ["{tmp}/t.csv (text column)", "no word to learn a vocabulary from"],
        empty_texts,
        where=JOB,
    ),
    bad(
        "tfrecord-sizes-differ",
        ["data=tfrecord", "data.train={tmp}/train-*.tfrecord", "model.filters=[4]", ONE],
        ["data=tfrecord", "the input pipeline failed while training"],
        mixed_size_tfrecords,
        where=JOB,
    ),
    bad(
        "tf-config-not-json",
        ["strategy=multi_worker", ONE],
        ["TF_CONFIG='{not json'", "not valid JSON", "accepted: TF_CONFIG="],
        env={"TF_CONFIG": "{not json"},
        where=JOB,
    ),
]


def test_the_table_covers_at_least_40_bad_inputs():
    assert len(BAD_INPUTS) >= 40
    ids = [param.id for param in BAD_INPUTS]
    assert len(set(ids)) == len(ids)


def test_every_row_says_where_it_is_caught():
    assert {param.values[4] for param in BAD_INPUTS} == {PREFLIGHT, JOB}


# Pre-flight rows also run as the command, end to end: main() hands the pre-flight's line to the user and stops before
# Hydra (a single run, a sweep, a flag, a row with a file). Every pre-flight row is answered in-process below, where
# the room is: `check_command_line`, which main() calls first with the same argv.
THROUGH_THE_COMMAND = {"model-option", "sweep-value", "unknown-flag", "run-dir-under-file"}
COMMAND_ROWS = [row for row in BAD_INPUTS if row.values[4] == JOB or row.id in THROUGH_THE_COMMAND]
PREFLIGHT_ROWS = [row for row in BAD_INPUTS if row.values[4] == PREFLIGHT]


def command_line(argv: list[str], tmp_path: Path) -> tuple[list[str], Path, Path]:
    """The row's argv as a user types it (flags first: argparse wants them before the overrides), with the test's
    run and sweep directories."""
    run_dir, sweep_dir = tmp_path / "run", tmp_path / "sweep"
    flags = [arg for arg in argv if arg in ("-m", "--multirun")]
    filled = [arg.replace("{tmp}", str(tmp_path)) for arg in argv if arg not in flags]
    return [*flags, f"hydra.run.dir={run_dir}", f"hydra.sweep.dir={sweep_dir}", *filled], run_dir, sweep_dir


def assert_one_line_and_nothing_complete(tmp_path: Path, returncode: int, stderr: str, fragments: list[str]) -> str:
    message = last_line(stderr)
    assert returncode != 0, stderr[-2000:]
    assert message.startswith("Error: "), stderr[-2000:]
    for fragment in (f.replace("{tmp}", str(tmp_path)) for f in fragments):
        assert fragment in message, (fragment, message)
    assert "Traceback" not in stderr
    completed = [p for p in tmp_path.rglob("metrics.json") if json.loads(p.read_text()).get("status") == "completed"]
    assert completed == [] and not list(tmp_path.rglob("export")), "a failed run must not look complete"
    return message


def test_every_row_through_the_command_is_a_row():
    assert THROUGH_THE_COMMAND <= {row.id for row in PREFLIGHT_ROWS}


@pytest.mark.parametrize("argv,fragments,setup,env,where", COMMAND_ROWS)
def test_bad_input_is_one_line_and_leaves_no_completed_run(tmp_path, argv, fragments, setup, env, where):
    if setup is not None:
        setup(tmp_path)
    args, run_dir, sweep_dir = command_line(argv, tmp_path)
    result = run_cli(*args, env={key: value.replace("{tmp}", str(tmp_path)) for key, value in env.items()})

    message = assert_one_line_and_nothing_complete(tmp_path, result.returncode, result.stderr, fragments)
    if where == PREFLIGHT:  # the run plan answers before Hydra creates anything, without TensorFlow
        assert not run_dir.exists() and not sweep_dir.exists()
    else:  # found in the job: the run's record says failed, with the same line
        assert_failed_record(run_dir, message.removeprefix("Error: "))


@pytest.mark.parametrize("argv,fragments,setup,env,where", PREFLIGHT_ROWS)
def test_the_preflight_answers_a_bad_input_in_one_line_before_anything_exists(
    tmp_path, monkeypatch, capsys, argv, fragments, setup, env, where
):
    """The pre-flight as main() calls it (tfhydra/__main__.py), in this process: exit 1, one `Error:` line last on
    stderr, and no run or sweep directory (Hydra, which would create them, is never reached)."""
    from hydra.core.global_hydra import GlobalHydra

    from tfhydra.cli.preflight import check_command_line
    from tfhydra.config.project import CONFIG_DIR, project_config_dir

    assert env == {} and where == PREFLIGHT
    if setup is not None:
        setup(tmp_path)
    monkeypatch.chdir(ROOT)  # where run_cli runs the command
    GlobalHydra.instance().clear()  # the pre-flight leaves a Hydra app that is already running alone
    args, run_dir, sweep_dir = command_line(argv, tmp_path)
    with pytest.raises(SystemExit) as stopped:
        check_command_line(project_config_dir(args) or CONFIG_DIR, argv=args)
    assert_one_line_and_nothing_complete(tmp_path, stopped.value.code, capsys.readouterr().err, fragments)
    assert stopped.value.code == 1
    assert not run_dir.exists() and not sweep_dir.exists()
