-- NCCL communicators of the run named the same on every member (issue 19 item 4, hang triage from NCCL debug logs): each process's communicator pointer with its group of global ranks.
-- One row per (run_id, host, pid, comm_id, global_rank) of an NCCL debug log's Init lines whose group int_groups_comm_keys knows: 'world', the sorted member ranks, or 'nccl:<commId or split identity>/<n>' (a split child without commId, NCCL >= 2.21: its parent's identity and color, told apart by split call where a color was reused). Two communicators with the same members share the key, so their opCounts are compared together. Rows without a global rank or a group are left out.
CREATE OR REPLACE VIEW int_hang_nccl_comms(
  -- Training run identifier.
  run_id,
  -- Host of the member process.
  host,
  -- Process id of the member process.
  pid,
  -- Communicator pointer as the process logged it.
  comm_id,
  -- Global rank of the member process.
  global_rank,
  -- The identity, the same on every member: 'nccl:' || int_groups_comm_keys.global_group (nccl:world, nccl:0,2, nccl:nccl:<hash>/<n>).
  group_name
) AS
WITH
  comms AS (
    SELECT DISTINCT run_id, host, pid, comm_id, global_rank
    FROM stg_store__communicators
    WHERE source_format = 'nccl_debug' AND global_rank IS NOT NULL
  ),
  keys AS (
    SELECT * FROM int_groups_comm_keys
    WHERE key_kind = 'communicator' AND global_group IS NOT NULL
  )
SELECT DISTINCT
  c.run_id,
  c.host,
  c.pid,
  c.comm_id,
  c.global_rank,
  'nccl:' || k.global_group AS group_name
FROM comms AS c
INNER JOIN keys AS k
  ON k.run_id = c.run_id AND k.comm_id = c.comm_id AND k.host = c.host AND k.pid = c.pid
  AND k.global_rank = c.global_rank
