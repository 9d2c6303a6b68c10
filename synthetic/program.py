"""What one rank of each pipeline stage executes per micro-batch: compute and collectives, in order.

Why: the simulator needs, for every stage, the exact sequence of compute segments and
in-pass collectives of a forward pass and of a backward pass (recompute included), plus the
collectives at the end of the iteration. Message *sizes* are taken from the analytical model
(:func:`commscope.model.traffic.stage_items`), the *order and number* of calls from the structure
of a Megatron-DeepSpeed GPT layer; a test checks that the resulting per-iteration counts equal
the model's, so the generator cannot drift from the model silently.

A pass is a list of :class:`Step` s that alternates compute (``C``) and collective (``S``)
steps, starting and ending with compute (zero-length compute steps are inserted between
back-to-back collectives and are never written out). Per layer and micro-batch (t > 1):

* forward: attention, TP all-reduce, MLP, TP all-reduce (an MoE layer: attention, TP
  all-reduce, gate, EP all-to-all dispatch, experts, EP all-to-all combine);
* backward with full recompute: the layer's forward again, then MLP backward, TP all-reduce,
  attention backward, TP all-reduce (MoE: experts backward around two all-to-alls, then
  attention backward and one TP all-reduce);
* first stage: embedding and its TP all-reduce in forward only; last stage: logits, three fp32
  cross-entropy all-reduces in forward and the head's TP all-reduce in backward;
* sequence parallelism turns each all-reduce into an all-gather before and a reduce-scatter
  after the TP region (the embedding's into a reduce-scatter only).

End of iteration (DeepSpeed ``ReduceTiedGrads``, ``ReduceGrads``, ``OptimizerStep``): the tied
embedding all-reduce on the first and last stage, the data-parallel collectives in the model's
bucket order, then the optimizer.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

from commscope.model.config import RunConfig
from commscope.model.equations import ring_allreduce_factor, ring_gather_factor
from commscope.model.partition import stage_layer_offsets
from commscope.model.traffic import (
    TrafficItem,
    padded_vocab,
    stage_dp_params,
    stage_expert_params,
    stage_items,
    stage_layers,
)

#: Element type of the model's training precision: (NCCL datatype enum, c10 name, torch name).
DTYPES: dict[str, tuple[int, str, str]] = {
    "float16": (6, "Half", "c10::Half"),
    "bfloat16": (9, "BFloat16", "c10::BFloat16"),
    "float32": (7, "Float", "float"),
    "int64": (4, "Long", "long int"),
}
_PRECISION_DTYPE = {"fp16": "float16", "bf16": "bfloat16", "fp32": "float32"}
ELEM_BYTES = {"float16": 2, "bfloat16": 2, "float32": 4, "int64": 8}

#: Memory traffic of the optimizer step per parameter (fp32 master, Adam moments, grads), bytes.
OPT_BYTES_PER_PARAM = 16
#: Device memory bandwidth used for the optimizer step, bytes/s.
OPT_MEM_BW = 1.5e12


class UnsupportedConfig(ValueError):
    """A configuration the generator does not simulate (yet)."""


@dataclass(frozen=True)
class Step:
    """One compute segment (``kind == "C"``) or collective (``kind == "S"``) of a pass.

    Attributes:
        kind: ``C`` or ``S``.
        name: compute label (``attn_fwd``, ``mlp_bwd``, ...) or collective label.
        flops: compute work on this rank (``C`` only).
        cls: traffic class of a collective (``TP``, ``EP``).
        op: ``all_reduce``, ``all_gather``, ``reduce_scatter`` or ``all_to_all``.
        group: model group kind (``tp``, ``ep``).
        msg_bytes: the size DeepSpeed logs (model convention, see traffic.py).
        dtype: element type name.
        moe_layer: global layer index of an all-to-all (-1 otherwise).
        a2a: ``dispatch`` or ``combine`` for all-to-alls (which way tokens flow).
        phase: ``fwd``, ``recompute`` or ``bwd``.
        kernels: compute kernel steps merged into this one (``C`` only; each costs the
            generator's ``compute_overhead_us`` on top of its FLOPs).
    """

    kind: str
    name: str
    flops: float = 0.0
    cls: str = ""
    op: str = ""
    group: str = ""
    msg_bytes: int = 0
    dtype: str = ""
    moe_layer: int = -1
    a2a: str = ""
    phase: str = "fwd"
    kernels: int = 0


@dataclass(frozen=True)
class TailOp:
    """A collective at the end of the iteration (tied embedding, data parallel)."""

    cls: str
    op: str
    group: str
    msg_bytes: int
    dtype: str


@dataclass(frozen=True)
class StageProgram:
    """Everything one rank of a stage runs in one iteration (per micro-batch passes + tail)."""

    stage: int
    fwd: tuple[Step, ...]
    bwd: tuple[Step, ...]
    tail: tuple[TailOp, ...]
    pp_msg_bytes: int
    pp_dtype: str
    optimizer_flops_ns: float
    dp_params: int
    items: tuple[TrafficItem, ...] = field(default=())


def dtype_of(run: RunConfig) -> str:
    """Element type of activations, gradients and parameters."""
    return _PRECISION_DTYPE[run.model.precision]


def _whole(value: float, what: str) -> int:
    if abs(value - round(value)) > 1e-6:
        raise UnsupportedConfig(f"{what} is not a whole number of bytes ({value})")
    return round(value)


def check_supported(run: RunConfig) -> None:
    """Raise :class:`UnsupportedConfig` for layouts the simulator does not model."""
    par = run.parallel
    if par.zero_stage not in (0, 1):
        raise UnsupportedConfig(
            f"zero_stage {par.zero_stage}: the generator simulates ZeRO stages 0 and 1 only"
        )
    if par.pipe_partitioned and par.tp > 1 and not par.sequence_parallel:
        raise UnsupportedConfig("pipe_partitioned p2p is not simulated by the generator")


def _find(
    items: tuple[TrafficItem, ...], cls: str, op: str, group: str | None = None
) -> list[TrafficItem]:
    return [
        i
        for i in items
        if i.traffic_class == cls and i.op == op and (group is None or i.group == group)
    ]


def _normalise(steps: list[Step]) -> tuple[Step, ...]:
    """Merge adjacent compute steps, put zero compute between adjacent collectives and at both
    ends, so that a pass alternates C, S, C, ..., C."""
    out: list[Step] = []
    for st in steps:
        if st.kind == "C":
            if out and out[-1].kind == "C":
                prev = out[-1]
                out[-1] = Step(
                    "C",
                    prev.name,
                    prev.flops + st.flops,
                    phase=prev.phase,
                    kernels=prev.kernels + st.kernels,
                )
            else:
                out.append(st)
        else:
            if not out or out[-1].kind == "S":
                out.append(Step("C", "gap", 0.0, phase=st.phase))
            out.append(st)
    if not out or out[-1].kind == "S":
        out.append(Step("C", "gap", 0.0, phase=out[-1].phase if out else "fwd"))
    return tuple(out)


@lru_cache(maxsize=256)
def stage_program(run: RunConfig, stage: int) -> StageProgram:
    """The program of one rank of ``stage`` (identical for every rank of the stage).

    Raises:
        UnsupportedConfig: see :func:`check_supported`.
    """
    check_supported(run)
    model, par = run.model, run.parallel
    items = stage_items(run, stage)
    dtype = dtype_of(run)
    h, s, b, t = model.hidden, model.seq, model.micro_batch, par.tp
    vpad = padded_vocab(model.vocab, t, model.vocab_divisible_by)
    first, last = stage == 0, stage == par.pp - 1
    sp = par.sequence_parallel and t > 1
    recompute = model.recompute

    # Sizes from the model.
    tp_ar = _find(items, "TP", "all_reduce", "tp")
    ar_sizes = sorted({i.msg_bytes for i in tp_ar})
    if sp:
        # With sequence parallelism the only TP all-reduces left are the cross-entropy ones.
        big_ar, ce_sizes = 0, ar_sizes
    else:
        big_ar = ar_sizes[-1] if ar_sizes else 0
        ce_sizes = ar_sizes[:-1]
    ce_bytes = _whole(ce_sizes[0], "cross-entropy all-reduce") if ce_sizes else 0
    ag = _find(items, "TP", "all_gather", "tp")
    rs = _find(items, "TP", "reduce_scatter", "tp")
    ag_bytes = _whole(ag[0].msg_bytes, "all-gather") if ag else 0
    rs_bytes = _whole(rs[0].msg_bytes, "reduce-scatter") if rs else 0
    a_bytes = _whole(big_ar, "TP all-reduce") if big_ar else rs_bytes
    ep = _find(items, "EP", "all_to_all", "ep")
    ep_bytes = _whole(ep[0].msg_bytes, "all-to-all") if ep else 0
    pp = _find(items, "PP", "send")
    pp_bytes = _whole(pp[0].msg_bytes, "pipeline message") if pp else 0

    def tp_sync(label: str, phase: str, kind: str = "ar") -> list[Step]:
        """One TP synchronisation point (nothing when t == 1)."""
        if t <= 1:
            return []
        if not sp:
            return [
                Step(
                    "S",
                    label,
                    cls="TP",
                    op="all_reduce",
                    group="tp",
                    msg_bytes=a_bytes,
                    dtype=dtype,
                    phase=phase,
                )
            ]
        gather = Step(
            "S",
            label + "_ag",
            cls="TP",
            op="all_gather",
            group="tp",
            msg_bytes=ag_bytes,
            dtype=dtype,
            phase=phase,
        )
        scatter = Step(
            "S",
            label + "_rs",
            cls="TP",
            op="reduce_scatter",
            group="tp",
            msg_bytes=rs_bytes,
            dtype=dtype,
            phase=phase,
        )
        if kind == "rs":
            return [scatter]
        return [gather, scatter]

    def a2a(layer: int, direction: str, phase: str) -> list[Step]:
        if not ep_bytes:
            return []
        return [
            Step(
                "S",
                f"a2a_{direction}",
                cls="EP",
                op="all_to_all",
                group="ep",
                msg_bytes=ep_bytes,
                dtype=dtype,
                moe_layer=layer,
                a2a=direction,
                phase=phase,
            )
        ]

    def c(name: str, flops: float, phase: str) -> Step:
        return Step("C", name, float(flops), phase=phase, kernels=1)

    attn = (8 * b * s * h * h + 4 * b * s * s * h) / t
    mlp = 16 * b * s * h * h / t
    gate = 2 * b * s * h * max(model.experts, 1)
    experts = 16 * b * s * h * h * model.top_k

    def layer_fwd(gl: int, phase: str) -> list[Step]:
        if model.is_moe_layer(gl):
            return [
                c("attn_" + phase, attn, phase),
                *tp_sync("tp_attn", phase),
                c("gate_" + phase, gate, phase),
                *a2a(gl, "dispatch", phase),
                c("experts_" + phase, experts, phase),
                *a2a(gl, "combine", phase),
            ]
        return [
            c("attn_" + phase, attn, phase),
            *tp_sync("tp_attn", phase),
            c("mlp_" + phase, mlp, phase),
            *tp_sync("tp_mlp", phase),
        ]

    def layer_bwd(gl: int) -> list[Step]:
        out: list[Step] = []
        if recompute:
            out += layer_fwd(gl, "recompute")
        if model.is_moe_layer(gl):
            out += [
                c("experts_bwd", experts, "bwd"),
                *a2a(gl, "dispatch", "bwd"),
                c("experts_bwd", experts, "bwd"),
                *a2a(gl, "combine", "bwd"),
                c("attn_bwd", 2 * attn, "bwd"),
                *tp_sync("tp_attn", "bwd"),
            ]
        else:
            out += [
                c("mlp_bwd", 2 * mlp, "bwd"),
                *tp_sync("tp_mlp", "bwd"),
                c("attn_bwd", 2 * attn, "bwd"),
                *tp_sync("tp_attn", "bwd"),
            ]
        return out

    n_layers = stage_layers(run)[stage]
    offset = stage_layer_offsets(stage_layers(run))[stage]
    layer_ids = list(range(offset, offset + n_layers))

    fwd: list[Step] = []
    if first:
        fwd.append(c("embedding_fwd", 2 * b * s * h, "fwd"))
        fwd += tp_sync("tp_embedding", "fwd", kind="rs")
    for gl in layer_ids:
        fwd += layer_fwd(gl, "fwd")
    if last:
        fwd.append(c("logits_fwd", 2 * b * s * h * vpad / t, "fwd"))
        if t > 1 and ce_bytes:
            for k in range(3):
                fwd.append(
                    Step(
                        "S",
                        f"tp_cross_entropy_{k}",
                        cls="TP",
                        op="all_reduce",
                        group="tp",
                        msg_bytes=ce_bytes,
                        dtype="float32",
                        phase="fwd",
                    )
                )
                fwd.append(c("loss_fwd", 5 * b * s * vpad / t, "fwd"))
    bwd: list[Step] = []
    if last:
        bwd.append(c("logits_bwd", 4 * b * s * h * vpad / t, "bwd"))
        bwd += tp_sync("tp_head", "bwd")
    for gl in reversed(layer_ids):
        bwd += layer_bwd(gl)
    if first:
        bwd.append(c("embedding_bwd", 4 * b * s * h, "bwd"))

    tail: list[TailOp] = []
    for item in _find(items, "EmbTableSyn", "all_reduce"):
        tail += [
            TailOp(
                "EmbTableSyn", "all_reduce", "emb", _whole(item.msg_bytes, "embedding sync"), dtype
            )
        ] * int(item.count)
    for item in items:
        if item.traffic_class != "DP":
            continue
        if abs(item.count - round(item.count)) > 1e-9:
            raise UnsupportedConfig("fractional DP message counts")
        size = int(-(-item.msg_bytes // 1))
        tail += [TailOp("DP", item.op, item.group, size, dtype)] * round(item.count)

    dp_params = stage_dp_params(run, stage) + stage_expert_params(run, stage)
    opt_ns = dp_params * OPT_BYTES_PER_PARAM / OPT_MEM_BW * 1e9
    return StageProgram(
        stage=stage,
        fwd=_normalise(fwd),
        bwd=_normalise(bwd),
        tail=tuple(tail),
        pp_msg_bytes=pp_bytes,
        pp_dtype=dtype,
        optimizer_flops_ns=opt_ns,
        dp_params=dp_params,
        items=items,
    )


def bus_bytes(op: str, n: int, msg_bytes: float) -> float:
    """Bytes a collective of ``msg_bytes`` (model convention) puts on the bus (nccl-tests busbw
    convention): all-reduce 2(n-1)/n S, all-gather (n-1) S_in, reduce-scatter and all-to-all
    (n-1)/n S, point-to-point S."""
    if op == "all_reduce":
        return ring_allreduce_factor(n) * msg_bytes
    if op == "all_gather":
        return float(n - 1) * msg_bytes
    if op in ("reduce_scatter", "all_to_all"):
        return ring_gather_factor(n) * msg_bytes
    return float(msg_bytes)


def sent_bytes(op: str, n: int, msg_bytes: float) -> float:
    """Bytes one rank sends for a collective (ring algorithms; the model's ``sent_bytes``)."""
    if op in ("send",):
        return float(msg_bytes)
    if op == "recv":
        return 0.0
    return bus_bytes(op, n, msg_bytes)
