"""Fuzz and corpus tests of run configs (issue 23: configs never end in a traceback).

Three generators, each with a fixed seed (``derandomize``) and a modest example count, so the
test is quick and repeatable; ``COMMSCOPE_FUZZ_EXAMPLES=N`` runs N times more from fresh seeds:

* arbitrary JSON-like structures (nested lists and tables, huge and negative integers, NaN
  and infinities, odd strings, the layout's own key names) as a manifest's ``config``;
* mutations of the shipped ``configs/*.toml``: one key's value replaced by a hostile TOML
  literal, a line dropped or duplicated, the text cut, a byte flipped;
* the same mutations written as ``manifest.json`` and read by ``read_manifest``.

The property each time: the config is either accepted (and then what derive and report build
from it, ``run_config_frame``, works, and a save/load round trip keeps it) or refused with one
:class:`ConfigError` whose message names the file; never any other exception.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any

import pytest
from fuzz_common import fuzz_settings
from hypothesis import given
from hypothesis import strategies as st

from commscope.pipeline import run_config as rc
from commscope.pipeline.config_schema import (
    GENERATOR_SCHEMA,
    SCHEMA,
    ConfigError,
    load_config_bytes,
    validate,
)
from commscope.pipeline.derive import run_config_frame
from commscope.pipeline.store import Store

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = sorted((ROOT / "configs").glob("*.toml"))
LAYOUT = {**SCHEMA, **GENERATOR_SCHEMA}
KEYS = sorted({k for section in LAYOUT.values() for k in section} | set(LAYOUT))
ORIGIN = "fuzz.toml"
EXAMPLES = int(os.environ.get("COMMSCOPE_FUZZ_EXAMPLES", "1") or "1")

pytestmark = pytest.mark.slow  # about 10-20 s in all, like the other fuzz modules

_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.sampled_from([0, 1, -1, 2**31, 2**63, 2**64 - 1, 10**30]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20),
    st.sampled_from(["two", "fp16", "old", "pipe", "data", "model", "customized", ""]),
)
_KEY = st.one_of(st.sampled_from(KEYS), st.text(max_size=8))
JSONISH = st.recursive(
    _SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(_KEY, inner, max_size=6)),
    max_leaves=30,
)
"""Any JSON-like structure, biased to the layout's own key names."""

TOML_VALUES = [
    '"two"', "1e30", "0", "-1", "-4000", "nan", "inf", "-inf", "[1, 2]", "{ a = 1 }", "true",
    "18446744073709551616", "9" * 5000, "1.5", '""', '"x"' * 200, "[[1], [2]]", "[]",
]  # fmt: skip
"""Hostile TOML literals put in place of one key's value."""


def check(data: Any, origin: str, tmp: Path) -> None:
    """Accepted and usable, or one ConfigError naming ``origin``; nothing else."""
    try:
        checked = validate(data, origin)
    except ConfigError as exc:
        assert str(exc).startswith(origin), exc
        assert "\n" not in str(exc)
        return
    stored = rc.StoredConfig("fz", checked.config, f"config:{origin}")
    frame = run_config_frame(stored, "fz")  # what derive and report build from a config
    assert frame.height == 1
    for section, body in checked.config.items():
        assert section in SCHEMA and set(body) <= set(SCHEMA[section])
    for section, body in checked.generator.items():  # checked, never stored
        assert section in GENERATOR_SCHEMA and set(body) <= set(GENERATOR_SCHEMA[section])
    store = Store(tmp)
    rc.save(store, stored)
    back = rc.load(store, "fz")
    assert back is not None and _same(back.config, checked.config)


def _same(a: Any, b: Any) -> bool:
    """Equality that treats NaN as equal to itself (never stored, but be exact anyway)."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b) and type(a) is type(b)


@pytest.fixture(scope="module")
def tmp() -> Path:
    """One scratch folder for the module (a store root and manifest folders)."""
    return Path(tempfile.mkdtemp(prefix="fuzz_configs_"))


def test_fuzz_config_structures(tmp: Path) -> None:
    @fuzz_settings(400 * EXAMPLES)
    @given(st.dictionaries(_KEY, JSONISH, max_size=5) | JSONISH)
    def run(data: Any) -> None:
        check(data, ORIGIN, tmp)

    run()


def _mutate_toml(text: str, draw: st.DrawFn) -> bytes:
    """One hostile change to a real config's text."""
    lines = text.splitlines()
    kind = draw(st.integers(0, 4))
    if kind == 0:  # a key's value replaced by a hostile literal
        keyed = [i for i, line in enumerate(lines) if "=" in line and not line.startswith("#")]
        i = draw(st.sampled_from(keyed))
        lines[i] = lines[i].split("=", 1)[0] + "= " + draw(st.sampled_from(TOML_VALUES))
    elif kind == 1:  # a line dropped
        del lines[draw(st.integers(0, len(lines) - 1))]
    elif kind == 2:  # a line duplicated (duplicate keys or tables)
        i = draw(st.integers(0, len(lines) - 1))
        lines.insert(i, lines[i])
    raw = ("\n".join(lines) + "\n").encode()
    if kind == 3:  # cut anywhere
        raw = raw[: draw(st.integers(0, len(raw)))]
    elif kind == 4:  # one byte flipped
        i = draw(st.integers(0, len(raw) - 1))
        raw = raw[:i] + bytes([raw[i] ^ draw(st.integers(1, 255))]) + raw[i + 1 :]
    return raw


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_fuzz_mutated_shipped_configs(path: Path, tmp: Path) -> None:
    text = path.read_text()
    check(load_config_bytes(text.encode(), path.name, json_format=False), path.name, tmp)

    @fuzz_settings(60 * EXAMPLES)
    @given(st.data())
    def run(data: st.DataObject) -> None:
        raw = _mutate_toml(text, data.draw)
        try:
            parsed = load_config_bytes(raw, path.name, json_format=False)
        except ConfigError as exc:
            assert str(exc).startswith(path.name)
            return
        check(parsed, path.name, tmp)

    run()


def test_fuzz_manifests_on_disk(tmp: Path) -> None:
    """Structures written as ``manifest.json`` and read back by ``read_manifest``."""
    folder = tmp / "run"
    folder.mkdir(exist_ok=True)
    manifest = folder / "manifest.json"

    @fuzz_settings(200 * EXAMPLES)
    @given(JSONISH, st.booleans())
    def run(config: Any, wrap: bool) -> None:
        body = {"config": config, "synthetic": False} if wrap else config
        manifest.write_text(json.dumps(body, allow_nan=True))
        try:
            found = rc.read_manifest(folder)
        except ConfigError as exc:
            assert str(exc).startswith(str(manifest)), exc
            return
        if found is not None:
            check(found[0], str(manifest), tmp)

    run()
