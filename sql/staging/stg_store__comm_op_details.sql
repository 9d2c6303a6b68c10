-- NCCL/process details of each communication call that stg_store__comm_ops does not carry.
-- One row per communication call seen on one rank (as comm_ops), keyed by source_file and source_line.
CREATE OR REPLACE VIEW stg_store__comm_op_details(
  -- Training run identifier.
  run_id,
  -- File the row came from.
  source_file,
  -- Line (or event index) in that file.
  source_line,
  -- Operating-system process id.
  pid,
  -- Element count as logged (NCCL semantics per op).
  elem_count,
  -- NCCL algorithm (RING, TREE, NVLS, ...) when the source says.
  algorithm,
  -- NCCL protocol when the source says.
  protocol,
  -- Operation name exactly as the source wrote it.
  raw_op
) AS
SELECT
  run_id,
  source_file,
  source_line,
  pid,
  "count" AS elem_count,
  algorithm,
  protocol,
  raw_op
FROM comm_ops
