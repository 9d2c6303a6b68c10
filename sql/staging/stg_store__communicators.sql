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
  source_line
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
  source_line
FROM communicators
