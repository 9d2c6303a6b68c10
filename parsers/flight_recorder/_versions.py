"""Flight Recorder dump schema versions: what each one writes, and how commscope reads it.

The dump's ``version`` is the recorder's own ``"MAJOR.MINOR"`` (``version_val`` in the C++
header: "minor when adding fields, major when changing existing fields"), not the PyTorch
version. ``fr_trace`` (``torch/distributed/flight_recorder/components``) parses it as exactly
two integers (``utils.get_version_detail``) and branches on it twice: ``minor <= 3`` (of major
2) all_to_all sizes were not logged, ``< 2.7`` only p2p ops form coalesced groups. Facts per
version and their sources are in ``FORMATS_flight_recorder.md`` §7 (S-ids below):

======  ==================================================================  =====================
2.10    ``nccl_version`` renamed ``comm_lib_version``                       S3, S5, S6 (2.10 hdr)
2.9     ``thread_id`` / ``thread_name`` per entry (the shared samples)      S1, S2, S5
2.7     ``nccl_version`` top-level key; non-p2p coalesced groups (entries   S6 (2.7 hdr), S7
        of the collectives, closed by ``nccl:*_coalesced``)
2.5     example dump: ``frames`` … ``is_p2p``, no library version           S8 (tutorial)
2.4     all_to_all input/output sizes logged                                S4, S7 utils.py
2.3     key set version, pg_config, pg_status, entries, nccl_comm_state;    S6 (2.3 NCCLUtils.hpp)
        entries record_id … is_p2p, frames, duration_ms
1.2     ``pg_config`` added (a list per process group)                      S9
======  ==================================================================  =====================

Reading is driven by the keys present, not by the number (a version this table does not
know is read the same way, with a warning); the number decides only what ``fr_trace``'s
branches decide: whether all_to_all sizes are trusted.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

KNOWN_VERSIONS: tuple[str, ...] = ("1.2", "2.3", "2.4", "2.5", "2.7", "2.9", "2.10")
"""Versions for which a source was read (see the table above); others between them exist
(e.g. 2.6, 2.8) but no source for them was found: they are read by their keys."""

_VERSION = re.compile(r"^\s*(\d{1,4})\.(\d{1,4})\s*$")


@dataclass(frozen=True)
class DumpVersion:
    """A parsed dump version.

    Attributes:
        text: the version as written (None when the dump has none).
        major, minor: its numbers (None when absent or not ``MAJOR.MINOR``).
    """

    text: str | None
    major: int | None = None
    minor: int | None = None

    @property
    def known(self) -> bool:
        """True for a version a source was read for."""
        return self.text is not None and self.text.strip() in KNOWN_VERSIONS

    def at_least(self, major: int, minor: int) -> bool | None:
        """``version >= major.minor``; None when the version is unknown."""
        if self.major is None or self.minor is None:
            return None
        return (self.major, self.minor) >= (major, minor)

    @property
    def all_to_all_sizes_logged(self) -> bool:
        """Whether all_to_all input/output sizes mean anything: from 2.4 (``fr_trace``:
        "We don't log the input/output sizes for alltoall before v2.4"); an unknown version
        is trusted (its sizes are used when present)."""
        return self.at_least(2, 4) is not False


def parse_version(value: object) -> DumpVersion:
    """Parse a dump's ``version`` value (a ``"MAJOR.MINOR"`` string)."""
    if not isinstance(value, str) or len(value) > 32:
        return DumpVersion(None)
    value = value.encode("utf-8", "replace").decode("utf-8")
    m = _VERSION.match(value)
    if not m:
        return DumpVersion(value)
    return DumpVersion(value, int(m.group(1)), int(m.group(2)))
