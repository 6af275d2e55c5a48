#!/usr/bin/env python3
"""trace_steps.py - step times from a ringgrad-train --timeline trace, as one JSON line.

    python3 bench/trace_steps.py TRACE.json [--warmup 3] [--batch-size 128]

A step is the time from one `forward` to the next on a rank's main thread, so it holds
everything the loop does: forward, backward, ddp_wait, optimizer (zero1_step under --strategy
zero1), and fetching the next batch.
The ranks are kept in step by the gradient allreduce (or the barrier of --no-allreduce), so rank
0's steps stand for the job's. The first --warmup steps (allocator and cache warm-up) are left
out, and so is the last forward (its step ends in evaluation). Prints:

    step_ms          median step time on rank 0
    images_per_sec   ranks * batch size / step_ms
    phases_ms        per phase (forward, backward, ddp_wait, optimizer, and zero1_step when the
                     trace has it): median over steps of the mean over ranks
    comm_ms          per step, the comm thread's time reducing gradients (allreduce, and zero1's
                     reduce_scatter; join wait included), median over steps of the mean over
                     ranks; join_ms the part spent waiting for ranks
    overlap          mean over steps and ranks of the fraction of that time that ran while the
                     rank's main thread was in backward

Plain python 3 (json, statistics); no numpy needed.
"""
import argparse
import json
import statistics

PHASES = ("forward", "backward", "ddp_wait", "optimizer", "zero1_step")
GRAD_COMM = ("allreduce", "reduce_scatter")  # the comm thread's gradient reductions


def load(path):
    with open(path) as f:
        t = json.load(f)
    return t["traceEvents"], t.get("otherData", {}).get("ranks", 1)


def rows(events):
    """{pid: {"main": [X events], "comm": [X events]}} by thread name."""
    names = {}
    for e in events:
        if e.get("ph") == "M" and e.get("name") == "thread_name":
            names[(e["pid"], e["tid"])] = e["args"]["name"]
    out = {}
    for e in events:
        if e.get("ph") != "X":
            continue
        row = names.get((e["pid"], e.get("tid")))
        if row in ("main", "comm"):
            out.setdefault(e["pid"], {"main": [], "comm": []})[row].append(e)
    return out


def overlap_with(a0, a1, spans):
    return sum(max(0.0, min(a1, s1) - max(a0, s0)) for s0, s1 in spans)


def rank_steps(r, warmup):
    """Per step of one rank: (start, end, {phase: ms}, comm_ms, join_ms, in_backward_ms)."""
    fwd = sorted(e["ts"] for e in r["main"] if e["name"] == "forward")
    steps = []
    for i in range(warmup, len(fwd) - 1):
        t0, t1 = fwd[i], fwd[i + 1]
        ph = {}
        bwd = []
        for e in r["main"]:
            if t0 <= e["ts"] < t1 and e["name"] in PHASES:
                ph[e["name"]] = ph.get(e["name"], 0.0) + e["dur"] / 1e3
                if e["name"] == "backward":
                    bwd.append((e["ts"], e["ts"] + e["dur"]))
        comm = join = inside = 0.0
        for e in r["comm"]:
            if t0 <= e["ts"] < t1 and e["name"] in GRAD_COMM:
                comm += e["dur"] / 1e3
                inside += overlap_with(e["ts"], e["ts"] + e["dur"], bwd) / 1e3
            elif t0 <= e["ts"] < t1 and e["name"] == "wait for ranks":
                join += e["dur"] / 1e3
        steps.append(((t1 - t0) / 1e3, ph, comm, join, inside))
    return steps


def summarize(path, warmup, batch):
    events, ranks = load(path)
    by_rank = rows(events)
    per_rank = [rank_steps(by_rank[p], warmup) for p in sorted(by_rank)]
    n = min(len(s) for s in per_rank)
    if n == 0:
        raise SystemExit(f"{path}: no steps after the {warmup} warm-up steps")
    med = statistics.median

    def mean_over_ranks(f):
        return [statistics.fmean(f(s[i]) for s in per_rank) for i in range(n)]

    step_ms = med(s[0] for s in per_rank[0][:n])
    phases = {}
    for name in PHASES:
        if name == "zero1_step" and not any(name in st[1] for s in per_rank for st in s[:n]):
            continue  # not a zero1 run
        phases[name] = round(med(mean_over_ranks(lambda st: st[1].get(name, 0.0))), 2)
    comm = mean_over_ranks(lambda st: st[2])
    inside = sum(st[4] for s in per_rank for st in s[:n])
    total = sum(st[2] for s in per_rank for st in s[:n])
    return {
        "trace": path,
        "ranks": ranks,
        "steps": n,
        "step_ms": round(step_ms, 2),
        "images_per_sec": round(ranks * batch / step_ms * 1e3, 1),
        "phases_ms": phases,
        "comm_ms": round(med(comm), 2),
        "join_ms": round(med(mean_over_ranks(lambda st: st[3])), 2),
        "overlap": round(inside / total, 3) if total > 0.01 * n else None,
    }


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("trace")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=128)
    a = p.parse_args()
    print(json.dumps(summarize(a.trace, a.warmup, a.batch_size)))


if __name__ == "__main__":
    main()
