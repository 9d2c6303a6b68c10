"""Equations (1)-(11) of Li et al., APNet'24, plus MFU/HFU and the DHelix overlap factor.

Why: the paper's analytical model is the baseline that measured runs are compared with. Each
equation is a small pure function of plain numbers, so it can be checked against the paper's
text one by one and reused by the stage-exact model, calibration and the what-if search.

Notation (spec A.1): p, t, d parallel sizes; l, h, s layers, hidden, sequence; b micro-batch;
m micro-batches; N parameters; δ bytes per element; C_TP/C_PP/C_DP bus bandwidths (B/s);
F peak FLOP/s; μ utilisation. One activation tensor is A = δ·b·s·h bytes (2bsh in fp16).
"""

from __future__ import annotations

#: All-reduces per transformer layer and micro-batch: 2 forward, 2 backward, 2 recompute.
TP_ALLREDUCES_PER_LAYER_RECOMPUTE = 6
#: The same without activation recompute.
TP_ALLREDUCES_PER_LAYER = 4
#: FLOPs per parameter and token with recompute (2 forward, 2 recompute, 4 backward).
FLOPS_PER_PARAM_TOKEN_RECOMPUTE = 8
#: FLOPs per parameter and token without recompute.
FLOPS_PER_PARAM_TOKEN = 6


def activation_bytes(b: int, s: int, h: int, dtype_bytes: int = 2) -> int:
    """Bytes of one [b, s, h] activation, A = δ·b·s·h (the paper's 2bsh).

    Args:
        b: micro-batch size.
        s: sequence length.
        h: hidden size.
        dtype_bytes: δ.

    Returns:
        A in bytes.
    """
    return dtype_bytes * b * s * h


def ring_allreduce_factor(n: int) -> float:
    """Bus-bytes factor 2(n-1)/n of a ring all-reduce over ``n`` ranks (0 for n = 1)."""
    return 2.0 * (n - 1) / n


def ring_gather_factor(n: int) -> float:
    """Bus-bytes factor (n-1)/n of a ring all-gather, reduce-scatter or all-to-all."""
    return (n - 1) / n


def parameter_count(l: int, h: int, s: int, V: int) -> int:  # noqa: E741 - paper notation
    """Eq. (10): N = 12lh²(1 + 13/(12h) + (V+s)/(12lh)) = 12lh² + 13lh + (V+s)h.

    Args:
        l: transformer layers.
        h: hidden size.
        s: sequence length (position embeddings).
        V: vocabulary size (the paper uses the unpadded 50257).

    Returns:
        N as an exact integer.
    """
    return 12 * l * h * h + 13 * l * h + (V + s) * h


def flops_per_iteration(B: int, s: int, l: int, h: int, V: int) -> int:  # noqa: E741
    """Eq. (11): P = 96Bslh²(1 + s/(6h) + V/(16lh)), recompute included.

    Expanded to the exact integer 96Bslh² + 16Bs²lh + 6BsVh.

    Args:
        B: sequences per iteration (gb for the whole job).
        s: sequence length.
        l: transformer layers.
        h: hidden size.
        V: vocabulary size.

    Returns:
        FLOPs per iteration.
    """
    return 96 * B * s * l * h * h + 16 * B * s * s * l * h + 6 * B * s * V * h


def model_flops_per_iteration(B: int, s: int, l: int, h: int, V: int) -> int:  # noqa: E741
    """Megatron's model FLOPs without recompute, 72Bslh²(1 + s/(6h) + V/(12lh)).

    Used for MFU (spec A.3); expands to 72Bslh² + 12Bs²lh + 6BsVh.
    """
    return 72 * B * s * l * h * h + 12 * B * s * s * l * h + 6 * B * s * V * h


def flop_per_microbatch(N: float, p: int, t: int, b: int, s: int, recompute: bool = True) -> float:
    """Eq. (8): FLOP^mb = 8 · N/(p·t) · b · s (6 instead of 8 without recompute)."""
    per = FLOPS_PER_PARAM_TOKEN_RECOMPUTE if recompute else FLOPS_PER_PARAM_TOKEN
    return per * N / (p * t) * b * s


def t_comp(m: int, flop_mb: float, mu: float, F: float) -> float:
    """Eq. (9): T_comp = m · FLOP^mb / (μF)."""
    return m * flop_mb / (mu * F)


def t_tp(m: int, l: int, p: int, t: int, A: float, c_tp: float, per_layer: int = 6) -> float:  # noqa: E741
    """Eq. (2): T_TP = m · (l/p) · 6 · A · 2(t-1)/t / C_TP."""
    return m * (l / p) * per_layer * A * ring_allreduce_factor(t) / c_tp


def t_pp(m: int, A: float, c_pp: float) -> float:
    """Eq. (3): T_PP = m · 2A / C_PP (one send and one receive per micro-batch at rank 0)."""
    return m * 2 * A / c_pp


def t_dp(N: float, p: int, t: int, d: int, c_dp: float, dtype_bytes: int = 2) -> float:
    """Eq. (4): T_DP = (δN/(p·t)) · 2(d-1)/d / C_DP (δ = 2 gives the paper's 2N)."""
    return dtype_bytes * N / (p * t) * ring_allreduce_factor(d) / c_dp


def t_bubble(p: int, comp_mb: float, pp_mb: float, tp_mb: float) -> float:
    """Eq. (5): T_bubble = (p-1)(T_comp^mb + T_PP^mb + T_TP^mb)."""
    return (p - 1) * (comp_mb + pp_mb + tp_mb)


def t_iter(m: int, comp_mb: float, pp_mb: float, tp_mb: float, bubble: float, dp: float) -> float:
    """Eq. (6): T_iter = m(T_comp^mb + T_PP^mb + T_TP^mb) + T_bubble + T_DP.

    Eq. (1), T_iter = T_comp + T_TP + T_PP + T_DP + T_bubble, is the same sum.
    """
    return m * (comp_mb + pp_mb + tp_mb) + bubble + dp


def stage_bubble(
    t_iteration: float,
    m: int,
    comp_mb: float,
    pp_mb: float,
    tp_mb: float,
    dp: float,
    emb: float = 0.0,
    ep_mb: float = 0.0,
) -> float:
    """Eqs. (5)-(6) generalised per stage: the bubble of a stage that lives ``t_iteration``.

    Every stage lives the same iteration (the critical stage's eq. 6). What a stage does not
    spend on its own pipelined work, its DP all-reduce or its embedding all-reduce is bubble:
    T_bubble_s = T_iter - m·(T_comp^mb_s + T_PP^mb_s + T_TP^mb_s + T_EP^mb_s) - T_DP_s
    - T_Emb_s. On the critical stage this is eq. (5); on a faster stage it also holds the
    time spent waiting for the critical one (warm-up, drain, end-of-iteration waits).

    Args:
        t_iteration: T_iter shared by all stages, s.
        m: micro-batches per iteration.
        comp_mb: the stage's compute per micro-batch, s.
        pp_mb: the stage's PP transfer per micro-batch, s.
        tp_mb: the stage's TP time per micro-batch, s.
        dp: the stage's DP all-reduce per iteration, s.
        emb: the stage's embedding all-reduce transfer per iteration, s (0 off the
            first and last stage).
        ep_mb: the stage's MoE all-to-all time per micro-batch, s (0 for a dense model).

    Returns:
        The stage's bubble per iteration, s.
    """
    return t_iteration - m * (comp_mb + pp_mb + tp_mb + ep_mb) - dp - emb


def r_bubble(p: int, m: int) -> float:
    """Eq. (7): R_bubble = (p-1)/(p-1+m), exact under eqs. 5-6 once T_DP is left out."""
    return (p - 1) / (p - 1 + m)


def r_comm(t_comm: float, t_iteration: float) -> float:
    """R_comm = T_comm / T_iter (the paper's Fig. 10 ratio)."""
    return t_comm / t_iteration if t_iteration > 0 else 0.0


def mfu(model_flops: float, t_iteration: float, gpus: int, peak_flops: float) -> float:
    """Model FLOPs utilisation: model FLOPs without recompute / (T_iter · GPUs · peak)."""
    return model_flops / (t_iteration * gpus * peak_flops)


def hfu(hardware_flops: float, t_iteration: float, gpus: int, peak_flops: float) -> float:
    """Hardware FLOPs utilisation: eq. (11) FLOPs (recompute counted) / (T_iter · GPUs · peak)."""
    return hardware_flops / (t_iteration * gpus * peak_flops)


def overlap_effectiveness(t_a: float, t_b: float, t_ab: float) -> float:
    """DHelix's Overlap Effectiveness Factor, OEF = (T_a + T_b - T_ab) / min(T_a, T_b).

    1 means the shorter operation is fully hidden; 0 means no gain; negative means
    running them together is slower than running them one after the other.

    Args:
        t_a: time of operation a alone.
        t_b: time of operation b alone.
        t_ab: time of a and b run concurrently.

    Returns:
        The OEF.
    """
    return (t_a + t_b - t_ab) / min(t_a, t_b)


def pair_speedup(t_a: float, t_b: float, t_ab: float) -> float:
    """Speed-up of running a and b concurrently, (T_a + T_b) / T_ab."""
    return (t_a + t_b) / t_ab
