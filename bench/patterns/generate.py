#!/usr/bin/env python3
"""Writes the arrival patterns of bench/patterns/: per-rank delays in ms, one line per
timed iteration, for `stragglar-bench --delay-pattern FILE` (tools/bench: cycled when there are
more iterations than lines; warm-ups use line 1). Seeded: the files are reproducible.

    python3 bench/patterns/generate.py [--ranks 8] [--lines 24] [--delay 100] [--out bench/patterns]

Kinds (docs/auto.md "Arrival patterns"): one persistent straggler that is not rank n-1, nobody
late, a different random rank every call (no persistent straggler), two ranks late together,
two stragglers alternating, every rank with random imbalance (HPC load imbalance), one straggler
whose delay jitters, a straggler that appears midway, a straggler that moves midway, the last two ranks late
together (a slow node: auto's late set).
"""
import argparse
import os
import random


def patterns(n, lines, d, rng):
    half = lines // 2
    zero = [0.0] * n

    def late(rank, ms):
        row = list(zero)
        row[rank] = ms
        return row

    return {
        "fixed-rank2": [late(2 % n, d) for _ in range(lines)],
        "none": [list(zero) for _ in range(lines)],
        "random-rank": [late(rng.randrange(n), d) for _ in range(lines)],
        "two-late": [[d if r in (2 % n, 5 % n) else 0.0 for r in range(n)] for _ in range(lines)],
        "alternating": [late((1 if i % 2 == 0 else n - 2) % n, d) for i in range(lines)],
        "imbalance": [[round(rng.uniform(0, 0.3 * d), 3) for _ in range(n)] for _ in range(lines)],
        "jitter": [late(3 % n, round(d * rng.uniform(0.5, 1.5), 3)) for _ in range(lines)],
        "appears-midway": [list(zero) if i < half else late(4 % n, d) for i in range(lines)],
        "moves-midway": [late(n - 1, d) if i < half else late(1 % n, d) for i in range(lines)],
        # a slow node: the last two ranks late together, as one host of 2 would be
        "late-node": [[d if r >= n - 2 else 0.0 for r in range(n)] for _ in range(lines)],
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=8)
    ap.add_argument("--lines", type=int, default=24)
    ap.add_argument("--delay", type=float, default=100.0, help="the late ranks' delay in ms")
    ap.add_argument("--seed", type=int, default=20)
    ap.add_argument("--out", default=os.path.dirname(os.path.abspath(__file__)))
    a = ap.parse_args()
    if a.ranks < 2 or a.lines < 2 or not a.delay > 0:
        ap.error(f"--ranks {a.ranks} / --lines {a.lines} / --delay {a.delay}: expected >= 2, >= 2, > 0")
    rng = random.Random(a.seed)
    for name, rows in patterns(a.ranks, a.lines, a.delay, rng).items():
        path = os.path.join(a.out, f"{name}.txt")
        with open(path, "w") as f:
            f.write(f"# {name}: {a.ranks} ranks, {a.lines} timed iterations, delays in ms "
                    f"(bench/patterns/generate.py --ranks {a.ranks} --lines {a.lines} --delay {a.delay:g} --seed {a.seed})\n")
            for row in rows:
                f.write(" ".join(f"{v:g}" for v in row) + "\n")
        print(path)


if __name__ == "__main__":
    main()
