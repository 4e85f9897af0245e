"""Tests of the figures and the schedule drawing: headless (Agg), small inputs.

Each figure command runs and writes a non-empty PNG, and what was drawn is checked against the
JSON it was drawn from (one arrow per transfer, one line per algorithm, the bars' heights) — no
pixel comparisons.

Binaries: STRAGGLAR_CLI (and STRAGGLAR_BENCH + STRAGGLAR_MPIEXEC[_FLAGS] for the measured
figures), set by CTest (tests/python/CMakeLists.txt); by hand, ./build/stragglar and
./build/stragglar-bench are used when they exist:
    PYTHONPATH=python python3 -m pytest tests/python
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

matplotlib = pytest.importorskip("matplotlib")  # the CTest wrapper fails with a message instead
matplotlib.use("Agg")
from matplotlib.patches import FancyArrowPatch  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "python"))
from stragglar import draw, figures  # noqa: E402

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def binary(env: str, name: str) -> str | None:
    path = os.environ.get(env) or str(REPO / "build" / name)
    return path if os.access(path, os.X_OK) else None


CLI = binary("STRAGGLAR_CLI", "stragglar")
BENCH = binary("STRAGGLAR_BENCH", "stragglar-bench")
MPIEXEC = os.environ.get("STRAGGLAR_MPIEXEC") or shutil.which("mpirun")
MPIEXEC_FLAGS = shlex.split(os.environ.get("STRAGGLAR_MPIEXEC_FLAGS", "--allow-run-as-root --oversubscribe"))
needs_cli = pytest.mark.skipif(CLI is None, reason="no stragglar CLI: set STRAGGLAR_CLI or build ./build/stragglar")
needs_bench = pytest.mark.skipif(BENCH is None or MPIEXEC is None,
                                 reason="no stragglar-bench or mpirun: set STRAGGLAR_BENCH or build ./build/stragglar-bench")


def py_env() -> dict:
    env = dict(os.environ, MPLBACKEND="Agg")
    env["PYTHONPATH"] = str(REPO / "python") + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    p = subprocess.run(cmd, capture_output=True, text=True, env=py_env(), **kw)
    assert p.returncode == 0, f"{cmd} failed ({p.returncode}):\n{p.stdout}\n{p.stderr}"
    return p


def assert_png(path: Path) -> None:
    assert path.is_file(), f"{path} not written"
    data = path.read_bytes()
    assert len(data) > 1000 and data.startswith(PNG_MAGIC), f"{path}: not a non-empty PNG"


def synth(tmp_path: Path, *args: str) -> Path:
    out = tmp_path / ("schedule" + "_".join(a.strip("-") for a in args) + ".json")
    run([CLI, "synth", *args, "-o", str(out)])
    return out


def transfers_of(schedule: dict) -> Counter:
    """(global round, src, dst, chunks, op) of every transfer in the JSON."""
    got, x = Counter(), 0
    for p in schedule["phases"]:
        for rnd in p["rounds"]:
            for t in rnd:
                got[(x, t["src"], t["dst"], tuple(t["chunks"]), t["op"])] += 1
            x += 1
    return got


# ---- 4. the schedule drawing ---------------------------------------------------------------


@needs_cli
@pytest.mark.parametrize("args", [("--algo", "stragglar", "-n", "8"), ("--algo", "stragglar", "-n", "16", "-k", "2"),
                                  ("--algo", "ring", "-n", "5"), ("--algo", "broadcast", "-n", "6"),
                                  ("--algo", "allpairs", "-n", "4"), ("--algo", "rhd", "-n", "6"),
                                  ("--algo", "stragglar", "-n", "12", "-s", "3")])
def test_draw_one_arrow_per_transfer(tmp_path, args):
    path = synth(tmp_path, *args)
    schedule = json.loads(path.read_text())
    d = draw.draw_schedule(schedule)
    arrows = [p for p in d.axes.patches if isinstance(p, FancyArrowPatch)]
    want = transfers_of(schedule)
    assert len(arrows) == sum(want.values()) == len(d.transfers)
    assert Counter((t.round, t.src, t.dst, t.chunks, t.op) for t in d.transfers) == want
    assert {id(t.arrow) for t in d.transfers} == {id(a) for a in arrows}
    # Each arrow leaves its source row and ends on its destination row, inside its round's column.
    for t in d.transfers:
        (xa, ya), (xb, yb) = t.arrow._posA_posB
        assert (ya, yb) == (t.src, t.dst) and t.round < xa < xb < t.round + 1
        # reduce and copy told apart by line style
        assert (t.arrow.get_linestyle() == "-") == (t.op == "reduce")
    # The phases that run during the delay are shaded, and only those.
    spans, x = [], 0
    for p in schedule["phases"]:
        if not p["waits_for_straggler"]:
            spans.append((x, x + len(p["rounds"]), p["name"]))
        x += len(p["rounds"])
    assert d.delay_spans == spans
    # Chunk labels up to 16 ranks: one per transfer, naming its chunks.
    if schedule["nranks"] <= draw.LABEL_MAX_RANKS:
        assert all(t.label is not None and t.label.get_text() == draw.chunk_text(t.chunks) for t in d.transfers)


@needs_cli
def test_draw_n32_colours_by_chunk(tmp_path):
    schedule = json.loads(synth(tmp_path, "--algo", "stragglar", "-n", "32").read_text())
    d = draw.draw_schedule(schedule)
    assert d.color_by == "chunk" and all(t.label is None for t in d.transfers)
    assert len([p for p in d.axes.patches if isinstance(p, FancyArrowPatch)]) == sum(transfers_of(schedule).values())
    # Arrows carrying the same chunk share a colour, different chunks differ.
    colour = {}
    for t in d.transfers:
        colour.setdefault(t.chunks[0], set()).add(t.arrow.get_edgecolor())
    assert all(len(c) == 1 for c in colour.values()) and len({next(iter(c)) for c in colour.values()}) == len(colour)
    assert d.delay_spans == [(0, 30, "reduce_scatter")]


@needs_cli
def test_draw_command_writes_png(tmp_path):
    path = synth(tmp_path, "--algo", "stragglar", "-n", "8")
    out = tmp_path / "s8.png"
    p = run([sys.executable, "-m", "stragglar.draw", str(path), "-o", str(out)])
    assert_png(out)
    assert "98 transfers drawn" in p.stdout  # 6 ReduceScatter rounds x 7 + the allreduce phase's 56
    # stdin works, as in `stragglar synth ... | python3 -m stragglar.draw - -o out.png`
    out2 = tmp_path / "stdin.png"
    run([sys.executable, "-m", "stragglar.draw", "-", "-o", str(out2)], input=path.read_text())
    assert_png(out2)


def test_draw_rejects_bad_input(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"format": "other/1", "nranks": 4, "phases": []}))
    p = subprocess.run([sys.executable, "-m", "stragglar.draw", str(bad), "-o", str(tmp_path / "x.png")],
                       capture_output=True, text=True, env=py_env())
    assert p.returncode == 2 and "format 'other/1': expected 'stragglar-schedule/1'" in p.stderr
    assert not (tmp_path / "x.png").exists()
    with pytest.raises(ValueError, match=r"dst 4 outside \[0, 4\)"):
        draw.check_schedule({"format": draw.SCHEDULE_FORMAT, "nranks": 4, "phases": [
            {"name": "p", "waits_for_straggler": True, "rounds": [[{"src": 0, "dst": 4, "chunks": [0], "op": "copy"}]]}]})


def test_root_package_imports_nothing_heavy():
    code = "import sys, stragglar; print(sorted(m for m in ('matplotlib', 'torch', 'numpy') if m in sys.modules))"
    assert run([sys.executable, "-c", code]).stdout.strip() == "[]"


# ---- 1. scaling -----------------------------------------------------------------------------


@needs_cli
def test_scaling_one_line_per_algorithm(tmp_path):
    out, data_path = tmp_path / "scaling.png", tmp_path / "scaling.json"
    run([sys.executable, "-m", "stragglar.figures", "scaling", "--cli", CLI, "--nranks", "4,8,16", "-o", str(out),
         "--data", str(data_path)])
    assert_png(out)
    data = json.loads(data_path.read_text())
    # every algorithm `simulate --algo all` knows, read from the CLI itself
    algos = [r["algorithm"] for r in figures.run_simulate(CLI, nranks=8, bytes="1G")]
    assert "stragglar" in algos and "ring" in algos
    s = figures.plot_scaling(data)
    assert len(s.panels) == 2
    for lines, ours in zip(s.panels, (figures.STRAGGLAR_K1, figures.STRAGGLAR_AUTO)):
        want = [a for a in algos if a != "stragglar"] + [ours]
        assert sorted(lines) == sorted(want)
        ax = lines[ours].axes
        assert len([ln for ln in ax.get_lines() if not ln.get_label().startswith("_")]) == len(want)
        for series, line in lines.items():  # each line is the JSON's speedups at the ideal delay
            rows = sorted((r for r in data["rows"] if r["series"] == series and r["delay"] == "ideal"),
                          key=lambda r: r["nranks"])
            assert list(line.get_xdata()) == [4, 8, 16]
            assert list(line.get_ydata()) == [r["speedup_vs_ring"] for r in rows]
        assert ours in s.bands  # StragglAR's range, no delay ... ideal
    assert list(s.panels[0]["ring"].get_ydata()) == [1.0, 1.0, 1.0]
    # --from-data redraws without running anything
    out2 = tmp_path / "again.png"
    run([sys.executable, "-m", "stragglar.figures", "scaling", "--cli", "/nonexistent", "--from-data", str(data_path),
         "-o", str(out2)])
    assert_png(out2)


@needs_cli
def test_delay_sweep_model_only(tmp_path):
    out, data_path = tmp_path / "ds.png", tmp_path / "ds.json"
    run([sys.executable, "-m", "stragglar.figures", "delay-sweep", "--cli", CLI, "--nranks", "4", "--bytes", "64M",
         "-o", str(out), "--data", str(data_path)])
    assert_png(out)
    data = json.loads(data_path.read_text())
    s = figures.plot_delay_sweep(data)
    assert sorted(s.lines) == ["rhd", "ring", "stragglar"] and not s.points
    ring = sorted((m for m in data["model"] if m["entry"] == "ring"), key=lambda m: m["delay_ms"])
    assert list(s.lines["ring"].get_ydata()) == [m["exposed_us"] / 1e3 for m in ring]
    # the model's StragglAR gets cheaper with delay until its ReduceScatter is hidden
    st = sorted((m for m in data["model"] if m["entry"] == "stragglar"), key=lambda m: m["delay_ms"])
    assert st[0]["exposed_us"] > st[-1]["exposed_us"]


# ---- 2, 3 and scripts/figures.sh: measured, on a tiny MPI run --------------------------------


@pytest.fixture(scope="module")
def figures_out(tmp_path_factory):
    """scripts/figures.sh end to end, measured, small: 4 ranks, 1 MiB, delays 0 and 10 ms."""
    if CLI is None or BENCH is None or MPIEXEC is None:
        pytest.skip("needs stragglar, stragglar-bench and mpirun")
    out = tmp_path_factory.mktemp("figures")
    bindir = tmp_path_factory.mktemp("bin")
    (bindir / "stragglar").symlink_to(CLI)
    (bindir / "stragglar-bench").symlink_to(BENCH)
    env = py_env()
    env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMPI_MCA_rmaps_base_oversubscribe="1")
    p = subprocess.run(["bash", str(REPO / "scripts" / "figures.sh"), "--bin", str(bindir), "--np", "4", "--size", "1M",
                        "--delays", "0,10", "--iters", "2", "--main-iters", "2", "--nranks", "4,8", str(out)],
                       capture_output=True, text=True, env=env, timeout=240)
    assert p.returncode == 0, f"figures.sh failed:\n{p.stdout}\n{p.stderr}"
    return out


@needs_bench
def test_figures_sh_writes_every_figure(figures_out):
    for name in ("scaling", "delay-sweep", "measured-vs-model", "schedule-stragglar-n8", "schedule-stragglar-n32"):
        assert_png(figures_out / f"{name}.png")
    for name in ("scaling", "delay-sweep", "main-job", "delay-sweep-0ms", "delay-sweep-10ms", "schedule-stragglar-n8"):
        assert (figures_out / "data" / f"{name}.json").is_file()


@needs_bench
def test_delay_sweep_measured_points_and_model_lines(figures_out):
    data = figures.delay_sweep_data(CLI, [str(figures_out / "data" / f"delay-sweep-{d}ms.json") for d in (0, 10)])
    s = figures.plot_delay_sweep(data)
    assert sorted(s.points) == ["native", "rhd", "ring", "stragglar"]  # one marker series per algorithm
    assert sorted(s.lines) == ["rhd", "ring", "stragglar"]  # native has no schedule, hence no model
    for algo, pts in s.points.items():
        rows = sorted((r for d in (0, 10) for r in json.loads((figures_out / "data" / f"delay-sweep-{d}ms.json")
                                                               .read_text())["rows"] if r["algo"] == algo),
                      key=lambda r: r["delay_ms"])
        assert list(pts.get_xdata()) == [0, 10]
        assert list(pts.get_ydata()) == [r["exposed_us"] / 1e3 for r in rows]
    # the model ran StragglAR with the K the bench used
    bench_k = {r["pipeline"] for d in (0, 10) for r in json.loads((figures_out / "data" / f"delay-sweep-{d}ms.json")
                                                                  .read_text())["rows"] if r["algo"] == "stragglar"}
    assert {m["pipeline"] for m in data["model"] if m["entry"] == "stragglar"} <= bench_k


@needs_bench
def test_measured_vs_model_bars(figures_out, tmp_path):
    bench = figures.load_bench(str(figures_out / "data" / "main-job.json"))
    s = figures.plot_measured_vs_model(bench)
    assert sorted(s.bars) == sorted(r["algo"] for r in bench["rows"])
    for r in bench["rows"]:
        meas, model = s.bars[r["algo"]]
        assert meas.patches[0].get_height() == pytest.approx(r["exposed_us"] / 1e3)
        if "predicted_exposed_us" in r:
            assert model.patches[0].get_height() == pytest.approx(r["predicted_exposed_us"] / 1e3)
        else:
            assert r["algo"] == "native" and model is None
    out = tmp_path / "mm.png"
    run([sys.executable, "-m", "stragglar.figures", "measured-vs-model", str(figures_out / "data" / "main-job.json"),
         "-o", str(out)])
    assert_png(out)


@needs_cli
def test_figures_sh_model_only(tmp_path):
    out = tmp_path / "figs"
    p = run(["bash", str(REPO / "scripts" / "figures.sh"), "--bin", str(Path(CLI).parent), "--model-only",
             "--nranks", "4,8", str(out)], timeout=180)
    for name in ("scaling", "delay-sweep", "schedule-stragglar-n8", "schedule-stragglar-n32"):
        assert_png(out / f"{name}.png")
    assert not (out / "measured-vs-model.png").exists() and "measured-vs-model.png skipped" in p.stdout
