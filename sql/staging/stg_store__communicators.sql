-- NCCL communicators (and process groups) as initialised, one member row each.
-- One row per (communicator incarnation, rank) as communicators.
CREATE OR REPLACE VIEW stg_store__communicators(
  -- Training run identifier.
  run_id,
  -- Communicator pointer as logged (per process).
  comm_id,
  -- Rank inside the communicator.
  group_rank,
  -- Number of ranks in the communicator.
  nranks,
  -- Global (world) rank of the member, when known (an NCCL Inspector row: the rank another source names for the same host:pid, else the parser's guess from the file's largest communicator).
  global_rank,
  -- Host name.
  host,
  -- Process id.
  pid,
  -- CUDA device.
  cuda_dev,
  -- commId / commHash, the same on every member (null before NCCL 2.16).
  comm_hash,
  -- Parent communicator of a split: its pointer as logged.
  parent_comm_id,
  -- Identity of a split's parent, the same on every member (its commId, or its own split identity).
  parent_comm_hash,
  -- nranks of a split's parent.
  parent_nranks,
  -- color passed to ncclCommSplit (ranks of one parent with the same color form one child).
  split_color,
  -- key passed to ncclCommSplit (orders the ranks inside the child).
  split_key,
  -- File the row came from.
  source_file,
  -- Line in that file.
  source_line,
  -- Parser that produced the row (null in stores written before schema 1.7.0).
  source_format,
  -- Process-group description (Flight Recorder / Kineto pg_config desc: default_pg, TP, DP, ...); null for NCCL communicators.
  group_desc,
  -- Global ranks of the group's members, ascending, comma-separated (pg_config ranks); null when not listed.
  group_ranks,
  -- Flight Recorder pg_status: last collective seq this rank enqueued on the group (0 = none).
  last_enqueued_seq,
  -- Flight Recorder pg_status: last collective seq seen starting (-1 without timing).
  last_started_seq,
  -- Flight Recorder pg_status: last collective seq seen completed.
  last_completed_seq,
  -- How the counters were tied to the group: entry | order (null without counters).
  seq_status_source
) AS
WITH
  -- Global rank of each process (host by its first DNS label, pid) that a source other than
  -- NCCL Inspector names, kept when it names one: an Inspector file's global ranks are the
  -- parser's guess (its largest communicator taken as the world), replaced by this one.
  proc_ranks AS (
    SELECT
      run_id,
      split_part(host, '.', 1) AS short_host,
      pid,
      min(global_rank) AS global_rank
    FROM communicators
    WHERE host IS NOT NULL AND pid IS NOT NULL
      AND source_format IS DISTINCT FROM 'nccl_inspector'
    GROUP BY run_id, split_part(host, '.', 1), pid
    HAVING count(DISTINCT global_rank) = 1
  )
SELECT
  c.run_id,
  c.comm_id,
  c.rank AS group_rank,
  c.nranks,
  coalesce(p.global_rank, c.global_rank) AS global_rank,
  c.host,
  c.pid,
  c.cuda_dev,
  c.comm_hash,
  c.parent_comm_id,
  c.parent_comm_hash,
  c.parent_nranks,
  c.split_color,
  c.split_key,
  c.source_file,
  c.source_line,
  c.source_format,
  c.group_desc,
  c.group_ranks,
  c.last_enqueued_seq,
  c.last_started_seq,
  c.last_completed_seq,
  c.seq_status_source
FROM communicators AS c
LEFT JOIN proc_ranks AS p
  ON c.source_format = 'nccl_inspector'
  AND p.run_id = c.run_id
  AND p.pid = c.pid
  AND p.short_host = split_part(c.host, '.', 1)
