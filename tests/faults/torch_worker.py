#!/usr/bin/env python3
"""One rank of a fault-injection trial on the "stragglar" c10d backend (CPU tensors).

The torch twin of fault_worker.cpp (same flags, same JSON lines, same inputs; see there):
RANK / WORLD_SIZE from the environment, a FileStore in STRAGGLAR_STORE_DIR, the process
group's timeout = --timeout. Teardown is dist.destroy_process_group().
"""
import argparse
import datetime
import json
import os
import signal
import sys
import threading
import time

import torch
import torch.distributed as dist

import stragglar.torch  # noqa: F401  registers the backend


def inputs(rank, count, call):
    i = torch.arange(count, dtype=torch.int64)
    return ((rank * 7 + i * 3 + call * 5) % 17 - 8).to(torch.float32)


def expected(n, count, call):
    return sum(inputs(r, count, call) for r in range(n))


def code_of(message):
    m = message.lower()
    if "different arguments" in m or "mismatch" in m or "differ" in m or "disagree" in m:
        return "mismatch across ranks"
    if "timeout" in m or "timed out" in m or "waited" in m:
        return "timeout"
    return "remote error"


def main():
    ap = argparse.ArgumentParser()
    for flag, kind, default in [("--algo", str, "auto"), ("--count", int, 1024), ("--calls", int, 4),
                                ("--timeout", float, 3.0), ("--out", str, "."), ("--fault", str, "none"),
                                ("--victim", int, -1), ("--fault-call", int, 0), ("--fault-at", float, 0.5)]:
        ap.add_argument(flag, type=kind, default=default)
    a = ap.parse_args()
    rank, n = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    log = open(os.path.join(a.out, f"rank{rank}.jsonl"), "a")

    def write(obj):
        log.write(json.dumps(obj) + "\n")
        log.flush()

    store = dist.FileStore(os.path.join(os.environ["STRAGGLAR_STORE_DIR"] + "_torch"), n)
    dist.init_process_group("stragglar", store=store, rank=rank, world_size=n,
                            timeout=datetime.timedelta(seconds=a.timeout),
                            pg_options=stragglar.torch.Options(algorithm=a.algo))
    write({"event": "start", "pid": os.getpid()})
    victim = rank == a.victim
    previous_s, failed = 0.005, False
    for call in range(a.calls):
        count = a.count
        if victim and call == a.fault_call:
            if a.fault == "exit":
                write({"event": "exit_early", "call": call})
                break
            if a.fault == "delay":
                time.sleep(1.5 * a.timeout)
            if a.fault == "args":
                count = a.count + 1
            if a.fault in ("kill", "stop"):
                sig = signal.SIGKILL if a.fault == "kill" else signal.SIGSTOP
                threading.Timer(a.fault_at * previous_s, os.kill, (os.getpid(), sig)).start()
        t = inputs(rank, count, call)
        original = t.clone()
        t0 = time.monotonic()
        j = {"event": "call", "call": call, "count": count}
        try:
            dist.all_reduce(t)
            j["ok"] = True
        except Exception as e:  # DistBackendError, RuntimeError
            j["ok"] = False
            j["message"] = str(e)[:400]
            j["code"] = code_of(j["message"])
            failed = True
        previous_s = time.monotonic() - t0
        j["seconds"] = previous_s
        reduced = count == a.count and torch.equal(t, expected(n, a.count, call))
        j["buffer"] = "reduced" if reduced else "untouched" if torch.equal(t, original) else "mixed"
        write(j)
        if failed:
            break
    if failed:
        t = inputs(rank, a.count, a.calls)
        t0 = time.monotonic()
        j = {"event": "after_error"}
        try:
            dist.all_reduce(t)
            j["ok"] = True
        except Exception as e:
            j["ok"] = False
            j["code"] = code_of(str(e))
        j["seconds"] = time.monotonic() - t0
        j["reduced"] = torch.equal(t, expected(n, a.count, a.calls))
        write(j)
    t0 = time.monotonic()
    dist.destroy_process_group()
    write({"event": "teardown", "seconds": time.monotonic() - t0})
    return 0


if __name__ == "__main__":
    sys.exit(main())
