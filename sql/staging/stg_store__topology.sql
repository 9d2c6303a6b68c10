-- Logical NCCL topology edges (rings, trees, connections) with ranks inside their communicator.
-- One row per (communicator, rank, kind, channel, peer, direction) as topology.
CREATE OR REPLACE VIEW stg_store__topology(
  -- Training run identifier.
  run_id,
  -- Communicator pointer of the process that logged the edge.
  comm_id,
  -- Rank inside the communicator whose edge this is (ring_order: the ring member).
  group_rank,
  -- ring, ring_order, tree, nvls, collnet, p2p.
  kind,
  -- Channel index.
  channel,
  -- Neighbour rank inside the communicator (ring_order position rows: the position).
  peer_group_rank,
  -- next, prev, up, down, send, recv, position.
  direction,
  -- Transport of the connection (P2P/IPC, SHM, NET/IB, ...).
  transport,
  -- Host of the logging process.
  host,
  -- Process id of the logging process.
  pid,
  -- File the row came from.
  source_file,
  -- Line in that file.
  source_line
) AS
SELECT
  run_id,
  comm_id,
  rank AS group_rank,
  kind,
  channel,
  peer_rank AS peer_group_rank,
  direction,
  transport,
  host,
  pid,
  source_file,
  source_line
FROM topology
