"""See your stragglers: a report from the per-rank trace files STRAGGLAR_TRACE writes (docs/trace.md).

    python3 -m stragglar.report TRACE... [-o report.html|report.png] [--json] [--chrome merged.json]

TRACE: the ``.jsonl`` files every rank wrote (``PREFIX.c<C>.r<R>.jsonl``), their directory, or
their PREFIX. The files of one communicator are merged by call index: with every rank on one
clock (equal ``clock_id``: one host) each call's entries are compared directly — its late rank is
the last to enter, its delay the gap between the last and the second-last entry, its exposed
time the last exit minus the last entry. Ranks on several clocks (several hosts) are compared
by their times inside the call instead, assuming every rank leaves a call together (the late
rank spends the least time inside); the report says so.

The report: a ranks x calls heat map of lateness, the exposed time of every call by algorithm,
each rank's share of the calls it was late to, the delay distribution, and the estimate "over
this job, N s of communication; stragglar's schedules ran M s; the native collective would have
taken ~K s". ``-o *.html``: one page with the pictures embedded; ``-o *.png``: the pictures in
one image; ``--json``: the summary (below) on stdout for scripts; nothing else given: the text.

How the estimate is made (also printed with it): a call that ran the native collective counts
as measured for native, and a call that ran a schedule as measured for StragglAR. The other
side of each call comes from the cost model the trace records per configuration — the α-β-γ
simulator auto predicts with: StragglAR's exposed time at delay d is max(E0 − d, E∞) (its
exposed time with nobody late and with the straggler late for ever), native is modelled as the
best bulk-synchronous schedule (ring or RHD) with nobody late — scaled by the job's own
measured / modelled ratio where the job measured that side in the same configuration.

Nothing here imports pyplot: figures are ``matplotlib.figure.Figure`` objects (Agg).
"""

from __future__ import annotations

import argparse
import base64
import glob
import html
import io
import json
import math
import os
import statistics
import sys
import textwrap
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

#: A call has a late rank when its last entry trails the second-last by at least this much,
#: and by this fraction of the call's exposed time (auto's rule, straggler_policy.hpp).
MIN_DELAY_S, MIN_DELAY_FRACTION = 5e-6, 0.02
SCHEDULE_FAMILY = {"stragglar", "stragglar-k", "hierarchical", "broadcast"}


@dataclass
class Call:
    index: int
    config: int
    algorithm: str
    reason: str
    entry_ns: list[int]
    exit_ns: list[int]
    lateness_s: list[float] = field(default_factory=list)
    late_rank: int = -1          # -1: no significant gap
    delay_s: float = 0.0
    exposed_s: float = 0.0


@dataclass
class Communicator:
    key: tuple
    nranks: int
    api: str
    shared_clock: bool
    configs: dict[int, dict]
    calls: list[Call]
    ranks_found: list[int]


def trace_files(paths: list[str]) -> list[str]:
    """Every .jsonl trace file the arguments name (files, directories, prefixes)."""
    files: list[str] = []
    for p in paths:
        if os.path.isdir(p):
            files += sorted(glob.glob(os.path.join(p, "*.jsonl")))
        elif os.path.isfile(p):
            # A rank's Chrome file given: its JSON lines beside it hold the same calls and more.
            files.append(p + "l" if p.endswith(".json") and os.path.isfile(p + "l") else p)
        else:
            found = sorted(glob.glob(p + "*.jsonl"))
            if not found:
                raise SystemExit(f"stragglar.report: {p!r}: no trace file, directory or prefix of .jsonl files there")
            files += found
    if not files:
        raise SystemExit(f"stragglar.report: no .jsonl trace files in {paths}")
    return files


def read_rank(path: str) -> dict:
    rank: dict[str, Any] = {"header": None, "configs": {}, "calls": [], "path": path}
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                j = json.loads(line)
            except json.JSONDecodeError as e:
                raise SystemExit(f"stragglar.report: {path}:{n}: not a JSON line ({e})") from None
            t = j.get("type")
            if t == "header":
                rank["header"] = j
            elif t == "config":
                rank["configs"][j["config"]] = j
            elif t == "call":
                rank["calls"].append(j)
    if rank["header"] is None or rank["header"].get("format") != "stragglar-trace":
        raise SystemExit(f"stragglar.report: {path}: not a stragglar trace (no header line); expected a file "
                         "STRAGGLAR_TRACE wrote")
    return rank


def significant(gap_s: float, exposed_s: float) -> bool:
    return gap_s >= max(MIN_DELAY_S, MIN_DELAY_FRACTION * exposed_s)


def merge(files: list[str]) -> list[Communicator]:
    groups: dict[tuple, dict[int, dict]] = defaultdict(dict)
    for path in files:
        r = read_rank(path)
        h = r["header"]
        groups[(h["comm"], h["nranks"], h["api"])][h["rank"]] = r
    comms = []
    for key, ranks in sorted(groups.items()):
        nranks = key[1]
        order = sorted(ranks)
        rs = [ranks[k] for k in order]
        shared = len({r["header"]["clock_id"] for r in rs}) == 1 and rs[0]["header"]["clock_id"] >= 0
        ncalls = min(len(r["calls"]) for r in rs)
        configs = rs[0]["configs"]
        calls = []
        for i in range(ncalls):
            recs = [r["calls"][i] for r in rs]
            first = recs[0]
            c = Call(i, first["config"], first["algorithm"], first["reason"],
                     [x["entry_ns"] for x in recs], [x["exit_ns"] for x in recs])
            inside = [(x - e) * 1e-9 for e, x in zip(c.entry_ns, c.exit_ns)]
            if shared:
                last_entry = max(c.entry_ns)
                c.lateness_s = [(e - min(c.entry_ns)) * 1e-9 for e in c.entry_ns]
                c.exposed_s = max(0.0, (max(c.exit_ns) - last_entry) * 1e-9)
                by_entry = sorted(range(len(rs)), key=lambda k: c.entry_ns[k])
                gap = (c.entry_ns[by_entry[-1]] - c.entry_ns[by_entry[-2]]) * 1e-9 if len(rs) > 1 else 0.0
                last = by_entry[-1]
            else:  # every rank leaves together: the late rank spends the least time inside
                c.lateness_s = [max(inside) - t for t in inside]
                c.exposed_s = min(inside)
                by_inside = sorted(range(len(rs)), key=lambda k: inside[k])
                gap = inside[by_inside[1]] - inside[by_inside[0]] if len(rs) > 1 else 0.0
                last = by_inside[0]
            if len(rs) > 1 and significant(gap, c.exposed_s):
                c.late_rank, c.delay_s = order[last], gap
            calls.append(c)
        comms.append(Communicator(key, nranks, key[2], shared, configs, calls, order))
    return comms


def model_stragglar(cfg: dict, delay_s: float) -> float:
    m = cfg.get("model") or {}
    a0, ainf = m.get("stragglar_at_zero_s"), m.get("stragglar_at_infinity_s")
    if a0 is None or ainf is None:
        return math.nan
    return max(a0 - max(0.0, delay_s), ainf)


def model_native(cfg: dict) -> float:
    b = (cfg.get("model") or {}).get("bulk_s")
    return math.nan if b is None else b


def ran_native(c: Call) -> bool:
    return c.algorithm == "native"


def estimate(comm: Communicator) -> dict:
    """N, M, K of the report (seconds) and how each was obtained."""
    # A configuration's first call also pays its setup (the agreement, plans; in the MPI
    # front-end the communicator's duplication): left out of the estimate.
    seen: set[int] = set()
    calls_counted = []
    for c in comm.calls:
        if c.config not in seen:
            seen.add(c.config)
        elif c.algorithm != "none":
            calls_counted.append(c)
    native_ratio: dict[int, list[float]] = defaultdict(list)
    sched_ratio: dict[int, list[float]] = defaultdict(list)
    for c in calls_counted:
        cfg = comm.configs.get(c.config, {})
        if ran_native(c) and model_native(cfg) > 0:
            native_ratio[c.config].append(c.exposed_s / model_native(cfg))
        elif c.algorithm in SCHEDULE_FAMILY and model_stragglar(cfg, c.delay_s) > 0:
            sched_ratio[c.config].append(c.exposed_s / model_stragglar(cfg, c.delay_s))
    communication = ran_schedules = native_est = stragglar_est = 0.0
    native_measured = stragglar_measured = unknown = 0
    for c in calls_counted:
        cfg = comm.configs.get(c.config, {})
        communication += c.exposed_s
        # The model is scaled by what this configuration measured of the same side, else of the
        # other side (the model is taken to be off by one factor on this machine), else not at all.
        measured_n = statistics.median(native_ratio[c.config]) if native_ratio[c.config] else None
        measured_s = statistics.median(sched_ratio[c.config]) if sched_ratio[c.config] else None
        rn = measured_n or measured_s or 1.0
        rs = measured_s or measured_n or 1.0
        if ran_native(c):
            native_est += c.exposed_s
            native_measured += 1
        else:
            ran_schedules += c.exposed_s
            k = model_native(cfg) * rn
            native_est += k if math.isfinite(k) else c.exposed_s
            unknown += not math.isfinite(k)
        if c.algorithm in SCHEDULE_FAMILY:
            stragglar_est += c.exposed_s
            stragglar_measured += 1
        else:
            s = model_stragglar(cfg, c.delay_s) * rs
            stragglar_est += s if math.isfinite(s) else c.exposed_s
            unknown += not math.isfinite(s)
    calls = len(calls_counted)
    scaled = ("; model times scaled by the job's measured/modelled ratio (of the same side where measured, "
              "else of the other side)" if any(native_ratio.values()) or any(sched_ratio.values())
              else "; model times unscaled (nothing measured to calibrate them)")
    how = (f"each configuration's first call left out (it pays the setup): {calls} calls counted; "
           f"native: {native_measured} of {calls} calls measured (they ran it), the rest from the cost model in "
           f"the trace (best bulk-synchronous schedule, nobody late); StragglAR: {stragglar_measured} of {calls} "
           f"calls measured, the rest from the model max(E0 - delay, E_inf) at each call's measured delay{scaled}"
           + (f"; {unknown} estimates had no model and count as measured" if unknown else ""))
    return {"communication_s": communication, "stragglar_ran_s": ran_schedules, "native_would_take_s": native_est,
            "stragglar_would_take_s": stragglar_est, "saving_s": native_est - stragglar_est,
            "calls_counted": calls, "native_calls_measured": native_measured,
            "stragglar_calls_measured": stragglar_measured, "method": how}


def summarize(comm: Communicator) -> dict:
    late = [c for c in comm.calls if c.late_rank >= 0]
    counts = Counter(c.late_rank for c in late)
    top, top_n = counts.most_common(1)[0] if counts else (-1, 0)
    delays = sorted(c.delay_s for c in late)
    by_alg: dict[str, dict] = {}
    for alg in sorted({c.algorithm for c in comm.calls}):
        xs = [c.exposed_s for c in comm.calls if c.algorithm == alg]
        by_alg[alg] = {"calls": len(xs), "exposed_total_s": sum(xs), "exposed_median_s": statistics.median(xs)}
    n = len(comm.calls)
    return {
        "comm": comm.key[0], "api": comm.api, "nranks": comm.nranks, "ranks_traced": comm.ranks_found, "calls": n,
        "shared_clock": comm.shared_clock,
        "lateness_from": "entries on one clock" if comm.shared_clock
        else "times inside each call (ranks on several clocks: assumes every rank leaves a call together)",
        "late_rank": top, "late_rank_share": top_n / n if n else 0.0,
        "late_share_per_rank": {str(r): counts.get(r, 0) / n if n else 0.0 for r in comm.ranks_found},
        "calls_with_a_late_rank": len(late),
        "late_rank_per_call": [c.late_rank for c in comm.calls],
        "delay_median_s": statistics.median(delays) if delays else 0.0,
        "delay_p90_s": delays[min(len(delays) - 1, int(0.9 * len(delays)))] if delays else 0.0,
        "by_algorithm": by_alg,
        "estimate": estimate(comm),
    }


def summary_of(comms: list[Communicator]) -> dict:
    per = [summarize(c) for c in comms]
    main = max(per, key=lambda s: (s["calls"] * s["nranks"], -s["comm"]))
    return {"late_rank": main["late_rank"], "late_rank_share": main["late_rank_share"], "main_comm": main["comm"],
            "estimate": main["estimate"], "communicators": per}


def text_of(summary: dict) -> str:
    lines = []
    for s in summary["communicators"]:
        if s["calls"] == 0:  # a communicator made and never called (a spare process group)
            continue
        e = s["estimate"]
        lines.append(f"communicator {s['comm']} ({s['api']}, {s['nranks']} ranks, {s['calls']} calls; lateness from "
                     f"{s['lateness_from']})")
        if len(s["ranks_traced"]) < s["nranks"]:
            lines.append(f"  only {len(s['ranks_traced'])} of its {s['nranks']} ranks' files were given: pass every "
                         "rank's .jsonl (or their directory) to compare them")
        if s["late_rank"] >= 0:
            lines.append(f"  late rank: {s['late_rank']}, late to {100 * s['late_rank_share']:.0f}% of the calls; "
                         f"delay median {1e3 * s['delay_median_s']:.3g} ms, p90 {1e3 * s['delay_p90_s']:.3g} ms")
        else:
            lines.append("  no rank was late (no call's last arrival trailed the others significantly)")
        for alg, a in s["by_algorithm"].items():
            lines.append(f"  {alg}: {a['calls']} calls, exposed {a['exposed_total_s']:.4g} s "
                         f"(median {1e3 * a['exposed_median_s']:.3g} ms)")
        lines.append(f"  over this job, {e['communication_s']:.4g} s of communication (exposed); stragglar's "
                     f"schedules ran {e['stragglar_ran_s']:.4g} s; the native collective would have taken "
                     f"~{e['native_would_take_s']:.4g} s; StragglAR ~{e['stragglar_would_take_s']:.4g} s "
                     f"(saving ~{e['saving_s']:.4g} s)")
        lines.append(f"  how: {e['method']}")
    return "\n".join(lines)


# ---- pictures --------------------------------------------------------------------------------

def figures(comm: Communicator, summary: dict) -> list[tuple[str, Any]]:
    from matplotlib.figure import Figure
    from matplotlib.colors import Normalize

    out = []
    calls = comm.calls
    # 1. ranks x calls: lateness (ms)
    fig = Figure(figsize=(7.5, 0.35 * comm.nranks + 1.8), layout="constrained")
    ax = fig.subplots()
    grid = [[1e3 * c.lateness_s[k] for c in calls] for k in range(len(comm.ranks_found))]
    vmax = max((max(row) for row in grid if row), default=1.0) or 1.0
    im = ax.imshow(grid, aspect="auto", interpolation="nearest", cmap="magma_r", norm=Normalize(0, vmax))
    ax.set_yticks(range(len(comm.ranks_found)), [str(r) for r in comm.ranks_found])
    ax.set_xlabel("call")
    ax.set_ylabel("rank")
    ax.set_title("How late each rank entered each call (ms after the first rank)")
    fig.colorbar(im, ax=ax, label="ms")
    out.append(("lateness", fig))
    # 2. exposed time per call by algorithm
    fig = Figure(figsize=(7.5, 3.2), layout="constrained")
    ax = fig.subplots()
    try:
        from stragglar.figures import color_of
    except Exception:  # pragma: no cover - figures needs nothing more than matplotlib
        def color_of(_):
            return None
    for alg in sorted({c.algorithm for c in calls}):
        xs = [c.index for c in calls if c.algorithm == alg]
        ys = [1e3 * c.exposed_s for c in calls if c.algorithm == alg]
        ax.scatter(xs, ys, s=14, label=alg, color=color_of(alg))
    ax.set_xlabel("call")
    ax.set_ylabel("exposed time (ms)")
    ax.set_title("Exposed time of every call (after the last rank entered), by what ran")
    ax.legend(fontsize=8)
    out.append(("exposed", fig))
    # 3. late share per rank, 4. delay distribution
    fig = Figure(figsize=(7.5, 3.0), layout="constrained")
    ax1, ax2 = fig.subplots(1, 2)
    shares = summary["late_share_per_rank"]
    ranks = list(shares)
    ax1.bar(ranks, [100 * shares[r] for r in ranks], color="#d62728")
    ax1.set_xlabel("rank")
    ax1.set_ylabel("% of calls it was last")
    ax1.set_title("Who was late")
    delays = [1e3 * c.delay_s for c in calls if c.late_rank >= 0]
    if delays:
        ax2.hist(delays, bins=min(30, max(5, len(delays) // 3)), color="#7f7f7f")
    ax2.set_xlabel("delay of the last rank (ms)")
    ax2.set_ylabel("calls")
    ax2.set_title("How late")
    out.append(("late-share-and-delay", fig))
    # 5. the estimate
    e = summary["estimate"]
    fig = Figure(figsize=(7.5, 1.9), layout="constrained")
    ax = fig.subplots()
    rows = [("this job", e["communication_s"], "#555555"),
            ("native collective", e["native_would_take_s"], "#7f7f7f"),
            ("StragglAR", e["stragglar_would_take_s"], "#d62728")]
    ax.barh([r[0] for r in rows][::-1], [r[1] for r in rows][::-1], color=[r[2] for r in rows][::-1])
    for y, (_, v, _) in enumerate(rows[::-1]):
        ax.annotate(f" {v:.3g} s", (v, y), va="center", fontsize=8)
    ax.set_xlim(0, 1.2 * max(r[1] for r in rows) or 1)
    ax.set_xlabel(f"exposed communication time over {e['calls_counted']} calls (s)")
    ax.set_title("Each side's total: measured where it ran, else the model ('how' in the text)", fontsize=10)
    out.append(("estimate", fig))
    return out


def png_bytes(fig, dpi: int = 100) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    return buf.getvalue()


def write_html(path: str, comm: Communicator, summary: dict, text: str) -> None:
    parts = [f"<!doctype html><meta charset='utf-8'><title>stragglar report</title>",
             "<body style='font-family:sans-serif;max-width:900px;margin:auto'>",
             "<h1>stragglar: who was late, and what it cost</h1>", f"<pre>{html.escape(text)}</pre>"]
    for name, fig in figures(comm, summarize(comm)):
        b64 = base64.b64encode(png_bytes(fig)).decode()
        parts.append(f"<p><img alt='{name}' src='data:image/png;base64,{b64}' style='max-width:100%'></p>")
    parts.append("</body>")
    with open(path, "w") as f:
        f.write("\n".join(parts))


def write_png(path: str, comm: Communicator, text: str, dpi: int = 100) -> None:
    """The pictures stacked in one image, with the estimate's sentence on top."""
    from matplotlib.figure import Figure
    import matplotlib.image as mpimg

    pngs = [mpimg.imread(io.BytesIO(png_bytes(fig, dpi)), format="png") for _, fig in figures(comm, summarize(comm))]
    heights = [p.shape[0] for p in pngs]
    width = max(p.shape[1] for p in pngs)
    head = 0.9
    fig = Figure(figsize=(width / dpi, sum(heights) / dpi + head), dpi=dpi)
    lines = text.splitlines()
    keep = [lines[0]] + [ln.strip() for ln in lines if "late rank" in ln or "over this job" in ln][:2]
    fig.text(0.01, 1 - 0.1 / (sum(heights) / dpi + head), "\n".join(textwrap.fill(ln, 120) for ln in keep),
             va="top", fontsize=7, family="monospace")
    top = 1 - head / (sum(heights) / dpi + head)
    for p, h in zip(pngs, heights):
        frac = h / dpi / (sum(heights) / dpi + head)
        ax = fig.add_axes((0, top - frac, p.shape[1] / width, frac))
        ax.imshow(p)
        ax.axis("off")
        top -= frac
    fig.savefig(path, dpi=dpi)


def write_chrome(path: str, comms: list[Communicator]) -> None:
    """One Chrome trace of every rank: a process per rank, a slice per call, lateness counters."""
    events: list[dict] = []
    for comm in comms:
        tid = comm.key[0]
        for k, r in enumerate(comm.ranks_found):
            events.append({"ph": "M", "name": "process_name", "pid": r, "args": {"name": f"rank {r}"}})
            events.append({"ph": "M", "name": "process_sort_index", "pid": r, "args": {"sort_index": r}})
            events.append({"ph": "M", "name": "thread_name", "pid": r, "tid": tid,
                           "args": {"name": f"communicator {tid} ({comm.api})"}})
        for c in comm.calls:
            for k, r in enumerate(comm.ranks_found):
                args = {"call": c.index, "config": c.config, "algorithm": c.algorithm, "reason": c.reason,
                        "late_rank": c.late_rank, "delay_ms": 1e3 * c.delay_s, "exposed_ms": 1e3 * c.exposed_s,
                        "lateness_ms": 1e3 * c.lateness_s[k]}
                events.append({"ph": "X", "cat": "allreduce", "name": c.algorithm, "pid": r, "tid": tid,
                               "ts": c.entry_ns[k] / 1e3, "dur": (c.exit_ns[k] - c.entry_ns[k]) / 1e3, "args": args})
                events.append({"ph": "C", "name": "lateness (ms)", "pid": r, "ts": min(c.entry_ns) / 1e3,
                               "args": {"ms": 1e3 * c.lateness_s[k]}})
    with open(path, "w") as f:
        json.dump({"traceEvents": events, "displayTimeUnit": "ms",
                   "otherData": {"clock": "steady_clock" if all(c.shared_clock for c in comms)
                                 else "per-host steady clocks: ranks on different hosts are not aligned"}}, f)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python3 -m stragglar.report", description=__doc__.split("\n\n")[0])
    p.add_argument("traces", nargs="+", metavar="TRACE", help=".jsonl trace files, their directory or their prefix")
    p.add_argument("-o", "--output", help="report.html (pictures embedded) or report.png")
    p.add_argument("--json", action="store_true", help="print the summary as JSON on stdout")
    p.add_argument("--chrome", metavar="MERGED.json", help="write one Chrome trace of every rank (Perfetto)")
    a = p.parse_args(argv)
    comms = merge(trace_files(a.traces))
    summary = summary_of(comms)
    text = text_of(summary)
    main_comm = next(c for c in comms if c.key[0] == summary["main_comm"] and
                     len(c.calls) == next(s for s in summary["communicators"] if s["comm"] == c.key[0])["calls"])
    if a.output:
        if a.output.endswith(".png"):
            write_png(a.output, main_comm, text)
        elif a.output.endswith((".html", ".htm")):
            write_html(a.output, main_comm, summary, text)
        else:
            raise SystemExit(f"stragglar.report: -o {a.output!r}: expected a name ending in .html or .png")
    if a.chrome:
        write_chrome(a.chrome, comms)
    print(json.dumps(summary, indent=1) if a.json else text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
