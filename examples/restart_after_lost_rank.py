#!/usr/bin/env python3
"""A job on the "stragglar" backend that loses a rank mid-training, restarts and finishes.

    PYTHONPATH=build/python torchrun --standalone --nproc-per-node 4 --max-restarts 1 \\
        examples/restart_after_lost_rank.py --steps 20 --kill-rank 2 --kill-step 8 --checkpoint /tmp/ckpt.pt

Every step all-reduces a gradient through stragglar and adds it to the model's state; rank 0
saves a checkpoint after each step (every rank holds the same state: the all_reduce gives every
rank identical bits). On the first attempt (TORCHELASTIC_RESTART_COUNT == 0) rank --kill-rank
SIGKILLs itself at --kill-step; torchrun's agent then stops the other workers and starts the
group again (--max-restarts 1): the new workers make a new process group from torchrun's new
store, load the checkpoint and finish. At the end every rank checks its state against the
closed form (small integers: exact in float32) and rank 0 prints one line. Exits 0 when exact.
"""
import argparse
import datetime
import os
import signal

import torch
import torch.distributed as dist

import stragglar.torch  # noqa: F401  registers the "stragglar" backend


def gradient(rank, step, count):
    return torch.full((count,), float(rank + 1 + step % 3))


def expected_state(n, steps, count):
    per_step = [n * (n + 1) // 2 + n * (s % 3) for s in range(steps)]
    return torch.full((count,), float(sum(per_step)))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--count", type=int, default=1 << 16, help="elements of the gradient")
    ap.add_argument("--kill-rank", type=int, default=1)
    ap.add_argument("--kill-step", type=int, default=5)
    ap.add_argument("--checkpoint", required=True)
    ap.add_argument("--timeout-s", type=float, default=30)
    a = ap.parse_args()

    attempt = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    dist.init_process_group("stragglar", timeout=datetime.timedelta(seconds=a.timeout_s))
    rank, n = dist.get_rank(), dist.get_world_size()

    step, state = 0, torch.zeros(a.count)
    if os.path.exists(a.checkpoint):
        saved = torch.load(a.checkpoint)
        step, state = saved["step"], saved["state"]
    first_step = step

    while step < a.steps:
        if attempt == 0 and rank == a.kill_rank and step == a.kill_step:
            os.kill(os.getpid(), signal.SIGKILL)  # the lost rank
        g = gradient(rank, step, a.count)
        dist.all_reduce(g)
        state += g
        step += 1
        if rank == 0:
            tmp = a.checkpoint + ".tmp"
            torch.save({"step": step, "state": state}, tmp)
            os.replace(tmp, a.checkpoint)  # a reader never sees half a checkpoint

    exact = torch.equal(state, expected_state(n, a.steps, a.count))
    flags = torch.tensor([0.0 if exact else 1.0])
    dist.all_reduce(flags)
    if rank == 0:
        print(f"restart_after_lost_rank: attempt {attempt}, resumed at step {first_step}, "
              f"{a.steps} steps on {n} ranks, result {'exact on every rank' if flags.item() == 0 else 'WRONG'}",
              flush=True)
    dist.destroy_process_group()
    return 0 if flags.item() == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
