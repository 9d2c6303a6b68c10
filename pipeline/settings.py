"""Settings built once at the edge (CLI or flow parameters) and passed down explicitly."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

DEFAULT_STORE = Path("commscope_store")
STORE_ENV = "COMMSCOPE_STORE"


def default_store() -> Path:
    """The store folder: ``$COMMSCOPE_STORE`` or ``./commscope_store``."""
    env = os.environ.get(STORE_ENV)
    return Path(env) if env else DEFAULT_STORE


@dataclass(frozen=True)
class Settings:
    """Where the store lives."""

    store: Path
