"""Record a real 4-rank NCCL training job (TP=2 x DP=2) on one GPU, with a planted straggler.

This is a developer tool, not part of the commscope package. It produces the bundled real
multi-rank samples in ``sample_traces/gpu_nccl_tp2_dp2_1gpu/`` (and, with ``--hang``, the hang
sample ``sample_traces/gpu_nccl_hang_1gpu/``): NCCL_DEBUG=INFO logs, torch.profiler (Kineto)
traces with CUDA kernels and PyTorch Flight Recorder dumps of the *same* job, so cross-rank
instance matching, clock alignment, straggler attribution and hang triage can be checked on
real output whose truth is known (the delay is planted by the script and written to the
manifest).

How 4 NCCL ranks share one GPU
    NCCL refuses two ranks of one communicator on the same GPU of one host ("Duplicate GPU
    detected"). Each process is given its own ``NCCL_HOSTID``, so NCCL treats the 4 processes
    as 4 hosts of one GPU each and connects them with its NET/Socket transport over the
    loopback interface (``NCCL_SOCKET_IFNAME=lo``). The kernels of the 4 processes time-share
    the GPU, so durations are longer than on 4 GPUs; the logs, traces and dumps are what NCCL
    and PyTorch wrote.

What it runs
    A Megatron-style tensor-parallel MLP stack (column- then row-parallel linear per layer,
    bf16) on TP groups {0,1} and {2,3}: one all_reduce of the activations forward and one of
    the input gradient backward per layer and micro-batch. Data parallel over {0,2} and {1,3}
    ZeRO-1 style: the flat bf16 gradients are reduce-scattered, the shard updated, the
    parameters all-gathered. The loss is all-reduced over the world (fp32, one element) each
    step. Rank ``--straggler`` runs extra matrix products (``--delay-matmuls``) before its
    reduce_scatter in the steps ``--straggle-steps``: the others wait for it in the DP
    reduce_scatter of its group.

    ``--hang``: a shorter job in which rank ``--hang-rank`` sleeps before its reduce_scatter of
    step ``--hang-step`` (it never reaches that collective); the process groups time out after
    ``--timeout`` s and Flight Recorder dumps (TORCH_NCCL_DUMP_ON_TIMEOUT) are written.

Run (on a machine with one or more CUDA GPUs, PyTorch with NCCL)
    python tools/record_gpu_nccl_run.py --out /tmp/rec/gpu_nccl_tp2_dp2_1gpu
    python tools/record_gpu_nccl_run.py --hang --out /tmp/rec/gpu_nccl_hang_1gpu

Outputs (under --out)
    manifest.json                       run manifest: world, layout, groups, the planted delay,
                                        software versions, time, command, commscope config
    nccl/nccl.<host>.<pid>.log          NCCL_DEBUG=INFO output of each process (NCCL_DEBUG_FILE)
    logs/rank{R}.log                    stdout+stderr of each rank (the script's own lines)
    kineto/rank{R}.pt.trace.json.gz     torch.profiler trace (CPU + CUDA) of the active steps
    flight_recorder/nccl_trace_rank_{R} Flight Recorder dump (pickle), end of run or on timeout
    flight_recorder/rank{R}.json        the same dump in its JSON form (normal run)
"""

from __future__ import annotations

import argparse
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

WORLD = 4
TP = 2
DP = 2
TP_GROUPS = [[0, 1], [2, 3]]
DP_GROUPS = [[0, 2], [1, 3]]


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _redirect_output(path: Path) -> None:
    sys.stdout.flush()
    sys.stderr.flush()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    try:
        sys.stdout.reconfigure(line_buffering=True)
        sys.stderr.reconfigure(line_buffering=True)
    except (AttributeError, ValueError):
        pass


def _log(rank: int, msg: str) -> None:
    print(f"[record_gpu_nccl_run] rank {rank} {time.time():.6f} {msg}", flush=True)


def _nccl_env(out: Path, args: argparse.Namespace) -> dict[str, str]:
    env = {
        "NCCL_DEBUG": "INFO",
        "NCCL_DEBUG_SUBSYS": "INIT,COLL,P2P,GRAPH,ENV,TUNING",
        "NCCL_DEBUG_FILE": str(out / "nccl" / "nccl.%h.%p.log"),
        "NCCL_SOCKET_IFNAME": "lo",
        "NCCL_IB_DISABLE": "1",
        "NCCL_NET": "Socket",
        "NCCL_MNNVL_ENABLE": "0",
        "NCCL_NVLS_ENABLE": "0",
        "TORCH_NCCL_TRACE_BUFFER_SIZE": "4000",
        "TORCH_NCCL_ENABLE_TIMING": "1",
        "TORCH_NCCL_DUMP_ON_TIMEOUT": "1",
        "TORCH_FR_DUMP_TEMP_FILE": str(out / "flight_recorder" / "nccl_trace_rank_"),
        "TORCH_NCCL_DEBUG_INFO_TEMP_FILE": str(out / "flight_recorder" / "nccl_trace_rank_"),
        "TORCH_NCCL_WAIT_TIMEOUT_DUMP_MILSEC": "20000",
    }
    if args.backend != "nccl":
        env = {k: v for k, v in env.items() if not k.startswith("NCCL_")}
    return env


class _Groups:
    """The process groups of this rank: tp, dp and the world (default) group."""

    def __init__(self, rank: int, dist) -> None:
        self.tp = self.dp = None
        for g in TP_GROUPS:
            pg = _new_group(dist, g, "TP")
            if rank in g:
                self.tp = pg
        for g in DP_GROUPS:
            pg = _new_group(dist, g, "DP")
            if rank in g:
                self.dp = pg


def _new_group(dist, ranks: list[int], desc: str):
    try:
        return dist.new_group(ranks, group_desc=desc)
    except TypeError:  # older torch: no group_desc
        return dist.new_group(ranks)


def _tp_dp_stepper(rank: int, args: argparse.Namespace, dist, torch, dev, dtype, cuda: bool):
    """The training step of layout tp2dp2 (see the module docstring)."""
    groups = _Groups(rank, dist)
    tp_rank = TP_GROUPS[rank // TP].index(rank)
    dp_rank = next(g for g in DP_GROUPS if rank in g).index(rank)
    _log(
        rank, f"tp_group={TP_GROUPS[rank // TP]} dp_group={next(g for g in DP_GROUPS if rank in g)}"
    )

    class CopyToTP(torch.autograd.Function):
        """Megatron's f: identity forward, all_reduce of the input gradient backward."""

        @staticmethod
        def forward(ctx, x):
            return x

        @staticmethod
        def backward(ctx, g):
            g = g.contiguous()
            dist.all_reduce(g, group=groups.tp)
            return g

    class ReduceFromTP(torch.autograd.Function):
        """Megatron's g: all_reduce forward, identity backward."""

        @staticmethod
        def forward(ctx, x):
            x = x.contiguous().clone()
            dist.all_reduce(x, group=groups.tp)
            return x

        @staticmethod
        def backward(ctx, g):
            return g

    h, ffn = args.hidden, 4 * args.hidden // TP
    gen = torch.Generator(device=dev).manual_seed(1000 + tp_rank)
    params = []
    for _ in range(args.layers):
        w1 = (torch.randn(h, ffn, device=dev, generator=gen) * h**-0.5).to(dtype)
        w2 = (torch.randn(ffn, h, device=dev, generator=gen) * ffn**-0.5).to(dtype)
        params += [w1.requires_grad_(), w2.requires_grad_()]
    numel = sum(p.numel() for p in params)
    shard = numel // DP
    heavy = torch.randn(args.delay_size, args.delay_size, device=dev, dtype=dtype)
    data_gen = torch.Generator(device=dev).manual_seed(77 + dp_rank)

    def step(k: int) -> None:
        for _mb in range(args.micro_batches):
            x = torch.randn(
                args.micro_batch, args.seq, h, device=dev, dtype=dtype, generator=data_gen
            )
            y = x
            for li in range(args.layers):
                w1, w2 = params[2 * li], params[2 * li + 1]
                y = CopyToTP.apply(y)
                y = torch.nn.functional.gelu(y @ w1)
                y = ReduceFromTP.apply(y @ w2)
            loss = y.float().pow(2).mean()
            loss.backward()
        if args.hang and rank == args.hang_rank and k == args.hang_step:
            _log(
                rank, f"step {k}: sleeping {args.hang_sleep} s before reduce_scatter (planted hang)"
            )
            time.sleep(args.hang_sleep)
        if not args.hang and rank == args.straggler and k in args.straggle_steps:
            _log(
                rank,
                f"step {k}: {args.delay_matmuls} extra matmuls before reduce_scatter (planted)",
            )
            for _ in range(args.delay_matmuls):
                heavy = heavy_holder[0] @ heavy_holder[0]
                heavy_holder[0] = heavy / heavy.abs().amax().clamp(min=1)
        flat = torch.cat([p.grad.reshape(-1) for p in params])
        mine = torch.empty(shard, device=dev, dtype=dtype)
        dist.reduce_scatter_tensor(mine, flat, group=groups.dp)
        with torch.no_grad():
            pflat = torch.cat([p.reshape(-1) for p in params])
            pshard = pflat[dp_rank * shard : (dp_rank + 1) * shard] - 1e-3 * mine
            full = torch.empty(numel, device=dev, dtype=dtype)
            dist.all_gather_into_tensor(full, pshard.contiguous(), group=groups.dp)
            off = 0
            for p in params:
                p.copy_(full[off : off + p.numel()].view_as(p))
                off += p.numel()
                p.grad = None
        lval = loss.detach().float().reshape(1)
        dist.all_reduce(lval)
        if cuda:
            torch.cuda.synchronize()
        _log(rank, f"step {k} done loss={lval.item() / WORLD:.6f}")

    heavy_holder = [heavy]
    return step


PP_PAIRS = [[0, 2], [1, 3]]
STAGE_GROUPS = [[0, 1], [2, 3]]


def _pp_ep_stepper(rank: int, args: argparse.Namespace, dist, torch, dev, dtype, cuda: bool):
    """The training step of layout pp2ep2: pipeline 2 stages x (data = expert parallel) 2.

    Stage 0 = ranks 0, 1; stage 1 = ranks 2, 3; rank r of stage 0 sends its activations to r + 2
    and receives their gradients back (GPipe: all forwards, then all backwards). Each stage has
    a dense layer and a top-1 MoE layer of 2 experts, one per rank of the stage (the stage's
    group is both its EP and its DP group): tokens are dispatched and combined with
    all_to_all_single, uneven splits from the router (after an all_to_all of the counts), and the
    backward runs the reverse all_to_alls. Then the dense gradients are all-reduced over the
    stage group and the loss over the world. Rank ``--straggler`` runs extra matrix products
    before its first dispatch in the steps ``--straggle-steps``.
    """
    stage = rank // 2
    for g in STAGE_GROUPS:
        pg = _new_group(dist, g, "EP_DP")
        if rank in g:
            ep = pg
    peer = rank + 2 if stage == 0 else rank - 2
    me = STAGE_GROUPS[stage].index(rank)
    h = args.hidden
    gen = torch.Generator(device=dev).manual_seed(2000 + rank)
    dense = (torch.randn(h, h, device=dev, generator=gen) * h**-0.5).to(dtype).requires_grad_()
    router = (torch.randn(h, 2, device=dev, generator=gen)).to(dtype).requires_grad_()
    expert = (torch.randn(h, h, device=dev, generator=gen) * h**-0.5).to(dtype).requires_grad_()
    heavy = [torch.randn(args.delay_size, args.delay_size, device=dev, dtype=dtype)]
    data_gen = torch.Generator(device=dev).manual_seed(99 + me)
    _log(rank, f"stage={stage} pp_peer={peer} ep_dp_group={STAGE_GROUPS[stage]}")

    class AllToAll(torch.autograd.Function):
        """all_to_all_single forward; the reverse exchange backward."""

        @staticmethod
        def forward(ctx, x, send_splits, recv_splits):
            ctx.splits = (send_splits, recv_splits)
            y = x.new_empty((sum(recv_splits), x.shape[1]))
            dist.all_to_all_single(y, x.contiguous(), recv_splits, send_splits, group=ep)
            return y

        @staticmethod
        def backward(ctx, g):
            send_splits, recv_splits = ctx.splits
            gx = g.new_empty((sum(send_splits), g.shape[1]))
            dist.all_to_all_single(gx, g.contiguous(), send_splits, recv_splits, group=ep)
            return gx, None, None

    def moe(x):
        tokens = x.reshape(-1, h)
        probs = torch.softmax((tokens @ router).float(), dim=1)
        choice = probs.argmax(dim=1)
        gate = probs.gather(1, choice[:, None]).to(dtype)
        order = torch.argsort(choice, stable=True)
        send = torch.bincount(choice, minlength=2).to(torch.int64)
        recv = torch.empty_like(send)
        dist.all_to_all_single(recv, send, group=ep)
        send_splits, recv_splits = send.tolist(), recv.tolist()
        mine = AllToAll.apply(tokens[order], send_splits, recv_splits)
        done = torch.nn.functional.gelu(mine @ expert)
        back = AllToAll.apply(done, recv_splits, send_splits)
        out = torch.empty_like(back)
        out[order] = back
        return (tokens + out * gate).reshape(x.shape)

    def step(k: int) -> None:
        if rank == args.straggler and k in args.straggle_steps:
            _log(
                rank,
                f"step {k}: {args.delay_matmuls} extra matmuls before the first dispatch (planted)",
            )
            for _ in range(args.delay_matmuls):
                y = heavy[0] @ heavy[0]
                heavy[0] = y / y.abs().amax().clamp(min=1)
        outs, ins = [], []
        shape = (args.micro_batch, args.seq, h)
        for _mb in range(args.micro_batches):
            if stage == 0:
                x = torch.randn(*shape, device=dev, dtype=dtype, generator=data_gen)
                y = moe(torch.nn.functional.gelu(x @ dense))
                dist.send(y.detach().contiguous(), peer)
                outs.append(y)
            else:
                x = torch.empty(*shape, device=dev, dtype=dtype)
                dist.recv(x, peer)
                x.requires_grad_()
                y = moe(torch.nn.functional.gelu(x @ dense))
                ins.append(x)
                outs.append(y.float().pow(2).mean())
        loss = torch.zeros(1, device=dev, dtype=torch.float32)
        for mb in reversed(range(args.micro_batches)):
            if stage == 1:
                outs[mb].backward()
                loss += outs[mb].detach()
                dist.send(ins[mb].grad.contiguous(), peer)
            else:
                g = torch.empty_like(outs[mb])
                dist.recv(g, peer)
                outs[mb].backward(g)
        grads = torch.cat([dense.grad.reshape(-1), router.grad.reshape(-1)])
        dist.all_reduce(grads, group=ep)
        with torch.no_grad():
            for p in (dense, router, expert):
                p -= 1e-3 * p.grad
                p.grad = None
        dist.all_reduce(loss)
        if cuda:
            torch.cuda.synchronize()
        _log(rank, f"step {k} done loss={loss.item() / 2:.6f}")

    return step


def _worker(rank: int, args: argparse.Namespace, port: int, out: Path) -> None:
    _redirect_output(out / "logs" / f"rank{rank}.log")
    os.environ.update(
        {
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": str(port),
            "RANK": str(rank),
            "LOCAL_RANK": str(rank),
            "WORLD_SIZE": str(WORLD),
            "NCCL_HOSTID": f"commscope-recording-host{rank}",
        }
    )
    os.environ.update(_nccl_env(out, args))
    import torch
    import torch.distributed as dist

    cuda = args.backend == "nccl"
    dev = torch.device("cuda", 0) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(dev)
    dtype = torch.bfloat16 if cuda else torch.float32
    kw = {"device_id": dev} if cuda else {}
    dist.init_process_group(
        args.backend,
        rank=rank,
        world_size=WORLD,
        timeout=_dt.timedelta(seconds=args.timeout),
        **kw,
    )
    _log(rank, f"init done backend={args.backend} pid={os.getpid()}")
    if args.layout == "pp2ep2":
        step = _pp_ep_stepper(rank, args, dist, torch, dev, dtype, cuda)
    else:
        step = _tp_dp_stepper(rank, args, dist, torch, dev, dtype, cuda)
    if args.hang:
        for k in range(args.steps):
            step(k)
    else:
        from torch.profiler import ProfilerActivity, profile, schedule

        acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
        trace = out / "kineto" / f"rank{rank}.pt.trace.json"

        def ready(prof) -> None:
            prof.export_chrome_trace(str(trace))
            with trace.open("rb") as src, gzip.open(str(trace) + ".gz", "wb") as dst:
                shutil.copyfileobj(src, dst)
            trace.unlink()

        sched = schedule(wait=1, warmup=1, active=args.active, repeat=1)
        with profile(
            activities=acts, record_shapes=True, schedule=sched, on_trace_ready=ready
        ) as prof:
            for k in range(args.steps):
                step(k)
                prof.step()
        fr = out / "flight_recorder"
        try:
            data = torch._C._distributed_c10d._dump_nccl_trace()
            (fr / f"nccl_trace_rank_{rank}").write_bytes(data)
        except Exception as e:
            _log(rank, f"flight recorder pickle dump unavailable: {e!r}")
        try:
            text = torch._C._distributed_c10d._dump_nccl_trace_json(includeCollectives=True)
            dest = fr / f"rank{rank}.json"
            dest.write_bytes(text) if isinstance(text, bytes) else dest.write_text(text)
        except Exception as e:
            _log(rank, f"flight recorder json dump unavailable: {e!r}")
    dist.barrier()
    dist.destroy_process_group()
    _log(rank, "finished")


def _manifest(args: argparse.Namespace, out: Path, pids: dict[int, int]) -> dict:
    import torch

    nccl = None
    try:
        v = torch.cuda.nccl.version()
        nccl = ".".join(map(str, v)) if isinstance(v, tuple) else str(v)
    except Exception:
        pass
    moe = args.layout == "pp2ep2"
    parallel = {"pp": 2, "tp": 1, "dp": 2, "ep": 2} if moe else {"pp": 1, "tp": TP, "dp": DP}
    groups = (
        {"pp": PP_PAIRS, "ep_dp": STAGE_GROUPS, "world": [list(range(WORLD))]}
        if moe
        else {"tp": TP_GROUPS, "dp": DP_GROUPS, "world": [list(range(WORLD))]}
    )
    model_extra = {"experts": 2, "top_k": 1, "moe_every": 1, "capacity_factor": 2.0} if moe else {}
    return {
        "run_id": out.name,
        "world_size": WORLD,
        "layout": args.layout,
        "parallel": parallel,
        "synthetic": False,
        "note": "real NCCL/torch.profiler/Flight Recorder output of 4 processes sharing one GPU "
        "(each its own NCCL_HOSTID: NET/Socket over loopback); the data are random",
        "groups": groups,
        "pids": {str(r): p for r, p in sorted(pids.items())},
        "planted": (
            {
                "kind": "hang",
                "rank": args.hang_rank,
                "step": args.hang_step,
                "collective": "reduce_scatter on its DP group (never reached)",
                "sleep_s": args.hang_sleep,
                "timeout_s": args.timeout,
            }
            if args.hang
            else {
                "kind": "straggler",
                "rank": args.straggler,
                "steps": args.straggle_steps,
                "where": "extra matrix products on the compute stream before the first MoE "
                "dispatch (all_to_all) of the step"
                if moe
                else "extra matrix products on the compute stream before the DP reduce_scatter",
                "matmuls": args.delay_matmuls,
                "matmul_size": args.delay_size,
            }
        ),
        "model": {
            "layers": args.layers,
            "hidden": args.hidden,
            "seq": args.seq,
            "micro_batch": args.micro_batch,
            "micro_batches": args.micro_batches,
            "steps": args.steps,
            "dtype": "bfloat16" if args.backend == "nccl" else "float32",
        },
        "profiler": None
        if args.hang
        else {"schedule": {"wait": 1, "warmup": 1, "active": args.active, "repeat": 1}},
        "software": {
            "python": platform.python_version(),
            "torch": torch.__version__,
            "nccl": nccl,
            "cuda": torch.version.cuda,
            "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
            "platform": platform.platform(),
        },
        "recorded_at": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "command": "python " + shlex.join(sys.argv),
        "config": {
            "model": {
                "name": "PP x EP MoE stack (GPU recording)"
                if moe
                else "TP MLP stack (GPU recording)",
                "layers": args.layers,
                "hidden": args.hidden,
                "heads": 8,
                "seq": args.seq,
                "vocab": 256,
                "global_batch": args.micro_batch * args.micro_batches * DP,
                "micro_batch": args.micro_batch,
                "micro_batches": args.micro_batches,
                "precision": "bf16",
                "vocab_divisible_by": 1,
                "recompute": False,
                "tied_embeddings": False,
                **model_extra,
            },
            "parallel": parallel,
            "platform": {"name": "1 GPU shared by 4 NCCL ranks", "gpus_per_node": 4},
            "mapping": {"order": ["pipe", "data", "model"]},
        },
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--backend", default="nccl", choices=["nccl", "gloo"])
    ap.add_argument("--layout", default="tp2dp2", choices=["tp2dp2", "pp2ep2"])
    ap.add_argument("--steps", type=int, default=9)
    ap.add_argument("--active", type=int, default=6)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--hidden", type=int, default=512)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--micro-batch", type=int, default=2)
    ap.add_argument("--micro-batches", type=int, default=2)
    ap.add_argument("--straggler", type=int, default=3)
    ap.add_argument("--straggle-steps", type=int, nargs="*", default=[4, 5, 6])
    ap.add_argument("--delay-matmuls", type=int, default=150)
    ap.add_argument("--delay-size", type=int, default=4096)
    ap.add_argument("--hang", action="store_true")
    ap.add_argument("--hang-rank", type=int, default=2)
    ap.add_argument("--hang-step", type=int, default=2)
    ap.add_argument("--hang-sleep", type=float, default=90.0)
    ap.add_argument("--timeout", type=float, default=60.0)
    ap.add_argument(
        "--deadline", type=float, default=240.0, help="seconds before workers are killed"
    )
    args = ap.parse_args()
    if args.hang:
        args.steps = min(args.steps, 4)
    out = args.out.resolve()
    for sub in ("nccl", "logs", "kineto", "flight_recorder"):
        (out / sub).mkdir(parents=True, exist_ok=True)
    import torch.multiprocessing as mp

    ctx = mp.get_context("spawn")
    port = _free_port()
    procs = {r: ctx.Process(target=_worker, args=(r, args, port, out)) for r in range(WORLD)}
    for p in procs.values():
        p.start()
    pids = {r: p.pid for r, p in procs.items()}
    end = time.monotonic() + args.deadline
    for p in procs.values():
        p.join(max(0.0, end - time.monotonic()))
    codes = {}
    for r, p in procs.items():
        if p.is_alive():
            p.kill()
            p.join()
        codes[r] = p.exitcode
    doc = _manifest(args, out, pids)
    doc["exit_codes"] = {str(r): c for r, c in codes.items()}
    (out / "manifest.json").write_text(json.dumps(doc, indent=2) + "\n")
    print(json.dumps({"out": str(out), "exit_codes": codes}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
