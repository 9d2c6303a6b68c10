"""An independent reader of Flight Recorder pickles, for tests: pickletools opcodes only.

Decodes a pickle of plain values by walking its opcodes with ``pickletools.genops`` and a
small stack machine; never calls ``pickle.load`` and shares no code with
``commscope.parsers.flight_recorder``. An opcode that is not a plain value (GLOBAL, REDUCE, ...) is an
AssertionError.
"""

from __future__ import annotations

import pickletools
from typing import Any


class _Mark:
    pass


def oracle_load(data: bytes) -> Any:
    """Decode a pickle of plain values by walking its opcodes (no ``pickle.load``).

    Knows the opcodes that build dicts, lists, tuples, strings, numbers, bools and None, and
    raises on anything else (a GLOBAL, REDUCE, ... never appears in a real dump).
    """
    stack: list[Any] = []
    memo: dict[int, Any] = {}
    mark = _Mark()

    def pop_mark() -> list[Any]:
        i = len(stack) - 1
        while stack[i] is not mark:
            i -= 1
        items = stack[i + 1 :]
        del stack[i:]
        return items

    for op, arg, _pos in pickletools.genops(data):
        name = op.name
        if name in ("PROTO", "FRAME"):
            continue
        if name == "STOP":
            break
        if name in ("EMPTY_DICT",):
            stack.append({})
        elif name == "EMPTY_LIST":
            stack.append([])
        elif name == "EMPTY_TUPLE":
            stack.append(())
        elif name == "MARK":
            stack.append(mark)
        elif name == "SETITEMS":
            items = pop_mark()
            d = stack[-1]
            for k, v in zip(items[::2], items[1::2], strict=True):
                d[k] = v
        elif name == "SETITEM":
            v = stack.pop()
            k = stack.pop()
            stack[-1][k] = v
        elif name == "APPENDS":
            items = pop_mark()
            stack[-1].extend(items)
        elif name == "APPEND":
            v = stack.pop()
            stack[-1].append(v)
        elif name in ("TUPLE1", "TUPLE2", "TUPLE3"):
            n = int(name[-1])
            t = tuple(stack[-n:])
            del stack[-n:]
            stack.append(t)
        elif name == "TUPLE":
            stack.append(tuple(pop_mark()))
        elif (
            name in ("BINUNICODE", "SHORT_BINUNICODE", "BINUNICODE8", "UNICODE")
            or name in ("BININT", "BININT1", "BININT2", "LONG1", "LONG4", "INT", "LONG")
            or name in ("BINFLOAT", "FLOAT")
        ):
            stack.append(arg)
        elif name == "NONE":
            stack.append(None)
        elif name == "NEWTRUE":
            stack.append(True)
        elif name == "NEWFALSE":
            stack.append(False)
        elif name in ("BINPUT", "LONG_BINPUT", "PUT"):
            memo[arg] = stack[-1]
        elif name == "MEMOIZE":
            memo[len(memo)] = stack[-1]
        elif name in ("BINGET", "LONG_BINGET", "GET"):
            stack.append(memo[arg])
        else:
            raise AssertionError(f"opcode {name} is not a plain value")
    assert len(stack) == 1
    return stack[0]
