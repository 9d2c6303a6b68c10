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
  -- Global (world) rank of the member, when known.
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
SELECT
  run_id,
  comm_id,
  rank AS group_rank,
  nranks,
  global_rank,
  host,
  pid,
  cuda_dev,
  comm_hash,
  parent_comm_id,
  parent_comm_hash,
  parent_nranks,
  split_color,
  split_key,
  source_file,
  source_line,
  source_format,
  group_desc,
  group_ranks,
  last_enqueued_seq,
  last_started_seq,
  last_completed_seq,
  seq_status_source
FROM communicators
