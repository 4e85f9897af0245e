#!/usr/bin/env python3
"""Table of a compare.sh run (docs/ucx.md): exposed time per engine and algorithm, each
repetition and their median, and the ratio base / this, where base is one engine's algorithm
(median over repetitions; default Gloo's all_reduce).

    python3 tools/ucx_bench/summarize.py ucx-compare [--base mpi-shm:stragglar]

Reads OUT/ENGINE-REP.json: the bench engine's JSON (stragglar-bench, stragglar-ucx-bench: rows
with algo, exposed_us, wrong, error) and gloo_bench.py's (rows with mode, exposed_us). A row
that failed its exact check (wrong > 0) or has an error is marked, not hidden.
"""
import argparse
import glob
import json
import os
import re
import statistics


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("out", nargs="?", default="ucx-compare")
    p.add_argument("--base", default="gloo:allreduce", help="ENGINE:ALGO the ratio column divides (default %(default)s)")
    args = p.parse_args()

    runs = {}  # (engine, algo) -> [exposed_ms per repetition]
    bad = {}  # (engine, algo) -> what failed
    transports = {}  # engine -> the transport line of its first JSON
    for path in sorted(glob.glob(os.path.join(args.out, "*.json"))):
        m = re.match(r"(.*)-(\d+)\.json$", os.path.basename(path))
        if not m:
            continue
        engine = m.group(1)
        with open(path) as f:
            data = json.load(f)
        transports.setdefault(engine, data.get("transport", data.get("engine", "")))
        for row in data["rows"]:
            algo = row.get("algo") or row.get("mode")
            if row.get("error") or (row.get("wrong") or 0) > 0:
                bad.setdefault((engine, algo), []).append(row.get("error") or f"{row['wrong']} wrong")
                continue
            runs.setdefault((engine, algo), []).append(row["exposed_us"] / 1000)

    base_engine, _, base_algo = args.base.partition(":")
    base_values = runs.get((base_engine, base_algo))
    base = statistics.median(base_values) if base_values else None
    print(f"| engine | algorithm | exposed (ms), each repetition | median | {args.base} / this |")
    print("|---|---|---|---|---|")
    for (engine, algo), values in sorted(runs.items()):
        med = statistics.median(values)
        ratio = f"{base / med:.2f}x" if base else "-"
        note = f" (failed: {'; '.join(bad[(engine, algo)])})" if (engine, algo) in bad else ""
        print(f"| {engine} | {algo} | {', '.join(f'{v:.0f}' for v in values)}{note} | {med:.0f} | {ratio} |")
    for (engine, algo), why in sorted(bad.items()):
        if (engine, algo) not in runs:
            print(f"| {engine} | {algo} | failed: {'; '.join(why)} | - | - |")
    print()
    for engine, transport in sorted(transports.items()):
        print(f"- {engine}: {transport}")


if __name__ == "__main__":
    main()
