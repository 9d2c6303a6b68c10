"""NCCL debug lines: the line grammar (prefix, COLL, Init/Destroy, version, topology and
launcher-tag patterns), the split of a block of lines into prefix fields and message, host
repair, and the small value helpers every part of the parser shares.

See :mod:`commscope.parsers.nccl_debug` for the format and the rules.
"""

from __future__ import annotations

import itertools
import re
from typing import Any

import polars as pl

# --------------------------------------------------------------------------------------------
# Patterns (written for both Python ``re`` and the Rust regex engine behind Polars)
# --------------------------------------------------------------------------------------------

MAX_HOST_CHARS = 255
"""Longest host name the line prefix takes (DNS names have at most 253 characters).

Why a bound: with ``[^\\s:\\[\\]]+`` Python's backtracking ``re`` tried every start of a long
run of host characters against the whole run (20,000 characters took 5 s, 40,000 took 20 s in
``sniff``); bounded, each start costs at most this many steps. A longer glued fragment keeps
its last ``MAX_HOST_CHARS`` characters, which the host repair then matches as before."""

_PREFIX = (
    r"(?P<ts>\[\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?\] )?"
    r"(?P<host>[^\s:\[\]]{1," + str(MAX_HOST_CHARS) + r"}):(?P<pid>\d+):(?P<tid>\d+) "
    r"(?:\[(?P<dev>\d+)\] )?"
    r"(?:\d+\.\d+ )?(?:\S+:\d+(?: \([^)]*\))? )?"
    r"NCCL (?P<level>INFO|WARN|TRACE|CALL) "
)
_PREFIX_NC = re.sub(r"\(\?P<\w+>", "(?:", _PREFIX)  # without named groups: DFA-fast in Rust
_PREFIX_RE = re.compile(_PREFIX)

_COLL = (
    r"^(?P<op>[A-Za-z]+): opCount (?P<opcount>[0-9a-fA-F]+) "
    r"sendbuff (?:0x[0-9a-fA-F]+|\(nil\)) recvbuff (?:0x[0-9a-fA-F]+|\(nil\)) "
    r"count (?P<count>\d+) datatype (?P<dtype>\d+) op (?P<redop>\d+) root (?P<root>-?\d+) "
    r"comm (?P<comm>0x[0-9a-fA-F]+) \[nranks=(?P<nranks>\d+)\] "
    r"stream (?P<stream>0x[0-9a-fA-F]+|\(nil\))(?P<extra>.*)$"
)
_COLL_LIKE = r"^[A-Za-z]+: opCount "
_TUNE = (
    r"^(?:(?P<func>[A-Za-z]+)(?: \[[A-Za-z ]+\])?: )?(?P<bytes>\d+) Bytes -> "
    r"Algo (?P<algo>\w+) proto (?P<proto>\w+)"
)
_INIT_LIKE = r"^(?:\[Rank \d+\] )?(?:ncclComm\w+ )?comm 0x[0-9a-fA-F]+ rank \d+ nranks "
_TOPO_LIKE = r"^(?:Channel \d|Ring \d|Tree \d|Trees |NVLS Trees|NVLS Head|CollNet \d)"
_BARE_RECORD = (
    r"[A-Za-z]+: opCount [0-9a-fA-F]+ sendbuff |comm 0x[0-9a-fA-F]+ rank \d+ nranks \d+ cudaDev "
)
_LIFECYCLE_HINT = r"- Init (?:START|COMPLETE)|- (?:Destroy|Abort) COMPLETE|NCCL version"
_LIFECYCLE_KEYS = (
    b"- Init START",
    b"- Init COMPLETE",
    b"- Destroy COMPLETE",
    b"- Abort COMPLETE",
    b"NCCL version",
)
"""``_LIFECYCLE_HINT`` as byte strings (pass 1 searches raw bytes)."""
_NCCL_LINE_KEYS = (b"NCCL INFO ", b"NCCL WARN ", b"NCCL TRACE ", b"NCCL CALL ", b"NCCL version")
"""Pass 1 looks for them: none found exactly when no line is NCCL output."""
_NCCL_LINE_HINT = "|".join(k.decode() for k in _NCCL_LINE_KEYS)  # no regex metacharacters
"""``_NCCL_LINE_KEYS`` as one pattern (the one-pass scan matches decoded lines)."""

_INIT_RE = re.compile(
    r"^(?:\[Rank \d+\] )?(?:(?P<fn>ncclComm\w+) )?comm (?P<comm>0x[0-9a-fA-F]+) rank (?P<rank>\d+) "
    r"nranks (?P<nranks>\d+) cudaDev (?P<cudadev>\d+)(?: nvmlDev (?P<nvmldev>\d+))?"
    r"(?: busId (?P<busid>[0-9a-fA-F]+))?"
    r"(?: parent (?P<parent>\S+)(?: (?:splitCount|childCount) \d+)? color (?P<color>-?\d+) key (?P<key>-?\d+))?"
    r"(?: commId (?P<commid>0x[0-9a-fA-F]+))? ?- Init (?P<phase>START|COMPLETE)\s*$"
)
_END_RE = re.compile(
    r"^comm (?P<comm>0x[0-9a-fA-F]+) rank (?P<rank>\d+) nranks (?P<nranks>\d+) "
    r"cudaDev (?P<cudadev>\d+) busId (?P<busid>[0-9a-fA-F]+) - (?P<what>Destroy|Abort) COMPLETE\s*$"
)
_PLAIN_LIFECYCLE = (
    r"^(?:(?:ncclComm\w+ )?comm 0x[0-9a-fA-F]+ rank \d+ nranks \d+ cudaDev \d+"
    r"(?: nvmlDev \d+)?(?: busId [0-9a-fA-F]+)?(?: commId 0x[0-9a-fA-F]+)? - Init (?:START|COMPLETE)"
    r"|comm 0x[0-9a-fA-F]+ rank \d+ nranks \d+ cudaDev \d+ busId [0-9a-fA-F]+ "
    r"- (?:Destroy|Abort) COMPLETE)$"
)
"""The lifecycle messages every NCCL 2.4-2.28 logs outside splits, as a capture-free pattern:
each matches ``_INIT_RE`` or ``_END_RE`` with one token per group (single spaces, no
``[Rank N]``, split or trailing text), so its groups are cut from the tokens."""
_VERSION_RE = re.compile(r"NCCL version (?P<ver>\d+\.\d+\.\d+[^+\s]*)(?:\+cuda[\d.]+)?")
_BARE_VERSION_RE = re.compile(
    r"^(?P<pre>.*?)NCCL version (?P<ver>\d+\.\d+\.\d+[^+\s]*)\+cuda[\d.]+\s*$"
)
_TAG = (
    r"\s*(?:\[\d+,\d+\]<std(?:out|err)>:|\d+: |\[\d+\] |\[default\d+\]:"
    r"|\([A-Za-z_]\w* pid=\d+(?:, ip=[^)]*)?\) )"
)
_TAG_RE = re.compile("^" + _TAG)
_TAG_ONLY = f"^(?:{_TAG})?$"

_RING_RE = re.compile(r"^Ring (?P<ch>\d+) : (?P<prev>-?\d+) -> (?P<me>\d+) -> (?P<next>-?\d+)\s*$")
_CONN_RE = re.compile(
    r"^(?:Channel|Ring) (?P<ch>\d+)(?:/\d+)? : (?P<src>\d+)(?:\[(?P<srcdev>[0-9a-fA-F]+)\])? -> "
    r"(?P<dst>\d+)(?:\[(?P<dstdev>[0-9a-fA-F]+)\])? (?:\[(?P<dir>send|receive)\] )?"
    r"via (?P<detail>\S(?:.*\S)?)\s*$"
)
_RING_ORDER_RE = re.compile(
    r"^Channel (?P<ch>\d+)/(?P<nch>\d+) :(?P<ranks>(?: +\d+)+)(?P<trunc> *\.\.\.)?\s*$"
)
_TREE_RE = re.compile(
    r"^Tree (?P<ch>\d+) : (?P<up>-?\d+) -> (?P<me>\d+) -> "
    r"(?P<d0>-?\d+)/(?P<d1>-?\d+)/(?P<d2>-?\d+)\s*$"
)
_TREES_ITEM_RE = re.compile(
    r" \[(?P<ch>\d+)\] (?:(?P<d0>-?\d+)/(?P<d1>-?\d+)/(?P<d2>-?\d+)->(?P<me>-?\d+)->(?P<up>-?\d+)"
    r"(?:\|-?\d+->-?\d+->-?\d+/-?\d+/-?\d+)?"
    r"|(?P<up4>-?\d+)->(?P<me4>-?\d+)->(?P<e0>-?\d+)/(?P<e1>-?\d+)/(?P<e2>-?\d+))(?= |$)"
)
_NVLS_TREES_RE = re.compile(
    r"^NVLS Trees : (?P<t0>-?\d+(?:/-?\d+)*->-?\d+->-?\d+) "
    r"(?P<t1>-?\d+(?:/-?\d+)*->-?\d+->-?\d+)\s*$"
)
_NVLS_TREE_PART_RE = re.compile(r"^(?P<downs>-?\d+(?:/-?\d+)*)->(?P<me>-?\d+)->(?P<up>-?\d+)$")
_NVLS_HEAD_RE = re.compile(r"^NVLS Head +(?P<h>\d+):(?P<ranks>(?: +-?\d+)+)\s*$")
_COLLNET_RE = re.compile(
    r"^CollNet (?P<ch>\d+)(?:/\d+)? : (?P<me>\d+) \[(?P<dir>send|receive)\] "
    r"via (?P<detail>\S(?:.*\S)?)\s*$"
)
_RECORD_KIND_RE = {
    "COLL": re.compile(_COLL_LIKE),
    "Init/Destroy": re.compile(_INIT_LIKE),
    "topology": re.compile(_TOPO_LIKE),
}

LINE_LIMIT = 1023
"""NCCL <= 2.28 cuts every formatted debug line (prefix included) at this many characters."""


# Bounds on what one file's parse keeps (memory and the resume state stored in the commit log
# grow with these, never with the file). Past a bound the lines concerned are rejected with the
# reason (counted, with one warning), or for hosts/processes/tags only the repair or version
# attribution they feed stops learning; rows already parsed are unchanged.
MAX_KNOWN_HOSTS = 10_000
"""Hosts remembered for repairing glued host names."""


# --------------------------------------------------------------------------------------------
# Line splitting
# --------------------------------------------------------------------------------------------


def _launcher_tag(pre: str | None) -> str | None:
    """The launcher prefix at the start of ``pre`` (``[1,3]<stdout>:``, ``3:``...), stripped."""
    if not pre:
        return None
    m = _TAG_RE.match(pre)
    return m.group(0).strip() if m else None


def _record_kind(text: str) -> str | None:
    """Which kind of record ``text`` (an NCCL message) starts like, if any."""
    for kind, rx in _RECORD_KIND_RE.items():
        if rx.match(text):
            return kind
    return None


def _add_hosts(known: set[str], hosts: list[str]) -> None:
    """Add ``hosts`` to ``known`` up to ``MAX_KNOWN_HOSTS`` (the repair table stays bounded)."""
    for h in hosts:
        if len(known) >= MAX_KNOWN_HOSTS:
            return
        known.add(h)


def _fix_host(host: str, known: set[str]) -> str:
    """Repair a host glued to the tail of a cut fragment, using hosts seen on clean lines."""
    if host in known:
        return host
    # The longest known host that is a proper suffix: one set lookup per suffix, so the cost
    # is the host's length (at most MAX_HOST_CHARS), not the number of known hosts.
    for j in range(1, len(host)):
        if host[j:] in known:
            return host[j:]
    return host


_SPLIT_SCHEMA: dict[str, Any] = {
    "line_no": pl.Int64,
    "raw": pl.Utf8,
    "pre": pl.Utf8,
    "ts": pl.Utf8,
    "host": pl.Utf8,
    "pid": pl.Int64,
    "tid": pl.Int64,
    "dev": pl.Int32,
    "level": pl.Utf8,
    "msg": pl.Utf8,
    "spliced": pl.Boolean,
    "frag_kind": pl.Utf8,
}


def _split_block(
    lines: pl.Series | list[str],
    first_line_no: int | list[int] | pl.Series,
    known_hosts: set[str],
    repairs: list[str] | None = None,
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Locate the last NCCL prefix of every line of a block.

    ``repairs``, when given, receives every host that went through the host repair
    (:func:`_fix_host`), as logged.

    Returns:
        ``(prefixed, bare)``: ``prefixed`` has one row per line with an NCCL prefix (columns of
        ``_SPLIT_SCHEMA``); ``bare`` holds ``line_no, raw`` of the lines without one. Hosts of
        unspliced lines are added to ``known_hosts``.
    """
    n = len(lines)
    base = pl.DataFrame({"raw": pl.Series("raw", lines, dtype=pl.Utf8)})
    if isinstance(first_line_no, int):
        base = base.with_columns(
            line_no=pl.int_range(first_line_no, first_line_no + n, dtype=pl.Int64)
        )
    else:  # explicit line numbers (pass 1's selected lines)
        base = base.with_columns(line_no=pl.Series(first_line_no, dtype=pl.Int64))
    # Only short strings go through a capturing regex: locate the first prefix with a
    # capture-free search, cut the message after it, then split the prefix text itself.
    has = pl.col("raw").str.contains("NCCL ", literal=True)
    got = base.filter(has).with_columns(p=pl.col("raw").str.extract(_PREFIX_NC, 0))
    # ``p`` is the leftmost match: on most lines it starts the line, and the message is all
    # after it (a cheap slice); lines with text before it take the regex cut. Prefixes repeat
    # (one per thread unless timestamped): split each distinct one once.
    ok = got.filter(pl.col("p").is_not_null())
    at0 = pl.col("raw").str.starts_with(pl.col("p"))
    head = ok.filter(at0).with_columns(
        pre=pl.lit("", dtype=pl.Utf8), msg=pl.col("raw").str.slice(pl.col("p").str.len_chars())
    )
    tail = ok.filter(~at0)
    if tail.height:
        tail = tail.with_columns(msg=pl.col("raw").str.replace("^.*?" + _PREFIX_NC, "")).select(
            *ok.columns,
            pre=pl.col("raw").str.slice(
                0,
                pl.col("raw").str.len_chars()
                - pl.col("msg").str.len_chars()
                - pl.col("p").str.len_chars(),
            ),
            msg="msg",
        )
        ok = pl.concat([head, tail]).sort("line_no")
    else:
        ok = head
    parts = (
        ok.select(pl.col("p").unique())
        .with_columns(g=pl.col("p").str.extract_groups(_PREFIX))
        .unnest("g")
    )
    ok = ok.join(parts, on="p", how="left", maintain_order="left")
    bare = pl.concat(
        [base.filter(~has), got.filter(pl.col("p").is_null()).select("raw", "line_no")]
    ).sort("line_no")
    # A second prefix in the message (spliced writers) needs "NCCL ": test the regex only there.
    maybe = ok["msg"].str.contains("NCCL ", literal=True).arg_true()
    spliced = pl.repeat(False, ok.height, dtype=pl.Boolean, eager=True)
    if maybe.len():
        spliced = spliced.scatter(maybe, ok["msg"].gather(maybe).str.contains(_PREFIX))
    ok = ok.with_columns(
        spliced=spliced,
        glued=~pl.col("pre").str.contains(_TAG_ONLY),
    )
    clean = ok.filter(~pl.col("spliced"))
    _add_hosts(known_hosts, clean.filter(~pl.col("glued"))["host"].unique().to_list())
    glued_hosts = clean.filter(pl.col("glued"))["host"].unique().to_list()
    fixes = {h: _fix_host(h, known_hosts) for h in glued_hosts}
    if repairs is not None:
        repairs.extend(glued_hosts)
    clean = clean.with_columns(
        host=pl.col("host").replace(fixes), frag_kind=pl.lit(None, dtype=pl.Utf8)
    )
    spliced_rows: list[dict[str, Any]] = []
    for line_no, raw in ok.filter(pl.col("spliced")).select("line_no", "raw").iter_rows():
        matches = list(_PREFIX_RE.finditer(raw))
        last = matches[-1]
        kinds = [_record_kind(raw[a.end() : b.start()]) for a, b in itertools.pairwise(matches)]
        if repairs is not None:
            repairs.append(last.group("host"))
        spliced_rows.append(
            {
                "line_no": line_no,
                "raw": raw,
                "pre": raw[: last.start()],
                "ts": last.group("ts"),
                "host": _fix_host(last.group("host"), known_hosts),
                "pid": _int(last.group("pid")),
                "tid": _int(last.group("tid")),
                "dev": _int(last.group("dev")),
                "level": last.group("level"),
                "msg": raw[last.end() :],
                "spliced": True,
                "frag_kind": next((k for k in kinds if k), None),
            }
        )
    cols = list(_SPLIT_SCHEMA)
    # A pid, tid or device number out of its column's range (a corrupt line) is no prefix:
    # the line joins the bare ones (a record there is rejected), never failing the block.
    fits = pl.all_horizontal(
        pl.col(c).is_null() | pl.col(c).cast(_SPLIT_SCHEMA[c], strict=False).is_not_null()
        for c in ("pid", "tid", "dev")
    )
    clean = clean.with_columns(_fits=fits)
    frames = [clean.filter("_fits").select(cols).cast(_SPLIT_SCHEMA)]  # type: ignore[arg-type]
    unfit = [clean.filter(~pl.col("_fits")).select("raw", "line_no")]
    if spliced_rows:
        rows = _fit_ints(spliced_rows, _SPLIT_SCHEMA)
        kept = [r for r in rows if r["pid"] is not None and r["tid"] is not None]
        if kept:
            frames.append(pl.DataFrame(kept, schema=_SPLIT_SCHEMA))
        if len(kept) < len(rows):
            unfit.append(
                pl.DataFrame(
                    [
                        (r["raw"], r["line_no"])
                        for r in rows
                        if r["pid"] is None or r["tid"] is None
                    ],
                    schema={"raw": pl.Utf8, "line_no": pl.Int64},
                    orient="row",
                )
            )
    prefixed = pl.concat(frames).sort("line_no")
    if any(f.height for f in unfit):
        bare = pl.concat([bare.select("raw", "line_no"), *unfit]).sort("line_no")
    return prefixed, bare


# --------------------------------------------------------------------------------------------
# Values
# --------------------------------------------------------------------------------------------


def _int(text: str | None) -> int | None:
    """The integer of a matched digit run; None when absent or beyond int64 (corrupt)."""
    if text is None or len(text) > 19:
        return None
    v = int(text)
    return v if -(2**63) <= v < 2**63 else None


_INT_BITS = {pl.Int32: 31, pl.Int64: 63}


def _fit_ints(rows: list[dict[str, Any]], schema: dict[str, Any]) -> list[dict[str, Any]]:
    """Null integers too large for their column (corrupt lines), so building a frame never fails."""
    bounds = {c: 1 << _INT_BITS[t] for c, t in schema.items() if t in _INT_BITS}
    for row in rows:
        for c, b in bounds.items():
            v = row.get(c)
            if isinstance(v, int) and not -b <= v < b:
                row[c] = None
    return rows


def _lower(text: str | None) -> str | None:
    return text.lower() if text is not None else None


def _ts_ns_expr() -> pl.Expr:
    """Epoch ns of a ``[YYYY-MM-DD HH:MM:SS(.frac)] `` prefix, read as UTC."""
    ts = pl.col("ts")
    base = (
        ts.str.slice(1, 19)
        .str.replace("T", " ", literal=True)
        .str.to_datetime("%Y-%m-%d %H:%M:%S", time_unit="ns", strict=False)
        .dt.epoch("ns")
    )
    frac = ts.str.extract(r"[.,](\d+)\]", 1).str.slice(0, 9).str.pad_end(9, "0").cast(pl.Int64)
    return base + frac.fill_null(0)
