-- One bus bandwidth C per (run, traffic class): the paper's C_TP, C_PP, C_DP, C_EP (APNet'24 eqs 2-4: T = bytes / C, the bandwidth a transfer achieves; model_spec §C), measured as Σ bus bytes / Σ transfer time over the class's calls, and beside it the whole-call estimator (waiting for the group's last member included).
-- One row per (run_id, traffic_class) with at least one call that has a transfer time and a bus byte count. Input: int_breakdown_calls (one timed list per rank: each logical call once; its xfer_ns = the part after the group's last member posted, or the estimator's where no peer timing exists, see xfer_source). Bus bytes: comm_bus_bytes(op, msg_bytes, n) of sql/macros/comm_bus_factor.sql only (nccl-tests; DeepSpeed logs reduce_scatter's whole input, so its shard is msg_bytes / n). C = Σ bus bytes / Σ xfer_ns (a sum ratio: large messages weigh by their time, as in the model's T = S / C); busbw_call = Σ bus bytes / Σ dur_ns. Units: bytes/s and ns.
CREATE OR REPLACE VIEW int_class_bandwidth(
  -- Training run identifier.
  run_id,
  -- TP | PP | DP | EP | EmbTableSyn | other.
  traffic_class,
  -- Calls with a transfer time (xfer_ns > 0) and a known bus byte count.
  calls,
  -- Σ bus bytes of those calls (comm_bus_bytes with the call's group size), bytes.
  bus_bytes,
  -- Σ transfer time of those calls, ns.
  xfer_ns,
  -- Σ whole-call time of those calls (post to end, waiting included), ns.
  call_ns,
  -- C: bus_bytes / xfer_ns, bytes/s (the class's transfer bus bandwidth).
  busbw_transfer_Bps,
  -- bus_bytes / call_ns, bytes/s (call-to-end estimator: waiting for the group's last member included).
  busbw_call_Bps,
  -- peers | estimated | mixed: how the calls' transfer times were found (int_breakdown_calls.xfer_source).
  xfer_source
) AS
WITH
  calls AS (
    SELECT
      run_id,
      traffic_class,
      xfer_source,
      xfer_ns,
      dur_ns,
      comm_bus_bytes(
        op,
        CASE
          WHEN source_format = 'deepspeed_comms' AND op = 'reduce_scatter'
            THEN msg_bytes::DOUBLE / group_size
          ELSE msg_bytes
        END,
        CASE WHEN op IN ('send', 'recv') THEN coalesce(group_size, 2) ELSE group_size END
      ) AS bus
    FROM int_breakdown_calls
    WHERE xfer_ns > 0 AND msg_bytes > 0
  )
SELECT
  run_id,
  traffic_class,
  count(*) AS calls,
  sum(bus) AS bus_bytes,
  sum(xfer_ns)::BIGINT AS xfer_ns,
  sum(dur_ns)::BIGINT AS call_ns,
  sum(bus) / sum(xfer_ns) * 1e9 AS busbw_transfer_Bps,
  sum(bus) / nullif(sum(dur_ns), 0) * 1e9 AS busbw_call_Bps,
  CASE WHEN min(xfer_source) = max(xfer_source) THEN min(xfer_source) ELSE 'mixed' END
    AS xfer_source
FROM calls
WHERE bus IS NOT NULL
GROUP BY run_id, traffic_class
