-- The one source format whose communication calls count for each rank, so a rank logged by two tools (DeepSpeed comms log + Kineto trace, NCCL log + nsys export) is not counted twice in traffic, bandwidth and size metrics.
-- One row per (run_id, rank) with a logged call. Rule: NCCL debug, Kineto and nsys are preferred over the DeepSpeed comms logger (they carry the communicator, hence the group and ring), and every other format over a Flight Recorder dump (a window of the rank's calls: its ring buffer, or only the calls pending when it was dumped, so its count says nothing about the run) and an NCCL Inspector dump (2.30+ leaves out calls under 8 KiB, <= 2.29 keeps only the latest call per dump tick; its global rank is the file's largest communicator's, wrong when the world has no record); among them the format with the most data-moving calls for the rank, then the most calls whose group of global ranks is known (int_groups_comm_keys with complete members, or the world: group_size = world size, as a call on the default group of a W-rank trace, group_source inferred_default; e.g. NCCL split communicators whose color is not logged are not), then the most data-moving calls with a duration (NCCL debug logs none); ties: nccl_debug, kineto, nsys, then by name. The order is stated once, in the macro primary_source_order (sql/macros/primary_source_order.sql). Inputs: int_comm_op_shape_keys (the calls, counted per distinct shape), int_groups_comm_keys, int_run_world.
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
-- Algorithm: the calls are counted first per value of what the rule joins on (format,
-- communicator, process, logged group size: a few thousand at 1024 ranks), and those counts
-- joined to the groups, instead of each call (each call of such a value meets the same key rows,
-- so the sums equal the per-call counts). The counts are summed from the calls' distinct shapes
-- with their numbers of calls and of timed calls (int_comm_op_shape_keys: every column here is
-- one of a call's shape), not from the classified shapes (int_comm_op_shapes): in the catalog,
-- where every intermediate is a live view, those would inline the whole classification into
-- this view's readers (int_instance_lane_shaped; tests/pipeline/test_catalog_fanout.py), while
-- the unclassified shapes read only the calls.
WITH
  keys AS MATERIALIZED (SELECT * FROM int_groups_comm_keys WHERE members_complete),
  counted AS (
    SELECT
      run_id, rank, source_format, is_traffic, comm_id, host, pid, group_size,
      sum(n_calls) AS calls,
      sum(n_timed) AS timed
    FROM int_comm_op_shape_keys
    WHERE rank IS NOT NULL
    GROUP BY ALL
  ),
  per_format AS (
    SELECT
      o.run_id,
      o.rank,
      o.source_format,
      coalesce(sum(o.calls) FILTER (WHERE o.is_traffic), 0)::BIGINT AS traffic_calls,
      coalesce(
        sum(o.calls) FILTER (
          WHERE o.is_traffic
            AND (ck.comm_id IS NOT NULL OR pk.comm_id IS NOT NULL OR o.group_size = w.world_size)
        ),
        0
      )::BIGINT AS placed_calls,
      coalesce(sum(o.timed) FILTER (WHERE o.is_traffic), 0)::BIGINT AS timed_calls,
      sum(o.calls)::BIGINT AS calls
    FROM counted AS o
    LEFT JOIN int_run_world AS w ON w.run_id = o.run_id
    LEFT JOIN keys AS ck
      ON ck.key_kind = 'communicator' AND ck.run_id = o.run_id AND ck.comm_id = o.comm_id
      AND coalesce(ck.host, '') = coalesce(o.host, '') AND coalesce(ck.pid, -1) = coalesce(o.pid, -1)
      AND ck.global_rank = o.rank
    LEFT JOIN keys AS pk
      ON pk.key_kind = 'process_group' AND pk.run_id = o.run_id AND pk.comm_id = o.comm_id
      AND pk.group_size = o.group_size
    GROUP BY o.run_id, o.rank, o.source_format
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
