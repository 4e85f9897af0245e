"""Draw a ``stragglar-schedule/1`` schedule as ranks x rounds (the paper's Fig. 3 style).

    python3 -m stragglar.draw SCHEDULE.json -o schedule.png       # "-" reads stdin
    ./build/stragglar synth --algo stragglar -n 8 | python3 -m stragglar.draw - -o s8.png

Time runs left to right, one column per round; ranks are rows, the straggler's in red. Every
transfer is one arrow from its source row at the start of its round to its destination row at
the end: solid for ``reduce`` (dst[c] = dst[c] + src[c]), dashed for ``copy`` (dst[c] = src[c]),
with the chunks it carries written next to its tail. Phases with ``waits_for_straggler: false``
(they may run during the straggler's delay) are shaded. Up to 16 ranks arrows are coloured by
op and labelled with their chunks; above that, labels would overlap, so arrows are coloured by
chunk (a colour bar tells which) and the op is told by the line style alone.

The schedule format is docs/design.md's "Schedule format"; this module only reads it (the exact
checks are ``stragglar verify``'s job) and raises ValueError on what it cannot draw.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass, field
from typing import Any

SCHEDULE_FORMAT = "stragglar-schedule/1"
#: Above this many ranks arrows are coloured by chunk instead of labelled (``labels="auto"``).
LABEL_MAX_RANKS = 16
REDUCE_COLOR, COPY_COLOR, STRAGGLER_COLOR = "#1f77b4", "#2ca02c", "#d62728"
DELAY_SHADE = "#ebebeb"


@dataclass(frozen=True)
class DrawnTransfer:
    """One transfer of the schedule and the arrow that shows it."""

    phase: str
    round: int  # global round index, counted over all phases
    src: int
    dst: int
    chunks: tuple[int, ...]
    op: str
    arrow: Any  # matplotlib.patches.FancyArrowPatch
    label: Any  # matplotlib.text.Text, or None without chunk labels


@dataclass
class Drawing:
    """What draw_schedule drew, so callers (and tests) can check it without looking at pixels."""

    figure: Any
    axes: Any
    transfers: list[DrawnTransfer] = field(default_factory=list)
    #: (first round, end round, phase name) of every phase shaded as running during the delay
    delay_spans: list[tuple[int, int, str]] = field(default_factory=list)
    color_by: str = "op"


def load_schedule(path: str) -> dict:
    """Read a schedule from a file ("-": stdin) and check the fields the drawing relies on."""
    text = sys.stdin.read() if path == "-" else open(path, encoding="utf-8").read()
    return check_schedule(json.loads(text))


def check_schedule(s: dict) -> dict:
    if not isinstance(s, dict) or s.get("format") != SCHEDULE_FORMAT:
        got = s.get("format") if isinstance(s, dict) else type(s).__name__
        raise ValueError(f"format {got!r}: expected {SCHEDULE_FORMAT!r}")
    n = s.get("nranks")
    if not isinstance(n, int) or n < 2:
        raise ValueError(f"nranks {n!r}: expected an integer >= 2")
    for p in s.get("phases", []):
        for r, rnd in enumerate(p.get("rounds", [])):
            for t in rnd:
                for key in ("src", "dst"):
                    if not (isinstance(t.get(key), int) and 0 <= t[key] < n):
                        raise ValueError(f"phase {p.get('name')!r} round {r}: {key} {t.get(key)!r} outside [0, {n})")
                if t.get("op") not in ("reduce", "copy"):
                    raise ValueError(f"phase {p.get('name')!r} round {r}: op {t.get('op')!r}, expected reduce or copy")
                if not t.get("chunks"):
                    raise ValueError(f"phase {p.get('name')!r} round {r}: a transfer without chunks")
    return s


def chunk_text(chunks: tuple[int, ...]) -> str:
    """c3 / c3,c5 / c3-c6 for a contiguous run (pipelined schedules carry several)."""
    if len(chunks) == 1:
        return f"c{chunks[0]}"
    if len(chunks) > 2 and chunks[-1] - chunks[0] == len(chunks) - 1:
        return f"c{chunks[0]}\u2013c{chunks[-1]}"
    return ",".join(f"c{c}" for c in chunks)


def draw_schedule(schedule: dict, ax=None, *, labels: str = "auto", title: str | None = None) -> Drawing:
    """Draw ``schedule`` on ``ax`` (a new Figure when None); returns what was drawn.

    labels: "on" (chunk labels, arrows coloured by op), "off" (arrows coloured by chunk),
    "auto" ("on" up to LABEL_MAX_RANKS ranks).
    """
    import matplotlib
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D
    from matplotlib.patches import FancyArrowPatch, Patch
    import matplotlib.cm as cm
    import matplotlib.colors as mcolors

    s = check_schedule(schedule)
    n, straggler, nchunks = s["nranks"], s.get("straggler"), max(1, int(s.get("nchunks", 1)))
    phases = s.get("phases", [])
    nrounds = sum(len(p.get("rounds", [])) for p in phases)
    if labels not in ("auto", "on", "off"):
        raise ValueError(f"labels {labels!r}: expected auto, on or off")
    show_labels = labels == "on" or (labels == "auto" and n <= LABEL_MAX_RANKS)

    if ax is None:
        width = min(60.0, max(8.5, 3.0 + (0.62 if show_labels else 0.3) * nrounds))
        height = min(24.0, max(3.2, 1.6 + (0.5 if show_labels else 0.32) * n))
        fig = Figure(figsize=(width, height), layout="constrained")
        ax = fig.add_subplot()
    fig = ax.figure
    drawing = Drawing(figure=fig, axes=ax, color_by="op" if show_labels else "chunk")
    chunk_cmap = matplotlib.colormaps["turbo"]
    chunk_norm = mcolors.Normalize(vmin=0, vmax=max(1, nchunks - 1))

    # Row guides: the straggler's in red, the others light grey.
    for r in range(n):
        is_s = r == straggler
        ax.axhline(r, color=STRAGGLER_COLOR if is_s else "#bbbbbb", lw=1.2 if is_s else 0.5, zorder=0)

    head = 8 if show_labels else 6
    x = 0
    for p in phases:
        name, rounds = p.get("name", "?"), p.get("rounds", [])
        x0, x1 = x, x + len(rounds)
        if not p.get("waits_for_straggler", True):
            ax.axvspan(x0, x1, color=DELAY_SHADE, zorder=-1, lw=0)
            drawing.delay_spans.append((x0, x1, name))
        if x0 > 0:
            ax.axvline(x0, color="black", lw=1.0, zorder=1)
        ax.text((x0 + x1) / 2, -0.8, name + ("" if p.get("waits_for_straggler", True) else " (no wait)"),
                ha="center", va="center", fontsize=10 if show_labels else 11, fontweight="bold")
        for rnd in rounds:
            for t in rnd:
                chunks = tuple(int(c) for c in t["chunks"])
                src, dst, op = t["src"], t["dst"], t["op"]
                if show_labels:
                    color = REDUCE_COLOR if op == "reduce" else COPY_COLOR
                else:
                    color = chunk_cmap(chunk_norm(chunks[0]))
                # Labelled: both ops 1.3 wide. Coloured by chunk: reduces (few, the straggler's) stand out.
                lw = 1.3 if show_labels else (1.6 if op == "reduce" else 0.7)
                arrow = FancyArrowPatch((x + 0.08, src), (x + 0.92, dst), arrowstyle="-|>", mutation_scale=head,
                                        lw=lw, color=color, linestyle="-" if op == "reduce" else (0, (3, 2)),
                                        shrinkA=0, shrinkB=0, zorder=3)
                ax.add_patch(arrow)
                label = None
                if show_labels:
                    # Near the tail, ~0.3 rank below/above it: a rank sends at most once per round, so
                    # labels of one round never collide (the two arrows of an exchange cross at 0.5).
                    f = 0.5 if dst == src else min(0.5, 0.3 / abs(dst - src))
                    label = ax.text(x + 0.08 + f * 0.84, src + f * (dst - src), chunk_text(chunks), fontsize=7,
                                    ha="center", va="center", color=color, zorder=4,
                                    bbox=dict(boxstyle="round,pad=0.1", fc="white", ec="none", alpha=0.85))
                drawing.transfers.append(DrawnTransfer(name, x, src, dst, chunks, op, arrow, label))
            x += 1

    # Straggler arrival: the first round of the first phase that waits for it.
    if straggler is not None and drawing.delay_spans:
        arrive = next((sp[1] for sp in drawing.delay_spans), None)
        ax.annotate("straggler arrives", xy=(arrive, straggler), xytext=(arrive + 0.15, straggler + 0.45),
                    color=STRAGGLER_COLOR, fontsize=8, va="top", zorder=5,
                    bbox=dict(boxstyle="round,pad=0.15", fc="white", ec="none", alpha=0.85))

    ax.set_xlim(0, max(1, nrounds))
    ax.set_ylim(n - 0.5, -1.1)  # rank 0 on top, phase names above it
    ax.set_yticks(range(n))
    ticklabels = [f"{r} (straggler)" if r == straggler else str(r) for r in range(n)]
    ax.set_yticklabels(ticklabels, fontsize=9 if n <= 16 else 7)
    for r, tl in enumerate(ax.get_yticklabels()):
        if r == straggler:
            tl.set_color(STRAGGLER_COLOR)
            tl.set_fontweight("bold")
    step = 1 if nrounds <= 40 else 5
    ax.set_xticks([i + 0.5 for i in range(0, nrounds, step)])
    ax.set_xticklabels([str(i) for i in range(0, nrounds, step)], fontsize=8)
    ax.set_xlabel("round\n(each arrow: source at the round's start \u2192 destination at its end)")
    ax.set_ylabel("rank")
    for spine in ("top", "right"):
        ax.spines[spine].set_visible(False)

    if title is None:
        ports = s.get("ports", 1)
        delay_rounds = sum(b - a for a, b, _ in drawing.delay_spans)
        title = (f"{s.get('algorithm', '?')} schedule: n = {n}, "
                 f"straggler {straggler if straggler is not None else 'none'}, {nchunks} chunks, ports {ports}\n"
                 f"{nrounds} rounds"
                 + (f" ({delay_rounds} during the delay + {nrounds - delay_rounds} after)" if delay_rounds else "")
                 + f", {len(drawing.transfers)} transfers")
    ax.set_title(title, fontsize=11 if show_labels else 14)

    handles = [Line2D([], [], color=REDUCE_COLOR if show_labels else "black", lw=1.5, ls="-",
                      label="reduce: dst[c] += src[c]"),
               Line2D([], [], color=COPY_COLOR if show_labels else "black", lw=1.5, ls=(0, (3, 2)),
                      label="copy: dst[c] = src[c]")]
    if drawing.delay_spans:
        handles.append(Patch(color=DELAY_SHADE, label="runs during the straggler's delay"))
    if straggler is not None:
        handles.append(Line2D([], [], color=STRAGGLER_COLOR, lw=1.2, label=f"straggler (rank {straggler})"))
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8 if show_labels else 11,
              frameon=False)
    if not show_labels:
        sm = cm.ScalarMappable(norm=chunk_norm, cmap=chunk_cmap)
        fig.colorbar(sm, ax=ax, label="chunk (arrow colour)", fraction=0.015, pad=0.01, shrink=0.5, anchor=(0.0, 0.0))
    return drawing


def save_figure(fig, path: str, dpi: int) -> None:
    """Save; a PNG goes through a 256-colour palette (line art loses nothing visible, and the n = 32
    drawing shrinks from ~2.9 to ~1 MB). Pillow comes with matplotlib."""
    if not path.lower().endswith(".png"):
        fig.savefig(path, dpi=dpi)
        return
    import io

    from PIL import Image

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    buf.seek(0)
    with Image.open(buf) as im:
        im.convert("RGB").quantize(colors=256).save(path, optimize=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m stragglar.draw",
                                 description="Draw a stragglar-schedule/1 JSON schedule as ranks x rounds (PNG, headless).")
    ap.add_argument("schedule", help="schedule JSON file (from `stragglar synth`), or - for stdin")
    ap.add_argument("-o", "--output", required=True, help="image to write (.png; .svg/.pdf work too)")
    ap.add_argument("--labels", choices=("auto", "on", "off"), default="auto",
                    help=f"chunk labels (auto: on up to {LABEL_MAX_RANKS} ranks, else arrows coloured by chunk)")
    ap.add_argument("--title", help="replace the generated title")
    ap.add_argument("--dpi", type=int, default=110)
    args = ap.parse_args(argv)
    import matplotlib

    matplotlib.use("Agg")
    try:
        drawing = draw_schedule(load_schedule(args.schedule), labels=args.labels, title=args.title)
    except (ValueError, OSError) as e:  # json.JSONDecodeError is a ValueError
        print(f"stragglar.draw: error: {e}", file=sys.stderr)
        return 2
    save_figure(drawing.figure, args.output, args.dpi)
    print(f"stragglar.draw: {len(drawing.transfers)} transfers drawn -> {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
