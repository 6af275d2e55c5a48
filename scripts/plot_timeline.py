#!/usr/bin/python3
"""plot_timeline.py - draw ringgrad-train --timeline traces (Chrome-trace JSON) as a picture.

    /usr/bin/python3 scripts/plot_timeline.py TRACE.json[:TITLE] [TRACE2.json[:TITLE] ...]
        [--steps 2] [--skip 3] [-o docs/images/timeline.png]

One panel per trace, stacked, on one time axis so that they compare at a glance. Each panel
has two rows per rank: compute (forward, backward, optimizer, and the main thread's wait in the
strategy's step: ddp_wait, zero1_step, ps_push_pull; a parameter server's ps_apply) and comm
(each allreduce, reduce-scatter, allgather, send and recv, labelled with its size when large, its
"wait for ranks" part hatched), whichever thread recorded them. The window starts at rank 0's forward of step --skip (leaving out
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
          "optimizer": "#59a14f", "allreduce": "#9467bd", "evaluate": "#bab0ac",
          # the other strategies: the main thread waiting in the strategy's step, a server's
          # update, an injected straggler's sleep, and the collectives and messages
          "zero1_step": "#e15759", "ps_push_pull": "#e15759", "ps_apply": "#59a14f",
          "straggle": "#d4d4d4", "reduce_scatter": "#9467bd", "allgather": "#b07aa1",
          "send": "#76b7b2", "recv": "#17becf"}
# where each event is drawn: the compute row or the comm row (whichever thread recorded it)
COMPUTE = ("forward", "backward", "ddp_wait", "optimizer", "zero1_step", "ps_push_pull",
           "ps_apply", "straggle")
COMM = ("allreduce", "reduce_scatter", "allgather", "send", "recv")


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


def draw(ax, rows, t0, span, title, seen):
    ranks = sorted({pid for pid, _ in rows})
    labels, y = [], 0

    def bar(a, b, **kw):
        ax.barh(y, b - a, left=a, height=0.8, lw=0, **kw)

    for pid in ranks:
        mine = [e for row in ("main", "comm") for e in rows.get((pid, row), [])
                if e["ts"] + e["dur"] >= t0 and (e["ts"] - t0) / 1e3 <= span]
        for kinds in (COMPUTE, COMM):
            events = [e for e in mine if e["name"] in kinds]
            # a collective's "wait for ranks" starts where the collective starts
            joins = {e["ts"]: e["dur"] for e in mine if e["name"] == "wait for ranks"}
            for e in events:
                a, b = (e["ts"] - t0) / 1e3, (e["ts"] + e["dur"] - t0) / 1e3
                seen.add(e["name"])
                if kinds is COMPUTE:
                    bar(a, b, color=COLORS[e["name"]])
                    continue
                j = a + joins.get(e["ts"], 0) / 1e3
                if j > a:
                    seen.add("wait")
                bar(a, j, color="white", hatch="////", edgecolor=COLORS[e["name"]])
                bar(j, b, color=COLORS[e["name"]])
                nbytes = e.get("args", {}).get("bytes", 0)
                if nbytes >= 64 * 1024 and b - j > span * 0.035:
                    ax.text((j + b) / 2, y, size_label(nbytes), ha="center", va="center",
                            fontsize=7, color="white")
            labels.append("rank %d %s" % (pid, "compute" if kinds is COMPUTE else "comm"))
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
    seen = set()
    for ax, (rows, (t0, _), title) in zip(axes[:, 0], loaded):
        draw(ax, rows, t0, span, title, seen)
    axes[-1, 0].set_xlabel("ms from the start of a step on rank 0")
    # one entry per colour drawn (the strategies' waits share ddp_wait's red)
    names = [k for k in COMPUTE + COMM if k in seen]
    handles, colors = [], set()
    for k in names:
        same = [n for n in names if COLORS[n] == COLORS[k]]
        if COLORS[k] not in colors:
            colors.add(COLORS[k])
            handles.append(Patch(color=COLORS[k], label=" / ".join(same)))
    if "wait" in seen:
        handles.append(Patch(facecolor="white", edgecolor="#9467bd", hatch="////",
                             label="collective: waiting for the other ranks"))
    fig.legend(handles=handles, loc="lower center", ncol=min(len(handles), 6), fontsize=7,
               frameon=False)
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    fig.savefig(a.output, dpi=110)
    print("wrote", a.output)


if __name__ == "__main__":
    main()
