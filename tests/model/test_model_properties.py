"""Property tests: the model's volumes and ratios scale as the paper's equations say."""

from __future__ import annotations

import math
from dataclasses import replace
from itertools import permutations

from hypothesis import given, settings
from hypothesis import strategies as st

from commscope.model import (
    ModelConfig,
    ParallelConfig,
    RunConfig,
    config_from_dict,
    config_to_dict,
    layers_per_stage,
    predict_run,
    predicted_matrix,
    r_bubble,
    stage_items,
    traffic_rows,
)
from commscope.model.equations import ring_allreduce_factor
from commscope.model.traffic import pipe_meta_bytes

MODES = ("stage_exact", "paper_uniform")


@st.composite
def runs(draw: st.DrawFn, moe: bool = False) -> RunConfig:
    """Small valid configurations, including odd layer counts and uneven partitions."""
    pp = draw(st.integers(1, 4))
    tp = draw(st.sampled_from([1, 2, 4]))
    dp = draw(st.integers(1, 4))
    layers = draw(st.integers(pp, 12))
    hidden = tp * draw(st.integers(8, 64))
    b = draw(st.integers(1, 4))
    m = draw(st.integers(1, 6))
    model = ModelConfig(
        layers=layers,
        hidden=hidden,
        seq=draw(st.sampled_from([16, 32, 64])),
        vocab=draw(st.integers(100, 3000)),
        global_batch=b * m * dp,
        micro_batch=b,
        experts=(2 * dp if moe else 0),
        top_k=(2 if moe else 1),
        moe_every=draw(st.integers(1, 2)),
    )
    par = ParallelConfig(
        pp=pp,
        tp=tp,
        dp=dp,
        ep=(dp if moe else 1),
        zero_stage=draw(st.sampled_from([0, 1]) if pp > 1 else st.integers(0, 3)),
        sequence_parallel=draw(st.booleans()),
        pipe_partitioned=draw(st.booleans()),
        partitioner=draw(st.sampled_from(["old", "new"])),
    )
    order = draw(st.sampled_from(list(permutations(("pipe", "data", "model")))))
    gpn = draw(st.sampled_from([1, 2, 4, 8]))
    platform = replace(RunConfig(model, par).platform, gpus_per_node=gpn)
    return RunConfig(model=model, parallel=par, platform=platform, mapping=order)


def _class_total(run: RunConfig, stage: int, mode: str, cls: str, key: str) -> float:
    """Sum of ``key`` over a stage's items of class ``cls``, without partitioned-p2p meta
    tensors (a fixed 8(7+t)-byte header that does not scale with the activation)."""
    meta = pipe_meta_bytes(run.parallel.tp) if run.parallel.pipe_partitioned else -1
    return sum(
        getattr(i, key)
        for i in stage_items(run, stage, mode)
        if i.traffic_class == cls and not (cls == "PP" and i.msg_bytes == meta)
    )


def _double_b(run: RunConfig) -> RunConfig:
    model = replace(
        run.model, micro_batch=2 * run.model.micro_batch, global_batch=2 * run.model.global_batch
    )
    return replace(run, model=model)


@settings(max_examples=60, deadline=None)
@given(runs(), st.sampled_from(MODES))
def test_doubling_b_doubles_tp_and_pp_volume(run: RunConfig, mode: str) -> None:
    doubled = _double_b(run)
    assert doubled.micro_batches == run.micro_batches
    for stage in range(run.parallel.pp):
        for cls in ("TP", "PP"):
            for key in ("volume_bytes", "sent_bytes"):
                before = _class_total(run, stage, mode, cls, key)
                after = _class_total(doubled, stage, mode, cls, key)
                assert math.isclose(after, 2 * before, rel_tol=1e-9, abs_tol=1e-6)


@settings(max_examples=60, deadline=None)
@given(runs(), st.sampled_from(MODES))
def test_dp_volume_does_not_depend_on_b(run: RunConfig, mode: str) -> None:
    doubled = _double_b(run)
    for stage in range(run.parallel.pp):
        assert _class_total(run, stage, mode, "DP", "volume_bytes") == _class_total(
            doubled, stage, mode, "DP", "volume_bytes"
        )


@settings(max_examples=60, deadline=None)
@given(runs(), st.sampled_from(MODES))
def test_tp_of_one_gives_no_tp_traffic(run: RunConfig, mode: str) -> None:
    single = replace(run, parallel=replace(run.parallel, tp=1))
    for stage in range(single.parallel.pp):
        assert all(i.traffic_class != "TP" for i in stage_items(single, stage, mode))
    assert predict_run(single, mode)["t_tp"] == 0
    assert all(r["traffic_class"] != "TP" for r in predicted_matrix(single, mode))


@settings(max_examples=40, deadline=None)
@given(runs(), st.sampled_from(MODES))
def test_tp_volume_grows_with_micro_batches(run: RunConfig, mode: str) -> None:
    more = replace(run, model=replace(run.model, global_batch=3 * run.model.global_batch))
    assert more.micro_batches == 3 * run.micro_batches
    for stage in range(run.parallel.pp):
        assert math.isclose(
            _class_total(more, stage, mode, "TP", "volume_bytes"),
            3 * _class_total(run, stage, mode, "TP", "volume_bytes"),
            rel_tol=1e-9,
        )


@given(st.integers(1, 64), st.integers(1, 10_000))
def test_r_bubble_eq7_falls_to_zero_as_m_grows(p: int, m: int) -> None:
    assert 0 <= r_bubble(p, m) < 1
    assert r_bubble(p, m + 1) <= r_bubble(p, m)
    assert r_bubble(p, 1000 * p * m) < 1e-3
    if p == 1:
        assert r_bubble(p, m) == 0


@settings(max_examples=25, deadline=None)
@given(runs())
def test_model_bubble_ratio_falls_as_m_grows(run: RunConfig) -> None:
    ratios = []
    for factor in (1, 4, 64):
        more = replace(run, model=replace(run.model, global_batch=factor * run.model.global_batch))
        ratios.append(predict_run(more)["r_bubble"])
    assert ratios[0] >= ratios[1] >= ratios[2]
    assert ratios[2] <= (run.parallel.pp - 1) / (run.parallel.pp - 1 + 64 * run.micro_batches)


@settings(max_examples=40, deadline=None)
@given(runs(), st.sampled_from(MODES))
def test_matrix_row_sums_equal_sent_bytes(run: RunConfig, mode: str) -> None:
    sent: dict[tuple[int, str], float] = {}
    for row in traffic_rows(run, mode):
        key = (row["rank"], row["traffic_class"])
        sent[key] = sent.get(key, 0) + row["sent_bytes"]
    out: dict[tuple[int, str], float] = {}
    for rec in predicted_matrix(run, mode):
        assert rec["src_rank"] != rec["dst_rank"]
        key = (rec["src_rank"], rec["traffic_class"])
        out[key] = out.get(key, 0) + rec["bytes"]
    for key in set(sent) | set(out):
        # Both sides are rounded to whole bytes, the matrix per destination.
        assert abs(sent.get(key, 0) - out.get(key, 0)) <= 1 + run.parallel.dp


@settings(max_examples=40, deadline=None)
@given(runs(moe=True))
def test_moe_all_to_all_spreads_evenly_over_the_ep_group(run: RunConfig) -> None:
    ep = run.parallel.ep
    records = [r for r in predicted_matrix(run) if r["traffic_class"] == "EP"]
    if ep == 1:
        assert not records
        return
    by_src: dict[int, set[int]] = {}
    for rec in records:
        by_src.setdefault(rec["src_rank"], set()).add(rec["bytes"])
    assert all(len(sizes) == 1 for sizes in by_src.values())  # same bytes to every peer
    assert all(sum(1 for r in records if r["src_rank"] == src) == ep - 1 for src in by_src)


@settings(max_examples=60, deadline=None)
@given(runs())
def test_allreduce_wire_bytes_follow_the_ring_factor(run: RunConfig) -> None:
    for stage in range(run.parallel.pp):
        for item in stage_items(run, stage):
            if item.op == "all_reduce":
                assert math.isclose(
                    item.sent_bytes,
                    item.volume_bytes * ring_allreduce_factor(item.group_size),
                    rel_tol=1e-12,
                )


@given(st.integers(1, 80), st.integers(1, 16))
def test_partitioners_place_every_layer(layers: int, stages: int) -> None:
    if stages > layers:
        return
    new = layers_per_stage(layers, stages, "new")
    old = layers_per_stage(layers, stages, "old")
    assert sum(new) == sum(old) == layers
    assert len(new) == len(old) == stages
    # The new DP minimises max - min, so a perfectly even split is found when one exists.
    assert max(new) - min(new) <= 1
    # The old bisection minimises the heaviest stage.
    assert max(old) == math.ceil(layers / stages)


@settings(max_examples=60, deadline=None)
@given(st.booleans().flatmap(lambda moe: runs(moe=moe)))
def test_config_dict_round_trip(run: RunConfig) -> None:
    assert config_from_dict(config_to_dict(run)) == run
