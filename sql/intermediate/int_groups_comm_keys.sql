-- Lookup from a logged communicator (NCCL pointer per process, or process-group name) to its group of global ranks.
-- One row per (run_id, key_kind, comm_id, host, pid, global_rank): NCCL communicators per member process; process groups once per (comm_id, group_size). A process group of the world's size is the world group, whichever name it has (a Kineto call on the default group, group_source inferred_default, gets group_size W). Inputs: stg_store__communicators (the NCCL communicators), int_comm_op_shape_keys (the process groups the calls name, read per distinct call shape), int_run_world.
CREATE OR REPLACE VIEW int_groups_comm_keys(
  -- Training run identifier.
  run_id,
  -- 'communicator' (NCCL pointer, matched by comm_id+host+pid+global rank) or 'process_group' (name, matched by comm_id+group_size).
  key_kind,
  -- Communicator identity as logged.
  comm_id,
  -- Host of the member process (communicator keys only).
  host,
  -- Process id of the member process (communicator keys only).
  pid,
  -- Global rank of the member (communicator keys only).
  global_rank,
  -- Number of ranks in the group.
  group_size,
  -- Group key: 'world' for the whole world, else the sorted member global ranks joined by ',' when all members are known, else 'nccl:<commHash>/<n>' (or 'nccl:split:<parent>/<parent n>:<color>[#<call>]/<n>' for a split child) or 'pg:<name>/<n>'.
  global_group,
  -- True when every member's global rank is known.
  members_complete,
  -- How the group was found: logged (NCCL communicator, or a process group the records name), pg_config (the trace's process-group table), inferred_default (default group of a W-rank trace, group_size W: the world); comma-joined when the calls of a key say several; null when they do not say.
  group_source
) AS
WITH
  rw AS MATERIALIZED (SELECT run_id, world_size FROM int_run_world),
  comms_raw AS MATERIALIZED (
    SELECT
      c.* EXCLUDE (comm_hash),
      c.comm_hash AS logged_hash,
      w.world_size,
      -- A split child logs no commId (NCCL 2.21+): its members are the ranks of one parent
      -- (identity + nranks) that passed the same color.
      CASE
        WHEN c.comm_hash IS NULL AND c.parent_comm_hash IS NOT NULL AND c.split_color IS NOT NULL
          THEN 'split:' || c.parent_comm_hash || '/' || coalesce(c.parent_nranks::VARCHAR, '?')
            || ':' || c.split_color::VARCHAR
      END AS split_base,
      -- Position of this split among the splits of the same parent logged by the process: split
      -- calls are collective over the parent, so it tells apart two calls that reused a color.
      CASE WHEN c.comm_hash IS NULL AND c.parent_comm_hash IS NOT NULL THEN
        row_number() OVER (
          PARTITION BY c.run_id, c.source_file, c.host, c.pid, c.parent_comm_hash, c.comm_hash IS NULL
          ORDER BY c.source_line
        )
      END AS split_call
    FROM stg_store__communicators AS c
    LEFT JOIN rw AS w USING (run_id)
  ),
  -- (parent, color) groups that mix several split calls: more member rows than distinct global
  -- ranks, or more distinct global ranks than the child's nranks. Those are keyed by call too.
  split_ambiguous AS (
    SELECT run_id, split_base, nranks
    FROM comms_raw
    WHERE split_base IS NOT NULL
    GROUP BY run_id, split_base, nranks
    HAVING count(*) > count(DISTINCT global_rank) OR count(DISTINCT global_rank) > any_value(nranks)
  ),
  comms AS MATERIALIZED (
    SELECT
      c.* EXCLUDE (logged_hash, split_base, split_call),
      coalesce(
        c.logged_hash,
        CASE
          WHEN a.split_base IS NOT NULL THEN c.split_base || '#' || c.split_call::VARCHAR
          ELSE c.split_base
        END
      ) AS comm_hash
    FROM comms_raw AS c
    LEFT JOIN split_ambiguous AS a
      ON a.run_id = c.run_id AND a.split_base = c.split_base AND a.nranks = c.nranks
  ),
  by_hash AS (
    SELECT
      run_id,
      comm_hash,
      nranks,
      array_to_string(list_sort(list(DISTINCT global_rank)), ',') AS member_list,
      count(DISTINCT global_rank) AS n_known
    FROM comms
    WHERE comm_hash IS NOT NULL AND global_rank IS NOT NULL
    GROUP BY run_id, comm_hash, nranks
  ),
  comm_keys AS (
    SELECT
      c.run_id,
      'communicator' AS key_kind,
      c.comm_id,
      c.host,
      c.pid,
      c.global_rank,
      c.nranks AS group_size,
      CASE
        WHEN c.nranks = c.world_size THEN 'world'
        WHEN h.n_known = c.nranks THEN h.member_list
        WHEN c.comm_hash IS NOT NULL THEN 'nccl:' || c.comm_hash || '/' || c.nranks
      END AS global_group,
      (c.nranks = c.world_size OR h.n_known = c.nranks) AS members_complete
    FROM comms AS c
    LEFT JOIN by_hash AS h
      ON h.run_id = c.run_id AND h.comm_hash = c.comm_hash AND h.nranks = c.nranks
  ),
  -- process groups from the calls' distinct shapes (int_comm_op_shape_keys: format, group,
  -- size, rank and group_source are columns of a call's shape, and only their distinct values
  -- count here)
  pg AS (
    SELECT
      o.run_id,
      o.comm_id,
      o.group_size,
      any_value(w.world_size) AS world_size,
      array_to_string(list_sort(list(DISTINCT o.rank)), ',') AS member_list,
      count(DISTINCT o.rank) AS n_known,
      string_agg(DISTINCT o.group_source, ',' ORDER BY o.group_source) AS group_source
    FROM int_comm_op_shape_keys AS o
    LEFT JOIN rw AS w USING (run_id)
    WHERE coalesce(o.source_format, '') <> 'nccl_debug'
      AND o.comm_id IS NOT NULL
      AND o.group_size IS NOT NULL
    GROUP BY o.run_id, o.comm_id, o.group_size
  )
SELECT
  run_id,
  key_kind,
  comm_id,
  host,
  pid,
  global_rank,
  any_value(group_size) AS group_size,
  min(global_group) AS global_group,
  bool_or(members_complete) AS members_complete,
  'logged' AS group_source
FROM comm_keys
GROUP BY run_id, key_kind, comm_id, host, pid, global_rank
UNION ALL
SELECT
  run_id,
  'process_group' AS key_kind,
  comm_id,
  NULL AS host,
  NULL AS pid,
  NULL AS global_rank,
  group_size,
  CASE
    WHEN group_size = world_size THEN 'world'
    WHEN n_known = group_size THEN member_list
    ELSE 'pg:' || comm_id || '/' || group_size
  END AS global_group,
  (group_size = world_size OR n_known = group_size) AS members_complete,
  group_source
FROM pg
