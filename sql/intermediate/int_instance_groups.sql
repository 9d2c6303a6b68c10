-- How each group's collective calls are matched across its ranks (issue 18 item 1): per (run, group) of the lane calls int_instance_matched numbers as collectives, the method (seq or order), whether order counts inside iterations, and the seq range the dense numbering uses; rules in int_instance_members' header.
-- One row per (run_id, gk) of int_instance_lane_calls on a known group of more than one rank (collectives, barriers, and send/recv whose peer cannot be named). Inputs: int_instance_lane_calls, int_instance_shapes (each (run, group, rank) numbered once per shape, the sort key). A table of its own so that the matching's join of every call with its group's method builds its hash table on these few rows (as a CTE its estimate was larger than the calls', and DuckDB built three 17 M-row hash tables at 1024 ranks).
CREATE OR REPLACE VIEW int_instance_groups(
  -- Training run identifier.
  run_id,
  -- hash(global_group) (int_instance_lane_calls.gk): the group.
  gk,
  -- seq | order: how the group's calls are matched (int_instance_members' header).
  match_method,
  -- Every member's calls carry a source or marker iteration (order matching counts inside it).
  within_iteration,
  -- No member logs a seq twice on the group.
  seq_unique,
  -- The first seq when every member logs the same contiguous range of seqs (instance_seq = seq - seq_first + 1); null otherwise.
  seq_first
) AS
WITH
  lanes AS MATERIALIZED (
    -- every (run, group, rank) of the shapes as one dense integer (a few thousand shapes), so
    -- that the sort below orders two integers per call (with the run_id string, the group and
    -- the format in it the sort cost about twice as much)
    SELECT
      shape_id,
      run_id,
      gk,
      source_format,
      dense_rank() OVER (ORDER BY run_id, gk, rank) AS lane
    FROM int_instance_shapes
  ),
  coll_pre AS (
    SELECT
      l.lane,
      c.shape_id,
      c.seq,
      coalesce(c.step_iteration, FALSE) AND c.iteration IS NOT NULL AS iter_ok
    FROM int_instance_lane_calls AS c
    JOIN lanes AS l ON l.shape_id = c.shape_id
    -- send/recv whose peer cannot be named (a group whose members are not all known) are
    -- matched as calls of their group, so a missing partner still shows
    WHERE c.on_group AND (c.op NOT IN ('send', 'recv') OR c.peer_resolved IS NULL)
  ),
  coll_lane AS (
    -- per (group, rank): seq_usable = every call has a seq and not all the same (or one
    -- call), seq_unique = every call has a seq and no seq twice, seq_contiguous = unique and
    -- every seq of [seq_lo, seq_hi]; a repeated seq is found beside its twin in seq order
    -- (one sort of the calls: an aggregate per (group, rank, seq) built a hash table of as
    -- many groups as calls, ~20 % more CPU); the rank's format is its shape's (one lane per rank)
    SELECT
      lane,
      any_value(shape_id) AS shape_id,
      count(seq) = count(*) AND (min(seq) < max(seq) OR count(*) = 1) AS seq_usable,
      count(seq) = count(*) AND NOT coalesce(bool_or(repeated), FALSE) AS seq_unique,
      coalesce(
        count(seq) = count(*) AND NOT coalesce(bool_or(repeated), FALSE)
        AND max(seq) - min(seq) + 1 = count(*),
        FALSE
      ) AS seq_contiguous,
      min(seq) AS seq_lo,
      max(seq) AS seq_hi,
      bool_and(iter_ok) AS iter_usable
    FROM (
      SELECT
        lane,
        shape_id,
        seq,
        iter_ok,
        seq = lag(seq) OVER (PARTITION BY lane ORDER BY seq) AS repeated
      FROM coll_pre
    )
    GROUP BY lane
  ),
  coll_rank AS (
    SELECT l.run_id, l.gk, l.source_format, c.*
    FROM coll_lane AS c
    JOIN lanes AS l ON l.shape_id = c.shape_id
  ),
  coll_method AS (
    SELECT
      run_id,
      gk,
      CASE
        WHEN bool_and(seq_usable) AND count(DISTINCT source_format) = 1 THEN 'seq'
        ELSE 'order'
      END AS match_method,
      bool_and(iter_usable) AS within_iteration,
      bool_and(seq_unique) AS seq_unique,
      -- every member logs the same contiguous range of seqs: the dense rank of a seq in the
      -- group is seq - seq_first + 1 (no window)
      CASE
        WHEN bool_and(seq_contiguous) AND min(seq_lo) = max(seq_lo) AND min(seq_hi) = max(seq_hi)
          THEN min(seq_lo)
      END AS seq_first
    FROM coll_rank
    GROUP BY run_id, gk
  )
SELECT run_id, gk, match_method, within_iteration, seq_unique, seq_first
FROM coll_method
