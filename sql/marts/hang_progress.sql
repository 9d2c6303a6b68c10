-- Hang triage, per rank and process group (issue 19 item 4): how far each rank got in each Flight Recorder group (or NCCL communicator) when it stopped, beside the furthest member, so a rank that stopped early stands out.
-- One row per (run_id, source, group_name, rank) of int_hang_group_progress (Flight Recorder: every member of a pg_config group whose rank left a dump, counters from pg_status, else the dump's entries; NCCL debug logs: every member of a communicator known across ranks, the highest opCount it logged, nothing about completion). Empty for a run with neither. pipeline/hang.py (`commscope hang --progress`) prints the Flight Recorder rows from the dump files.
CREATE OR REPLACE VIEW hang_progress(
  -- Training run identifier.
  run_id,
  -- flight_recorder | nccl_debug.
  source,
  -- Process-group name (pg_config key); NCCL: 'nccl:' + the communicator's group (int_groups_comm_keys.global_group: world, the member ranks, or nccl:<hash>/<n>).
  group_name,
  -- Process-group description (default_pg, TP, DP, ...).
  group_desc,
  -- Global ranks of the members, ascending, comma-separated.
  group_ranks,
  -- Number of members.
  group_size,
  -- True for a group whose entries are send/recv: its counters are not compared across members.
  is_p2p_group,
  -- Global rank of the member.
  rank,
  -- Last collective sequence number the rank enqueued on the group (Flight Recorder: 1-based, 0 = none; NCCL: the opCount, 0-based, -1 = none); null when unknown.
  last_enqueued_seq,
  -- Last collective seen starting (-1 when timing was not enabled); null from entries.
  last_started_seq,
  -- Last collective seen completed on the rank; null when unknown.
  last_completed_seq,
  -- entry | order (pg_status tied to the group by an entry or by creation order) | entries (the dump's entries) | nccl_log (COLL lines) | null (unknown).
  counter_source,
  -- The rank's entries of the group not completed when it dumped (p2p included); null for NCCL logs.
  pending_entries,
  -- Highest last_enqueued_seq of any member of the group.
  group_last_enqueued_seq,
  -- Lowest last_completed_seq of any member: every member completed up to here (null for NCCL logs).
  group_last_completed_seq,
  -- True for a collective group member that enqueued less than another member (it never reached a collective its peers posted).
  is_behind
) AS
WITH
  progress AS (SELECT * FROM int_hang_group_progress)
SELECT
  run_id,
  source,
  group_name,
  group_desc,
  group_ranks,
  group_size,
  is_p2p_group,
  rank,
  last_enqueued_seq,
  last_started_seq,
  last_completed_seq,
  counter_source,
  pending_entries,
  max(last_enqueued_seq) OVER (PARTITION BY run_id, source, group_name) AS group_last_enqueued_seq,
  min(last_completed_seq) OVER (PARTITION BY run_id, source, group_name) AS group_last_completed_seq,
  NOT is_p2p_group
  AND last_enqueued_seq
  < max(last_enqueued_seq) OVER (PARTITION BY run_id, source, group_name) AS is_behind
FROM progress
