"""Tests of ``python -m stragglar.report`` (docs/trace.md): headless (Agg), no timing asserted.

On traces written here with known entries (one clock, and several clocks) the summary names the
late rank and its share, the HTML and PNG reports are written, the merged Chrome trace parses
and names each call's late rank. With stragglar-bench built (STRAGGLAR_BENCH, as in
test_figures.py) a traced MPI job with a fixed straggler and one with a moving straggler are
reported too, and observe-only (native) gets the estimate.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

matplotlib = pytest.importorskip("matplotlib")  # the CTest wrapper fails with a message instead
matplotlib.use("Agg")

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "python"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from stragglar import report  # noqa: E402
from test_figures import BENCH, MPIEXEC, MPIEXEC_FLAGS, assert_png, needs_bench, py_env  # noqa: E402

MODEL = {"stragglar_at_zero_s": 0.004, "stragglar_at_infinity_s": 0.001, "bulk_s": 0.003, "alpha_s": 2e-5,
         "beta_s_per_byte": 1e-9, "gamma_s_per_byte": 0, "ranks_per_host": 0}


def write_trace(tmp_path: Path, late_of, *, nranks=4, calls=12, algorithm="native", clocks=None) -> Path:
    """Per-rank files as call_trace.cpp writes them: before call c, rank late_of(c) enters 10 ms
    after the others; every rank leaves 3 ms after it entered (or after the late rank did)."""
    prefix = tmp_path / "job"
    for r in range(nranks):
        lines = [{"type": "header", "format": "stragglar-trace", "version": 1, "api": "test", "rank": r,
                  "nranks": nranks, "comm": 0, "pid": 1, "host_id": 7, "clock_id": (clocks or [7] * nranks)[r]},
                 {"type": "config", "config": 0, "count": 1 << 20, "bytes": 4 << 20, "dtype": "float", "op": "sum",
                  "algorithm": algorithm, "straggler": -1, "pipeline": 0, "model": MODEL}]
        t = 10**9 + (r * 10**12 if clocks else 0)  # other clocks: other origins
        for c in range(calls):
            start = t + c * 100_000_000
            entry = start + (10_000_000 if r == late_of(c) else 0)
            exit_ = start + 10_000_000 + 3_000_000 if late_of(c) >= 0 else start + 3_000_000
            lines.append({"type": "call", "call": c, "config": 0, "entry_ns": entry, "exit_ns": exit_,
                          "algorithm": algorithm, "straggler": -1, "late_set": [], "reason": "requested",
                          "shared_clock": clocks is None})
        lines.append({"type": "end", "calls": calls, "shared_clock": clocks is None})
        (tmp_path / f"job.c0.r{r}.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    return prefix


def summary(*args) -> dict:
    p = subprocess.run([sys.executable, "-m", "stragglar.report", *map(str, args), "--json"], capture_output=True,
                       text=True, env=py_env())
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def test_fixed_late_rank_and_its_share(tmp_path):
    write_trace(tmp_path, lambda c: 2 if c % 4 else -1)  # rank 2 late to 9 of 12 calls
    s = summary(tmp_path)
    assert s["late_rank"] == 2
    assert s["late_rank_share"] == pytest.approx(9 / 12)
    comm = s["communicators"][0]
    assert comm["late_rank_per_call"] == [2 if c % 4 else -1 for c in range(12)]
    assert comm["shared_clock"] is True
    assert comm["delay_median_s"] == pytest.approx(0.010)


def test_moving_late_rank_is_named_per_call(tmp_path):
    write_trace(tmp_path, lambda c: c % 4, calls=8)
    comm = summary(tmp_path / "job")["communicators"][0]
    assert comm["late_rank_per_call"] == [c % 4 for c in range(8)]
    assert comm["late_share_per_rank"] == {"0": 0.25, "1": 0.25, "2": 0.25, "3": 0.25}


def test_ranks_on_several_clocks_are_compared_by_time_inside(tmp_path):
    write_trace(tmp_path, lambda c: 1, clocks=[1, 2, 3, 4])
    comm = summary(tmp_path)["communicators"][0]
    assert comm["shared_clock"] is False and "several clocks" in comm["lateness_from"]
    assert set(comm["late_rank_per_call"]) == {1}


def test_observe_only_estimates_what_stragglar_would_save(tmp_path):
    # Native measured at 3 ms with a 10 ms late rank; the model: native 3 ms, StragglAR
    # max(4 - 10, 1) = 1 ms, scaled by native's measured/model ratio (1): a 2 ms saving per call.
    write_trace(tmp_path, lambda c: 3)
    e = summary(tmp_path)["estimate"]
    assert e["calls_counted"] == 11  # the first call pays the setup: left out
    assert e["native_calls_measured"] == 11 and e["stragglar_calls_measured"] == 0
    assert e["native_would_take_s"] == pytest.approx(11 * 0.003)
    assert e["stragglar_would_take_s"] == pytest.approx(11 * 0.001)
    assert e["saving_s"] == pytest.approx(11 * 0.002)
    assert "model" in e["method"]


def test_html_png_and_merged_chrome_trace(tmp_path):
    write_trace(tmp_path, lambda c: 1)
    html_out, png_out, chrome = tmp_path / "r.html", tmp_path / "r.png", tmp_path / "merged.json"
    assert report.main([str(tmp_path), "-o", str(html_out), "--chrome", str(chrome)]) == 0
    assert report.main([str(tmp_path), "-o", str(png_out)]) == 0
    page = html_out.read_text()
    assert page.count("data:image/png;base64,") == 4 and "over this job" in page
    assert_png(png_out)
    events = json.loads(chrome.read_text())["traceEvents"]
    slices = [e for e in events if e["ph"] == "X"]
    assert len(slices) == 4 * 12 and {e["args"]["late_rank"] for e in slices} == {1}
    assert {e["pid"] for e in slices} == {0, 1, 2, 3}
    assert any(e["ph"] == "C" and e["name"] == "lateness (ms)" for e in events)


def test_not_a_trace_is_refused_by_name(tmp_path):
    bad = tmp_path / "x.jsonl"
    bad.write_text('{"type": "call"}\n')
    p = subprocess.run([sys.executable, "-m", "stragglar.report", str(bad)], capture_output=True, text=True,
                       env=py_env())
    assert p.returncode != 0 and str(bad) in p.stderr and "not a stragglar trace" in p.stderr


@needs_bench
@pytest.mark.parametrize("job", ["fixed", "moving", "native"])
def test_traced_mpi_job(tmp_path, job):
    """stragglar-bench under mpirun with STRAGGLAR_TRACE: the report names the straggler."""
    args = {"fixed": ["--algo", "auto", "--straggler", "3"],
            "moving": ["--algo", "stragglar", "--straggler", "1", "--move-straggler", "0:1,3:2"],
            "native": ["--algo", "native", "--straggler", "3"]}[job]
    env = dict(py_env(), STRAGGLAR_TRACE=str(tmp_path / "job"))
    p = subprocess.run([MPIEXEC, *MPIEXEC_FLAGS, "-np", "4", BENCH, "-b", "256K", "-e", "256K", "-n", "6", "-w", "1",
                        "--delay", "60", *args], capture_output=True, text=True, env=env, timeout=240)
    assert p.returncode == 0, p.stdout + p.stderr
    s = summary(tmp_path / "job")
    comm = max(s["communicators"], key=lambda c: c["calls"])
    late = comm["late_rank_per_call"]
    # The bench makes warm-up and timed calls; the delayed ones name the delayed rank.
    if job == "moving":
        assert late.count(1) >= 3 and late.count(2) >= 3, late
    else:
        assert s["late_rank"] == 3 and s["late_rank_share"] >= 0.5, s
    if job == "native":
        assert s["estimate"]["native_calls_measured"] == comm["calls"] - 1  # less the first (setup)
        assert s["estimate"]["stragglar_would_take_s"] > 0
