"""dist.all_reduce with one random rank late per call: the "stragglar" backend (algorithm auto)
against Gloo, side by side in one job (docs/arrival-tickets.md "Measured").

    PYTHONPATH=build/python python3 bench/torch_random_late.py --nproc 8 --mib 64 --calls 10 --delay-ms 300
    STRAGGLAR_ARRIVAL_TICKETS=off PYTHONPATH=build/python python3 bench/torch_random_late.py ...   # auto without tickets

Before each call every rank meets in a Gloo barrier; then the call's late rank (drawn from one
seed, the same draw on every rank) sleeps --delay-ms, and every rank calls dist.all_reduce on a
float32 tensor of --mib MiB. Each rank notes its entry and exit on CLOCK_MONOTONIC (one clock for
every process of the host); a call's exposed time is the latest exit minus the latest entry (the
late rank's arrival). Printed per backend: the total exposed time over the calls after the first
(each backend's first call pays its own set-up), and the ratio to Gloo. Every result is checked
exactly (small integers).
"""

from __future__ import annotations

import argparse
import datetime
import os
import random
import sys
import tempfile
import time

import torch
import torch.distributed as dist


def exposed_times(group, args, rank: int, world: int, barrier_group) -> list[float]:
    n = args.mib * 2**20 // 4
    draw = random.Random(args.seed)  # the same late rank on every rank
    t = torch.empty(n, dtype=torch.float32)
    base = torch.arange(n, dtype=torch.float32).remainder_(7)
    want = base * (world * (world + 1) // 2)
    marks = []
    for call in range(args.calls + 1):
        late = draw.randrange(world)
        torch.mul(base, rank + 1, out=t)
        dist.barrier(group=barrier_group)
        if rank == late:
            time.sleep(args.delay_ms / 1000)
        entry = time.monotonic()
        dist.all_reduce(t, group=group)
        marks.append((entry, time.monotonic()))
        if not torch.equal(t, want):
            raise RuntimeError(f"rank {rank}: call {call}: wrong result")
    everyone = [None] * world
    dist.all_gather_object(everyone, marks, group=barrier_group)
    return [max(m[c][1] for m in everyone) - max(m[c][0] for m in everyone) for c in range(1, args.calls + 1)]


def run(args, rank: int, world: int) -> None:
    import stragglar.torch as st

    torch.set_num_threads(args.threads)
    gloo = dist.new_group(backend="gloo")
    groups = {"gloo": gloo, "stragglar": st.new_group()}
    totals = {}
    for name in args.backends.split(","):
        totals[name] = sum(exposed_times(groups[name], args, rank, world, gloo))
    report = st.straggler_report(groups["stragglar"])["auto"] if "stragglar" in totals else None
    if rank == 0:
        print(f"# dist.all_reduce, {world} ranks, {args.mib} MiB fp32, one random rank {args.delay_ms:g} ms late "
              f"per call (seed {args.seed}), exposed time summed over {args.calls} calls after the first; "
              f"STRAGGLAR_ARRIVAL_TICKETS={os.environ.get('STRAGGLAR_ARRIVAL_TICKETS', '(unset: auto)')}; "
              f"load average {os.getloadavg()[0]:.1f}")
        for name, total in totals.items():
            ratio = total / totals["gloo"] if "gloo" in totals else float("nan")
            print(f"{name:<10} {total * 1e3:9.0f} ms  {ratio:5.2f}x Gloo")
        if report is not None:
            print(f"stragglar auto: {report['arrival_calls']} calls took an arrival ticket, "
                  f"{report['arrival_late_calls']} went on without their late rank; decided {report['algorithm']}")
        sys.stdout.flush()
    dist.barrier(group=gloo)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--nproc", type=int, default=8)
    p.add_argument("--mib", type=int, default=64)
    p.add_argument("--calls", type=int, default=10, help="timed calls after the first [10]")
    p.add_argument("--delay-ms", type=float, default=300.0)
    p.add_argument("--seed", type=int, default=38)
    p.add_argument("--threads", type=int, default=1, help="torch.set_num_threads per rank [1]")
    p.add_argument("--backends", default="gloo,stragglar")
    args = p.parse_args()
    import torch.multiprocessing as mp

    with tempfile.TemporaryDirectory() as tmp:
        mp.spawn(_spawned, args=(args, os.path.join(tmp, "store")), nprocs=args.nproc, join=True)
    return 0


def _spawned(rank: int, args, store: str) -> None:
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=args.nproc,
                            timeout=datetime.timedelta(seconds=600))
    run(args, rank, args.nproc)
    dist.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main())
