-- Iterations detected from the communication sequence itself: the period of the recurring op/size/group token pattern (the paper's regularity finding).
-- One row per communication call, per (run, rank, source file) sequence. Rule: tokens op:msg_bytes:group:peer in log order; candidate periods are the modal gaps between repeats of a token (mode >= 75% of its gaps); each candidate P is scored by the share of positions i with token(i) = token(i+P); the smallest P within 0.05 of the best score wins (best >= 0.5, P <= half the sequence). The periodic region is the longest run of consecutive positions i with token(i) = token(i+P), extended by P at its end; iteration k covers positions start + kP .. start + (k+1)P - 1; calls outside it (prologue, epilogue, a second broken-off run) get a null iteration.
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
  -- Share of positions i with token(i) = token(i + period), 0..1.
  period_score,
  -- 0-based detected iteration; null for prologue/epilogue calls or when no period was found.
  iteration
) AS
WITH ops AS (
  SELECT
    run_id,
    rank,
    source_file,
    source_line,
    concat_ws('|', run_id, coalesce(CAST(rank AS VARCHAR), '?'), source_file) AS seq_key,
    concat_ws(
      ':',
      op,
      coalesce(CAST(msg_bytes AS VARCHAR), '?'),
      coalesce(CAST(group_size AS VARCHAR), comm_id, '?'),
      coalesce(CAST(peer_rank AS VARCHAR), '-')
    ) AS token,
    row_number() OVER (
      PARTITION BY run_id, rank, source_file ORDER BY source_line, ts_ns
    ) AS pos
  FROM stg_store__comm_ops
),
seq_len AS (
  SELECT seq_key, count(*) AS n FROM ops GROUP BY seq_key
),
gaps AS (
  SELECT
    seq_key,
    token,
    pos - lag(pos) OVER (PARTITION BY seq_key, token ORDER BY pos) AS gap
  FROM ops
),
token_gaps AS (
  SELECT
    seq_key,
    token,
    gap,
    count(*) AS n_gap,
    sum(count(*)) OVER (PARTITION BY seq_key, token) AS n_token_gaps
  FROM gaps
  WHERE gap IS NOT NULL
  GROUP BY seq_key, token, gap
),
candidates AS (
  SELECT tg.seq_key, tg.gap AS period, sum(tg.n_gap) AS votes
  FROM token_gaps AS tg
  JOIN seq_len AS sl ON tg.seq_key = sl.seq_key
  WHERE tg.n_gap >= 0.75 * tg.n_token_gaps AND 2 * tg.gap <= sl.n
  GROUP BY tg.seq_key, tg.gap
  QUALIFY row_number() OVER (PARTITION BY tg.seq_key ORDER BY votes DESC, tg.gap) <= 6
),
scored AS (
  SELECT
    c.seq_key,
    c.period,
    avg(CASE WHEN a.token = b.token THEN 1.0 ELSE 0.0 END) AS score
  FROM candidates AS c
  JOIN ops AS a ON a.seq_key = c.seq_key
  JOIN ops AS b ON b.seq_key = c.seq_key AND b.pos = a.pos + c.period
  GROUP BY c.seq_key, c.period
),
chosen AS (
  SELECT seq_key, period, score
  FROM (
    SELECT *, max(score) OVER (PARTITION BY seq_key) AS best FROM scored
  )
  WHERE best >= 0.5 AND score >= best - 0.05
  QUALIFY row_number() OVER (PARTITION BY seq_key ORDER BY period) = 1
),
matched AS (
  SELECT
    c.seq_key,
    a.pos,
    a.pos - row_number() OVER (PARTITION BY c.seq_key ORDER BY a.pos) AS run_id_
  FROM chosen AS c
  JOIN ops AS a ON a.seq_key = c.seq_key
  JOIN ops AS b ON b.seq_key = c.seq_key AND b.pos = a.pos + c.period AND a.token = b.token
),
region AS (
  -- the longest run of consecutive repeating positions, extended by one period at its end
  SELECT m.seq_key, min(m.pos) AS start_pos, max(m.pos) + any_value(c.period) AS end_pos
  FROM matched AS m
  JOIN chosen AS c ON m.seq_key = c.seq_key
  GROUP BY m.seq_key, m.run_id_
  QUALIFY row_number() OVER (PARTITION BY m.seq_key ORDER BY count(*) DESC, min(m.pos)) = 1
)
SELECT
  o.run_id,
  o.rank,
  o.source_file,
  o.source_line,
  o.pos,
  o.token,
  c.period,
  c.score AS period_score,
  CASE
    WHEN o.pos BETWEEN r.start_pos AND r.end_pos
      THEN CAST((o.pos - r.start_pos) // c.period AS INTEGER)
  END AS iteration
FROM ops AS o
LEFT JOIN chosen AS c ON o.seq_key = c.seq_key
LEFT JOIN region AS r ON o.seq_key = r.seq_key
