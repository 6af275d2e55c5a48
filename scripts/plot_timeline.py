#!/usr/bin/python3
"""plot_timeline.py - draw ringgrad-train --timeline traces (Chrome-trace JSON) as a picture.

    /usr/bin/python3 scripts/plot_timeline.py TRACE.json[:TITLE] [TRACE2.json[:TITLE] ...]
        [--steps 2] [--skip 3] [-o docs/images/timeline.png]

One panel per trace, stacked, on one time axis so that they compare at a glance. Each panel
has two rows per rank: `main` (forward, backward, ddp_wait, optimizer, as the training loop
marks them) and `comm` (the comm thread: each allreduce as a bar labelled with its size, its
"wait for ranks" part hatched). The window starts at rank 0's forward of step --skip (leaving out
warm-up steps) and shows --steps steps of the longest trace.

Needs matplotlib (python3-matplotlib; scripts/install-deps.sh --bench). Example (the pictures in
docs/DISTRIBUTED.md, from bench/overlap.sh --traces DIR):

    /usr/bin/python3 scripts/plot_timeline.py \\
        DIR/timeline_overlap.json:"buckets reduced during backward" \\
        DIR/timeline_no_overlap.json:"one allreduce after backward (--no-overlap)" \\
        -o docs/images/timeline_1gbit.png
"""
import argparse
import json

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

COLORS = {"forward": "#4e79a7", "backward": "#f28e2b", "ddp_wait": "#e15759",
          "optimizer": "#59a14f", "allreduce": "#9467bd", "evaluate": "#bab0ac"}


def load(path):
    with open(path) as f:
        t = json.load(f)
    ev = t["traceEvents"]
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in ev
             if e.get("ph") == "M" and e.get("name") == "thread_name"}
    rows = {}
    for e in ev:
        if e.get("ph") == "X" and names.get((e["pid"], e.get("tid"))) in ("main", "comm"):
            rows.setdefault((e["pid"], names[(e["pid"], e["tid"])]), []).append(e)
    return rows


def window(rows, skip, steps):
    """(t0, t1) in microseconds: rank 0's forward number `skip` to `skip + steps`."""
    fwd = sorted(e["ts"] for e in rows[(0, "main")] if e["name"] == "forward")
    if len(fwd) <= skip + 1:
        raise SystemExit("trace has only %d steps; lower --skip" % len(fwd))
    end = fwd[skip + steps] if skip + steps < len(fwd) else max(
        e["ts"] + e["dur"] for e in rows[(0, "main")] if e["name"] != "evaluate")
    return fwd[skip], end


def size_label(nbytes):
    if nbytes >= 1 << 20:
        return "%.1f MiB" % (nbytes / (1 << 20))
    return "%.0f KiB" % (nbytes / 1024) if nbytes >= 1024 else "%d B" % nbytes


def draw(ax, rows, t0, span, title):
    ranks = sorted({pid for pid, _ in rows})
    labels, y = [], 0

    def bar(a, b, **kw):
        ax.barh(y, b - a, left=a, height=0.8, lw=0, **kw)

    for pid in ranks:
        for row in ("main", "comm"):
            events = [e for e in rows.get((pid, row), [])
                      if e["ts"] + e["dur"] >= t0 and (e["ts"] - t0) / 1e3 <= span]
            # the comm thread's "wait for ranks" starts where its allreduce starts
            joins = {e["ts"]: e["dur"] for e in events if e["name"] == "wait for ranks"}
            for e in events:
                a, b = (e["ts"] - t0) / 1e3, (e["ts"] + e["dur"] - t0) / 1e3
                if row == "main" and e["name"] in COLORS:
                    bar(a, b, color=COLORS[e["name"]])
                elif row == "comm" and e["name"] == "allreduce":
                    j = a + joins.get(e["ts"], 0) / 1e3
                    bar(a, j, color="white", hatch="////", edgecolor=COLORS["allreduce"])
                    bar(j, b, color=COLORS["allreduce"])
                    nbytes = e.get("args", {}).get("bytes", 0)
                    if nbytes >= 64 * 1024 and b - j > span * 0.035:
                        ax.text((j + b) / 2, y, size_label(nbytes), ha="center", va="center",
                                fontsize=7, color="white")
            labels.append("rank %d %s" % (pid, "compute" if row == "main" else "comm thread"))
            y += 1
    ax.set_yticks(range(len(labels)), labels, fontsize=8)
    ax.set_ylim(len(labels) - 0.5, -0.5)
    ax.set_xlim(0, span)
    ax.set_title(title, fontsize=9, loc="left")
    ax.grid(axis="x", alpha=0.3)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("traces", nargs="+", help="TRACE.json, optionally :TITLE")
    p.add_argument("--steps", type=int, default=2)
    p.add_argument("--skip", type=int, default=3)
    p.add_argument("-o", "--output", default="timeline.png")
    a = p.parse_args()
    loaded = []
    for spec in a.traces:
        path, _, title = spec.partition(":")
        rows = load(path)
        loaded.append((rows, window(rows, a.skip, a.steps), title or path))
    span = max(t1 - t0 for _, (t0, t1), _ in loaded) / 1e3
    fig, axes = plt.subplots(len(loaded), 1, figsize=(10, 1.0 + 1.3 * len(loaded)), sharex=True,
                             squeeze=False)
    for ax, (rows, (t0, _), title) in zip(axes[:, 0], loaded):
        draw(ax, rows, t0, span, title)
    axes[-1, 0].set_xlabel("ms from the start of a step on rank 0")
    handles = [Patch(color=COLORS[k], label=k) for k in ("forward", "backward", "ddp_wait",
                                                          "optimizer", "allreduce")]
    handles.append(Patch(facecolor="white", edgecolor=COLORS["allreduce"], hatch="////",
                         label="allreduce: waiting for the other rank"))
    fig.legend(handles=handles, loc="lower center", ncol=6, fontsize=7, frameon=False)
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    fig.savefig(a.output, dpi=110)
    print("wrote", a.output)


if __name__ == "__main__":
    main()
