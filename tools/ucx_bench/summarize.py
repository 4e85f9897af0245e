#!/usr/bin/env python3
"""Table of a compare.sh run: exposed time per engine and algorithm, each repetition and their
median, and the ratio to Gloo's all_reduce (median over repetitions) — docs/ucx.md.

    python3 tools/ucx_bench/summarize.py ucx-compare
"""
import glob
import json
import os
import re
import statistics
import sys


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "ucx-compare"
    runs = {}  # (engine, algo) -> [exposed_ms per repetition]
    for path in sorted(glob.glob(os.path.join(out, "*.json"))):
        m = re.match(r"(.*)-(\d+)\.json$", os.path.basename(path))
        if not m:
            continue
        engine = m.group(1)
        with open(path) as f:
            data = json.load(f)
        for row in data["rows"]:
            algo = row.get("algo") or row.get("mode")
            runs.setdefault((engine, algo), []).append(row["exposed_us"] / 1000)
    gloo = runs.get(("gloo", "allreduce"))
    base = statistics.median(gloo) if gloo else None
    print(f"| engine | algorithm | exposed (ms), each repetition | median | Gloo all_reduce / this |")
    print("|---|---|---|---|---|")
    for (engine, algo), values in sorted(runs.items()):
        med = statistics.median(values)
        ratio = f"{base / med:.2f}x" if base else "-"
        print(f"| {engine} | {algo} | {', '.join(f'{v:.0f}' for v in values)} | {med:.0f} | {ratio} |")


if __name__ == "__main__":
    main()
