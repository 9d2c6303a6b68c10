-- The one definition of how far a logged message size may lie from the true size, in bytes: logged_size_tolerance(source_format, msg_bytes).
-- Scalar macro, one value per call. DeepSpeed's comms logger prints sizes with deepspeed.utils.comms_logging.convert_size: round(size / 1024^i, 2) in unit i = floor(log_1024 size) (B, KB, MB, ... 1024-based), and the parser stores round(printed * 1024^i) (parsers/_ds_sizes.py), so the stored size is within half a unit of the last printed digit of the true one: |stored - true| <= 0.005 * 1024^i + 0.5 (the 0.5 is the rounding to whole bytes). i is taken from the stored size, which is never in a smaller unit than the true size's (rounding up to 1024.0 of a unit stores the next unit's power), so the bound holds. Example: 741.47 MiB printed for 777,492,000 B is stored as 777,487,647 B, 4,353 B away, tolerance 5,243.38 B. Every other source logs exact byte counts (element count x element size): tolerance 0. Used to match logged calls to the model's predicted sizes (int_comm_ops_classified).
CREATE OR REPLACE MACRO logged_size_tolerance(source_format, msg_bytes) AS
  CASE
    WHEN source_format = 'deepspeed_comms' AND msg_bytes >= 1 THEN
      -- 1e-9: ln(1024^i) / ln(1024) may come out a hair below i in floating point
      0.005 * pow(1024.0, floor(ln(msg_bytes::DOUBLE) / ln(1024.0) + 1e-9)) + 0.5
    ELSE 0.0
  END;
