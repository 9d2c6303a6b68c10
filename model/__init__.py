"""Analytical model of distributed-training communication (Li et al., APNet'24, issue 4).

Why: commscope compares measured communication with what the model predicts before a run.
The package is pure (no I/O except :func:`load_config`) and is organised one job per module:

- :mod:`~commscope.model.config`: frozen ModelConfig / ParallelConfig / Platform / RunConfig,
  the shared TOML layout, ``load_config`` / ``config_from_dict`` / ``config_to_dict``;
- :mod:`~commscope.model.partition`: DeepSpeed's ``type:transformer`` partitioner (old/new);
- :mod:`~commscope.model.equations`: eqs. 1-11, MFU/HFU, the overlap effectiveness factor;
- :mod:`~commscope.model.traffic`: per-rank, per-type traffic (stage_exact / paper_uniform,
  ZeRO, EP), ``traffic_rows`` for all ranks;
- :mod:`~commscope.model.mapping`: rank mapping, process groups, ``predicted_matrix``;
- :mod:`~commscope.model.predict`: time terms of a rank, ``predict_run``;
- :mod:`~commscope.model.efficiency`: the μ curve of the work per kernel, constants with sources;
- :mod:`~commscope.model.calibrate`: fit μ and C_* to measured times (one run or several);
- :mod:`~commscope.model.advise`: the ConfigTuner search: feasibility, pruning, ties collapsed.
"""

from __future__ import annotations

from commscope.model.advise import Advice, Candidate, advise, mapping_orders
from commscope.model.calibrate import (
    Calibration,
    Observation,
    RunCalibration,
    calibrate,
    calibrate_measured,
    calibrate_run,
    class_bandwidths,
)
from commscope.model.config import (
    CUSTOMIZED_ORDER,
    DEFAULT_ORDER,
    ModelConfig,
    ParallelConfig,
    Platform,
    RunConfig,
    config_from_dict,
    config_to_dict,
    load_config,
    normalize_order,
)
from commscope.model.equations import (
    activation_bytes,
    flops_per_iteration,
    hfu,
    mfu,
    model_flops_per_iteration,
    overlap_effectiveness,
    pair_speedup,
    parameter_count,
    r_bubble,
)
from commscope.model.mapping import (
    group_members,
    groups,
    matrix_summary,
    node_of,
    peers,
    predicted_matrix,
)
from commscope.model.partition import layers_per_stage
from commscope.model.predict import (
    StageTimes,
    critical_stage,
    effective_bandwidths,
    memory_bytes,
    pipeline_stage_times,
    predict_run,
    stage_time_rows,
    stage_times,
    time_terms,
)
from commscope.model.traffic import (
    MODES,
    TRAFFIC_CLASSES,
    TrafficItem,
    ddp_buckets,
    padded_vocab,
    rank_items,
    stage_items,
    summarize,
    traffic_rows,
    zero_volume_factor,
)

__all__ = [
    "CUSTOMIZED_ORDER",
    "DEFAULT_ORDER",
    "MODES",
    "TRAFFIC_CLASSES",
    "Advice",
    "Calibration",
    "Candidate",
    "ModelConfig",
    "Observation",
    "ParallelConfig",
    "Platform",
    "RunCalibration",
    "RunConfig",
    "StageTimes",
    "TrafficItem",
    "activation_bytes",
    "advise",
    "calibrate",
    "calibrate_measured",
    "calibrate_run",
    "class_bandwidths",
    "config_from_dict",
    "config_to_dict",
    "critical_stage",
    "ddp_buckets",
    "effective_bandwidths",
    "flops_per_iteration",
    "group_members",
    "groups",
    "hfu",
    "layers_per_stage",
    "load_config",
    "mapping_orders",
    "matrix_summary",
    "memory_bytes",
    "mfu",
    "model_flops_per_iteration",
    "node_of",
    "normalize_order",
    "overlap_effectiveness",
    "padded_vocab",
    "pair_speedup",
    "parameter_count",
    "peers",
    "pipeline_stage_times",
    "predict_run",
    "predicted_matrix",
    "r_bubble",
    "rank_items",
    "stage_items",
    "stage_time_rows",
    "stage_times",
    "summarize",
    "time_terms",
    "traffic_rows",
    "zero_volume_factor",
]
