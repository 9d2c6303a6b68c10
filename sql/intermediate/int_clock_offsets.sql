-- Clock offset of every timed rank against the run's reference clock, estimated from matched instances whose members end together (issue 18 item 2): a collective's (or p2p transfer's) kernels end within microseconds of each other on every member, so end_r - end_ref over shared instances is clock r - clock ref.
-- One row per (run_id, rank) with a timed lane (int_instance_members.timed). Evidence: instances of int_instance_members whose members are all present and timed by kernel or logged timing (cpu_range ends only time the enqueue on a GPU run), with at least two clock domains; a clock domain is a host (ranks of one host share a clock; a rank without a host is its own). Per instance the anchor is the member domain of lowest rank, its end the median end of its members there; every other member gives v = end - anchor end. Edge (anchor domain -> domain): estimate = median of v over its members and instances; scatter = max |v - estimate| (the largest disagreement of one member's end with the estimate) + the timestamps' resolution (1 ns; Kineto: one unit in the last place of a double holding microseconds, ~250 ns near 2025 epoch times). An edge with fewer than 3 instances shows too little scatter to trust: its scatter widens to the causal bound max(estimate - lo, hi - estimate), lo = max(start - anchor end), hi = min(end - anchor start) over its members (no member of an all-reduce-like instance ends before every member posted). Collective edges are preferred over p2p edges (a send may end before its recv), then the lower bound. The reference domain (that of the lowest timed rank) has offset 0; the other domains are reached breadth-first over the edges (6 hops at most; undirected: a reversed edge negates its estimate): offset = offset of the domain it is reached from + edge estimate, error_bound = that domain's bound + edge scatter. What the bound bounds: |offset_ns - true offset|, assuming the members' ends coincide up to the scatter seen in the evidence (generated runs: they coincide, the bound is the Kineto rounding, < 2 us; real runs: the data's own scatter is the bound, not a model of it). Ranks: each rank's own estimate (median of v + its anchor domain's offset over its non-anchor members; a rank that is always the anchor is not checked); a rank whose estimate differs from its domain's by more than the domain's bound plus its own scatter gets its own offset (scope rank). Domains no edge reaches: offset 0, bound null (scope unaligned).
CREATE OR REPLACE VIEW int_clock_offsets(
  -- Training run identifier.
  run_id,
  -- Global rank.
  rank,
  -- Host of the rank (null when unknown: the rank is its own clock domain).
  host,
  -- The rank's clock minus the reference clock, ns: aligned time = raw time - offset_ns.
  offset_ns,
  -- Bound on |offset_ns - true offset|, ns (see header); 0 on the reference host; null when unaligned.
  error_bound_ns,
  -- reference (the reference host) | host (the host's offset) | rank (the rank disagrees with its host: own offset) | unaligned (no shared instance: offset 0).
  scope,
  -- Instances behind the offset (the last edge's for host scope, the rank's own for rank scope).
  n_instances,
  -- How the offset was found: reference, collective ends, p2p ends (with the hop count), or none.
  method
) AS
WITH
  m AS MATERIALIZED (
    SELECT
      run_id,
      rank,
      coalesce(host, 'rank:' || rank) AS domain,
      host,
      instance_key,
      op,
      p2p_src IS NOT NULL AS is_p2p,
      timed,
      timing_source,
      group_size,
      ts_ns,
      end_ns,
      -- resolution of the end timestamp: Kineto writes microseconds as JSON doubles, so an end
      -- near 1.7e18 ns carries a rounding of up to one unit in the last place (~250 ns)
      CASE
        WHEN source_format = 'kineto' AND abs(end_ns) >= 1000
          THEN pow(2, floor(log2(abs(end_ns) / 1000.0)) - 52) * 1000
        ELSE 1
      END AS res
    FROM int_instance_members AS i
    -- only instances with a timed member can give a timed rank or a usable instance (usable
    -- needs every member timed); an untimed run (NCCL logs) skips the grouping of its calls
    SEMI JOIN (SELECT DISTINCT run_id, instance_key FROM int_instance_members WHERE timed) AS t
      ON t.run_id = i.run_id AND t.instance_key IS NOT DISTINCT FROM i.instance_key
  ),
  timed_ranks AS (
    SELECT run_id, rank, any_value(host) AS host, any_value(domain) AS domain
    FROM m
    WHERE timed
    GROUP BY run_id, rank
  ),
  usable AS (
    -- every member present and timed by a completion clock, two clock domains at least
    SELECT run_id, instance_key, any_value(is_p2p) AS is_p2p
    FROM m
    GROUP BY run_id, instance_key
    HAVING count(DISTINCT rank) = max(group_size)
      AND bool_and(timed AND timing_source IN ('kernel', 'logged'))
      AND count(DISTINCT domain) > 1
      AND (any_value(is_p2p) OR count(DISTINCT op) = 1)
  ),
  ev AS MATERIALIZED (
    SELECT
      mm.*,
      arg_min(mm.domain, mm.rank) OVER (PARTITION BY mm.run_id, mm.instance_key) AS a_domain
    FROM m AS mm
    SEMI JOIN usable AS u ON u.run_id = mm.run_id AND u.instance_key = mm.instance_key
  ),
  anchors AS (
    SELECT run_id, instance_key, median(end_ns) AS a_end, min(ts_ns) AS a_start, max(res) AS a_res
    FROM ev
    WHERE domain = a_domain
    GROUP BY run_id, instance_key
  ),
  v AS (
    SELECT
      e.run_id,
      e.rank,
      e.domain,
      e.is_p2p,
      e.instance_key,
      e.a_domain,
      e.end_ns - a.a_end AS v,
      e.ts_ns - a.a_end AS lo_v,
      e.end_ns - a.a_start AS hi_v,
      e.res + a.a_res AS res
    FROM ev AS e
    JOIN anchors AS a ON a.run_id = e.run_id AND a.instance_key = e.instance_key
    WHERE e.domain <> e.a_domain
  ),
  edge_est AS (
    SELECT
      run_id,
      a_domain,
      domain,
      is_p2p,
      median(v) AS est,
      max(lo_v) AS lo,
      min(hi_v) AS hi,
      count(DISTINCT instance_key) AS n,
      max(res) AS res
    FROM v
    GROUP BY run_id, a_domain, domain, is_p2p
  ),
  edges_one AS (
    SELECT
      e.run_id,
      e.a_domain,
      e.domain,
      e.is_p2p,
      round(e.est)::BIGINT AS est,
      e.n,
      CASE
        WHEN e.n >= 3 THEN max(abs(v.v - e.est)) + e.res
        ELSE greatest(e.est - e.lo, e.hi - e.est, max(abs(v.v - e.est)) + e.res)
      END AS scatter
    FROM edge_est AS e
    JOIN v
      ON v.run_id = e.run_id AND v.a_domain = e.a_domain AND v.domain = e.domain
      AND v.is_p2p = e.is_p2p
    GROUP BY e.run_id, e.a_domain, e.domain, e.is_p2p, e.est, e.lo, e.hi, e.n, e.res
  ),
  edges AS (
    -- undirected: from -> to with to's clock = from's + est
    SELECT run_id, a_domain AS src, domain AS dst, is_p2p, est, n, ceil(scatter)::BIGINT AS scatter
    FROM edges_one
    UNION ALL
    SELECT run_id, domain, a_domain, is_p2p, -est, n, ceil(scatter)::BIGINT
    FROM edges_one
  ),
  ref AS (
    SELECT run_id, arg_min(domain, rank) AS domain FROM timed_ranks GROUP BY run_id
  ),
  l0 AS (
    SELECT run_id, domain, 0::BIGINT AS off, 0::BIGINT AS bound, 0 AS hops, FALSE AS via_p2p,
      NULL::BIGINT AS n
    FROM ref
  ),
  l1 AS (
    SELECT e.run_id, e.dst AS domain, p.off + e.est AS off, p.bound + e.scatter AS bound,
      p.hops + 1 AS hops, e.is_p2p OR p.via_p2p AS via_p2p, e.n
    FROM l0 AS p
    JOIN edges AS e ON e.run_id = p.run_id AND e.src = p.domain
    ANTI JOIN l0 AS d ON d.run_id = e.run_id AND d.domain = e.dst
    QUALIFY row_number() OVER (
      PARTITION BY e.run_id, e.dst ORDER BY e.is_p2p OR p.via_p2p, p.bound + e.scatter, e.src
    ) = 1
  ),
  r1 AS (SELECT * FROM l0 UNION ALL SELECT * FROM l1),
  l2 AS (
    SELECT e.run_id, e.dst AS domain, p.off + e.est AS off, p.bound + e.scatter AS bound,
      p.hops + 1 AS hops, e.is_p2p OR p.via_p2p AS via_p2p, e.n
    FROM l1 AS p
    JOIN edges AS e ON e.run_id = p.run_id AND e.src = p.domain
    ANTI JOIN r1 AS d ON d.run_id = e.run_id AND d.domain = e.dst
    QUALIFY row_number() OVER (
      PARTITION BY e.run_id, e.dst ORDER BY e.is_p2p OR p.via_p2p, p.bound + e.scatter, e.src
    ) = 1
  ),
  r2 AS (SELECT * FROM r1 UNION ALL SELECT * FROM l2),
  l3 AS (
    SELECT e.run_id, e.dst AS domain, p.off + e.est AS off, p.bound + e.scatter AS bound,
      p.hops + 1 AS hops, e.is_p2p OR p.via_p2p AS via_p2p, e.n
    FROM l2 AS p
    JOIN edges AS e ON e.run_id = p.run_id AND e.src = p.domain
    ANTI JOIN r2 AS d ON d.run_id = e.run_id AND d.domain = e.dst
    QUALIFY row_number() OVER (
      PARTITION BY e.run_id, e.dst ORDER BY e.is_p2p OR p.via_p2p, p.bound + e.scatter, e.src
    ) = 1
  ),
  r3 AS (SELECT * FROM r2 UNION ALL SELECT * FROM l3),
  l4 AS (
    SELECT e.run_id, e.dst AS domain, p.off + e.est AS off, p.bound + e.scatter AS bound,
      p.hops + 1 AS hops, e.is_p2p OR p.via_p2p AS via_p2p, e.n
    FROM l3 AS p
    JOIN edges AS e ON e.run_id = p.run_id AND e.src = p.domain
    ANTI JOIN r3 AS d ON d.run_id = e.run_id AND d.domain = e.dst
    QUALIFY row_number() OVER (
      PARTITION BY e.run_id, e.dst ORDER BY e.is_p2p OR p.via_p2p, p.bound + e.scatter, e.src
    ) = 1
  ),
  r4 AS (SELECT * FROM r3 UNION ALL SELECT * FROM l4),
  l5 AS (
    SELECT e.run_id, e.dst AS domain, p.off + e.est AS off, p.bound + e.scatter AS bound,
      p.hops + 1 AS hops, e.is_p2p OR p.via_p2p AS via_p2p, e.n
    FROM l4 AS p
    JOIN edges AS e ON e.run_id = p.run_id AND e.src = p.domain
    ANTI JOIN r4 AS d ON d.run_id = e.run_id AND d.domain = e.dst
    QUALIFY row_number() OVER (
      PARTITION BY e.run_id, e.dst ORDER BY e.is_p2p OR p.via_p2p, p.bound + e.scatter, e.src
    ) = 1
  ),
  r5 AS (SELECT * FROM r4 UNION ALL SELECT * FROM l5),
  l6 AS (
    SELECT e.run_id, e.dst AS domain, p.off + e.est AS off, p.bound + e.scatter AS bound,
      p.hops + 1 AS hops, e.is_p2p OR p.via_p2p AS via_p2p, e.n
    FROM l5 AS p
    JOIN edges AS e ON e.run_id = p.run_id AND e.src = p.domain
    ANTI JOIN r5 AS d ON d.run_id = e.run_id AND d.domain = e.dst
    QUALIFY row_number() OVER (
      PARTITION BY e.run_id, e.dst ORDER BY e.is_p2p OR p.via_p2p, p.bound + e.scatter, e.src
    ) = 1
  ),
  domains AS (SELECT * FROM r5 UNION ALL SELECT * FROM l6),
  -- a rank's own estimate from its non-anchor members (anchor domain already aligned)
  rank_est AS (
    SELECT
      v.run_id,
      v.rank,
      median(v.v + d.off) AS est,
      count(DISTINCT v.instance_key) AS n,
      max(d.bound) AS anchor_bound,
      max(v.res) AS res
    FROM v
    JOIN domains AS d ON d.run_id = v.run_id AND d.domain = v.a_domain
    GROUP BY v.run_id, v.rank
  ),
  rank_scatter AS (
    SELECT
      r.run_id,
      r.rank,
      r.est,
      r.n,
      r.anchor_bound,
      max(abs(v.v + d.off - r.est)) + r.res AS scatter
    FROM rank_est AS r
    JOIN v ON v.run_id = r.run_id AND v.rank = r.rank
    JOIN domains AS d ON d.run_id = v.run_id AND d.domain = v.a_domain
    GROUP BY r.run_id, r.rank, r.est, r.n, r.anchor_bound, r.res
  )
SELECT
  t.run_id,
  t.rank,
  t.host,
  CASE
    WHEN d.domain IS NULL THEN 0
    WHEN d.hops > 0 AND abs(rs.est - d.off) > d.bound + rs.scatter THEN round(rs.est)
    ELSE d.off
  END::BIGINT AS offset_ns,
  CASE
    WHEN d.domain IS NULL THEN NULL
    WHEN d.hops > 0 AND abs(rs.est - d.off) > d.bound + rs.scatter
      THEN ceil(rs.anchor_bound + rs.scatter)
    ELSE d.bound
  END::BIGINT AS error_bound_ns,
  CASE
    WHEN d.domain IS NULL THEN 'unaligned'
    WHEN d.hops = 0 THEN 'reference'
    WHEN abs(rs.est - d.off) > d.bound + rs.scatter THEN 'rank'
    ELSE 'host'
  END AS scope,
  CASE
    WHEN d.domain IS NULL THEN 0
    WHEN d.hops > 0 AND abs(rs.est - d.off) > d.bound + rs.scatter THEN rs.n
    ELSE coalesce(d.n, 0)
  END::BIGINT AS n_instances,
  CASE
    WHEN d.domain IS NULL THEN 'none: no shared timed instance with an aligned host'
    WHEN d.hops = 0 THEN 'reference'
    ELSE
      CASE WHEN d.via_p2p THEN 'p2p' ELSE 'collective' END || ' ends, ' || d.hops || ' hop'
      || CASE WHEN d.hops > 1 THEN 's' ELSE '' END
  END AS method
FROM timed_ranks AS t
LEFT JOIN domains AS d ON d.run_id = t.run_id AND d.domain = t.domain
LEFT JOIN rank_scatter AS rs ON rs.run_id = t.run_id AND rs.rank = t.rank
