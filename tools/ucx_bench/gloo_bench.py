#!/usr/bin/env python3
"""Gloo under a straggler, with the timing rules of stragglar-bench (docs/ucx.md).

    python3 tools/ucx_bench/gloo_bench.py --np 8 --bytes 64M --iters 10 --warmup 2 \
        --delay 300 --modes allreduce,schedule:stragglar:1,schedule:stragglar:auto,schedule:ring \
        --stragglar ./build-ucx/stragglar

Modes, measured side by side in one run of one process group (torch.distributed, Gloo,
FileStore, torch.set_num_threads(1)):
  allreduce            Gloo's own dist.all_reduce (the baseline)
  schedule:ALGO[:K]    our schedule (from `stragglar synth`) run from Python over Gloo's
                       isend/irecv, one message per chunk, received into scratch then added
                       (what a Gloo-based CPU engine would move)

One iteration: every rank resets its buffer, dist.barrier() (the common start), the last rank
sleeps --delay ms, everyone runs the collective; time = latest exit - start, exposed = latest
exit - the straggler's entry, each on its own clock; rank 0 prints medians. Results are
checked against the exact sum (small integers) once per mode.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def parse_bytes(text):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    text = text.strip().upper().rstrip("B")
    if text and text[-1] in units:
        return int(float(text[:-1]) * units[text[-1]])
    return int(text)


def chunk_range(count, nchunks, c):
    base, extra = divmod(count, nchunks)
    begin = c * base + min(c, extra)
    return begin, begin + base + (1 if c < extra else 0)


class ScheduleRunner:
    """This rank's rounds of a stragglar-schedule/1, over Gloo point-to-point."""

    def __init__(self, schedule, rank, count):
        self.rounds = []
        nchunks = schedule["nchunks"]
        max_staged = 0
        for phase in schedule["phases"]:
            for rnd in phase["rounds"]:
                sends, recvs = [], []
                for t in rnd:
                    ranges = [chunk_range(count, nchunks, c) for c in t["chunks"]]
                    ranges = [(b, e) for b, e in ranges if e > b]
                    if t["src"] == rank:
                        sends += [(t["dst"], b, e) for b, e in ranges]
                    if t["dst"] == rank:
                        recvs += [(t["src"], b, e, t["op"]) for b, e in ranges]
                if sends or recvs:
                    self.rounds.append((sends, recvs))
                    max_staged = max(max_staged, sum(e - b for _, b, e, _ in recvs))
        self.scratch = torch.empty(max_staged, dtype=torch.float32)

    def run(self, buf):
        for sends, recvs in self.rounds:
            works, staged, off = [], [], 0
            for src, b, e, op in recvs:
                tmp = self.scratch[off:off + (e - b)]
                off += e - b
                works.append(dist.irecv(tmp, src))
                staged.append((b, e, op, tmp))
            for dst, b, e in sends:
                works.append(dist.isend(buf[b:e], dst))
            for w in works:
                w.wait()
            for b, e, op, tmp in staged:
                if op == "reduce":
                    buf[b:e].add_(tmp)
                else:
                    buf[b:e].copy_(tmp)


def worker(rank, world, store_path, args, schedules):
    torch.set_num_threads(1)
    store = dist.FileStore(store_path, world)
    dist.init_process_group("gloo", store=store, rank=rank, world_size=world)
    count = args.bytes // 4
    straggler = world - 1
    idx = torch.arange(count, dtype=torch.int64)
    inp = ((idx * 13 + rank * 7) % 5 - 2).to(torch.float32)  # small integers: exact sums
    want = sum(((idx * 13 + r * 7) % 5 - 2) for r in range(world)).to(torch.float32)
    buf = torch.empty_like(inp)
    gathered = [torch.empty(2, dtype=torch.float64) for _ in range(world)]

    def timed(collective, delay_ms):
        buf.copy_(inp)
        dist.barrier()
        start = time.perf_counter()
        entry = 0.0
        if rank == straggler and delay_ms > 0:
            time.sleep(delay_ms / 1000)
            entry = time.perf_counter() - start
        collective(buf)
        done = time.perf_counter() - start
        dist.all_gather(gathered, torch.tensor([done, entry], dtype=torch.float64))
        latest = max(float(g[0]) for g in gathered)
        return latest, latest - max(float(g[1]) for g in gathered)

    rows = []
    for mode in args.modes.split(","):
        if mode == "allreduce":
            collective, k = (lambda b: dist.all_reduce(b)), "-"
        else:
            runner = ScheduleRunner(schedules[mode], rank, count)
            collective, k = runner.run, str(schedules[mode]["nchunks"] // max(1, world - 1))
        timed(collective, args.delay)
        wrong = int((buf != want).sum())
        for _ in range(args.warmup):
            timed(collective, 0)
        samples = [timed(collective, args.delay) for _ in range(args.iters)]
        rows.append((mode, k, statistics.median(s[0] for s in samples) * 1e6,
                     statistics.median(s[1] for s in samples) * 1e6, wrong))
    wrongs = [torch.tensor([r[4] for r in rows]) for _ in range(world)]
    dist.all_gather(wrongs, torch.tensor([r[4] for r in rows]))
    if rank == 0:
        print(f"# gloo_bench: nranks {world}, straggler {straggler}, delay {args.delay} ms, iters {args.iters}, "
              f"warmup {args.warmup}, torch {torch.__version__}, threads 1")
        print(f"{'size':>12} {'mode':>28} {'K':>4} {'delay(ms)':>9} {'time(us)':>12} {'exposed(us)':>12} {'#wrong':>7}")
        for i, (mode, k, t, e, _) in enumerate(rows):
            wrong = sum(int(w[i]) for w in wrongs)
            print(f"{args.bytes:>12} {mode:>28} {k:>4} {args.delay:>9g} {t:>12.1f} {e:>12.1f} {wrong:>7}")
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"engine": "gloo", "nranks": world, "delay_ms": args.delay, "iters": args.iters,
                           "rows": [{"mode": m, "pipeline": k, "bytes": args.bytes, "time_us": t,
                                     "exposed_us": e} for m, k, t, e, _ in rows]}, f, indent=2)
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--np", type=int, default=8)
    p.add_argument("--bytes", type=parse_bytes, default=64 << 20)
    p.add_argument("--iters", type=int, default=10)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--delay", type=float, default=300)
    p.add_argument("--modes", default="allreduce")
    p.add_argument("--stragglar", default="./build/stragglar", help="the stragglar CLI (for schedule modes)")
    p.add_argument("--json")
    args = p.parse_args()
    schedules = {}
    for mode in args.modes.split(","):
        if mode == "allreduce":
            continue
        parts = mode.split(":")
        if parts[0] != "schedule" or len(parts) not in (2, 3):
            sys.exit(f"gloo_bench: mode '{mode}': expected allreduce or schedule:ALGO[:K]")
        cmd = [args.stragglar, "synth", "-a", parts[1], "-n", str(args.np), "--bytes", str(args.bytes)]
        if len(parts) == 3:
            cmd += ["-k", parts[2]]
        schedules[mode] = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
    with tempfile.TemporaryDirectory() as d:
        mp.spawn(worker, args=(args.np, os.path.join(d, "store"), args, schedules), nprocs=args.np)


if __name__ == "__main__":
    main()
