"""Baseline: the minimal single-pass regex script a user would write to pull COLL fields.

It reads each file line by line, matches one ``re`` pattern per format (NCCL ``COLL`` lines:
op, opCount, count, datatype, comm, nranks; DeepSpeed comms-logger lines: op, time, message
size, algbw, busbw, where DeepSpeed <= 0.9 pads algbw with two spaces, hence a run of spaces
before ``|``) and appends the fields of every match to a list. Nothing else: no line
accounting, no ranks, no communicators, no Parquet. It is the yardstick the text-log ingest is
compared to (issue 9: commscope must be at least 2x faster, doing far more).

Usage: python bench/baseline_regex.py FILE [FILE ...]   (prints one JSON line: lines, matches)
"""

from __future__ import annotations

import json
import re
import sys

NCCL_COLL = re.compile(
    r"NCCL INFO (\w+): opCount (\w+) sendbuff \S+ recvbuff \S+ count (\d+) datatype (\d+) "
    r"op (\d+) root (-?\d+) comm (0x[0-9a-f]+) \[nranks=(\d+)\]"
)
DS_COMM = re.compile(
    r"comm op: (\w+) \| time \(ms\): ([\d.]+) \| msg size: ([\d.]+ \w+) \| "
    r"algbw \(Gbps\): ([\d.]+) +\| busbw \(Gbps\): ([\d.]+)"
)


def main(paths: list[str]) -> int:
    """Scan ``paths``; print the number of lines and of extracted records as JSON."""
    rows: list[tuple[str, ...]] = []
    lines = 0
    for path in paths:
        with open(path, encoding="utf-8", errors="replace") as fh:  # noqa: PTH123
            for line in fh:
                lines += 1
                m = NCCL_COLL.search(line)
                if m is None:
                    m = DS_COMM.search(line)
                if m is not None:
                    rows.append(m.groups())
    print(json.dumps({"lines": lines, "matches": len(rows)}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
