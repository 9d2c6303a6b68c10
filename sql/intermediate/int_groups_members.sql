-- Members of each group of global ranks (communicator or process group), with their rank inside the group.
-- One row per (run_id, global_group, global_rank) for groups whose members are known. Inputs: int_groups_comm_keys, stg_store__communicators (NCCL communicators' group ranks), int_comm_op_shape_keys (a process group's members and their logged group ranks, read per distinct call shape), int_run_world (the world group).
CREATE OR REPLACE VIEW int_groups_members(
  -- Training run identifier.
  run_id,
  -- Group key (see int_groups_comm_keys.global_group).
  global_group,
  -- Number of ranks in the group.
  group_size,
  -- Member's rank inside the group (its position in the group order).
  group_rank,
  -- Member's global rank.
  global_rank
) AS
WITH
  keys AS MATERIALIZED (SELECT * FROM int_groups_comm_keys),
  groups AS (
    SELECT DISTINCT run_id, key_kind, comm_id, group_size, global_group
    FROM keys
    WHERE members_complete AND global_group <> 'world'
  ),
  from_comms AS (
    SELECT DISTINCT g.run_id, g.global_group, g.group_size, c.group_rank, k.global_rank
    FROM groups AS g
    JOIN keys AS k
      ON k.run_id = g.run_id AND k.global_group = g.global_group AND k.key_kind = 'communicator'
    JOIN stg_store__communicators AS c
      ON c.run_id = k.run_id AND c.comm_id = k.comm_id AND coalesce(c.host, '') = coalesce(k.host, '')
      AND coalesce(c.pid, -1) = coalesce(k.pid, -1) AND c.global_rank = k.global_rank
    WHERE g.key_kind = 'communicator'
  ),
  from_ops AS (
    SELECT
      g.run_id,
      g.global_group,
      g.group_size,
      o.rank AS global_rank,
      min(o.group_rank) AS logged_group_rank
    FROM groups AS g
    -- the calls' distinct shapes: rank, group and group rank are columns of a call's shape
    JOIN int_comm_op_shape_keys AS o
      ON o.run_id = g.run_id AND o.comm_id = g.comm_id AND o.group_size = g.group_size
    WHERE g.key_kind = 'process_group' AND o.rank IS NOT NULL
    GROUP BY ALL
  ),
  world AS (
    SELECT run_id, 'world' AS global_group, world_size AS group_size,
      unnest(range(0, world_size)) AS global_rank
    FROM int_run_world
    WHERE world_size IS NOT NULL
  ),
  unioned AS (
    SELECT
      run_id,
      global_group,
      group_size::INTEGER AS group_size,
      group_rank::INTEGER AS group_rank,
      global_rank::INTEGER AS global_rank
    FROM from_comms
    UNION ALL
    SELECT
      run_id,
      global_group,
      group_size::INTEGER,
      coalesce(
        logged_group_rank,
        row_number() OVER (PARTITION BY run_id, global_group ORDER BY global_rank) - 1
      )::INTEGER AS group_rank,
      global_rank::INTEGER
    FROM from_ops
    UNION ALL
    SELECT run_id, global_group, group_size::INTEGER, global_rank::INTEGER AS group_rank,
      global_rank::INTEGER
    FROM world
  )
SELECT run_id, global_group, any_value(group_size) AS group_size, min(group_rank) AS group_rank,
  global_rank
FROM unioned
GROUP BY run_id, global_group, global_rank
