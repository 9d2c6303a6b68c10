-- What each source format contributed to the logical calls (issue 19 data quality): its records paired with a call of another source, the records that could not be paired and why, the calls it gave the size or the duration of, and the calls where its size differs from the one kept.
-- One row per (run_id, source_format) with a ranked call or record (int_calls, int_call_sources), or a call without a rank (unranked_calls). Inputs: int_call_sources, int_calls (counted per rank, format and source of size and duration: int_calls_tallied; read itself only for its calls with a size conflict). A record is an anchor (a logical call: the rank's counted source), paired (another source's record of such a call: match_method seq, iteration or order) or unpaired (reason no_anchor, no_match, ambiguous, op_mismatch, size_mismatch); a size conflict is a call whose records logged different sizes: conflict_example shows the first (rank, op, group, seq, sizes).
CREATE OR REPLACE VIEW call_sources(
  -- Training run identifier.
  run_id,
  -- Parser.
  source_format,
  -- Ranks with a record of this format.
  ranks,
  -- Records of this format (ranked calls).
  records,
  -- Records that are logical calls (the format is the rank's counted source).
  anchor_records,
  -- Records paired with another format's call.
  paired_records,
  -- Records of this format that could not be paired (not counted anywhere).
  unpaired_records,
  -- Unpaired records by reason, 'reason:n' sorted and comma-joined (null when none).
  unpaired_reasons,
  -- How the paired records were matched, 'method:n' sorted and comma-joined (null when none).
  match_methods,
  -- Logical calls whose duration came from this format's record.
  durations_given,
  -- Logical calls whose msg_bytes came from this format's record.
  sizes_given,
  -- Logical calls this format logged whose sources disagree on the size.
  size_conflicts,
  -- One such call: 'rank R op on group (seq S): format:bytes,...'; null when none.
  conflict_example,
  -- Counted calls without a rank in this format (each its own logical call, never paired).
  unranked_calls
) AS
WITH
  recs AS (
    -- the anchors are the ranked logical calls (int_call_sources holds only the ranks with
    -- records to pair), the other records int_call_sources' paired and unpaired rows
    -- (int_calls counted per rank and format: int_calls_tallied)
    SELECT
      run_id,
      source_format,
      count(DISTINCT rank) AS ranks,
      sum(n)::BIGINT AS records,
      coalesce(sum(n) FILTER (WHERE role = 'anchor'), 0)::BIGINT AS anchor_records,
      coalesce(sum(n) FILTER (WHERE role = 'paired'), 0)::BIGINT AS paired_records,
      coalesce(sum(n) FILTER (WHERE role = 'unpaired'), 0)::BIGINT AS unpaired_records
    FROM (
      SELECT run_id, rank, source_format, 'anchor' AS role, sum(calls) AS n
      FROM int_calls_tallied
      WHERE rank IS NOT NULL
      GROUP BY ALL
      UNION ALL
      SELECT run_id, rank, source_format, role, count(*) AS n
      FROM int_call_sources
      WHERE role <> 'anchor'
      GROUP BY ALL
    )
    GROUP BY run_id, source_format
  ),
  reasons AS (
    SELECT run_id, source_format,
      string_agg(unpaired_reason || ':' || n::VARCHAR, ',' ORDER BY unpaired_reason) AS unpaired_reasons
    FROM (
      SELECT run_id, source_format, unpaired_reason, count(*) AS n
      FROM int_call_sources WHERE role = 'unpaired' GROUP BY ALL
    )
    GROUP BY run_id, source_format
  ),
  methods AS (
    SELECT run_id, source_format,
      string_agg(match_method || ':' || n::VARCHAR, ',' ORDER BY match_method) AS match_methods
    FROM (
      SELECT run_id, source_format, match_method, count(*) AS n
      FROM int_call_sources WHERE role = 'paired' GROUP BY ALL
    )
    GROUP BY run_id, source_format
  ),
  given AS (
    SELECT run_id, fmt AS source_format, sum(d) AS durations_given, sum(b) AS sizes_given
    FROM (
      SELECT run_id, duration_source AS fmt, calls AS d, 0 AS b FROM int_calls_tallied
      WHERE duration_source IS NOT NULL AND rank IS NOT NULL
      UNION ALL
      SELECT run_id, bytes_source AS fmt, 0 AS d, calls AS b FROM int_calls_tallied
      WHERE bytes_source IS NOT NULL AND rank IS NOT NULL
    )
    GROUP BY run_id, fmt
  ),
  conflicts AS (
    SELECT
      s.run_id,
      s.source_format,
      count(DISTINCT c.call_key) AS size_conflicts,
      arg_min(
        'rank ' || c.rank::VARCHAR || ' ' || c.op || ' on ' || coalesce(c.global_group, '?')
        || ' (seq ' || coalesce(c.seq::VARCHAR, '?') || '): ' || c.sizes,
        (c.rank, c.source_line)
      ) AS conflict_example
    FROM int_calls AS c
    JOIN int_call_sources AS s
      ON s.run_id = c.run_id AND s.rank = c.rank AND s.anchor_key = c.call_key
      AND s.anchor_line = c.source_line
    WHERE c.size_conflict
    GROUP BY s.run_id, s.source_format
  ),
  unranked AS (
    SELECT run_id, source_format, sum(calls)::BIGINT AS unranked_calls
    FROM int_calls_tallied WHERE rank IS NULL GROUP BY ALL
  ),
  formats AS (
    SELECT run_id, source_format FROM recs
    UNION
    SELECT run_id, source_format FROM unranked
  )
SELECT
  f.run_id,
  f.source_format,
  coalesce(r.ranks, 0) AS ranks,
  coalesce(r.records, 0) AS records,
  coalesce(r.anchor_records, 0) AS anchor_records,
  coalesce(r.paired_records, 0) AS paired_records,
  coalesce(r.unpaired_records, 0) AS unpaired_records,
  x.unpaired_reasons,
  m.match_methods,
  coalesce(g.durations_given, 0)::BIGINT AS durations_given,
  coalesce(g.sizes_given, 0)::BIGINT AS sizes_given,
  coalesce(c.size_conflicts, 0) AS size_conflicts,
  c.conflict_example,
  coalesce(u.unranked_calls, 0) AS unranked_calls
FROM formats AS f
LEFT JOIN recs AS r ON r.run_id = f.run_id AND r.source_format IS NOT DISTINCT FROM f.source_format
LEFT JOIN reasons AS x
  ON x.run_id = f.run_id AND x.source_format IS NOT DISTINCT FROM f.source_format
LEFT JOIN methods AS m
  ON m.run_id = f.run_id AND m.source_format IS NOT DISTINCT FROM f.source_format
LEFT JOIN given AS g ON g.run_id = f.run_id AND g.source_format IS NOT DISTINCT FROM f.source_format
LEFT JOIN conflicts AS c
  ON c.run_id = f.run_id AND c.source_format IS NOT DISTINCT FROM f.source_format
LEFT JOIN unranked AS u
  ON u.run_id = f.run_id AND u.source_format IS NOT DISTINCT FROM f.source_format
