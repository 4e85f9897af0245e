"""DDP training with one slow rank: step times on Gloo, on "stragglar", and on Gloo with the
stragglar comm hook, side by side in one job.

    PYTHONPATH=build/python python3 examples/ddp_straggler.py --nproc 8 --steps 12 --delay-ms 300
    PYTHONPATH=build/python python3 examples/ddp_straggler.py --late random   # a random rank per step
    torchrun --nproc-per-node 8 examples/ddp_straggler.py --steps 12 --delay-ms 300

The one-line change a training script needs is in `train()`: the process group DDP gets.
Every step: forward, the last rank sleeps --delay-ms (a straggler: a slow data loader, a busy
host), backward (DDP all_reduces the gradient buckets as they are ready), SGD step. With Gloo
every rank waits for the straggler and then for the whole AllReduce; with StragglAR the others
run the ReduceScatter among themselves while it sleeps, so less of the AllReduce is left once it
arrives. Printed per mode: the median step time on the fastest rank and on the straggler, and
the straggler's step minus its delay (its compute plus the AllReduce it waits for). With
--late random the late rank is drawn anew every step (the same draw on every rank): "straggler"
is then the slowest rank's median, and auto finds each step's late rank by arrival tickets
(docs/arrival-tickets.md; STRAGGLAR_ARRIVAL_TICKETS=off for auto without them).
"""

from __future__ import annotations

import argparse
import datetime
import os
import random
import statistics
import sys
import tempfile
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def model(width: int, depth: int) -> torch.nn.Module:
    torch.manual_seed(0)
    layers = []
    for _ in range(depth):
        layers += [torch.nn.Linear(width, width), torch.nn.ReLU()]
    return torch.nn.Sequential(*layers, torch.nn.Linear(width, 10))


def train(mode: str, args, rank: int, world: int, groups) -> list[float]:
    import stragglar.torch as st

    net = model(args.width, args.depth)
    if mode == "gloo":
        ddp = DDP(net, process_group=groups["gloo"], bucket_cap_mb=args.bucket_mb)
    elif mode == "stragglar":
        ddp = DDP(net, process_group=groups["stragglar"], bucket_cap_mb=args.bucket_mb)  # the one-line change
    else:  # keep Gloo for everything, send only the gradients through stragglar
        ddp = DDP(net, process_group=groups["gloo"], bucket_cap_mb=args.bucket_mb)
        ddp.register_comm_hook(groups["hook"], st.allreduce_hook)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
    gen = torch.Generator().manual_seed(rank)
    x = torch.randn(args.batch, args.width, generator=gen)
    y = torch.randint(0, 10, (args.batch,), generator=gen)
    steps = []
    draw = random.Random(args.seed)  # --late random: the same late rank on every rank
    for step in range(args.warmup + args.steps):
        late = draw.randrange(world) if args.late == "random" else world - 1
        dist.barrier(group=groups["gloo"])
        start = time.perf_counter()
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(ddp(x), y)
        if rank == late:
            time.sleep(args.delay_ms / 1000)
        loss.backward()
        opt.step()
        if step >= args.warmup:
            steps.append(time.perf_counter() - start)
    return steps


def run(args, rank: int, world: int) -> None:
    import stragglar.torch as st

    torch.set_num_threads(args.threads)
    groups = {"gloo": dist.new_group(backend="gloo"), "stragglar": st.new_group(), "hook": st.new_group()}
    params = sum(p.numel() for p in model(args.width, args.depth).parameters())
    results = {}
    for mode in args.modes.split(","):
        results[mode] = train(mode, args, rank, world, groups)
    everyone = [None] * world
    dist.all_gather_object(everyone, results, group=groups["gloo"])
    if rank == 0:
        who = "a random rank" if args.late == "random" else f"rank {world - 1}"
        print(f"# DDP, {world} ranks, {params / 1e6:.1f} M parameters ({params * 4 / 2**20:.0f} MiB of fp32 "
              f"gradients, buckets of {args.bucket_mb:g} MiB), {who} {args.delay_ms:g} ms late every step, "
              f"median of {args.steps} steps; load average {os.getloadavg()[0]:.1f}")
        print(f"{'mode':<16} {'step, fastest rank (ms)':>24} {'step, straggler (ms)':>21} {'minus the delay':>16}")
        for mode in results:
            medians = [statistics.median(r[mode]) * 1e3 for r in everyone]
            slow = max(medians) if args.late == "random" else medians[world - 1]
            print(f"{mode:<16} {min(medians):>24.1f} {slow:>21.1f} {slow - args.delay_ms:>16.1f}")
        sys.stdout.flush()
    dist.barrier(group=groups["gloo"])


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--nproc", type=int, default=8, help="ranks to start (ignored under torchrun) [8]")
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--delay-ms", type=float, default=300.0)
    p.add_argument("--width", type=int, default=1024, help="hidden width [1024]")
    p.add_argument("--depth", type=int, default=8, help="hidden layers [8: 8.4 M parameters, 32 MiB]")
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--bucket-mb", type=float, default=25.0, help="DDP bucket_cap_mb [25]")
    p.add_argument("--threads", type=int, default=1, help="torch.set_num_threads per rank [1]")
    p.add_argument("--modes", default="gloo,stragglar,gloo+hook")
    p.add_argument("--late", choices=["last", "random"], default="last",
                   help="which rank is late each step: the last one, or one drawn per step [last]")
    p.add_argument("--seed", type=int, default=38, help="--late random: the draw's seed [38]")
    args = p.parse_args()

    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:  # torchrun
        dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=300))
        run(args, dist.get_rank(), dist.get_world_size())
        dist.destroy_process_group()
        return 0
    import torch.multiprocessing as mp

    with tempfile.TemporaryDirectory() as tmp:
        mp.spawn(_spawned, args=(args, os.path.join(tmp, "store")), nprocs=args.nproc, join=True)
    return 0


def _spawned(rank: int, args, store: str) -> None:
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=args.nproc,
                            timeout=datetime.timedelta(seconds=300))
    run(args, rank, args.nproc)
    dist.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main())
