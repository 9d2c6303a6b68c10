"""Configuration of one analytical-model run: model, parallelism, platform, mapping.

Why: every model function (traffic, time terms, rank mapping, calibration, what-if search)
needs the same description of a training job. This module fixes that description as frozen,
hashable dataclasses, so results can be cached per configuration. It also owns the one TOML
layout that the model, the synthetic-run generator and ``commscope ingest --config`` share.

The only I/O in the model package is :func:`load_config`, which reads a TOML file.
:func:`config_from_dict` and :func:`config_to_dict` convert to and from plain dicts of the
same layout, so a run's configuration can be stored as JSON next to its logs.

TOML layout (every section but ``[model]`` and ``[parallel]`` is optional)::

    [model]        # what is trained
    name = "GPT-3B"
    layers = 54            # l, transformer blocks
    hidden = 2000          # h
    seq = 1024             # s, tokens per sequence
    vocab = 50257          # V, before Megatron's padding
    global_batch = 1024    # gb, sequences per iteration
    micro_batch = 32       # b, sequences per micro-batch
    # micro_batches = 8    # m; derived as gb / (b * dp) when left out
    precision = "fp16"     # fp16 | bf16 | fp32 (bytes per element 2/2/4)
    # heads, vocab_divisible_by, recompute, position_embeddings, tied_embeddings,
    # experts, top_k, moe_every, capacity_factor: see ModelConfig

    [parallel]     # how it is split
    pp = 4   tp = 2   dp = 4
    # ep, zero_stage, sequence_parallel, pipe_partitioned, zero_grad_allreduce,
    # partitioner, layers_per_stage, dp_bucket_elements: see ParallelConfig

    [platform]     # where it runs
    peak_flops = 71e12     # F, FLOP/s
    mu = 0.3               # achieved / peak
    c_tp = 6e9             # B/s, bus bandwidth of TP all-reduces
    # c_pp, c_dp, c_ep, c_intra, c_inter, gpus_per_node, gpu_memory_gib: see Platform

    [mapping]      # rank numbering
    order = ["pipe", "data", "model"]   # outermost axis first; or preset = "customized"

The same file may carry the synthetic generator's ``[generate]`` and ``[scenario]`` sections
(``synthetic/scenario.py``): the model ignores them (``GENERATOR_SECTIONS``), so one
file serves ``predict``, ``advise``, ``generate``, ``ingest`` and ``derive``. The commands check
those sections, and every key, with the file's name in the message
(``pipeline/config_schema.py``); here an unknown section or key is a ``ValueError``.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

#: Bytes per element for each supported training precision.
PRECISION_BYTES: dict[str, int] = {"fp16": 2, "bf16": 2, "fp32": 4}

#: Axis names of a parallel layout, in DeepSpeed's vocabulary.
AXES: tuple[str, str, str] = ("pipe", "data", "model")

#: DeepSpeed's default ``PipeModelDataParallelTopology`` order (rank = stage*d*t + dp*t + tp).
DEFAULT_ORDER: tuple[str, str, str] = ("pipe", "data", "model")

#: The paper's Fig. 12 "customized" mapping (rank = dp*p*t + stage*t + tp); assumed, see spec A.6.
CUSTOMIZED_ORDER: tuple[str, str, str] = ("data", "pipe", "model")

MAPPING_PRESETS: dict[str, tuple[str, str, str]] = {
    "default": DEFAULT_ORDER,
    "deepspeed": DEFAULT_ORDER,
    "customized": CUSTOMIZED_ORDER,
    "fig12": CUSTOMIZED_ORDER,
}

_AXIS_ALIASES: dict[str, str] = {
    "pipe": "pipe",
    "pp": "pipe",
    "pipeline": "pipe",
    "data": "data",
    "dp": "data",
    "model": "model",
    "tp": "model",
    "tensor": "model",
}

PARTITIONERS: tuple[str, str] = ("old", "new")


def _require(condition: bool, message: str) -> None:
    """Raise ``ValueError(message)`` unless ``condition`` holds."""
    if not condition:
        raise ValueError(message)


def normalize_order(order: str | Sequence[str]) -> tuple[str, str, str]:
    """Turn a mapping preset name or an axis list into a canonical axis order.

    Args:
        order: ``"default"``/``"customized"`` (and aliases), or a permutation of the three
            axes, outermost (slowest-varying) first, as a sequence or a string separated by
            commas, spaces or ``-`` (``"data-pipe-model"``). ``pp/tp/dp`` and ``tensor`` are accepted
            as aliases of DeepSpeed's ``pipe/model/data``.

    Returns:
        The order as a tuple of ``"pipe"``, ``"data"``, ``"model"``.

    Raises:
        ValueError: unknown preset or axis, or not a permutation of the three axes.
    """
    if isinstance(order, str):
        key = order.strip().lower()
        if key in MAPPING_PRESETS:
            return MAPPING_PRESETS[key]
        order = [part for part in key.replace(",", " ").replace("-", " ").split() if part]
    names: list[str] = []
    for part in order:
        alias = _AXIS_ALIASES.get(str(part).strip().lower())
        _require(alias is not None, f"unknown mapping axis {part!r}; use pipe, data or model")
        names.append(str(alias))
    _require(
        sorted(names) == sorted(AXES),
        f"mapping order must name each of {AXES} once, got {list(order)}",
    )
    return (names[0], names[1], names[2])


@dataclass(frozen=True)
class ModelConfig:
    """A GPT-style transformer and its batch settings.

    Attributes:
        layers: transformer blocks, l.
        hidden: hidden size, h.
        seq: sequence length, s.
        vocab: vocabulary size V before padding (GPT-2 BPE: 50257).
        global_batch: sequences per iteration, gb.
        micro_batch: sequences per micro-batch, b.
        micro_batches: micro-batches per iteration, m; ``None`` derives gb / (b * dp).
        precision: ``fp16``, ``bf16`` or ``fp32``; sets the bytes per element δ.
        name: label used in reports.
        heads: attention heads; only the memory estimate and TP validity use it
            (``None``: assume h / 64).
        vocab_divisible_by: Megatron's ``--make-vocab-size-divisible-by``; V is padded to a
            multiple of this times tp.
        recompute: full activation recompute (the paper's default): 6 instead of 4 TP
            all-reduces per layer and micro-batch, 8 instead of 6 FLOPs per parameter and token.
        position_embeddings: learned position embeddings (s * h parameters on the embedding
            stages).
        tied_embeddings: input and output embeddings share one weight, synchronised between
            the first and last stage (the paper's EmbTableSyn traffic).
        experts: MoE experts per MoE layer; 0 for a dense model.
        top_k: experts per token (gating top-k).
        moe_every: every ``moe_every``-th layer (1-based numbering) is an MoE layer.
        capacity_factor: expert capacity factor of the gate.
    """

    layers: int
    hidden: int
    seq: int
    vocab: int
    global_batch: int
    micro_batch: int
    micro_batches: int | None = None
    precision: str = "fp16"
    name: str = "model"
    heads: int | None = None
    vocab_divisible_by: int = 128
    recompute: bool = True
    position_embeddings: bool = True
    tied_embeddings: bool = True
    experts: int = 0
    top_k: int = 1
    moe_every: int = 1
    capacity_factor: float = 1.0

    def __post_init__(self) -> None:
        """Reject sizes that cannot describe a model."""
        for name in ("layers", "hidden", "seq", "vocab", "global_batch", "micro_batch"):
            _require(int(getattr(self, name)) >= 1, f"model.{name} must be >= 1")
        _require(self.micro_batches is None or self.micro_batches >= 1, "micro_batches >= 1")
        _require(
            self.precision in PRECISION_BYTES,
            f"model.precision must be one of {sorted(PRECISION_BYTES)}, got {self.precision!r}",
        )
        _require(self.heads is None or self.heads >= 1, "model.heads must be >= 1")
        _require(self.vocab_divisible_by >= 1, "model.vocab_divisible_by must be >= 1")
        _require(self.experts >= 0, "model.experts must be >= 0")
        _require(self.top_k >= 1, "model.top_k must be >= 1")
        _require(self.experts == 0 or self.top_k <= self.experts, "top_k must be <= experts")
        _require(self.moe_every >= 1, "model.moe_every must be >= 1")
        _require(self.capacity_factor > 0, "model.capacity_factor must be > 0")

    @property
    def dtype_bytes(self) -> int:
        """Bytes per element δ of activations, parameters and gradients."""
        return PRECISION_BYTES[self.precision]

    @property
    def num_heads(self) -> int:
        """Attention heads, defaulting to h / 64 when not given."""
        return self.heads if self.heads is not None else max(1, self.hidden // 64)

    @property
    def is_moe(self) -> bool:
        """Whether the model has expert layers."""
        return self.experts > 0

    def is_moe_layer(self, index: int) -> bool:
        """Whether 0-based transformer layer ``index`` is an MoE layer."""
        return self.is_moe and (index + 1) % self.moe_every == 0


@dataclass(frozen=True)
class ParallelConfig:
    """The parallel layout of a job (PTD-P plus the options that change its traffic).

    Attributes:
        pp: pipeline stages p.
        tp: tensor-parallel size t.
        dp: data-parallel size d.
        ep: expert-parallel size (divides dp; MoE only).
        zero_stage: DeepSpeed ZeRO stage 0-3 for the data-parallel traffic.
        sequence_parallel: Megatron sequence parallelism: each TP all-reduce becomes an
            all-gather plus a reduce-scatter, and PP messages shrink to A / t.
        pipe_partitioned: DeepSpeed's partitioned pipeline p2p (its default when tp > 1): each
            send carries A / t plus a small int64 meta tensor, and the receiver all-gathers
            in the TP group. Off by default because Table 3 counts whole-A messages.
        zero_grad_allreduce: model what DeepSpeed ZeRO-1/2 actually log (gradients reduced
            with all-reduce, DeepSpeed issues #5758/#7059) instead of reduce-scatter.
        partitioner: DeepSpeed ``partition_balanced`` behaviour used by
            ``partition_method='type:transformer'``: ``"old"`` (before PR #4312, Dec 2023)
            or ``"new"``.
        layers_per_stage: explicit transformer layers per stage, overriding the partitioner.
        dp_bucket_elements: elements per DP all-reduce bucket (DeepSpeed
            ``MEMORY_OPT_ALLREDUCE_SIZE`` = 5e8; also ZeRO's default bucket size).
    """

    pp: int
    tp: int
    dp: int
    ep: int = 1
    zero_stage: int = 0
    sequence_parallel: bool = False
    pipe_partitioned: bool = False
    zero_grad_allreduce: bool = False
    partitioner: str = "new"
    layers_per_stage: tuple[int, ...] | None = None
    dp_bucket_elements: int = 500_000_000

    def __post_init__(self) -> None:
        """Reject layouts that no framework could run."""
        for name in ("pp", "tp", "dp", "ep"):
            _require(int(getattr(self, name)) >= 1, f"parallel.{name} must be >= 1")
        _require(self.dp % self.ep == 0, f"parallel.ep ({self.ep}) must divide dp ({self.dp})")
        _require(self.zero_stage in (0, 1, 2, 3), "parallel.zero_stage must be 0, 1, 2 or 3")
        _require(
            self.partitioner in PARTITIONERS,
            f"parallel.partitioner must be one of {PARTITIONERS}, got {self.partitioner!r}",
        )
        _require(self.dp_bucket_elements >= 1, "parallel.dp_bucket_elements must be >= 1")
        if self.layers_per_stage is not None:
            object.__setattr__(
                self, "layers_per_stage", tuple(int(x) for x in self.layers_per_stage)
            )
            _require(
                len(self.layers_per_stage) == self.pp,
                "parallel.layers_per_stage needs one entry per pipeline stage",
            )
            _require(all(x >= 1 for x in self.layers_per_stage), "every stage needs a layer")

    @property
    def world(self) -> int:
        """Number of ranks, p * t * d."""
        return self.pp * self.tp * self.dp


@dataclass(frozen=True)
class Platform:
    """Hardware constants of the time model (eqs. 2-4 and 9).

    The defaults describe the paper's RTX3090 testbed: μ = 0.3 is the paper's value and
    F = 71 TFLOP/s (FP16 tensor, FP32 accumulate) is the spec's assumption. The bandwidths
    are **placeholders** (the paper measured them with NCCL micro-benchmarks but does not print
    them); fit them with :mod:`commscope.model.calibrate` from a run's own logs.

    Attributes:
        name: label.
        peak_flops: F, peak FLOP/s of one GPU.
        mu: μ, achieved / peak compute utilisation.
        c_tp: C_TP, bus bandwidth of TP collectives (B/s).
        c_pp: C_PP, bandwidth of pipeline send/recv (B/s).
        c_dp: C_DP, bus bandwidth of DP collectives (B/s); also used for the embedding
            all-reduce.
        c_ep: bus bandwidth of EP all-to-all (B/s); ``None`` uses c_dp.
        c_intra: bus bandwidth inside a node (B/s). With ``c_inter`` it makes the model
            mapping-aware: every type then uses c_intra if all its groups stay inside a node
            and c_inter otherwise, and c_tp/c_pp/c_dp/c_ep are ignored.
        c_inter: bus bandwidth across nodes (B/s).
        gpus_per_node: GPUs sharing a node (rank // gpus_per_node is the node).
        gpu_memory_bytes: device memory, used by the what-if search to drop configurations
            that do not fit; ``None`` disables that check.
    """

    name: str = "RTX3090-PCIe (placeholder bandwidths)"
    peak_flops: float = 71e12
    mu: float = 0.3
    c_tp: float = 6e9
    c_pp: float = 2e9
    c_dp: float = 4e9
    c_ep: float | None = None
    c_intra: float | None = None
    c_inter: float | None = None
    gpus_per_node: int = 8
    gpu_memory_bytes: int | None = None

    def __post_init__(self) -> None:
        """Reject non-physical constants."""
        _require(self.peak_flops > 0, "platform.peak_flops must be > 0")
        _require(0 < self.mu <= 1, "platform.mu must be in (0, 1]")
        for name in ("c_tp", "c_pp", "c_dp", "c_ep", "c_intra", "c_inter"):
            value = getattr(self, name)
            _require(value is None or value > 0, f"platform.{name} must be > 0")
        _require(self.gpus_per_node >= 1, "platform.gpus_per_node must be >= 1")
        _require(
            self.gpu_memory_bytes is None or self.gpu_memory_bytes > 0,
            "platform.gpu_memory_bytes must be > 0",
        )

    @property
    def mapping_aware(self) -> bool:
        """Whether bandwidths come from intra/inter-node links instead of per-type values."""
        return self.c_intra is not None and self.c_inter is not None


@dataclass(frozen=True)
class RunConfig:
    """One job: model, parallel layout, platform and rank mapping.

    Attributes:
        model: the model and batch settings.
        parallel: the parallel layout.
        platform: the hardware constants.
        mapping: axis order, outermost first (see :func:`normalize_order`).
    """

    model: ModelConfig
    parallel: ParallelConfig
    platform: Platform = field(default_factory=Platform)
    mapping: tuple[str, str, str] = DEFAULT_ORDER

    def __post_init__(self) -> None:
        """Check that model and layout fit together (gb = b * m * d, divisibility)."""
        object.__setattr__(self, "mapping", normalize_order(self.mapping))
        model, par = self.model, self.parallel
        per_step = model.micro_batch * par.dp
        _require(
            model.global_batch % per_step == 0,
            f"global_batch ({model.global_batch}) must be a multiple of micro_batch * dp "
            f"({model.micro_batch} * {par.dp})",
        )
        if model.micro_batches is not None:
            _require(
                model.micro_batches * per_step == model.global_batch,
                f"gb = b * m * d violated: {model.global_batch} != {model.micro_batch} * "
                f"{model.micro_batches} * {par.dp}",
            )
        _require(par.pp <= model.layers, f"pp ({par.pp}) exceeds layers ({model.layers})")
        _require(model.hidden % par.tp == 0, f"tp ({par.tp}) must divide hidden ({model.hidden})")
        if par.layers_per_stage is not None:
            _require(
                sum(par.layers_per_stage) == model.layers,
                "parallel.layers_per_stage must sum to model.layers",
            )
        if model.is_moe:
            _require(
                model.experts % par.ep == 0,
                f"ep ({par.ep}) must divide experts ({model.experts})",
            )

    @property
    def micro_batches(self) -> int:
        """m = gb / (b * d)."""
        return self.model.global_batch // (self.model.micro_batch * self.parallel.dp)

    @property
    def world(self) -> int:
        """Number of ranks."""
        return self.parallel.world

    @property
    def axis_sizes(self) -> dict[str, int]:
        """Size of each mapping axis: pipe = p, data = d, model = t."""
        par = self.parallel
        return {"pipe": par.pp, "data": par.dp, "model": par.tp}

    def coords(self, rank: int) -> tuple[int, int, int]:
        """(stage, dp index, tp index) of ``rank`` under this run's mapping.

        The last axis of :attr:`mapping` varies fastest, as in DeepSpeed's ProcessTopology.

        Raises:
            ValueError: rank outside 0..world-1.
        """
        _require(0 <= rank < self.world, f"rank {rank} outside 0..{self.world - 1}")
        sizes = self.axis_sizes
        found: dict[str, int] = {}
        rest = rank
        for axis in reversed(self.mapping):
            rest, found[axis] = divmod(rest, sizes[axis])
        return found["pipe"], found["data"], found["model"]

    def rank_of(self, stage: int, data: int, model: int) -> int:
        """Inverse of :meth:`coords`: the rank at (stage, dp index, tp index)."""
        sizes = self.axis_sizes
        coord = {"pipe": stage, "data": data, "model": model}
        rank = 0
        for axis in self.mapping:
            _require(0 <= coord[axis] < sizes[axis], f"{axis} index {coord[axis]} out of range")
            rank = rank * sizes[axis] + coord[axis]
        return rank


_KNOWN_SECTIONS = frozenset({"model", "parallel", "platform", "mapping"})

GENERATOR_SECTIONS = frozenset({"generate", "scenario"})
"""Sections of the same file that only the synthetic generator reads; the model ignores them."""


def _section(cls: type, raw: Mapping[str, Any], section: str) -> Any:
    """Build one dataclass from a TOML/JSON section, refusing unknown keys."""
    names = {f.name for f in fields(cls)}
    values = dict(raw)
    if cls is Platform and "gpu_memory_gib" in values:
        gib = values.pop("gpu_memory_gib")
        values["gpu_memory_bytes"] = None if gib is None else int(float(gib) * 2**30)
    unknown = sorted(set(values) - names)
    _require(not unknown, f"unknown key(s) in [{section}]: {', '.join(unknown)}")
    if cls is ParallelConfig and values.get("layers_per_stage") is not None:
        values["layers_per_stage"] = tuple(values["layers_per_stage"])
    return cls(**values)


def config_from_dict(data: Mapping[str, Any]) -> RunConfig:
    """Build a :class:`RunConfig` from a dict in the TOML layout.

    Args:
        data: mapping with sections ``model`` and ``parallel`` (required) and ``platform``
            and ``mapping`` (optional). ``mapping`` holds ``order`` (axis list) or ``preset``.
            ``generate`` and ``scenario`` (the generator's) are ignored.

    Returns:
        The validated configuration.

    Raises:
        ValueError: missing or unknown sections/keys, or an inconsistent configuration.
    """
    unknown = sorted(set(data) - _KNOWN_SECTIONS - GENERATOR_SECTIONS)
    _require(not unknown, f"unknown section(s): {', '.join(map(str, unknown))}")
    _require("model" in data and "parallel" in data, "config needs [model] and [parallel]")
    model = _section(ModelConfig, data["model"], "model")
    parallel = _section(ParallelConfig, data["parallel"], "parallel")
    platform = _section(Platform, data.get("platform", {}), "platform")
    raw_mapping = dict(data.get("mapping", {}))
    extra = sorted(set(raw_mapping) - {"order", "preset"})
    _require(not extra, f"unknown key(s) in [mapping]: {', '.join(extra)}")
    _require(
        not ("order" in raw_mapping and "preset" in raw_mapping),
        "[mapping] takes either order or preset, not both",
    )
    order = raw_mapping.get("order", raw_mapping.get("preset", "default"))
    return RunConfig(model=model, parallel=parallel, platform=platform, mapping=order)


def config_to_dict(run: RunConfig) -> dict[str, Any]:
    """Convert a :class:`RunConfig` to a JSON-safe dict that :func:`config_from_dict` reads back.

    Args:
        run: the configuration.

    Returns:
        Dict with ``model``, ``parallel``, ``platform`` and ``mapping`` sections; ``None``
        values are kept so the round trip is exact.
    """

    def plain(obj: Any) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in fields(obj):
            value = getattr(obj, f.name)
            out[f.name] = list(value) if isinstance(value, tuple) else value
        return out

    return {
        "model": plain(run.model),
        "parallel": plain(run.parallel),
        "platform": plain(run.platform),
        "mapping": {"order": list(run.mapping)},
    }


def load_config(path: str | Path) -> RunConfig:
    """Read a run configuration from a TOML file (the layout in the module docstring).

    Args:
        path: the TOML file.

    Returns:
        The validated configuration.

    Raises:
        OSError: the file cannot be read.
        tomllib.TOMLDecodeError: the file is not valid TOML.
        ValueError: the content is not a valid configuration.
    """
    with Path(path).open("rb") as handle:
        data = tomllib.load(handle)
    try:
        return config_from_dict(data)
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from None
