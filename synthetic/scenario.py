"""Generator options and scenarios: the ``[generate]`` and ``[scenario]`` sections of a config.

Why: one TOML file describes a synthetic run completely. The model's sections (``[model]``,
``[parallel]``, ``[platform]``, ``[mapping]``) go to :func:`commscope.model.config.config_from_dict`
unchanged, so the generated run, the analytical model and ``commscope ingest --config`` all read
the same description; the two extra sections below say how to simulate and what to perturb.
Every command accepts them (``predict``, ``ingest``, ``derive``, ... check and ignore them) and
checks their key names and value types against ``pipeline/config_schema.py``
(``GENERATOR_SCHEMA``, kept equal to the fields below by a test); the checks on values that
need more than a type (versions, dates, ranks against the world size) are the dataclasses'
own, run by :func:`options_from_dict` for every command. Command-line flags override them
(see ``pipeline/commands/generate.py``).

TOML layout of the extra sections (every key optional)::

    [generate]
    iterations = 3                 # training iterations simulated
    seed = 7                       # every random draw is a pure function of the seed
    formats = ["nccl", "deepspeed", "kineto", "nsys"]   # also "inspector", "flight_recorder"
    nccl_version = "2.21.5"        # NCCL 2.18 .. 2.27 line shapes
    deepspeed_version = "0.14.4"   # < 0.10.1 old verbose shape; >= 0.18.3 cumulative latencies
    torch_version = "2.5.1"        # recorded in traces and the manifest
    start_time = "2025-01-15T08:00:00Z"   # wall clock of iteration 0 (UTC)
    compute_jitter = 0.03          # relative sd of a rank's compute speed per micro-batch pass
    comm_jitter = 0.02             # relative sd of collective / p2p transfer times
    compute_overhead_us = 0.0      # fixed cost of each compute kernel step (attention, MLP, ...
                                   # of one layer and pass) on top of FLOPs / (mu F)
    kineto_compress = "gz"         # "gz" (.pt.trace.json.gz) or "none" (.pt.trace.json)
    profile_iterations = []        # iterations in the Kineto/nsys traces ([] = all)
    jobs = 1                       # worker processes for writing (lanes are independent)
    inspector_min_bytes = 8192     # NCCL_INSPECTOR_DUMP_MIN_SIZE_BYTES: smaller ops get no record
    inspector_shape = "2.30"       # "2.30": every call, p2p too; "2.28": latest collective per tick
    fr_buffer_size = 2000          # TORCH_NCCL_TRACE_BUFFER_SIZE: Flight Recorder keeps the last N

    [scenario]
    straggler_rank = 5             # this rank computes straggler_factor times slower
    straggler_factor = 1.5
    slow_node = 1                  # inter-node links of this node run at slow_link_factor
    slow_link_factor = 0.25
    network = "roce"               # "roce" or "tcp" (TCP: 1/1.8 of the RoCE inter-node bandwidth)
    missing_ranks = [3]            # ranks whose files are not written (the run still has them)
    clock_skew_us = 2000.0         # max |offset| of a node's clock (node 0 = 0); or one per node
    truncate_rank = 2              # this rank's NCCL log (and DeepSpeed log for 0) ends mid-line
    truncate_fraction = 0.7        # where, as a fraction of the file's bytes
    moe_routing = "routed"         # "routed": variable all-to-all splits; "capacity": padded
    moe_skew_start = 1.5           # sd of expert-popularity logits at iteration 0
    moe_skew_end = 0.1             # ... after many iterations (routing grows more uniform)
    moe_second_start = 0.3         # share of tokens routed to a second expert at iteration 0
    moe_second_end = 0.9           # ... after many iterations (all-to-all volume grows)
    moe_decay_iterations = 20.0    # time constant of both trends, in iterations
    hang_rank = 5                  # Flight Recorder dumps on timeout: this rank never posts ...
    hang_iteration = 2             # ... its first hang_class collective of this iteration
    hang_class = "DP"              # (default iteration: the last); see write_flight_recorder.py
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from datetime import UTC, datetime
from typing import Any

from commscope.model.config import RunConfig, config_from_dict

FORMATS: tuple[str, ...] = ("nccl", "deepspeed", "kineto", "nsys", "inspector", "flight_recorder")
"""Output formats the generator can write, in writing order."""

DEFAULT_FORMATS: tuple[str, ...] = ("nccl", "deepspeed", "kineto", "nsys")
"""What it writes unless ``formats`` says otherwise (Inspector and Flight Recorder on request:
they describe the same calls again, and a run ingested whole would hold them twice per source)."""

NETWORKS: dict[str, float] = {"roce": 1.0, "tcp": 1.0 / 1.8}
"""Inter-node bandwidth factor per network (paper §5: RoCEv2 is 1.8x TCP for >10 MB)."""

SUPPORTED_NCCL: tuple[int, int] = (18, 27)
"""NCCL 2.x minor versions whose line shapes the generator writes."""


def _require(cond: bool, message: str) -> None:
    if not cond:
        raise ValueError(message)


def parse_version(text: str) -> tuple[int, ...]:
    """``"2.21.5"`` -> ``(2, 21, 5)`` (suffixes such as ``+cuda12.4`` or ``-1`` dropped)."""
    core = text.split("+")[0].split("-")[0]
    try:
        return tuple(int(p) for p in core.split("."))
    except ValueError as exc:
        raise ValueError(f"not a version: {text!r}") from exc


@dataclass(frozen=True)
class Scenario:
    """What to perturb in the simulated run (see the module docstring for the meaning)."""

    straggler_rank: int | None = None
    straggler_factor: float = 1.5
    slow_node: int | None = None
    slow_link_factor: float = 0.25
    network: str = "roce"
    missing_ranks: tuple[int, ...] = ()
    clock_skew_us: float | tuple[float, ...] = 0.0
    truncate_rank: int | None = None
    truncate_fraction: float = 0.7
    moe_routing: str = "routed"
    moe_skew_start: float = 1.5
    moe_skew_end: float = 0.1
    moe_second_start: float = 0.3
    moe_second_end: float = 0.9
    moe_decay_iterations: float = 20.0
    hang_rank: int | None = None
    hang_iteration: int | None = None
    hang_class: str = "DP"

    def __post_init__(self) -> None:
        """Reject values no run could have."""
        _require(self.straggler_factor > 0, "scenario.straggler_factor must be > 0")
        _require(0 < self.slow_link_factor <= 1, "scenario.slow_link_factor must be in (0, 1]")
        _require(self.network in NETWORKS, f"scenario.network must be one of {sorted(NETWORKS)}")
        _require(0 < self.truncate_fraction < 1, "scenario.truncate_fraction must be in (0, 1)")
        _require(
            self.moe_routing in ("routed", "capacity"),
            "scenario.moe_routing must be 'routed' or 'capacity'",
        )
        _require(self.moe_decay_iterations > 0, "scenario.moe_decay_iterations must be > 0")
        _require(
            self.hang_class in ("TP", "DP", "EP", "EmbTableSyn"),
            "scenario.hang_class must be TP, DP, EP or EmbTableSyn",
        )
        _require(
            self.hang_iteration is None or self.hang_iteration >= 0,
            "scenario.hang_iteration must be >= 0",
        )
        for name in ("moe_second_start", "moe_second_end"):
            _require(0 <= getattr(self, name) <= 1, f"scenario.{name} must be in [0, 1]")
        object.__setattr__(self, "missing_ranks", tuple(int(r) for r in self.missing_ranks))
        if not isinstance(self.clock_skew_us, int | float):
            object.__setattr__(self, "clock_skew_us", tuple(float(x) for x in self.clock_skew_us))

    def check(self, run: RunConfig) -> None:
        """Check the rank and node numbers against a run's size."""
        world = run.world
        nodes = -(-world // run.platform.gpus_per_node)
        for name in ("straggler_rank", "truncate_rank", "hang_rank"):
            value = getattr(self, name)
            _require(value is None or 0 <= value < world, f"scenario.{name} outside 0..{world - 1}")
        for r in self.missing_ranks:
            _require(0 <= r < world, f"scenario.missing_ranks: {r} outside 0..{world - 1}")
        _require(
            self.slow_node is None or 0 <= self.slow_node < nodes,
            f"scenario.slow_node outside 0..{nodes - 1}",
        )
        if isinstance(self.clock_skew_us, tuple):
            _require(
                len(self.clock_skew_us) == nodes,
                f"scenario.clock_skew_us needs one value per node ({nodes})",
            )

    def active(self) -> dict[str, Any]:
        """The scenario keys that differ from the defaults (what this run perturbs)."""
        default = Scenario()
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if value != getattr(default, f.name):
                out[f.name] = list(value) if isinstance(value, tuple) else value
        return out

    def to_dict(self) -> dict[str, Any]:
        """Every key, JSON-safe."""
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            out[f.name] = list(value) if isinstance(value, tuple) else value
        return out


@dataclass(frozen=True)
class GenerateOptions:
    """How to simulate and what to write (see the module docstring)."""

    iterations: int = 3
    seed: int = 0
    formats: tuple[str, ...] = DEFAULT_FORMATS
    nccl_version: str = "2.21.5"
    deepspeed_version: str = "0.14.4"
    torch_version: str = "2.5.1"
    nsys_version: str = "2024.6.2.25"
    start_time: str = "2025-01-15T08:00:00Z"
    compute_jitter: float = 0.03
    comm_jitter: float = 0.02
    compute_overhead_us: float = 0.0
    kineto_compress: str = "gz"
    profile_iterations: tuple[int, ...] = ()
    jobs: int = 1
    run_name: str | None = None
    inspector_min_bytes: int = 8192
    inspector_shape: str = "2.30"
    fr_buffer_size: int = 2000
    scenario: Scenario = field(default_factory=Scenario)

    def __post_init__(self) -> None:
        """Validate and normalise."""
        _require(self.iterations >= 1, "generate.iterations must be >= 1")
        _require(self.seed >= 0, "generate.seed must be >= 0")
        formats = tuple(
            dict.fromkeys(str(f).strip().lower() for f in self.formats if str(f).strip())
        )
        unknown = sorted(set(formats) - set(FORMATS))
        _require(not unknown, f"unknown format(s) {unknown}; use {', '.join(FORMATS)}")
        _require(bool(formats), "generate.formats is empty")
        object.__setattr__(self, "formats", tuple(f for f in FORMATS if f in formats))
        nccl = parse_version(self.nccl_version)
        _require(
            len(nccl) >= 2 and nccl[0] == 2 and SUPPORTED_NCCL[0] <= nccl[1] <= SUPPORTED_NCCL[1],
            f"generate.nccl_version {self.nccl_version!r}: the generator writes NCCL "
            f"2.{SUPPORTED_NCCL[0]} .. 2.{SUPPORTED_NCCL[1]}",
        )
        parse_version(self.deepspeed_version)
        _require(self.compute_jitter >= 0 and self.comm_jitter >= 0, "jitter must be >= 0")
        _require(self.compute_jitter < 0.25, "generate.compute_jitter must be < 0.25")
        _require(self.compute_overhead_us >= 0, "generate.compute_overhead_us must be >= 0")
        _require(self.comm_jitter < 0.25, "generate.comm_jitter must be < 0.25")
        _require(self.kineto_compress in ("gz", "none"), "generate.kineto_compress: 'gz' or 'none'")
        _require(self.jobs >= 1, "generate.jobs must be >= 1")
        _require(self.inspector_min_bytes >= 0, "generate.inspector_min_bytes must be >= 0")
        _require(
            self.inspector_shape in ("2.30", "2.28"), "generate.inspector_shape: '2.30' or '2.28'"
        )
        _require(self.fr_buffer_size >= 1, "generate.fr_buffer_size must be >= 1")
        object.__setattr__(
            self, "profile_iterations", tuple(sorted({int(i) for i in self.profile_iterations}))
        )
        for i in self.profile_iterations:
            _require(
                0 <= i < self.iterations, f"profile iteration {i} outside 0..{self.iterations - 1}"
            )
        self.start_epoch_ns  # noqa: B018 - validates start_time

    @property
    def start_epoch_ns(self) -> int:
        """Wall clock of the start of iteration 0, epoch ns (UTC)."""
        text = self.start_time.strip()
        if text.endswith("Z"):
            text = text[:-1] + "+00:00"
        try:
            dt = datetime.fromisoformat(text)
        except ValueError as exc:
            raise ValueError(
                f"generate.start_time: not an ISO date-time: {self.start_time!r}"
            ) from exc
        if dt.tzinfo is None:
            dt = dt.replace(tzinfo=UTC)
        return int(dt.timestamp()) * 1_000_000_000 + dt.microsecond * 1000

    @property
    def nccl(self) -> tuple[int, ...]:
        """NCCL version as a tuple."""
        return parse_version(self.nccl_version)

    @property
    def deepspeed(self) -> tuple[int, ...]:
        """DeepSpeed version as a tuple."""
        return parse_version(self.deepspeed_version)

    def profiled(self, iteration: int) -> bool:
        """Whether ``iteration`` is in the timeline traces (Kineto, nsys)."""
        return not self.profile_iterations or iteration in self.profile_iterations

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe view (scenario included)."""
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, Scenario):
                out[f.name] = value.to_dict()
            elif isinstance(value, tuple):
                out[f.name] = list(value)
            else:
                out[f.name] = value
        return out


_GEN_KEYS = {f.name for f in fields(GenerateOptions)} - {"scenario"}
_SCEN_KEYS = {f.name for f in fields(Scenario)}


def _tuple_fields(values: dict[str, Any], names: Sequence[str]) -> dict[str, Any]:
    for name in names:
        if name in values and isinstance(values[name], list):
            values[name] = tuple(values[name])
    return values


def options_from_dict(
    generate: Mapping[str, Any] | None, scenario: Mapping[str, Any] | None
) -> GenerateOptions:
    """Build options from the ``[generate]`` and ``[scenario]`` sections.

    Raises:
        ValueError: unknown keys or invalid values.
    """
    gen = dict(generate or {})
    scen = dict(scenario or {})
    unknown = sorted(set(gen) - _GEN_KEYS)
    _require(not unknown, f"unknown key(s) in [generate]: {', '.join(unknown)}")
    unknown = sorted(set(scen) - _SCEN_KEYS)
    _require(not unknown, f"unknown key(s) in [scenario]: {', '.join(unknown)}")
    _tuple_fields(gen, ("formats", "profile_iterations"))
    _tuple_fields(scen, ("missing_ranks", "clock_skew_us"))
    return GenerateOptions(**gen, scenario=Scenario(**scen))


def split_config(data: Mapping[str, Any]) -> tuple[RunConfig, GenerateOptions]:
    """Split a TOML dict into the model's run configuration and the generator's options."""
    rest = {k: v for k, v in data.items() if k not in ("generate", "scenario")}
    run = config_from_dict(rest)
    opts = options_from_dict(data.get("generate"), data.get("scenario"))
    return run, opts


def with_overrides(opts: GenerateOptions, **changes: Any) -> GenerateOptions:
    """A copy of ``opts`` with generator and scenario keys replaced (None values ignored)."""
    gen = {k: v for k, v in changes.items() if k in _GEN_KEYS and v is not None}
    scen = {k: v for k, v in changes.items() if k in _SCEN_KEYS and v is not None}
    unknown = sorted(set(changes) - _GEN_KEYS - _SCEN_KEYS)
    _require(not unknown, f"unknown option(s): {', '.join(unknown)}")
    scenario = replace(opts.scenario, **scen) if scen else opts.scenario
    return replace(opts, **gen, scenario=scenario)
