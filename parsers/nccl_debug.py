"""NCCL debug output (``NCCL_DEBUG=INFO``, NCCL 2.4 - 2.28) -> comm_ops, communicators, topology.

Input: one text file holding the debug output of one process (``NCCL_DEBUG_FILE=%h.%p``) or of
many processes interleaved (job stdout, possibly behind launcher prefixes such as
``[1,3]<stdout>:``, `` 3: ``, ``[default0]:`` or ``(RayTrainWorker pid=..)``). See
FORMATS_text_logs.md section 2.

Line accounting (``LineCounts``): ``total`` is the number of ``\\n``-delimited lines (a final line
without newline counts). A line is **parsed** when it is the source of a row: a COLL line (one
``comm_ops`` row), an ``Init START/COMPLETE`` or ``Destroy/Abort COMPLETE`` line (communicator
lifecycle, ``communicators``) or a topology line that yields ``topology`` rows. A line is
**rejected** when it looks like one of those records but does not fit its full pattern (a
truncated or malformed COLL/Init/topology line, a record without its ``host:pid:tid`` prefix, a
final line without newline, or a line in which another writer's output cut a record). Everything
else is **ignored**: application and launcher output, other NCCL subsystems (ALLOC, PROXY, NET,
ENV, WARN, CALL, RAS, ``Init timings``...). ``NCCL version`` and ``TUNING`` lines only annotate
rows (``nccl_version``, ``algorithm``/``protocol``) and are counted as ignored.

Line prefix: the **last** ``[ts]host:pid:tid [dev] NCCL <LEVEL>`` match of a line is its prefix
(lines spliced by concurrent writers carry several); text before it is launcher or foreign text.
A host glued to the tail of a cut fragment (``...80356ljm:803564:...``) is repaired to the
longest known host (seen on unspliced lines) it ends with. Only ``INFO`` messages are parsed.

Two passes over the file (both streaming, bounded memory): pass 1 reads only the communicator
lifecycle and version lines and builds the registry of communicator *incarnations*; pass 2 emits
``comm_ops``, ``topology`` (and ``rejects``) block by block; ``communicators`` come in a last
chunk. A byte range without ``resume`` state only knows the Init lines inside the range.
What a parse keeps grows with bounds, never with the file: lines longer than
``parsers._io.MAX_LINE_BYTES`` are streamed past and rejected, at most
``MAX_LIFECYCLE_EVENTS`` lifecycle lines and ``MAX_TOPOLOGY_ROWS`` topology rows are kept
(later ones are rejected with the reason and a warning), and the host, process, tag and bare
version tables are capped (``MAX_KNOWN_HOSTS``, ``MAX_PROCESSES``, ``MAX_BARE_VERSIONS``).

Incremental parse (``resume``, see ``parsers.registry.is_resumable``): the end state holds
pass 1's raw material (lifecycle events, version lines, known hosts) and fingerprints of the
``communicators`` and ``topology`` rows already emitted. A resumed parse of the appended lines
rebuilds the registry from the stored plus the new events, so COLL rows of the new lines get
the same ranks as in a single parse, and emits only communicators/topology rows not emitted
before. Limits (rows already stored are never rewritten): a stored row that the new lines
would change (e.g. a world-size communicator initialised only later changes earlier global
ranks, or a cut falls between a TUNING line and its COLL line or inside an NCCL <= 2.18
init) keeps its first value, and a warning counts the communicators concerned.

Communicator incarnations and global ranks
------------------------------------------
An incarnation is keyed by (host, pid, comm pointer, init order): ``Init START`` opens one (the
matching ``Init COMPLETE`` completes it), a ``COMPLETE`` without open ``START`` opens one
(NCCL <= 2.18 logs no START), ``Destroy``/``Abort COMPLETE`` closes it; pointers reused after a
destroy therefore start a new incarnation. A ``Destroy``/``Abort`` line with no Init before it
(excerpts) creates an incarnation spanning from the previous close of that pointer (or the start
of the file) to that line, so its rank and nranks are still known. A COLL line belongs to the
incarnation of its (host, pid, comm) whose window contains the line.

*World size* W is the largest ``nranks`` of any incarnation in the file. The **global rank** of a
process is its rank in a communicator of W ranks (the world comm). Rules:

* one (host, pid) with world comms that all give rank r: every row of the process gets r,
  including rows on sub-communicators (whose own rank is only ``group_rank``) and rows on comm
  pointers with no Init line in the file;
* a single process driving several GPUs (nccl-tests ``-g N``, ``ncclCommInitAll``: several world
  comms with different ranks, each on its own device): the global rank is per incarnation, the
  world comm's own rank; a sub-communicator takes the global rank of its ``parent`` chain, else
  of the world comm on the same bus id / CUDA device; rows of unknown comms get null;
* a process with no world comm in the file (excerpt, or its world Init line was lost): null. A
  sub-communicator rank is **never** used as a global rank;
* ``parse(rank=...)`` (caller knows the file's rank, e.g. per-rank ``NCCL_DEBUG_FILE``) fills
  only the global ranks that are still null.

``rank_source`` (schema 1.6.0) says how each row's rank is known: ``logged`` (a world comm's
Init line), ``option`` (the ``rank`` argument), or, in a file with **no** Init/Destroy line at
all, one of the rules of :mod:`parsers._nccl_rank_infer` (``inferred_peers``: Send/Recv roots
on the N-rank world every process shows; ``inferred_device``: one host, devices 0..N-1), found
by one extra pass over the COLL lines that only such a file costs; null when nothing names it.

W is taken per file, not per process, so that a process whose world Init line was lost (spliced
output) gets null rather than a sub-communicator rank. Limitation: an excerpt in which no
process shows its world comm takes the largest comm it does show as the world.

comm_ops (one row per COLL line)
--------------------------------
``op`` normalised (AllReduce->all_reduce, AllGather->all_gather, ReduceScatter->reduce_scatter,
Broadcast->broadcast, Reduce->reduce, Send->send, Recv->recv, AlltoAll->all_to_all,
Gather->gather, Scatter->scatter, else other); ``raw_op`` as logged; ``comm_id`` the comm
pointer; ``group_size`` the ``[nranks=N]`` field; ``group_rank`` the caller's rank in the comm
(from the incarnation, null if the file has no Init/Destroy line for it); ``rank`` the global
rank (above); ``count`` as logged; ``dtype`` the datatype name (``dtype_<n>`` if unknown);
``seq`` the opCount, always parsed as **hex** (NCCL prints ``%lx``; it is per communicator, may
stay 0, and repeats inside groups); ``redop`` the reduction name for AllReduce/ReduceScatter/
Reduce (``user_<n>`` for user ops >= 5), null for non-reducing ops; ``stream``; ``cuda_dev`` the
``[dev]`` of the prefix (the calling thread's device, not necessarily the comm's); ``host``;
``pid``; ``tid``; ``ts_ns`` from a 2.26+ timestamp prefix ``[YYYY-MM-DD HH:MM:SS(.frac)] ``
read as UTC (NCCL prints local time and logs no offset; a custom NCCL_DEBUG_TIMESTAMP_FORMAT is
not recognised and leaves null), else null; ``dur_ns`` null (NCCL logs no duration), so
``timing_source`` is ``none`` on every row (issue 16: such calls count as calls but carry no
comm time and no bandwidth); ``group_source`` ``logged`` where the line names its communicator
size (``[nranks=N]`` → ``group_size``), else null. Both are set on the block's frame, not per
line.

``peer_rank``: for Send/Recv the peer, for Broadcast/Reduce/Gather/Scatter the root, else null:
the rank **of the communicator**, as NCCL logs it (on the world comm it is the global rank). It
is never translated here: the SQL maps it through the group's members (int_groups_members),
which hold every file's Init lines. A translation from one file's partial knowledge mixed the
two meanings within one communicator (on a 2-rank split comm of a per-process log only the
process's own comm rank was known, so its sends to itself became global rank 2 while its sends
to the other member stayed comm rank 1; sample_traces/gpu_nccl_pp2ep2_1gpu).

``msg_bytes`` = ``count`` x element size, i.e. the NCCL count semantics: AllReduce/
Broadcast/Reduce the whole buffer; **AllGather the per-rank send buffer** (``sendcount``; the
receive buffer is ``msg_bytes * group_size``); **ReduceScatter the per-rank receive buffer**
(``recvcount``; the send buffer is ``msg_bytes * group_size``); AlltoAll (the native API, 2.28+,
whose ``count`` is per peer) ``count x size x nranks``, the whole per-rank send buffer as for
every source's all_to_all (null when ``[nranks=]`` is missing); Send/Recv the message. nccl-tests' algbw size S (FORMATS section 3) is ``msg_bytes * group_size``
for AllGather/ReduceScatter and ``msg_bytes`` otherwise. Null for an unknown datatype.

``algorithm``/``protocol`` come from TUNING lines (``[Func: ]N Bytes -> Algo A proto P``,
2.20+, logged by comm rank 0 only; numeric 2.20-2.23 values mapped to the 2.24+ names): a TUNING
line is paired first-in-first-out with the earlier unpaired COLL lines of the same host:pid:tid
whose comm rank is 0 (or unknown), same op (when the line names one) and whose
``count x size`` (or ``x nranks``) equals N; a TUNING line with no such pending COLL line stays
unpaired. Pairs are made inside one block (32 MiB of text). Else null.

communicators (one row per incarnation)
---------------------------------------
comm_id, rank (in the comm), nranks, global_rank, host, pid, cuda_dev, nvml_dev (2.19+ and 2.4),
bus_id (lowercase hex), comm_hash (``commId``, same on every member; absent before 2.16 and on
split lines), parent_comm_id (``ncclCommSplit``'s parent pointer as logged), split_color and
split_key (the ``color``/``key`` of a split line, 2.21+: ``splitCount``/``childCount`` variants
and the ``key %d- Init START`` form included), parent_comm_hash (the parent's identity, the same
on every member: the parent's ``commId`` from its Init line in the same process, or for a parent
that is itself a split child ``split:<its parent identity>/<its parent nranks>:<its color>``;
the parent incarnation is the latest one of the logged pointer open at the child's Init line)
and parent_nranks (the parent's nranks). The members of one split child are the rows sharing
(parent_comm_hash, parent_nranks, split_color); their order is the logged child ``rank`` (NCCL
orders by key, ties by parent rank). Peer ranks of split children are translated like those of
comms with a ``commId`` (above) using that identity. nccl_version (``x.y.z[suffix]`` without
``+cuda``, from the process's own version line; else a bare version line attributed through its
launcher tag; else the version of the other processes of the host, or of the file, when they
agree; a warning says so), source_line (the first Init line, or the Destroy/Abort line for
incarnations known only from it).

topology
--------
``kind``/``direction``: ``ring`` next/prev (``Ring NN : prev -> me -> next``, 2.10+ GRAPH);
``ring_order`` from rank 0's ``Channel NN/MM : r0 r1 ...`` lines: ``position`` rows (``rank`` =
member, ``peer_rank`` = its 0-based **position** in the order, not a rank) plus derived next/prev
for adjacent members, and the wrap-around pair when the line lists every rank (its length equals
the comm's nranks; <= 2.22 cuts the list at 20 ranks, 2.23+ ends a cut list with ``...``);
``tree`` up/down from ``Trees [c] d0/d1/d2->me->up`` (2.4 ``up->me->d`` and 2.5-2.7 ``..|..``
forms too; a last item cut by the 1023-character line limit is dropped) and from
``Tree N : up -> me -> d0/d1/d2`` (GRAPH; channel N up to 2 x nChannels); ``nvls`` up/down from
``NVLS Trees :`` (channel = NVLS tree 0/1) and ``position`` rows from ``NVLS Head h: r_node0 ..``
(channel = head index h, peer_rank = node index); ``p2p`` send/recv from connection lines
(``Channel NN[/c] : a[x] -> b[y] [send|receive] via ...`` and pre-2.7 ``Ring NN : ...via``),
``rank`` = the logging side (the sender, or the receiver for ``[receive]``); ``collnet`` send/recv
from ``CollNet NN/c : r [send|receive] via COLLNET/...``. ``transport`` is normalised
(``P2P/IPC``, ``P2P/CUMEM``, ``P2P/direct pointer``, ``P2P/indirect``, ``SHM``, ``NET/IB``,
``NET/Socket``, ``NET/AWS Libfabric``, ``COLLNET/<name>``); ``transport_detail`` is the raw text
after ``via``. Ranks are comm ranks. ``host``/``pid`` are the logging process's; ``comm_id`` is
the incarnation of that process live at the line, chosen by: the comm whose Init lines were
logged by the same thread (init-time lines); else the only comm of the process whose rank (and
device, from ``[x]``) match the logging side; else the process's latest-initialised comm; else
null. Rows are de-duplicated on (comm, process, rank, kind, channel, peer, direction, detail).
"""

from __future__ import annotations

import bisect
import hashlib
import itertools
import json
import re
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import polars as pl

from parsers import _nccl_enums as enums
from parsers._io import LongLine, Source, iter_byte_blocks, iter_line_blocks
from parsers._nccl_coll_fields import coll_field_exprs, plain_coll_mask, plain_coll_rows
from parsers._nccl_rank_infer import CollSummary, infer_ranks
from parsers.registry import LineCounts, ParsedChunk, ParseError, register

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

RING_ORDER_CAP = 20
"""NCCL <= 2.22 prints at most this many ranks in a ring-order line, silently."""

_MAX_RAW = 4096

# Bounds on what one file's parse keeps (memory and the resume state stored in the commit log
# grow with these, never with the file). Past a bound the lines concerned are rejected with the
# reason (counted, with one warning), or for hosts/processes/tags only the repair or version
# attribution they feed stops learning; rows already parsed are unchanged.
MAX_LIFECYCLE_EVENTS = 100_000
"""Init START/COMPLETE and Destroy/Abort lines kept per file (about 50,000 communicators).
Measured: 200,000 events took 640 MB and a 52 MB resume state before this bound and the
compact events; later lifecycle lines are rejected ("communicator registry full")."""
MAX_TOPOLOGY_ROWS = 250_000
"""Distinct topology rows per file; topology lines past it are rejected."""
_TOPO_BATCH = 10_000
"""Topology lines turned into rows at once (a block may hold hundreds of thousands)."""
MAX_KNOWN_HOSTS = 10_000
"""Hosts remembered for repairing glued host names."""
MAX_PROCESSES = 100_000
"""Processes with a version line, and launcher tags, remembered for ``nccl_version``."""
MAX_BARE_VERSIONS = 1_000
"""Distinct (launcher tag, version) pairs of bare version lines remembered."""
REGISTRY_FULL = (
    f"communicator registry full: more than {MAX_LIFECYCLE_EVENTS} Init/Destroy lines in one "
    "file; this communicator is not stored"
)
TOPOLOGY_FULL = (
    f"topology bound reached: more than {MAX_TOPOLOGY_ROWS} distinct topology rows in one "
    "file; this line is not stored"
)


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
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Locate the last NCCL prefix of every line of a block.

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
    clean = clean.with_columns(
        host=pl.col("host").replace(fixes), frag_kind=pl.lit(None, dtype=pl.Utf8)
    )
    spliced_rows: list[dict[str, Any]] = []
    for line_no, raw in ok.filter(pl.col("spliced")).select("line_no", "raw").iter_rows():
        matches = list(_PREFIX_RE.finditer(raw))
        last = matches[-1]
        kinds = [_record_kind(raw[a.end() : b.start()]) for a, b in itertools.pairwise(matches)]
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
# Communicator registry (pass 1)
# --------------------------------------------------------------------------------------------


@dataclass
class _Inc:
    """One communicator incarnation in one process."""

    host: str
    pid: int
    comm: str
    rank: int
    nranks: int
    cuda_dev: int | None
    nvml_dev: int | None
    bus_id: str | None
    comm_hash: str | None
    parent: str | None
    window_start: int
    split_color: int | None = None
    split_key: int | None = None
    parent_inc: _Inc | None = field(default=None, compare=False, repr=False)
    ident: str | None = None
    first_init_line: int | None = None
    has_start: bool = False
    complete_line: int | None = None
    end_line: int | None = None
    init_tids: set[int] = field(default_factory=set)
    global_rank: int | None = None
    identity_world: bool = False
    nccl_version: str | None = None

    @property
    def source_line(self) -> int:
        """First Init line, or the Destroy/Abort line when no Init line is known."""
        return self.first_init_line if self.first_init_line is not None else self.end_line or 0


@dataclass
class _Event:
    line_no: int
    host: str
    pid: int
    tid: int
    kind: str  # START | COMPLETE | END
    fields: dict[str, Any]
    spliced: bool


class _WorldOf:
    """The world comm a sub-communicator of a several-GPU process belongs to (O(log n) each).

    Its ``parent`` chain (each step: the latest incarnation of the parent pointer opened at or
    before the child, destroyed or not) up to a world comm; else the world comm on the same bus
    id (or, without one, the same CUDA device) when all those give one rank; else None.
    """

    def __init__(self, incs: list[_Inc], worlds: list[_Inc]) -> None:
        by_comm: dict[str, list[_Inc]] = defaultdict(list)
        for i in incs:
            by_comm[i.comm].append(i)
        self.by_comm: dict[str, tuple[list[int], list[_Inc]]] = {}
        for comm, members in by_comm.items():
            # ties on window_start: the first in ``incs`` order wins, as max() did
            order = sorted(enumerate(members), key=lambda t: (t[1].window_start, -t[0]))
            self.by_comm[comm] = ([m.window_start for _, m in order], [m for _, m in order])
        self.worlds = {id(w) for w in worlds}
        self.by_bus: dict[str, list[_Inc]] = defaultdict(list)
        self.by_dev: dict[int, list[_Inc]] = defaultdict(list)
        for w in worlds:
            if w.bus_id is not None:
                self.by_bus[w.bus_id].append(w)
            if w.cuda_dev is not None:
                self.by_dev[w.cuda_dev].append(w)

    def __call__(self, inc: _Inc) -> _Inc | None:
        cur: _Inc | None = inc
        seen: set[int] = set()
        while cur is not None and cur.parent is not None and id(cur) not in seen:
            seen.add(id(cur))  # a cycle of pointers reaches no world (the scan went round it)
            starts, members = self.by_comm.get(cur.parent, ([], []))
            at = bisect.bisect_right(starts, cur.window_start) - 1
            cur = members[at] if at >= 0 else None
            if cur is not None and id(cur) in self.worlds:
                return cur
        if inc.bus_id is not None:
            same_dev = self.by_bus.get(inc.bus_id, [])
        elif inc.cuda_dev is not None:
            same_dev = self.by_dev.get(inc.cuda_dev, [])
        else:
            same_dev = []
        return same_dev[0] if len({w.rank for w in same_dev}) == 1 else None


@dataclass
class _Registry:
    """Everything pass 1 learns: incarnations, versions, hosts."""

    events: list[_Event] = field(default_factory=list)
    known_hosts: set[str] = field(default_factory=set)
    proc_versions: dict[tuple[str, int], str] = field(default_factory=dict)
    bare_versions: list[tuple[str | None, str]] = field(default_factory=list)
    tag_procs: dict[str, set[tuple[str, int]]] = field(default_factory=lambda: defaultdict(set))
    nccl_lines: int = 0  # > 0 once any NCCL line was seen (pass 1 stops counting there)
    full_from: int | None = None  # first lifecycle line past MAX_LIFECYCLE_EVENTS
    incs: list[_Inc] = field(default_factory=list)
    by_proc: dict[tuple[str, int], list[_Inc]] = field(default_factory=dict)
    proc_global: dict[tuple[str, int], int] = field(default_factory=dict)
    proc_how: dict[tuple[str, int], str] = field(default_factory=dict)  # rank_source if not logged
    world_size: int | None = None
    warnings: list[str] = field(default_factory=list)
    _index: _IncIndex | None = None  # built on the first attribute() call

    # -- pass 1 ------------------------------------------------------------------------------

    def scan(self, data: bytes, first_line_no: int) -> None:
        """Collect lifecycle and version lines of one block of whole lines (raw bytes).

        The hints are ASCII, so searching the bytes finds exactly the lines whose decoded
        text matches ``_LIFECYCLE_HINT``; only those lines are decoded and split.
        """
        if not self.nccl_lines:  # only "none at all" matters: stop at the first
            self.nccl_lines += any(k in data for k in _NCCL_LINE_KEYS)
        starts: set[int] = set()
        for key in _LIFECYCLE_KEYS:
            pos = data.find(key)
            while pos >= 0:
                start = data.rfind(b"\n", 0, pos) + 1
                starts.add(start)
                end = data.find(b"\n", pos)
                pos = data.find(key, end if end >= 0 else len(data))
        if not starts:
            return
        sub: list[str] = []
        nos: list[int] = []
        line_no, prev = first_line_no, 0
        for start in sorted(starts):
            line_no += data.count(b"\n", prev, start)
            prev = start
            end = data.find(b"\n", start)
            text = data[start : end if end >= 0 else len(data)].decode("utf-8", errors="replace")
            sub.append(text[:-1] if text.endswith("\r") else text)
            nos.append(line_no)
        prefixed, bare = _split_block(sub, nos, self.known_hosts)
        for row in prefixed.iter_rows(named=True):
            line_no = row["line_no"]
            msg: str = row["msg"]
            if row["level"] != "INFO":
                continue
            host, pid = row["host"], row["pid"]
            if msg.startswith("NCCL version"):
                vm = _VERSION_RE.match(msg)
                if vm and len(self.proc_versions) < MAX_PROCESSES:
                    self.proc_versions.setdefault((host, pid), vm.group("ver"))
                continue
            tag = _launcher_tag(row["pre"])
            if tag and (tag in self.tag_procs or len(self.tag_procs) < MAX_PROCESSES):
                procs = self.tag_procs[tag]
                if len(procs) < 2:  # only "exactly one process" matters (_assign_versions)
                    procs.add((host, pid))
            m = _INIT_RE.match(msg)
            kind = m.group("phase") if m else None
            if m is None:
                m = _END_RE.match(msg)
                kind = "END" if m else None
            if m is None or kind is None or not _init_fits(m.groupdict()):
                continue  # (numbers out of range: pass 2 rejects the line)
            if len(self.events) >= MAX_LIFECYCLE_EVENTS:  # pass 2 rejects it (REGISTRY_FULL)
                if self.full_from is None:
                    self.full_from = line_no
                continue
            fields = {k: v for k, v in m.groupdict().items() if v is not None}
            self.events.append(_Event(line_no, host, pid, row["tid"], kind, fields, row["spliced"]))
        for row in bare.iter_rows(named=True):
            bm = _BARE_VERSION_RE.match(row["raw"])
            if bm:
                pair = (_launcher_tag(bm.group("pre")), bm.group("ver"))
                # The first of each pair decides (_assign_versions): repeats add nothing.
                if pair not in self.bare_versions and len(self.bare_versions) < MAX_BARE_VERSIONS:
                    self.bare_versions.append(pair)

    # -- resume state ------------------------------------------------------------------------

    def raw_state(self) -> dict[str, Any]:
        """Pass 1's raw material as JSON-serialisable data (before :meth:`finalize`)."""
        return {
            "v": 1,
            "events": [
                [e.line_no, e.host, e.pid, e.tid, e.kind, e.fields, e.spliced] for e in self.events
            ],
            "known_hosts": sorted(self.known_hosts),
            "proc_versions": [[h, p, v] for (h, p), v in self.proc_versions.items()],
            "bare_versions": [list(t) for t in self.bare_versions],
            "tag_procs": {t: sorted([h, p] for h, p in ps) for t, ps in self.tag_procs.items()},
            "nccl_lines": self.nccl_lines,
            "full_from": self.full_from,
        }

    def restore(self, state: dict[str, Any]) -> None:
        """Start from the raw material of :meth:`raw_state` (an earlier parse's prefix)."""
        if state.get("v") != 1:
            return
        self.events = [
            _Event(int(n), str(h), int(p), int(t), str(k), dict(f), bool(sp))
            for n, h, p, t, k, f, sp in state.get("events", [])
        ]
        self.known_hosts = set(state.get("known_hosts", []))
        self.proc_versions = {(h, int(p)): v for h, p, v in state.get("proc_versions", [])}
        self.bare_versions = [(t, v) for t, v in state.get("bare_versions", [])]
        for tag, procs in state.get("tag_procs", {}).items():
            self.tag_procs[tag] = {(h, int(p)) for h, p in procs}
        self.nccl_lines = int(state.get("nccl_lines", 0))
        full_from = state.get("full_from")
        self.full_from = int(full_from) if full_from is not None else None

    # -- after pass 1 ------------------------------------------------------------------------

    def finalize(self) -> None:
        """Build incarnations, world size, global ranks, memberships and versions."""
        for ev in self.events:
            if ev.spliced:
                ev.host = _fix_host(ev.host, self.known_hosts)
        self.events.sort(key=lambda e: (e.host, e.pid, e.fields["comm"].lower(), e.line_no))
        open_inc: dict[tuple[str, int, str], _Inc] = {}
        last_close: dict[tuple[str, int, str], int] = {}
        for ev in self.events:
            comm = ev.fields["comm"].lower()
            key = (ev.host, ev.pid, comm)
            cur = open_inc.get(key)
            if ev.kind == "END":
                if cur is None:
                    cur = self._new_inc(ev, comm, last_close.get(key, 0) + 1)
                cur.end_line = ev.line_no
                open_inc.pop(key, None)
                last_close[key] = ev.line_no
                continue
            same = cur is not None and cur.rank == int(ev.fields["rank"])
            if ev.kind == "COMPLETE" and cur is not None and same and cur.complete_line is None:
                cur.complete_line = ev.line_no
                cur.init_tids.add(ev.tid)
                cur.comm_hash = cur.comm_hash or _lower(ev.fields.get("commid"))
                if cur.split_color is None:
                    cur.split_color = _int(ev.fields.get("color"))
                    cur.split_key = _int(ev.fields.get("key"))
                cur.parent = cur.parent or _lower(ev.fields.get("parent"))
                continue
            inc = self._new_inc(ev, comm, ev.line_no)
            inc.first_init_line = ev.line_no
            inc.init_tids.add(ev.tid)
            if ev.kind == "START":
                inc.has_start = True
            else:
                inc.complete_line = ev.line_no
            open_inc[key] = inc
        self.incs.sort(key=lambda i: (i.host, i.pid, i.window_start, i.comm))
        for inc in self.incs:
            self.by_proc.setdefault((inc.host, inc.pid), []).append(inc)
        self.world_size = max((i.nranks for i in self.incs), default=None)
        for proc, incs in self.by_proc.items():
            self._assign_global(proc, incs)
            self._link_parents(incs)
        for inc in self.incs:
            inc.ident = self._ident(inc)
        self._assign_versions()

    def _new_inc(self, ev: _Event, comm: str, window_start: int) -> _Inc:
        f = ev.fields
        inc = _Inc(
            host=ev.host,
            pid=ev.pid,
            comm=comm,
            rank=int(f["rank"]),
            nranks=int(f["nranks"]),
            cuda_dev=_int(f.get("cudadev")),
            nvml_dev=_int(f.get("nvmldev")),
            bus_id=_lower(f.get("busid")),
            comm_hash=_lower(f.get("commid")),
            parent=_lower(f.get("parent")),
            window_start=window_start,
            split_color=_int(f.get("color")),
            split_key=_int(f.get("key")),
        )
        self.incs.append(inc)
        return inc

    @staticmethod
    def _link_parents(incs: list[_Inc]) -> None:
        """Tie each split child to its parent's incarnation in the same process.

        The parent is the latest incarnation of the logged parent pointer that opened before the
        child and was not closed before it (a destroyed pointer may be reused by a later comm).
        Incarnations of each pointer are sorted once; each child costs O(log n).
        """
        by_comm: dict[str, list[_Inc]] = defaultdict(list)
        for i in incs:
            by_comm[i.comm].append(i)
        trees: dict[str, tuple[list[int], list[_Inc], _MaxTree]] = {}
        for inc in incs:
            if inc.parent is None or inc.parent not in by_comm:
                continue
            got = trees.get(inc.parent)
            if got is None:
                # ties on window_start: the first in ``incs`` order wins, as max() did
                order = sorted(
                    enumerate(by_comm[inc.parent]), key=lambda t: (t[1].window_start, -t[0])
                )
                ps = [p for _, p in order]
                got = trees[inc.parent] = (
                    [p.window_start for p in ps],
                    ps,
                    _MaxTree([_end_key(p) for p in ps]),
                )
            starts, ps, tree = got
            at = tree.rightmost_at_least(
                bisect.bisect_right(starts, inc.window_start), inc.window_start
            )
            if at >= 0 and ps[at] is inc:  # never its own parent: the next one before it
                at = tree.rightmost_at_least(at, inc.window_start)
            inc.parent_inc = ps[at] if at >= 0 else None

    @staticmethod
    def _ident(inc: _Inc) -> str | None:
        """Identity of a communicator, the same on every member (None when unknown).

        Its ``commId`` when logged; for a split child without one (NCCL 2.21+ split lines),
        ``split:<parent identity>/<parent nranks>:<color>``: the members of one child are
        exactly the ranks of one parent that passed the same color.
        """
        chain: list[_Inc] = []
        cur: _Inc | None = inc
        while cur is not None and cur.comm_hash is None and all(c is not cur for c in chain):
            chain.append(cur)
            cur = cur.parent_inc
        if cur is None or cur.comm_hash is None:
            return None
        ident = cur.comm_hash
        for child in reversed(chain):
            parent = child.parent_inc
            if parent is None or child.split_color is None:
                return None
            ident = f"split:{ident}/{parent.nranks}:{child.split_color}"
        return ident

    def _assign_global(self, proc: tuple[str, int], incs: list[_Inc]) -> None:
        worlds = [i for i in incs if i.nranks == self.world_size]
        ranks = {i.rank for i in worlds}
        if not worlds:
            return
        if len(ranks) == 1:
            self._single(proc, incs, worlds, worlds[0].rank)
            return
        devices = {(i.bus_id, i.cuda_dev) for i in worlds}
        if len(devices) < len(ranks):
            first = min(worlds, key=lambda i: i.window_start)
            self.warnings.append(
                f"{proc[0]}:{proc[1]} is in several world-size communicators with different "
                f"ranks on one device; global rank taken from the first ({first.rank})"
            )
            self._single(proc, incs, [i for i in worlds if i.rank == first.rank], first.rank)
            return
        for w in worlds:  # one process, several GPUs: per-incarnation global rank
            w.global_rank, w.identity_world = w.rank, True
        world_of = _WorldOf(incs, worlds)
        for inc in incs:
            if inc.global_rank is None:
                world = world_of(inc)
                inc.global_rank = world.rank if world else None

    def _single(
        self, proc: tuple[str, int], incs: list[_Inc], worlds: list[_Inc], rank: int
    ) -> None:
        self.proc_global[proc] = rank
        for inc in incs:
            inc.global_rank = rank
        for w in worlds:
            w.identity_world = True

    def _assign_versions(self) -> None:
        by_proc = dict(self.proc_versions)
        for tag, ver in self.bare_versions:
            procs = self.tag_procs.get(tag or "", set())
            if len(procs) == 1:
                by_proc.setdefault(next(iter(procs)), ver)
        procs_in_file = set(self.by_proc)
        if len(procs_in_file) == 1 and self.bare_versions:
            by_proc.setdefault(next(iter(procs_in_file)), self.bare_versions[0][1])
        host_versions: dict[str, set[str]] = defaultdict(set)
        for (host, _), ver in by_proc.items():
            host_versions[host].add(ver)
        distinct = set(self.proc_versions.values()) | {v for _, v in self.bare_versions}
        fallback = next(iter(distinct)) if len(distinct) == 1 else None
        inferred = 0
        for inc in self.incs:
            inc.nccl_version = by_proc.get((inc.host, inc.pid))
            if inc.nccl_version is None:
                on_host = host_versions.get(inc.host, set())
                inc.nccl_version = next(iter(on_host)) if len(on_host) == 1 else fallback
                inferred += inc.nccl_version is not None
        if inferred:
            self.warnings.append(
                f"nccl_version of {inferred} communicators inferred from other processes of the "
                "same host or file (those processes logged no version line themselves)"
            )

    # -- lookups used by pass 2 --------------------------------------------------------------

    def inc_frame(self) -> pl.DataFrame:
        """Incarnations as a frame for the as-of join of COLL lines."""
        schema = {
            "host": pl.Utf8,
            "pid": pl.Int64,
            "comm_key": pl.Utf8,
            "window_start": pl.Int64,
            "window_end": pl.Int64,
            "group_rank": pl.Int32,
            "inc_global": pl.Int32,
            "comm_hash": pl.Utf8,
            "identity_world": pl.Boolean,
        }
        rows = [
            {
                "host": i.host,
                "pid": i.pid,
                "comm_key": i.comm,
                "window_start": i.window_start,
                "window_end": i.end_line,
                "group_rank": i.rank,
                "inc_global": i.global_rank,
                "comm_hash": i.ident,
                "identity_world": i.identity_world,
            }
            for i in self.incs
        ]
        return pl.DataFrame(_fit_ints(rows, schema), schema=schema).sort("window_start")

    def proc_frame(self) -> pl.DataFrame:
        """Process-level global ranks (single-GPU processes)."""
        keys = list(self.proc_global)
        return pl.DataFrame(
            {
                "host": [k[0] for k in keys],
                "pid": [k[1] for k in keys],
                "proc_global": [self.proc_global[k] for k in keys],
                "proc_how": [self.proc_how.get(k, "logged") for k in keys],
            },
            schema={
                "host": pl.Utf8,
                "pid": pl.Int64,
                "proc_global": pl.Int32,
                "proc_how": pl.Utf8,
            },
            strict=False,  # a corrupt line's out-of-range number becomes null, never a crash
        )

    def attribute(
        self, host: str, pid: int, tid: int, line_no: int, me_rank: int | None, me_dev: str | None
    ) -> _Inc | None:
        """The incarnation a topology line of (host, pid, tid) at ``line_no`` belongs to.

        The rule (module docstring, topology) over the process's incarnations that match the
        line (its rank and device) and are live at it: on the line's thread the latest one
        whose Init START is at or before the line, else the earliest whose Init COMPLETE is at
        or after it; else, among those on the thread (if any) or all, the only one, else the
        latest by ``source_line`` at or before the line, else the earliest after it.
        Answered from :class:`_IncIndex` in O(log n) per line (n = incarnations of the
        process), with the same result as a scan of every incarnation.
        """
        if self._index is None:
            self._index = _IncIndex(self.incs)
        idx = self._index
        cands = idx.group(host, pid, None, me_rank, me_dev)
        if cands is None or cands.n_live(line_no) == 0:
            return None
        on_tid = idx.group(host, pid, tid, me_rank, me_dev)
        if on_tid is not None and on_tid.n_live(line_no):
            found = on_tid.latest_started(line_no) or on_tid.earliest_pending(line_no)
            if found is not None:
                return found
            cands = on_tid
        if cands.n_live(line_no) == 1:
            return cands.last_to_end
        return cands.latest_before(line_no) or cands.earliest_after(line_no)


_NEVER = 1 << 62
"""End line of an incarnation never destroyed (live at every later line)."""


def _end_key(inc: _Inc) -> int:
    return _NEVER if inc.end_line is None else inc.end_line


class _MaxTree:
    """Segment tree of maxima over a list of ints: the rightmost index below a bound whose
    value is at least ``x``, in O(log n) (``steps`` counts the nodes visited)."""

    def __init__(self, values: list[int]) -> None:
        size = 1
        while size < len(values):
            size *= 2
        self.size = size
        self.tree = [-1] * (2 * size)
        self.tree[size : size + len(values)] = values
        for i in range(size - 1, 0, -1):
            self.tree[i] = max(self.tree[2 * i], self.tree[2 * i + 1])
        self.steps = 0

    def rightmost_at_least(self, hi: int, x: int) -> int:
        """The largest ``i < hi`` with ``values[i] >= x``; -1 if none."""
        if hi <= 0:
            return -1
        tree, size = self.tree, self.size
        # Walk up from leaf hi - 1: each left sibling that holds a value >= x bounds the answer;
        # then descend into the rightmost qualifying child. Both walks are O(log n).
        i = hi - 1 + size
        while True:
            self.steps += 1
            if tree[i] >= x:
                break
            while i > 1 and i % 2 == 0:  # a left child: its left neighbours are not subtrees
                i //= 2
            if i <= 1:
                return -1
            i -= 1  # the subtree just left of the covered range
        while i < size:
            self.steps += 1
            i = 2 * i + 1 if tree[2 * i + 1] >= x else 2 * i
        return i - size


class _IncGroup:
    """The incarnations of one (host, pid[, tid][, rank][, device]) sorted three ways, with
    the trees and sorted ends that answer :meth:`_Registry.attribute`'s queries in O(log n)."""

    def __init__(self, incs: list[_Inc]) -> None:
        by_src = sorted(incs, key=lambda i: i.source_line)
        self.src_keys = [i.source_line for i in by_src]
        self.by_src = by_src
        self.src_tree = _MaxTree([_end_key(i) for i in by_src])
        started = sorted(
            (i for i in incs if i.has_start and i.first_init_line is not None),
            key=lambda i: i.first_init_line or 0,
        )
        self.start_keys = [i.first_init_line or 0 for i in started]
        self.started = started
        self.start_tree = _MaxTree([_end_key(i) for i in started])
        pending = sorted(
            (i for i in incs if i.complete_line is not None), key=lambda i: i.complete_line or 0
        )
        self.complete_keys = [i.complete_line or 0 for i in pending]
        self.pending = pending
        self.ends = sorted(_end_key(i) for i in incs)
        self.last_to_end = max(incs, key=_end_key) if incs else None

    @property
    def steps(self) -> int:
        return self.src_tree.steps + self.start_tree.steps

    def n_live(self, line_no: int) -> int:
        """How many are live at ``line_no`` (not destroyed before it)."""
        return len(self.ends) - bisect.bisect_left(self.ends, line_no)

    def latest_started(self, line_no: int) -> _Inc | None:
        """Latest Init START at or before ``line_no`` among those live at it."""
        hi = bisect.bisect_right(self.start_keys, line_no)
        at = self.start_tree.rightmost_at_least(hi, line_no)
        return self.started[at] if at >= 0 else None

    def earliest_pending(self, line_no: int) -> _Inc | None:
        """Earliest Init COMPLETE at or after ``line_no`` (live there: destroyed after it)."""
        at = bisect.bisect_left(self.complete_keys, line_no)
        return self.pending[at] if at < len(self.pending) else None

    def latest_before(self, line_no: int) -> _Inc | None:
        """Latest ``source_line`` at or before ``line_no`` among those live at it."""
        hi = bisect.bisect_right(self.src_keys, line_no)
        at = self.src_tree.rightmost_at_least(hi, line_no)
        return self.by_src[at] if at >= 0 else None

    def earliest_after(self, line_no: int) -> _Inc | None:
        """Earliest ``source_line`` after ``line_no`` (live there: it starts later)."""
        at = bisect.bisect_right(self.src_keys, line_no)
        return self.by_src[at] if at < len(self.by_src) else None


class _IncIndex:
    """Incarnations grouped by (host, pid, init tid or None, rank or None); device-filtered
    groups are derived from these on first use. Built in O(n) lists, each group sorted once."""

    def __init__(self, incs: list[_Inc]) -> None:
        lists: dict[tuple[str, int, int | None, int | None], list[_Inc]] = defaultdict(list)
        for inc in incs:
            for tid in (None, *sorted(inc.init_tids)):
                lists[(inc.host, inc.pid, tid, None)].append(inc)
                lists[(inc.host, inc.pid, tid, inc.rank)].append(inc)
        self.lists = dict(lists)
        self.groups: dict[tuple[str, int, int | None, int | None, str | None], _IncGroup] = {}

    @property
    def steps(self) -> int:
        """Tree nodes visited by all queries so far (the scale test's structural measure)."""
        return sum(g.steps for g in self.groups.values())

    def group(
        self, host: str, pid: int, tid: int | None, rank: int | None, dev: str | None
    ) -> _IncGroup | None:
        key = (host, pid, tid, rank, dev)
        got = self.groups.get(key)
        if got is None:
            incs = self.lists.get((host, pid, tid, rank))
            if incs is None:
                return None
            if dev is not None:
                incs = [i for i in incs if _dev_matches(i, dev)]
            got = self.groups[key] = _IncGroup(incs)
        return got


def _int(text: str | None) -> int | None:
    """The integer of a matched digit run; None when absent or beyond int64 (corrupt)."""
    if text is None or len(text) > 19:
        return None
    v = int(text)
    return v if -(2**63) <= v < 2**63 else None


_INIT_NUMBERS = ("rank", "nranks", "cudadev", "nvmldev")
"""Init/Destroy numbers stored as int32 (ranks, counts, devices)."""
_SPLIT_NUMBERS = ("color", "key")
"""ncclCommSplit's color and key: C ints, stored as int64 (split_color, split_key). PyTorch passes
a hash of the group's ranks as the color, often 10 digits (``color 2130503744``, NCCL 2.28.9 via
torch 2.11), so a digit count is not a range check."""


def _init_fits(fields: dict[str, Any]) -> bool:
    """Whether an Init/Destroy line's numbers fit their columns (int32; color/key int32 as in C)."""
    for name in (*_INIT_NUMBERS, *_SPLIT_NUMBERS):
        v = fields.get(name)
        if v is not None and (len(v.lstrip("-")) > 10 or not -(2**31) <= int(v) < 2**31):
            return False
    return True


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


def _dev_matches(inc: _Inc, dev: str) -> bool:
    """Does the ``[x]`` of a connection line (busId hex <= 2.18, nvmlDev 2.19+) fit ``inc``?"""
    if inc.bus_id is not None and dev.lower().lstrip("0") == inc.bus_id.lstrip("0"):
        return True
    if dev.isdigit():
        n = int(dev)
        return n in (inc.nvml_dev, inc.cuda_dev)
    return False


# --------------------------------------------------------------------------------------------
# Topology lines (rare: per-line Python)
# --------------------------------------------------------------------------------------------


@dataclass
class _Topo:
    """A parsed topology line, waiting for the end of the file to be attributed."""

    line_no: int
    host: str
    pid: int
    tid: int
    me_rank: int | None
    me_dev: str | None
    rows: list[dict[str, Any]]
    ring_order: list[int] | None = None
    ring_order_cut: bool = False
    channel: int | None = None


def _transport(detail: str) -> str:
    """Normalise the text after ``via`` to a transport name."""
    if detail.startswith("direct shared memory") or detail.startswith("SHM"):
        return "SHM"
    parts = detail.split("/")
    if parts[0] in {"P2P", "NET", "COLLNET"} and len(parts) > 1:
        return f"{parts[0]}/{parts[1]}"
    return parts[0]


def _edge(kind: str, ch: int, rank: int, peer: int, direction: str) -> dict[str, Any]:
    return {"kind": kind, "channel": ch, "rank": rank, "peer_rank": peer, "direction": direction}


def _parse_topology(msg: str, cut: bool) -> tuple[list[dict[str, Any]], dict[str, Any]] | None:
    """Parse one topology message into rows; None if it does not fit any topology pattern.

    Args:
        msg: the message after the NCCL prefix.
        cut: the line reached NCCL's 1023-character limit (its last item may be cut).

    Returns:
        ``(rows, info)`` with ``info`` holding ``me_rank``, ``me_dev`` and, for ring-order lines,
        ``ring_order``/``ring_order_cut``/``channel``.
    """
    m = _RING_RE.match(msg)
    if m:
        ch, me = int(m["ch"]), int(m["me"])
        rows = [
            _edge("ring", ch, me, int(m["prev"]), "prev"),
            _edge("ring", ch, me, int(m["next"]), "next"),
        ]
        return [r for r in rows if r["peer_rank"] >= 0], {"me_rank": me}
    m = _CONN_RE.match(msg)
    if m:
        src, dst, recv = int(m["src"]), int(m["dst"]), m["dir"] == "receive"
        me, peer = (dst, src) if recv else (src, dst)
        detail = m["detail"]
        row = _edge("p2p", int(m["ch"]), me, peer, "recv" if recv else "send")
        row.update(transport=_transport(detail), transport_detail=detail)
        return [row], {"me_rank": me, "me_dev": m["dstdev"] if recv else m["srcdev"]}
    m = _RING_ORDER_RE.match(msg)
    if m:
        ranks = [int(x) for x in m["ranks"].split()]
        info = {
            "me_rank": 0,
            "ring_order": ranks,
            "ring_order_cut": bool(m["trunc"]),
            "channel": int(m["ch"]),
        }
        return [], info
    m = _TREE_RE.match(msg)
    if m:
        ch, me = int(m["ch"]), int(m["me"])
        rows = [_edge("tree", ch, me, int(m["up"]), "up")]
        rows += [_edge("tree", ch, me, int(m[d]), "down") for d in ("d0", "d1", "d2")]
        return [r for r in rows if r["peer_rank"] >= 0], {"me_rank": me}
    if msg.startswith("Trees"):
        return _parse_trees(msg, cut)
    m = _NVLS_TREES_RE.match(msg)
    if m:
        rows = []
        me = None
        for ch, part in enumerate((m["t0"], m["t1"])):
            pm = _NVLS_TREE_PART_RE.match(part)
            if pm is None:
                return None
            me = int(pm["me"])
            rows.append(_edge("nvls", ch, me, int(pm["up"]), "up"))
            rows += [_edge("nvls", ch, me, int(d), "down") for d in pm["downs"].split("/")]
        return [r for r in rows if r["peer_rank"] >= 0], {"me_rank": me}
    m = _NVLS_HEAD_RE.match(msg)
    if m:
        h = int(m["h"])
        heads = [int(x) for x in m["ranks"].split()]
        return [_edge("nvls", h, r, node, "position") for node, r in enumerate(heads) if r >= 0], {}
    m = _COLLNET_RE.match(msg)
    if m:
        me, detail = int(m["me"]), m["detail"]
        row = {
            "kind": "collnet",
            "channel": int(m["ch"]),
            "rank": me,
            "peer_rank": None,
            "direction": "recv" if m["dir"] == "receive" else "send",
            "transport": _transport(detail),
            "transport_detail": detail,
        }
        return [row], {"me_rank": me}
    return None


def _parse_trees(msg: str, cut: bool) -> tuple[list[dict[str, Any]], dict[str, Any]] | None:
    items = list(_TREES_ITEM_RE.finditer(msg, 5))
    if cut and items and items[-1].end() == len(msg.rstrip()):
        items = items[:-1]  # its last number may have lost digits at the line limit
    rows: list[dict[str, Any]] = []
    me = None
    for it in items:
        ch = int(it["ch"])
        if it["me"] is not None:
            me, up, downs = int(it["me"]), int(it["up"]), (it["d0"], it["d1"], it["d2"])
        else:  # NCCL 2.4: up->me->d0/d1/d2
            me, up, downs = int(it["me4"]), int(it["up4"]), (it["e0"], it["e1"], it["e2"])
        rows.append(_edge("tree", ch, me, up, "up"))
        rows += [_edge("tree", ch, me, int(d), "down") for d in downs]
    if not items:
        return None
    return [r for r in rows if r["peer_rank"] >= 0], {"me_rank": me}


def _ring_order_rows(
    ranks: list[int], ch: int, cut: bool, nranks: int | None
) -> list[dict[str, Any]]:
    """Position rows plus derived next/prev neighbours of a rank-0 ring-order line."""
    rows = [_edge("ring_order", ch, r, pos, "position") for pos, r in enumerate(ranks)]
    for a, b in itertools.pairwise(ranks):
        rows += [_edge("ring_order", ch, a, b, "next"), _edge("ring_order", ch, b, a, "prev")]
    if nranks is not None:
        complete = not cut and len(ranks) == nranks
    else:
        complete = not cut and len(ranks) < RING_ORDER_CAP
    if complete and len(ranks) >= 2 and len(set(ranks)) == len(ranks):
        rows += [
            _edge("ring_order", ch, ranks[-1], ranks[0], "next"),
            _edge("ring_order", ch, ranks[0], ranks[-1], "prev"),
        ]
    return rows


# --------------------------------------------------------------------------------------------
# The parser
# --------------------------------------------------------------------------------------------


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


@register
class NcclDebugParser:
    """Parser for NCCL debug output (see the module docstring)."""

    name: ClassVar[str] = "nccl_debug"
    version: ClassVar[str] = "1.1.0"
    resumable: ClassVar[bool] = True

    def sniff(self, head: bytes, path: Path) -> int:
        """Confidence that ``head`` is NCCL debug output: share of NCCL-prefixed lines."""
        text = head.decode("utf-8", errors="replace")
        lines = text.splitlines()[:2000]
        if not lines:
            return 0
        n = sum(1 for ln in lines if "NCCL " in ln and _PREFIX_RE.search(ln))
        if n == 0:
            return 20 if any(_BARE_VERSION_RE.match(ln) for ln in lines) else 0
        share = n / len(lines)
        score = 90 if share >= 0.2 else 70 if "opCount " in text else 45
        return min(100, score + (5 if "nccl" in path.name.lower() else 0))

    def parse(
        self,
        source: Source,
        *,
        run_id: str,
        rank: int | None = None,
        resume: dict[str, Any] | None = None,
    ) -> Iterator[ParsedChunk]:
        """Yield one chunk of comm_ops (and rejects) per block, then communicators + topology.

        Args:
            source: the file (or byte range) to parse.
            run_id: training run identifier (rows leave it to ingest).
            rank: global rank of the file's process when the caller knows it; fills only
                global ranks the file itself does not establish.
            resume: the ``state`` of the last chunk of the parse of the bytes before
                ``source.start_offset`` (incremental ingest; module docstring).

        Raises:
            ParseError: the file is unreadable, or has lines but no NCCL output at all.
        """
        del run_id
        reg = _Registry()
        if resume:
            reg.restore(resume)
        total = 0
        for raw in iter_byte_blocks(source):
            if raw.complete:  # a final line cut mid-way is rejected in pass 2, not used
                reg.scan(raw.data, raw.first_line_no)
            else:
                reg.nccl_lines += b"NCCL " in raw.data
            total += 1  # only "any line at all" matters here
        if total and reg.nccl_lines == 0 and source.start_offset == 0:
            raise ParseError(
                source.path, "no NCCL debug output (no 'host:pid:tid [dev] NCCL' line)"
            )
        raw_state = reg.raw_state()
        reg.finalize()
        if not reg.incs:  # no Init/Destroy line: infer what the COLL lines show (rank_source)
            summary = _coll_summary(source, reg, resume)
            raw_state["coll_summary"] = summary.state()
            inferred, notes = infer_ranks(summary)
            for proc, (r, how) in inferred.items():
                reg.proc_global[proc], reg.proc_how[proc] = r, how
            reg.warnings.extend(notes)
        state = _Pass2(reg, rank, resume)
        for block in iter_line_blocks(source):
            yield state.block(block.series, block.first_line_no, block.complete, block.overlong)
        last = state.finish()
        last.state = {**raw_state, **state.emitted_state()}
        yield last


def _coll_summary(source: Source, reg: _Registry, resume: dict[str, Any] | None) -> CollSummary:
    """Per-process comm sizes, devices and Send/Recv roots of the COLL lines (one more pass).

    Run only for a file without Init/Destroy lines (:mod:`parsers._nccl_rank_infer`); a resumed
    parse starts from the summary of the bytes before (its state), so the ranks it infers are
    those of the whole file.
    """
    summary = CollSummary.from_state((resume or {}).get("coll_summary"))
    hosts = set(reg.known_hosts)
    cols = ("host", "pid", "dev", "raw_op", "comm_id", "group_size", "root")
    for block in iter_line_blocks(source):
        lines = block.series
        if not block.complete and len(lines):  # a cut final line is no record
            lines = lines.head(len(lines) - 1)
        numbers = pl.int_range(
            block.first_line_no, block.first_line_no + len(lines), dtype=pl.Int64, eager=True
        )
        mask = plain_coll_mask(lines)
        if mask.any():
            plain = plain_coll_rows(lines.filter(mask), numbers.filter(mask))
            summary.add(plain.select(*cols))
        prefixed, _ = _split_block(lines.filter(~mask), numbers.filter(~mask), hosts)
        coll = prefixed.filter(
            (pl.col("level") == "INFO") & pl.col("msg").str.contains(_COLL)
        ).with_columns(f=pl.col("msg").str.split(" "))
        if coll.height:
            fields = coll_field_exprs(pl.col("f").list.get)
            summary.add(
                coll.select(
                    "host",
                    "pid",
                    pl.col("dev").cast(pl.Int32),
                    *(fields[c].alias(c) for c in cols[3:]),
                )
            )
    return summary


class _Pass2:
    """Row emission, block by block, with what pass 1 learnt."""

    def __init__(
        self, reg: _Registry, rank: int | None, resume: dict[str, Any] | None = None
    ) -> None:
        self.reg = reg
        self.rank = rank
        self.incs = reg.inc_frame()
        self.procs = reg.proc_frame()
        self.known_hosts = set(reg.known_hosts)
        prior = resume if resume and resume.get("v") == 1 else {}
        _add_hosts(self.known_hosts, list(prior.get("pass2_hosts", [])))
        self.emitted_comms: dict[str, str] = dict(prior.get("comms", {}))
        self.emitted_topo: set[str] = set(prior.get("topo", []))
        self.n_changed = 0
        self.topo: list[_Topo] = []  # topology lines of the current block
        self.topo_pending = 0  # at most this many rows in ``topo`` are new
        self.topo_frames: list[pl.DataFrame] = []  # rows of the block's earlier batches
        self.n_registry_full = 0
        self.n_topology_full = 0
        self.n_spliced = 0
        self.n_unknown_comm = 0
        self.n_tuning = 0
        self.n_tuned = 0

    # -- one block ---------------------------------------------------------------------------

    def block(
        self,
        lines: pl.Series,
        first_line_no: int,
        complete: bool,
        overlong: tuple[LongLine, ...] = (),
    ) -> ParsedChunk:
        """Rows, rejects and line accounting of one block of lines.

        Plain COLL lines (most of a log) are parsed from their tokens
        (:mod:`parsers._nccl_coll_fields`); only the other lines go through the general path.
        Lines over ``parsers._io.MAX_LINE_BYTES`` (``overlong``) come as empty lines, which no
        path takes; each is rejected here with its reason.
        """
        n_lines = len(lines)
        cut_line = first_line_no + n_lines - 1 if not complete else None
        numbers = pl.int_range(first_line_no, first_line_no + n_lines, dtype=pl.Int64, eager=True)
        mask = plain_coll_mask(lines)
        if cut_line is not None:  # a cut line is rejected by the general path
            mask = mask.scatter(n_lines - 1, False)
        plain: pl.DataFrame | None = None
        if mask.any():
            plain = plain_coll_rows(lines.filter(mask), numbers.filter(mask))
            _add_hosts(self.known_hosts, plain["host"].unique().to_list())
            rest = ~mask
            prefixed, bare = _split_block(
                lines.filter(rest), numbers.filter(rest), self.known_hosts
            )
        else:
            prefixed, bare = _split_block(lines, first_line_no, self.known_hosts)
        cut = cut_line if cut_line is not None else -1
        self.n_spliced += int(prefixed["spliced"].sum() or 0)
        info = prefixed.filter(pl.col("level") == "INFO")
        rejects: list[tuple[int, str, str]] = []  # (line_no, raw, reason)
        cut_reason = "final line has no newline (file cut mid-line)"

        coll = info.filter(pl.col("msg").str.contains(_COLL_LIKE)).with_columns(
            fits=pl.col("msg").str.contains(_COLL)
        )
        good = coll.filter(pl.col("fits") & (pl.col("line_no") != cut))
        for line_no, raw in (
            coll.filter(~pl.col("fits") | (pl.col("line_no") == cut))
            .select("line_no", "raw")
            .iter_rows()
        ):
            why = cut_reason if line_no == cut else "COLL line does not fit its pattern (cut?)"
            rejects.append((line_no, raw, why))

        n_parsed = good.height + (plain.height if plain is not None else 0)
        others = info.filter(
            pl.col("msg").str.contains(f"{_INIT_LIKE}|{_TOPO_LIKE}")
            & ~pl.col("msg").str.contains(_COLL_LIKE)
        )
        for row in others.iter_rows(named=True):
            why = self._other(row, cut_line)
            if why is None:
                n_parsed += 1
            else:
                rejects.append((row["line_no"], row["raw"], why))

        decided = {r[0] for r in rejects} | set(others["line_no"].to_list())
        lost = prefixed.filter(pl.col("spliced") & pl.col("frag_kind").is_not_null()).join(
            good.select("line_no"), on="line_no", how="anti"
        )
        for line_no, raw, kind in lost.select("line_no", "raw", "frag_kind").iter_rows():
            if line_no not in decided:
                rejects.append((line_no, raw, f"spliced line: {kind} record cut by another writer"))
        bare_records = bare.filter(pl.col("raw").str.contains(_BARE_RECORD))
        for line_no, raw in bare_records.select("line_no", "raw").iter_rows():
            why = cut_reason if line_no == cut else "NCCL record without its host:pid:tid prefix"
            rejects.append((line_no, raw, why))

        rejects.extend((ln.line_no, ln.raw, ln.reason) for ln in overlong)
        tables = {"comm_ops": self._comm_ops(good, info, plain)}
        if self.topo:  # attributed now (the registry is complete): nothing held to the end
            self.topo_frames.append(self._topology())
        if self.topo_frames:
            tables["topology"] = pl.concat(self.topo_frames)
            self.topo_frames = []
        if rejects:
            rejects.sort()
            tables["rejects"] = pl.DataFrame(
                [(ln, raw[:_MAX_RAW], why) for ln, raw, why in rejects],
                schema={"line_no": pl.Int64, "raw": pl.Utf8, "reason": pl.Utf8},
                orient="row",
            )
        n_rej = len(rejects)
        counts = LineCounts(
            total=len(lines),
            parsed=n_parsed,
            rejected=n_rej,
            ignored=len(lines) - n_parsed - n_rej,
        )
        return ParsedChunk(tables=tables, counts=counts)

    def _other(self, row: dict[str, Any], cut_line: int | None) -> str | None:
        """Classify an Init/Destroy or topology line; store topology; return status."""
        msg: str = row["msg"]
        line_no: int = row["line_no"]
        if line_no == cut_line:
            return "final line has no newline (file cut mid-line)"
        if re.match(_INIT_LIKE, msg):
            m = _INIT_RE.match(msg) or _END_RE.match(msg)
            if m is not None and not _init_fits(m.groupdict()):
                return "Init/Destroy line: a rank, count or device number is out of range"
            if m is not None:
                full_from = self.reg.full_from
                if full_from is not None and line_no >= full_from:  # pass 1 did not keep it
                    self.n_registry_full += 1
                    return REGISTRY_FULL
                return None
            return "Init/Destroy line does not fit its pattern (truncated or spliced)"
        nccl_len = len(row["raw"]) - len(row["pre"] or "")
        try:
            parsed = _parse_topology(msg, nccl_len >= LINE_LIMIT)
        except ValueError:  # int() of a 4,300+ digit run (a corrupt line)
            return "topology line: a number is out of range"
        if parsed is None:
            return "topology line does not fit any topology pattern (truncated or spliced)"
        rows, extra = parsed
        ring = extra.get("ring_order")
        n_rows = len(rows) + (3 * len(ring) + 2 if ring is not None else 0)
        if len(self.emitted_topo) + self.topo_pending + n_rows > MAX_TOPOLOGY_ROWS:
            self.n_topology_full += 1
            return TOPOLOGY_FULL
        self.topo_pending += n_rows
        self.topo.append(
            _Topo(
                line_no=line_no,
                host=row["host"],
                pid=row["pid"],
                tid=row["tid"],
                me_rank=extra.get("me_rank"),
                me_dev=extra.get("me_dev"),
                rows=rows,
                ring_order=extra.get("ring_order"),
                ring_order_cut=extra.get("ring_order_cut", False),
                channel=extra.get("channel"),
            )
        )
        if len(self.topo) >= _TOPO_BATCH:  # rows as a frame: far smaller than the line objects
            self.topo_frames.append(self._topology())
        return None

    def _comm_ops(
        self, good: pl.DataFrame, info: pl.DataFrame, plain: pl.DataFrame | None
    ) -> pl.DataFrame:
        """Build comm_ops rows of a block from its well-formed COLL lines.

        ``good`` are the COLL lines of the general path (message in ``msg``), ``plain`` those
        already split into tokens; both map tokens to columns with ``coll_field_exprs``.
        """
        dt_names = {k: v[0] for k, v in enums.DTYPES.items()}
        dt_sizes = {k: v[1] for k, v in enums.DTYPES.items()}
        # The full COLL pattern matched, so the fields sit at fixed space-separated positions.
        fields = good.with_columns(f=pl.col("msg").str.split(" ")).select(
            source_line=pl.col("line_no"),
            host=pl.col("host"),
            pid=pl.col("pid"),
            tid=pl.col("tid"),
            cuda_dev=pl.col("dev"),
            ts_ns=_ts_ns_expr(),
            **coll_field_exprs(pl.col("f").list.get),
        )
        if plain is not None and plain.height:
            fields = pl.concat(
                [
                    fields,
                    plain.select(
                        pl.col("line_no").alias("source_line"),
                        "host",
                        "pid",
                        "tid",
                        pl.col("dev").alias("cuda_dev"),
                        pl.lit(None, dtype=pl.Int64).alias("ts_ns"),
                        *fields.columns[6:],
                    ),
                ]
            )
        df = fields.with_columns(
            op=pl.col("raw_op").replace_strict(enums.OPS, default="other", return_dtype=pl.Utf8),
            dtype=pl.col("dtype_code")
            .replace_strict(dt_names, default=None, return_dtype=pl.Utf8)
            .fill_null(pl.format("dtype_{}", pl.col("dtype_code"))),
            # the canonical size (parsers/schema.py): NCCL's native AlltoAll (2.28+) logs the
            # per-peer count, the whole send buffer is count x nranks
            msg_bytes=pl.col("count")
            * pl.col("dtype_code").replace_strict(dt_sizes, default=None, return_dtype=pl.Int64)
            * pl.when(pl.col("raw_op") == "AlltoAll")
            .then(pl.col("group_size").cast(pl.Int64))
            .otherwise(1),
            redop=pl.when(pl.col("raw_op").is_in(list(enums.REDUCING_OPS)))
            .then(
                pl.col("redop_code")
                .replace_strict(enums.REDOPS, default=None, return_dtype=pl.Utf8)
                .fill_null(pl.format("user_{}", pl.col("redop_code")))
            )
            .otherwise(None),
            peer_comm=pl.when(pl.col("raw_op").is_in(list(enums.ROOTED_OPS)))
            .then(pl.col("root"))
            .otherwise(None),
        )
        df = df.sort("source_line").join_asof(
            self.incs,
            left_on="source_line",
            right_on="window_start",
            by_left=["host", "pid", "comm_id"],
            by_right=["host", "pid", "comm_key"],
            strategy="backward",
            check_sortedness=False,
        )
        in_window = pl.col("window_end").is_null() | (pl.col("source_line") <= pl.col("window_end"))
        matched = pl.col("window_start").is_not_null() & in_window
        df = df.with_columns(
            [
                pl.when(matched).then(pl.col(c)).otherwise(None).alias(c)
                for c in ("group_rank", "inc_global", "comm_hash", "identity_world")
            ]
        )
        self.n_unknown_comm += int(df["group_rank"].null_count())
        df = df.join(self.procs, on=["host", "pid"], how="left")
        fallback = pl.lit(self.rank, dtype=pl.Int32)
        df = df.with_columns(
            rank=pl.coalesce("inc_global", "proc_global", fallback),
            # how the rank is known (schema 1.6.0): an Init line, a rule of
            # parsers/_nccl_rank_infer.py, or the caller's rank option
            rank_source=pl.when(pl.col("inc_global").is_not_null())
            .then(pl.lit("logged"))
            .when(pl.col("proc_global").is_not_null())
            .then(pl.col("proc_how"))
            .when(fallback.is_not_null())
            .then(pl.lit("option")),
            peer_rank=pl.col("peer_comm"),
        ).sort("source_line")
        return self._tuning(df, info).select(
            "rank",
            "rank_source",
            "host",
            "pid",
            "tid",
            "source_line",
            "op",
            "raw_op",
            "comm_id",
            "group_size",
            "group_rank",
            "peer_rank",
            "count",
            "dtype",
            "msg_bytes",
            "seq",
            "ts_ns",
            "algorithm",
            "protocol",
            "redop",
            "stream",
            "cuda_dev",
            # Constant columns, set once on the block's frame (issue 16): NCCL logs no
            # duration, and a COLL line names its communicator's size ([nranks=N]).
            pl.lit("none").alias("timing_source"),
            pl.when(pl.col("group_size").is_not_null())
            .then(pl.lit("logged"))
            .alias("group_source"),
        )

    def _tuning(self, ops: pl.DataFrame, info: pl.DataFrame) -> pl.DataFrame:
        """Pair TUNING lines with COLL rows of the block; return ``ops`` with algorithm/protocol.

        Algorithm: first-in-first-out per key (host, pid, tid, bytes, op), like matching
        brackets. Events of a key are taken in line order; a TUNING line pairs with the oldest
        unpaired candidate before it, and is left unpaired when none is pending (its COLL line
        lies before the block or the file). With d = #TUNING - #COLL so far, a TUNING line is
        unpaired exactly when it raises the running maximum of d above 0; otherwise it pairs
        with candidate number (#TUNING so far - #unpaired so far). Candidates are COLL rows
        whose comm rank is 0 or unknown (TUNING is logged by comm rank 0 only); a candidate is
        listed under ``count x size`` and, for AllGather/ReduceScatter, also under
        ``count x size x nranks`` (2.20-2.23 log the whole buffer), and under its op name and
        under ``*`` (2.20-2.22 lines name no op).
        """
        ops = ops.with_row_index("i")
        tune = (
            info.filter(pl.col("msg").str.contains(" Bytes -> Algo ", literal=True))
            .with_columns(g=pl.col("msg").str.extract_groups(_TUNE))
            .unnest("g")
            # A size too large for Int64 (a corrupt line) is no size, not a crash.
            .with_columns(bytes=pl.col("bytes").cast(pl.Int64, strict=False))
            .filter(pl.col("bytes").is_not_null())
        )
        self.n_tuning += tune.height
        if tune.height == 0 or ops.height == 0:
            return ops.drop("i").with_columns(
                algorithm=pl.lit(None, dtype=pl.Utf8), protocol=pl.lit(None, dtype=pl.Utf8)
            )
        key = ["host", "pid", "tid", "bytes", "op_key"]
        cand = ops.filter(
            pl.col("msg_bytes").is_not_null()
            & (pl.col("group_rank").is_null() | (pl.col("group_rank") == 0))
        ).select(
            "i",
            line="source_line",
            host="host",
            pid="pid",
            tid="tid",
            raw_op="raw_op",
            bytes="msg_bytes",
            size="group_size",
        )
        whole = cand.filter(
            pl.col("raw_op").is_in(["AllGather", "ReduceScatter"]) & (pl.col("size") > 1)
        ).with_columns(bytes=pl.col("bytes") * pl.col("size"))
        variants = pl.concat([cand, whole])
        cands = pl.concat(
            [
                variants.with_columns(op_key=pl.col("raw_op")),
                variants.with_columns(op_key=pl.lit("*")),
            ]
        ).select("i", "line", *key, is_t=pl.lit(0, dtype=pl.Int64))
        tl = tune.select(
            line="line_no",
            host="host",
            pid="pid",
            tid="tid",
            bytes=pl.col("bytes").cast(pl.Int64),
            op_key=pl.col("func").fill_null("*"),
            is_t=pl.lit(1, dtype=pl.Int64),
            algorithm=pl.col("algo")
            .replace({str(k): v for k, v in enums.ALGOS.items()})
            .str.to_uppercase(),
            protocol=pl.col("proto")
            .replace({str(k): v for k, v in enums.PROTOS.items()})
            .str.to_uppercase(),
        )
        ev = (
            pl.concat([cands, tl], how="diagonal")
            .sort("line", "is_t")
            .with_columns(
                n_t=pl.col("is_t").cum_sum().over(key),
                n_c=(1 - pl.col("is_t")).cum_sum().over(key),
            )
            .with_columns(under=(pl.col("n_t") - pl.col("n_c")).cum_max().clip(0).over(key))
            .with_columns(
                under_prev=pl.col("under").shift(1, fill_value=0).over(key),
            )
        )
        c_idx = ev.filter(pl.col("is_t") == 0).select("i", "line", *key, m=pl.col("n_c") - 1)
        t_idx = ev.filter((pl.col("is_t") == 1) & (pl.col("under") == pl.col("under_prev"))).select(
            *key, "algorithm", "protocol", tline="line", m=pl.col("n_t") - pl.col("under") - 1
        )
        pairs = (
            c_idx.join(t_idx, on=[*key, "m"], how="inner")
            .sort("tline")
            .unique(subset="i", keep="first")
            .select("i", "algorithm", "protocol")
        )
        self.n_tuned += pairs.height
        return ops.join(pairs, on="i", how="left").sort("i").drop("i")

    # -- end of file -------------------------------------------------------------------------

    def finish(self) -> ParsedChunk:
        reg = self.reg
        comm_schema: dict[str, Any] = {
            "comm_id": pl.Utf8,
            "rank": pl.Int32,
            "nranks": pl.Int32,
            "global_rank": pl.Int32,
            "host": pl.Utf8,
            "pid": pl.Int64,
            "cuda_dev": pl.Int32,
            "nvml_dev": pl.Int32,
            "bus_id": pl.Utf8,
            "comm_hash": pl.Utf8,
            "parent_comm_id": pl.Utf8,
            "parent_comm_hash": pl.Utf8,
            "parent_nranks": pl.Int32,
            "split_color": pl.Int64,
            "split_key": pl.Int64,
            "nccl_version": pl.Utf8,
            "source_line": pl.Int64,
        }
        comm_rows = [
            {
                "comm_id": i.comm,
                "rank": i.rank,
                "nranks": i.nranks,
                "global_rank": i.global_rank if i.global_rank is not None else self.rank,
                "host": i.host,
                "pid": i.pid,
                "cuda_dev": i.cuda_dev,
                "nvml_dev": i.nvml_dev,
                "bus_id": i.bus_id,
                "comm_hash": i.comm_hash,
                "parent_comm_id": i.parent,
                "parent_comm_hash": i.parent_inc.ident if i.parent_inc else None,
                "parent_nranks": i.parent_inc.nranks if i.parent_inc else None,
                "split_color": i.split_color,
                "split_key": i.split_key,
                "nccl_version": i.nccl_version,
                "source_line": i.source_line,
            }
            for i in reg.incs
        ]
        comms = pl.DataFrame(_fit_ints(comm_rows, comm_schema), schema=comm_schema).sort(
            "source_line"
        )
        comms = self._new_rows(comms)
        warnings = list(reg.warnings)
        if self.n_registry_full:
            warnings.append(
                f"{self.n_registry_full} Init/Destroy lines from line {reg.full_from} on rejected: "
                f"more than {MAX_LIFECYCLE_EVENTS} communicator lifecycle lines in one file"
            )
        if self.n_topology_full:
            warnings.append(
                f"{self.n_topology_full} topology lines rejected: more than {MAX_TOPOLOGY_ROWS} "
                "distinct topology rows in one file"
            )
        if self.n_changed:
            warnings.append(
                f"{self.n_changed} communicators stored by an earlier ingest of this file would "
                "read differently with the appended lines; the stored rows are kept"
            )
        if self.n_spliced:
            warnings.append(
                f"{self.n_spliced} lines carry output of several writers; the last NCCL prefix "
                "of each was used"
            )
        if self.n_unknown_comm:
            warnings.append(
                f"{self.n_unknown_comm} COLL lines on communicators with no Init/Destroy line in "
                "the file: group_rank null, global rank from the process only"
            )
        if self.n_tuning > self.n_tuned:
            warnings.append(
                f"{self.n_tuning - self.n_tuned} of {self.n_tuning} TUNING lines could not be "
                "attributed to a COLL line"
            )
        return ParsedChunk(
            tables={"communicators": comms, "topology": self._topology()}, warnings=warnings
        )

    def _new_rows(self, comms: pl.DataFrame) -> pl.DataFrame:
        """Drop communicators rows emitted by the parse this one resumes; remember the rest."""
        keep: list[bool] = []
        for row in comms.iter_rows(named=True):
            ident = f"{row['host']}\0{row['pid']}\0{row['comm_id']}\0{row['source_line']}"
            fp = _fingerprint(row)
            before = self.emitted_comms.get(ident)
            keep.append(before is None)
            if before is None:
                self.emitted_comms[ident] = fp
            elif before != fp:
                self.n_changed += 1
        return comms.filter(pl.Series(keep, dtype=pl.Boolean)) if keep else comms

    def emitted_state(self) -> dict[str, Any]:
        """Fingerprints of emitted rows and pass-2 hosts (for a resumed parse)."""
        return {
            "pass2_hosts": sorted(self.known_hosts),
            "comms": self.emitted_comms,
            "topo": sorted(self.emitted_topo),
        }

    def _topology(self) -> pl.DataFrame:
        """Rows of the topology lines in ``topo`` not emitted before (then ``topo`` is empty)."""
        rows: list[dict[str, Any]] = []
        topo, self.topo, self.topo_pending = self.topo, [], 0
        for t in topo:
            inc = self.reg.attribute(t.host, t.pid, t.tid, t.line_no, t.me_rank, t.me_dev)
            edges = t.rows
            if t.ring_order is not None and t.channel is not None:
                nranks = inc.nranks if inc is not None else None
                edges = _ring_order_rows(t.ring_order, t.channel, t.ring_order_cut, nranks)
            for e in edges:
                rows.append(
                    {
                        "comm_id": inc.comm if inc is not None else None,
                        "host": t.host,
                        "pid": t.pid,
                        "source_line": t.line_no,
                        "transport": None,
                        "transport_detail": None,
                        **e,
                    }
                )
        schema = {
            "comm_id": pl.Utf8,
            "rank": pl.Int32,
            "kind": pl.Utf8,
            "channel": pl.Int32,
            "peer_rank": pl.Int32,
            "direction": pl.Utf8,
            "transport": pl.Utf8,
            "transport_detail": pl.Utf8,
            "host": pl.Utf8,
            "pid": pl.Int64,
            "source_line": pl.Int64,
        }
        df = pl.DataFrame(_fit_ints(rows, schema), schema=schema)
        key = [c for c in schema if c != "source_line" and c != "transport"]
        df = df.unique(subset=key, keep="first", maintain_order=True)
        if df.is_empty():
            return df
        fps = [_fingerprint(r) for r in df.select(key).iter_rows(named=True)]
        new = pl.Series([fp not in self.emitted_topo for fp in fps], dtype=pl.Boolean)
        self.emitted_topo.update(fps)
        return df.filter(new)


def _fingerprint(row: dict[str, Any]) -> str:
    """Short stable hash of a row (resume state keeps these, not the rows)."""
    text = json.dumps(row, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]
