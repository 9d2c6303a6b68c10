"""Wrap a training launch so that its communication logs come out analysable.

Why: NCCL logs COLL lines only with ``NCCL_DEBUG=INFO`` and the right subsystems, DeepSpeed's
comms logger must be enabled in the ds_config, and ingest wants a run manifest beside the logs
(``commscope.pipeline.run_config.read_manifest``). :func:`collect` runs one command with all of that set
up and returns its exit code; ``commscope collect`` is a thin shell over it.

What it sets (a value the user already exported is **kept**, never overridden; a note says so):

* ``NCCL_DEBUG=INFO`` and ``NCCL_DEBUG_SUBSYS=INIT,COLL,P2P,NET,GRAPH,TUNING`` (INIT gives the
  communicators and ranks, COLL/P2P one line per call, GRAPH the rings/trees, TUNING the
  algorithm and protocol, NET the transport);
* ``NCCL_DEBUG_FILE=<out>/nccl/%h.%p.log``: NCCL itself expands ``%h`` (host) and ``%p`` (pid),
  so every process writes its own file;
* ``COMMSCOPE_DS_COMMS_CONFIG=<out>/ds_comms_logger.json``: a DeepSpeed ``comms_logger``
  section (enabled, verbose, prof_all); DeepSpeed reads it only from the ds_config, so the
  section to merge is printed (a launcher script can also load the file from this variable);
* with ``profiler``: ``COMMSCOPE_PROFILE_DIR=<out>/profiler`` for a ``torch.profiler`` trace
  handler (a snippet is printed);
* ``COMMSCOPE_COLLECT_DIR=<out>`` and ``COMMSCOPE_RUN_ID``.

The command's stdout and stderr are passed through to the console and teed, byte for byte and
in arrival order, into ``<out>/stdout.log`` (DeepSpeed's logger prints the comms-logger lines
there). ``<out>/manifest.json`` records the command, start/end time, exit code, host, selected
environment (NCCL_*, COMMSCOPE_*, launcher and CUDA variables; names that look like secrets are
left out) and, when given, the run's ``config`` section (model TOML layout) that ingest stores.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from commscope.pipeline.run_config import MANIFEST_NAME
from commscope.pipeline.store import validate_run_id

MANIFEST_SCHEMA = "commscope-collect-manifest/1"
NCCL_SUBSYS = "INIT,COLL,P2P,NET,GRAPH,TUNING"
NCCL_FILE_PATTERN = "%h.%p.log"
DS_COMMS_LOGGER: dict[str, Any] = {
    "comms_logger": {"enabled": True, "verbose": True, "prof_all": True, "debug": False}
}
ENV_DS_CONFIG = "COMMSCOPE_DS_COMMS_CONFIG"
ENV_PROFILE_DIR = "COMMSCOPE_PROFILE_DIR"
ENV_OUT = "COMMSCOPE_COLLECT_DIR"
ENV_RUN_ID = "COMMSCOPE_RUN_ID"

_ENV_PREFIXES = ("NCCL_", "COMMSCOPE_", "SLURM_", "OMPI_COMM_WORLD_", "PMI_", "TORCH", "DS_")
_ENV_NAMES = {
    "CUDA_VISIBLE_DEVICES",
    "WORLD_SIZE",
    "RANK",
    "LOCAL_RANK",
    "LOCAL_WORLD_SIZE",
    "MASTER_ADDR",
    "MASTER_PORT",
}
_SECRET = re.compile(r"TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|_KEY$|^KEY", re.IGNORECASE)

PROFILER_HINT = """\
torch.profiler (in the training script):
    import os, torch
    prof = torch.profiler.profile(
        schedule=torch.profiler.schedule(wait=1, warmup=1, active=3, repeat=1),
        on_trace_ready=torch.profiler.tensorboard_trace_handler(os.environ["{env}"]),
        record_shapes=False, with_stack=False)
    prof.start()  # call prof.step() after every iteration, prof.stop() at the end"""


@dataclass
class CollectResult:
    """Outcome of one collected run."""

    exit_code: int
    out: Path
    manifest: Path
    notes: list[str] = field(default_factory=list)


def collection_env(
    out: Path, base: Mapping[str, str], *, run_id: str, profiler: bool
) -> tuple[dict[str, str], list[str]]:
    """The environment for the command, and notes about values kept from ``base``.

    Args:
        out: the collection folder (absolute).
        base: the caller's environment.
        run_id: the run id recorded in the manifest.
        profiler: also point torch.profiler users at ``<out>/profiler``.
    """
    env = dict(base)
    notes: list[str] = []
    wanted = {
        "NCCL_DEBUG": "INFO",
        "NCCL_DEBUG_SUBSYS": NCCL_SUBSYS,
        "NCCL_DEBUG_FILE": str(out / "nccl" / NCCL_FILE_PATTERN),
        ENV_DS_CONFIG: str(out / "ds_comms_logger.json"),
        ENV_OUT: str(out),
        ENV_RUN_ID: run_id,
    }
    if profiler:
        wanted[ENV_PROFILE_DIR] = str(out / "profiler")
    for name, value in wanted.items():
        if name in base and base[name] != value:
            notes.append(f"{name}={base[name]} kept from the environment (commscope: {value})")
        else:
            env[name] = value
    if env.get("NCCL_DEBUG", "").upper() not in {"INFO", "TRACE"}:
        notes.append("NCCL_DEBUG is not INFO: NCCL will log no COLL lines")
    return env, notes


def selected_env(env: Mapping[str, str]) -> dict[str, str]:
    """The variables worth recording in the manifest (no secrets)."""
    return {
        k: v
        for k, v in sorted(env.items())
        if (k in _ENV_NAMES or k.startswith(_ENV_PREFIXES)) and not _SECRET.search(k)
    }


def _pump(src: IO[bytes], console: IO[bytes], log: IO[bytes], lock: threading.Lock) -> None:
    """Copy a pipe to the console and the log as bytes arrive (no line buffering)."""
    while True:
        data = os.read(src.fileno(), 65536)
        if not data:
            break
        with lock:
            log.write(data)
            log.flush()
        console.write(data)
        console.flush()


def collect(
    cmd: Sequence[str],
    out: Path,
    *,
    run_id: str | None = None,
    config: dict[str, Any] | None = None,
    profiler: bool = False,
    env: Mapping[str, str] | None = None,
    stdout: IO[bytes] | None = None,
    stderr: IO[bytes] | None = None,
    say: IO[str] | None = None,
) -> CollectResult:
    """Run ``cmd`` with logging set up, tee its output, and write the run manifest.

    Args:
        cmd: the command and its arguments (run without a shell).
        out: collection folder (created).
        run_id: run id for the manifest (default: the folder name, made store-safe).
        config: the run's config in the model's TOML layout (``parallel`` at least), or None.
        profiler: set ``COMMSCOPE_PROFILE_DIR`` and print a torch.profiler snippet.
        env: base environment (default: ``os.environ``).
        stdout: where the command's stdout goes besides the log (default: this stdout).
        stderr: same for stderr.
        say: where commscope's own notes go (default: ``sys.stderr``).

    Raises:
        StoreError: ``run_id`` is not a valid run id.

    Returns:
        The command's exit code (128 + signal number if a signal ended it; 127 if it could
        not be started), the folder and the manifest path.
    """
    out = out.expanduser().resolve()
    (out / "nccl").mkdir(parents=True, exist_ok=True)
    rid = validate_run_id(run_id or re.sub(r"[^A-Za-z0-9._-]+", "-", out.name).strip("-.") or "run")
    say = say or sys.stderr
    run_env, notes = collection_env(
        out, env if env is not None else os.environ, run_id=rid, profiler=profiler
    )
    ds_file = out / "ds_comms_logger.json"
    ds_file.write_text(json.dumps(DS_COMMS_LOGGER, indent=2) + "\n")
    if profiler:
        (out / "profiler").mkdir(exist_ok=True)
    messages = [
        f"collecting into {out}",
        f"DeepSpeed: merge into your ds_config (also in {ds_file}): " + json.dumps(DS_COMMS_LOGGER),
        *notes,
    ]
    if profiler:
        messages.append(PROFILER_HINT.format(env=ENV_PROFILE_DIR))
    for m in messages:
        print(f"commscope: {m}", file=say, flush=True)

    console_out = stdout or sys.stdout.buffer
    console_err = stderr or sys.stderr.buffer
    started = datetime.now(UTC)
    error: str | None = None
    with (out / "stdout.log").open("ab") as log:
        try:
            proc = subprocess.Popen(
                list(cmd), env=run_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
            )
        except OSError as exc:
            code, error = 127, f"cannot start {cmd[0]!r}: {exc.strerror or exc}"
            print(f"commscope: error: {error}", file=say, flush=True)
        else:
            lock = threading.Lock()
            assert proc.stdout is not None and proc.stderr is not None
            pumps = [
                threading.Thread(target=_pump, args=(proc.stdout, console_out, log, lock)),
                threading.Thread(target=_pump, args=(proc.stderr, console_err, log, lock)),
            ]
            for t in pumps:
                t.start()
            try:
                proc.wait()
            except KeyboardInterrupt:  # the child got the same SIGINT; let it finish
                proc.send_signal(signal.SIGINT)
                proc.wait()
            for t in pumps:
                t.join()
            code = proc.returncode if proc.returncode >= 0 else 128 - proc.returncode
    ended = datetime.now(UTC)
    manifest = {
        "schema": MANIFEST_SCHEMA,
        "run_id": rid,
        "synthetic": False,
        "command": list(cmd),
        "command_line": shlex.join(cmd),
        "cwd": str(Path.cwd()),
        "host": socket.gethostname(),
        "start_time_utc": started.isoformat(),
        "end_time_utc": ended.isoformat(),
        "duration_s": round((ended - started).total_seconds(), 3),
        "exit_code": code,
        "error": error,
        "env": selected_env(run_env),
        "files": {
            "nccl_debug_file": str(Path("nccl") / NCCL_FILE_PATTERN),
            "stdout_log": "stdout.log",
            "ds_comms_logger": ds_file.name,
            "profiler_dir": "profiler" if profiler else None,
        },
        "notes": notes,
        "python": sys.version.split()[0],
    }
    if config is not None:
        manifest["config"] = config
    path = out / MANIFEST_NAME
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(manifest, indent=2, default=str) + "\n")
    tmp.replace(path)
    print(
        f"commscope: exit code {code}; next: commscope ingest {shlex.quote(str(out))} --run {rid}",
        file=say,
        flush=True,
    )
    return CollectResult(code, out, path, notes)
