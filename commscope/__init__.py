"""commscope: the communication logs of distributed LLM training turned into answers.

The packages (one import name; the source folders are mapped into it, README "Layout"):
``commscope.model`` (the analytical model, pure), ``commscope.parsers`` (one parser per
format), ``commscope.synthetic`` (the log generator), ``commscope.pipeline`` (store, catalog,
ingest, derive, flows, the command line), ``commscope.reports`` (HTML reports, reading marts).

The Python API for notebooks is :func:`open_store` (:mod:`commscope.api`); its names are loaded
on first use, so ``import commscope`` (and the command line) stays fast.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from commscope.api import OpenStore, open_store
    from commscope.resources import configs_dir, sample_traces_dir, sql_dir

__all__ = ["OpenStore", "configs_dir", "open_store", "sample_traces_dir", "sql_dir"]

_LAZY = {
    "OpenStore": "commscope.api",
    "open_store": "commscope.api",
    "configs_dir": "commscope.resources",
    "sample_traces_dir": "commscope.resources",
    "sql_dir": "commscope.resources",
}


def __getattr__(name: str) -> Any:
    """Load an API name on first use (PEP 562)."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'commscope' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY])
