-- Distribution of message sizes per operation and traffic class in power-of-two buckets, with counts, bytes and CDFs (APNet'24 Fig. 1).
-- One row per (run_id, source, op, traffic_class, size_bucket_bytes); source comm_ops counts each logical call once (int_calls, read as int_calls_tallied: its calls counted per size; a call logged by several tools of its rank is one row, its size the best logged), source comm_summaries the calls of DeepSpeed's summary tables (kept apart: a run may log both). Sizes are comm_ops.msg_bytes, the canonical size of every source (all_gather the per-rank send buffer, reduce_scatter the per-rank shard, all_to_all the full per-rank send buffer), except DeepSpeed's reduce_scatter, logged as its full input (n shards) with no group size: kept as logged (effective_bandwidth divides it by n where the config gives n).
CREATE OR REPLACE VIEW message_sizes(
  -- Training run identifier.
  run_id,
  -- comm_ops or comm_summaries.
  source,
  -- Normalised operation.
  op,
  -- TP | PP | DP | EP | EmbTableSyn | other (summaries: from the config as in effective_bandwidth).
  traffic_class,
  -- Bucket: largest power of two <= msg_bytes (0 for empty messages).
  size_bucket_bytes,
  -- Smallest message in the bucket, bytes.
  min_bytes,
  -- Largest message in the bucket, bytes.
  max_bytes,
  -- Calls in the bucket.
  calls,
  -- Bytes of those calls (sum of msg_bytes).
  total_bytes,
  -- Fraction of the (run, source, op, class) calls in this bucket.
  share_calls,
  -- Fraction of the (run, source, op, class) calls in this or smaller buckets.
  cdf_calls,
  -- Fraction of the (run, source, op, class) bytes in this or smaller buckets.
  cdf_bytes
) AS
WITH
  sizes AS (
    -- the logical calls counted per size (int_calls_tallied: int_calls' rows, counted)
    SELECT run_id, 'comm_ops' AS source, op, traffic_class, msg_bytes, calls
    FROM int_calls_tallied
    WHERE is_traffic AND msg_bytes IS NOT NULL
    UNION ALL
    SELECT
      c.run_id,
      'comm_summaries' AS source,
      c.op,
      CASE
        WHEN c.op IN ('send', 'recv') THEN 'PP'
        WHEN c.op = 'all_to_all' THEN 'EP'
        WHEN w.tp = 1 AND w.dp > 1 THEN 'DP'
        WHEN w.dp = 1 AND w.tp > 1 THEN 'TP'
        ELSE 'other'
      END AS traffic_class,
      c.msg_bytes,
      c.calls
    FROM stg_store__comm_summaries AS c
    LEFT JOIN int_run_world AS w ON w.run_id = c.run_id
    WHERE c.op NOT IN ('barrier', 'other') AND c.msg_bytes IS NOT NULL
  ),
  buckets AS (
    SELECT
      run_id,
      source,
      op,
      traffic_class,
      CASE WHEN msg_bytes > 0 THEN (2::BIGINT ** floor(log2(msg_bytes)))::BIGINT ELSE 0 END
        AS size_bucket_bytes,
      min(msg_bytes) AS min_bytes,
      max(msg_bytes) AS max_bytes,
      sum(calls)::BIGINT AS calls,
      sum(msg_bytes * calls)::BIGINT AS total_bytes
    FROM sizes
    GROUP BY ALL
  )
SELECT
  run_id,
  source,
  op,
  traffic_class,
  size_bucket_bytes,
  min_bytes,
  max_bytes,
  calls,
  total_bytes,
  calls / sum(calls) OVER w_all AS share_calls,
  sum(calls) OVER w_cum / sum(calls) OVER w_all AS cdf_calls,
  sum(total_bytes) OVER w_cum / nullif(sum(total_bytes) OVER w_all, 0) AS cdf_bytes
FROM buckets
WINDOW
  w_all AS (PARTITION BY run_id, source, op, traffic_class),
  w_cum AS (
    PARTITION BY run_id, source, op, traffic_class ORDER BY size_bucket_bytes
    ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW
  )
