-- The one definition of a communication call's token text: comm_op_token(op, msg_bytes, group_size, comm_id, peer_rank) = 'op:msg_bytes:group:peer', group = the group size when logged, else the communicator id; '?' for an unknown size or group, '-' for no peer (int_comm_ops_sequenced's rule: the token whose recurrence gives the period).
-- Scalar macro, one VARCHAR per call. Why: every value but the peer is the call's shape's (int_comm_op_shape_keys), so the per-call rows store no token (int_comm_op_iteration_shaped) and a reader computes it where it needs the text: per call (int_comm_ops_sequenced, int_comm_op_iteration) or once per (shape, peer) (int_onoff_signature).
CREATE OR REPLACE MACRO comm_op_token(op, msg_bytes, group_size, comm_id, peer_rank) AS concat_ws(
  ':',
  op,
  coalesce(CAST(msg_bytes AS VARCHAR), '?'),
  coalesce(coalesce(CAST(group_size AS VARCHAR), comm_id), '?'),
  coalesce(CAST(peer_rank AS VARCHAR), '-')
);
