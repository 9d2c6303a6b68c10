"""Compute efficiency μ as a function of the work per kernel, and constants that carry a source.

Why: the paper's μ is one number per platform (0.3 on RTX3090, §5.2). With a single μ the
what-if search always prefers the smallest micro-batch (the bubble shrinks as m grows and
nothing charges small kernels for being small). A GPU reaches its sustained rate only on
large kernels: a kernel has a fixed cost (launch, tail, synchronisation) besides its FLOPs.
This module models that with a saturating curve and lets a measured run set it.

The curve: with x the FLOPs one GPU does for one transformer layer's forward pass of one
micro-batch, x = (24·b·s·h² + 4·b·s²·h) / t (eq. 11's per-layer term over t),

    μ(x) = μ_max · x / (x + x_half),

so μ → μ_max for large kernels and μ = μ_max / 2 at x = x_half. It is what a fixed cost
τ per layer and pass gives: T = FLOPs/(μ_max·F) + τ is FLOPs/(μ·F) with x_half = τ·μ_max·F
(per pass FLOPs are proportional to x). ``1/μ = 1/μ_max + (x_half/μ_max)·(1/x)`` is linear
in 1/x, so two or more measured (x, μ) points fit both constants by least squares
(:func:`fit_mu_curve`); one point fixes the level and keeps the default shape
(:func:`fit_mu_level`).

Every constant the advisor uses is a :class:`Constant` with its value, unit and source:
``measured run <id>``, ``default curve (...)`` or ``config``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

#: Assumed fixed cost per transformer layer and pass, seconds (launches and tails of the
#: layer's kernels: about ten kernels of a few microseconds). Not measured: an assumption.
DEFAULT_LAYER_PASS_OVERHEAD_S = 40e-6

#: Sustained μ of large kernels: the paper's measured RTX3090 value (APNet'24 §5.2).
DEFAULT_MU_MAX = 0.3

DEFAULT_SOURCE = "default curve (mu_max: Li et al. APNet'24 §5.2, RTX3090)"
DEFAULT_X_HALF_SOURCE = "default curve (x_half = tau * mu_max * F, tau = 40 us per layer and pass: assumed, not measured)"


@dataclass(frozen=True)
class Constant:
    """One constant of the prediction and where it came from.

    Attributes:
        name: ``mu_max``, ``x_half``, ``c_tp``, ``peak_flops``, ``gpu_memory_bytes``, ...
        value: its value.
        unit: its unit (``FLOP/s``, ``B/s``, ``FLOP``, ``bytes``, ``ratio``).
        source: ``measured run <id> (...)``, ``default curve (...)`` or ``config``.
    """

    name: str
    value: float
    unit: str
    source: str

    def as_dict(self) -> dict[str, object]:
        """JSON-safe dict."""
        return {"name": self.name, "value": self.value, "unit": self.unit, "source": self.source}


def layer_forward_flops(b: int, s: int, h: int, t: int) -> float:
    """x: FLOPs of one transformer layer's forward pass of one micro-batch on one GPU.

    (24·b·s·h² + 4·b·s²·h) / t: the per-layer term of eq. 11 (without the factor 4 for the
    forward, recompute and backward passes), split over t tensor-parallel ranks.
    """
    return (24 * b * s * h * h + 4 * b * s * s * h) / t


@dataclass(frozen=True)
class MuCurve:
    """μ(x) = μ_max · x / (x + x_half) (see the module docstring).

    Attributes:
        mu_max: sustained utilisation of large kernels, (0, 1].
        x_half: per-layer forward FLOPs at which μ is half of μ_max (0: a constant μ).
        source: where μ_max came from.
        x_half_source: where x_half came from (``None``: the same as ``source``).
    """

    mu_max: float
    x_half: float
    source: str = DEFAULT_SOURCE
    x_half_source: str | None = None

    def __post_init__(self) -> None:
        """Reject non-physical constants."""
        if not 0 < self.mu_max <= 1:
            raise ValueError(f"mu_max must be in (0, 1], got {self.mu_max}")
        if self.x_half < 0:
            raise ValueError(f"x_half must be >= 0, got {self.x_half}")

    def mu_at(self, x: float) -> float:
        """μ at per-layer forward FLOPs ``x``."""
        return self.mu_max * x / (x + self.x_half)

    def mu(self, b: int, s: int, h: int, t: int) -> float:
        """μ of a layout: micro-batch ``b``, sequence ``s``, hidden ``h``, tensor-parallel ``t``."""
        return self.mu_at(layer_forward_flops(b, s, h, t))

    def constants(self) -> tuple[Constant, Constant]:
        """The curve's two constants with their source."""
        return (
            Constant("mu_max", self.mu_max, "ratio", self.source),
            Constant("x_half", self.x_half, "FLOP", self.x_half_source or self.source),
        )


def default_mu_curve(peak_flops: float) -> MuCurve:
    """The documented default curve for a GPU of ``peak_flops`` (see :data:`DEFAULT_SOURCE`)."""
    return MuCurve(
        mu_max=DEFAULT_MU_MAX,
        x_half=DEFAULT_LAYER_PASS_OVERHEAD_S * DEFAULT_MU_MAX * peak_flops,
        source=DEFAULT_SOURCE,
        x_half_source=DEFAULT_X_HALF_SOURCE,
    )


def fit_mu_level(curve: MuCurve, x: float, mu: float, source: str) -> MuCurve:
    """Keep ``curve``'s shape (x_half) and set μ_max so that μ(x) equals a measured ``mu``.

    Args:
        curve: the curve whose x_half is kept.
        x: per-layer forward FLOPs of the measured layout.
        mu: the μ measured at ``x`` (FLOPs / (T_comp · F)).
        source: the source of the measurement (``measured run <id> ...``).

    Returns:
        The rescaled curve (μ_max from ``source``, x_half with its old source).

    Raises:
        ValueError: the fitted μ_max is not in (0, 1].
    """
    mu_max = mu * (x + curve.x_half) / x
    if not 0 < mu_max <= 1:
        raise ValueError(f"fitted mu_max = {mu_max:.3f} outside (0, 1]: check peak_flops")
    return MuCurve(
        mu_max=mu_max,
        x_half=curve.x_half,
        source=source,
        x_half_source=curve.x_half_source or curve.source,
    )


def fit_mu_curve(points: Sequence[tuple[float, float]], source: str) -> MuCurve:
    """Least-squares fit of μ_max and x_half to measured (x, μ) points.

    Fits 1/μ = a + c/x (linear in 1/x): μ_max = 1/a, x_half = c/a.

    Args:
        points: (per-layer forward FLOPs, measured μ) pairs, at least two distinct x.
        source: the source of the points.

    Returns:
        The fitted curve (x_half clipped at 0 when the points show no fixed cost).

    Raises:
        ValueError: fewer than two distinct x, or a non-physical μ_max.
    """
    xs = [1.0 / x for x, _ in points]
    ys = [1.0 / mu for _, mu in points]
    if len(set(xs)) < 2:
        raise ValueError("fit_mu_curve needs two or more distinct x")
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((u - mx) ** 2 for u in xs)
    c = sum((u - mx) * (v - my) for u, v in zip(xs, ys, strict=True)) / sxx
    c = max(c, 0.0)
    a = my - c * mx
    if a <= 0:
        raise ValueError("fit gives mu_max <= 0 or > 1: points not on a saturating curve")
    return MuCurve(mu_max=1.0 / a, x_half=c / a, source=source)
