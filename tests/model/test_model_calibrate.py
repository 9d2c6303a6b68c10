"""Calibration of μ and C_* from measured per-type times."""

from __future__ import annotations

from dataclasses import replace

import pytest

from commscope.model import (
    ModelConfig,
    Observation,
    ParallelConfig,
    Platform,
    RunConfig,
    calibrate,
    calibrate_run,
    class_bandwidths,
    stage_times,
)

GPT3B = ModelConfig(
    layers=54, hidden=2000, seq=1024, vocab=50257, global_batch=1024, micro_batch=32
)
TRUE = Platform(peak_flops=71e12, mu=0.37, c_tp=7.5e9, c_pp=1.3e9, c_dp=3.1e9)


def measured_from(run: RunConfig, platform: Platform, stage: int = 0) -> dict[str, float]:
    """Synthetic measurements: the model's own times under a known platform."""
    st = stage_times(replace(run, platform=platform), stage)
    return {
        "comp": st.t_comp,
        "tp": st.t_tp,
        "pp": st.t_pp,
        "dp": st.t_dp,
        "emb": st.t_emb,
        "bubble": st.t_bubble,
        "iter": st.t_iter,
    }


def test_recovers_known_constants_from_one_run() -> None:
    run = RunConfig(GPT3B, ParallelConfig(pp=4, tp=2, dp=4))  # default placeholder platform
    cal = calibrate_run(run, measured_from(run, TRUE))
    for name in ("mu", "c_tp", "c_pp", "c_dp"):
        assert cal.fitted[name] == pytest.approx(getattr(TRUE, name), rel=1e-9)
        assert getattr(cal.platform, name) == pytest.approx(getattr(TRUE, name), rel=1e-9)
    # Bubble and iteration time were not fitted, yet they match: the model is consistent.
    assert max(abs(r["rel_error"]) for r in cal.residuals) < 1e-9
    assert set(cal.rms_rel_error) == {"comp", "tp", "pp", "dp", "emb", "bubble", "iter"}


def test_embedding_time_folds_into_dp_when_not_measured() -> None:
    run = RunConfig(GPT3B, ParallelConfig(pp=4, tp=2, dp=4))
    meas = measured_from(run, TRUE)
    meas["dp"] += meas.pop("emb")
    cal = calibrate_run(run, meas)
    assert cal.fitted["c_dp"] == pytest.approx(TRUE.c_dp, rel=1e-9)


def test_two_runs_fit_between_them_and_report_residuals() -> None:
    a = RunConfig(GPT3B, ParallelConfig(pp=4, tp=2, dp=4))
    b = RunConfig(replace(GPT3B, global_batch=512), ParallelConfig(pp=4, tp=2, dp=2))
    slow = replace(TRUE, c_tp=5e9)
    cal = calibrate(
        [Observation(a, measured_from(a, TRUE)), Observation(b, measured_from(b, slow))]
    )
    assert 5e9 < cal.fitted["c_tp"] < 7.5e9
    tp = [r for r in cal.residuals if r["term"] == "tp"]
    assert len(tp) == 2
    assert tp[0]["rel_error"] > 0 > tp[1]["rel_error"]  # over- and under-predicted
    assert cal.rms_rel_error["tp"] > 0.05
    assert cal.fitted["mu"] == pytest.approx(TRUE.mu, rel=1e-9)  # comp was consistent


def test_unmeasured_constants_keep_the_base_platform() -> None:
    run = RunConfig(GPT3B, ParallelConfig(pp=4, tp=2, dp=4))
    cal = calibrate_run(run, {"tp": 1.0})
    assert set(cal.fitted) == {"c_tp"}
    assert cal.platform.c_pp == run.platform.c_pp
    assert cal.platform.mu == run.platform.mu


def test_calibration_rejects_nonsense() -> None:
    run = RunConfig(GPT3B, ParallelConfig(pp=4, tp=2, dp=4))
    with pytest.raises(ValueError, match="mu"):
        calibrate_run(run, {"comp": 1e-3})  # faster than peak
    with pytest.raises(ValueError, match="unknown measured key"):
        calibrate_run(run, {"tensor": 1.0})
    with pytest.raises(ValueError, match="at least one"):
        calibrate([])


def test_measured_class_bandwidth_is_taken_not_fitted_from_times_with_sync_wait() -> None:
    # T_DP measured call to end holds 0.5 s of sync wait: fitting C_DP to it would give the
    # whole-call figure; the one C from int_class_bandwidth (transfer) is taken as it is.
    run = RunConfig(GPT3B, ParallelConfig(pp=4, tp=2, dp=4))
    meas = measured_from(run, TRUE)
    meas["dp"] += 0.5
    fitted_from_times = calibrate_run(run, meas).fitted["c_dp"]
    assert fitted_from_times < 0.9 * TRUE.c_dp
    rows = [
        {"traffic_class": "DP", "busbw_transfer_Bps": TRUE.c_dp, "busbw_call_Bps": 1e9},
        {"traffic_class": "EmbTableSyn", "busbw_transfer_Bps": 4e9},
        {"traffic_class": "other", "busbw_transfer_Bps": None},
    ]
    bw = class_bandwidths(rows)
    assert bw == {"c_dp": TRUE.c_dp}
    cal = calibrate_run(run, meas, bandwidths=bw)
    assert cal.fitted["c_dp"] == TRUE.c_dp
    assert cal.platform.c_dp == TRUE.c_dp
    assert cal.fitted["c_tp"] == pytest.approx(TRUE.c_tp, rel=1e-9)  # still fitted
    with pytest.raises(ValueError, match="one C per class"):
        class_bandwidths(rows + rows)
    with pytest.raises(ValueError, match="unknown bandwidth"):
        calibrate_run(run, meas, bandwidths={"c_xx": 1.0})
