#!/usr/bin/python3
"""lab_bubble.py - docs/LABS.md, lab 5: the GPipe bubble from ringgrad-train --timeline traces.

    /usr/bin/python3 scripts/lab_bubble.py bench/results/lab_bubble_M*.json \\
        [--skip 2] [--gantt 4] [-o docs/images/lab_bubble.png]

Each trace is one run of `--strategy pipeline --micro-batches M` (bench/lab_bubble.sh); M is read
from the number of forward events in a step. For every training step after the first --skip, and
every rank (stage s), the idle fraction is 1 - busy / step, where busy is the time in the stage's
forward and backward events and step is the pipeline_step event less the optimizer.

Two predictions are drawn against it:
  - GPipe's (S-1)/(M+S-1), which assumes S equal stages;
  - the same schedule with the stages' measured costs: with f_s, b_s a stage's mean forward and
    backward time per micro-batch, a step takes T = sum_s (f_s + b_s) + (M-1)(max f + max b)
    (communication left out) and stage s idles 1 - M (f_s + b_s) / T.
Prints one line per (M, stage) and draws idle fraction against M (left) and one step of the
--gantt M run per stage (right).
"""
import argparse
import json
import statistics

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

COLORS = {"forward": "#4e79a7", "backward": "#f28e2b", "optimizer": "#59a14f"}


def main_events(path):
    """{rank: [X events of its main thread]}"""
    with open(path) as f:
        ev = json.load(f)["traceEvents"]
    main = {(e["pid"], e["tid"]) for e in ev
            if e.get("ph") == "M" and e.get("name") == "thread_name" and e["args"]["name"] == "main"}
    out = {}
    for e in ev:
        if e.get("ph") == "X" and (e["pid"], e["tid"]) in main:
            out.setdefault(e["pid"], []).append(e)
    for r in out:
        out[r].sort(key=lambda e: e["ts"])
    return out


def inside(evs, step, name):
    a, b = step["ts"], step["ts"] + step["dur"]
    return [e for e in evs if e["name"] == name and e["ts"] >= a and e["ts"] + e["dur"] <= b]


def analyse(path, skip):
    ranks = main_events(path)
    S = len(ranks)
    per = {}
    for r, evs in ranks.items():
        steps = [e for e in evs if e["name"] == "pipeline_step"][skip:]
        idle, f, b, M = [], [], [], 0
        for st in steps:
            fw, bw = inside(evs, st, "forward"), inside(evs, st, "backward")
            opt = sum(e["dur"] for e in inside(evs, st, "optimizer"))
            M = len(fw)
            busy = sum(e["dur"] for e in fw + bw)
            idle.append(1 - busy / (st["dur"] - opt))
            f.append(statistics.mean(e["dur"] for e in fw))
            b.append(statistics.mean(e["dur"] for e in bw))
        per[r] = {"M": M, "idle": statistics.median(idle), "f": statistics.median(f),
                  "b": statistics.median(b), "steps": len(steps)}
    M = per[0]["M"]
    T = sum(p["f"] + p["b"] for p in per.values()) + (M - 1) * (
        max(p["f"] for p in per.values()) + max(p["b"] for p in per.values()))
    for p in per.values():
        p["predicted"] = 1 - M * (p["f"] + p["b"]) / T
        p["gpipe"] = (S - 1) / (M + S - 1)
    return M, S, per


def gantt(ax, path, skip):
    ranks = main_events(path)
    steps0 = [e for e in ranks[0] if e["name"] == "pipeline_step"]
    st = steps0[min(skip, len(steps0) - 1)]
    t0, t1 = st["ts"], st["ts"] + st["dur"]
    for r, evs in ranks.items():  # the same step of every rank overlaps rank 0's
        for e in evs:
            if e["name"] in COLORS and e["ts"] < t1 and e["ts"] + e["dur"] > t0:
                ax.barh(r, e["dur"] / 1e3, left=(e["ts"] - t0) / 1e3, color=COLORS[e["name"]],
                        edgecolor="white", linewidth=0.5)
    ax.set_yticks(sorted(ranks))
    ax.set_yticklabels([f"stage {r}" for r in sorted(ranks)])
    ax.invert_yaxis()
    ax.set_xlabel("ms from the start of stage 0's step")
    ax.legend(handles=[plt.Rectangle((0, 0), 1, 1, color=c) for c in COLORS.values()],
              labels=list(COLORS), loc="lower right", fontsize=8)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("traces", nargs="+")
    p.add_argument("--skip", type=int, default=2)
    p.add_argument("--gantt", type=int, default=4, help="M of the run drawn on the right")
    p.add_argument("-o", "--output", default="lab_bubble.png")
    a = p.parse_args()
    runs = sorted((analyse(t, a.skip) + (t,) for t in a.traces), key=lambda r: r[0])
    print("M  stage  idle   predicted  (S-1)/(M+S-1)  fwd_ms  bwd_ms  steps")
    for M, S, per in [r[:3] for r in runs]:
        for s in sorted(per):
            q = per[s]
            print(f"{M:<3}{s:<7}{q['idle']:.3f}  {q['predicted']:.3f}      {q['gpipe']:.3f}"
                  f"          {q['f'] / 1e3:.2f}    {q['b'] / 1e3:.2f}    {q['steps']}")
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.2), gridspec_kw={"width_ratios": [1, 1.3]})
    Ms = [r[0] for r in runs]
    S = runs[0][1]
    ax1.plot(Ms, [(S - 1) / (m + S - 1) for m in Ms], "k-", label="(S-1)/(M+S-1), equal stages")
    for s, c in zip(range(S), ["#4e79a7", "#e15759", "#59a14f", "#9467bd"]):
        ax1.plot(Ms, [r[2][s]["idle"] for r in runs], "o-", color=c, label=f"stage {s}, measured")
        ax1.plot(Ms, [r[2][s]["predicted"] for r in runs], "--", color=c,
                 label=f"stage {s}, predicted from its costs")
    ax1.set_xscale("log", base=2)
    ax1.set_xticks(Ms)
    ax1.set_xticklabels([str(m) for m in Ms])
    ax1.set_xlabel("micro-batches M")
    ax1.set_ylabel("idle fraction of a training step")
    ax1.set_ylim(0, 1)
    ax1.legend(fontsize=7)
    ax1.set_title(f"GPipe bubble, {S} stages")
    g = [r for r in runs if r[0] == a.gantt] or runs
    gantt(ax2, g[0][3], a.skip)
    ax2.set_title(f"one step at M = {g[0][0]}")
    fig.tight_layout()
    fig.savefig(a.output, dpi=110)
    print("wrote", a.output)


if __name__ == "__main__":
    main()
