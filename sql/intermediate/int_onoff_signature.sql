-- Per-iteration signature of the communication call sequence (a position-weighted hash of its op:size:group:peer tokens), so iteration-to-iteration regularity can be compared.
-- One row per (run, rank, iteration) of int_iterations that has calls in its boundary file.
CREATE OR REPLACE VIEW int_onoff_signature(
  -- Training run identifier.
  run_id,
  -- Global rank (null when the source does not say).
  rank,
  -- Iteration.
  iteration,
  -- md5 of 'calls:sum(h):sum(h * (pos - first pos))' with h = md5_number_lower(token) (the
  -- token's md5 bytes 8..15 as a little-endian integer): equal signatures = the same tokens at the
  -- same offsets from the iteration's first call. Aggregates only (no per-iteration sort or
  -- string concatenation), so it stays cheap at 17 M calls.
  signature,
  -- Calls in the signature.
  ops
) AS
-- Algorithm: the sums are linear, so the calls are summed per (shape, iteration, peer)
-- (int_comm_op_iteration_counts: integers, no per-call string), h is computed once per (shape,
-- peer) (the token is a function of the shape and the peer: comm_op_token), and the partial
-- sums meet their iteration through the shape's run, rank and file (int_comm_op_shape_keys):
-- count = sum(n), sum(h) = sum(h * n), sum(h * pos) = sum(h * sum(pos)), min(pos) = min of the
-- partial minima.
WITH per_peer AS (
  SELECT
    shape_id,
    iteration,
    peer_rank,
    sum(calls) AS n,
    sum(sum_pos) AS sum_pos,
    min(min_pos)::HUGEINT AS min_pos
  FROM int_comm_op_iteration_counts
  WHERE iteration IS NOT NULL
  GROUP BY shape_id, iteration, peer_rank
),
-- tokens repeat (a few per shape among millions of calls): one md5 per (shape, peer)
hashes AS (
  SELECT
    p.shape_id,
    p.peer_rank,
    md5_number_lower(
      comm_op_token(k.op, k.msg_bytes, k.group_size, k.comm_id, p.peer_rank)
    )::HUGEINT AS h
  FROM (SELECT DISTINCT shape_id, peer_rank FROM per_peer) AS p
  JOIN int_comm_op_shape_keys AS k ON k.shape_id = p.shape_id
),
parts AS (
  SELECT
    i.run_id,
    i.rank,
    i.iteration,
    p.n,
    h.h * p.n AS sum_h,
    h.h * p.sum_pos AS sum_h_pos,
    p.min_pos
  FROM int_iterations AS i
  JOIN int_comm_op_shape_keys AS k
    ON i.run_id = k.run_id AND coalesce(i.rank, -1) = coalesce(k.rank, -1)
    AND i.source_file = k.source_file
  JOIN per_peer AS p ON p.shape_id = k.shape_id AND p.iteration = i.iteration
  JOIN hashes AS h ON h.shape_id = p.shape_id AND h.peer_rank IS NOT DISTINCT FROM p.peer_rank
)
SELECT
  run_id,
  rank,
  iteration,
  md5(
    concat_ws(':', sum(n), sum(sum_h), sum(sum_h_pos) - min(min_pos) * sum(sum_h))
  ) AS signature,
  CAST(sum(n) AS BIGINT) AS ops
FROM parts
GROUP BY run_id, rank, iteration
