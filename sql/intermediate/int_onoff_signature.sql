-- Per-iteration signature of the communication call sequence (md5 of its op:size:group:peer tokens in order), so iteration-to-iteration regularity can be compared.
-- One row per (run, rank, iteration) of int_iterations that has calls in its boundary file.
CREATE OR REPLACE VIEW int_onoff_signature(
  -- Training run identifier.
  run_id,
  -- Global rank (null when the source does not say).
  rank,
  -- Iteration.
  iteration,
  -- md5 of the iteration's call tokens in log order; equal signatures = identical call sequence.
  signature,
  -- Calls in the signature.
  ops
) AS
SELECT
  i.run_id,
  i.rank,
  i.iteration,
  md5(string_agg(ci.token, ' ' ORDER BY ci.pos)) AS signature,
  count(*) AS ops
FROM int_iterations AS i
JOIN int_comm_op_iteration AS ci
  ON i.run_id = ci.run_id AND coalesce(i.rank, -1) = coalesce(ci.rank, -1)
  AND i.source_file = ci.source_file AND i.iteration = ci.iteration
GROUP BY i.run_id, i.rank, i.iteration
