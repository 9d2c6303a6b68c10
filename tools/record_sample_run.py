"""Record a real, small DeepSpeed pipeline-parallel training run on CPU.

This is a developer tool, not part of the commscope package. It produces the
bundled samples in ``sample_traces/ds_pipe_pp2_dp2_cpu/``: real DeepSpeed
comms-logger output (verbose lines and the summary table) and real
torch.profiler (Kineto) Chrome traces of the same run.

What it runs
    A tiny GPT-like model (token+position embedding, N transformer blocks,
    LayerNorm+LM head) wrapped in ``deepspeed.pipe.PipelineModule`` with
    ``num_stages=2`` and ``partition_method="parameters"``; 4 processes, so
    PP=2 x DP=2 (TP=1); ``gradient_accumulation_steps`` micro-batches per
    ``engine.train_batch()``; gloo backend on CPU; ZeRO stage 0; fp32.
    The 4 workers are started by this script itself (torch.multiprocessing
    spawn, MASTER_ADDR=127.0.0.1 and a free port), each with its stdout and
    stderr (file descriptors 1 and 2, so C++ output too) sent to
    ``<out>/deepspeed/rank{R}.log``.

Install (its own dependency group; CPU torch first so pip keeps it)
    pip install --group record            # pip >= 25.1, from the repo root
  or
    pip install torch==2.13.0 && pip install deepspeed==0.19.8

Run
    DS_ACCELERATOR=cpu DS_BUILD_OPS=0 python tools/record_sample_run.py \
        --out sample_traces/ds_pipe_pp2_dp2_cpu

Outputs (under --out)
    ds_config.json                     the DeepSpeed config passed to deepspeed.initialize
    manifest.json                      run manifest: world size, parallel layout, the rank
                                       mapping read from the engine's grid/topology, model
                                       sizes, software versions, time, command
    deepspeed/rank{R}.log              stdout+stderr of each rank; rank 0 holds the
                                       comms-logger verbose lines ("comm op: ...") and the
                                       deepspeed.comm.log_summary() table
    kineto/rank{R}.pt.trace.json.gz    torch.profiler Chrome trace of each rank (gzip)

DeepSpeed 0.19.x notes (observed, recorded as-is)
    * any ds_config with a "comms_logger" section enables the logger;
    * the verbose lines go through the ``DeepSpeed`` logger at INFO, which
      defaults to WARNING, so this script raises it to INFO (logger + handler);
    * verbose lines are printed by global rank 0 only (``log_dist(..., [0])``);
    * the per-op "time (ms)" is the op name's cumulative timer
      (``timers(name).elapsed(reset=False)``), not the single call's latency;
      it runs on across message sizes (one timer per op name);
    * ``deepspeed.init_distributed`` on the CPU accelerator JIT-builds (or loads
      from ~/.cache/torch_extensions) ``deepspeed_shm_comm_op``: the first run
      needs a C++ compiler and takes ~30 s longer; DS_BUILD_OPS=0 does not stop it.

torch.profiler notes (observed with torch 2.13.0+cpu and gloo)
    * the trace's ``distributedInfo`` is present (backend gloo, rank, world_size,
      pg_config with each process group's ranks);
    * ProcessGroupGloo emits no ``record_param_comms`` events (in torch these come
      from the NCCL/XCCL process groups); the collectives show as ``c10d::send``,
      ``c10d::recv_``, ``c10d::allreduce_``, ``c10d::broadcast_`` (cpu_op, with
      shapes and the peer/root as "Concrete Inputs") and ``gloo:*`` user annotations.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as _dt
import gzip
import json
import os
import platform
import shlex
import shutil
import socket
import sys
import time
from pathlib import Path

os.environ.setdefault("DS_ACCELERATOR", "cpu")
os.environ.setdefault("DS_BUILD_OPS", "0")

RUN_ID = "ds_pipe_pp2_dp2_cpu"
WORLD_SIZE = 4
PP = 2


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def make_ds_config(args) -> dict:
    dp = WORLD_SIZE // PP
    return {
        "train_batch_size": args.micro_batch * args.grad_accum * dp,
        "train_micro_batch_size_per_gpu": args.micro_batch,
        "gradient_accumulation_steps": args.grad_accum,
        "steps_per_print": 1,
        "zero_optimization": {"stage": 0},
        "fp16": {"enabled": False},
        "bf16": {"enabled": False},
        "wall_clock_breakdown": False,
        "comms_logger": {"enabled": True, "verbose": True, "prof_all": True, "debug": False},
    }


# --------------------------------------------------------------------------- model


def build_layers(args):
    import torch
    from torch import nn
    from torch.nn import functional as F

    class Embed(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok = nn.Embedding(args.vocab, args.hidden)
            self.pos = nn.Embedding(args.seq, args.hidden)

        def forward(self, tokens):
            pos = torch.arange(tokens.shape[1], device=tokens.device)
            return self.tok(tokens) + self.pos(pos)[None, :, :]

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            h = args.hidden
            self.heads = args.heads
            self.ln1 = nn.LayerNorm(h)
            self.qkv = nn.Linear(h, 3 * h)
            self.proj = nn.Linear(h, h)
            self.ln2 = nn.LayerNorm(h)
            self.fc1 = nn.Linear(h, 4 * h)
            self.fc2 = nn.Linear(4 * h, h)

        def forward(self, x):
            b, t, h = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(h, dim=-1)
            q, k, v = (z.view(b, t, self.heads, h // self.heads).transpose(1, 2) for z in (q, k, v))
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(a.transpose(1, 2).reshape(b, t, h))
            return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))

    class Head(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln = nn.LayerNorm(args.hidden)
            self.out = nn.Linear(args.hidden, args.vocab, bias=False)

        def forward(self, x):
            return self.out(self.ln(x))

    return [Embed(), *[Block() for _ in range(args.layers)], Head()]


def lm_loss(logits, labels):
    from torch.nn import functional as F

    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1))


def data_iter(args, dp_id: int):
    """Endless synthetic (tokens, next-token labels) micro-batches, one stream per DP replica."""
    import torch

    g = torch.Generator().manual_seed(1234 + dp_id)
    while True:
        seq = torch.randint(0, args.vocab, (args.micro_batch, args.seq + 1), generator=g)
        yield seq[:, :-1].contiguous(), seq[:, 1:].contiguous()


# --------------------------------------------------------------------------- worker


def _redirect_output(path: Path) -> None:
    sys.stdout.flush()
    sys.stderr.flush()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    with contextlib.suppress(AttributeError, ValueError):
        sys.stdout.reconfigure(line_buffering=True)
        sys.stderr.reconfigure(line_buffering=True)


def mapping_from_grid(grid) -> dict:
    topo = grid._topo
    ranks = []
    for r in range(WORLD_SIZE):
        c = topo.get_coord(r)
        ranks.append(
            {"global_rank": r, "pipe_stage": int(c.pipe), "data_parallel_rank": int(c.data)}
        )
    return {
        "axes": list(topo.get_axis_names()),
        "ranks": ranks,
        "pipe_groups": [list(map(int, g)) for g in topo.get_axis_comm_lists("pipe")],
        "data_parallel_groups": [list(map(int, g)) for g in topo.get_axis_comm_lists("data")],
        "stage_ranks": {
            str(s): [int(r) for r in topo.filter_match(pipe=s)] for s in range(topo.get_dim("pipe"))
        },
    }


def worker(local_rank: int, args, port: int, manifest_base: dict) -> None:
    out = Path(args.out)
    rank = local_rank
    _redirect_output(out / "deepspeed" / f"rank{rank}.log")
    os.environ.update(
        {
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": str(port),
            "RANK": str(rank),
            "LOCAL_RANK": str(rank),
            "WORLD_SIZE": str(WORLD_SIZE),
            "LOCAL_SIZE": str(WORLD_SIZE),
            "LOCAL_WORLD_SIZE": str(WORLD_SIZE),
        }
    )

    import torch

    torch.set_num_threads(1)
    torch.manual_seed(42)

    import deepspeed
    import deepspeed.comm as dscomm
    from deepspeed.pipe import PipelineModule
    from deepspeed.utils import logging as ds_logging

    # The comms-logger verbose lines are INFO records of the "DeepSpeed" logger
    # (default level WARNING in 0.19.x): raise logger and handler to INFO.
    ds_logging.set_log_level_from_string("info")

    deepspeed.init_distributed(dist_backend="gloo")
    print(
        f"[record_sample_run] rank {rank}: torch.distributed backend = "
        f"{torch.distributed.get_backend()}",
        flush=True,
    )

    ds_config = make_ds_config(args)
    model = PipelineModule(
        layers=build_layers(args),
        num_stages=PP,
        partition_method="parameters",
        loss_fn=lm_loss,
        activation_checkpoint_interval=0,
    )
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-3)
    engine, _, _, _ = deepspeed.initialize(model=model, optimizer=optimizer, config=ds_config)

    grid = engine.grid
    print(
        f"[record_sample_run] rank {rank}: stage_id={grid.get_stage_id()} "
        f"data_parallel_id={grid.get_data_parallel_id()} dp_group={list(grid.dp_group)} "
        f"pp_group={list(grid.pp_group)} micro_batches={engine.micro_batches} "
        f"local_params={sum(p.numel() for p in model.parameters())}",
        flush=True,
    )

    trace_dir = out / "kineto"
    raw_trace = trace_dir / f"rank{rank}.pt.trace.json"

    def on_trace_ready(prof) -> None:
        # Kineto's own exporter writes the JSON (its "traceName" is this path);
        # it is then gzipped next to it and the plain file removed.
        prof.export_chrome_trace(str(raw_trace))
        gz_path = trace_dir / f"{raw_trace.name}.gz"
        with (
            raw_trace.open("rb") as src,
            gz_path.open("wb") as raw_dst,
            gzip.GzipFile(
                filename=raw_trace.name, mode="wb", fileobj=raw_dst, mtime=0, compresslevel=9
            ) as dst,
        ):
            shutil.copyfileobj(src, dst)
        raw_trace.unlink()

    it = data_iter(args, grid.get_data_parallel_id())
    sched = torch.profiler.schedule(
        wait=args.prof_wait, warmup=args.prof_warmup, active=args.prof_active, repeat=1
    )
    with torch.profiler.profile(
        activities=[torch.profiler.ProfilerActivity.CPU],
        schedule=sched,
        on_trace_ready=on_trace_ready,
        record_shapes=True,
    ) as prof:
        for step in range(args.steps):
            t0 = time.perf_counter()
            loss = engine.train_batch(data_iter=it)
            print(
                f"[record_sample_run] rank {rank}: train_batch {step} loss={float(loss):.4f} "
                f"wall_ms={(time.perf_counter() - t0) * 1e3:.1f}",
                flush=True,
            )
            prof.step()

    dscomm.log_summary()
    sys.stdout.flush()

    if rank == 0:
        manifest = dict(manifest_base)
        manifest["mapping"] = mapping_from_grid(grid)
        manifest["model"]["params_total"] = sum(
            sum(p.numel() for p in layer.parameters()) for layer in build_layers(args)
        )
        manifest["model"]["stage_layer_parts"] = [int(x) for x in model.parts]
        manifest["software"] = {
            "python": platform.python_version(),
            "torch": torch.__version__,
            "deepspeed": deepspeed.__version__,
            "backend": torch.distributed.get_backend(),
            "accelerator": os.environ.get("DS_ACCELERATOR"),
            "platform": platform.platform(terse=True),
        }
        (out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")

    torch.distributed.barrier()
    torch.distributed.destroy_process_group()


# --------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default=f"sample_traces/{RUN_ID}", help="output folder (recreated)")
    p.add_argument("--steps", type=int, default=6, help="engine.train_batch() calls")
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--layers", type=int, default=4, help="transformer blocks")
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--seq", type=int, default=32)
    p.add_argument("--vocab", type=int, default=256)
    p.add_argument("--micro-batch", type=int, default=2)
    p.add_argument("--grad-accum", type=int, default=4, help="micro-batches per train_batch")
    p.add_argument("--prof-wait", type=int, default=1)
    p.add_argument("--prof-warmup", type=int, default=1)
    p.add_argument("--prof-active", type=int, default=3)
    args = p.parse_args(argv)

    import torch.multiprocessing as mp

    out = Path(args.out)
    for sub in ("deepspeed", "kineto"):
        shutil.rmtree(out / sub, ignore_errors=True)
        (out / sub).mkdir(parents=True, exist_ok=True)
    (out / "ds_config.json").write_text(json.dumps(make_ds_config(args), indent=2) + "\n")

    command = "DS_ACCELERATOR={} DS_BUILD_OPS={} python {}".format(
        os.environ["DS_ACCELERATOR"],
        os.environ["DS_BUILD_OPS"],
        shlex.join(["tools/record_sample_run.py", *(sys.argv[1:] if argv is None else argv)]),
    )
    manifest_base = {
        "run_id": RUN_ID,
        "world_size": WORLD_SIZE,
        "parallel": {"pp": PP, "dp": WORLD_SIZE // PP, "tp": 1},
        "model": {
            "kind": "tiny GPT-like (embedding, transformer blocks, LM head)",
            "layers": args.layers,
            "hidden": args.hidden,
            "heads": args.heads,
            "seq": args.seq,
            "vocab": args.vocab,
            "micro_batch": args.micro_batch,
            "grad_accum": args.grad_accum,
            "steps": args.steps,
            "partition_method": "parameters",
            "dtype": "float32",
        },
        "profiler": {
            "activities": ["CPU"],
            "record_shapes": True,
            "schedule": {
                "wait": args.prof_wait,
                "warmup": args.prof_warmup,
                "active": args.prof_active,
                "repeat": 1,
            },
        },
        "recorded_at": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "command": command,
        "synthetic": False,
        "note": "real DeepSpeed/torch.profiler output recorded on a 2-core CPU machine, gloo backend; "
        "the training data are random tokens",
        # The same run in commscope's config layout (configs/*.toml), read by ingest.
        "config": {
            "model": {
                "name": "tiny GPT-like (CPU recording)",
                "layers": args.layers,
                "hidden": args.hidden,
                "heads": args.heads,
                "seq": args.seq,
                "vocab": args.vocab,
                "global_batch": args.micro_batch * args.grad_accum * (WORLD_SIZE // PP),
                "micro_batch": args.micro_batch,
                "micro_batches": args.grad_accum,
                "precision": "fp32",
                "vocab_divisible_by": 1,
                "recompute": False,
                "tied_embeddings": False,
            },
            "parallel": {"pp": PP, "tp": 1, "dp": WORLD_SIZE // PP},
            "platform": {"name": "2-core CPU, gloo", "gpus_per_node": WORLD_SIZE},
            "mapping": {"order": ["pipe", "data", "model"]},
        },
    }
    port = _free_port()
    t0 = time.perf_counter()
    mp.spawn(worker, args=(args, port, manifest_base), nprocs=WORLD_SIZE, join=True)
    print(f"recorded {RUN_ID} into {out} in {time.perf_counter() - t0:.1f}s")
    for f in sorted(out.rglob("*")):
        if f.is_file():
            print(f"  {f.relative_to(out)}  {f.stat().st_size} B")
    return 0


if __name__ == "__main__":
    sys.exit(main())
