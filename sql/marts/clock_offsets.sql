-- Clock offset of every host (and of every rank whose clock disagrees with its host's) against the run's reference clock, with its error bound (issue 18 item 2): how far each host's timestamps must be shifted so that cross-rank figures (collective_instances, rank_waits, stragglers) compare like with like.
-- One row per (run_id, host) with a timed rank (rank null), plus one row per rank of scope 'rank' (rank set). Input: int_clock_offsets (estimated from matched instances' ends: see its header for the estimator and what error_bound_ns bounds). A rank without a host is its own clock domain: its row has host null and rank set.
CREATE OR REPLACE VIEW clock_offsets(
  -- Training run identifier.
  run_id,
  -- Host (clock domain); null for a rank whose host is unknown.
  host,
  -- Null for a host row; the rank for a rank row (its clock disagrees with its host's, or its host is unknown).
  rank,
  -- Timed ranks of the row (host rows: the host's ranks that share its offset), ascending, comma-separated.
  ranks,
  -- Clock minus the reference clock, ns: aligned time = raw time - offset_ns (0 for the reference host and for unaligned ones).
  offset_ns,
  -- Bound on |offset_ns - true offset|, ns (int_clock_offsets' header); 0 for the reference; null when unaligned.
  error_bound_ns,
  -- reference | host | rank | unaligned (no shared timed instance: offset 0, bound null).
  scope,
  -- Instances behind the estimate.
  n_instances,
  -- How the offset was found (collective or p2p ends, hops from the reference), or why none was.
  method
) AS
WITH
  o AS (SELECT * FROM int_clock_offsets),
  host_rows AS (
    SELECT
      run_id,
      host,
      NULL::INTEGER AS rank,
      string_agg(rank::VARCHAR, ',' ORDER BY rank) AS ranks,
      min(offset_ns) AS offset_ns,
      max(error_bound_ns) AS error_bound_ns,
      min(scope) AS scope,
      max(n_instances) AS n_instances,
      min(method) AS method
    FROM o
    WHERE host IS NOT NULL AND scope <> 'rank'
    GROUP BY run_id, host
  ),
  rank_rows AS (
    SELECT run_id, host, rank, rank::VARCHAR AS ranks, offset_ns, error_bound_ns, scope,
      n_instances, method
    FROM o
    WHERE host IS NULL OR scope = 'rank'
  )
SELECT
  run_id,
  host,
  rank::INTEGER AS rank,
  ranks,
  offset_ns::BIGINT AS offset_ns,
  error_bound_ns::BIGINT AS error_bound_ns,
  scope,
  n_instances::BIGINT AS n_instances,
  method
FROM (SELECT * FROM host_rows UNION ALL SELECT * FROM rank_rows)
