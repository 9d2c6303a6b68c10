-- Send volume of the communication calls whose global rank nothing names, keyed on the process that logged them (host:pid), so a run whose ranks are unknown still shows its traffic instead of an empty matrix (issue 19 item 3).
-- One row per (run_id, iteration, process, traffic_class, op, group_size). A rank's send volume as int_flows_expanded counts it before placing it: comm_bus_bytes(op, msg_bytes, n) of sql/macros/comm_bus_factor.sql for collectives (what one member sends in a ring or pairwise exchange), msg_bytes for send, nothing for recv (its sender's row holds it). Destinations stay unknown: the calls' peers and ring neighbours are communicator ranks, which only the global ranks could place. Calls with a rank (logged or inferred, comm_ops.rank_source) are never here.
CREATE OR REPLACE VIEW int_flows_unranked(
  -- Training run identifier.
  run_id,
  -- Iteration as the source logged it (the detected iterations are per rank), null when unknown.
  iteration,
  -- The logging process, 'host:pid'.
  process,
  -- Traffic class of the call (int_comm_ops_classified).
  traffic_class,
  -- Normalised operation.
  op,
  -- Ranks in the call's communicator (n).
  group_size,
  -- Bytes the process sends by these calls (destinations unknown).
  bytes,
  -- Logged calls contributing.
  calls
) AS
WITH
  -- each logical call once (int_calls), an NCCL all-to-all as its per-peer lines
  classified AS (SELECT * FROM int_call_lines)
SELECT
  run_id,
  iteration,
  host || ':' || pid AS process,
  traffic_class,
  op,
  group_size,
  sum(
    CASE
      WHEN op = 'send' THEN msg_bytes
      WHEN op = 'recv' THEN 0
      ELSE comm_bus_bytes(op, msg_bytes, group_size)
    END
  )::DOUBLE AS bytes,
  count(*)::BIGINT AS calls
FROM classified
WHERE rank IS NULL AND is_traffic AND msg_bytes > 0
  AND host IS NOT NULL AND pid IS NOT NULL
GROUP BY run_id, iteration, host, pid, traffic_class, op, group_size
