-- Stopgap: empty run_config / predicted_* tables where the caller registered none (store catalog), so intermediate views that read them bind.
-- Not a data object: one constant macro naming this file; the CREATE TABLE IF NOT EXISTS statements below never replace a registered table (derive and the SQL case runner register theirs first).
CREATE OR REPLACE MACRO external_defaults() AS 'run_config, predicted_traffic, predicted_matrix, predicted_times';
CREATE TABLE IF NOT EXISTS run_config (
  run_id VARCHAR, config_source VARCHAR, synthetic BOOLEAN, pp INTEGER, tp INTEGER, dp INTEGER,
  ep INTEGER, gpus_per_node INTEGER, micro_batches INTEGER, mapping_order VARCHAR,
  config_json VARCHAR
);
CREATE TABLE IF NOT EXISTS predicted_traffic (
  run_id VARCHAR, rank INTEGER, traffic_class VARCHAR, count BIGINT, msg_bytes BIGINT,
  volume_bytes BIGINT, sent_bytes BIGINT
);
CREATE TABLE IF NOT EXISTS predicted_matrix (
  run_id VARCHAR, src_rank INTEGER, dst_rank INTEGER, traffic_class VARCHAR, bytes BIGINT,
  intra_node BOOLEAN
);
CREATE TABLE IF NOT EXISTS predicted_times (run_id VARCHAR, term VARCHAR, value DOUBLE);
