"""Reading one Flight Recorder dump into plain Python values, safely.

Why a module of its own: a dump is a pickle, and ``pickle.load`` runs whatever a pickle names
(any importable callable, e.g. ``os.system``). Both official analyzers load dumps with plain
``pickle.load`` (``fr_trace``'s ``loader.py``, nvrx's ``fr_attribution.py``); commscope never
does. :class:`_PlainUnpickler` resolves no global: it refuses every name *before* any
lookup, so nothing is imported and nothing is called, except the few names Python's own
protocol-2 pickler writes for bytes, set and frozenset, which it answers with strict
stand-ins defined here (:data:`_PLAIN_GLOBALS`). The only objects a load can build are plain
values: dict, list, tuple, set, frozenset, str, bytes, bytearray, int, float, bool, None. The
real dumps need none of that (protocol 2: PROTO, EMPTY_DICT, EMPTY_LIST, MARK, SETITEMS,
APPENDS, BINUNICODE, BINPUT/BINGET, BININT*, LONG1, TUPLE2, NONE, NEWTRUE/NEWFALSE, STOP; see
``FORMATS_flight_recorder.md`` §1).

The JSON form (C++ ``dump_json``, or nvrx's ``json.dump`` of the unpickled dict) is read with
``json.loads``. Both are bounded: a dump larger than :data:`MAX_DUMP_BYTES` (decompressed) is
refused before it is decoded.
"""

from __future__ import annotations

import io
import json
import lzma
import pickle
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import zstandard

from commscope.parsers.registry import ParseError

if TYPE_CHECKING:
    from commscope.parsers._io import Source

MAX_DUMP_BYTES = 256 * 1024 * 1024
"""Largest dump read (decompressed bytes). The default ring buffer (2000 entries) with stack
traces is a few MB, 20,000 entries with 30-frame stacks 2.4 MB (the pickle memo shares
repeated frames); a bigger input is not a Flight Recorder dump or is a bomb, and decoded
Python objects take several times the bytes."""

MAX_ENTRIES = 2_000_000
"""Most entries read from one dump (a ring buffer of 2,000 by default). A pickle can repeat
one entry by reference at two bytes per copy, so the byte bound alone does not bound the
work: past this the file is refused (about 40 s of mapping at ~20 µs per entry)."""

PICKLE_PROTOCOLS = frozenset(range(2, 6))
"""Pickle protocols whose stream starts with PROTO (``\\x80 <n>``): the C++ writer uses 2,
Python re-pickles (nvrx's collector) 4 or 5."""


class ForbiddenGlobal(pickle.UnpicklingError):
    """A pickle names a global (class or function); it is refused, never imported."""

    def __init__(self, module: str, name: str) -> None:
        self.module = module
        self.name = name
        super().__init__(f"{module}.{name}")


def _latin1_bytes(text: Any, encoding: Any = "latin1") -> bytes:
    """Stand-in for ``_codecs.encode`` as protocol-2 pickles use it to rebuild ``bytes``."""
    if type(text) is not str or encoding not in ("latin1", "latin-1"):
        raise pickle.UnpicklingError("_codecs.encode accepted only as (str, 'latin1')")
    return text.encode("latin-1")


def _empty_bytes(*args: Any) -> bytes:
    """Stand-in for ``bytes()`` as protocol-2 pickles write an empty bytes object."""
    if args:
        raise pickle.UnpicklingError("bytes accepted only without arguments")
    return b""


def _plain_set(items: Any = ()) -> set[Any]:
    """Stand-in for ``set`` as protocol-2 pickles use it (one list argument)."""
    if type(items) not in (list, tuple):
        raise pickle.UnpicklingError("set accepted only from a list")
    return set(items)


def _plain_frozenset(items: Any = ()) -> frozenset[Any]:
    """Stand-in for ``frozenset`` as protocol-2 pickles use it (one list argument)."""
    return frozenset(_plain_set(items))


_PLAIN_GLOBALS: dict[tuple[str, str], Any] = {
    ("_codecs", "encode"): _latin1_bytes,
    ("__builtin__", "bytes"): _empty_bytes,
    ("builtins", "bytes"): _empty_bytes,
    ("__builtin__", "set"): _plain_set,
    ("builtins", "set"): _plain_set,
    ("__builtin__", "frozenset"): _plain_frozenset,
    ("builtins", "frozenset"): _plain_frozenset,
}
"""The only names a load resolves, each to a strict stand-in defined here (never the real
object): protocol 2 has no opcode for bytes, sets and frozensets, so Python's own pickler
writes them as these calls. Nothing is imported to resolve them."""


class _PlainUnpickler(pickle.Unpickler):
    """An unpickler that builds only plain values: every other global is refused unresolved.

    ``find_class`` is the one door through which a pickle reaches code (GLOBAL, STACK_GLOBAL,
    INST, OBJ and the EXT* opcodes all go through it, and REDUCE/NEWOBJ/BUILD need what it
    returns): it answers the stand-ins of :data:`_PLAIN_GLOBALS` and refuses everything else
    by name; ``persistent_load`` is refused too (the default one raises as well).
    """

    def find_class(self, module: str, name: str) -> Any:
        plain = _PLAIN_GLOBALS.get((module, name))
        if plain is not None:
            return plain
        raise ForbiddenGlobal(str(module)[:200], str(name)[:200])

    def persistent_load(self, pid: Any) -> Any:
        raise pickle.UnpicklingError("persistent id refused")


@dataclass(frozen=True)
class RawDump:
    """One dump as plain values.

    Attributes:
        data: the top-level object (a dict for every real dump).
        form: ``pickle`` or ``json``.
        protocol: the pickle protocol (None for JSON).
        trailing_bytes: bytes after the pickle's STOP (0 for a well-formed dump).
    """

    data: Any
    form: str
    protocol: int | None
    trailing_bytes: int = 0


def is_pickle_head(head: bytes) -> bool:
    """True when ``head`` starts with pickle's PROTO opcode and a protocol 2-5."""
    return len(head) >= 2 and head[0] == 0x80 and head[1] in PICKLE_PROTOCOLS


def read_bytes(source: Source) -> bytes:
    """The whole (decompressed) content of ``source``, refused past :data:`MAX_DUMP_BYTES`."""
    try:
        with source.open() as fh:
            data = fh.read(MAX_DUMP_BYTES + 1)
    except (OSError, EOFError, lzma.LZMAError, zstandard.ZstdError) as exc:
        raise ParseError(source.path, f"cannot read: {exc}") from exc
    if len(data) > MAX_DUMP_BYTES:
        raise ParseError(
            source.path, f"larger than {MAX_DUMP_BYTES} bytes: not read as a Flight Recorder dump"
        )
    return data


def load_dump(source: Source) -> RawDump:
    """Decode ``source`` (pickle or JSON form) into plain values.

    Raises:
        ParseError: naming the file: a refused global (``module.name``), a cut or corrupt
            pickle, invalid JSON, or neither form.
    """
    data = read_bytes(source)
    return decode(data, source.path)


def decode(data: bytes, path: Any) -> RawDump:
    """Decode dump bytes read from ``path`` (see :func:`load_dump`)."""
    if is_pickle_head(data):
        buf = io.BytesIO(data)
        try:
            obj = _PlainUnpickler(buf).load()
        except ForbiddenGlobal as exc:
            raise ParseError(
                path,
                f"pickle refers to the global {exc.module}.{exc.name}: refused, not imported "
                "(a Flight Recorder dump holds only plain values; this file is not one, or "
                "was tampered with)",
            ) from None
        except RecursionError:
            raise ParseError(path, "pickle nests too deeply: not read") from None
        except (pickle.UnpicklingError, EOFError, ValueError, TypeError, KeyError, IndexError,
                AttributeError, MemoryError, OverflowError, UnicodeDecodeError) as exc:  # fmt: skip
            raise ParseError(path, f"cut or corrupt pickle: {type(exc).__name__}: {exc}") from None
        return RawDump(obj, "pickle", data[1], len(data) - buf.tell())
    text = data.lstrip(b" \t\r\n")
    if text.startswith(b"\xef\xbb\xbf"):
        text = text[3:]
    if text[:1] != b"{":
        raise ParseError(path, "neither a pickle nor a JSON object: not a Flight Recorder dump")
    try:
        obj = json.loads(text)
    except RecursionError:
        raise ParseError(path, "JSON nests too deeply: not read") from None
    except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError
        raise ParseError(path, f"invalid JSON: {exc}") from None
    return RawDump(obj, "json", None)
