"""Where the store lives by default: ``$COMMSCOPE_STORE`` or ``./commscope_store`` (read at the
edge, by the command line, and passed down explicitly)."""

from __future__ import annotations

import os
from pathlib import Path

DEFAULT_STORE = Path("commscope_store")
STORE_ENV = "COMMSCOPE_STORE"


def default_store() -> Path:
    """The store folder: ``$COMMSCOPE_STORE`` or ``./commscope_store``."""
    env = os.environ.get(STORE_ENV)
    return Path(env) if env else DEFAULT_STORE
