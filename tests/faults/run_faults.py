#!/usr/bin/env python3
"""Fault-injection harness: no surviving rank aborts, hangs or holds a mixed buffer.

Each trial starts n ranks of one front-end, runs a few all_reduces of one random size and
algorithm, and injects one fault into one rank at a random point of a random call:

  kill   SIGKILL                          (UCX, torch; Open MPI ends the job on a death)
  stop   SIGSTOP, SIGCONT after the bound  (every front-end)
  delay  entering 1.5 x the timeout late  (every front-end)
  args   calling with a different count   (every front-end)
  exit   leaving early, cleanly           (every front-end)

Front-ends: ucx (the runtime core over UcxEngine, ranks started like torchrun: fault_worker.cpp),
mpi (stragglar::allreduce under mpirun: fault_worker.cpp), torch (the "stragglar" c10d backend on
CPU tensors: torch_worker.py). For every rank that did not die it checks:
  - every call that raised did so within timeout x 1.1 + 2 s of its start, plus the time a call of
    that size took when it succeeded on that rank in that trial (64 MiB on 8 ranks takes seconds
    here before anything waits); a stopped rank's own calls excepted (its clock ran while stopped);
  - a communicator's creation fails only when the fault is a rank leaving at call 0;
  - the buffer of a call that raised is untouched or fully reduced, never a mix; one that
    returned holds exactly the sum;
  - the call after an error fails at once (the communicator is broken, not waiting again);
  - it tears down (frees the communicator / destroys the group) and exits 0: no signal, no abort;
  - it ends before the trial's deadline (else: a hang; the harness kills it).

  run_faults.py --ci                           CI: 54 trials, 2 s timeout, 4 B .. 4 MiB, <= 5 min
                                               (front-ends drawn ucx:mpi:torch = 5:3:1)
  run_faults.py --trials 1000 --seed 1 --max-bytes 64M --table docs_table.md     the campaign
"""
import argparse
import json
import math
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
FAULTS = {
    "ucx": ["kill", "stop", "delay", "args", "exit"],
    "torch": ["kill", "stop", "delay", "args", "exit"],
    # Open MPI aborts the whole job when a rank dies, so no kill there (the rule).
    "mpi": ["stop", "delay", "args", "exit"],
}
ALGORITHMS = ["stragglar", "ring", "rhd", "allpairs", "broadcast", "native", "auto"]


def parse_bytes(text):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    text = text.strip().upper().rstrip("B")
    if text and text[-1] in units:
        return int(float(text[:-1]) * units[text[-1]])
    return int(text)


def algorithms_for(frontend):
    # MPI's `native` named explicitly is a blocking MPI_Allreduce (docs/design.md, the guarantees): a stopped
    # peer holds it until it resumes. auto's native is bounded and stays in.
    return [a for a in ALGORITHMS if not (frontend == "mpi" and a == "native")]


def make_trial(rng, index, args):
    frontend = rng.choices(args.frontends, weights=[args.weights.get(f, 1) for f in args.frontends])[0]
    n = rng.randint(2, args.max_ranks)
    lo, hi = math.log2(4), math.log2(args.max_bytes)
    nbytes = int(2 ** rng.uniform(lo, hi)) // 4 * 4 or 4
    calls = 4
    return {
        "index": index,
        "frontend": frontend,
        "n": n,
        "algo": rng.choice(algorithms_for(frontend)),
        "count": nbytes // 4,
        "calls": calls,
        "fault": rng.choice([f for f in FAULTS[frontend] if not args.faults or f in args.faults] or FAULTS[frontend]),
        "victim": rng.randrange(n),
        "fault_call": rng.randrange(calls),
        "fault_at": round(rng.random(), 3),
        "timeout": args.timeout,
        "recover": bool(args.recover) and frontend != "torch",
    }


def worker_args(t, out):
    return ["--algo", t["algo"], "--count", str(t["count"]), "--calls", str(t["calls"]),
            "--timeout", str(t["timeout"]), "--out", out, "--fault", t["fault"],
            "--victim", str(t["victim"]), "--fault-call", str(t["fault_call"]),
            "--fault-at", str(t["fault_at"])] + (["--recover", "1"] if t.get("recover") else []) + \
        (["--others-late", str(t["others_late"])] if t.get("others_late") else [])


def read_log(path):
    events = []
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                line = line.strip()
                if line:
                    try:
                        events.append(json.loads(line))
                    except json.JSONDecodeError:
                        events.append({"event": "garbled", "line": line})
    return events


def proc_state(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return None


def deadline_for(t):
    bound = t["timeout"] * 1.1 + 2
    # Start-up (torch imports slowly on a loaded 2-core machine), the calls themselves (64 MiB on
    # 8 ranks takes seconds here), a stopped rank's pause and its own timeout afterwards.
    data_s = t["calls"] * (1 + t["count"] * 4 * t["n"] / 20e6)
    startup = 60 if t["frontend"] == "torch" else 20
    return startup + data_s + 3 * bound + 10


def run_trial(t, args):
    work = tempfile.mkdtemp(prefix=f"fault{t['index']}_")
    out = os.path.join(work, "out")
    os.makedirs(out)
    env = dict(os.environ, STRAGGLAR_TIMEOUT_S=str(t["timeout"]))
    procs = []  # (rank or None for mpirun, Popen)
    stderr_path = os.path.join(work, "stderr.txt")
    stderr = open(stderr_path, "w")
    if t["frontend"] == "mpi":
        cmd = [args.mpirun, "--allow-run-as-root", "--oversubscribe", "-np", str(t["n"]),
               "-x", "STRAGGLAR_TIMEOUT_S", args.worker, "mpi"] + worker_args(t, out)
        procs.append((None, subprocess.Popen(cmd, env=env, stdout=stderr, stderr=subprocess.STDOUT,
                                             start_new_session=True)))
    else:
        env["STRAGGLAR_STORE_DIR"] = os.path.join(work, "store")
        env["WORLD_SIZE"] = env["LOCAL_WORLD_SIZE"] = str(t["n"])
        env["MASTER_ADDR"], env["MASTER_PORT"] = "127.0.0.1", "0"
        if t["frontend"] == "ucx":
            base = [args.worker, "ucx"]
        else:
            base = [sys.executable, os.path.join(HERE, "torch_worker.py")]
        for r in range(t["n"]):
            e = dict(env, RANK=str(r), LOCAL_RANK=str(r))
            procs.append((r, subprocess.Popen(base + worker_args(t, out), env=e, stdout=stderr,
                                              stderr=subprocess.STDOUT, start_new_session=True)))
    relaunched = False
    bound = t["timeout"] * 1.1 + 2
    start = time.monotonic()
    deadline = start + deadline_for(t)
    victim_pid, stopped_at, continued = None, None, False
    hang = False
    while any(p.poll() is None for _, p in procs):
        now = time.monotonic()
        if t["fault"] == "stop":
            if victim_pid is None:
                for e in read_log(os.path.join(out, f"rank{t['victim']}.jsonl")):
                    if e.get("event") == "start":
                        victim_pid = e["pid"]
            elif stopped_at is None and proc_state(victim_pid) == "T":
                stopped_at = now
            elif stopped_at is not None and not continued and now - stopped_at > bound + 0.5:
                os.kill(victim_pid, signal.SIGCONT)
                continued = True
        if t.get("recover") and t["frontend"] == "ucx" and not relaunched:
            # Restart: a killed rank comes back (as torchrun would start it again) and joins
            # the survivors' re-created communicator.
            v = procs[t["victim"]][1]
            if v.poll() == -signal.SIGKILL:
                e = dict(env, RANK=str(t["victim"]), LOCAL_RANK=str(t["victim"]), STRAGGLAR_FAULT_RELAUNCHED="1")
                procs.append((t["victim"], subprocess.Popen(base + worker_args(t, out), env=e, stdout=stderr,
                                                            stderr=subprocess.STDOUT, start_new_session=True)))
                relaunched = True
        if now > deadline:
            hang = True
            for _, p in procs:
                if p.poll() is None:
                    os.killpg(p.pid, signal.SIGKILL)
            break
        time.sleep(0.02)
    for _, p in procs:
        p.wait()
    stderr.close()
    result = judge(t, out, procs, hang, stopped_at is not None, args.allow_mixed)
    result["seconds"] = round(time.monotonic() - start, 2)
    if result["failures"]:
        with open(stderr_path) as f:
            result["stderr_tail"] = f.read()[-3000:]
    if result["failures"] and args.keep:
        result["dir"] = work
    else:
        shutil.rmtree(work, ignore_errors=True)
    return result


def judge(t, out, procs, hang, victim_stopped, allow_mixed):
    bound = t["timeout"] * 1.1 + 2
    failures = []
    mixed = 0
    errors, times = 0, []
    error_codes = {}  # error code -> calls that raised it
    logs = {r: read_log(os.path.join(out, f"rank{r}.jsonl")) for r in range(t["n"])}
    victim = t["victim"]
    exits = {}
    if t["frontend"] == "mpi":
        rc = procs[0][1].returncode
        for r in range(t["n"]):
            exits[r] = rc
    else:
        first_exit = {}
        for r, p in procs:
            first_exit.setdefault(r, p.returncode)
            exits[r] = p.returncode  # a relaunched rank: its second process
    victim_died = t["fault"] == "kill" and (first_exit if t["frontend"] != "mpi" else exits).get(victim) == -signal.SIGKILL
    relaunched = len(procs) > t["n"]
    if t["fault"] == "kill" and not victim_died and t["frontend"] != "mpi":
        pass  # the kill landed after the victim's last call: a trial without a fault in effect
    for r in range(t["n"]):
        if r == victim and victim_died and not relaunched:
            continue
        ev = logs[r]
        if t.get("recover") and not hang:
            rec = [e for e in ev if e.get("event") == "recovered"]
            if not rec or not rec[-1]["ok"] or not rec[-1]["reduced"]:
                failures.append(f"rank {r}: no successful call on the re-created communicator: {rec[-1:] or 'none'}")
        if hang and not any(e.get("event") == "teardown" for e in ev):
            failures.append(f"rank {r}: hang (killed at the trial's deadline)")
        rc = exits[r]
        if rc is not None and rc < 0 and not hang:
            failures.append(f"rank {r}: abort (signal {-rc})")
        elif rc not in (0, None) and not hang:
            failures.append(f"rank {r}: exit code {rc}")
        for e in ev:
            kind = e.get("event")
            if kind == "setup_error" and not (t["fault"] in ("exit", "kill") and t["fault_call"] == 0):
                # Only a peer that leaves right at the start may fail the communicator's creation.
                failures.append(f"rank {r}: setup error: {e.get('message')}")
            if kind == "setup_error":
                errors += 1
            if kind == "garbled":
                failures.append(f"rank {r}: garbled log line")
            if kind == "call":
                if e["ok"]:
                    if e["buffer"] != "reduced":
                        failures.append(f"rank {r}: call {e['call']} returned with a {e['buffer']} buffer")
                else:
                    errors += 1
                    error_codes[e.get("code", "?")] = error_codes.get(e.get("code", "?"), 0) + 1
                    own_clock_stopped = r == victim and victim_stopped
                    # The bound counts from when the fault could first be seen: a call of this
                    # size takes its normal time (seconds for 64 MiB on 8 ranks of a loaded
                    # 2-core machine) before it waits; that time is the longest call that
                    # succeeded on this rank in this trial.
                    normal = max([c["seconds"] for c in ev if c.get("event") == "call" and c["ok"]], default=0.0)
                    if not own_clock_stopped:
                        times.append(e["seconds"])
                        if e["seconds"] > bound + normal:
                            failures.append(f"rank {r}: call {e['call']} raised after {e['seconds']:.2f} s "
                                            f"> bound {bound:.2f} s + a normal call's {normal:.2f} s: "
                                            f"{e.get('message')}")
                    if e["buffer"] == "mixed":
                        mixed += 1
                        if not allow_mixed:
                            failures.append(f"rank {r}: call {e['call']} raised and left a mixed buffer")
            if kind == "after_error":
                codes = {c.get("code") for c in ev if c.get("event") == "call" and not c["ok"]}
                if codes <= {"mismatch across ranks", "invalid usage"}:
                    # A mismatch found by the agreement (a new configuration) leaves the group
                    # usable: the next call succeeds; one found in the data phase (a peer in
                    # another call) breaks it: the next call fails at once. Never wrong data.
                    if (e["ok"] and not e["reduced"]) or (not e["ok"] and e["seconds"] > 1.0):
                        failures.append(f"rank {r}: the call after a mismatch: {e}")
                elif e["ok"] or e["seconds"] > 1.0:
                    failures.append(f"rank {r}: the call after an error on a broken communicator "
                                    f"{'returned' if e['ok'] else 'took'} ({e['seconds']:.2f} s)")
        made = not any(e.get("event") == "setup_error" for e in ev)  # no communicator: nothing to free
        if not hang and rc == 0 and made and not (r == victim and relaunched) and \
                not any(e.get("event") == "teardown" for e in ev):
            failures.append(f"rank {r}: no teardown")
    return {"trial": t, "failures": failures, "errors": errors, "codes": error_codes,
            "max_error_s": max(times) if times else None,
            "aborts": sum("abort" in f for f in failures), "hang": hang,
            "mixed": mixed,
            "effective": not (t["fault"] == "kill" and not victim_died),
            "victim_stopped": victim_stopped}


def table(results):
    rows = {}
    for r in results:
        key = (r["trial"]["fault"], r["trial"]["frontend"])
        row = rows.setdefault(key, {"trials": 0, "errors": 0, "max": 0.0, "aborts": 0, "hangs": 0,
                                    "mixed": 0, "failed": 0})
        row["trials"] += 1
        row["errors"] += r["errors"]
        row["max"] = max(row["max"], r["max_error_s"] or 0.0)
        row["aborts"] += r["aborts"]
        row["hangs"] += int(r["hang"])
        row["mixed"] += r["mixed"]
        row["failed"] += int(bool(r["failures"]))
    lines = ["| fault | front-end | trials | errors raised | max time to error (s) | aborts | hangs | mixed buffers | failed trials |",
             "|---|---|---|---|---|---|---|---|---|"]
    for (fault, fe), row in sorted(rows.items()):
        lines.append(f"| {fault} | {fe} | {row['trials']} | {row['errors']} | {row['max']:.2f} | "
                     f"{row['aborts']} | {row['hangs']} | {row['mixed']} | {row['failed']} |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ci", action="store_true", help="54 trials, 2 s timeout, 4 B .. 4 MiB, 2-6 ranks")
    ap.add_argument("--trials", type=int, default=None)
    ap.add_argument("--seed", type=int, default=None, help="default: time-based (printed)")
    ap.add_argument("--frontends", default=None, help="comma list of ucx,mpi,torch (default ucx,mpi[,torch])")
    ap.add_argument("--weights", default=None,
                    help="how often each front-end is drawn, e.g. ucx=5,mpi=3,torch=1 (CI; default: equal)")
    ap.add_argument("--faults", default=None, help="comma list: draw only these faults (default: every one)")
    ap.add_argument("--max-ranks", type=int, default=None)
    ap.add_argument("--max-bytes", default=None, help="largest message, e.g. 64M")
    ap.add_argument("--timeout", type=float, default=None, help="STRAGGLAR_TIMEOUT_S of the trials")
    ap.add_argument("--worker", default=os.environ.get("FAULT_WORKER", "build/fault_worker"))
    ap.add_argument("--mpirun", default="mpirun")
    ap.add_argument("--only", default=None, help="run one trial given as JSON (from a failure report)")
    ap.add_argument("--repeat", type=int, default=1, help="with --only: run that trial this many times (races)")
    ap.add_argument("--json", default=None, help="write every trial's result here")
    ap.add_argument("--table", default=None, help="write the markdown table here")
    ap.add_argument("--allow-mixed", action="store_true",
                    help="count buffers left partly reduced by a call that raised, without failing the trial "
                         "(with STRAGGLAR_KEEP_BUFFERS=0, or on the GPU: docs/reliability.md class 6)")
    ap.add_argument("--recover", action="store_true",
                    help="restart: after the fault every live rank re-creates the communicator (a killed "
                         "UCX rank is relaunched) and one more call must give the exact sum")
    ap.add_argument("--keep", action="store_true", help="keep failed trials' directories")
    args = ap.parse_args()
    args.faults = args.faults.split(",") if args.faults else None
    ci = args.ci
    args.trials = args.trials or (54 if ci else 100)
    args.timeout = args.timeout or (2.0 if ci else 3.0)
    args.max_ranks = args.max_ranks or (6 if ci else 8)
    args.max_bytes = parse_bytes(args.max_bytes or ("4M" if ci else "64M"))
    if args.frontends:
        args.frontends = args.frontends.split(",")
    else:
        args.frontends = ["ucx", "mpi"]
    # CI: a trial takes ~1 s on ucx, ~5 s on mpi (mpirun), ~10 s on torch (imports) on the 2-core VM.
    weights = args.weights or ("ucx=5,mpi=3,torch=1" if ci else "")
    args.weights = {k: float(v) for k, v in (w.split("=") for w in weights.split(",") if w)}
    seed = args.seed if args.seed is not None else int(time.time())
    rng = random.Random(seed)
    print(f"run_faults: seed {seed}, {args.trials} trials, front-ends {','.join(args.frontends)}, "
          f"timeout {args.timeout} s, <= {args.max_bytes} B, <= {args.max_ranks} ranks", flush=True)
    trials = [json.loads(args.only)] * max(1, args.repeat) if args.only else [make_trial(rng, i, args) for i in range(args.trials)]
    results = []
    t0 = time.monotonic()
    for t in trials:
        r = run_trial(t, args)
        results.append(r)
        status = "FAIL" if r["failures"] else "ok"
        print(f"[{t['index']:4d}] {status:4s} {t['frontend']:5s} n={t['n']} {t['algo']:9s} "
              f"{t['count'] * 4:>9d} B {t['fault']:5s} victim {t['victim']} call {t['fault_call']} "
              f"at {t['fault_at']:.2f}: {r['errors']} errors, max {r['max_error_s'] or 0:.2f} s, "
              f"{r['seconds']:.1f} s", flush=True)
        for f in r["failures"]:
            print(f"       {f}", flush=True)
        if r["failures"]:
            print(f"       reproduce: --only '{json.dumps(t)}'", flush=True)
            print("       output: " + r.get("stderr_tail", "").replace("\n", "\n       "), flush=True)
    print(table(results))
    failed = sum(bool(r["failures"]) for r in results)
    print(f"run_faults: {len(results)} trials in {time.monotonic() - t0:.0f} s, {failed} failed, seed {seed}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"seed": seed, "results": results}, f, indent=1)
    if args.table:
        with open(args.table, "w") as f:
            f.write(table(results) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
