-- The one definition of a collective instance's key (issue 18): instance_key(is_p2p, global_group, p2p_src, p2p_dst, instance_seq) = '<global_group>|<instance_seq>' for a collective on its group, 'p2p:<src>-><dst>|<instance_seq>' for a point-to-point transfer (the sender's and the receiver's global ranks). int_instance_members (per call) and int_instances (per instance) both build it here, so a member joins its instance on the same string.
-- Scalar macro, one value per call or instance.
CREATE OR REPLACE MACRO instance_key(is_p2p, global_group, p2p_src, p2p_dst, instance_seq) AS
  CASE
    WHEN is_p2p THEN 'p2p:' || p2p_src || '->' || p2p_dst || '|' || instance_seq
    ELSE global_group || '|' || instance_seq
  END;
