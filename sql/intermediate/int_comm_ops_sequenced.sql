-- Iterations detected from the communication sequence itself: the period of the recurring op/size/group token pattern (the paper's regularity finding).
-- One row per communication call, per (run, rank, source file) sequence. Rule: tokens op:msg_bytes:group:peer in log order; candidate periods P are the modal gaps between repeats of a token (mode >= 75% of its gaps, P <= half the sequence), the 8 voted by most distinct tokens; for each, the longest run of consecutive positions i with token(i) = token(i+P) gives the periodic region [start, end of run + P]; the candidate with the largest region wins (ties: smallest P) when the region covers at least two periods and half the sequence. When the fine token finds no period (sizes that change every iteration, e.g. MoE all-to-all as grouped send/recv), the coarse token op:group:peer (no size) is tried the same way, with the fine token's candidate periods added to its own. Iteration = (pos - start) // P; prologue calls join iteration 0; an epilogue shorter than one period after the region (e.g. end-of-run barriers) joins the last iteration, a longer tail continues the count; a sequence without a period is one iteration 0. Sequences with identical tokens (ranks of the same role) are detected once and share the result.
CREATE OR REPLACE VIEW int_comm_ops_sequenced(
  -- Training run identifier.
  run_id,
  -- Global rank (null when the source does not say).
  rank,
  -- File the call came from.
  source_file,
  -- Line (or event index) in that file.
  source_line,
  -- 1-based position of the call in its (run, rank, file) sequence.
  pos,
  -- The call's token: op:msg_bytes:group_size-or-comm_id:peer_rank.
  token,
  -- Detected period (calls per iteration) of the sequence; null when none found.
  period,
  -- Share of the sequence inside the periodic region, 0..1 (1 when no period was found).
  period_score,
  -- 0-based detected iteration (0 for every call when no period was found).
  iteration,
  -- Start of the call, ns (null when the source has no times), carried for downstream objects.
  ts_ns,
  -- End of the call, ns (ts_ns + dur_ns).
  end_ns,
  -- Iteration as the source logged it (comm_ops.iteration), null when it does not say.
  source_iteration,
  -- Compact key of the call (stg_store__comm_ops.call_key).
  call_key,
  -- CPU issue time of the call, ns (stg_store__comm_ops.launch_ts_ns), carried for the launch
  -- rule of int_comm_op_iteration.
  launch_ts_ns,
  -- The call's shape (int_comm_ops_shaped.shape_id), carried for int_instance_lane_shaped.
  shape_id,
  -- Sequence number as logged (stg_store__comm_ops.seq), carried for int_instance_lane_shaped.
  seq,
  -- Peer or root rank as logged (stg_store__comm_ops.peer_rank).
  peer_rank,
  -- The sequence's key: hash(run_id, rank, source_file), one per (run, rank, file), nulls
  -- included (a null rank is a sequence of its own), carried for int_comm_op_iteration_shaped.
  seq_key
) AS
-- Algorithm: the calls are read narrow (int_comm_ops_shaped: a shape_id and numbers, no string)
-- and their names (run, rank, file; op, size, group) come from their shapes
-- (int_comm_op_shape_keys, a few thousand rows), so that no per-call string is read, hashed or
-- sorted: a sequence's key and the token's hashes are computed once per shape. The calls find
-- their names, token parts and period through one join on their shape (shape_info), and the
-- token's text (comm_op_token) is an expression of the output: computed only for a reader that
-- selects it (int_comm_op_iteration_shaped does not).
WITH shapes AS MATERIALIZED (
  SELECT
    shape_id,
    run_id,
    rank,
    source_file,
    hash(run_id, rank, source_file) AS seq_key,
    op,
    msg_bytes,
    group_size,
    comm_id,
    -- the token's hashes but for the peer (fine: with the size; coarse: without)
    hash(op, msg_bytes, coalesce(CAST(group_size AS VARCHAR), comm_id)) AS fine_base,
    hash(op, coalesce(CAST(group_size AS VARCHAR), comm_id)) AS coarse_base
  FROM int_comm_op_shape_keys
),
ops AS MATERIALIZED (
  -- numbered per sequence by its integer key (partitioning by the file path string is slower);
  -- narrow: integers only (the sequence's names and the token's parts are joined at the end
  -- from the small shape_info below, so the window sorts no strings); the fine token's hash is
  -- taken after the window (from the shape and the peer), so that it does not ride through its
  -- sort as payload (at 256 ranks the two hashes were 0.25 s of the window's 1.1 s CPU), the
  -- coarse one for the representatives only (rep_ops)
  SELECT
    w.*,
    hash(s.fine_base, w.peer_rank) AS th
  FROM (
    SELECT
      s.seq_key,
      c.source_line,
      c.ts_ns,
      c.ts_ns + c.dur_ns AS end_ns,
      c.iteration AS source_iteration,
      c.call_key,
      c.launch_ts_ns,
      c.shape_id,
      c.seq,
      c.peer_rank,
      row_number() OVER (PARTITION BY s.seq_key ORDER BY c.source_line, c.ts_ns) AS pos
    FROM int_comm_ops_shaped AS c
    JOIN shapes AS s ON s.shape_id = c.shape_id
  ) AS w
  JOIN shapes AS s ON s.shape_id = w.shape_id
),
seqs AS MATERIALIZED (
  -- order-sensitive fingerprint of each sequence's fine tokens
  SELECT seq_key, count(*) AS n, bit_xor(hash(th, pos)) AS fp FROM ops GROUP BY seq_key
),
reps AS MATERIALIZED (
  -- one representative sequence per distinct token sequence
  SELECT n, fp, min(seq_key) AS rep_key FROM seqs GROUP BY n, fp
),
rep_ops AS MATERIALIZED (
  -- representative sequences under both tokens: fine (with size) and coarse (without; its
  -- hash taken here, for the representatives' calls only)
  SELECT r.rep_key, g.fine, hash(r.rep_key, g.fine) AS dkey, r.n, o.pos,
    CASE WHEN g.fine THEN o.th ELSE hash(s.coarse_base, o.peer_rank) END AS th
  FROM reps AS r
  JOIN ops AS o ON o.seq_key = r.rep_key
  JOIN shapes AS s ON s.shape_id = o.shape_id
  CROSS JOIN (VALUES (true), (false)) AS g(fine)
),
token_gaps AS (
  SELECT
    dkey,
    th,
    gap,
    count(*) AS n_gap,
    sum(count(*)) OVER (PARTITION BY dkey, th) AS n_token_gaps
  FROM (
    SELECT dkey, th, pos - lag(pos) OVER (PARTITION BY dkey, th ORDER BY pos) AS gap
    FROM rep_ops
  )
  WHERE gap IS NOT NULL
  GROUP BY dkey, th, gap
),
dlen AS MATERIALIZED (
  SELECT DISTINCT dkey, rep_key, fine, n FROM rep_ops
),
candidates AS MATERIALIZED (
  SELECT tg.dkey, tg.gap AS period, count(*) AS votes
  FROM token_gaps AS tg
  JOIN dlen AS sl ON tg.dkey = sl.dkey
  WHERE tg.n_gap >= 0.75 * tg.n_token_gaps AND 2 * tg.gap <= sl.n
  GROUP BY tg.dkey, tg.gap
  QUALIFY row_number() OVER (PARTITION BY tg.dkey ORDER BY votes DESC, tg.gap) <= 8
),
candidates_both AS MATERIALIZED (
  -- the coarse token also tries the fine token's candidates (a period voted by the few calls
  -- whose size repeats, e.g. once-per-iteration all_reduce among varying all-to-all)
  SELECT dkey, period FROM candidates
  UNION
  SELECT hash(d.rep_key, false) AS dkey, c.period
  FROM candidates AS c
  JOIN dlen AS d ON d.dkey = c.dkey
  WHERE d.fine
),
shifted AS MATERIALIZED (
  -- each position of a representative under each candidate period, with the position one
  -- period later; materialised so that the join to that position comes after this one
  -- whatever DuckDB estimates (joined first on (dkey, th) alone, the self join pairs every
  -- two calls of a token: a sequence's square, out of memory at 1024 ranks when the calls
  -- are read from Parquet, whose statistics give no distinct counts)
  SELECT c.dkey, c.period, a.pos, a.th, a.pos + c.period AS next_pos
  FROM candidates_both AS c
  JOIN rep_ops AS a ON a.dkey = c.dkey
),
matched AS (
  SELECT
    s.dkey,
    s.period,
    s.pos,
    s.pos - row_number() OVER (PARTITION BY s.dkey, s.period ORDER BY s.pos) AS grp
  FROM shifted AS s
  JOIN rep_ops AS b ON b.dkey = s.dkey AND b.pos = s.next_pos AND b.th = s.th
),
runs AS (
  SELECT dkey, period, min(pos) AS start_pos, max(pos) + period AS end_pos, count(*) AS run_len
  FROM matched
  GROUP BY dkey, period, grp
),
chosen AS MATERIALIZED (
  SELECT
    sl.rep_key,
    sl.fine,
    sl.n,
    r.period,
    r.start_pos,
    r.end_pos,
    (r.end_pos - r.start_pos + 1) / sl.n AS share
  FROM runs AS r
  JOIN dlen AS sl ON r.dkey = sl.dkey
  WHERE r.run_len >= r.period AND 2 * (r.end_pos - r.start_pos + 1) >= sl.n
  QUALIFY row_number() OVER (
    PARTITION BY r.dkey ORDER BY r.end_pos - r.start_pos DESC, r.period, r.start_pos
  ) = 1
),
picked AS (
  -- the fine token's period when it has one, else the coarse token's; mapped to every sequence
  SELECT s.seq_key, c.period, c.start_pos, c.end_pos, c.share, c.n
  FROM seqs AS s
  JOIN reps AS r ON r.n = s.n AND r.fp = s.fp
  JOIN chosen AS c ON c.rep_key = r.rep_key
  QUALIFY row_number() OVER (PARTITION BY s.seq_key ORDER BY c.fine DESC) = 1
),
shape_info AS MATERIALIZED (
  -- one row per shape: its sequence's names and period (null when none) and its token's parts,
  -- so that every call finds its row by an inner join on the small side (grouped, although
  -- each shape_id is one row: a group-by's small cardinality estimate makes DuckDB build the
  -- join's hash table on this side rather than on the calls)
  SELECT
    s.shape_id,
    any_value(s.seq_key) AS seq_key,
    any_value(s.run_id) AS run_id,
    any_value(s.rank) AS rank,
    any_value(s.source_file) AS source_file,
    any_value(s.op) AS op,
    any_value(s.msg_bytes) AS msg_bytes,
    any_value(s.group_size) AS group_size,
    any_value(s.comm_id) AS comm_id,
    any_value(c.period) AS period,
    any_value(c.start_pos) AS start_pos,
    any_value(c.end_pos) AS end_pos,
    any_value(c.share) AS share,
    any_value(c.n) AS n
  FROM shapes AS s
  LEFT JOIN picked AS c ON c.seq_key = s.seq_key
  GROUP BY s.shape_id
)
SELECT
  c.run_id,
  c.rank,
  c.source_file,
  o.source_line,
  o.pos,
  comm_op_token(c.op, c.msg_bytes, c.group_size, c.comm_id, o.peer_rank) AS token,
  c.period,
  coalesce(c.share, 1.0) AS period_score,
  CAST(
    CASE
      WHEN c.period IS NULL THEN 0
      WHEN o.pos > c.end_pos AND c.n - c.end_pos < c.period
        THEN (c.end_pos - c.start_pos) // c.period
      ELSE greatest(o.pos - c.start_pos, 0) // c.period
    END AS INTEGER
  ) AS iteration,
  o.ts_ns,
  o.end_ns,
  o.source_iteration,
  o.call_key,
  o.launch_ts_ns,
  o.shape_id,
  o.seq,
  o.peer_rank,
  c.seq_key
FROM ops AS o
JOIN shape_info AS c ON c.shape_id = o.shape_id
