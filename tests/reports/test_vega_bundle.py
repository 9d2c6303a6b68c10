"""``reports/vega_bundle.py``: the inlined Vega bundle is built once, kept on disk safely.

Given/expect with a stand-in ``vl_convert`` (counts its builds) and a private cache folder.
"""

from __future__ import annotations

import hashlib
import sys
import types
from pathlib import Path

import pytest

from commscope.reports import vega_bundle as vb

BUNDLE = "var vega = {};\n// ok\n"


@pytest.fixture
def fake_vlc(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> types.SimpleNamespace:
    """A ``vl_convert`` whose ``javascript_bundle`` counts its calls; cache under tmp_path."""
    calls = types.SimpleNamespace(n=0, text=BUNDLE)

    def javascript_bundle() -> str:
        calls.n += 1
        return calls.text

    mod = types.ModuleType("vl_convert")
    mod.javascript_bundle = javascript_bundle  # type: ignore[attr-defined]
    mod.__version__ = "9.9.9"  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "vl_convert", mod)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    vb.vega_bundle.cache_clear()
    yield calls
    vb.vega_bundle.cache_clear()


def _cached(tmp_path: Path) -> Path:
    return tmp_path / "cache" / "commscope" / "vega-bundle-vl-convert-9.9.9.js"


def test_built_once_per_process_and_then_read_from_disk(fake_vlc, tmp_path: Path) -> None:
    assert vb.vega_bundle() == BUNDLE and vb.vega_bundle() == BUNDLE
    assert fake_vlc.n == 1
    path = _cached(tmp_path)
    head, _, body = path.read_text().partition("\n")
    assert body == BUNDLE and head.endswith(hashlib.sha256(BUNDLE.encode()).hexdigest())
    assert path.stat().st_mode & 0o777 == 0o600
    vb.vega_bundle.cache_clear()  # a new process
    assert vb.vega_bundle() == BUNDLE and fake_vlc.n == 1


def test_corrupt_cache_is_rebuilt(fake_vlc, tmp_path: Path) -> None:
    vb.vega_bundle()
    path = _cached(tmp_path)
    path.write_text(path.read_text().replace("ok", "KO"))
    vb.vega_bundle.cache_clear()
    assert vb.vega_bundle() == BUNDLE and fake_vlc.n == 2
    vb.vega_bundle.cache_clear()
    assert vb.vega_bundle() == BUNDLE and fake_vlc.n == 2  # rewritten whole


@pytest.mark.parametrize("target", ["file", "folder"])
def test_cache_writable_by_others_is_not_trusted(fake_vlc, tmp_path: Path, target: str) -> None:
    vb.vega_bundle()
    path = _cached(tmp_path)
    (path if target == "file" else path.parent).chmod(0o666 if target == "file" else 0o777)
    vb.vega_bundle.cache_clear()
    vb.vega_bundle()
    assert fake_vlc.n == 2


def test_unwritable_cache_still_builds(fake_vlc, tmp_path: Path, monkeypatch) -> None:
    blocker = tmp_path / "cache"
    blocker.write_text("not a folder")
    assert vb.vega_bundle() == BUNDLE and fake_vlc.n == 1


def test_unsafe_bundle_refused_built_or_cached(fake_vlc, tmp_path: Path) -> None:
    fake_vlc.text = "x = '</script>';"
    with pytest.raises(RuntimeError, match="</script"):
        vb.vega_bundle()
    # a cache entry with a matching hash is checked too
    bad = "y = '<!--';"
    path = _cached(tmp_path)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    path.write_text(f"{vb._HEADER}{hashlib.sha256(bad.encode()).hexdigest()}\n{bad}")
    path.chmod(0o600)
    fake_vlc.text = BUNDLE
    vb.vega_bundle.cache_clear()
    with pytest.raises(RuntimeError, match="<!--"):
        vb.vega_bundle()
    assert fake_vlc.n == 1
