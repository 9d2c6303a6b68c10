"""NCCL debug output (``NCCL_DEBUG=INFO``, NCCL 2.4 - 2.28) -> comm_ops, communicators, topology.

Input: one text file holding the debug output of one process (``NCCL_DEBUG_FILE=%h.%p``) or of
many processes interleaved (job stdout, possibly behind launcher prefixes such as
``[1,3]<stdout>:``, `` 3: ``, ``[default0]:`` or ``(RayTrainWorker pid=..)``). See
FORMATS_text_logs.md section 2.

Layout (one concern per module; everything the repository imported from the single-file module
is still importable from ``commscope.parsers.nccl_debug``): :mod:`~commscope.parsers.nccl_debug.lines` the line
grammar (patterns, prefix split, host repair, value helpers); :mod:`~commscope.parsers.nccl_debug.communicators`
pass 1 and the registry of communicator incarnations with its O(log n) index;
:mod:`~commscope.parsers.nccl_debug.topology` topology lines to rows; :mod:`~commscope.parsers.nccl_debug.frames`
pass 2, building the tables block by block; this module the registered parser. A bound
(``MAX_*``) is read in the module that defines it: patch it there.

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

One read of the file (streaming, bounded memory; issue 21): each block of lines is scanned for
the communicator lifecycle and version lines (pass 1: the registry of communicator
*incarnations*) and, from the same lines, prepared (pass 2's work that needs no registry: line
split, classification, COLL fields, TUNING lines, rejects). COLL ranks, TUNING pairs and
topology lines need the whole file's registry (a COLL line gets the global rank of a world comm
initialised later in the file), so the prepared blocks are held, in memory up to
``frames.HOLD_BYTES`` and then in Arrow IPC files of a temporary folder, and emitted in order
once the file is read: ``comm_ops``, ``topology`` (and ``rejects``) block by block, then
``communicators`` in a last chunk. The chunks are those of the two-pass parse (pass 1 over the
whole file, then pass 2 emitting each block as it reads it), which stays as
``NcclDebugParser._parse_two_passes``: the one-pass parse hands over to it when a host repair
made while reading could differ with every lifecycle host known (a glued host whose true name
is first logged by a later lifecycle line; checked at the end), and the tests compare both.
A byte range without ``resume`` state only knows the Init lines inside the range.
What a parse keeps in memory grows with bounds, never with the file (the held blocks: up to
``frames.HOLD_BYTES``, the rest in the temporary folder, LZ4-compressed: about 9 % of the log's
size on the nccl-tests log, set ``TMPDIR`` to put it elsewhere): lines longer than
``commscope.parsers._io.MAX_LINE_BYTES`` are streamed past and rejected, at most
``MAX_LIFECYCLE_EVENTS`` lifecycle lines and ``MAX_TOPOLOGY_ROWS`` topology rows are kept
(later ones are rejected with the reason and a warning), and the host, process, tag and bare
version tables are capped (``MAX_KNOWN_HOSTS``, ``MAX_PROCESSES``, ``MAX_BARE_VERSIONS``).

Incremental parse (``resume``, see ``commscope.parsers.registry.is_resumable``): the end state
holds pass 1's raw material (lifecycle events, version lines, known hosts) and fingerprints of
the ``communicators`` and ``topology`` rows already emitted; state version 2 keeps the events as
columns (a version-1 state, events as rows, is still read; ``state_v1`` gives a version-2 state
in that form). A resumed parse of the appended lines
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
all, one of the rules of :mod:`commscope.parsers._nccl_rank_infer` (``inferred_peers``: Send/Recv roots
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

import gc
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, ClassVar

from commscope.parsers._io import Source, iter_byte_blocks, iter_line_blocks, split_lines
from commscope.parsers._nccl_rank_infer import infer_ranks
from commscope.parsers.nccl_debug import communicators, frames, lines, topology
from commscope.parsers.nccl_debug.communicators import (
    MAX_BARE_VERSIONS,
    MAX_LIFECYCLE_EVENTS,
    MAX_PROCESSES,
    REGISTRY_FULL,
    STATE_VERSION,
    _dev_matches,
    _Event,
    _Inc,
    _IncIndex,
    _Registry,
    state_v1,
)
from commscope.parsers.nccl_debug.frames import _coll_summary, _Pass2
from commscope.parsers.nccl_debug.lines import (
    _BARE_VERSION_RE,
    _COLLNET_RE,
    _CONN_RE,
    _END_RE,
    _INIT_RE,
    _NVLS_HEAD_RE,
    _NVLS_TREES_RE,
    _PREFIX_RE,
    _RING_ORDER_RE,
    _TAG_RE,
    _TREES_ITEM_RE,
    _VERSION_RE,
    LINE_LIMIT,
    MAX_HOST_CHARS,
    MAX_KNOWN_HOSTS,
    _fix_host,
    _split_block,
)
from commscope.parsers.nccl_debug.topology import MAX_TOPOLOGY_ROWS, RING_ORDER_CAP, TOPOLOGY_FULL
from commscope.parsers.registry import ParsedChunk, ParseError, register

_GC_LOCK = threading.Lock()
_gc_pauses = 0
_gc_was_enabled = False


@contextmanager
def gc_paused() -> Iterator[None]:
    """Hold CPython's cyclic garbage collector off while the block runs (never across a
    ``yield`` to the caller); nestable and thread-safe, the collector's state is restored when
    the last pause ends.

    Why: a parse allocates O(incarnations) long-lived Python objects (lifecycle events,
    incarnations, their index, the resume state's lists); each full collection the allocations
    trigger walks every live object of the process (the interpreter, Polars, pyarrow, DuckDB),
    so the collector's time grew with the incarnations: 0.3-0.4 s of the ingest of 10,000
    incarnations (71 MB), 0.06 s of 100 (bench ``ingest_scale``). What a parse creates is freed
    by reference counting (it builds no cycles); memory stays bounded by the parse's bounds.
    """
    global _gc_pauses, _gc_was_enabled
    with _GC_LOCK:
        if _gc_pauses == 0:
            _gc_was_enabled = gc.isenabled()
            gc.disable()
        _gc_pauses += 1
    try:
        yield
    finally:
        with _GC_LOCK:
            _gc_pauses -= 1
            if _gc_pauses == 0 and _gc_was_enabled:
                gc.enable()


_gc_freezes = 0


def _gc_freeze() -> bool:
    """Move every object alive now (the registry, its index, the held blocks, the resume
    state) out of the collector's generations until :func:`_gc_unfreeze` (``gc.freeze``);
    False, doing nothing, when the process froze objects itself (a pre-fork server: its
    freeze is left alone).

    Why: once :func:`gc_paused` ends, the first collection walked every object the registry
    built (0.05-0.06 s of the 10,000-incarnation ingest) and later ones again; frozen, they
    are walked by no collection until the parse ends (they are freed by reference counting
    as before). Nested and concurrent parses share one freeze.
    """
    global _gc_freezes
    with _GC_LOCK:
        if _gc_freezes == 0 and gc.get_freeze_count():
            return False
        gc.freeze()
        _gc_freezes += 1
        return True


def _gc_unfreeze() -> None:
    """End a :func:`_gc_freeze`: the last parse to end returns the frozen objects to the
    oldest generation (collected as usual from then on)."""
    global _gc_freezes
    with _GC_LOCK:
        _gc_freezes -= 1
        if _gc_freezes == 0:
            gc.unfreeze()


@register
class NcclDebugParser:
    """Parser for NCCL debug output (see the module docstring)."""

    name: ClassVar[str] = "nccl_debug"
    version: ClassVar[str] = "1.1.0"
    resumable: ClassVar[bool] = True
    one_pass: ClassVar[bool] = True
    """Read the file once (blocks held until the registry is complete); False: two reads
    (pass 1, then pass 2 emitting as it reads). Both give the same chunks."""

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
        if self.one_pass:
            spill = tempfile.TemporaryDirectory(prefix="commscope-nccl-")
            frozen = False
            try:
                with gc_paused():
                    read = self._read_once(source, rank, resume, Path(spill.name))
                    frozen = read is not None and _gc_freeze()
                if read is not None:
                    state, held, raw_state = read
                    while held:  # emitted in order, each dropped once yielded
                        with gc_paused():
                            chunk = state.emit(held.pop(0))
                        yield chunk
                    with gc_paused():
                        last = state.finish()
                        last.state = {**raw_state, **state.emitted_state()}
                    yield last
                    return
            finally:
                if frozen:
                    _gc_unfreeze()
                spill.cleanup()
        yield from self._parse_two_passes(source, rank, resume)

    def _read_once(
        self, source: Source, rank: int | None, resume: dict[str, Any] | None, spill: Path
    ) -> tuple[_Pass2, list[frames._Held], dict[str, Any]] | None:
        """The one-pass parse up to its emission: each block is scanned for lifecycle lines
        (pass 1's work) and prepared (pass 2's work that needs no registry) from the same
        lines; the registry is then completed. Returns the pass-2 state, the prepared blocks
        (to emit in order: COLL ranks, TUNING pairs, topology lines) and pass 1's raw state.
        Blocks wait in memory up to ``frames.HOLD_BYTES``, then in Arrow IPC files under
        ``spill``. None when a host repair could differ (a host first seen on a later
        lifecycle line): the caller parses in two passes.
        """
        reg = _Registry()
        if resume:
            reg.restore(resume)
        state = _Pass2(reg, rank, resume, one_pass=True)
        held: list[frames._Held] = []
        held_bytes = 0
        total = 0
        for raw in iter_byte_blocks(source):
            total += 1  # only "any line at all" matters here
            lines = split_lines(raw.data)
            if raw.complete:  # the text after the final "\n" is no line
                lines = lines.head(lines.len() - 1)
            else:  # a final line cut mid-way is rejected, not used
                reg.nccl_lines += b"NCCL " in raw.data
            first, complete, overlong = raw.first_line_no, raw.complete, raw.overlong
            del raw
            # Pass 2's split first: pass 1 reads the block's lifecycle lines from it. The
            # repairs are those of scanning first: the hosts pass 1 learns from the block are
            # hosts of its clean lines, which the split learns itself before it repairs any.
            state.sync_hosts()
            split = state.split(lines, first, complete)
            if complete:
                reg.scan_split(lines, split.prefixed, split.bare)
            state.sync_hosts()
            block = state.classify(split, overlong)
            del lines, split
            held.append(block)
            held_bytes += block.size()
            if held_bytes > frames.HOLD_BYTES:
                for n, b in enumerate(held):
                    b.spill(spill, n)
                held_bytes = 0
        if total and reg.nccl_lines == 0 and source.start_offset == 0:
            raise ParseError(
                source.path, "no NCCL debug output (no 'host:pid:tid [dev] NCCL' line)"
            )
        if not state.repairs_stable():
            return None
        raw_state = self._complete(reg, source, resume)
        state.ready()
        return state, held, raw_state

    @staticmethod
    def _complete(reg: _Registry, source: Source, resume: dict[str, Any] | None) -> dict[str, Any]:
        """Finish the registry after pass 1; return pass 1's raw state (for resume)."""
        raw_state = reg.raw_state()
        reg.finalize()
        if not reg.n_incs:  # no Init/Destroy line: infer what the COLL lines show (rank_source)
            summary = _coll_summary(source, reg, resume)
            raw_state["coll_summary"] = summary.state()
            inferred, notes = infer_ranks(summary)
            for proc, (r, how) in inferred.items():
                reg.proc_global[proc], reg.proc_how[proc] = r, how
            reg.warnings.extend(notes)
        return raw_state

    def _parse_two_passes(
        self, source: Source, rank: int | None, resume: dict[str, Any] | None
    ) -> Iterator[ParsedChunk]:
        """The parse in two reads of the file: pass 1 builds the registry, pass 2 emits each
        block as it reads it."""
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
        raw_state = self._complete(reg, source, resume)
        state = _Pass2(reg, rank, resume)
        state.ready()
        for block in iter_line_blocks(source):
            yield state.block(block.series, block.first_line_no, block.complete, block.overlong)
        last = state.finish()
        last.state = {**raw_state, **state.emitted_state()}
        yield last


# What the rest of the repository and the tests read from ``commscope.parsers.nccl_debug`` (the module was
# one file before issue 20/21). The bounds are read where they are defined: patch them on the
# submodule (``commscope.parsers.nccl_debug.communicators.MAX_LIFECYCLE_EVENTS``...), not here.
__all__ = [
    "LINE_LIMIT",
    "MAX_BARE_VERSIONS",
    "MAX_HOST_CHARS",
    "MAX_KNOWN_HOSTS",
    "MAX_LIFECYCLE_EVENTS",
    "MAX_PROCESSES",
    "MAX_TOPOLOGY_ROWS",
    "REGISTRY_FULL",
    "RING_ORDER_CAP",
    "STATE_VERSION",
    "TOPOLOGY_FULL",
    "_BARE_VERSION_RE",
    "_COLLNET_RE",
    "_CONN_RE",
    "_END_RE",
    "_INIT_RE",
    "_NVLS_HEAD_RE",
    "_NVLS_TREES_RE",
    "_PREFIX_RE",
    "_RING_ORDER_RE",
    "_TAG_RE",
    "_TREES_ITEM_RE",
    "_VERSION_RE",
    "NcclDebugParser",
    "_Event",
    "_Inc",
    "_IncIndex",
    "_Registry",
    "_dev_matches",
    "_fix_host",
    "_split_block",
    "communicators",
    "frames",
    "lines",
    "state_v1",
    "topology",
]
