-- Point-to-point flows of each logged communication call, expanded by its algorithm (ring, tree, all-to-all, p2p).
-- One row per (run, iteration, src_rank, dst_rank, traffic_class, op, global_group, group_size, placement, logged_rank): the logged calls are counted per distinct (rank, iteration, op, size, group, peer, algorithm) pattern before expansion (a rank repeats identical calls many times per iteration), so rows are sums over calls; each rank's rows yield that rank's outgoing bytes, so a rank's flows sum to its logged send volume. S = msg_bytes, the canonical size of every source (all_gather the per-rank send buffer, reduce_scatter the per-rank shard, all_to_all the full per-rank send buffer). Ring all_reduce, all_gather, reduce_scatter, broadcast, reduce: comm_bus_bytes(op, S, n) of sql/macros/comm_bus_factor.sql (2(n-1)/n*S, (n-1)*S, (n-1)*S, S, S) to the ring successor; broadcast not to the root, reduce not from the root; tree all_reduce (algorithm TREE, tree logged): S to the parent and to each child; all_to_all: S/n to every member, its own block included (members unknown: (n-1)/n*S unplaced plus S/n to itself); send: S to the peer; recv: only when the sender logged nothing, S from the peer; gather: S to the root; scatter: root sends S to every other member. Ring edges from the logged NCCL rings (bytes split evenly over the channels), else the group order. Calls whose destinations are unknown keep their volume with a null dst_rank. Local bytes: a flow whose destination is its source (an all-to-all's own block; NCCL's all-to-all is grouped send/recv and logs a send to itself) never leaves the GPU: it is in local_bytes, not bytes, so bytes is network (and NVLink/PCIe) traffic only; bytes + local_bytes is the rank's logged send volume.
CREATE OR REPLACE VIEW int_flows_expanded(
  -- Training run identifier.
  run_id,
  -- Iteration of the call (int_comm_op_iteration, else the source's).
  iteration,
  -- Global rank that sends the bytes.
  src_rank,
  -- Global rank that receives them (null when the destination is unknown).
  dst_rank,
  -- Traffic class of the call (int_comm_ops_classified).
  traffic_class,
  -- Normalised operation.
  op,
  -- Group of global ranks the call ran on.
  global_group,
  -- Ranks in the group (n).
  group_size,
  -- Bytes sent from src_rank to dst_rank by these calls (fractional for ring shares); 0 when src_rank = dst_rank (local, see local_bytes).
  bytes,
  -- Bytes that stay on the rank (src_rank = dst_rank: an all-to-all's own block, a send to itself); 0 otherwise.
  local_bytes,
  -- How the destination was found: ring_topology, ring_group_order, tree_topology, all_to_all, p2p, recv_only, root, unplaced.
  placement,
  -- Global rank that logged the calls.
  logged_rank,
  -- Point-to-point flows summed (expanded call x channel rows).
  flows,
  -- Logged calls contributing (each call has one placement, so calls add up across rows).
  calls
) AS
WITH
  edges AS MATERIALIZED (SELECT * FROM int_topology_edges),
  members AS MATERIALIZED (SELECT * FROM int_groups_members),
  -- Algorithm: each logical call once (int_call_lines: int_calls, an NCCL all-to-all as its
  -- per-peer lines), in two parts. A call of a rank none of whose calls int_calls reworks (no
  -- record of another tool paired with it, no NCCL all-to-all group: int_calls' header) and
  -- that is no all-to-all (whose split may give it per-member lines) is its counted
  -- int_comm_ops_classified row: such calls are counted per shape_id, peer and iteration
  -- (int_comm_op_iteration_counts), and their shapes joined
  -- after; every other call is read from int_call_lines as it is (none on a run logged by
  -- one tool without
  -- all-to-alls: the semi join's empty build side then stops that read at once). A call is in
  -- exactly one part: its rank and its op decide.
  reworked_ranks AS MATERIALIZED (
    SELECT run_id, rank FROM int_p2p_groups
    UNION
    SELECT run_id, rank FROM int_call_sources WHERE role IN ('anchor', 'paired')
  ),
  shapes AS MATERIALIZED (
    SELECT
      shape_id, run_id, rank, op, source_format, algorithm, global_group, traffic_class,
      group_size, msg_bytes, counted, is_traffic
    FROM int_comm_op_shapes
  ),
  plain_shapes AS MATERIALIZED (
    SELECT s.shape_id, s.rank
    FROM shapes AS s
    ANTI JOIN reworked_ranks AS r ON r.run_id = s.run_id AND r.rank = s.rank
    WHERE s.counted AND s.is_traffic AND s.rank IS NOT NULL AND s.msg_bytes > 0
      AND s.op IS DISTINCT FROM 'all_to_all'
  ),
  other_ranks AS MATERIALIZED (
    SELECT run_id, rank FROM reworked_ranks
    UNION
    SELECT run_id, rank FROM shapes WHERE counted AND op = 'all_to_all'
  ),
  -- the ranks that logged a counted call (each has a row in int_call_lines)
  logged_ranks AS MATERIALIZED (
    SELECT DISTINCT run_id, rank FROM shapes WHERE counted AND rank IS NOT NULL
  ),
  plain_counts AS (
    -- the plain calls counted per shape, peer and iteration from their iteration rows' counts
    -- (int_comm_op_iteration_counts: the calls per shape, peer and iteration, no string), so
    -- no call is joined to its iteration (1024 ranks: 18 M calls by 18 M rows) nor to its
    -- names; plain_shapes has one row per shape_id, so the join keeps each call once
    SELECT
      i.shape_id,
      i.peer_rank,
      i.iteration AS it_iteration,
      sum(i.calls)::BIGINT AS ncalls
    FROM int_comm_op_iteration_counts AS i
    JOIN plain_shapes AS p ON p.shape_id = i.shape_id
    GROUP BY ALL
  ),
  base_calls AS (
    -- identical calls of a rank in an iteration expand identically: count them per pattern
    -- (the group ranks are looked up below, once per pattern rather than per call: both are
    -- functions of the pattern's run, group, rank and peer, so `base` sums the same calls)
    SELECT
      s.run_id,
      s.rank,
      s.op,
      s.source_format,
      s.algorithm,
      s.global_group,
      s.traffic_class,
      pc.it_iteration,
      pc.peer_rank,
      s.group_size AS n,
      s.msg_bytes::DOUBLE AS s,
      pc.ncalls
    FROM plain_counts AS pc
    JOIN shapes AS s ON s.shape_id = pc.shape_id
    UNION ALL
    SELECT
      o.run_id,
      o.rank,
      o.op,
      o.source_format,
      o.algorithm,
      o.global_group,
      o.traffic_class,
      coalesce(it.iteration, o.iteration) AS it_iteration,
      o.peer_rank,
      o.group_size AS n,
      o.msg_bytes::DOUBLE AS s,
      count(*) AS ncalls
    FROM int_call_lines AS o
    SEMI JOIN other_ranks AS x ON x.run_id = o.run_id AND x.rank = o.rank
    -- (those ranks' iterations only: with none, no hash table of every call's is built)
    LEFT JOIN (
      SELECT i.call_key, k.rank, i.source_line, i.iteration
      FROM int_comm_op_iteration_shaped AS i
      JOIN (
        -- the shapes of those ranks (a few thousand rows), each with its rank
        SELECT k.shape_id, k.rank
        FROM int_comm_op_shape_keys AS k
        SEMI JOIN other_ranks AS x ON x.run_id = k.run_id AND x.rank = k.rank
      ) AS k ON k.shape_id = i.shape_id
    ) AS it
      ON it.call_key = o.call_key AND it.rank = o.rank AND it.source_line = o.source_line
    WHERE o.is_traffic AND o.rank IS NOT NULL AND o.msg_bytes > 0
      AND (
        o.call_op = 'all_to_all'
        OR EXISTS (
          SELECT 1 FROM reworked_ranks AS r WHERE r.run_id = o.run_id AND r.rank = o.rank
        )
      )
    GROUP BY ALL
  ),
  base AS (
    SELECT
      b.run_id,
      b.rank,
      b.op,
      b.source_format,
      b.algorithm,
      b.global_group,
      b.traffic_class,
      b.it_iteration,
      me.group_rank AS my_group_rank,
      coalesce(
        rt.global_rank,
        CASE WHEN b.global_group IS NULL OR b.global_group = 'world' THEN b.peer_rank END
      ) AS peer_global,
      b.n,
      b.s,
      sum(b.ncalls)::BIGINT AS ncalls
    FROM base_calls AS b
    LEFT JOIN members AS me
      ON me.run_id = b.run_id AND me.global_group = b.global_group AND me.global_rank = b.rank
    LEFT JOIN members AS rt
      ON rt.run_id = b.run_id AND rt.global_group = b.global_group AND rt.group_rank = b.peer_rank
    GROUP BY ALL
  ),
  ring_nch AS MATERIALIZED (
    SELECT
      run_id,
      global_group,
      CASE WHEN kind = 'ring' THEN 'ring' ELSE 'tree' END AS kind,
      src_rank,
      count(DISTINCT channel) AS nch
    FROM edges
    GROUP BY ALL
  ),
  sized AS (
    -- volume sent by the caller on the ring, per op; mode = how it is expanded
    SELECT
      b.*,
      CASE
        WHEN b.op IN ('send', 'recv') THEN b.op
        WHEN b.op = 'all_to_all' THEN 'all_to_all'
        WHEN b.op IN ('gather', 'scatter') THEN b.op
        WHEN b.n IS NULL OR b.n <= 1 THEN 'none'
        WHEN b.op = 'all_reduce' AND upper(coalesce(b.algorithm, '')) = 'TREE'
          AND tn.nch IS NOT NULL THEN 'tree'
        WHEN b.op IN ('all_reduce', 'all_gather', 'reduce_scatter', 'broadcast', 'reduce')
          AND rn.nch IS NOT NULL THEN 'ring_topology'
        WHEN b.op IN ('all_reduce', 'all_gather', 'reduce_scatter', 'broadcast', 'reduce')
          AND b.my_group_rank IS NOT NULL THEN 'ring_group_order'
        ELSE 'unplaced'
      END AS mode,
      coalesce(rn.nch, 1) AS ring_nch,
      coalesce(tn.nch, 1) AS tree_nch,
      CASE
        -- a rank's ring send volume is the nccl-tests bus bytes (one definition, the macro)
        WHEN b.op IN ('all_reduce', 'all_gather', 'reduce_scatter', 'broadcast', 'reduce')
          THEN comm_bus_bytes(b.op, b.s, b.n)
        -- the block for each peer of the full per-rank send buffer
        WHEN b.op = 'all_to_all' THEN b.s / b.n
        ELSE b.s
      END AS v
    FROM base AS b
    LEFT JOIN ring_nch AS rn
      ON rn.run_id = b.run_id AND rn.global_group = b.global_group AND rn.kind = 'ring'
      AND rn.src_rank = b.rank
    LEFT JOIN ring_nch AS tn
      ON tn.run_id = b.run_id AND tn.global_group = b.global_group AND tn.kind = 'tree'
      AND tn.src_rank = b.rank
  ),
  root AS MATERIALIZED (
    SELECT
      s.*,
      coalesce(s.peer_global, r0.global_rank) AS root_global
    FROM sized AS s
    LEFT JOIN members AS r0
      ON r0.run_id = s.run_id AND r0.global_group = s.global_group AND r0.group_rank = 0
      AND s.peer_global IS NULL AND s.op IN ('broadcast', 'reduce', 'gather', 'scatter')
  ),
  flows AS (
    -- ring along the logged NCCL rings
    SELECT r.*, e.dst_rank AS dst, r.v / r.ring_nch AS b, 'ring_topology' AS placement
    FROM root AS r
    JOIN edges AS e
      ON e.run_id = r.run_id AND e.global_group = r.global_group AND e.kind = 'ring'
      AND e.src_rank = r.rank
    WHERE r.mode = 'ring_topology'
      AND NOT (r.op = 'broadcast' AND e.dst_rank = r.root_global)
      AND NOT (r.op = 'reduce' AND r.rank = r.root_global)
    UNION ALL
    -- ring in group order
    SELECT r.*, m.global_rank AS dst, r.v AS b, 'ring_group_order' AS placement
    FROM root AS r
    JOIN members AS m
      ON m.run_id = r.run_id AND m.global_group = r.global_group
      AND m.group_rank = (r.my_group_rank + 1) % r.n
    WHERE r.mode = 'ring_group_order'
      AND NOT (r.op = 'broadcast' AND m.global_rank = r.root_global)
      AND NOT (r.op = 'reduce' AND r.rank = r.root_global)
    UNION ALL
    -- tree all_reduce: reduce up to the parent, broadcast down to the children
    SELECT r.*, e.dst_rank AS dst, r.s / r.tree_nch AS b, 'tree_topology' AS placement
    FROM root AS r
    JOIN edges AS e
      ON e.run_id = r.run_id AND e.global_group = r.global_group
      AND e.kind IN ('tree_up', 'tree_down') AND e.src_rank = r.rank
    WHERE r.mode = 'tree'
    UNION ALL
    -- all_to_all: to every member, the caller's own block (local) included
    SELECT r.*, m.global_rank AS dst, r.v AS b, 'all_to_all' AS placement
    FROM root AS r
    JOIN members AS m ON m.run_id = r.run_id AND m.global_group = r.global_group
    WHERE r.mode = 'all_to_all' AND r.my_group_rank IS NOT NULL AND r.n > 1
    UNION ALL
    -- all_to_all with members unknown: the own block is still known to stay local
    SELECT r.*, r.rank AS dst, r.v AS b, 'all_to_all' AS placement
    FROM root AS r
    WHERE r.mode = 'all_to_all' AND r.my_group_rank IS NULL AND r.n > 1
    UNION ALL
    -- scatter: the root sends to every other member
    SELECT r.*, m.global_rank AS dst, r.s AS b, 'root' AS placement
    FROM root AS r
    JOIN members AS m
      ON m.run_id = r.run_id AND m.global_group = r.global_group AND m.global_rank <> r.rank
    WHERE r.mode = 'scatter' AND r.rank = r.root_global
    UNION ALL
    -- gather: every non-root sends to the root
    SELECT r.*, r.root_global AS dst, r.s AS b, 'root' AS placement
    FROM root AS r
    WHERE r.mode = 'gather' AND r.root_global IS NOT NULL AND r.rank <> r.root_global
    UNION ALL
    -- send: to the peer
    SELECT r.*, r.peer_global AS dst, r.s AS b, 'p2p' AS placement
    FROM root AS r
    WHERE r.mode = 'send'
    UNION ALL
    -- recv whose sender logged nothing: the only record of those bytes
    SELECT r.*, r.rank AS dst, r.s AS b, 'recv_only' AS placement
    FROM root AS r
    ANTI JOIN logged_ranks AS l ON l.run_id = r.run_id AND l.rank = r.peer_global
    WHERE r.mode = 'recv' AND r.peer_global IS NOT NULL
    UNION ALL
    -- destinations unknown: keep the caller's volume
    SELECT r.*, NULL AS dst, r.v * CASE WHEN r.mode = 'all_to_all' THEN r.n - 1 ELSE 1 END AS b,
      'unplaced' AS placement
    FROM root AS r
    WHERE r.mode = 'unplaced'
      OR (r.mode = 'all_to_all' AND (r.my_group_rank IS NULL) AND r.n > 1)
      OR (r.mode = 'scatter' AND r.root_global IS NULL)
  )
-- a pattern's calls count once per destination however many channels reach it: the flows are
-- summed per (pattern, destination) first (every row of one has the pattern's ncalls and one
-- placement: a pattern has one mode), then per output row (an aggregate, not a window per
-- (pattern, destination), whose many tiny partitions cost more than the rest of the view)
SELECT
  run_id,
  it_iteration AS iteration,
  CASE WHEN placement = 'recv_only' THEN peer_global ELSE rank END::INTEGER AS src_rank,
  dst::INTEGER AS dst_rank,
  traffic_class,
  op,
  global_group,
  n::INTEGER AS group_size,
  sum(CASE WHEN local THEN 0 ELSE bn END)::DOUBLE AS bytes,
  sum(CASE WHEN local THEN bn ELSE 0 END)::DOUBLE AS local_bytes,
  placement,
  rank AS logged_rank,
  sum(nflows)::BIGINT AS flows,
  sum(ncalls)::BIGINT AS calls
FROM (
  SELECT
    run_id,
    it_iteration,
    rank,
    op,
    source_format,
    algorithm,
    global_group,
    traffic_class,
    my_group_rank,
    peer_global,
    n,
    s,
    dst,
    placement,
    -- src = dst: the bytes never leave the rank
    coalesce(dst = CASE WHEN placement = 'recv_only' THEN peer_global ELSE rank END, false)
      AS local,
    sum(b * ncalls) AS bn,
    sum(ncalls) AS nflows,
    any_value(ncalls) AS ncalls
  FROM flows
  WHERE b > 0
  GROUP BY run_id, it_iteration, rank, op, source_format, algorithm, global_group, traffic_class,
    my_group_rank, peer_global, n, s, dst, placement
)
GROUP BY run_id, iteration, src_rank, dst_rank, traffic_class, op, global_group, group_size,
  placement, logged_rank
