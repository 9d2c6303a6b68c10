"""The Vega + Vega-Lite + vega-embed JavaScript inlined into every report, built once.

Why: ``vl_convert.javascript_bundle()`` bundles the libraries afresh on every call (about 1.4 s
of CPU for 0.9 MB), and each report page needs it, so a ``demo`` of five runs paid it five times
and every ``serve --once`` once (issue 21 item 3: no fixed cost that dwarfs the work). The
bundle depends only on the installed vl-convert, so it is kept

* in this process after the first build, and
* on disk in ``$XDG_CACHE_HOME/commscope/`` (``~/.cache`` when unset), one file per
  vl-convert version, written atomically, with the SHA-256 of the bundle in its first line.

A cached file is used only when it is a regular file owned by this user, neither it nor its
folder writable by group or others, and its content matches the recorded hash; otherwise (or
when the cache cannot be written, e.g. a read-only home) the bundle is built as before. Either
way the text is checked to be safe to inline (no ``</script``, no ``<!--``).
"""

from __future__ import annotations

import functools
import hashlib
import logging
import os
import stat
import tempfile
from pathlib import Path

log = logging.getLogger(__name__)

_HEADER = "// commscope vega bundle sha256="


def cache_dir() -> Path:
    """Where the built bundle is kept: ``$XDG_CACHE_HOME/commscope`` (``~/.cache/commscope``)."""
    base = os.environ.get("XDG_CACHE_HOME", "").strip()
    root = Path(base) if base and Path(base).is_absolute() else Path.home() / ".cache"
    return root / "commscope"


def _cache_file(version: str) -> Path:
    safe = "".join(c if c.isalnum() or c in ".-_" else "_" for c in version)
    return cache_dir() / f"vega-bundle-vl-convert-{safe}.js"


def _private(st: os.stat_result) -> bool:
    """Owned by this user and not writable by group or others."""
    return st.st_uid == os.getuid() and not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


def _read_cached(path: Path) -> str | None:
    """The cached bundle, or None when absent, not private, or not matching its hash."""
    try:
        folder, st = path.parent.stat(), path.lstat()
        if not (stat.S_ISREG(st.st_mode) and _private(st) and _private(folder)):
            return None
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    head, sep, bundle = text.partition("\n")
    if not sep or not head.startswith(_HEADER):
        return None
    if hashlib.sha256(bundle.encode()).hexdigest() != head[len(_HEADER) :]:
        return None
    return bundle


def _write_cached(path: Path, bundle: str) -> None:
    """Keep ``bundle`` at ``path`` (atomic replace, mode 0600); a failure only logs."""
    digest = hashlib.sha256(bundle.encode()).hexdigest()
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".vega-", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(f"{_HEADER}{digest}\n{bundle}")
            Path(tmp).replace(path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    except OSError as exc:
        log.debug("vega bundle not cached at %s: %s", path, exc)


def _checked(bundle: str) -> str:
    low = bundle.lower()
    if "</script" in low or "<!--" in low:  # would end or confuse the inline script element
        raise RuntimeError("the vl-convert bundle contains '</script' or '<!--'")
    return bundle


@functools.cache
def vega_bundle() -> str:
    """The Vega + Vega-Lite + vega-embed bundle, checked to be safe to inline."""
    import vl_convert as vlc

    path = _cache_file(str(getattr(vlc, "__version__", "unknown")))
    cached = _read_cached(path)
    if cached is not None:
        return _checked(cached)
    bundle = _checked(str(vlc.javascript_bundle()))
    _write_cached(path, bundle)
    return bundle


__all__ = ["cache_dir", "vega_bundle"]
