"""Kineto ``traceEvents`` items, decoded in chunks with msgspec; ijson where msgspec cannot.

Building a Python dict per event (ijson ``items``) was most of a Kineto parse. Here the events
array is read in pieces of :data:`PIECE_BYTES` and each piece is decoded by msgspec into
:class:`Ev` structs that keep only the fields the parser reads; every other key is skipped
without building an object. Memory stays bounded by the piece size, whatever the trace size
(small pieces also decode faster: they stay in the CPU caches).

Pieces are cut at a candidate event boundary, a ``}`` followed by ``,`` and ``{`` (or by the
``]`` that closes the array), JSON whitespace allowed between. A candidate inside a string or
inside a nested value leaves the piece unbalanced, so it does not decode; the previous
candidate is tried then. A piece that decodes is therefore a run of whole top-level items.

The result must be what the ijson (yajl2_c) reader gives, so whatever the two decoders may
treat differently is left to ijson:

* yajl rejects integers outside int64 and floats that overflow to infinity, and invalid
  UTF-8, also in keys msgspec skips without looking. A piece with a run of 19 digits, an
  exponent of 3 digits or non-ASCII bytes that are not valid UTF-8 is parsed by ijson too:
  its items are used if ijson reads it, else ijson takes over (below).
* Where no candidate decodes (a truncated or malformed trace, a piece msgspec rejects, a
  single event larger than :data:`MAX_WINDOW`), ijson reads the rest of the stream. It
  restarts at a piece start (behind a synthetic ``{"traceEvents":[`` or ``[``, so that its
  parser state is that of a read from the start) at or before the first byte of the stream
  read that holds the last good offset, and the items up to that offset, already yielded,
  are skipped. The stream is read in ijson's own 64 KiB ``readinto`` calls and replayed to
  ijson in the same slices, so the events it yields, a read error and the error it raises,
  context included (yajl quotes the bytes around the error in the current read), are those
  of a read from the start.
* The keys after the array (and any repeated ``traceEvents`` key) go through ijson the same
  way, from the ``]`` that closes the array.

Items that are not objects decode to their JSON value. A reject keeps the event as ijson
reads it (:func:`raw_items`), so ``rejects.raw`` is unchanged too.

What neither reader accepts no longer ends the trace (issue 23):

* a piece holding a number msgspec or ijson refuses (``NaN``, ``Infinity``, ``1e400``,
  integers beyond int64, invalid UTF-8) is decoded item by item with
  :func:`commscope.parsers._kineto_meta.lenient_loads`: the bad number is null in its event only
  (``EventReader.nulled``). ijson then never restarts before such a piece.
* an event larger than :data:`MAX_EVENT_BYTES` is crossed by a linear scan
  (:class:`commscope.parsers._kineto_meta.ValueScanner`) without being decoded or held, and yielded as
  an :class:`Oversized` stand-in that the parser rejects with the reason. ijson's cost grows
  with the square of a string's length, so it never sees such an event.
* the object form's header is read by :func:`commscope.parsers._kineto_meta.read_header`, which gives
  the offset of the events; the reader starts there (:meth:`EventReader._seek`), so ijson
  never re-reads the header either.
"""

from __future__ import annotations

import bisect
import io
import re
from collections.abc import Callable, Iterator
from typing import Any, BinaryIO

import ijson
import msgspec

from commscope.parsers._kineto_meta import IJSON, ValueScanner, lenient_loads


class Args(msgspec.Struct, gc=False):
    """The ``args`` keys the Kineto parser reads; any other key is skipped.

    ``pg_name`` defaults to ``UNSET``: a comm kernel's ``Process Group Name`` that is
    present but null must not fall back to ``Process Group ID``.
    """

    device: Any = None
    stream: Any = None
    correlation: Any = None
    nbytes: Any = msgspec.field(default=None, name="bytes")
    collective: Any = msgspec.field(default=None, name="Collective name")
    in_nelems: Any = msgspec.field(default=None, name="In msg nelems")
    out_nelems: Any = msgspec.field(default=None, name="Out msg nelems")
    in_split: Any = msgspec.field(default=None, name="In split size")
    out_split: Any = msgspec.field(default=None, name="Out split size")
    dtype: Any = None
    external_id: Any = msgspec.field(default=None, name="External id")
    seq: Any = msgspec.field(default=None, name="Seq")
    pg_name: Any = msgspec.field(default=msgspec.UNSET, name="Process Group Name")
    pg_id: Any = msgspec.field(default=None, name="Process Group ID")
    group_size: Any = msgspec.field(default=None, name="Group size")
    rank: Any = msgspec.field(default=None, name="Rank")
    dst_rank: Any = msgspec.field(default=None, name="Dst Rank")
    src_rank: Any = msgspec.field(default=None, name="Src Rank")
    input_dims: Any = msgspec.field(default=None, name="Input Dims")
    input_type: Any = msgspec.field(default=None, name="Input type")
    concrete_inputs: Any = msgspec.field(default=None, name="Concrete Inputs")


NO_ARGS = Args()
"""Stand-in for a missing or non-object ``args`` (only read, never mutated)."""


class Ev(msgspec.Struct, gc=False):
    """One event object: the keys the parser reads (missing → None), others skipped."""

    ph: Any = None
    cat: Any = None
    name: Any = None
    pid: Any = None
    tid: Any = None
    ts: Any = None
    dur: Any = None
    args: Args | list[Any] | str | int | float | bool | None = None


Item = Ev | list[Any] | str | int | float | bool | None
"""An item of the events array: an :class:`Ev` for an object, else the JSON value
(or an :class:`Oversized` stand-in, made by the reader, never decoded)."""

Batch = tuple[list[Any], Callable[[int], Any]]
"""Decoded items, and a function giving item ``i`` as ijson reads it (for rejects)."""

READ_SIZE = 64 * 1024
"""Bytes per ``readinto`` call: ijson's buffer size, so reads fall where they always did."""

PIECE_BYTES = 128 * 1024
"""Target size of a decoded piece."""

MAX_WINDOW = 64 * 1024 * 1024
"""Largest piece searched for a boundary before ijson takes over (one huge event)."""

MAX_TRIES = 8
"""Candidate boundaries tried per piece before ijson takes over."""

MAX_EVENT_BYTES = 8 * 1024 * 1024
"""Largest event decoded. A larger one is skipped by a linear scan (:class:`ValueScanner`) and
yielded as an :class:`Oversized` item, which the parser rejects with the reason: ijson's time
grows with the square of a string's length (300 MB took minutes), msgspec's memory with it."""

SKIP_BLOCK = 1024 * 1024
"""Bytes read per step while skipping an oversized event."""


class Oversized(msgspec.Struct, gc=False):
    """Stands for an event larger than :data:`MAX_EVENT_BYTES`, skipped without decoding."""

    size: int
    head: str


_DECODER = msgspec.json.Decoder(list[Item])
_SEP = re.compile(rb"\}[ \t\r\n]*,[ \t\r\n]*\{")
_END = re.compile(rb"\}[ \t\r\n]*\]")
_OBJECT_START = re.compile(rb'"traceEvents"[ \t\r\n]*:[ \t\r\n]*\[')
_ARRAY_START = re.compile(rb"[ \t\r\n]*\[")
_WS = b" \t\r\n"

# Number shapes yajl may reject: digits → "0", e/E/+/- → "e", "." kept, all else " ".
_DIGITS = frozenset(b"0123456789")
_NUM_TABLE = bytes(
    48 if c in _DIGITS else 101 if c in b"eE+-" else 46 if c == 46 else 32 for c in range(256)
)
_LONG_INT = b"0" * 19  # an integer this long may be outside int64 (or a float overflow)
_EXPONENT = re.compile(b"e000")  # an exponent of 3 digits may overflow a double (a literal
# pattern: re's prefix search beats bytes.find on digit-dense text here)


def _value_at(chunk: bytearray, start: int) -> bool:
    """Whether a token starting at ``chunk[start]`` sits where a JSON value can (not in a string
    such as ``"0x7f0e87107"``): the byte before it, past whitespace, is ``:``, ``,`` or ``[``."""
    j = start - 1
    while chunk[j] in _WS:
        j -= 1
    return chunk[j] in b":,["


def _odd_numbers(chunk: bytearray) -> bool:
    """Whether ``chunk`` may hold a number yajl rejects (a superset: strings can match)."""
    shape = chunk.translate(_NUM_TABLE)
    i = shape.find(_LONG_INT)
    while i >= 0:
        c = chunk[i - 1]
        if c not in b".0123456789" and _value_at(chunk, i - 1 if c == 45 else i):
            return True  # an integer part of 19 digits or more
        i = shape.find(_LONG_INT, i + 1)
    m = _EXPONENT.search(shape)
    while m is not None:
        i = m.start()
        e = i if chunk[i] in b"eE" else i - 1  # the "e" of "e308", "e+308" or "e-308"
        if chunk[e] in b"eE" and chunk[e - 1] in _DIGITS:
            j = e - 1
            while chunk[j] in b".0123456789":
                j -= 1
            if _value_at(chunk, j if chunk[j] == 45 else j + 1):
                return True  # an exponent of 3 digits or more
        m = _EXPONENT.search(shape, i + 1)
    return False


def _suspect(chunk: bytearray) -> bool:
    """Whether ijson might read ``chunk`` differently from msgspec (see the module doc)."""
    if not chunk.isascii():
        try:
            chunk.decode("utf-8")
        except UnicodeDecodeError:
            return True
    return _odd_numbers(chunk)


def raw_items(chunk: bytes | bytearray) -> list[Any]:
    """The items of the JSON array ``chunk`` as ijson reads them (raises its errors)."""
    return list(IJSON.items(io.BytesIO(chunk), "item", use_float=True))


def _lazy_raw(chunk: bytearray) -> Callable[[int], Any]:
    """``raw(i)``: item ``i`` of ``chunk`` as ijson reads it, parsed on first use."""
    cache: list[list[Any]] = []

    def raw(i: int) -> Any:
        if not cache:
            cache.append(raw_items(chunk))
        return cache[0][i]

    return raw


def _last_event(prefix: bytes) -> tuple[str, str, Any] | None:
    """The last ``ijson.parse`` event of a document's ``prefix`` (it ends with an error)."""
    events = IJSON.parse(io.BytesIO(prefix), use_float=True)
    last = None
    while True:
        try:
            last = next(events)
        except Exception:  # StopIteration, or the error at the end of the prefix
            return last


class _Replay(io.RawIOBase):
    """A synthetic prefix, then buffered stream slices, then the rest of the stream.

    Every slice is returned by its own ``readinto`` call, cut where the stream's reads cut
    it, and a read error met earlier is raised after the last byte read before it.
    """

    def __init__(
        self, prefix: bytes, slices: list[bytes], fh: BinaryIO, error: Exception | None
    ) -> None:
        self._slices = [s for s in (prefix, *slices) if s]
        self._fh = fh
        self._error = error
        self._buf = bytearray(READ_SIZE)

    def readable(self) -> bool:
        return True

    def readinto(self, b: bytearray | memoryview) -> int:  # type: ignore[override]
        if not len(b):
            return 0
        if not self._slices:
            if self._error is not None:
                raise self._error
            n = self._fh.readinto(self._buf)
            if not n:
                return 0
            self._slices.append(bytes(self._buf[:n]))
        data = self._slices[0]
        n = min(len(b), len(data))
        b[:n] = data[:n]
        if n == len(data):
            del self._slices[0]
        else:
            self._slices[0] = data[n:]
        return n


class EventReader:
    """Iterate a trace's events as :data:`Batch` es (see the module doc).

    Args:
        fh: the decompressed stream, at its start.
        form: ``object`` or ``array`` (:class:`commscope.parsers._kineto_meta.Header`).
        events_offset: the stream offset just past the ``[`` of ``traceEvents`` (object
            form, from :func:`commscope.parsers._kineto_meta.read_header`); the bytes before it are
            read past, never parsed again.
        trailer_ok: the keys after ``traceEvents`` decoded leniently
            (``Header.trailer_read``): an ijson error there is then a value ijson refuses
            (``trailer_error``), not a cut file.

    After each batch, ``nulled`` maps an item's index in the batch to the count of its
    numbers read as null (:func:`commscope.parsers._kineto_meta.lenient_loads`: NaN, Infinity, beyond
    int64/float64, where ijson and msgspec would stop); ``nulled_items`` counts such items
    over the whole stream.
    """

    def __init__(
        self,
        fh: BinaryIO,
        form: str,
        events_offset: int | None = None,
        *,
        trailer_ok: bool = False,
    ) -> None:
        self._fh = fh
        self._object = form == "object"
        self._events_offset = events_offset
        self._trailer_ok = trailer_ok
        self.nulled: dict[int, int] = {}
        self.nulled_items = 0
        self.trailer_error: str | None = None
        self._buf = bytearray()
        self._base = 0  # stream offset of _buf[0]
        self._ends = [0]  # stream offsets where reads started/ended, from the one holding _base
        self._count = 0  # items yielded
        # Where ijson may restart: (stream offset, items yielded before it, synthetic prefix),
        # the first one at or before the start of the read that holds the current offset.
        self._anchors: list[tuple[int, int, bytes]] = [(0, 0, b"")]
        self._eof = False
        self._error: Exception | None = None
        self._chunk = bytearray(READ_SIZE)

    def _fill(self, size: int) -> None:
        """Read until ``_buf`` holds ``size`` bytes, the stream ends or a read fails."""
        buf, chunk = self._buf, self._chunk
        while len(buf) < size and not self._eof:
            try:
                n = self._fh.readinto(chunk)
            except Exception as exc:  # re-raised by ijson's read, after the bytes before it
                self._error = exc
                self._eof = True
                return
            if not n:
                self._eof = True
                return
            buf += memoryview(chunk)[:n]
            self._ends.append(self._base + len(buf))

    def _advance(self, pos: int, items: int, prefix: bytes) -> int:
        """Move on to ``_buf[pos]``, a piece start after ``items`` more items.

        It becomes an anchor; the bytes before the first anchor ijson may need are dropped.
        Returns ``pos`` in the buffer as it is then (at least 1: one byte is kept before it).
        """
        self._count += items
        offset = self._base + pos
        anchors = self._anchors
        anchors.append((offset, self._count, prefix))
        ends = self._ends
        read_start = ends[bisect.bisect_right(ends, offset) - 1]
        while len(anchors) > 1 and anchors[1][0] <= read_start:
            del anchors[0]
        drop = min(anchors[0][0], offset - 1) - self._base
        if drop > 0:
            del self._buf[:drop]
            self._base += drop
            while len(ends) > 1 and ends[1] <= self._base:  # keep the read holding _base
                del ends[0]
        return offset - self._base

    def _fallback(self) -> Iterator[Batch]:
        """ijson from the first anchor, replayed in the stream's slices (see the module doc)."""
        start, count, prefix = self._anchors[0]
        slices: list[bytes] = []
        for end in self._ends:
            if end > start:
                slices.append(bytes(self._buf[start - self._base : end - self._base]))
                start = end
        self._buf = bytearray()
        stream = _Replay(prefix, slices, self._fh, self._error)
        items_prefix = "traceEvents.item" if self._object else "item"
        items = IJSON.items(stream, items_prefix, use_float=True)
        for _ in zip(range(self._count - count), items, strict=False):
            pass  # yielded already, from msgspec
        convert = msgspec.convert
        for obj in items:
            yield [convert(obj, Item)], lambda _i, obj=obj: obj

    def _start(self) -> int | None:
        """Offset in ``_buf`` just after the ``[`` that opens the events (None: not found).

        The object form's header (before ``"traceEvents": [``) is read up to
        :data:`MAX_WINDOW`; a match is taken only if ijson, reading the header, ends at the
        top-level ``traceEvents`` array (not a nested key or a string).
        """
        if not self._object:
            m = _ARRAY_START.match(self._buf)
            return m.end() if m else None
        if self._events_offset is not None:
            return self._seek(self._events_offset)
        searched = 0
        while True:
            buf = bytes(self._buf)
            for m in _OBJECT_START.finditer(buf, max(0, searched - 64)):
                if _last_event(buf[: m.end()]) == ("traceEvents", "start_array", None):
                    return m.end()
            if self._eof or len(buf) >= MAX_WINDOW:
                return None
            searched = len(buf)
            self._fill(2 * len(buf))

    def _seek(self, offset: int) -> int | None:
        """Read past the stream up to ``offset`` (kept: the byte before it); its index in _buf.

        Only a block at a time is held, whatever the header's size. The read holding the
        kept byte becomes the first one, and the only restart point is ``offset`` (with the
        synthetic prefix): ijson never reads the header again.
        """
        while self._base + len(self._buf) <= offset and not self._eof:
            self._base += len(self._buf)
            self._buf = bytearray()
            self._ends = [self._base]
            self._fill(READ_SIZE)
        if self._base + len(self._buf) <= offset:
            return None
        keep = offset - 1 - self._base
        if keep > 0:
            del self._buf[:keep]
            self._base += keep
        self._ends = [self._base, self._base + len(self._buf)]
        self._anchors = [(offset, 0, b'{"traceEvents":[')]
        return offset - self._base

    def _candidates(self, pos: int) -> Iterator[tuple[int, int]]:
        """Where the piece starting at ``pos`` may end, best first.

        Yields (offset just past its last ``}``, offset of the ``{`` or ``]`` that follows).
        """
        buf = self._buf
        if self._eof:  # the ``]`` closing the array may be in the buffer: first one first
            for k, m in enumerate(_END.finditer(buf, pos)):
                if k == MAX_TRIES:
                    break
                yield m.start() + 1, m.end() - 1
        hi = len(buf)
        for _ in range(MAX_TRIES):
            j = buf.rfind(b"}", pos, hi)
            while j >= 0 and (m := _SEP.match(buf, j)) is None:
                j = buf.rfind(b"}", pos, j)
            if j < 0:
                return
            yield j + 1, m.end() - 1
            hi = j

    def _decode(self, pos: int) -> tuple[int, bytearray, list[Any]] | bool:
        """The first candidate piece from ``pos`` that decodes: (next, ``[piece]``, items).

        ``next`` is the offset of the ``{`` or ``]`` after the piece.

        False when no candidate decodes; True when there is no candidate (read further).
        """
        buf = self._buf
        tried = False
        for end, after_end in self._candidates(pos):
            tried = True
            saved = buf[pos - 1], buf[end]
            buf[pos - 1], buf[end] = 0x5B, 0x5D  # "[" piece "]", restored below
            chunk = buf[pos - 1 : end + 1]
            buf[pos - 1], buf[end] = saved
            try:
                return after_end, chunk, _DECODER.decode(chunk)
            except (msgspec.DecodeError, UnicodeDecodeError, RecursionError):
                continue
        return not tried

    def _lenient(self, chunk: bytes | bytearray) -> list[Any] | None:
        """The items of the array ``chunk`` with bad numbers read as null; None: not JSON.

        Each item is decoded on its own (boundaries by :class:`ValueScanner`), so ``nulled``
        says which items lost a value. Rare path: only pieces msgspec or ijson refuse.
        """
        objs: list[Any] = []
        nulled: dict[int, int] = {}
        i, n = 1, len(chunk) - 1  # inside "[" ... "]"
        while True:
            while i < n and chunk[i] in _WS:
                i += 1
            if i >= n:
                break
            end = ValueScanner().feed(chunk, i)
            if end is None or end > n:
                end = n  # a scalar last item runs to the closing "]"
            try:
                obj, bad = lenient_loads(chunk[i:end])
            except ValueError:
                return None
            if bad:
                nulled[len(objs)] = bad
            objs.append(obj)
            i = end
            while i < n and chunk[i] in _WS:
                i += 1
            if i < n:
                if chunk[i] != 0x2C:
                    return None
                i += 1
        self.nulled.update(nulled)
        self.nulled_items += len(nulled)
        return objs

    def _lenient_piece(self, pos: int) -> tuple[int, list[Any]] | None:
        """Like :meth:`_decode` for a piece msgspec refuses: (next, items) or None."""
        buf = self._buf
        for end, after_end in self._candidates(pos):
            objs = self._lenient(b"[" + buf[pos:end] + b"]")
            if objs is not None:
                return after_end, objs
        return None

    def _next_item(self, end: int) -> int | None:
        """Index of the item after the one ending at ``end`` (or of the closing ``]``)."""
        while True:
            buf = self._buf
            i = end
            while i < len(buf) and buf[i] in _WS:
                i += 1
            if i < len(buf) and buf[i] == 0x2C:
                j = i + 1
                while j < len(buf) and buf[j] in _WS:
                    j += 1
                if j < len(buf):
                    return j
            elif i < len(buf):
                return i if buf[i] == 0x5D else None
            if self._eof:
                return None
            self._fill(len(buf) + READ_SIZE)

    def _skip_oversized(self, pos: int) -> tuple[Oversized, int]:
        """Read past the event at ``pos`` (over :data:`MAX_EVENT_BYTES`) without decoding it.

        Returns its stand-in and the index in ``_buf`` just past it; the bytes read past are
        dropped as they are scanned (memory stays at one block).

        Raises:
            ijson.JSONError: the stream ends inside the event (a cut file: the parser's
                truncated-tail path); a read error met on the way is raised as it is.
        """
        head = bytes(self._buf[pos : pos + 200]).decode("utf-8", errors="replace")
        first = self._base + pos
        scan = ValueScanner()
        start = pos
        while (end := scan.feed(self._buf, start)) is None:
            if self._eof:
                if self._error is not None:
                    raise self._error
                raise ijson.JSONError(
                    f"the trace ends inside an event of more than {MAX_EVENT_BYTES} bytes"
                )
            keep = len(self._buf) - 1  # the last byte: _decode needs one before a piece
            self._base += keep
            del self._buf[:keep]
            self._ends = [self._base]
            start = 1
            self._fill(len(self._buf) + SKIP_BLOCK)
        self._ends = [self._base, self._base + len(self._buf)]
        self._anchors = []
        return Oversized(size=self._base + end - first, head=head), end

    def __iter__(self) -> Iterator[Batch]:
        prefix = b'{"traceEvents":[' if self._object else b"["
        self._fill(PIECE_BYTES)
        pos = self._start()
        if pos is None:  # an unusual header: ijson reads everything, as it always did
            yield from self._fallback()
            return
        pos = self._advance(pos, 0, prefix)
        want = PIECE_BYTES
        convert = msgspec.convert
        while True:
            buf = self._buf
            while pos < len(buf) and buf[pos] in _WS:
                pos += 1
            self.nulled.clear()
            if pos < len(buf) and buf[pos] == 0x5D:  # "]": the array ends; the rest to ijson
                yield from self._after_array()
                return
            found = self._decode(pos)
            if isinstance(found, bool):
                # No piece msgspec reads: a value it refuses (NaN, 1e400), an event larger
                # than the window, or a malformed or cut trace.
                lenient = self._lenient_piece(pos) if not found else None
                if lenient is not None:
                    nxt, objs = lenient
                    yield [convert(o, Item) for o in objs], objs.__getitem__
                    pos = self._advance(nxt, len(objs), prefix)
                    del self._anchors[:-1]  # ijson must never re-read what it refuses
                    want = PIECE_BYTES
                    self._fill(pos + PIECE_BYTES)
                    continue
                end = ValueScanner().feed(buf, pos)
                if (end is None and len(buf) - pos >= MAX_EVENT_BYTES) or (
                    end is not None and end - pos > MAX_EVENT_BYTES
                ):
                    big, end = self._skip_oversized(pos)
                    nxt = self._next_item(end)
                    yield [big], lambda _i, h=big.head: h
                    if nxt is None:  # no "," or "]" after it: ijson reports what it finds
                        self._advance(end, 1, prefix)
                        yield from self._fallback()
                        return
                    pos = self._advance(nxt, 1, prefix)
                    want = PIECE_BYTES
                    self._fill(pos + PIECE_BYTES)
                    continue
                if end is None:
                    if self._eof:
                        yield from self._fallback()
                        return
                    want *= 2  # one event larger than the window: look further
                    self._fill(pos + want)
                    continue
                nxt = self._next_item(end)
                one = self._lenient(b"[" + self._buf[pos:end] + b"]") if nxt is not None else None
                if one is None:  # malformed: ijson reads from here and reports it
                    yield from self._fallback()
                    return
                yield [convert(o, Item) for o in one], one.__getitem__
                pos = self._advance(nxt, len(one), prefix)
                del self._anchors[:-1]
                continue
            pos, chunk, items = found
            relaxed: list[Any] | None = None
            if _suspect(chunk):
                try:
                    objs = raw_items(chunk)
                except Exception:  # ijson refuses a value: read it leniently, else ijson
                    lenient_objs = self._lenient(chunk)
                    if lenient_objs is None:
                        yield from self._fallback()
                        return
                    objs = relaxed = lenient_objs
                yield [convert(o, Item) for o in objs], objs.__getitem__
            else:
                yield items, _lazy_raw(chunk)
            n = len(items)
            del chunk, items
            pos = self._advance(pos, n, prefix)
            if relaxed is not None:
                del self._anchors[:-1]
            want = PIECE_BYTES
            self._fill(pos + PIECE_BYTES)

    def _after_array(self) -> Iterator[Batch]:
        """The keys after the events array, through ijson (see the module doc).

        When the trailer decoded leniently (``trailer_ok``), an ijson error there is a value
        ijson refuses, not a cut file: it is kept in ``trailer_error``, never a reject.
        """
        del self._anchors[:-1]  # from the "]": items before it may hold what ijson refuses
        try:
            yield from self._fallback()
        except ijson.JSONError as exc:
            if not self._trailer_ok:
                raise
            self.trailer_error = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
