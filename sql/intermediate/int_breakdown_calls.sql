-- Timed communication calls of each rank's one timeline source with their traffic class, each split into waiting (for the group's last member to post) and transfer (APNet'24 §4.1: the PP rule, applied to every class; model_spec §A.2).
-- One row per row of int_comm_ops_timed (kernel-timed calls and uncovered comm kernels on a GPU rank, else the calls of the rank's one timeline source; calls timed 'none' are not there). Inputs: int_comm_ops_timed, int_comm_ops_classified (class, group), int_groups_members, int_rank_nodes (stage), int_run_world (group sizes of calls that log none), int_instance_waits (cross-rank instances). Class: int_comm_ops_classified for calls; comm kernels (no call): PP for send/recv, EP for all_to_all, else other. post = the call's ts_ns; xfer_start = the instance's last arrival: the latest post among its members on aligned clocks (int_clock_offsets), read back on the rank's own clock (ts_ns + last arrival - own aligned arrival); wait = clamp(xfer_start - post, 0, dur); xfer = dur - wait. Matching (xfer_source 'peers'): the call is a member of a complete, timed instance of int_instance_waits (collectives matched by group sequence number or per-group call order, p2p the k-th send a->b with the k-th recv on b from a; every member seen and timed, one op and size), so its transfer time is the instance's (issue 18 item 4). Elsewhere (no peer timing, e.g. one rank's DeepSpeed log; xfer_source 'estimated'): collectives: per (run, rank, op, msg_bytes, group_size) the transfer is the duration quantile 1/(2n) of the signature's calls (n = group size: the median of the calls on which the rank arrived last), wait = dur - xfer >= 0 (a group of one or of unknown size: no wait); PP: the fastest call of the rank with the same op and size. wait_kind: bubble when the group spans more than one pipeline stage (PP send/recv, EmbTableSyn, a collective whose members' stages differ), else sync (waiting for a slower peer of the same stage).
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
  -- Ranks in the communicator (logged or from the group; a call that logs none: 2 for send/recv and EmbTableSyn, the config's tp/dp/ep for TP/DP (no EP)/EP; null when unknown).
  group_size,
  -- Global rank of the p2p peer (null when unknown or not p2p).
  peer_global,
  -- Start (the rank's post of the call), ns.
  ts_ns,
  -- End, ns.
  end_ns,
  -- Duration, ns (>= 0).
  dur_ns,
  -- Waiting part at the start of the call, ns: clamp(xfer_start - post, 0, dur) (peers) or dur - estimated transfer.
  wait_ns,
  -- dur_ns - wait_ns: the transfer part (after the group's last member posted), ns.
  xfer_ns,
  -- How a PP call was split: paired | fastest_call; null for other classes.
  pp_split,
  -- Iteration whose work the call is (int_comm_ops_timed: launch step); null outside every iteration.
  iteration,
  -- Group of global ranks of the call (int_comm_ops_classified.global_group); null when unknown or a comm kernel.
  global_group,
  -- Pipeline stage of the rank (int_rank_nodes; null without config).
  stage,
  -- peers (matched with the members' timings) | estimated (no peer timing: quantile or fastest-call estimator).
  xfer_source,
  -- bubble (the group spans more than one pipeline stage) | sync (a same-stage group: waiting for a slower peer).
  wait_kind
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
      coalesce(
        c.group_size,
        t.group_size,
        -- a call that logs no group (DeepSpeed): the size its class has under the config
        CASE
          WHEN t.op IN ('send', 'recv') THEN 2
          WHEN c.traffic_class = 'TP' THEN w.tp
          WHEN c.traffic_class = 'DP' AND coalesce(w.ep, 1) = 1 THEN w.dp
          WHEN c.traffic_class = 'EP' THEN w.ep
          WHEN c.traffic_class = 'EmbTableSyn' THEN 2
        END
      ) AS group_size,
      coalesce(
        m.global_rank,
        CASE WHEN c.global_group IS NULL OR c.global_group = 'world' THEN t.peer_rank END
      ) AS peer_global,
      t.ts_ns,
      t.end_ns,
      t.dur_ns,
      t.iteration,
      c.global_group,
      n.stage
    FROM int_comm_ops_timed AS t
    LEFT JOIN int_comm_ops_classified AS c
      ON c.run_id = t.run_id AND c.rank = t.rank AND c.source_file = t.source_file
      AND c.source_line = t.source_line AND t.source = 'comm_ops'
    LEFT JOIN int_groups_members AS m
      ON m.run_id = c.run_id AND m.global_group = c.global_group AND m.group_rank = t.peer_rank
      AND t.op IN ('send', 'recv')
    LEFT JOIN int_rank_nodes AS n ON n.run_id = t.run_id AND n.rank = t.rank
    LEFT JOIN int_run_world AS w ON w.run_id = t.run_id
  ),
  -- matched calls (int_instance_waits: a complete, timed instance across the group's members):
  -- the transfer starts at the instance's last arrival (aligned), read on the rank's own clock
  -- (+ its offset: ts_ns + (last_arrival - own arrival))
  starts AS (
    SELECT run_id, rank, source_file, source_line, ts_ns + (last_arrival_ns - arrival_ns) AS xfer_start
    FROM int_instance_waits
  ),
  -- stages a group spans: its known members (int_groups_members; 'world': every rank), else
  -- the ranks seen calling on it
  group_stages AS (
    SELECT m.run_id, m.global_group, count(DISTINCT n.stage) AS stages
    FROM int_groups_members AS m
    JOIN int_rank_nodes AS n ON n.run_id = m.run_id AND n.rank = m.global_rank
    GROUP BY m.run_id, m.global_group
    UNION ALL
    SELECT run_id, 'world' AS global_group, count(DISTINCT stage) AS stages
    FROM int_rank_nodes
    GROUP BY run_id
    UNION ALL
    SELECT run_id, global_group, count(DISTINCT stage) AS stages
    FROM calls
    WHERE global_group IS NOT NULL
    GROUP BY run_id, global_group
  ),
  spans AS (
    SELECT run_id, global_group, max(stages) AS stages
    FROM group_stages
    GROUP BY run_id, global_group
  ),
  fastest AS (
    -- PP without a partner: the rank's fastest call of the same op and size
    SELECT run_id, rank, op, msg_bytes, min(dur_ns) AS min_dur
    FROM calls
    WHERE traffic_class = 'PP'
    GROUP BY run_id, rank, op, msg_bytes
  ),
  ranked AS (
    -- other calls without peer timing: position of the duration within its signature
    SELECT
      run_id,
      rank,
      op,
      msg_bytes,
      group_size,
      dur_ns,
      row_number() OVER (PARTITION BY run_id, rank, op, msg_bytes, group_size ORDER BY dur_ns)
        AS pos,
      count(*) OVER (PARTITION BY run_id, rank, op, msg_bytes, group_size) AS cnt
    FROM calls
    WHERE traffic_class <> 'PP' AND group_size > 1
  ),
  quantile AS (
    -- the duration quantile 1/(2n) of the signature (lower, discrete)
    SELECT run_id, rank, op, msg_bytes, group_size, dur_ns AS q_dur
    FROM ranked
    WHERE pos = greatest(1, CAST(ceil(cnt / (2.0 * group_size)) AS BIGINT))
  ),
  split AS (
    SELECT
      c.*,
      CASE
        WHEN st.xfer_start IS NOT NULL THEN least(greatest(st.xfer_start - c.ts_ns, 0), c.dur_ns)
        WHEN c.traffic_class = 'PP' THEN c.dur_ns - coalesce(f.min_dur, c.dur_ns)
        ELSE greatest(c.dur_ns - coalesce(q.q_dur, c.dur_ns), 0)
      END AS wait_ns,
      CASE
        WHEN c.traffic_class <> 'PP' THEN NULL
        WHEN st.xfer_start IS NOT NULL THEN 'paired'
        ELSE 'fastest_call'
      END AS pp_split,
      CASE WHEN st.xfer_start IS NOT NULL THEN 'peers' ELSE 'estimated' END AS xfer_source,
      CASE
        WHEN c.traffic_class IN ('PP', 'EmbTableSyn') OR sp.stages > 1 THEN 'bubble'
        ELSE 'sync'
      END AS wait_kind
    FROM calls AS c
    LEFT JOIN starts AS st
      ON st.run_id = c.run_id AND st.rank = c.rank AND st.source_file = c.source_file
      AND st.source_line = c.source_line
    LEFT JOIN fastest AS f
      ON f.run_id = c.run_id AND f.rank = c.rank AND f.op = c.op
      AND f.msg_bytes IS NOT DISTINCT FROM c.msg_bytes AND c.traffic_class = 'PP'
    LEFT JOIN quantile AS q
      ON q.run_id = c.run_id AND q.rank = c.rank AND q.op = c.op
      AND q.msg_bytes IS NOT DISTINCT FROM c.msg_bytes AND q.group_size = c.group_size
      AND c.traffic_class <> 'PP'
    LEFT JOIN spans AS sp ON sp.run_id = c.run_id AND sp.global_group = c.global_group
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
  iteration,
  global_group,
  stage,
  xfer_source,
  wait_kind
FROM split
