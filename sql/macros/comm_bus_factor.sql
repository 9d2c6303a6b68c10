-- The one definition of a collective's bus-bandwidth factor and algbw byte count (nccl-tests, PERFORMANCE.md): comm_bus_factor(op, n), comm_alg_bytes(op, msg_bytes, n) and comm_bus_bytes(op, msg_bytes, n) = their product; every mart that turns sizes into bandwidth or link volume calls these, none repeats the factors.
-- Scalar macros, one value per call. msg_bytes is the canonical size of comm_ops.msg_bytes, the same for every source: all_reduce/broadcast/reduce the full buffer, all_gather the per-rank send buffer, reduce_scatter the per-rank receive buffer (the shard), all_to_all the full per-rank send buffer, send/recv the buffer, gather/scatter the per-rank block. algbw S = msg_bytes x n for all_gather, reduce_scatter, gather, scatter, else msg_bytes; algbw = S / t; busbw = algbw x factor, factor = 2(n-1)/n for all_reduce, (n-1)/n for all_gather, reduce_scatter, all_to_all, gather, scatter (nccl-tests), 1 otherwise. comm_bus_bytes = S x factor is also the volume one rank sends in a ring (all_gather, reduce_scatter: (n-1) x msg_bytes) or pairwise all_to_all ((n-1)/n x msg_bytes). Null when the factor needs n and n is null or < 1. Bandwidths are reported in GB/s = 1e9 bytes/s (decimal).
CREATE OR REPLACE MACRO comm_bus_factor(op, n) AS
  CASE
    WHEN op = 'all_reduce' THEN
      CASE WHEN n >= 1 THEN 2.0 * (n - 1) / n END
    WHEN op IN ('all_gather', 'reduce_scatter', 'all_to_all', 'gather', 'scatter') THEN
      CASE WHEN n >= 1 THEN (n - 1)::DOUBLE / n END
    ELSE 1.0
  END;

CREATE OR REPLACE MACRO comm_alg_bytes(op, msg_bytes, n) AS
  CASE
    WHEN op IN ('all_gather', 'reduce_scatter', 'gather', 'scatter') THEN
      CASE WHEN n >= 1 THEN msg_bytes::DOUBLE * n END
    ELSE msg_bytes::DOUBLE
  END;

CREATE OR REPLACE MACRO comm_bus_bytes(op, msg_bytes, n) AS
  comm_alg_bytes(op, msg_bytes, n) * comm_bus_factor(op, n);
