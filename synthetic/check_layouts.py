"""Simulated iteration time of a layout: the check of ``advise``'s ranking by simulation.

Why: the advisor ranks layouts with the analytical model (eqs. 1-11 and a μ curve). The
generator's simulator has its own compute model (FLOPs / (μ·F) per kernel step plus a fixed
``compute_overhead_us`` per step) and link model (α + bytes / bandwidth per call, blocking
rendezvous, DeepSpeed's 1F1B schedule), so simulating the advised layouts and the baseline
checks the ranking against a second opinion. Only the iteration boundaries are simulated
(:meth:`~commscope.synthetic.simulate.Simulation.run_boundaries`): no files are written.
"""

from __future__ import annotations

from dataclasses import replace
from itertools import pairwise

from commscope.model.config import ModelConfig, ParallelConfig, RunConfig
from commscope.synthetic.scenario import GenerateOptions
from commscope.synthetic.simulate import Simulation

#: Fixed cost per compute kernel step the check uses (assumed: launches and tails of a
#: layer's attention or MLP kernels), microseconds.
CHECK_OVERHEAD_US = 25.0


def layout_run(base: RunConfig, pp: int, tp: int, dp: int, micro_batch: int) -> RunConfig:
    """``base`` re-laid out as (p, t, d, b): m derived, layers re-partitioned."""
    model: ModelConfig = replace(base.model, micro_batch=micro_batch, micro_batches=None)
    par: ParallelConfig = replace(base.parallel, pp=pp, tp=tp, dp=dp, layers_per_stage=None)
    return replace(base, model=model, parallel=par)


def simulated_t_iter(
    run: RunConfig,
    iterations: int = 2,
    compute_overhead_us: float = CHECK_OVERHEAD_US,
    seed: int = 0,
) -> float:
    """Mean simulated T_iter (s) over the iterations after the first, at rank 0.

    Jitter is off (compute and communication), so the result is the simulator's models alone.

    Args:
        run: the layout (its platform's μ, F and bandwidths drive the simulator).
        iterations: iterations simulated (>= 2).
        compute_overhead_us: the simulator's fixed cost per compute kernel step.
        seed: the generator's seed.
    """
    opts = GenerateOptions(
        iterations=iterations,
        seed=seed,
        compute_jitter=0.0,
        comm_jitter=0.0,
        compute_overhead_us=compute_overhead_us,
    )
    sim = Simulation(run, opts)
    sim.run_boundaries()
    starts = [row[0] for row in sim.iter_start]
    spans = [(b - a) / 1e9 for a, b in pairwise(starts[1:])]
    if not spans:
        spans = [(starts[1] - starts[0]) / 1e9]
    return sum(spans) / len(spans)
