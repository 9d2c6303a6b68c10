-- NCCL communicators of the run named the same on every member (issue 19 item 4, hang triage from NCCL debug logs): each process's communicator pointer with a cross-rank identity.
-- One row per (run_id, host, pid, comm_id, global_rank) of an NCCL debug log's Init lines whose communicator has a cross-rank identity: its commId (comm_hash), or for a split child that logs none (NCCL >= 2.21) its parent's identity, size and split color. Rows without a global rank or an identity are left out.
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
  -- The identity, the same on every member: 'nccl:<commId>' or 'nccl:split:<parent identity>/<parent nranks>:<color>'.
  group_name
) AS
WITH
  comms AS (
    SELECT * FROM stg_store__communicators
    WHERE source_format = 'nccl_debug' AND global_rank IS NOT NULL
  ),
  keyed AS (
    SELECT
      run_id,
      host,
      pid,
      comm_id,
      global_rank,
      coalesce(
        comm_hash,
        'split:' || parent_comm_hash || '/' || parent_nranks || ':' || split_color
      ) AS identity
    FROM comms
  )
SELECT DISTINCT
  run_id,
  host,
  pid,
  comm_id,
  global_rank,
  'nccl:' || identity AS group_name
FROM keyed
WHERE identity IS NOT NULL
