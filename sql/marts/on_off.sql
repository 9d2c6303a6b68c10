-- Communication on/off pattern per rank and iteration: merged communication-active time, idle time, on/off cycles, duty cycle and shape signatures.
-- One row per (run, rank, iteration) with a timed span (int_iteration_spans: on a GPU rank from the first start of the step's own work to the next step's first start). on = |union of the iteration's own comm intervals| (int_rank_busy_merged: work attributed to the step that launched it, never clipped; the same number as iteration_breakdown.comm_ns); spill = the part of it after the span's end (a lagging GPU's step still communicating when the next one starts); off = duration - (on - spill), so on + off = duration + spill; cycles = number of merged on intervals. Transmitting vs waiting (issue 17; int_breakdown_calls): xfer_ns = Σ transfer parts of the iteration's calls (after the group's last member posted), wait_ns = Σ their waiting parts (bubble and sync wait), so 'on' includes waiting while transmit_share = xfer_ns / iteration_ns counts only transmission (sums over calls: concurrent calls count each). Inputs: int_iteration_spans, int_rank_busy_merged, int_onoff_signature, int_breakdown_calls.
CREATE OR REPLACE VIEW on_off(
  -- Training run identifier.
  run_id,
  -- Global rank.
  rank,
  -- Iteration.
  iteration,
  -- Where the on intervals come from: kernels | comm_ops (null when the iteration has none).
  source,
  -- Iteration span start, ns.
  start_ns,
  -- Iteration span end, ns.
  end_ns,
  -- Iteration span duration, ns (= on_ns + off_ns - spill_ns).
  iteration_ns,
  -- Communication-active time of the iteration's own work, ns.
  on_ns,
  -- Span time without the iteration's communication, ns.
  off_ns,
  -- Number of merged on intervals.
  cycles,
  -- (on_ns - spill_ns) / iteration_ns: share of the span with communication active.
  duty_cycle,
  -- md5 of the on intervals' start and end relative to the iteration, rounded to 5% of it (time shape).
  shape_signature,
  -- md5 of the iteration's call token sequence (int_onoff_signature).
  signature,
  -- Part of on_ns outside the span (after the next step's first start), ns.
  spill_ns,
  -- Σ transfer parts of the iteration's calls (transmitting: after the group's last member posted), ns.
  xfer_ns,
  -- Σ waiting parts of the iteration's calls (for a peer or another stage), ns.
  wait_ns,
  -- xfer_ns / iteration_ns: share of the span spent transmitting (beside duty_cycle, which includes waiting).
  transmit_share
) AS
WITH win AS (
  SELECT run_id, rank, iteration, start_ns, end_ns, duration_ns
  FROM int_iteration_spans
),
comm AS (
  SELECT
    b.run_id,
    b.rank,
    b.iteration,
    any_value(b.source) AS source,
    sum(b.dur_ns) AS on_ns,
    sum(
      greatest(b.end_ns - greatest(b.ts_ns, w.end_ns), 0)
      + greatest(least(b.end_ns, w.start_ns) - b.ts_ns, 0)
    ) AS spill_ns,
    count(*) AS cycles,
    md5(
      string_agg(
        CAST(round(20.0 * (b.ts_ns - w.start_ns) / nullif(w.duration_ns, 0)) AS VARCHAR)
        || '-'
        || CAST(round(20.0 * (b.end_ns - w.start_ns) / nullif(w.duration_ns, 0)) AS VARCHAR),
        ',' ORDER BY b.ts_ns
      )
    ) AS shape_signature
  FROM int_rank_busy_merged AS b
  JOIN win AS w ON b.run_id = w.run_id AND b.rank = w.rank AND b.iteration = w.iteration
  WHERE b.activity = 'comm'
  GROUP BY b.run_id, b.rank, b.iteration
),
split AS (
  SELECT run_id, rank, iteration, sum(xfer_ns) AS xfer_ns, sum(wait_ns) AS wait_ns
  FROM int_breakdown_calls
  WHERE iteration IS NOT NULL
  GROUP BY run_id, rank, iteration
)
SELECT
  w.run_id,
  w.rank,
  w.iteration,
  c.source,
  w.start_ns,
  w.end_ns,
  w.duration_ns AS iteration_ns,
  coalesce(c.on_ns, 0)::BIGINT AS on_ns,
  (w.duration_ns - coalesce(c.on_ns - c.spill_ns, 0))::BIGINT AS off_ns,
  coalesce(c.cycles, 0) AS cycles,
  coalesce(c.on_ns - c.spill_ns, 0) / nullif(w.duration_ns, 0) AS duty_cycle,
  coalesce(c.shape_signature, md5('')) AS shape_signature,
  s.signature,
  coalesce(c.spill_ns, 0)::BIGINT AS spill_ns,
  coalesce(x.xfer_ns, 0)::BIGINT AS xfer_ns,
  coalesce(x.wait_ns, 0)::BIGINT AS wait_ns,
  coalesce(x.xfer_ns, 0) / nullif(w.duration_ns, 0) AS transmit_share
FROM win AS w
LEFT JOIN comm AS c ON w.run_id = c.run_id AND w.rank = c.rank AND w.iteration = c.iteration
LEFT JOIN int_onoff_signature AS s
  ON w.run_id = s.run_id AND w.rank = s.rank AND w.iteration = s.iteration
LEFT JOIN split AS x ON w.run_id = x.run_id AND w.rank = x.rank AND w.iteration = x.iteration
