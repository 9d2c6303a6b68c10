-- Rank identity each timeline or dump file states (trace_meta): its rank, the world size it names and its process, for the run's one world size (int_run_world).
-- One row per trace_meta row (one per ingested Kineto / nsys / Flight Recorder / Inspector file, or per process of a file that holds several). Input: trace_meta. No derived column: the columns as the parsers wrote them.
CREATE OR REPLACE VIEW stg_store__trace_meta(
  -- Training run identifier.
  run_id,
  -- Format of the file (kineto, nsys, flight_recorder, nccl_inspector, ...).
  source_format,
  -- File the row describes.
  source_file,
  -- Global rank of the file's process (null when the file does not say).
  rank,
  -- Where rank came from (trace_meta.rank_source: distributedInfo, mpi_ranks, file_name, dump_key, option, inferred_largest_comm, unknown).
  rank_source,
  -- World size the file states (Kineto distributedInfo.world_size, a dump's pg world); null when it names none.
  world_size,
  -- Host of the process, as logged.
  host,
  -- Process id, when known.
  pid
) AS
SELECT run_id, source_format, source_file, rank, rank_source, world_size, host, pid
FROM trace_meta;
