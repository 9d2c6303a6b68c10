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
SELECT
  run_id,
  rank,
  iteration,
  md5(
    concat_ws(':', count(*), sum(h), sum(h * pos) - min(pos) * sum(h))
  ) AS signature,
  count(*) AS ops
FROM (
  SELECT
    i.run_id,
    i.rank,
    i.iteration,
    ci.pos::HUGEINT AS pos,
    th.h
  FROM int_iterations AS i
  JOIN int_comm_op_iteration AS ci
    ON i.run_id = ci.run_id AND coalesce(i.rank, -1) = coalesce(ci.rank, -1)
    AND i.source_file = ci.source_file AND i.iteration = ci.iteration
  -- tokens repeat (a few hundred distinct among millions of calls): one md5 per distinct token
  JOIN (
    SELECT token, md5_number_lower(token)::HUGEINT AS h
    FROM (SELECT DISTINCT token FROM int_comm_op_iteration)
  ) AS th ON th.token = ci.token
)
GROUP BY run_id, rank, iteration
