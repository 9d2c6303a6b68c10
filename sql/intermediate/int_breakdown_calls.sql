-- Timed communication calls of each rank's one timeline source with their traffic class, and pipeline send/recv split into waiting (bubble) and active transfer (APNet'24 §4.1, model_spec §A.2).
-- One row per row of int_comm_ops_timed, the one timed list (kernel-timed calls and uncovered comm kernels on a GPU rank, else the calls of the rank's one timeline source; calls timed 'none' are not there). Class: int_comm_ops_classified for calls; comm kernels (no call): PP for send/recv, EP for all_to_all, else other. PP split: a send a->b and a recv on b from a are paired in time order (the k-th with the k-th, when both ranks logged the same number); the transfer starts when the later side posts, so wait = max(0, later post - own post) and xfer = dur - wait. Unpaired PP calls: xfer = the fastest call of the rank with the same op and size (its least-waiting call), wait = dur - xfer.
CREATE OR REPLACE VIEW int_breakdown_calls(
  -- Training run identifier.
  run_id,
  -- Global rank that issued the call.
  rank,
  -- Parser of the rank's timeline source (kineto, nsys, deepspeed_comms, ...).
  source_format,
  -- comm_ops (classified calls) | kernels (comm kernels; class from the op only).
  source,
  -- File the call came from.
  source_file,
  -- Line (or event index) in that file.
  source_line,
  -- Normalised operation.
  op,
  -- TP | PP | DP | EP | EmbTableSyn | other (int_comm_ops_classified; kernels: PP for send/recv, EP for all_to_all, else other).
  traffic_class,
  -- Message size in bytes (source semantics).
  msg_bytes,
  -- Ranks in the communicator (null when unknown).
  group_size,
  -- Global rank of the p2p peer (null when unknown or not p2p).
  peer_global,
  -- Start (the rank's post of the call), ns.
  ts_ns,
  -- End, ns.
  end_ns,
  -- Duration, ns (>= 0).
  dur_ns,
  -- Waiting part at the start of the call, ns: PP calls only (pipeline bubble); 0 otherwise.
  wait_ns,
  -- dur_ns - wait_ns: the active part (PP transfer; the whole call for other classes), ns.
  xfer_ns,
  -- How a PP call was split: paired | fastest_call; null for other classes.
  pp_split,
  -- Iteration whose work the call is (int_comm_ops_timed: launch step); null outside every iteration.
  iteration
) AS
WITH
  calls AS (
    SELECT
      t.run_id,
      t.rank,
      t.source_format,
      t.source,
      t.source_file,
      t.source_line,
      t.op,
      coalesce(
        c.traffic_class,
        CASE
          WHEN t.op IN ('send', 'recv') THEN 'PP'
          WHEN t.source = 'kernels' AND t.op = 'all_to_all' THEN 'EP'
          ELSE 'other'
        END
      ) AS traffic_class,
      t.msg_bytes,
      coalesce(c.group_size, t.group_size) AS group_size,
      coalesce(
        m.global_rank,
        CASE WHEN c.global_group IS NULL OR c.global_group = 'world' THEN t.peer_rank END
      ) AS peer_global,
      t.ts_ns,
      t.end_ns,
      t.dur_ns,
      t.iteration
    FROM int_comm_ops_timed AS t
    LEFT JOIN int_comm_ops_classified AS c
      ON c.run_id = t.run_id AND c.rank = t.rank AND c.source_file = t.source_file
      AND c.source_line = t.source_line AND t.source = 'comm_ops'
    LEFT JOIN int_groups_members AS m
      ON m.run_id = c.run_id AND m.global_group = c.global_group AND m.group_rank = t.peer_rank
      AND t.op IN ('send', 'recv')
  ),
  pp AS (
    SELECT
      *,
      CASE WHEN op = 'send' THEN rank ELSE peer_global END AS src,
      CASE WHEN op = 'send' THEN peer_global ELSE rank END AS dst,
      row_number() OVER (
        PARTITION BY run_id, rank, op, peer_global ORDER BY ts_ns, source_file, source_line
      ) AS k,
      count(*) OVER (PARTITION BY run_id, rank, op, peer_global) AS n_side
    FROM calls
    WHERE traffic_class = 'PP' AND op IN ('send', 'recv') AND peer_global IS NOT NULL
  ),
  paired AS (
    SELECT
      s.run_id,
      s.rank AS s_rank,
      s.source_file AS s_file,
      s.source_line AS s_line,
      r.rank AS r_rank,
      r.source_file AS r_file,
      r.source_line AS r_line,
      greatest(s.ts_ns, r.ts_ns) AS xfer_start
    FROM pp AS s
    JOIN pp AS r
      ON r.run_id = s.run_id AND r.op = 'recv' AND r.src = s.src AND r.dst = s.dst AND r.k = s.k
      AND r.n_side = s.n_side
    WHERE s.op = 'send'
  ),
  starts AS (
    SELECT run_id, s_rank AS rank, s_file AS source_file, s_line AS source_line, xfer_start
    FROM paired
    UNION ALL
    SELECT run_id, r_rank, r_file, r_line, xfer_start
    FROM paired
  ),
  fastest AS (
    SELECT run_id, rank, op, msg_bytes, min(dur_ns) AS min_dur
    FROM calls
    WHERE traffic_class = 'PP'
    GROUP BY run_id, rank, op, msg_bytes
  ),
  split AS (
    SELECT
      c.*,
      CASE
        WHEN c.traffic_class <> 'PP' THEN 0
        WHEN st.xfer_start IS NOT NULL THEN least(greatest(st.xfer_start - c.ts_ns, 0), c.dur_ns)
        ELSE c.dur_ns - coalesce(f.min_dur, c.dur_ns)
      END AS wait_ns,
      CASE
        WHEN c.traffic_class <> 'PP' THEN NULL
        WHEN st.xfer_start IS NOT NULL THEN 'paired'
        ELSE 'fastest_call'
      END AS pp_split
    FROM calls AS c
    LEFT JOIN starts AS st
      ON st.run_id = c.run_id AND st.rank = c.rank AND st.source_file = c.source_file
      AND st.source_line = c.source_line
    LEFT JOIN fastest AS f
      ON f.run_id = c.run_id AND f.rank = c.rank AND f.op = c.op
      AND f.msg_bytes IS NOT DISTINCT FROM c.msg_bytes AND c.traffic_class = 'PP'
  )
SELECT
  run_id,
  rank,
  source_format,
  source,
  source_file,
  source_line,
  op,
  traffic_class,
  msg_bytes,
  group_size,
  peer_global,
  ts_ns,
  end_ns,
  dur_ns,
  wait_ns,
  dur_ns - wait_ns AS xfer_ns,
  pp_split,
  iteration
FROM split
