"""commscope's SQL modules (package data, read by path: :func:`commscope.resources.sql_dir`)."""
