"""Decode the NVTX payloads NCCL attaches to its API ranges in an nsys SQLite export.

NCCL ≥2.16 attaches a binary payload to its NVTX ranges (message size; from 2.25 also the
communicator hash first, the root or peer, the reduction op; ``src/include/nvtx_payload_schemas.h``).
nsys stores the bytes in ``NVTX_EVENTS.binaryData`` and the layouts in
``NVTX_PAYLOAD_SCHEMAS(domainId, schemaId, ..., payloadSize)`` and
``NVTX_PAYLOAD_SCHEMA_ENTRIES(domainId, schemaId, idx, flags, type, name, ..., offset)``.

A value is returned only when the blob can be decoded *with those schema tables*: the blob
starts with a 32-byte header (``<u32 domainId, u32 -, u32 schemaId, u32 -, u64 payloadSize,
u64 totalSize>``, little-endian; the layout used by third-party decoders of nsys 2025-2026
exports, not documented by NVIDIA), the header's schema id names a schema in the tables, the
header's payload size covers every field read, and each field has a known fixed-size integer
type. Anything else decodes to None and the caller leaves the columns null. Field offsets are
taken from the table; a NULL offset follows the C self-alignment rule NVTX documents for
schema entries.

Some exporters are said to write a decoded form into ``jsonText`` instead (unverified); a JSON
object whose keys are the NCCL entry names is accepted too.
"""

from __future__ import annotations

import json
import sqlite3
import struct
from dataclasses import dataclass

MSG_SIZE = "Message size [bytes]"
COMM_ID = "NCCL communicator ID"
PEER = "Peer rank"
ROOT = "Root"
REDOP = "Reduction operation"
RANK = "Rank"
NRANKS = "No. of ranks"
CUDA_DEV = "CUDA device"
PARENT_COMM_ID = "Parent NCCL communicator ID"
COLOR = "Color"
KEY = "Key"

HEADER = struct.Struct("<IIIIQQ")
"""32-byte header in front of each ``binaryData`` payload."""

# NVTX_PAYLOAD_ENTRY_TYPE_* (nvToolsExtPayload.h) -> struct format, LP64 sizes.
_TYPE_FMT: dict[int, str] = {
    1: "b",  # CHAR
    2: "B",  # UCHAR
    3: "h",  # SHORT
    4: "H",  # USHORT
    5: "i",  # INT
    6: "I",  # UINT
    7: "q",  # LONG
    8: "Q",  # ULONG
    9: "q",  # LONGLONG
    10: "Q",  # ULONGLONG
    11: "b",  # INT8
    12: "B",  # UINT8
    13: "h",  # INT16
    14: "H",  # UINT16
    15: "i",  # INT32
    16: "I",  # UINT32
    17: "q",  # INT64
    18: "Q",  # UINT64
    22: "Q",  # SIZE (size_t)
    23: "Q",  # ADDRESS
}
# NCCL's reduction-op entry has a custom enum type (a registered schema id); ncclRedOp_t is an
# int-sized C enum.
_NAMED_FMT: dict[str, str] = {REDOP: "i"}


@dataclass(frozen=True)
class _Field:
    name: str
    fmt: str | None
    offset: int | None


@dataclass(frozen=True)
class _Schema:
    fields: tuple[tuple[str, str, int], ...]
    """(name, struct format, byte offset) of every decodable field."""
    end: int
    """First byte after the last decodable field."""


def _layout(fields: list[_Field]) -> _Schema:
    out: list[tuple[str, str, int]] = []
    pos = 0
    known = True
    for f in fields:
        size = struct.calcsize("<" + f.fmt) if f.fmt else None
        if f.offset is not None:
            off = int(f.offset)
        elif known and size is not None:
            off = -(-pos // size) * size  # self-alignment: round up to a multiple of the size
        else:
            known = False  # an implicit offset after an unknown-size field cannot be computed
            continue
        if size is None or f.fmt is None:
            known = False  # unknown size: where the next implicit field starts is unknown
            continue
        out.append((f.name, f.fmt, off))
        pos = off + size
    end = max((off + struct.calcsize("<" + fmt) for _, fmt, off in out), default=0)
    return _Schema(tuple(out), end)


class PayloadDecoder:
    """Decodes ``binaryData``/``jsonText`` payloads with the schema tables of one export."""

    def __init__(self, schemas: dict[tuple[int | None, int], _Schema]) -> None:
        self._schemas = schemas
        by_id: dict[int, list[_Schema]] = {}
        for (_, sid), sch in schemas.items():
            by_id.setdefault(sid, []).append(sch)
        self._unique = {sid: s[0] for sid, s in by_id.items() if len(s) == 1}

    @property
    def has_schemas(self) -> bool:
        """True if the export holds any payload schema."""
        return bool(self._schemas)

    @classmethod
    def from_db(cls, con: sqlite3.Connection, tables: set[str]) -> PayloadDecoder:
        """Load the payload schemas of an export (an empty decoder if it has none)."""
        if "NVTX_PAYLOAD_SCHEMA_ENTRIES" not in tables:
            return cls({})
        cols = {r[1] for r in con.execute('PRAGMA table_info("NVTX_PAYLOAD_SCHEMA_ENTRIES")')}
        if not {"schemaId", "type", "name"} <= cols:
            return cls({})

        def c(name: str) -> str:
            return f'"{name}"' if name in cols else "NULL"

        rows = con.execute(
            f"SELECT {c('domainId')}, schemaId, {c('idx')}, type, name, {c('offset')} "
            "FROM NVTX_PAYLOAD_SCHEMA_ENTRIES"
        ).fetchall()
        grouped: dict[tuple[int | None, int], list[tuple[int, _Field]]] = {}
        for dom, sid, idx, typ, name, off in rows:
            if sid is None or name is None:
                continue
            fmt = _TYPE_FMT.get(typ) if isinstance(typ, int) else None
            fmt = fmt or _NAMED_FMT.get(name)
            grouped.setdefault((dom, sid), []).append(
                (idx if idx is not None else 0, _Field(str(name), fmt, off))
            )
        schemas = {
            key: _layout([f for _, f in sorted(items, key=lambda t: t[0])])
            for key, items in grouped.items()
        }
        return cls(schemas)

    def _schema(self, domain_id: int | None, header_domain: int, sid: int) -> _Schema | None:
        return (
            self._schemas.get((domain_id, sid))
            or self._schemas.get((header_domain, sid))
            or self._unique.get(sid)
        )

    def decode_binary(self, data: object, domain_id: int | None) -> dict[str, int] | None:
        """Decode one ``binaryData`` value; None unless every check passes."""
        if isinstance(data, str):
            try:
                data = bytes.fromhex(data)
            except ValueError:
                return None
        if not isinstance(data, bytes | bytearray | memoryview) or not self._schemas:
            return None
        buf = bytes(data)
        if len(buf) < HEADER.size:
            return None
        hdr_domain, _, sid, _, psize, _ = HEADER.unpack_from(buf, 0)
        schema = self._schema(domain_id, hdr_domain, sid)
        if schema is None or not schema.fields:
            return None
        if psize < schema.end or HEADER.size + psize > len(buf):
            return None
        out: dict[str, int] = {}
        for name, fmt, off in schema.fields:
            (out[name],) = struct.unpack_from("<" + fmt, buf, HEADER.size + off)
        return out

    @staticmethod
    def decode_json(text: object) -> dict[str, int] | None:
        """Decode a ``jsonText`` payload holding NCCL entry names as keys; None otherwise."""
        if not isinstance(text, str) or not text.lstrip().startswith("{"):
            return None
        try:
            obj = json.loads(text)
        except ValueError:
            return None
        if not isinstance(obj, dict):
            return None
        out: dict[str, int] = {}
        for key in (
            MSG_SIZE,
            COMM_ID,
            PEER,
            ROOT,
            REDOP,
            RANK,
            NRANKS,
            CUDA_DEV,
            PARENT_COMM_ID,
            COLOR,
            KEY,
        ):
            val = obj.get(key)
            if isinstance(val, bool):
                continue
            if isinstance(val, int):
                out[key] = val
            elif isinstance(val, str):
                try:
                    out[key] = int(val, 0)
                except ValueError:
                    continue
        return out or None
