"""``bench/serve_once.py``: the ratio rows compare each round with its own baseline.

Given/expect on ``_rows`` (no timing): the ratio is the median of the per-round ratios, the
target applies to wall time only, and a round over the target fails it.
"""

from __future__ import annotations

from bench.serve_once import TARGET, _rows


def test_ratio_is_median_of_rounds_and_target_on_wall() -> None:
    # given three rounds of ((orchestrated wall, cpu), (baseline wall, cpu))
    pairs = [((12.0, 6.0), (10.0, 5.0)), ((30.0, 9.0), (10.0, 6.0)), ((14.0, 7.0), (10.0, 7.0))]
    wall, cpu = _rows("case", "what", "base", pairs)
    # expect the median of 1.2, 3.0, 1.4 and of 1.2, 1.5, 1.0
    assert wall.ratio == 1.4 and cpu.ratio == 1.2
    assert wall.value == 14.0 and wall.baseline_value == 10.0
    assert wall.met is (TARGET >= 1.4) and cpu.met is None and cpu.target == ""
    assert "1.20-3.00" in wall.note


def test_round_over_target_fails() -> None:
    wall, _ = _rows("case", "what", "base", [((31.0, 16.0), (10.7, 6.0))])
    assert wall.ratio == 2.9 and wall.met is False


def test_other_baseline_untargeted() -> None:
    # given rounds holding a third measurement (the --prefect route)
    pairs = [((5.0, 4.0), (10.0, 6.0), (20.0, 16.0))]
    wall, cpu = _rows("case", "what", "base", pairs, targeted=False, against=2)
    # expect the ratio against the third, and no target
    assert wall.ratio == 0.25 and cpu.ratio == 0.25
    assert wall.met is None and wall.target == ""
