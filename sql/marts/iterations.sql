-- Iteration boundaries per rank, from markers (ProfilerStep#N, NVTX steps) or detected from the recurring communication pattern (the paper's regularity finding).
-- One row per (run, rank, iteration). Published as-is from int_iterations, which holds the rules and documents the columns.
CREATE OR REPLACE VIEW iterations AS
SELECT * FROM int_iterations;
