"""Validation of a run's configuration (TOML given with ``--config``, ``manifest.json`` beside
the logs, the config stored with a run) before anything is written.

Why: a config reaches commscope from files the user (or a tool, or an attacker) wrote. Before
this module, a manifest of ``[]``, a list where a table belongs, ``pp = "two"``, ``pp = 1e30``
or ``pp = 0`` reached the consumers (``run_config_frame``, the analytical model, the report) and
ended in a Python traceback, in ingest only after the logs were committed. Here every key of
the layout documented in ``configs/gpt3b_paper.toml`` (and :mod:`commscope.model.config`) has a
type and a range; the first violation is one :class:`ConfigError` naming the file and the key
(``run.toml: parallel.pp: expected an integer >= 1, got "two"``).

One file serves every command (issue 17): ``predict``, ``advise``, ``generate``, ``ingest``,
``derive`` and ``collect`` read the same layout, the model's sections plus the generator's
``[generate]`` and ``[scenario]``, and check all of it the same way, whether or not the
command uses a section (the generator's sections are checked against
:mod:`commscope.synthetic.scenario`, then left out of what is stored). An unknown section or key
is an error naming the file, the section and the key (with the closest known name), never a
warning that a typo'd key was dropped: ``layrs = 54`` would otherwise leave the model's default
in place and every prediction silently wrong.

The check is pure (no I/O except :func:`load_config_bytes` parsing bytes it is given), so the
fuzz tests can call it on any structure.
"""

from __future__ import annotations

import difflib
import json
import math
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

MAX_CONFIG_BYTES = 16 * 1024 * 1024
"""Largest config or manifest file read (a manifest holds a command line, env and notes)."""

MAX_PARALLEL = 1 << 20
"""Largest pp, tp, dp or ep accepted (a million-way axis is already far beyond any job)."""

MAX_WORLD = 1 << 20
"""Largest pp * tp * dp accepted: about a million ranks (ten times the largest jobs run)."""

MAX_COUNT = 10**12
"""Upper bound of the model's counts and sizes (layers, hidden, batch, vocab, ...)."""

MAX_RATE = 1e21
"""Upper bound of FLOP/s and bytes/s (a zettaFLOP per GPU is beyond any real device)."""

MAX_STRING = 1000
"""Longest string value (names, labels) accepted."""


class ConfigError(ValueError):
    """A config that cannot be used; the message names the file and the key."""


@dataclass(frozen=True)
class _Key:
    """Type and range of one config key."""

    kind: str
    """``int``, ``float``, ``bool``, ``str``, ``choice``, ``order``, ``int_list``,
    ``choice_list`` or ``float_or_list``."""
    lo: float | None = None
    hi: float | None = None
    lo_open: bool = False
    """True when ``lo`` itself is excluded (``> 0`` instead of ``>= 0``)."""
    nullable: bool = False
    choices: tuple[str, ...] = ()


def _int(lo: int, hi: int, *, nullable: bool = False) -> _Key:
    return _Key("int", lo, hi, nullable=nullable)


def _pos_float(hi: float, *, nullable: bool = False) -> _Key:
    return _Key("float", 0.0, hi, lo_open=True, nullable=nullable)


_BOOL = _Key("bool")
_STR = _Key("str")

SCHEMA: dict[str, dict[str, _Key]] = {
    "model": {
        "name": _STR,
        "layers": _int(1, MAX_COUNT),
        "hidden": _int(1, MAX_COUNT),
        "seq": _int(1, MAX_COUNT),
        "vocab": _int(1, MAX_COUNT),
        "global_batch": _int(1, MAX_COUNT),
        "micro_batch": _int(1, MAX_COUNT),
        "micro_batches": _int(1, MAX_COUNT, nullable=True),
        "precision": _Key("choice", choices=("fp16", "bf16", "fp32")),
        "heads": _int(1, MAX_COUNT, nullable=True),
        "vocab_divisible_by": _int(1, MAX_COUNT),
        "recompute": _BOOL,
        "position_embeddings": _BOOL,
        "tied_embeddings": _BOOL,
        "experts": _int(0, MAX_COUNT),
        "top_k": _int(1, MAX_COUNT),
        "moe_every": _int(1, MAX_COUNT),
        "capacity_factor": _pos_float(1e6),
    },
    "parallel": {
        "pp": _int(1, MAX_PARALLEL),
        "tp": _int(1, MAX_PARALLEL),
        "dp": _int(1, MAX_PARALLEL),
        "ep": _int(1, MAX_PARALLEL),
        "zero_stage": _int(0, 3),
        "sequence_parallel": _BOOL,
        "pipe_partitioned": _BOOL,
        "zero_grad_allreduce": _BOOL,
        "partitioner": _Key("choice", choices=("old", "new")),
        "layers_per_stage": _Key("int_list", 1, MAX_COUNT, nullable=True),
        "dp_bucket_elements": _int(1, 1 << 62),
    },
    "platform": {
        "name": _STR,
        "peak_flops": _pos_float(MAX_RATE),
        "mu": _Key("float", 0.0, 1.0, lo_open=True),
        "c_tp": _pos_float(MAX_RATE, nullable=True),
        "c_pp": _pos_float(MAX_RATE, nullable=True),
        "c_dp": _pos_float(MAX_RATE, nullable=True),
        "c_ep": _pos_float(MAX_RATE, nullable=True),
        "c_intra": _pos_float(MAX_RATE, nullable=True),
        "c_inter": _pos_float(MAX_RATE, nullable=True),
        "gpus_per_node": _int(1, MAX_PARALLEL),
        "gpu_memory_gib": _pos_float(float(1 << 30), nullable=True),
        "gpu_memory_bytes": _int(1, 1 << 62, nullable=True),
    },
    "mapping": {
        "order": _Key("order"),
        "preset": _Key("order"),
    },
}
"""Every key of a run config (the layout of ``configs/gpt3b_paper.toml``) with its type and
range. Optional keys are ``nullable`` where the model's dataclasses accept ``None`` (a config
written by ``config_to_dict`` keeps them as ``null``)."""

_ANY_FLOAT = _Key("float", -MAX_RATE, MAX_RATE)
_FRACTION = _Key("float", 0.0, 1.0)

GENERATOR_SCHEMA: dict[str, dict[str, _Key]] = {
    "generate": {
        "iterations": _int(1, 1 << 20),
        "seed": _int(0, (1 << 63) - 1),
        "formats": _Key(
            "choice_list",
            choices=("nccl", "deepspeed", "kineto", "nsys", "inspector", "flight_recorder"),
        ),
        "nccl_version": _STR,
        "deepspeed_version": _STR,
        "torch_version": _STR,
        "nsys_version": _STR,
        "start_time": _STR,
        "compute_jitter": _Key("float", 0.0, 0.25),
        "comm_jitter": _Key("float", 0.0, 0.25),
        "compute_overhead_us": _Key("float", 0.0, 1e6),
        "kineto_compress": _Key("choice", choices=("gz", "none")),
        "profile_iterations": _Key("int_list", 0, 1 << 20),
        "jobs": _int(1, 1 << 10),
        "run_name": _Key("str", nullable=True),
        "inspector_min_bytes": _int(0, 1 << 40),
        "inspector_shape": _Key("choice", choices=("2.30", "2.28")),
        "fr_buffer_size": _int(1, 1 << 24),
    },
    "scenario": {
        "straggler_rank": _int(0, MAX_WORLD, nullable=True),
        "straggler_factor": _pos_float(1e6),
        "slow_node": _int(0, MAX_WORLD, nullable=True),
        "slow_link_factor": _Key("float", 0.0, 1.0, lo_open=True),
        "network": _Key("choice", choices=("roce", "tcp")),
        "missing_ranks": _Key("int_list", 0, MAX_WORLD),
        "clock_skew_us": _Key("float_or_list", -MAX_RATE, MAX_RATE),
        "truncate_rank": _int(0, MAX_WORLD, nullable=True),
        "truncate_fraction": _Key("float", 0.0, 1.0, lo_open=True),
        "moe_routing": _Key("choice", choices=("routed", "capacity")),
        "moe_skew_start": _ANY_FLOAT,
        "moe_skew_end": _ANY_FLOAT,
        "moe_second_start": _FRACTION,
        "moe_second_end": _FRACTION,
        "moe_decay_iterations": _pos_float(MAX_RATE),
        "hang_rank": _int(0, MAX_WORLD, nullable=True),
        "hang_iteration": _int(0, 1 << 20, nullable=True),
        "hang_class": _Key("choice", choices=("TP", "DP", "EP", "EmbTableSyn")),
    },
}
"""Types and ranges of the generator's sections (``configs/synthetic_*.toml``); the key names are
those of :class:`commscope.synthetic.scenario.GenerateOptions` and ``Scenario`` (a test keeps
them equal), whose own checks (versions, dates, formats, ranks against the world) run after
these. Checked by every command, stored by none (the model does not read them)."""

GENERATOR_SECTIONS = frozenset(GENERATOR_SCHEMA)
"""Sections only the synthetic generator reads."""

KNOWN_SECTIONS = tuple(sorted({*SCHEMA, *GENERATOR_SCHEMA}))
"""Every section a config may hold."""


@dataclass(frozen=True)
class Checked:
    """A validated config: what to store, and the warnings to show."""

    config: dict[str, Any]
    """The model's sections (what is stored with a run)."""
    generator: dict[str, Any] = field(default_factory=dict)
    """The ``[generate]``/``[scenario]`` sections, checked (what ``generate`` reads)."""


def _show(value: Any) -> str:
    """A short, quoted rendering of a bad value for an error message."""
    if isinstance(value, Mapping):
        return "a table"
    if isinstance(value, list | tuple):
        return "a list"
    try:
        text = json.dumps(value, ensure_ascii=True, allow_nan=True)
    except (TypeError, ValueError):
        text = type(value).__name__
    return text if len(text) <= 40 else text[:37] + "..."


def _range_text(key: _Key, noun: str) -> str:
    """``an integer >= 1``, ``a number > 0 and <= 1``, ..."""

    def num(x: float) -> str:
        return str(int(x)) if key.kind in {"int", "int_list"} else f"{x:g}"

    parts = []
    if key.lo is not None:
        parts.append(f"{'>' if key.lo_open else '>='} {num(key.lo)}")
    if key.hi is not None:
        parts.append(f"<= {num(key.hi)}")
    return f"{noun} {' and '.join(parts)}".strip()


def _check_number(value: Any, key: _Key, where: str) -> None:
    """Raise ConfigError unless ``value`` is a number of ``key``'s kind inside its range."""
    is_int = isinstance(value, int) and not isinstance(value, bool)
    noun = "an integer" if key.kind in {"int", "int_list"} else "a number"
    want = _range_text(key, noun)
    if key.kind in {"int", "int_list"}:
        ok_type = is_int
    else:
        ok_type = is_int or (isinstance(value, float) and math.isfinite(value))
    if not ok_type:
        raise ConfigError(f"{where}: expected {want}, got {_show(value)}")
    low_bad = key.lo is not None and (value <= key.lo if key.lo_open else value < key.lo)
    if low_bad or (key.hi is not None and value > key.hi):
        raise ConfigError(f"{where}: expected {want}, got {_show(value)}")


def _check_value(value: Any, key: _Key, where: str) -> None:
    """Raise ConfigError unless ``value`` fits ``key``."""
    if value is None:
        if key.nullable:
            return
        raise ConfigError(f"{where}: a value is required, got null")
    if key.kind in {"int", "float"}:
        _check_number(value, key, where)
    elif key.kind == "bool":
        if not isinstance(value, bool):
            raise ConfigError(f"{where}: expected true or false, got {_show(value)}")
    elif key.kind == "str":
        if not isinstance(value, str) or len(value) > MAX_STRING:
            raise ConfigError(
                f"{where}: expected a string of at most {MAX_STRING} characters, got {_show(value)}"
            )
    elif key.kind == "choice":
        if value not in key.choices:
            raise ConfigError(
                f"{where}: expected one of {', '.join(key.choices)}, got {_show(value)}"
            )
    elif key.kind == "int_list":
        if not isinstance(value, list) or len(value) > MAX_PARALLEL:
            raise ConfigError(f"{where}: expected a list of integers, got {_show(value)}")
        for i, item in enumerate(value):
            _check_number(item, key, f"{where}[{i}]")
    elif key.kind == "order":
        _check_order(value, where)
    elif key.kind == "choice_list":
        if not isinstance(value, list) or len(value) > len(key.choices) * 4:
            raise ConfigError(f"{where}: expected a list of names, got {_show(value)}")
        for i, item in enumerate(value):
            if item not in key.choices:
                raise ConfigError(
                    f"{where}[{i}]: expected one of {', '.join(key.choices)}, got {_show(item)}"
                )
    elif key.kind == "float_or_list":
        if isinstance(value, list):
            if len(value) > MAX_PARALLEL:
                raise ConfigError(f"{where}: expected a number or a list, got {_show(value)}")
            for i, item in enumerate(value):
                _check_number(item, key, f"{where}[{i}]")
        else:
            _check_number(value, key, where)


def _check_order(value: Any, where: str) -> None:
    """A mapping preset name or a permutation of the three axes (see normalize_order)."""
    from commscope.model.config import normalize_order

    if isinstance(value, list):
        if len(value) > 3 or not all(isinstance(v, str) and len(v) <= 40 for v in value):
            raise ConfigError(f"{where}: expected three axis names, got {_show(value)}")
    elif not isinstance(value, str) or len(value) > 200:
        raise ConfigError(f"{where}: expected a preset name or an axis list, got {_show(value)}")
    try:
        normalize_order(value)
    except ValueError as exc:
        raise ConfigError(f"{where}: {exc}") from None


def _check_consistency(cfg: dict[str, Any], origin: str) -> None:
    """Cross-key rules: the world size bound, ep | dp, and the model's own checks."""
    par = cfg.get("parallel", {})
    world = 1
    for axis in ("pp", "tp", "dp"):
        world *= int(par.get(axis) or 1)
    if world > MAX_WORLD:
        raise ConfigError(
            f"{origin}: parallel: pp * tp * dp = {world} ranks, more than the {MAX_WORLD} allowed"
        )
    ep, dp = par.get("ep"), par.get("dp")
    if ep is not None and dp is not None and dp % ep:
        raise ConfigError(f"{origin}: parallel.ep: {ep} must divide dp ({dp})")
    lps = par.get("layers_per_stage")
    if lps is not None and par.get("pp") is not None and len(lps) != par["pp"]:
        raise ConfigError(
            f"{origin}: parallel.layers_per_stage: expected one entry per stage "
            f"(pp = {par['pp']}), got {len(lps)}"
        )
    mapping = cfg.get("mapping", {})
    if "order" in mapping and "preset" in mapping:
        raise ConfigError(f"{origin}: mapping: give either order or preset, not both")
    if "model" in cfg and "parallel" in cfg:
        from commscope.model.config import config_from_dict

        try:
            config_from_dict(cfg)
        except (ValueError, TypeError, ArithmeticError) as exc:
            raise ConfigError(f"{origin}: {exc}") from None


def _name(name: Any) -> str:
    """A section or key name for a message: as written when plain, else quoted and cut."""
    if isinstance(name, str) and name.replace("_", "").replace("-", "").isalnum():
        return name if len(name) <= 40 else name[:37] + "..."
    return _show(name)


def _unknown(origin: str, what: str, name: Any, known: Any) -> ConfigError:
    """The error for an unknown section or key: names the file, the name, and the close ones."""
    names = sorted(str(k) for k in known)
    close = difflib.get_close_matches(str(name), names, n=1) if isinstance(name, str) else []
    hint = f" (did you mean {close[0]}?)" if close else ""
    return ConfigError(f"{origin}: unknown {what}{hint}; known: {', '.join(names)}")


def _check_generator(generator: dict[str, Any], model: dict[str, Any], origin: str) -> None:
    """The generator's own checks on its (typed) sections: versions, start time, profiled
    iterations, and the scenario's ranks and nodes against the run's size."""
    from commscope.synthetic.scenario import options_from_dict

    try:
        opts = options_from_dict(generator.get("generate"), generator.get("scenario"))
        if "model" in model and "parallel" in model:
            from commscope.model.config import config_from_dict

            opts.scenario.check(config_from_dict(model))
    except (ValueError, TypeError, ArithmeticError) as exc:
        raise ConfigError(f"{origin}: {exc}") from None


def validate(data: Any, origin: str) -> Checked:
    """Check a config (the parsed TOML, or a manifest's ``config`` object) against :data:`SCHEMA`.

    Args:
        data: the parsed structure; anything (the fuzz tests pass random structures).
        origin: the file (and, for a manifest, the field) named in messages, e.g.
            ``run/manifest.json: config``.

    Returns:
        The model's sections (what is stored; values unchanged) and the generator's sections.

    Raises:
        ConfigError: an unknown section or key, the first value of the wrong type or out of
            range, or keys that contradict each other; the message names ``origin``, the
            section and the key.
    """
    if not isinstance(data, Mapping):
        raise ConfigError(f"{origin}: expected a table of sections, got {_show(data)}")
    out: dict[str, Any] = {}
    generator: dict[str, Any] = {}
    for section, body in data.items():
        if not isinstance(section, str):
            raise ConfigError(f"{origin}: section names must be strings, got {_show(section)}")
        spec = SCHEMA.get(section) or GENERATOR_SCHEMA.get(section)
        if spec is None:
            raise _unknown(origin, f"section [{_name(section)}]", section, KNOWN_SECTIONS)
        if not isinstance(body, Mapping):
            raise ConfigError(f"{origin}: {section}: expected a table, got {_show(body)}")
        clean: dict[str, Any] = {}
        for key, value in body.items():
            if key not in spec:
                raise _unknown(origin, f"key {section}.{_name(key)} in [{section}]", key, spec)
            _check_value(value, spec[key], f"{origin}: {section}.{key}")
            clean[key] = value
        (generator if section in GENERATOR_SECTIONS else out)[section] = clean
    _check_consistency(out, origin)
    if generator:
        _check_generator(generator, out, origin)
    return Checked(out, generator)


def load_config_bytes(raw: bytes, origin: str, *, json_format: bool) -> Any:
    """Parse a config file's bytes (TOML, or JSON for ``.json``) into plain data.

    Raises:
        ConfigError: too large, not UTF-8, not valid TOML/JSON, or nested too deeply to
            parse (json and tomllib recurse: 100,000 nested lists would otherwise be a
            RecursionError traceback).
    """
    if len(raw) > MAX_CONFIG_BYTES:
        raise ConfigError(f"{origin}: larger than {MAX_CONFIG_BYTES} bytes, not read")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{origin}: not UTF-8 text (byte {exc.start})") from None
    parse: Callable[[str], Any] = json.loads if json_format else tomllib.loads
    kind = "JSON" if json_format else "TOML"
    try:
        return parse(text)
    except RecursionError:
        raise ConfigError(f"{origin}: nested too deeply to read") from None
    except (ValueError, tomllib.TOMLDecodeError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ConfigError(f"{origin}: not valid {kind}: {first}") from None
