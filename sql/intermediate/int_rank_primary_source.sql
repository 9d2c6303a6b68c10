-- The one source format whose communication calls count for each rank, so a rank logged by two tools (DeepSpeed comms log + Kineto trace, NCCL log + nsys export) is not counted twice in traffic, bandwidth and size metrics.
-- One row per (run_id, rank) with a logged call. Rule: NCCL debug, Kineto and nsys are preferred over the DeepSpeed comms logger (they carry the communicator, hence the group and ring), and every other format over a Flight Recorder dump (a window of the rank's calls: its ring buffer, or only the calls pending when it was dumped, so its count says nothing about the run) and an NCCL Inspector dump (2.30+ leaves out calls under 8 KiB, <= 2.29 keeps only the latest call per dump tick; its global rank is the file's largest communicator's, wrong when the world has no record); among them the format with the most data-moving calls for the rank, then the most calls whose group of global ranks is known (int_groups_comm_keys with complete members, or the world: group_size = world size, as a call on the default group of a W-rank trace, group_source inferred_default; e.g. NCCL split communicators whose color is not logged are not), then the most data-moving calls with a duration (NCCL debug logs none); ties: nccl_debug, kineto, nsys, then by name. The order is stated once, in the macro primary_source_order (sql/macros/primary_source_order.sql).
CREATE OR REPLACE VIEW int_rank_primary_source(
  -- Training run identifier.
  run_id,
  -- Global rank.
  rank,
  -- Chosen parser (comm_ops.source_format).
  source_format,
  -- Data-moving calls of the rank in the chosen format.
  traffic_calls,
  -- Of those, calls whose group members are known (a logged group, or the world).
  placed_calls,
  -- Number of formats that logged calls for the rank (1 = no choice was needed).
  formats_logged
) AS
-- Algorithm: every value the rule reads but the call counts is a column of the call's shape
-- (int_comm_op_shapes: rank, format, op, communicator, process, logged group size), so the calls
-- are counted per shape_id first (int_comm_ops_shaped: one integer per call) and the few shapes
-- joined to the groups after; each call of a shape meets the same key rows, so the sums equal
-- the per-call counts.
WITH
  keys AS MATERIALIZED (SELECT * FROM int_groups_comm_keys WHERE members_complete),
  shape_calls AS (
    SELECT shape_id, count(*) AS calls, count(dur_ns) AS timed
    FROM int_comm_ops_shaped
    GROUP BY shape_id
  ),
  per_format AS (
    SELECT
      s.run_id,
      s.rank,
      s.source_format,
      coalesce(sum(n.calls) FILTER (WHERE s.is_traffic), 0)::BIGINT AS traffic_calls,
      coalesce(
        sum(n.calls) FILTER (
          WHERE s.is_traffic
            AND (
              ck.comm_id IS NOT NULL OR pk.comm_id IS NOT NULL
              OR s.call_group_size = w.world_size
            )
        ),
        0
      )::BIGINT AS placed_calls,
      coalesce(sum(n.timed) FILTER (WHERE s.is_traffic), 0)::BIGINT AS timed_calls,
      sum(n.calls)::BIGINT AS calls
    FROM shape_calls AS n
    JOIN int_comm_op_shapes AS s ON s.shape_id = n.shape_id
    LEFT JOIN int_run_world AS w ON w.run_id = s.run_id
    LEFT JOIN keys AS ck
      ON ck.key_kind = 'communicator' AND ck.run_id = s.run_id AND ck.comm_id = s.comm_id
      AND coalesce(ck.host, '') = coalesce(s.host, '') AND coalesce(ck.pid, -1) = coalesce(s.pid, -1)
      AND ck.global_rank = s.rank
    LEFT JOIN keys AS pk
      ON pk.key_kind = 'process_group' AND pk.run_id = s.run_id AND pk.comm_id = s.comm_id
      AND pk.group_size = s.call_group_size
    WHERE s.rank IS NOT NULL
    GROUP BY s.run_id, s.rank, s.source_format
  )
SELECT
  run_id,
  rank,
  source_format,
  traffic_calls,
  placed_calls,
  count(*) OVER (PARTITION BY run_id, rank) AS formats_logged
FROM per_format
QUALIFY row_number() OVER (
  PARTITION BY run_id, rank
  ORDER BY primary_source_order(source_format, traffic_calls, placed_calls, timed_calls, calls)
) = 1
