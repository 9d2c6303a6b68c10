-- The one rule for a call's group size taken from the run config when its log does not say: config_group_size(op, ep, dp, tp).
-- Scalar macro, one value per call (null when the config cannot tell). send/recv: 2 (a pair); all_to_all: the expert-parallel degree, else the data-parallel one (MoE token routing, APNet'24 section 3); with tp = 1 every other collective spans the DP group, with dp = 1 the TP group; otherwise it is ambiguous and stays null (the reader marks the row group_source 'run_config' only when this gives a size). Used by effective_bandwidth (per-call tallies and DeepSpeed summaries).
CREATE OR REPLACE MACRO config_group_size(op, ep, dp, tp) AS
  CASE
    WHEN op IN ('send', 'recv') THEN 2
    WHEN op = 'all_to_all' THEN coalesce(ep, dp)
    WHEN tp = 1 THEN dp
    WHEN dp = 1 THEN tp
  END;
