"""Exposed time of all_reduce under a straggler: Gloo vs the "stragglar" backend, side by side.

    python -m stragglar.torch.bench --nproc 8 --size 64M --delay-ms 300 \
        --modes gloo,stragglar,stragglar:ring [--iters 10] [--warmup 2] [--json out.json]
    torchrun --nproc-per-node 8 -m stragglar.torch.bench --size 64M ...   (the same, started by torchrun)

Modes: `gloo` (torch's Gloo all_reduce, the default group), `stragglar` (a "stragglar" group with
the default options: StragglAR, the straggler named), `stragglar:ALGO` (the same backend with
Options(algorithm=ALGO): ring, rhd, allpairs, broadcast, native, auto). Every mode has its own
process group over the same ranks; one iteration runs every mode once, in turn, so a change of
machine load spreads over all of them.

One iteration of a mode (the timing rules of stragglar-bench, docs/runtime.md): every rank resets
its buffer (not timed), a Gloo barrier is the common start, the straggler (the last rank unless
--straggler) sleeps --delay-ms, then every rank calls all_reduce (SUM, float32, in place) and
records its entry and exit. Where every rank reads one clock (one machine: the same boot id and
time namespace, as stragglar-bench decides; CLOCK_MONOTONIC is shared by its processes), rank 0
takes exposed = latest exit - latest entry and time = latest exit - earliest barrier exit, exactly;
otherwise each rank measures from its own barrier exit and exposed = latest exit - the straggler's
entry (the spread with which ranks leave the barrier then counts as exposed time). Medians over
iterations; the JSON's "one_clock" says which. Results are checked exactly
(small integers) on every rank after the timed iterations.

--latency (small messages, nobody late): each mode's --calls all_reduce calls are split into --blocks
blocks; the blocks of the modes alternate (mode A block 1, mode B block 1, ..., mode A block 2, ...)
so that both see the same machine load; each block starts at a Gloo barrier, its time is the latest
rank's; a mode's figure is its median block / calls per block, and "/ gloo" its time over Gloo's.

Without torchrun the ranks are started here (torch.multiprocessing spawn, a FileStore), each with
torch.set_num_threads(--threads) (default 1: with 8 ranks on 2 cores, torch's intra-op threads
would otherwise fight over the cores).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import sys
import tempfile
import time

import torch
import torch.distributed as dist


def parse_size(text: str) -> int:
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    t = text.strip().upper().rstrip("B")
    if t and t[-1] in units:
        return int(float(t[:-1]) * units[t[-1]])
    return int(t)


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog="python -m stragglar.torch.bench", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--nproc", type=int, default=8, help="ranks to start (ignored under torchrun) [8]")
    p.add_argument("--size", default="64M", help="bytes per all_reduce (K/M/G binary) [64M]")
    p.add_argument("--delay-ms", type=float, default=300.0, help="how late the straggler enters [300]")
    p.add_argument("--straggler", type=int, default=-1, help="the late rank (-1: the last) [-1]")
    p.add_argument("--modes", default="gloo,stragglar,stragglar:ring",
                   help="comma-separated: gloo, stragglar, stragglar:ALGO [gloo,stragglar,stragglar:ring]")
    p.add_argument("--iters", type=int, default=10, help="timed iterations per mode [10]")
    p.add_argument("--warmup", type=int, default=2, help="untimed iterations per mode first [2]")
    p.add_argument("--threads", type=int, default=1, help="torch.set_num_threads per rank [1]")
    p.add_argument("--timeout-s", type=float, default=120.0, help="process group timeout [120]")
    p.add_argument("--json", help="write the rows (and every rank's per-iteration times) here")
    p.add_argument("--latency", action="store_true",
                   help="small-message latency instead: --calls back-to-back all_reduce of --size per mode, "
                        "in blocks alternating between the modes, nobody late (see below)")
    p.add_argument("--calls", type=int, default=10000, help="with --latency: calls per mode [10000]")
    p.add_argument("--blocks", type=int, default=50, help="with --latency: blocks the calls are split into [50]")
    args = p.parse_args(argv)
    for m in args.modes.split(","):
        if m != "gloo" and m != "stragglar" and not m.startswith("stragglar:"):
            p.error(f"--modes: {m!r} is not gloo, stragglar or stragglar:ALGO")
    return args


def mode_fields(mode: str) -> dict:
    """A result row's mode, backend and algorithm."""
    algorithm = "gloo" if mode == "gloo" else (mode.split(":", 1)[1] if ":" in mode else "stragglar")
    return {"mode": mode, "backend": "gloo" if mode == "gloo" else "stragglar", "algorithm": algorithm}


def make_groups(modes, straggler):
    """One process group per mode (collective: every rank makes them in the same order)."""
    import stragglar.torch as st

    groups = {}
    for mode in modes:
        if mode == "gloo":
            groups[mode] = dist.group.WORLD
        else:
            algo = mode.split(":", 1)[1] if ":" in mode else "stragglar"
            groups[mode] = st.new_group(options=st.Options(algorithm=algo, straggler=straggler))
    return groups


def run_latency(args, rank: int, world: int) -> dict | None:
    """--latency: per-call time of back-to-back all_reduce, modes in alternating blocks."""
    torch.set_num_threads(args.threads)
    load = os.getloadavg()
    modes = args.modes.split(",")
    straggler = args.straggler if args.straggler >= 0 else world - 1
    count = max(1, parse_size(args.size) // 4)
    groups = make_groups(modes, straggler)
    per_block = max(1, args.calls // args.blocks)
    buffers = {m: torch.ones(count, dtype=torch.float32) for m in modes}
    for mode in modes:  # first calls (configuration set-up, connections) off the clock
        for _ in range(min(per_block, 100)):
            dist.all_reduce(buffers[mode], group=groups[mode])
    blocks = {m: [] for m in modes}
    for _ in range(args.blocks):
        for mode in modes:
            buf, group = buffers[mode], groups[mode]
            buf.fill_(1.0)
            dist.barrier()
            start = time.perf_counter()
            for _ in range(per_block):
                dist.all_reduce(buf, group=group)
                buf.fill_(1.0)  # keeps the values exact (world) in every dtype; the same cost in every mode
            blocks[mode].append(time.perf_counter() - start)
    wrong = {}
    for m in modes:  # one more call, checked exactly (the timed ones refill their buffer)
        buffers[m].fill_(1.0)
        dist.all_reduce(buffers[m], group=groups[m])
        wrong[m] = int((buffers[m] != float(world)).sum())
    gathered = [None] * world
    dist.all_gather_object(gathered, {"blocks": blocks, "wrong": wrong})
    if rank != 0:
        return None
    rows = []
    for mode in modes:
        latest = [max(g["blocks"][mode][i] for g in gathered) for i in range(args.blocks)]
        rows.append({
            **mode_fields(mode),
            "us_per_call": statistics.median(latest) / per_block * 1e6,
            "min_us_per_call": min(latest) / per_block * 1e6,
            "wrong": sum(g["wrong"][mode] for g in gathered),
        })
    return {"nranks": world, "bytes": count * 4, "calls": per_block * args.blocks, "blocks": args.blocks,
            "threads": args.threads, "load": load, "rows": rows, "latency": True}


def print_latency_table(result: dict) -> None:
    gloo = next((r["us_per_call"] for r in result["rows"] if r["mode"] == "gloo"), None)
    print(f"# {result['nranks']} ranks, {result['bytes']} B float32 SUM, nobody late, {result['calls']} calls per "
          f"mode in {result['blocks']} alternating blocks, median block, load average {result['load'][0]:.2f} "
          f"before the run")
    print(f"{'mode':<20} {'us/call':>10} {'min':>9} {'/ gloo':>8} {'#wrong':>7}")
    for r in result["rows"]:
        ratio = f"{r['us_per_call'] / gloo:.3f}x" if gloo else "-"
        print(f"{r['mode']:<20} {r['us_per_call']:>10.2f} {r['min_us_per_call']:>9.2f} {ratio:>8} {r['wrong']:>7}")
    sys.stdout.flush()


def run_rank(args, rank: int, world: int) -> dict | None:
    torch.set_num_threads(args.threads)
    load = os.getloadavg()  # before this run's own work (other processes on the machine)
    modes = args.modes.split(",")
    straggler = args.straggler if args.straggler >= 0 else world - 1
    count = parse_size(args.size) // 4
    groups = make_groups(modes, straggler)

    # Inputs whose sum is exact in float32 on any number of ranks that fits here.
    base = (torch.arange(count, dtype=torch.int64) % 13 + rank).to(torch.float32)
    expected = (torch.arange(count, dtype=torch.int64) % 13 * world + world * (world - 1) // 2).to(torch.float32)
    buffers = {m: torch.empty(count, dtype=torch.float32) for m in modes}
    delay_s = args.delay_ms / 1000.0
    times = {m: [] for m in modes}  # per timed iteration: (barrier exit, entry, exit), CLOCK_MONOTONIC

    for it in range(args.warmup + args.iters):
        for mode in modes:
            buf = buffers[mode]
            buf.copy_(base)
            dist.barrier()  # the default (Gloo) group: the common start
            start = time.monotonic()
            if rank == straggler:
                time.sleep(delay_s)
            entry = time.monotonic()
            dist.all_reduce(buf, group=groups[mode])
            leave = time.monotonic()
            if it >= args.warmup:
                times[mode].append((start, entry, leave))

    wrong = {m: int((buffers[m] != expected).sum()) for m in modes}
    gathered = [None] * world
    dist.all_gather_object(gathered, {"rank": rank, "times": times, "wrong": wrong, "clock": clock_id()})
    if rank != 0:
        return None

    one_clock = gathered[0]["clock"] is not None and all(g["clock"] == gathered[0]["clock"] for g in gathered)
    rows = []
    for mode in modes:
        exposed, total = [], []
        for i in range(args.iters):
            marks = [g["times"][mode][i] for g in gathered]
            if one_clock:  # every mark on one clock: exact
                latest = max(m[2] for m in marks)
                exposed.append(latest - max(m[1] for m in marks))
                total.append(latest - min(m[0] for m in marks))
            else:  # each rank from its own barrier exit
                latest = max(m[2] - m[0] for m in marks)
                straggler_marks = marks[straggler]
                exposed.append(latest - (straggler_marks[1] - straggler_marks[0]))
                total.append(latest)
        rows.append({
            **mode_fields(mode),
            "exposed_ms": statistics.median(exposed) * 1e3,
            "exposed_min_ms": min(exposed) * 1e3,
            "exposed_max_ms": max(exposed) * 1e3,
            "time_ms": statistics.median(total) * 1e3,
            "wrong": sum(g["wrong"][mode] for g in gathered),
            "exposed_all_ms": [e * 1e3 for e in exposed],
        })
    return {"nranks": world, "bytes": count * 4, "delay_ms": args.delay_ms, "straggler": straggler,
            "one_clock": one_clock,
            "iters": args.iters, "warmup": args.warmup, "threads": args.threads,
            "load": load, "rows": rows}


def clock_id() -> str | None:
    """Which CLOCK_MONOTONIC this process reads: the boot id and, under a time namespace, its
    offsets (the C++ side's this_clock_id, src/runtime/hosts.cpp); None when unknown."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            ident = f.read().strip()
    except OSError:
        return None
    if not ident:
        return None
    try:
        with open("/proc/self/timens_offsets") as f:
            ident += " " + " ".join(f.read().split())
    except OSError:
        pass
    return ident


def print_table(result: dict) -> None:
    gloo = next((r["exposed_ms"] for r in result["rows"] if r["mode"] == "gloo"), None)
    print(f"# {result['nranks']} ranks, {result['bytes'] / 2**20:g} MiB float32 SUM, rank {result['straggler']} "
          f"{result['delay_ms']:g} ms late, median of {result['iters']} (after {result['warmup']} warm-up), "
          f"load average {result['load'][0]:.2f} before the run")
    print("# exposed = latest exit - latest entry on the machine's monotonic clock" if result["one_clock"] else
          "# ranks on several clocks: exposed = latest exit - the straggler's entry, each from its barrier exit")
    print(f"{'mode':<20} {'exposed(ms)':>12} {'min':>9} {'max':>9} {'time(ms)':>10} {'vs gloo':>8} {'#wrong':>7}")
    for r in result["rows"]:
        ratio = f"{gloo / r['exposed_ms']:.2f}x" if gloo else "-"
        print(f"{r['mode']:<20} {r['exposed_ms']:>12.1f} {r['exposed_min_ms']:>9.1f} {r['exposed_max_ms']:>9.1f} "
              f"{r['time_ms']:>10.1f} {ratio:>8} {r['wrong']:>7}")
    sys.stdout.flush()


def _spawned(rank: int, world: int, store_path: str, args) -> None:
    timeout = datetime.timedelta(seconds=args.timeout_s)
    dist.init_process_group("gloo", init_method=f"file://{store_path}", rank=rank, world_size=world,
                            timeout=timeout)
    finish(args, rank, world)


def finish(args, rank: int, world: int) -> None:
    result = (run_latency if args.latency else run_rank)(args, rank, world)
    if result is not None:
        (print_latency_table if args.latency else print_table)(result)
        if args.json:
            with open(args.json, "w") as f:
                json.dump(result, f, indent=1)
    dist.barrier()
    dist.destroy_process_group()


def main(argv=None) -> int:
    args = parse_args(argv)
    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:  # torchrun
        dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=args.timeout_s))
        finish(args, dist.get_rank(), dist.get_world_size())
        return 0
    import torch.multiprocessing as mp

    with tempfile.TemporaryDirectory(prefix="stragglar-bench-") as tmp:
        mp.spawn(_spawned, args=(args.nproc, os.path.join(tmp, "store"), args), nprocs=args.nproc, join=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
