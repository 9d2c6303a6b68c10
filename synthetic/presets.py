"""Small ready-made run configurations for tests, examples and quick experiments.

Why: a tiny GPT (8 layers, hidden 256) at 32 ranks simulates and writes in well under a second,
so it is the default subject of generator tests; one definition keeps those tests in step.
"""

from __future__ import annotations

from typing import Any


def tiny_config(pp: int = 4, tp: int = 2, dp: int = 4, m: int = 4, **model: Any) -> dict[str, Any]:
    """A small GPT config in the model's TOML layout (``pp*tp*dp`` ranks, 32 by default).

    Args:
        pp: pipeline stages.
        tp: tensor-parallel degree.
        dp: data-parallel degree.
        m: micro-batches per iteration (micro-batch size 2, so the global batch is ``2*m*dp``).
        **model: overrides of the ``model`` section (e.g. ``experts=8, top_k=2``).
    """
    b = 2
    return {
        "model": {
            "name": "tiny",
            "layers": 8,
            "hidden": 256,
            "seq": 128,
            "vocab": 1000,
            "global_batch": b * m * dp,
            "micro_batch": b,
            "micro_batches": m,
            **model,
        },
        "parallel": {"pp": pp, "tp": tp, "dp": dp},
        "platform": {"gpus_per_node": 8, "peak_flops": 2e12},
    }
