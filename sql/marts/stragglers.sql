-- Straggler ranks: per iteration and for the whole run, which rank(s) the others waited for, the wait they caused, whether the delay sat before the call (arrived late: compute, data loading) or inside it (its transfers slower than the same kind of transfer elsewhere: a link), and whether the same rank leads across iterations (issue 18 item 3).
-- One row per (run_id, iteration, rank) where the rank was the last to arrive in at least one complete, timed instance of the iteration, plus one run-level row per such rank with iteration null (every instance of the run, those outside iterations included). Input: int_instance_waits (one row per member of a complete timed instance: aligned arrivals, last_rank = the member the others waited for, lowest rank on ties; wait = least(last arrival - own arrival, dur)). Definitions: the wait an instance caused = Σ of its members' waits, charged to its last rank; same-stage wait = instances whose wait_kind is sync (TP/DP/EP/other on one pipeline stage; PP, EmbTableSyn and stage-spanning groups are bubble, the pipeline's own waiting, so they rank no straggler); rank_order 1 = the top offender (most same-stage wait caused, then most wait caused over all classes, then the lowest rank). Link: an instance's transfer (max finish - last arrival) is slow when it exceeds 1.5x the lower quartile of its signature's transfers (op, largest msg_bytes, group size, crossing nodes or not: the quartile, not the median, so a slow node whose links carry up to 3/4 of a signature's instances still shows) by more than twice the members' clock-offset error bound; link_excess = Σ over the rank's instances of (transfer - quartile) for slow ones; delay_location = inside_call when link_excess > 0, else before_call. iterations_top = iterations (with same-stage wait) in which the rank was the top offender; persistent = iterations_top >= 2 and >= half of the iterations with same-stage wait. Truth on generated runs: truth.json stragglers (per_iteration, intended.slow_node_ranks) and truth/waits_caused.parquet.
CREATE OR REPLACE VIEW stragglers(
  -- Training run identifier.
  run_id,
  -- Iteration (null: the run-level row over every instance of the run).
  iteration,
  -- Global rank that arrived last in at least one instance.
  rank,
  -- Instances (all classes) in which this rank arrived last.
  instances_last,
  -- Same-stage wait this rank caused: Σ member waits of the sync instances it was last in, ns.
  wait_caused_ns,
  -- Wait this rank caused over all classes (bubble instances included), ns.
  wait_caused_all_ns,
  -- wait_caused_ns / all same-stage wait of the iteration (of the run for run-level rows); null when there is none.
  share,
  -- 1 = the top offender of the iteration (of the run), by wait_caused_ns, then wait_caused_all_ns, then rank.
  rank_order,
  -- before_call (the rank arrived late: compute, data loading) | inside_call (its transfers were slower than their signature's: link_excess_ns > 0).
  delay_location,
  -- Σ over the rank's instances with a slow transfer of (transfer - the signature's lower quartile), ns (0: none slow).
  link_excess_ns,
  -- Instances of the rank (as any member) whose transfer was slow.
  slow_instances,
  -- Iterations (with same-stage wait) in which this rank was the top offender; the run's value on every row of the rank.
  iterations_top,
  -- Iterations of the run with any same-stage wait (the base of persistent).
  iterations_with_waits,
  -- True when iterations_top >= 2 and iterations_top >= half of iterations_with_waits.
  persistent
) AS
WITH
  -- one row per instance: the member that arrived last carries the instance's figures
  inst AS (
    SELECT
      run_id,
      instance_key,
      instance_iteration AS iteration,
      last_rank,
      wait_kind,
      instance_wait_ns,
      transfer_ns,
      offset_bound_ns,
      CASE WHEN instance_key LIKE 'p2p:%' THEN 'send/recv' ELSE op END AS sig_op,
      instance_bytes,
      group_size,
      spans_nodes
    FROM int_instance_waits
    WHERE rank = last_rank
  ),
  baseline AS (
    SELECT
      run_id,
      sig_op,
      instance_bytes,
      group_size,
      spans_nodes,
      quantile_disc(transfer_ns, 0.25) AS q1_ns
    FROM inst
    GROUP BY run_id, sig_op, instance_bytes, group_size, spans_nodes
  ),
  slow AS (
    SELECT
      i.run_id,
      i.instance_key,
      i.transfer_ns - b.q1_ns AS excess_ns
    FROM inst AS i
    JOIN baseline AS b
      ON b.run_id = i.run_id AND b.sig_op = i.sig_op
      AND b.instance_bytes IS NOT DISTINCT FROM i.instance_bytes
      AND b.group_size IS NOT DISTINCT FROM i.group_size AND b.spans_nodes = i.spans_nodes
    WHERE i.transfer_ns > 1.5 * b.q1_ns
      AND i.transfer_ns - b.q1_ns > 2 * coalesce(i.offset_bound_ns, 0)
  ),
  -- every member of a slow instance: its link excess
  member_slow AS (
    SELECT w.run_id, w.instance_iteration AS iteration, w.rank, s.excess_ns
    FROM int_instance_waits AS w
    JOIN slow AS s ON s.run_id = w.run_id AND s.instance_key = w.instance_key
  ),
  caused_iter AS (
    SELECT
      run_id,
      iteration,
      last_rank AS rank,
      count(*) AS instances_last,
      coalesce(sum(instance_wait_ns) FILTER (WHERE wait_kind = 'sync'), 0)::BIGINT
        AS wait_caused_ns,
      sum(instance_wait_ns)::BIGINT AS wait_caused_all_ns
    FROM inst
    WHERE iteration IS NOT NULL
    GROUP BY run_id, iteration, last_rank
  ),
  caused_run AS (
    SELECT
      run_id,
      NULL::INTEGER AS iteration,
      last_rank AS rank,
      count(*) AS instances_last,
      coalesce(sum(instance_wait_ns) FILTER (WHERE wait_kind = 'sync'), 0)::BIGINT
        AS wait_caused_ns,
      sum(instance_wait_ns)::BIGINT AS wait_caused_all_ns
    FROM inst
    GROUP BY run_id, last_rank
  ),
  excess_iter AS (
    SELECT run_id, iteration, rank, sum(excess_ns)::BIGINT AS link_excess_ns, count(*) AS n_slow
    FROM member_slow
    WHERE iteration IS NOT NULL
    GROUP BY run_id, iteration, rank
  ),
  excess_run AS (
    SELECT run_id, rank, sum(excess_ns)::BIGINT AS link_excess_ns, count(*) AS n_slow
    FROM member_slow
    GROUP BY run_id, rank
  ),
  rows_iter AS (
    SELECT
      c.*,
      c.wait_caused_ns / nullif(sum(c.wait_caused_ns) OVER (PARTITION BY c.run_id, c.iteration), 0)
        AS share,
      row_number() OVER (
        PARTITION BY c.run_id, c.iteration
        ORDER BY c.wait_caused_ns DESC, c.wait_caused_all_ns DESC, c.rank
      ) AS rank_order,
      coalesce(e.link_excess_ns, 0) AS link_excess_ns,
      coalesce(e.n_slow, 0) AS slow_instances
    FROM caused_iter AS c
    LEFT JOIN excess_iter AS e
      ON e.run_id = c.run_id AND e.iteration = c.iteration AND e.rank = c.rank
  ),
  rows_run AS (
    SELECT
      c.*,
      c.wait_caused_ns / nullif(sum(c.wait_caused_ns) OVER (PARTITION BY c.run_id), 0) AS share,
      row_number() OVER (
        PARTITION BY c.run_id ORDER BY c.wait_caused_ns DESC, c.wait_caused_all_ns DESC, c.rank
      ) AS rank_order,
      coalesce(e.link_excess_ns, 0) AS link_excess_ns,
      coalesce(e.n_slow, 0) AS slow_instances
    FROM caused_run AS c
    LEFT JOIN excess_run AS e ON e.run_id = c.run_id AND e.rank = c.rank
  ),
  -- iterations with same-stage wait, and who led each
  waited AS (
    SELECT run_id, iteration
    FROM rows_iter
    GROUP BY run_id, iteration
    HAVING sum(wait_caused_ns) > 0
  ),
  tops AS (
    SELECT r.run_id, r.rank, count(*) AS iterations_top
    FROM rows_iter AS r
    SEMI JOIN waited AS w ON w.run_id = r.run_id AND w.iteration = r.iteration
    WHERE r.rank_order = 1
    GROUP BY r.run_id, r.rank
  ),
  n_waited AS (
    SELECT run_id, count(*) AS iterations_with_waits
    FROM waited
    GROUP BY run_id
  ),
  all_rows AS (
    SELECT * FROM rows_iter
    UNION ALL BY NAME
    SELECT * FROM rows_run
  )
SELECT
  a.run_id,
  a.iteration,
  a.rank,
  a.instances_last,
  a.wait_caused_ns,
  a.wait_caused_all_ns,
  a.share,
  a.rank_order,
  CASE WHEN a.link_excess_ns > 0 THEN 'inside_call' ELSE 'before_call' END AS delay_location,
  a.link_excess_ns,
  a.slow_instances,
  coalesce(t.iterations_top, 0) AS iterations_top,
  coalesce(n.iterations_with_waits, 0) AS iterations_with_waits,
  coalesce(t.iterations_top, 0) >= 2
  AND 2 * coalesce(t.iterations_top, 0) >= coalesce(n.iterations_with_waits, 0) AS persistent
FROM all_rows AS a
LEFT JOIN tops AS t ON t.run_id = a.run_id AND t.rank = a.rank
LEFT JOIN n_waited AS n ON n.run_id = a.run_id
