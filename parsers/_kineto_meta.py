"""Kineto trace metadata: top-level keys, rank resolution, and name normalisation tables.

The top-level keys of a Kineto trace (``distributedInfo``, ``baseTimeNanoseconds``,
``schemaVersion``, ...) are small, but they can sit on either side of the (huge)
``traceEvents`` array: Kineto writes the header before the events and
``baseTimeNanoseconds``/``traceName``/``displayTimeUnit`` after them at finalize. They are
read without parsing the events:

* :func:`read_header` scans the top-level object linearly (:class:`ValueScanner`), decodes
  each key's value on its own (:func:`lenient_loads`) and stops at the ``traceEvents``
  array (only header bytes are ever read);
* :func:`read_trailer` looks at the last few MiB of the decompressed stream (a seek for plain
  files, a decompress-only pass for compressed ones) and decodes the keys after the closing
  ``]`` of ``traceEvents``.
"""

from __future__ import annotations

import io
import json
import logging
import lzma
import re
import zlib
from collections import deque
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, BinaryIO

import ijson
import zstandard

from commscope.parsers._io import MAX_DECOMPRESSED_BYTES, MAX_RATIO, Source
from commscope.parsers.registry import ParseError

try:  # the C backend is ~10x faster; fall back to whatever ijson picked.
    import ijson.backends.yajl2_c as _ijson_backend
except ImportError:  # pragma: no cover - depends on the installed wheel
    _ijson_backend = ijson  # type: ignore[assignment]

log = logging.getLogger(__name__)

IJSON = _ijson_backend
"""The ijson backend used by the Kineto parser (yajl2_c when available)."""

TAIL_BYTES = 1024 * 1024
"""Bytes at the end of the stream searched first for keys written after ``traceEvents``."""

TAIL_BYTES_MAX = 16 * 1024 * 1024
"""Second, larger look when the trailing keys (e.g. a long ``INFO`` log) exceed the first."""

_READ_ERRORS: tuple[type[BaseException], ...] = (
    OSError,
    EOFError,
    zlib.error,
    lzma.LZMAError,
    zstandard.ZstdError,
)
"""What a truncated or corrupt compressed stream raises while reading."""

# --------------------------------------------------------------------------------------------
# A gzip reader that keeps everything before a truncation


class TolerantGzip(io.RawIOBase):
    """Raw gzip decompression that ends cleanly (``truncated = True``) at a cut stream.

    ``gzip.GzipFile`` raises ``EOFError`` at a stream without its end marker, and a buffered
    read that hits it drops the bytes it had already decompressed in that call (up to a whole
    buffer of events). A killed job's ``.json.gz`` is exactly that, so this reader returns
    every decompressible byte and then reports EOF, leaving the JSON parser to find the cut.
    Multi-member files are followed; the same decompression bounds as ``commscope.parsers._io`` apply.
    """

    _IN = 1 << 20
    _OUT = 4 << 20

    def __init__(self, path: Path) -> None:
        self._path = path
        self._fh = path.open("rb")
        self._d = zlib.decompressobj(31)
        self._pending = b""
        self._done = False
        self._out = 0
        size = path.stat().st_size
        self._limit = min(MAX_DECOMPRESSED_BYTES, size * MAX_RATIO + 64 * 1024**2)
        self.truncated = False

    def readable(self) -> bool:
        return True

    def _more(self) -> bytes:
        while True:
            if self._d.unconsumed_tail:
                src = self._d.unconsumed_tail
            elif self._d.eof:
                src = self._d.unused_data or self._fh.read(self._IN)
                if not src.strip(b"\x00"):
                    return b""  # clean end (trailing zero padding allowed)
                self._d = zlib.decompressobj(31)
            else:
                src = self._fh.read(self._IN)
                if not src:
                    self.truncated = True
                    return b""
            out = self._d.decompress(src, self._OUT)
            if out:
                self._out += len(out)
                if self._out > self._limit:
                    raise ParseError(
                        self._path,
                        f"decompressed size exceeds the bound of {self._limit} bytes "
                        "(possible decompression bomb)",
                    )
                return out

    def readinto(self, b: bytearray | memoryview) -> int:  # type: ignore[override]
        if not self._pending and not self._done:
            self._pending = self._more()
            self._done = not self._pending
        n = min(len(b), len(self._pending))
        b[:n] = self._pending[:n]
        self._pending = self._pending[n:]
        return n

    def close(self) -> None:
        self._fh.close()
        super().close()


def open_stream(source: Source) -> tuple[BinaryIO, TolerantGzip | None]:
    """Open the decompressed stream; gzip through :class:`TolerantGzip` (returned too)."""
    if source.compression == "gzip" and not source.start_offset:
        raw = TolerantGzip(source.path)
        return io.BufferedReader(raw, 1024 * 1024), raw  # type: ignore[return-value]
    return source.open(), None


# --------------------------------------------------------------------------------------------
# Normalisation tables
# --------------------------------------------------------------------------------------------

DTYPES: dict[str, tuple[str, int | None]] = {
    # c10 ScalarType names (record_param_comms "dtype")
    "float": ("float32", 4),
    "half": ("float16", 2),
    "bfloat16": ("bfloat16", 2),
    "long": ("int64", 8),
    "int": ("int32", 4),
    "short": ("int16", 2),
    "byte": ("uint8", 1),
    "char": ("int8", 1),
    "double": ("float64", 8),
    "bool": ("bool", 1),
    "complexhalf": ("complex32", 4),
    "complexfloat": ("complex64", 8),
    "complexdouble": ("complex128", 16),
    "float8_e4m3fn": ("float8_e4m3fn", 1),
    "float8_e5m2": ("float8_e5m2", 1),
    "float8_e4m3fnuz": ("float8_e4m3fnuz", 1),
    "float8_e5m2fnuz": ("float8_e5m2fnuz", 1),
    "float8_e8m0fnu": ("float8_e8m0fnu", 1),
    "uint16": ("uint16", 2),
    "uint32": ("uint32", 4),
    "uint64": ("uint64", 8),
    # C++ type names (profiler "Input type" with record_shapes)
    "c10::half": ("float16", 2),
    "c10::bfloat16": ("bfloat16", 2),
    "c10::float8_e4m3fn": ("float8_e4m3fn", 1),
    "c10::float8_e5m2": ("float8_e5m2", 1),
    "long int": ("int64", 8),
    "int64_t": ("int64", 8),
    "short int": ("int16", 2),
    "unsigned char": ("uint8", 1),
    "signed char": ("int8", 1),
    "c10::complex<float>": ("complex64", 8),
    "c10::complex<double>": ("complex128", 16),
    # already-canonical names
    "float32": ("float32", 4),
    "float16": ("float16", 2),
    "float64": ("float64", 8),
    "int64": ("int64", 8),
    "int32": ("int32", 4),
    "int16": ("int16", 2),
    "int8": ("int8", 1),
    "uint8": ("uint8", 1),
}
"""Lower-cased source dtype name → (canonical name, element size in bytes)."""


def norm_dtype(raw: Any) -> tuple[str | None, int | None]:
    """Map a Kineto dtype name to (canonical dtype, element bytes); unknown sizes are None."""
    if not isinstance(raw, str) or not raw or len(raw) > 256:
        return None, None  # (a longer "dtype" is no dtype: bounds the cache below)
    return _norm_dtype_name(raw)


@lru_cache(maxsize=1024)
def _norm_dtype_name(raw: str) -> tuple[str | None, int | None]:
    """:func:`norm_dtype` of a non-empty string; cached since every collective repeats it."""
    key = raw.lower()
    return DTYPES.get(key) or (key, None)


_OPS: dict[str, str | None] = {
    "allreduce": "all_reduce",
    "all_reduce": "all_reduce",
    "allreduce_coalesced": "all_reduce",
    "allreduce_sparse": "all_reduce",
    "all_reduce_coalesced": "all_reduce",
    "allgather": "all_gather",
    "all_gather": "all_gather",
    "_allgather_base": "all_gather",
    "_all_gather_base": "all_gather",
    "allgather_base": "all_gather",
    "allgather_coalesced": "all_gather",
    "allgather_into_tensor_coalesced": "all_gather",
    "all_gather_into_tensor": "all_gather",
    "all_gather_into_tensor_coalesced": "all_gather",
    "reduce_scatter": "reduce_scatter",
    "_reduce_scatter_base": "reduce_scatter",
    "reduce_scatter_base": "reduce_scatter",
    "reduce_scatter_tensor": "reduce_scatter",
    "reduce_scatter_tensor_coalesced": "reduce_scatter",
    "alltoall": "all_to_all",
    "alltoall_base": "all_to_all",
    "all_to_all": "all_to_all",
    "all_to_allv": "all_to_all",
    "alltoallv": "all_to_all",
    "all_to_all_single": "all_to_all",
    "broadcast": "broadcast",
    "broadcast_coalesced": "broadcast",
    "reduce": "reduce",
    "send": "send",
    "recv": "recv",
    "recvanysource": "recv",
    "recv_any_source": "recv",
    "gather": "gather",
    "scatter": "scatter",
    "barrier": "barrier",
    "monitored_barrier": "barrier",
    "coalesced": "other",
    "wait": None,
}
"""Lower-cased collective name → canonical ``comm_ops.op``; None = not a transfer (skip)."""

CANONICAL_OPS = frozenset(
    {
        "all_reduce",
        "all_gather",
        "reduce_scatter",
        "broadcast",
        "reduce",
        "all_to_all",
        "send",
        "recv",
        "barrier",
        "gather",
        "scatter",
        "other",
    }
)
"""Values ``comm_ops.op`` may take."""


@lru_cache(maxsize=4096)
def norm_op(raw: str) -> str | None:
    """Normalise a collective name (``record_param_comms`` or ``nccl:*``) to ``comm_ops.op``.

    Returns None for ``wait`` (a completion wait, not a transfer); names not in the table
    map to ``other``. Cached (bounded): a trace repeats a handful of names per collective.
    """
    key = raw.strip().lower()
    if key in _OPS:
        return _OPS[key]
    key = key.lstrip("_")
    return _OPS.get(key, "other")


ROOTED_OPS = frozenset({"broadcast", "reduce", "gather", "scatter"})
"""Ops whose ``record_param_comms`` ``Rank`` argument is the root, not the caller."""

P2P_OPS = frozenset({"send", "recv"})

BACKEND_PREFIXES: tuple[str, ...] = ("nccl:", "gloo:", "rccl:", "ucc:", "mpi:", "xccl:", "hccl:")
"""Prefixes of the per-collective ``record_function`` ranges of c10d process groups."""

STEP_RE = re.compile(r"^ProfilerStep\s*#\s*(\d+)")
"""HTA's iteration marker regex."""

_RANK_RE = re.compile(r"(?:^|[^a-z])(?:rank|worker)[-_]?(\d+)(?!\d)", re.IGNORECASE)


def rank_from_path(path: Path) -> int | None:
    """Rank written in a trace file name (``rank-3``, ``rank_3``, ``rank3``, ``worker3``).

    The file name is tried first, then its parent directory's name.
    """
    for part in (path.name, path.parent.name):
        m = _RANK_RE.search(part)
        if m:
            return int(m.group(1))
    return None


# --------------------------------------------------------------------------------------------
# Reading the top-level keys
# --------------------------------------------------------------------------------------------


@dataclass
class Header:
    """What the top level of a trace says, and where its events are.

    Attributes:
        form: ``object`` (``{"traceEvents": [...]}``) or ``array`` (2020-21 bare array).
        keys: top-level keys other than ``traceEvents`` (header and trailer merged).
        has_events: whether a ``traceEvents`` array was found (object form).
        trailer_read: whether the keys after ``traceEvents`` could be decoded.
        events_offset: stream offset of the first byte after the ``[`` of ``traceEvents``.
        notes: header keys skipped or with values read as null, and why (warnings).
    """

    form: str
    keys: dict[str, Any] = field(default_factory=dict)
    has_events: bool = True
    trailer_read: bool = False
    events_offset: int | None = None
    notes: list[str] = field(default_factory=list)


def _first_byte(fh: BinaryIO) -> bytes:
    head = fh.read(4096)
    stripped = head.lstrip(b" \t\r\n\xef\xbb\xbf")
    return stripped[:1]


# --------------------------------------------------------------------------------------------
# Lenient values and a linear JSON value scanner

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1

MAX_HEADER_VALUE = 16 * 1024 * 1024
"""Largest top-level header value decoded (bytes); a larger one is skipped with a warning."""

_STR_BODY = re.compile(rb'[^"\\]*+(?:\\.[^"\\]*+)*+', re.S)
"""The body of a JSON string up to its closing quote (or a cut escape): linear, no backtracking."""
_STRUCT = re.compile(rb'[\[\]{}"]')
_SCALAR_END = re.compile(rb"[ \t\r\n,\]}]")
_JSON_WS = b" \t\r\n"


class ValueScanner:
    """Where one JSON value ends, fed block by block (resumable; no value is built).

    Strings are crossed by one regex match (:data:`_STR_BODY`), structure by a search for the
    next bracket or quote, so a value of any size costs one linear pass at C speed; this is
    what lets an oversized event or header field be skipped without parsing it. The value is
    not validated: only brackets outside strings are counted.
    """

    def __init__(self) -> None:
        self.depth = 0
        self.in_str = False
        self.esc = False
        self.started = False
        self.scalar = False

    def feed(self, buf: bytes | bytearray, start: int = 0) -> int | None:
        """Offset in ``buf`` just past the value's end, or None when it goes on past ``buf``."""
        i, n = start, len(buf)
        if not self.started:
            while i < n and buf[i] in _JSON_WS:
                i += 1
            if i == n:
                return None
            self.started = True
            c = buf[i]
            if c in b"{[":
                self.depth, i = 1, i + 1
            elif c == 0x22:
                self.in_str, i = True, i + 1
            else:
                self.scalar = True
        if self.scalar:
            m = _SCALAR_END.search(buf, i)
            return m.start() if m else None
        while True:
            if self.esc:
                if i >= n:
                    return None
                i, self.esc = i + 1, False
            if self.in_str:
                i = _STR_BODY.match(buf, i).end()  # type: ignore[union-attr]
                if i >= n:
                    return None
                if buf[i] == 0x5C:  # a backslash cut by the block end
                    self.esc, i = True, i + 1
                    continue
                self.in_str, i = False, i + 1
                if self.depth == 0:
                    return i
                continue
            m = _STRUCT.search(buf, i)
            if m is None:
                return None
            i = m.end()
            c = buf[i - 1]
            if c == 0x22:
                self.in_str = True
            elif c == 0x7B or c == 0x5B:
                self.depth += 1
            else:
                self.depth -= 1
                if self.depth == 0:
                    return i


class _Nulls:
    """Counts the numbers :func:`lenient_loads` read as null."""

    def __init__(self) -> None:
        self.count = 0

    def const(self, _s: str) -> None:
        self.count += 1

    def int(self, s: str) -> int | None:
        if len(s) <= 18:
            return int(s)
        v = int(s) if len(s) <= 25 else None
        if v is None or not INT64_MIN <= v <= INT64_MAX:
            self.count += 1
            return None
        return v

    def float(self, s: str) -> float | None:
        v = float(s)
        if v - v != 0.0:  # inf (1e400) or nan
            self.count += 1
            return None
        return v


def lenient_loads(data: bytes | bytearray) -> tuple[Any, int]:
    """Decode JSON that strict readers refuse for one bad value, and count those values.

    ``NaN``, ``Infinity``, ``-Infinity``, floats that overflow (``1e400``) and integers outside
    int64 become None; invalid UTF-8 is replaced (U+FFFD). Returns (value, nulled numbers).

    Raises:
        ValueError: the text is not JSON even so (also for nesting too deep to decode).
    """
    nulls = _Nulls()
    text = bytes(data).decode("utf-8", errors="replace")
    try:
        value = json.loads(
            text, parse_constant=nulls.const, parse_int=nulls.int, parse_float=nulls.float
        )
    except RecursionError as exc:
        raise ValueError("JSON nested too deeply") from exc
    return value, nulls.count


class _HeaderStream:
    """The decompressed stream read in blocks, with a cursor (for :func:`read_header`)."""

    BLOCK = 1024 * 1024

    def __init__(self, fh: BinaryIO) -> None:
        self.fh = fh
        self.buf = b""
        self.base = 0  # stream offset of buf[0]
        self.i = 0  # cursor in buf
        self.eof = False

    def _more(self) -> bool:
        if self.eof:
            return False
        data = self.fh.read(self.BLOCK)
        if not data:
            self.eof = True
            return False
        self.base += self.i
        self.buf = self.buf[self.i :] + data
        self.i = 0
        return True

    def peek(self) -> int | None:
        """The next non-whitespace byte (cursor moved to it), None at the end."""
        while True:
            while self.i < len(self.buf) and self.buf[self.i] in _JSON_WS:
                self.i += 1
            if self.i < len(self.buf):
                return self.buf[self.i]
            if not self._more():
                return None

    def value(self, limit: int) -> tuple[bytes | None, int]:
        """The value at the cursor: (its bytes, or None if over ``limit`` or cut; its size)."""
        scan = ValueScanner()
        start = self.i
        kept: list[bytes] = []
        size = 0
        while True:
            end = scan.feed(self.buf, self.i)
            if end is not None:
                size += end - start
                piece = self.buf[start:end]
                self.i = end
                return (b"".join(kept) + piece if size <= limit else None), size
            size += len(self.buf) - start
            if size <= limit:
                kept.append(self.buf[start:])
            else:
                kept = []
            self.i = len(self.buf)
            if not self._more():
                return None, size
            start = self.i


def read_header(source: Source) -> Header:
    """Read the form and the top-level keys before ``traceEvents``.

    A linear scan (:class:`ValueScanner`), not a JSON token stream: each top-level value is
    decoded on its own by :func:`lenient_loads`, so one out-of-range number costs that number
    (null), a value larger than :data:`MAX_HEADER_VALUE` or one that does not decode costs
    that key (both with a note in ``Header.notes``), and a huge string is crossed at C speed.
    ``Header.events_offset`` is the stream offset just past the ``[`` of ``traceEvents``.

    Raises:
        ParseError: the stream is not JSON (first byte neither ``{`` nor ``[``) or cannot be
            read at all.
    """
    try:
        fh, _ = open_stream(source)
        with fh:
            first = _first_byte(fh)
    except _READ_ERRORS as exc:
        raise ParseError(source.path, f"cannot read: {exc}") from exc
    if first == b"[":
        return Header("array")
    if first != b"{":
        raise ParseError(source.path, "not a Chrome/Kineto JSON trace (no leading '{' or '[')")
    header = Header("object", has_events=False)
    try:
        fh, _ = open_stream(source)
        with fh:
            _read_keys(_HeaderStream(fh), header)
    except _READ_ERRORS as exc:
        # A header cut short: keep what was read; the event pass reports the truncation.
        log.debug("%s: header read stopped: %s", source.path, exc)
    return header


def _read_keys(hs: _HeaderStream, header: Header) -> None:
    """Fill ``header`` from the top-level object up to ``traceEvents`` (see read_header)."""
    hs.peek()
    if hs.buf[hs.i : hs.i + 3] == b"\xef\xbb\xbf":
        hs.i += 3
    if hs.peek() != 0x7B:
        return
    hs.i += 1
    while True:
        c = hs.peek()
        if c == 0x7D or c != 0x22:  # "}" (no traceEvents) or malformed
            return
        raw_key, _ = hs.value(64 * 1024)
        if raw_key is None:
            return
        try:
            key, _ = lenient_loads(raw_key)
        except ValueError:
            return
        if hs.peek() != 0x3A:  # ":"
            return
        hs.i += 1
        c = hs.peek()
        if c is None:
            return
        if key == "traceEvents" and c == 0x5B:
            header.has_events = True
            header.events_offset = hs.base + hs.i + 1
            return
        raw, size = hs.value(MAX_HEADER_VALUE)
        if raw is None:
            if hs.eof and hs.i >= len(hs.buf):
                return
            header.notes.append(
                f"header key {str(key)[:80]!r} skipped: its value of {size} bytes exceeds "
                f"the limit of {MAX_HEADER_VALUE} bytes"
            )
        elif key != "traceEvents":
            try:
                value, nulled = lenient_loads(raw)
            except ValueError as exc:
                header.notes.append(f"header key {str(key)[:80]!r} skipped: {exc}")
            else:
                header.keys[key] = value
                if nulled:
                    header.notes.append(
                        f"header key {str(key)[:80]!r}: {nulled} number(s) out of range "
                        "(NaN, Infinity or beyond int64/float64) read as null"
                    )
        c = hs.peek()
        if c != 0x2C:  # ","
            return
        hs.i += 1


def _tail_bytes(source: Source, n: int) -> bytes:
    """The last ``n`` decompressed bytes (empty on a stream that cannot be read)."""
    if source.compression is None:
        with source.path.open("rb") as fh:
            size = source.path.stat().st_size
            fh.seek(max(0, size - n))
            return fh.read()
    blocks: deque[bytes] = deque()
    kept = 0
    try:
        fh, _ = open_stream(source)
        with fh:
            while True:
                data = fh.read(1024 * 1024)
                if not data:
                    break
                blocks.append(data)
                kept += len(data)
                while kept - len(blocks[0]) >= n:
                    kept -= len(blocks.popleft())
    except _READ_ERRORS:
        pass  # truncated compressed stream: whatever was decompressed is the tail
    return b"".join(blocks)[-n:]


def decode_trailer(tail: str) -> dict[str, Any] | None:
    """Decode the keys written after the ``traceEvents`` array from the end of a trace.

    Every ``]`` after the last event (the last ``"ph"``) is a candidate end of
    ``traceEvents``; the text after it must read as ``, "key": value, ... }`` to the end of the
    file. The candidate furthest back that decodes wins (a ``]`` inside a trailing value also
    leaves a valid but shorter suffix).

    Returns:
        The trailing keys (possibly empty), or None if no candidate decodes (e.g. a file cut
        inside ``traceEvents``).
    """
    last_ph = tail.rfind('"ph"')
    start = max(last_ph, 0)
    best: dict[str, Any] | None = None
    pos = len(tail)
    for _ in range(256):
        pos = tail.rfind("]", start, pos)
        if pos < 0:
            break
        rest = tail[pos + 1 :].strip()
        if rest == "}":
            if best is None:
                best = {}
        elif rest.startswith(","):
            try:
                obj = json.loads("{" + rest[1:])
            except ValueError:
                continue
            if isinstance(obj, dict):
                best = obj
    return best


def read_trailer(source: Source, header: Header) -> None:
    """Merge the keys written after ``traceEvents`` into ``header.keys`` (in place)."""
    if header.form != "object" or not header.has_events:
        return
    # A compressed stream must be decompressed to its end to see the tail: do it once.
    plain = source.compression is None
    raw = _tail_bytes(source, TAIL_BYTES if plain else TAIL_BYTES_MAX)
    trailer = decode_trailer(raw[-TAIL_BYTES:].decode("utf-8", errors="replace"))
    if trailer is None and len(raw) >= TAIL_BYTES:
        if plain:
            raw = _tail_bytes(source, TAIL_BYTES_MAX)
        trailer = decode_trailer(raw.decode("utf-8", errors="replace"))
    del raw
    if trailer is None:
        return
    header.trailer_read = True
    for key, value in trailer.items():
        header.keys.setdefault(key, value)


def needs_trailer(header: Header) -> bool:
    """True when a key the parser needs may still come after ``traceEvents``."""
    return header.form == "object" and not (
        "baseTimeNanoseconds" in header.keys and "distributedInfo" in header.keys
    )


def parse_ranks(raw: Any) -> list[int] | None:
    """Process-group ranks from ``pg_config`` (a list, or a string ``"[0, 1, 2]"``)."""
    if isinstance(raw, list):
        try:
            ranks = [int(r) for r in raw]
        except (TypeError, ValueError, OverflowError):
            return None
    elif isinstance(raw, str):
        ranks = [int(x) for x in re.findall(r"-?\d{1,19}(?!\d)", raw)]
    else:
        return None
    # A rank outside int32 is no rank (one corrupt entry costs this list, not the file).
    return ranks if all(-(2**31) <= r < 2**31 for r in ranks) else None
