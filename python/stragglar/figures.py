"""The figures of docs/benchmarks.md, drawn only from the JSON the project's tools write.

    python3 -m stragglar.figures scaling --cli ./build/stragglar -o scaling.png [--data scaling.json]
    python3 -m stragglar.figures delay-sweep --cli ./build/stragglar BENCH.json... -o delay-sweep.png
    python3 -m stragglar.figures measured-vs-model BENCH.json -o measured-vs-model.png

- scaling: modelled speedup over Ring in exposed time vs n, every algorithm, StragglAR with the
  paper's schedule (K = 1) and pipelined (auto K), shaded from no delay (worst case) to the ideal
  delay: the paper's Fig. 9b, with ours beside it. Numbers: ``stragglar simulate --format json``.
- delay-sweep: exposed time (and time from the others' arrival, the paper's Fig. 8c) vs the
  straggler's delay: measured points from one ``stragglar-bench --json`` file per delay, model
  lines from ``stragglar simulate`` with the α, β, γ those runs calibrated (their median).
- measured-vs-model: per algorithm, the measured exposed time beside the calibrated model's
  prediction, from one ``stragglar-bench --calibrate --json`` file (the main job's).

Every plot function returns a summary of what it drew (the artists per algorithm) so tests can
check the data without comparing pixels. Nothing here imports pyplot: figures are
``matplotlib.figure.Figure`` objects and render headless (Agg).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import textwrap
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

#: The paper's scaling setup (§4.3): 1 GiB, α = 3 µs, β = 1/(450 GB/s) (DGX H100 NVLink).
PAPER_BYTES, PAPER_ALPHA, PAPER_BANDWIDTH = "1G", "3us", "450GiB/s"
#: n for the scaling figure: powers of two as in the paper (RHD pays a fold round at other n,
#: which would make its line a saw; `--nranks` takes any list).
SCALING_NRANKS = [4, 8, 16, 32, 64, 128, 256, 512, 1024]

STRAGGLAR_K1, STRAGGLAR_AUTO = "stragglar K=1", "stragglar auto K"
# One colour per algorithm across all figures (bench names; "stragglar:1" is the paper's K = 1).
COLORS = {"stragglar": "#d62728", STRAGGLAR_AUTO: "#d62728", "stragglar:1": "#ff7f0e", STRAGGLAR_K1: "#ff7f0e",
          "ring": "#1f77b4", "rhd": "#2ca02c", "allpairs": "#9467bd", "broadcast": "#8c564b", "native": "#7f7f7f",
          "auto": "#8b0000"}
NAMES = {"stragglar": "StragglAR (auto K)", STRAGGLAR_AUTO: "StragglAR, pipelined (auto K)",
         "stragglar:1": "StragglAR K = 1 (paper's schedule)", STRAGGLAR_K1: "StragglAR, paper's schedule (K = 1)",
         "ring": "Ring", "rhd": "RHD", "allpairs": "MSCCL allpairs", "broadcast": "Broadcast (direct)",
         "native": "native (MPI_Allreduce)", "auto": "auto (the library picks per call)"}


def color_of(algo: str) -> str:
    if algo in COLORS:
        return COLORS[algo]
    return "#17becf" if algo.startswith("stragglar:") else "#bcbd22"


def linestyle_of(algo: str) -> Any:
    """Ring and RHD cost almost the same at powers of two: dashes keep both visible."""
    return {"ring": (0, (5, 3)), "rhd": "-", "allpairs": (0, (1, 1.5)), "broadcast": "-."}.get(algo, "-")


def name_of(algo: str) -> str:
    if algo in NAMES:
        return NAMES[algo]
    if algo.startswith("stragglar:"):
        return f"StragglAR K = {algo.split(':', 1)[1]}"
    return algo


def machine_description() -> str:
    """CPU model and core count of this machine (where the figures are measured)."""
    model = ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    cores = os.cpu_count() or 0
    return f"{model or 'CPU'}, {cores} core{'s' if cores != 1 else ''}"


def format_bytes(b: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= scale and b % scale == 0:
            return f"{b // scale} {unit}"
    return f"{b} B"


# ---------------------------------------------------------------------------------------------
# Running the tools (the only source of numbers)


def run_simulate(cli: str, *, nranks: int, bytes: int | str, algo: str = "all", pipeline: str = "1",
                 alpha: str = PAPER_ALPHA, bandwidth: str = PAPER_BANDWIDTH, reduce_bandwidth: str | None = None,
                 delay: str = "ideal") -> list[dict]:
    """``stragglar simulate ... --format json``, parsed; raises RuntimeError with its message on failure."""
    cmd = [cli, "simulate", "--nranks", str(nranks), "--bytes", str(bytes), "--algo", algo, "--pipeline", pipeline,
           "--alpha", alpha, "--bandwidth", bandwidth, "--delay", delay, "--format", "json"]
    if reduce_bandwidth:
        cmd += ["--reduce-bandwidth", reduce_bandwidth]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({p.returncode}): {p.stderr.strip()}")
    return json.loads(p.stdout)


def load_bench(path: str) -> dict:
    """A ``stragglar-bench --json`` file; rows with an ``error`` are dropped (they have no times)."""
    with open(path, encoding="utf-8") as f:
        j = json.load(f)
    if not isinstance(j, dict) or "rows" not in j or "nranks" not in j:
        raise ValueError(f"{path}: not a stragglar-bench --json file (expected an object with nranks and rows)")
    j["rows"] = [r for r in j["rows"] if "error" not in r]
    if not j["rows"]:
        raise ValueError(f"{path}: no successful rows")
    j["path"] = path
    return j


@dataclass
class PlotSummary:
    """What a figure function drew: per algorithm, the artists that show it."""

    figure: Any
    axes: list
    lines: dict[str, Any] = field(default_factory=dict)  # algorithm -> Line2D (one per algorithm)
    points: dict[str, Any] = field(default_factory=dict)  # algorithm -> measured markers
    bands: dict[str, Any] = field(default_factory=dict)  # algorithm -> shaded range
    bars: dict[str, tuple] = field(default_factory=dict)  # algorithm -> (measured bar, model bar or None)
    panels: list = field(default_factory=list)  # per panel, its `lines` (scaling: (a) K = 1, (b) auto)


def new_figure(width: float, height: float, ncols: int = 1):
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), layout="constrained")
    axes = fig.subplots(1, ncols, squeeze=False)[0]
    return fig, list(axes)


# ---------------------------------------------------------------------------------------------
# 1. Scaling (paper Fig. 9b)


def scaling_data(cli: str, nranks: list[int] = SCALING_NRANKS, *, bytes: str = PAPER_BYTES, alpha: str = PAPER_ALPHA,
                 bandwidth: str = PAPER_BANDWIDTH) -> dict:
    """Every algorithm at the ideal delay, and StragglAR (K = 1 and auto) also at delay 0, per n."""
    rows = []
    for n in nranks:
        for variant, algo, pipeline, delay in (("all", "all", "1", "ideal"), (STRAGGLAR_K1, "stragglar", "1", "0"),
                                               (STRAGGLAR_AUTO, "stragglar", "auto", "ideal"),
                                               (STRAGGLAR_AUTO, "stragglar", "auto", "0")):
            for r in run_simulate(cli, nranks=n, bytes=bytes, algo=algo, pipeline=pipeline, alpha=alpha,
                                  bandwidth=bandwidth, delay=delay):
                if variant == "all":
                    r["series"] = STRAGGLAR_K1 if r["algorithm"] == "stragglar" else r["algorithm"]
                else:
                    r["series"] = variant
                rows.append(r)
    return {"figure": "scaling", "bytes": bytes, "alpha": alpha, "bandwidth": bandwidth,
            "source": f"{os.path.basename(cli)} simulate --format json", "rows": rows}


def pretty(arg: str) -> str:
    """A CLI argument for a title: 3us -> 3 µs, 450GiB/s -> 450 GiB/s."""
    for unit in ("GiB/s", "MiB/s", "GB/s", "MB/s", "us", "ms", "ns"):
        if arg.endswith(unit) and arg[: -len(unit)].replace(".", "", 1).isdigit():
            return arg[: -len(unit)] + " " + unit.replace("us", "\u00b5s")
    return arg


def plot_scaling(data: dict) -> PlotSummary:
    """Two panels, same baselines: (a) the paper's figure (StragglAR K = 1), (b) ours (auto K)."""
    fig, axes = new_figure(14, 6, ncols=2)
    fig.get_layout_engine().set(w_pad=0.15)
    summary = PlotSummary(fig, axes)
    ideal, worst = defaultdict(dict), defaultdict(dict)  # series -> n -> row
    for r in data["rows"]:
        (ideal if r["delay"] == "ideal" else worst)[r["series"]][r["nranks"]] = r
    baselines = [s for s in ideal if s not in (STRAGGLAR_K1, STRAGGLAR_AUTO)]
    all_n = sorted({r["nranks"] for r in data["rows"]})
    top = max(r["speedup_vs_ring"] for r in data["rows"])
    for ax, ours, title in ((axes[0], STRAGGLAR_K1, "(a) the paper's figure: StragglAR with its schedule (K = 1)"),
                            (axes[1], STRAGGLAR_AUTO, "(b) ours: StragglAR pipelined, K chosen by the model (auto)")):
        lines = {}
        for series in baselines + [ours]:
            ns = sorted(ideal[series])
            ys = [ideal[series][n]["speedup_vs_ring"] for n in ns]
            is_s = series == ours
            lines[series] = ax.plot(ns, ys, color=color_of(series), lw=2.4 if is_s else 1.5, marker="o" if is_s else ".",
                                    ms=5 if is_s else 6, ls=linestyle_of(series),
                                    label=name_of(series) + (", ideal delay" if is_s else ""))[0]
        if ours in worst:
            wn = [n for n in sorted(ideal[ours]) if n in worst[ours]]
            lo = [worst[ours][n]["speedup_vs_ring"] for n in wn]
            hi = [ideal[ours][n]["speedup_vs_ring"] for n in wn]
            summary.bands[ours] = ax.fill_between(wn, lo, hi, color=color_of(ours), alpha=0.15, lw=0,
                                                  label="StragglAR's range: no delay \u2026 ideal delay")
        if ours == STRAGGLAR_AUTO:  # say which K the model chose where it is not 1
            for n, r in sorted(ideal[ours].items()):
                if r["pipeline"] > 1:
                    ax.annotate(f"K={r['pipeline']}", (n, r["speedup_vs_ring"]), textcoords="offset points",
                                xytext=(0, 7), ha="center", fontsize=8, color=color_of(ours))
        summary.panels.append(lines)
        ax.set_xscale("log", base=2)
        ax.set_xticks(all_n)
        ax.set_xticklabels([str(n) for n in all_n])
        ax.minorticks_off()
        ax.set_ylim(0, top * 1.08)
        ax.set_xlabel("n (ranks, log scale)")
        ax.set_ylabel("speedup over Ring in exposed time (\u00d7)")
        ax.grid(True, alpha=0.3)
        ax.set_title(title, fontsize=10)
        ax.legend(fontsize=8, loc="upper left")
    summary.lines = summary.panels[1]
    nbytes = data["rows"][0]["bytes"] if data["rows"] else 0
    fig.suptitle(f"Modelled AllReduce speedup over Ring as n grows: {format_bytes(nbytes)}, "
                 f"\u03b1 = {pretty(data['alpha'])}, bandwidth {pretty(data['bandwidth'])} (the paper's Fig. 9b setup, "
                 "DGX H100 NVLink)\n\u03b1-\u03b2 model (`stragglar simulate --format json`); lines at the ideal "
                 "straggler delay (StragglAR's ReduceScatter hidden), shaded down to no delay", fontsize=10)
    return summary


# ---------------------------------------------------------------------------------------------
# 2. Delay sweep (paper Fig. 8c)


def median_calibration(runs: list[dict]) -> dict | None:
    cals = [r["calibration"] for r in runs if r.get("calibration")]
    if not cals:
        return None
    return {k: statistics.median(c[k] for c in cals) for k in ("alpha_us", "bandwidth_GBps", "reduce_bandwidth_GBps")}


def model_args(cal: dict) -> dict:
    args = {"alpha": f"{cal['alpha_us']:.9g}us", "bandwidth": f"{cal['bandwidth_GBps']:.9g}GB/s"}
    if cal.get("reduce_bandwidth_GBps", 0) > 0:
        args["reduce_bandwidth"] = f"{cal['reduce_bandwidth_GBps']:.9g}GB/s"
    return args


def model_delay_grid(measured_ms: list[float], ideal_ms: float) -> list[float]:
    """0, the measured delays, the ideal delay and a geometric grid up to past the largest."""
    top = max([*measured_ms, ideal_ms * 2, 1.0]) * 1.25
    grid = {0.0, *measured_ms, ideal_ms}
    d = top / 2 ** 12
    while d <= top:
        grid.add(d)
        d *= 2 ** 0.25
    return sorted(round(x, 6) for x in grid)


def delay_sweep_data(cli: str, bench_paths: list[str] | None = None, *, nranks: int = 8, bytes: str = "4G",
                     algos: str = "stragglar,ring,rhd", alpha: str = PAPER_ALPHA, bandwidth: str = PAPER_BANDWIDTH,
                     reduce_bandwidth: str | None = None) -> dict:
    """Measured points from bench files (one per delay) and model lines from ``stragglar simulate``.

    With bench files the model uses their n, size, algorithms, StragglAR's K and the median of their
    calibrations; without, it is the model alone for the given setup (default: the paper's Fig. 8c,
    8 ranks, 4 GiB, DGX H100).
    """
    runs = [load_bench(p) for p in bench_paths or []]
    measured = []
    entries: dict[str, list[int]] = defaultdict(list)  # bench algo entry -> K per row
    if runs:
        ns = {r["nranks"] for r in runs}
        sizes = {row["bytes"] for r in runs for row in r["rows"]}
        if len(ns) != 1 or len(sizes) != 1:
            raise ValueError(f"delay sweep: the bench files must share one n and one size (got n {sorted(ns)}, "
                             f"sizes {sorted(sizes)})")
        nranks, nbytes = ns.pop(), sizes.pop()
        for r in runs:
            for row in r["rows"]:
                measured.append({**row, "straggler": r.get("straggler"), "iters": r.get("iters"), "file": r["path"]})
                entries[row["algo"]].append(row["pipeline"])
        cal = median_calibration(runs)
        if cal is None:
            raise ValueError("delay sweep: no calibration in the bench files (run stragglar-bench with --calibrate)")
        cost = model_args(cal)
    else:
        nbytes, cal = bytes, None
        cost = {"alpha": alpha, "bandwidth": bandwidth, **({"reduce_bandwidth": reduce_bandwidth} if reduce_bandwidth else {})}
        for a in algos.split(","):
            entries[a] = []
    # The model's K for a stragglar entry: the K the bench ran (most common over the sweep);
    # "stragglar:K" fixes it; the model alone uses auto.
    calls: dict[str, tuple[str, str]] = {}  # entry -> (simulate algo, --pipeline)
    for entry, ks in entries.items():
        base = entry.split(":", 1)[0]
        if base == "native":
            continue
        if base == "stragglar":
            k = str(max(set(ks), key=ks.count)) if ks else (entry.split(":", 1)[1] if ":" in entry else "auto")
            calls[entry] = ("stragglar", k)
        else:
            calls[entry] = (base, "1")
    ideal = run_simulate(cli, nranks=nranks, bytes=nbytes, algo="stragglar",
                         pipeline=calls.get("stragglar", ("stragglar", "auto"))[1], delay="ideal", **cost)[0]
    ideal_ms = ideal["delay_us"] / 1e3
    grid = model_delay_grid(sorted({m["delay_ms"] for m in measured}), ideal_ms)
    model = []
    for d in grid:
        for pipeline in sorted({p for _, p in calls.values()}):
            names = [e for e, (a, p) in calls.items() if p == pipeline]
            rows = run_simulate(cli, nranks=nranks, bytes=nbytes, algo=",".join(calls[e][0] for e in names),
                                pipeline=pipeline, delay=f"{d:.9g}ms", **cost)
            for entry, row in zip(names, rows):
                model.append({**row, "entry": entry, "delay_ms": d})
    return {"figure": "delay-sweep", "nranks": nranks, "bytes": int(ideal["bytes"]), "calibration": cal,
            "model_cost": cost, "ideal_delay_ms": ideal_ms, "measured": measured, "model": model,
            "bench_files": [r["path"] for r in runs]}


def plot_delay_sweep(data: dict, machine: str | None = None) -> PlotSummary:
    fig, axes = new_figure(13.5, 6.2, ncols=2)
    summary = PlotSummary(fig, axes)
    measured = data["measured"]
    entries = list(dict.fromkeys([m["algo"] for m in measured] + [m["entry"] for m in data["model"]]))
    xmax = max([m["delay_ms"] for m in measured] + [m["delay_ms"] for m in data["model"]] + [1.0])
    for ax, key, ylabel in ((axes[0], "exposed_us", "exposed time (ms, from the straggler's arrival)"),
                            (axes[1], "time_us", "time (ms, from the others' arrival)")):
        for entry in entries:
            c = color_of(entry)
            mod = sorted((m for m in data["model"] if m["entry"] == entry), key=lambda m: m["delay_ms"])
            if mod:
                line = ax.plot([m["delay_ms"] for m in mod], [m[key] / 1e3 for m in mod], color=c, lw=1.6,
                               ls=linestyle_of(entry), label=f"{name_of(entry)}: model")[0]
                if ax is axes[0]:
                    summary.lines[entry] = line
            meas = sorted((m for m in measured if m["algo"] == entry), key=lambda m: m["delay_ms"])
            if meas:
                pts = ax.plot([m["delay_ms"] for m in meas], [m[key] / 1e3 for m in meas], ls=":" if not mod else "none",
                              lw=1, marker="o", ms=6, mfc="white" if entry == "native" else c, mec=c, color=c,
                              label=f"{name_of(entry)}: measured")[0]
                if ax is axes[0]:
                    summary.points[entry] = pts
                if entry == "stragglar" or entry.startswith("stragglar:"):  # the K each run used
                    for m in meas:
                        ax.annotate(f"K={m['pipeline']}", (m["delay_ms"], m[key] / 1e3), textcoords="offset points",
                                    xytext=(7, 0), va="center", fontsize=7, color=c)
        ax.axvline(data["ideal_delay_ms"], color="black", lw=0.8, ls="--")
        ax.annotate(f"model: StragglAR's\nReduceScatter hidden\nfrom {data['ideal_delay_ms']:.3g} ms",
                    (data["ideal_delay_ms"], 0.02), xycoords=("data", "axes fraction"), xytext=(4, 0),
                    textcoords="offset points", va="bottom", fontsize=8)
        positive = [m["delay_ms"] for m in measured if m["delay_ms"] > 0]
        if positive and xmax > 20 * min(positive):  # a sweep over decades: 0, 5, 20, 60, 300 ms
            linthresh = min(positive)
            ax.set_xscale("symlog", linthresh=linthresh, linscale=0.5)
            ax.set_xticks(sorted({0.0, *positive}))
            ax.set_xticklabels([f"{d:g}" for d in ax.get_xticks()])
            ax.set_xlabel(f"straggler delay (ms; linear below {linthresh:g}, log above)")
        else:
            ax.set_xlabel("straggler delay (ms)")
        ax.set_xlim(0, xmax * 1.08)
        ax.set_ylim(bottom=0)
        ax.set_ylabel(ylabel)
        ax.grid(True, alpha=0.3)
    axes[0].set_title("(a) exposed time: the cost once the last rank is there", fontsize=10)
    axes[1].set_title("(b) delay + exposed time (paper Fig. 8c's metric)", fontsize=10)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncols=min(4, len(handles)), fontsize=8, frameon=False)
    cal = data.get("calibration")
    if measured:
        straggler = measured[0].get("straggler")
        head = (f"Straggler delay sweep, measured: n = {data['nranks']}, {format_bytes(data['bytes'])} "
                f"{measured[0]['type']} {measured[0]['redop']}, rank {straggler} late, median of {measured[0]['iters']} "
                f"iterations per point \u2014 {machine or machine_description()}")
        tail = (f"model: \u03b1-\u03b2-\u03b3 simulator with the runs' median calibration, \u03b1 = {cal['alpha_us']:.3g} \u00b5s, "
                f"{cal['bandwidth_GBps']:.3g} GB/s, reduction "
                + (f"{cal['reduce_bandwidth_GBps']:.3g} GB/s" if cal["reduce_bandwidth_GBps"] > 0 else "free"))
    else:
        mc = data["model_cost"]
        head = (f"Straggler delay sweep, model only: n = {data['nranks']}, {format_bytes(data['bytes'])}, "
                f"\u03b1 = {pretty(mc['alpha'])}, bandwidth {pretty(mc['bandwidth'])}"
                + (f", reduction {pretty(mc['reduce_bandwidth'])}" if mc.get("reduce_bandwidth") else ""))
        tail = "\u03b1-\u03b2 simulator (`stragglar simulate --delay`); no measurement in this figure"
    fig.suptitle(head + "\n" + tail, fontsize=10)
    return summary


# ---------------------------------------------------------------------------------------------
# 3. Measured vs model (the main job)


#: Characters per line of a bar's label (measured-vs-model): longer names wrap.
TICK_CHARS = 18


def wrapped(label: str) -> str:
    return textwrap.fill(label, TICK_CHARS, break_long_words=False)


def plot_measured_vs_model(bench: dict, machine: str | None = None) -> PlotSummary:
    from matplotlib.patches import Patch

    rows = bench["rows"]
    sizes = sorted({r["bytes"] for r in rows})
    # 1.6 inches a bar pair: the labels below, wrapped to TICK_CHARS, stay apart.
    fig, axes = new_figure(max(7.5, 1.1 + 1.6 * len({r['algo'] for r in rows}) * len(sizes)), 5.4, ncols=len(sizes))
    summary = PlotSummary(fig, axes)
    for ax, size in zip(axes, sizes):
        srows = [r for r in rows if r["bytes"] == size]
        width = 0.38
        for i, r in enumerate(srows):
            c = color_of(r["algo"])
            meas = ax.bar(i - width / 2, r["exposed_us"] / 1e3, width, color=c, edgecolor=c)
            model = None
            if "predicted_exposed_us" in r:
                model = ax.bar(i + width / 2, r["predicted_exposed_us"] / 1e3, width, color="white", edgecolor=c,
                               hatch="///")
                ratio = r["exposed_us"] / r["predicted_exposed_us"]
                top = max(r["exposed_us"], r["predicted_exposed_us"]) / 1e3
                ax.annotate(f"meas/model\n{ratio:.2f}", (i, top), xytext=(0, 3), textcoords="offset points",
                            ha="center", va="bottom", fontsize=8)
            else:
                ax.annotate("no model\n(no schedule)", (i + width / 2, 0), xytext=(0, 3), textcoords="offset points",
                            ha="center", va="bottom", fontsize=7, color="#555555")
            if len(sizes) == 1 or size == sizes[-1]:
                summary.bars[r["algo"]] = (meas, model)
        ax.set_xlim(-0.6, len(srows) - 0.4)
        ax.set_xticks(range(len(srows)))
        ref = next((r["exposed_us"] for r in srows if r["algo"] == "stragglar"), None)

        def tick(r):
            if r["algo"].startswith("stragglar"):
                extra = f"K = {r['pipeline']}"
                if r["algo"] != "stragglar" and ref:
                    extra += f"\n{r['exposed_us'] / ref:.2f}\u00d7 StragglAR's time"
                return f"{wrapped(name_of(r['algo']))}\n{extra}"
            return wrapped(name_of(r["algo"])) + (f"\n{r['exposed_us'] / ref:.2f}\u00d7 StragglAR's time" if ref else "")

        ax.set_xticklabels([tick(r) for r in srows], fontsize=8)
        ax.set_ylabel("exposed time (ms, from the straggler's arrival)")
        ax.set_ylim(0, max(max(r["exposed_us"], r.get("predicted_exposed_us", 0)) for r in srows) / 1e3 * 1.22)
        ax.grid(True, axis="y", alpha=0.3)
        ax.set_title(f"{format_bytes(size)} {srows[0]['type']} {srows[0]['redop']}", fontsize=10)
        # Legend from proxies: the first bar may be one without a model (auto, native).
        ax.legend(handles=[Patch(facecolor="#555555", label="measured (median)"),
                           Patch(facecolor="white", edgecolor="#555555", hatch="///", label="calibrated model")],
                  fontsize=8, loc="upper left")
    cal = bench.get("calibration")
    delay = f"ideal (waiting phases only)" if bench.get("ideal") else f"{bench.get('delay_ms', 0):g} ms late"
    title = (f"Measured vs model, stragglar-bench: n = {bench['nranks']}, rank {bench.get('straggler')} {delay}, "
             f"median of {bench.get('iters')} iterations\n{machine or machine_description()}")
    if cal:
        title += (f"\nmodel: \u03b1-\u03b2-\u03b3 simulator, calibrated in the same run: \u03b1 = {cal['alpha_us']:.3g} \u00b5s, "
                  f"{cal['bandwidth_GBps']:.3g} GB/s, reduction "
                  + (f"{cal['reduce_bandwidth_GBps']:.3g} GB/s" if cal["reduce_bandwidth_GBps"] > 0 else "free"))
    else:
        title += "\n(no --calibrate in this run: measured only)"
    fig.suptitle(title, fontsize=10)
    return summary


# ---------------------------------------------------------------------------------------------
# Command line


def parse_nranks(text: str) -> list[int]:
    try:
        ns = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"--nranks {text!r}: expected comma-separated integers")
    if not ns or min(ns) < 2:
        raise argparse.ArgumentTypeError(f"--nranks {text!r}: expected integers >= 2")
    return ns


def save(summary: PlotSummary, output: str, dpi: int, data: dict | None, data_path: str | None) -> None:
    summary.figure.savefig(output, dpi=dpi)
    if data is not None and data_path:
        with open(data_path, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=1)
            f.write("\n")
    print(f"stragglar.figures: wrote {output}" + (f" and {data_path}" if data is not None and data_path else ""))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m stragglar.figures", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="figure", required=True)

    def common(p, with_cli=True):
        p.add_argument("-o", "--output", required=True, help="image to write (.png)")
        p.add_argument("--dpi", type=int, default=120)
        if with_cli:
            p.add_argument("--cli", default="./build/stragglar", help="the stragglar CLI (default ./build/stragglar)")
            p.add_argument("--data", help="also write the JSON the figure was drawn from here")
            p.add_argument("--from-data", help="redraw from a JSON written by --data (runs nothing)")

    sc = sub.add_parser("scaling", help="1. modelled speedup over Ring vs n")
    common(sc)
    sc.add_argument("--nranks", type=parse_nranks, default=SCALING_NRANKS, help="comma-separated n (default 4..1024)")
    sc.add_argument("--bytes", default=PAPER_BYTES)
    sc.add_argument("--alpha", default=PAPER_ALPHA)
    sc.add_argument("--bandwidth", default=PAPER_BANDWIDTH)

    ds = sub.add_parser("delay-sweep", help="2. exposed time vs straggler delay, measured and modelled")
    common(ds)
    ds.add_argument("bench", nargs="*", help="stragglar-bench --calibrate --json files, one per delay (none: model only)")
    ds.add_argument("--machine", help="machine description for the title (default: this CPU)")
    ds.add_argument("--nranks", type=int, default=8, help="model only: n (default 8)")
    ds.add_argument("--bytes", default="4G", help="model only: size (default 4G, the paper's Fig. 8c)")
    ds.add_argument("--algo", default="stragglar,ring,rhd", help="model only: algorithms")
    ds.add_argument("--alpha", default=PAPER_ALPHA, help="model only")
    ds.add_argument("--bandwidth", default=PAPER_BANDWIDTH, help="model only")
    ds.add_argument("--reduce-bandwidth", help="model only: adds the gamma term")

    mm = sub.add_parser("measured-vs-model", help="3. measured exposed time beside the calibrated model, per algorithm")
    common(mm, with_cli=False)
    mm.add_argument("bench", help="a stragglar-bench --json file (with --calibrate for the model bars)")
    mm.add_argument("--machine", help="machine description for the title (default: this CPU)")

    args = ap.parse_args(argv)
    import matplotlib

    matplotlib.use("Agg")
    try:
        if args.figure == "measured-vs-model":
            save(plot_measured_vs_model(load_bench(args.bench), args.machine), args.output, args.dpi, None, None)
            return 0
        if args.from_data:
            with open(args.from_data, encoding="utf-8") as f:
                data = json.load(f)
        elif args.figure == "scaling":
            data = scaling_data(args.cli, args.nranks, bytes=args.bytes, alpha=args.alpha, bandwidth=args.bandwidth)
        else:
            data = delay_sweep_data(args.cli, args.bench, nranks=args.nranks, bytes=args.bytes, algos=args.algo,
                                    alpha=args.alpha, bandwidth=args.bandwidth, reduce_bandwidth=args.reduce_bandwidth)
        summary = plot_scaling(data) if args.figure == "scaling" else plot_delay_sweep(data, args.machine)
        save(summary, args.output, args.dpi, data, args.data)
    except (ValueError, KeyError, OSError, RuntimeError) as e:
        print(f"stragglar.figures: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
