"""Example run configs (package data: :func:`commscope.resources.configs_dir`)."""
