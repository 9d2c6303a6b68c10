"""Reading inputs: transparent decompression by magic bytes, bounded, and line blocks.

Text parsers read large blocks of whole lines (never one Python call per line for I/O) so that
they can classify and extract with vectorised Polars expressions.
"""

from __future__ import annotations

import bz2
import errno
import gzip
import io
import lzma
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import polars as pl
import zstandard

from commscope.parsers.registry import ParseError

BLOCK_BYTES = 32 * 1024 * 1024
"""Bytes read per block by text parsers (whole lines only)."""

MAX_LINE_BYTES = 1024 * 1024
"""Longest line (bytes, without its ``\\n``) a text parser is given.

Why: a line is held whole in memory and matched by regexes, so one unbounded line (a 1 GiB
line, or a small ``.gz`` holding one) would cost gigabytes. A longer line is streamed past
without being held: it reaches the parser as an empty line and is listed in the block's
``overlong`` (:class:`LongLine`), which the parser reports as a reject with the reason
(:func:`long_line_reason`), so line numbers and line accounting stay exact. NCCL cuts its
own lines at 1023 characters; DeepSpeed lines are a few hundred bytes.
"""

LONG_LINE_HEAD = 4096
"""Bytes kept of an over-long line (the start of its reject's ``raw``)."""

ZSTD_PIECE = 1024
"""Compressed bytes given to the zstd decompressor per call.

Why: one call returns all it can decompress from its input, and zstd expands at most about
32,768 times (an RLE block: 4 bytes for 128 KiB), so a 1 KiB piece yields at most about
32 MiB. Feeding 256 KiB at once let a 65 KB bomb reach 2.6 GB before the size bound was
checked."""

MAX_DECOMPRESSED_BYTES = 64 * 1024**3
"""Decompression bound: a compressed input may not expand beyond this (gzip bombs)."""

MAX_RATIO = 2000
"""Second bound: decompressed size may not exceed this multiple of the compressed size
(plus 64 MiB of slack), which stops bombs long before they fill a disk."""

_MAGIC: tuple[tuple[bytes, str], ...] = (
    (b"\x1f\x8b", "gzip"),
    (b"\xfd7zXZ\x00", "xz"),
    (b"\x28\xb5\x2f\xfd", "zstd"),
    (b"BZh", "bz2"),
)


def compression_of(path: Path) -> str | None:
    """Name the compression of ``path`` from its magic bytes, or None for plain files."""
    with path.open("rb") as fh:
        head = fh.read(8)
    for magic, name in _MAGIC:
        if head.startswith(magic):
            return name
    return None


class _BoundedReader(io.RawIOBase):
    """Wraps a decompressing stream and fails once it expands past the bounds."""

    def __init__(self, inner: BinaryIO, path: Path, limit: int) -> None:
        self._inner = inner
        self._path = path
        self._limit = limit
        self._read = 0

    def readable(self) -> bool:
        return True

    def readinto(self, b: bytearray | memoryview) -> int:  # type: ignore[override]
        data = self._inner.read(len(b))
        self._read += len(data)
        if self._read > self._limit:
            raise ParseError(
                self._path,
                f"decompressed size exceeds the bound of {self._limit} bytes "
                "(possible decompression bomb)",
            )
        n = len(data)
        b[:n] = data
        return n

    def close(self) -> None:
        self._inner.close()
        super().close()


class _ZstdReader(io.RawIOBase):
    """A zstd stream (one or more frames) that reports truncation.

    Why: zstandard's ``stream_reader`` ends a cut stream as if it were complete, so a
    truncated ``.zst`` would read as a shorter (even empty) file and its tail would be lost
    silently; here a stream that ends inside a frame raises ``EOFError`` like gzip does.
    """

    def __init__(self, path: Path) -> None:
        self._fh = path.open("rb")
        self._dctx = zstandard.ZstdDecompressor()
        self._dobj = self._dctx.decompressobj()
        self._in_frame = False  # bytes of the current frame consumed, frame not finished
        self._pending = b""
        self._pos = 0
        self._in = b""  # compressed bytes read from the file, fed from ``_in_pos`` on
        self._in_pos = 0

    def readable(self) -> bool:
        return True

    def _fill(self) -> bool:
        """Decompress more into ``_pending``; False at a clean end of the stream.

        The compressed input is fed ``ZSTD_PIECE`` bytes at a time and this returns as soon
        as anything was produced, so ``_pending`` never holds more than one piece's output
        (about 32 MiB at worst): the caller's size bound is checked between pieces.
        """
        self._pending, self._pos = b"", 0
        while not self._pending:
            if self._in_pos >= len(self._in):
                self._in, self._in_pos = self._fh.read(256 * 1024), 0
                if not self._in:
                    if self._in_frame:
                        raise EOFError("zstd stream ends inside a frame (file truncated)")
                    return False
            piece = self._in[self._in_pos : self._in_pos + ZSTD_PIECE]
            self._in_pos += len(piece)
            while piece:
                self._in_frame = True
                self._pending += self._dobj.decompress(piece)
                if self._dobj.eof:  # frame done: what follows starts the next frame
                    piece = self._dobj.unused_data
                    self._dobj = self._dctx.decompressobj()
                    self._in_frame = False
                else:
                    piece = b""
        return True

    def readinto(self, b: bytearray | memoryview) -> int:  # type: ignore[override]
        if self._pos >= len(self._pending) and not self._fill():
            return 0
        n = min(len(b), len(self._pending) - self._pos)
        b[:n] = memoryview(self._pending)[self._pos : self._pos + n]
        self._pos += n
        return n

    def close(self) -> None:
        self._fh.close()
        super().close()


class _ClosesBoth(io.RawIOBase):
    """A decompressing stream over a checked descriptor; closing it closes both.

    Why: ``lzma.LZMAFile`` and ``bz2.BZ2File`` given a file object never close it, and
    :meth:`Source.open` must hand them the descriptor it checked, not the path.
    """

    def __init__(self, inner: BinaryIO, raw: BinaryIO) -> None:
        self._inner = inner
        self._raw = raw

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:  # type: ignore[override]
        return self._inner.read(size)

    def readinto(self, b: bytearray | memoryview) -> int:  # type: ignore[override]
        data = self._inner.read(len(b))
        b[: len(data)] = data
        return len(data)

    def close(self) -> None:
        try:
            self._inner.close()
        finally:
            self._raw.close()
            super().close()


@dataclass(frozen=True)
class Source:
    """One input file to parse, with an optional starting byte offset (incremental ingest).

    Attributes:
        path: the file.
        start_offset: decompressed byte offset to start at (only for uncompressed files).
        end_offset: stop before this offset (None: end of file).
        first_line_no: 1-based number of the line at ``start_offset``.
        identity: ``(st_dev, st_ino)`` of the file as checked before parsing, or None. When
            set, every open must find that very file at ``path`` (opened with
            ``O_NOFOLLOW``): a file swapped for a symlink or another file is refused. See
            the policy in ``commscope.pipeline.fs_policy`` (rule 5).
    """

    path: Path
    start_offset: int = 0
    end_offset: int | None = None
    first_line_no: int = 1
    identity: tuple[int, int] | None = None

    @property
    def compression(self) -> str | None:
        """Compression detected from magic bytes."""
        return compression_of(self.path)

    def open(self) -> BinaryIO:
        """Open the (decompressed) byte stream, positioned at ``start_offset``.

        The file is opened once, without blocking (a FIFO swapped in never hangs), and
        checked on the descriptor before a byte is read: it must be a regular file and, when
        :attr:`identity` is set, the very file that was checked (``commscope.pipeline.fs_policy``).

        Raises:
            ParseError: not a regular file, or replaced since it was checked.
        """
        flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
        if self.identity is not None:
            flags |= getattr(os, "O_NOFOLLOW", 0)
        try:
            fd = os.open(self.path, flags)
        except OSError as exc:
            if self.identity is not None and exc.errno == errno.ELOOP:
                raise ParseError(self.path, "replaced by a symlink after it was found") from None
            raise
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or (
            self.identity is not None and (st.st_dev, st.st_ino) != self.identity
        ):
            os.close(fd)
            what = "replaced after it was found" if stat.S_ISREG(st.st_mode) else None
            raise ParseError(self.path, what or "not a regular file: not read")
        try:
            head = os.pread(fd, 8, 0)
        except OSError:
            os.close(fd)
            raise
        raw: BinaryIO = os.fdopen(fd, "rb")
        comp = next((name for magic, name in _MAGIC if head.startswith(magic)), None)
        if comp is None:
            if self.start_offset:
                raw.seek(self.start_offset)
            return raw
        if self.start_offset:
            raw.close()
            raise ParseError(self.path, "incremental offsets are only supported on plain files")
        inner: BinaryIO
        if comp == "zstd":
            raw.close()
            inner = _ZstdReader(self.path)  # type: ignore[assignment]
            zst = os.fstat(inner._fh.fileno())  # type: ignore[attr-defined]
            if (zst.st_dev, zst.st_ino) != (st.st_dev, st.st_ino):
                inner.close()
                raise ParseError(self.path, "replaced after it was found")
        else:
            opener = {"gzip": gzip.GzipFile, "xz": lzma.LZMAFile, "bz2": bz2.BZ2File}[comp]
            inner = _ClosesBoth(opener(fileobj=raw) if comp == "gzip" else opener(raw), raw)  # type: ignore[operator]
        limit = min(MAX_DECOMPRESSED_BYTES, st.st_size * MAX_RATIO + 64 * 1024**2)
        return io.BufferedReader(_BoundedReader(inner, self.path, limit), 1024 * 1024)  # type: ignore[return-value]

    def head(self, n: int = 65536) -> bytes:
        """First ``n`` decompressed bytes (for sniffing); on a broken stream, those before the break.

        Read in small pieces: one large buffered read of a truncated .gz would fail as a whole
        and hide a readable head, so a cut file would be "not recognised" instead of reported
        as truncated by its parser.
        """
        out = bytearray()
        try:
            with self.open() as fh:
                raw = getattr(fh, "raw", fh)  # below the 1 MiB buffer: small reads
                while len(out) < n:
                    piece = raw.read(min(16384, n - len(out)))
                    if not piece:
                        break
                    out += piece
        except (OSError, EOFError, lzma.LZMAError, zstandard.ZstdError, ParseError):
            pass
        return bytes(out)


@dataclass(frozen=True)
class LongLine:
    """A line longer than ``MAX_LINE_BYTES``, streamed past instead of read.

    Attributes:
        line_no: its 1-based line number.
        length: its length in bytes (without the ``\\n``).
        head: its first ``LONG_LINE_HEAD`` bytes.
    """

    line_no: int
    length: int
    head: bytes

    @property
    def reason(self) -> str:
        """The reject reason."""
        return long_line_reason(self.length)

    @property
    def raw(self) -> str:
        """The kept head, decoded (for a reject's ``raw``)."""
        return _decode(self.head)


def long_line_reason(length: int) -> str:
    """Reject reason of a line of ``length`` bytes over the bound."""
    return f"line longer than {MAX_LINE_BYTES} bytes ({length} bytes): not read"


class LineBlock:
    """Whole lines read from a source.

    The lines are split in Rust into a Polars Series (``series``): parsers classify and
    extract with vectorised expressions, so a Python ``list[str]`` (``lines``) is only built
    when a parser asks for it (it costs about three times the split itself).

    Attributes:
        series: decoded lines without their ``\\n`` (a trailing ``\\r`` is removed), Utf8.
        first_line_no: 1-based line number of the first line.
        end_offset: byte offset just after the block (decompressed stream).
        complete: False if the last line had no newline (file cut mid-line).
        overlong: lines of the block longer than ``MAX_LINE_BYTES``; each is an empty line
            in ``series`` and the parser rejects it (:class:`LongLine`).
    """

    __slots__ = ("_lines", "complete", "end_offset", "first_line_no", "overlong", "series")

    def __init__(
        self,
        series: pl.Series,
        first_line_no: int,
        end_offset: int,
        complete: bool = True,
        overlong: tuple[LongLine, ...] = (),
    ) -> None:
        self.series = series
        self.first_line_no = first_line_no
        self.end_offset = end_offset
        self.complete = complete
        self.overlong = overlong
        self._lines: list[str] | None = None

    @property
    def lines(self) -> list[str]:
        """The lines as Python strings (built on first use)."""
        if self._lines is None:
            self._lines = self.series.to_list()
        return self._lines

    def __len__(self) -> int:
        return self.series.len()


def _decode(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


def split_lines(body: bytes) -> pl.Series:
    """Split ``body`` at every ``\\n`` into a Utf8 Series of lines (``"a\\n"`` gives two).

    Valid UTF-8 is split in Rust without a Python string; anything else is decoded with
    U+FFFD replacements first (as ``bytes.decode(errors="replace")``). A ``\\r`` at the end
    of a line is dropped; one inside a line (progress bars) is kept.
    """
    try:
        one = pl.Series("raw", [body], dtype=pl.Binary).cast(pl.Utf8)
    except pl.exceptions.ComputeError:
        one = pl.Series("raw", [_decode(body)], dtype=pl.Utf8)
    parts = one.str.split("\n")
    del one  # free each copy as soon as the next exists (blocks are 32 MiB)
    lines = parts.explode()
    del parts
    if b"\r" in body:
        lines = lines.str.strip_suffix("\r")
    return lines


@dataclass
class ByteBlock:
    """Whole lines of a source as raw bytes (for parsers that search bytes before splitting).

    Attributes:
        data: the lines, each ending in ``\\n`` except a final cut one (``complete=False``).
        first_line_no: 1-based line number of the first line.
        end_offset: byte offset just after the block (decompressed stream).
        complete: False if this is a final line without newline (file cut mid-line).
        overlong: lines longer than ``MAX_LINE_BYTES``, each left as an empty line in
            ``data`` (see :class:`LineBlock`).
    """

    data: bytes
    first_line_no: int
    end_offset: int
    complete: bool = True
    overlong: tuple[LongLine, ...] = ()


def _cut_long_lines(body: bytes, first_line_no: int, max_line: int) -> tuple[bytes, list[LongLine]]:
    """Empty the lines of ``body`` (whole lines, ending in ``\\n``) longer than ``max_line``.

    Finding them costs a few ``bytes.find`` calls per ``max_line // 2`` bytes, not one per
    line: a line longer than ``max_line`` holds a whole window of ``max_line // 2`` bytes
    without a newline, and only such windows are looked at closely.
    """
    if len(body) <= max_line:
        return body, []
    half = max(1, max_line // 2)
    spans: list[tuple[int, int]] = []
    i, n = 0, len(body)
    while i + half <= n:
        if body.find(b"\n", i, i + half) >= 0:
            i += half
            continue
        start = body.rfind(b"\n", 0, i) + 1
        end = body.find(b"\n", i + half)
        end = n if end < 0 else end
        if end - start > max_line:
            spans.append((start, end))
        i = end + 1
    if not spans:
        return body, []
    pieces: list[bytes] = []
    longs: list[LongLine] = []
    prev, line_no = 0, first_line_no
    for start, end in spans:
        line_no += body.count(b"\n", prev, start)
        longs.append(LongLine(line_no, end - start, body[start : min(end, start + LONG_LINE_HEAD)]))
        pieces.append(body[prev:start])
        prev = end  # keep the line's own "\n": it becomes an empty line
    pieces.append(body[prev:])
    return b"".join(pieces), longs


def iter_byte_blocks(
    source: Source,
    *,
    block_bytes: int = BLOCK_BYTES,
    complete_lines_only: bool = False,
    max_line: int = MAX_LINE_BYTES,
) -> Iterator[ByteBlock]:
    """Yield blocks of whole lines of ``source`` as bytes (see :func:`iter_line_blocks`).

    A block of complete lines ends in ``\\n``; a final line without one comes alone, with
    ``complete=False``. ``first_line_no`` counts ``\\n`` with ``bytes.count`` (no split).
    A line longer than ``max_line`` bytes is never held: once the unfinished line passes the
    bound, the bytes up to its ``\\n`` are read and dropped (only its head and length are
    kept), and it comes as an empty line listed in ``overlong``. ``end_offset`` counts the
    real bytes, dropped ones included.

    Raises:
        ParseError: the stream is corrupt (e.g. a truncated gzip member).
    """
    line_no = source.first_line_no
    remaining = None if source.end_offset is None else source.end_offset - source.start_offset
    consumed = 0  # bytes read from the stream (dropped ones included)
    carry = b""  # the unfinished line (at most ``max_line`` bytes)
    skip: int | None = None  # bytes so far of an over-long line being dropped
    skip_head = b""  # its first LONG_LINE_HEAD bytes
    done: list[LongLine] = []  # over-long lines finished, for the next block
    try:
        with source.open() as fh:
            while True:
                want = block_bytes if remaining is None else min(block_bytes, remaining)
                data = fh.read(want) if want > 0 else b""
                if remaining is not None:
                    remaining -= len(data)
                if not data:
                    break
                consumed += len(data)
                if skip is not None:
                    nl = data.find(b"\n")
                    if nl < 0:
                        skip += len(data)
                        continue
                    done.append(LongLine(line_no, skip + nl, skip_head))
                    skip, skip_head = None, b""
                    data = data[nl:]  # its "\n" stays: an empty line in its place
                if carry:
                    data = carry + data
                cut = data.rfind(b"\n")
                if cut < 0:
                    carry = data
                    if len(carry) > max_line:
                        skip, skip_head, carry = len(carry), carry[:LONG_LINE_HEAD], b""
                    continue
                carry = data[cut + 1 :]
                body = data[: cut + 1] if carry else data
                del data
                if len(carry) > max_line:  # the next line is already over the bound
                    skip, skip_head, carry = len(carry), carry[:LONG_LINE_HEAD], b""
                body, longs = _cut_long_lines(body, line_no, max_line)
                end = source.start_offset + consumed - len(carry) - (skip or 0)
                yield ByteBlock(body, line_no, end, overlong=(*done, *longs))
                done = []
                line_no += body.count(b"\n")
    except (OSError, EOFError, lzma.LZMAError, zstandard.ZstdError) as exc:
        raise ParseError(source.path, f"cannot read: {exc}", line_no) from exc
    end = source.start_offset + consumed
    if skip is not None and not complete_lines_only:
        cut_long = LongLine(line_no, skip, skip_head)
        yield ByteBlock(b"", line_no, end, complete=False, overlong=(cut_long,))
    elif carry and not complete_lines_only:
        yield ByteBlock(carry, line_no, end, complete=False)


def iter_line_blocks(
    source: Source,
    *,
    block_bytes: int = BLOCK_BYTES,
    complete_lines_only: bool = False,
    max_line: int = MAX_LINE_BYTES,
) -> Iterator[LineBlock]:
    """Yield blocks of whole lines from ``source``.

    Lines are ``\\n``-delimited, so line numbers match ``wc -l`` (plus one for a final line
    without newline). A ``\\r`` inside a line is kept (progress bars), one at the end is
    dropped.

    Args:
        source: the input.
        block_bytes: approximate bytes per block.
        complete_lines_only: stop before a final line that has no newline (growing files).
        max_line: longest line read; longer ones come empty and listed in ``overlong``.

    Raises:
        ParseError: the stream is corrupt (e.g. a truncated gzip member).
    """
    for block in iter_byte_blocks(
        source,
        block_bytes=block_bytes,
        complete_lines_only=complete_lines_only,
        max_line=max_line,
    ):
        lines = split_lines(block.data)
        first, end, complete = block.first_line_no, block.end_offset, block.complete
        overlong = block.overlong
        del block  # do not hold the raw bytes while the parser works on the lines
        if complete:  # the text after the final "\n" is no line
            lines = lines.head(lines.len() - 1)
        yield LineBlock(lines, first, end, complete, overlong)
