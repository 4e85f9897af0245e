"""Starts ranks as processes (spawn, like torchrun: no MPI) and brings back what each returned.

    out = run_ranks([("tensor_kinds", {}), ("mismatch", {})], nranks=4, store="file")
    out["mismatch"][rank]                                   # what that case returned on that rank

Each rank: torch.set_num_threads(1) (8 processes share 2 cores in CI), init_process_group(backend,
init_method, rank, world_size, timeout), then each case `rank_cases.<name>(rank, nranks,
**kwargs)` in turn, then destroy_process_group. Several cases share one job because starting
ranks (importing torch) is the slow part. A case that raises stops that rank (later cases would
run out of step) and fails the test with its traceback; a rank listed in `may_die` may end
without a result (a test kills it on purpose); anything still running after `deadline_s` is
killed and fails the test.
"""

from __future__ import annotations

import multiprocessing
import os
import queue
import signal
import socket
import tempfile
import time
import traceback

STORES = ("file", "tcp", "env")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _entry(cases, rank, nranks, backend, init_method, env, timeout_s, results):
    os.environ.update(env)
    try:
        import datetime

        import torch
        import torch.distributed as dist

        torch.set_num_threads(1)
        import stragglar.torch  # noqa: F401  registers the backend

        import rank_cases

        if init_method == "env://":
            dist.init_process_group(backend, timeout=datetime.timedelta(seconds=timeout_s))
        else:
            dist.init_process_group(backend, init_method=init_method, rank=rank, world_size=nranks,
                                    timeout=datetime.timedelta(seconds=timeout_s))
        values = {}
        for name, kwargs in cases:
            try:
                values[name] = (True, getattr(rank_cases, name)(rank, nranks, **kwargs))
            except BaseException:  # noqa: BLE001 - reported; later cases would run out of step
                values[name] = (False, traceback.format_exc())
                break
        dist.destroy_process_group()
        results.put((rank, True, values))
    except BaseException:  # noqa: BLE001 - reported to the parent
        results.put((rank, False, traceback.format_exc()))


def run_ranks(cases, nranks: int, store: str = "file", backend: str = "stragglar", timeout_s: float = 60,
              deadline_s: float = 300, may_die=(), env=None) -> dict:
    """Runs `cases` — a list of (name, kwargs) of rank_cases functions, in order — in every rank of
    one job (`env`: more environment for every rank, "{rank}" in a value replaced by the rank). Returns {case: {rank: value}}; raises
    AssertionError naming the first case that failed on some rank, with that rank's traceback."""
    assert store in STORES, store
    ctx = multiprocessing.get_context("spawn")
    results = ctx.Queue()
    with tempfile.TemporaryDirectory(prefix="stragglar-torch-test-") as tmp:
        port = free_port()
        procs = []
        for rank in range(nranks):
            # "{rank}" in a value becomes the rank (e.g. NCCL_HOSTID per rank: ranks sharing a GPU).
            rank_env = {"OMP_NUM_THREADS": "1", **{k: v.replace("{rank}", str(rank)) for k, v in (env or {}).items()}}
            if store == "file":
                init = f"file://{os.path.join(tmp, 'store')}"
            elif store == "tcp":
                init = f"tcp://127.0.0.1:{port}"
            else:  # what torchrun sets
                init = "env://"
                rank_env.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                                WORLD_SIZE=str(nranks), LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE=str(nranks))
            p = ctx.Process(target=_entry, args=(list(cases), rank, nranks, backend, init, rank_env, timeout_s,
                                                 results), name=f"rank{rank}")
            p.start()
            procs.append(p)

        got, failures = {}, []
        needed = set(range(nranks)) - set(may_die)
        end = time.monotonic() + deadline_s
        try:
            while not failures and not needed <= set(got):
                try:
                    rank, ok, value = results.get(timeout=1.0)
                except queue.Empty:
                    if time.monotonic() > end or all(not p.is_alive() for p in procs):
                        break
                    continue
                (got.__setitem__(rank, value) if ok else failures.append((rank, value)))
        finally:
            for rank, p in enumerate(procs):
                if p.is_alive() and rank in needed and not failures:
                    p.join(timeout=max(0.0, min(20.0, end - time.monotonic())))  # exiting normally
            for p in procs:
                if p.is_alive():
                    os.kill(p.pid, signal.SIGKILL)
                    p.join()

    names = [name for name, _ in cases]
    if failures:
        rank, tb = sorted(failures)[0]
        raise AssertionError(f"rank {rank} of {nranks} failed outside the cases {names}:\n{tb}")
    missing = sorted(needed - set(got))
    if missing:
        raise AssertionError(f"{names}: ranks {missing} gave no result within {deadline_s} s "
                             f"(exit codes {[p.exitcode for p in procs]})")
    out = {}
    for name in names:
        for rank in sorted(got):
            if name not in got[rank]:
                raise AssertionError(f"{name}: not run on rank {rank} (an earlier case failed there)")
            ok, value = got[rank][name]
            if not ok:
                raise AssertionError(f"{name}: rank {rank} of {nranks} failed:\n{value}")
            out.setdefault(name, {})[rank] = value
    return out
