-- Bytes sent from rank i to rank j per iteration and traffic class, collectives expanded into point-to-point flows by their algorithm (APNet'24 traffic matrix, Fig. 2-4).
-- One row per (run_id, iteration, src_rank, dst_rank, traffic_class, src_process); dst_rank null holds volume whose destinations are unknown; src_rank null (with src_process set) holds the send volume of calls whose global rank nothing names, keyed on the logging process (int_flows_unranked), so such a run's matrix is not empty. Expansion rules: int_flows_expanded, over the logical calls (int_call_lines: each call of int_calls once, however many tools of a rank logged it, with the size a paired source gave where the counted one has none; an all-to-all an NCCL log wrote as grouped Send/Recv lines by those lines, so its uneven per-peer bytes stay). bytes is traffic between ranks only: what a rank sends to itself (an all-to-all's own block, e.g. the EP matrix diagonal) never leaves the GPU and is in local_bytes, on the src_rank = dst_rank row, whose bytes is 0.
CREATE OR REPLACE VIEW traffic_matrix(
  -- Training run identifier.
  run_id,
  -- Iteration (int_comm_op_iteration; null when unknown).
  iteration,
  -- Sending global rank.
  src_rank,
  -- Receiving global rank (null: destination unknown).
  dst_rank,
  -- TP | PP | DP | EP | EmbTableSyn | other.
  traffic_class,
  -- Bytes sent from src_rank to dst_rank (sum of flows; ring shares are fractional); 0 on the diagonal (src_rank = dst_rank: local, see local_bytes).
  bytes,
  -- Bytes the rank sends to itself (src_rank = dst_rank): local, not network traffic; 0 off the diagonal.
  local_bytes,
  -- True when both ranks are on the same node; null when a node is unknown.
  intra_node,
  -- Node of src_rank.
  src_node,
  -- Node of dst_rank.
  dst_node,
  -- Number of flows (expanded call x channel rows) summed.
  flows,
  -- Number of distinct logged calls contributing (an all-to-all logged as grouped NCCL Send lines counts once per destination, as its lines).
  calls,
  -- 'host:pid' of the logging process on rows whose src_rank is unknown (src_rank and dst_rank
  -- null, bytes = its send volume); null on every ranked row.
  src_process
) AS
WITH
  nodes AS MATERIALIZED (SELECT run_id, rank, node FROM int_rank_nodes),
  agg AS (
    SELECT
      run_id,
      iteration,
      src_rank,
      dst_rank,
      traffic_class,
      sum(bytes) AS bytes,
      sum(local_bytes) AS local_bytes,
      sum(flows)::BIGINT AS flows,
      sum(calls)::BIGINT AS calls
    FROM int_flows_expanded
    GROUP BY run_id, iteration, src_rank, dst_rank, traffic_class
  ),
  unranked AS (
    SELECT
      run_id,
      iteration,
      traffic_class,
      process,
      sum(bytes) AS bytes,
      sum(calls)::BIGINT AS calls
    FROM int_flows_unranked
    GROUP BY run_id, iteration, traffic_class, process
  )
SELECT
  a.run_id,
  a.iteration,
  a.src_rank,
  a.dst_rank,
  a.traffic_class,
  a.bytes,
  a.local_bytes,
  CASE WHEN s.node IS NOT NULL AND d.node IS NOT NULL THEN s.node = d.node END AS intra_node,
  s.node AS src_node,
  d.node AS dst_node,
  a.flows,
  a.calls,
  NULL::VARCHAR AS src_process
FROM agg AS a
LEFT JOIN nodes AS s ON s.run_id = a.run_id AND s.rank = a.src_rank
LEFT JOIN nodes AS d ON d.run_id = a.run_id AND d.rank = a.dst_rank
UNION ALL
-- calls without a global rank: the process's send volume, destinations unknown
SELECT
  run_id,
  iteration,
  NULL::INTEGER,
  NULL::INTEGER,
  traffic_class,
  bytes,
  0::DOUBLE,
  NULL::BOOLEAN,
  NULL::INTEGER,
  NULL::INTEGER,
  calls,
  calls,
  process
FROM unranked
