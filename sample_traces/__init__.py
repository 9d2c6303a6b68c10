"""Bundled real recordings, one run per sub-folder (package data:
:func:`commscope.resources.sample_traces_dir`; see README.md here)."""
