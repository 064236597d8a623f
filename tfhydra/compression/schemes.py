"""The registered schemes: the TensorFlow Model Optimization Toolkit (tfmot) on tf_keras.

Every scheme but `none` needs a Sequential or Functional model: tfmot clones the model's
graph of layers, which a subclassed model does not have. A model tfmot refuses is one
ConfigError line naming the layer, raised when the scheme is applied, before training.
Keys and examples: docs/compression.md.

`keras` in this room is the run's (tfhydra/platform/keras_lib.py): tf_keras for every scheme but `none`, since
`keras=3` with a scheme is refused before anything runs. A `keras=3` run reaches `none` and the sparsity figures
only, and so never imports tf_keras beside Keras 3 (0.2 s of CPU, docs/performance.md).
"""

from __future__ import annotations

import contextlib
import logging
import math
import re
from collections.abc import Iterator

from omegaconf import DictConfig, OmegaConf

from tfhydra.compression.outputs import annotated, fixed_outputs, keeping_policy, prunable
from tfhydra.compression.plan import SHARED_KEYS
from tfhydra.compression.schemas import (
    ClusterCompressionConfig,
    ClusterQuantizeCompressionConfig,
    CompressionConfig,
    PruneCompressionConfig,
    PruneQuantizeCompressionConfig,
)
from tfhydra.compression.toolkit import clustering_api, combine, quantization_api, sparsity_api
from tfhydra.config.contracts import Compression, Phase
from tfhydra.config.errors import ConfigError
from tfhydra.config.registry import Registry
from tfhydra.platform.keras_lib import keras
from tfhydra.platform.private_api import is_functional

COMPRESSIONS = Registry("compression", locations=["tfhydra.compression.schemes"])  # the schemes below
log = logging.getLogger("tfhydra")


def build_scheme(cfg_compression: DictConfig, model: keras.Model, spec, phase: Phase) -> Compression:
    if "_target_" in cfg_compression:  # a user's scheme gets its own keys only
        own = [str(k) for k in cfg_compression if k not in SHARED_KEYS]
        cfg_compression = OmegaConf.masked_copy(cfg_compression, own)
    compression = COMPRESSIONS.build(cfg_compression, model=model, spec=spec, phase=phase)
    if not isinstance(compression, Compression):
        raise ConfigError(
            "compression._target_",
            cfg_compression.get("_target_"),
            "a callable returning a tfhydra.config.contracts.Compression",
            f"it returned {type(compression).__name__}",
        )
    compression.scheme = cfg_compression.get("name") or cfg_compression.get("_target_")
    if compression.measure is Compression.measure:  # the figures every scheme reports, unless it says more
        compression.measure = sparsity_figures
    return compression


def sparsity_figures(deployable: keras.Model) -> dict:
    """metrics.json's `compression` figures, measured on the stripped weights."""
    from tfhydra.compression.measure import sparsity

    return {"sparsity": sparsity(deployable)}


def cluster_figures(deployable: keras.Model) -> dict:
    from tfhydra.compression.measure import distinct_values

    return {**sparsity_figures(deployable), "distinct_values": distinct_values(deployable)}


@COMPRESSIONS.register("none", schema=CompressionConfig)
def build_none(cfg, model: keras.Model, spec, phase: Phase) -> Compression:
    return Compression(model)


@COMPRESSIONS.register("prune", schema=PruneCompressionConfig)
def build_prune(cfg, model: keras.Model, spec, phase: Phase) -> Compression:
    require_layer_graph(model, "prune")
    schedule, settled_epoch = pruning_schedule(cfg, phase)
    blocks = {"block_size": tuple(cfg.block_size)} if cfg.get("block_size") else {}
    policy = keeping_policy(fixed_outputs(model, prunable))  # a regression's fixed rescaling: kept (outputs.py)
    with toolkit_errors("prune"):
        pruned = sparsity_api.prune_low_magnitude(model, pruning_schedule=schedule, pruning_policy=policy, **blocks)
    callbacks = [sparsity_api.UpdatePruningStep()]  # starts the wrappers' step counter; re-masks at each epoch end
    if phase.log_dir is not None:
        callbacks.append(SparsitySummaries(str(phase.log_dir)))
    return Compression(pruned, callbacks, strip=sparsity_api.strip_pruning, settled_epoch=settled_epoch)


@COMPRESSIONS.register("cluster", schema=ClusterCompressionConfig)
def build_cluster(cfg, model: keras.Model, spec, phase: Phase) -> Compression:
    require_layer_graph(model, "cluster")
    init = clustering_api.CentroidInitialization[cfg.centroids_init.upper()]
    with toolkit_errors("cluster"):
        clustered = clustering_api.cluster_weights(
            model, number_of_clusters=cfg.number_of_clusters, cluster_centroids_init=init
        )
    return Compression(clustered, strip=clustering_api.strip_clustering, measure=cluster_figures)


@COMPRESSIONS.register("quantize", schema=CompressionConfig)
def build_quantize(cfg, model: keras.Model, spec, phase: Phase) -> Compression:
    return quantization_aware("quantize", model, quantization_api.default_8bit.Default8BitQuantizeScheme())


@COMPRESSIONS.register("prune_quantize", schema=PruneQuantizeCompressionConfig)
def build_prune_quantize(cfg, model: keras.Model, spec, phase: Phase) -> Compression:
    """The last phase of prune_quantize: QAT that keeps the zeros of the model pruned in the phase before."""
    return quantization_aware("prune_quantize", model, combine.Default8BitPrunePreserveQuantizeScheme())


@COMPRESSIONS.register("cluster_quantize", schema=ClusterQuantizeCompressionConfig)
def build_cluster_quantize(cfg, model: keras.Model, spec, phase: Phase) -> Compression:
    """The last phase of cluster_quantize: QAT that keeps the clusters of the model clustered in the phase before."""
    scheme = combine.Default8BitClusterPreserveQuantizeScheme(preserve_sparsity=False)
    return quantization_aware(
        "cluster_quantize",
        model,
        scheme,
        callbacks=[CentroidGradientsExpected()],
        strip=combine.strip_clustering_cqat,
        measure=cluster_figures,
    )


def quantization_aware(name: str, model: keras.Model, scheme, **compression) -> Compression:
    require_layer_graph(model, name, nested=False)
    with toolkit_errors(name):
        trained = quantization_api.quantize_apply(annotated(model, scheme), scheme)
    return Compression(trained, float_twin=latent_weights_into(model), quantization_aware=True, **compression)


def latent_weights_into(base: keras.Model):
    """deployable QAT model -> `base` (the float model QAT started from) holding the trained float weights.

    A QuantizeWrapper owns the float variables of the layer it wraps (`conv2d/kernel`, beside its
    own `quant_conv2d/kernel_min` ...); the TFLite float32 reference is converted from them.
    """

    def twin(deployable: keras.Model) -> keras.Model:
        wrappers = {getattr(layer, "layer", layer).name: layer for layer in deployable.layers}
        for layer in base.layers:
            wrapper = wrappers.get(layer.name)
            own = f"{wrapper.name}/" if wrapper is not None and hasattr(wrapper, "layer") else None
            trained = {
                w.name.split("/")[-1]: w
                for w in (wrapper.weights if wrapper is not None else [])
                if not (own and w.name.startswith(own))
            }
            for weight in layer.weights:
                source = trained.get(weight.name.split("/")[-1])
                if source is None or source.shape != weight.shape:
                    log.warning(
                        "float32 reference: %s keeps its value from before quantization-aware training", weight.name
                    )
                    continue
                weight.assign(source)
        return base

    return twin


def pruning_schedule(cfg, phase: Phase):
    """tfmot's schedule, and the first epoch (0-based) that ends with the target sparsity in place.

    Steps are optimizer steps from the start of this phase. The wrappers count their own training
    calls, so `trainer.steps_per_execution` and the custom loop count the same steps. tfmot updates
    the masks at the steps `begin + k * frequency` (the first training step is 1): a frequency
    longer than the pruning window is shortened to it (a short debug run still prunes), and a
    polynomial schedule's end is moved back to the last such step, so the target is reached.
    """
    polynomial = cfg.schedule == "polynomial"
    begin = boundary(cfg, "begin", phase, default=0)
    assert begin is not None  # default=0
    end = boundary(cfg, "end", phase, default=phase.steps if polynomial else None)
    stop = end if end is not None else phase.steps  # a polynomial schedule's end: never None (its default)
    if polynomial and stop <= begin:
        raise ConfigError(
            "compression",
            cfg.name,
            "a pruning that ends after it begins",
            f"it begins at step {begin} and ends at step {end}",
        )
    window = (stop if polynomial else phase.steps) - begin
    frequency = min(cfg.frequency, window) if window > 0 else cfg.frequency
    if frequency < cfg.frequency:
        log.warning(
            "compression.frequency=%d is longer than the %d steps of the pruning: masks are updated every %d",
            cfg.frequency,
            window,
            frequency,
        )
    if polynomial:
        end = begin + (stop - begin) // frequency * frequency
        schedule = sparsity_api.PolynomialDecay(
            cfg.initial_sparsity, cfg.target_sparsity, begin, end, frequency=frequency
        )
        reached = end
    else:
        schedule = sparsity_api.ConstantSparsity(
            cfg.target_sparsity, begin, -1 if end is None else end, frequency=frequency
        )
        reached = begin if begin > 0 else frequency
    if reached > phase.steps:
        raise ConfigError(
            "compression",
            cfg.name,
            f"a pruning that reaches its target within the {phase.steps} "
            f"training steps ({phase.epochs} epochs of {phase.steps_per_epoch})",
            f"the first step at target sparsity would be step {reached}",
        )
    return schedule, math.ceil(reached / phase.steps_per_epoch) - 1


def boundary(cfg, which: str, phase: Phase, default: int | None) -> int | None:
    """`<which>_step`, or `<which>_epoch` in steps (the real steps per epoch); not both."""
    step, epoch = cfg.get(f"{which}_step"), cfg.get(f"{which}_epoch")
    if step is not None and epoch is not None:
        raise ConfigError(
            f"compression.{which}_epoch",
            epoch,
            f"null when compression.{which}_step is set",
            f"{which}_step and {which}_epoch both given",
        )
    if epoch is not None:
        return round(epoch * phase.steps_per_epoch)
    return default if step is None else step


class SparsitySummaries(keras.callbacks.Callback):
    """tfmot's `PruningSummaries` curves (sparsity and threshold of every mask, at the optimizer step) under
    `tensorboard/pruning/metrics`, at the start of training and the end of every epoch.

    PruningSummaries itself logs when an epoch begins, so the last epoch's sparsity never shows, and
    as a TensorBoard subclass it writes a second copy of the losses; only its logging is used here.
    """

    def __init__(self, log_dir: str):
        super().__init__()
        self.summaries = sparsity_api.PruningSummaries(log_dir, write_graph=False, profile_batch=0)

    def set_model(self, model):
        super().set_model(model)
        self.summaries.set_model(model)

    def on_train_begin(self, logs=None):
        self.summaries.on_epoch_begin(0)  # without logs it writes the pruning scalars only

    def on_epoch_end(self, epoch, logs=None):
        self.summaries.on_epoch_begin(epoch + 1)


class CentroidGradientsExpected(keras.callbacks.Callback):
    """A logging filter while training: drop the optimizer's warning that the kernels have no gradient (16 lines a run).

    Cluster-preserving QAT trains the centroids and rebuilds each kernel from them, so the kernel
    variables get no gradient by design.
    """

    def on_train_begin(self, logs=None):
        logging.getLogger("tensorflow").addFilter(self)

    def on_train_end(self, logs=None):
        logging.getLogger("tensorflow").removeFilter(self)

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith("Gradients do not exist for variables")


def require_layer_graph(model: keras.Model, scheme: str, nested: bool = True) -> None:
    if not isinstance(model, keras.Sequential) and not is_functional(model):
        raise ConfigError(
            "compression",
            scheme,
            "a Sequential or Functional model (every tfhydra model option is one), or compression=none",
            "the Model Optimization Toolkit supports Sequential and "
            f"Functional models only; model {model.name} is a subclassed model ({type(model).__name__})",
        )
    own = [name for name in ("train_step", "test_step") if getattr(type(model), name) is not getattr(keras.Model, name)]
    if own:  # tfmot rebuilds the model as a plain Functional one: the class, and so its own step, would be lost
        raise ConfigError(
            "compression",
            scheme,
            "compression=none for a model with its own train_step/test_step",
            f"the Model Optimization Toolkit rebuilds model {model.name} as a plain Functional model, "
            f"which would drop {type(model).__name__}'s own {' and '.join(own)}",
        )
    inner = next((layer for layer in model.layers if isinstance(layer, keras.Model)), None)
    if not nested and inner is not None:
        raise ConfigError(
            "compression",
            scheme,
            "a model without models inside it, or compression=prune|cluster",
            f"layer {inner.name} ({type(inner).__name__}) is a model inside the model, which "
            "the 8-bit scheme cannot quantize",
        )


_UNSUPPORTED = re.compile(r"Layer (?P<name>[^:\s]+):<class '(?P<type>[\w.]+)'> is not supported")


@contextlib.contextmanager
def toolkit_errors(scheme: str) -> Iterator[None]:
    """tfmot refuses a model it cannot wrap with a ValueError or RuntimeError: make it one line naming the layer."""
    try:
        yield
    except (ValueError, RuntimeError) as error:
        unsupported = _UNSUPPORTED.search(str(error))
        if unsupported:
            raise ConfigError(
                "compression",
                scheme,
                "a model whose layers the 8-bit scheme supports (Conv, Dense, "
                "pooling, BatchNormalization after a convolution, ...), or compression=prune|cluster",
                f"layer {unsupported['name']} ({unsupported['type'].rsplit('.', 1)[-1]}) cannot be "
                "quantized by the 8-bit scheme",
            ) from error
        raise ConfigError(
            "compression",
            scheme,
            "a model of Keras layers the toolkit supports, or compression=none",
            f"the Model Optimization Toolkit cannot apply it ({str(error).splitlines()[0]})",
        ) from error
