"""What the store (:mod:`commscope.pipeline.store`: commits, published derives) and its DuckDB
catalog (:mod:`commscope.pipeline.catalog`: views) share: the store's errors and the names of
its data folders. A module of its own so the catalog needs nothing from the store module (the
store calls the catalog, never the other way round).
"""

from __future__ import annotations

import errno
from pathlib import Path

DATA_DIRS = ("tables", "marts", "model_inputs", "derived")
"""The store's folders that hold Parquet read by the catalog's views (nothing else is read)."""
DERIVED_SCHEMA_FILE = "_schema.parquet"
"""A zero-row file in ``derived/`` so the views' generation filter binds before any derive."""


class StoreError(Exception):
    """A store operation failed; the message says what and where."""


class StoreReadOnlyError(StoreError):
    """The store cannot be written (read-only file system or no write permission)."""


READ_ONLY_ERRNOS = frozenset({errno.EROFS, errno.EACCES, errno.EPERM})
"""Errors of creating the lock file that mean "this store is read-only" for this process."""


class CatalogBusyError(StoreError):
    """The catalog is open read-write elsewhere (``query --write``, the duckdb CLI)."""


def write_error(path: Path, exc: BaseException) -> StoreError:
    """One clear line for a write into the store that the file system refused.

    Why: a full disk or a read-only store surfaces as ``OSError`` (Python) or
    ``duckdb.IOException`` (DuckDB's own writes); users need the reason and the file, not a
    traceback. Other errors keep their text.
    """
    text = str(exc)
    code = getattr(exc, "errno", None)
    if code == errno.ENOSPC or "No space left on device" in text:
        reason = "No space left on device"
    elif code == errno.EROFS or "Read-only file system" in text:
        reason = "Read-only file system"
    elif code in (errno.EACCES, errno.EPERM) or "Permission denied" in text:
        reason = "Permission denied"
    elif code == errno.EDQUOT or "quota exceeded" in text.lower():
        reason = "Disk quota exceeded"
    else:
        reason = getattr(exc, "strerror", None) or (text.splitlines() or [repr(exc)])[0]
    return StoreError(f"{path}: cannot write the store ({reason})")
