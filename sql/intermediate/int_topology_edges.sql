-- NCCL ring and tree edges of each group in global ranks (ring next from 'Ring' and 'Channel NN/MM :' lines, tree up/down).
-- One row per (run_id, global_group, kind, channel, src_rank, dst_rank); kind ring = src sends to its ring successor dst, tree_up = dst is src's parent, tree_down = dst is src's child.
CREATE OR REPLACE VIEW int_topology_edges(
  -- Training run identifier.
  run_id,
  -- Group key of the communicator (int_groups_comm_keys.global_group).
  global_group,
  -- ring | tree_up | tree_down.
  kind,
  -- NCCL channel.
  channel,
  -- Global rank of the edge's sender.
  src_rank,
  -- Global rank of the edge's receiver.
  dst_rank
) AS
WITH
  members AS MATERIALIZED (SELECT * FROM int_groups_members),
  comm_group AS (
    SELECT run_id, comm_id, host, pid, min(global_group) AS global_group
    FROM int_groups_comm_keys
    WHERE key_kind = 'communicator' AND members_complete
    GROUP BY run_id, comm_id, host, pid
  ),
  edges AS (
    SELECT
      t.run_id,
      g.global_group,
      CASE
        WHEN t.kind IN ('ring', 'ring_order') THEN 'ring'
        WHEN t.direction = 'up' THEN 'tree_up'
        ELSE 'tree_down'
      END AS kind,
      t.channel,
      t.group_rank,
      t.peer_group_rank
    FROM stg_store__topology AS t
    JOIN comm_group AS g
      ON g.run_id = t.run_id AND g.comm_id = t.comm_id AND coalesce(g.host, '') = coalesce(t.host, '')
      AND coalesce(g.pid, -1) = coalesce(t.pid, -1)
    WHERE t.peer_group_rank >= 0 AND t.group_rank >= 0 AND (
      (t.kind IN ('ring', 'ring_order') AND t.direction = 'next')
      OR (t.kind = 'tree' AND t.direction IN ('up', 'down'))
    )
  )
SELECT DISTINCT
  e.run_id,
  e.global_group,
  e.kind,
  e.channel,
  s.global_rank AS src_rank,
  d.global_rank AS dst_rank
FROM edges AS e
JOIN members AS s
  ON s.run_id = e.run_id AND s.global_group = e.global_group AND s.group_rank = e.group_rank
JOIN members AS d
  ON d.run_id = e.run_id AND d.global_group = e.global_group AND d.group_rank = e.peer_group_rank
WHERE s.global_rank <> d.global_rank
