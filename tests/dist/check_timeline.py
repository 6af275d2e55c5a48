#!/usr/bin/env python3
"""Checks a ringgrad timeline (Chrome Trace Event Format JSON) the way a viewer would read it.

usage: check_timeline.py FILE --ranks N [--expect NAME]... [--thread NAME]...
                         [--step-allreduces K [--overlap]]

Fails (exit 1, with the reason) unless:
  - FILE is valid JSON with a "traceEvents" list;
  - every rank 0..N-1 has a process_name "rank R", and no other pid appears;
  - every rank has a thread named each --thread NAME (default: main, comm);
  - every "X" event has ts >= 0 and dur >= 0, and the X events of one thread nest (no partial
    overlap), which is what Perfetto needs to stack them;
  - every async "b" has exactly one matching "e" (same pid, cat, id, name) no earlier than it;
  - every rank has an X event named each --expect NAME;
  - the collectives (cat "comm", named by a request kind: "allreduce", ...) carry "bytes" and
    "seq" args; mostly they are on the comm thread, but a thread that waits for a request may
    run it itself (dist/comm_thread.c), so they may be on any thread;
  - with --step-allreduces K (a DDP training run): on every rank, for every "backward" of the
    main thread, exactly K allreduces (of any thread) start between that backward's start and
    the end of the next "ddp_wait" (one per gradient bucket; allreduces of 4*N bytes, the
    trainer's per-step check of one float per rank, are not counted);
  - with --overlap as well: on every rank, in some step an allreduce starts before the backward
    has ended (the buckets are reduced while backward still runs).
Uses only the standard library."""
import argparse
import collections
import json
import sys


def fail(msg):
    print("check_timeline: FAIL: " + msg)
    sys.exit(1)


def check_nesting(xs, where):
    """X events of one thread, sorted by start, must form a stack."""
    stack = []
    for e in sorted(xs, key=lambda e: (e["ts"], -e["dur"])):
        end = e["ts"] + e["dur"]
        while stack and stack[-1][0] <= e["ts"] + 1e-3:
            stack.pop()
        if stack and end > stack[-1][0] + 1e-3:
            fail("%s: %r [%.3f, %.3f] overlaps %r without nesting"
                 % (where, e["name"], e["ts"], end, stack[-1][1]))
        stack.append((end, e["name"]))


REQUEST_KINDS = {"allreduce", "broadcast", "allgather", "reduce_scatter", "barrier", "send",
                 "recv", "open", "close"}


def is_request(e):
    """An event that the comm module records for a request it ran (dist/comm_thread.c)."""
    return e.get("cat") == "comm" and e["name"] in REQUEST_KINDS


def bucket_allreduces(evs, ranks):
    """The gradient buckets' allreduces among one rank's events, in time order. Not the trainer's
    per-step check (tools/ringgrad-train/guard.c): an allreduce of one float per rank, queued
    after a step and run whenever the comm thread gets to it, which on a loaded machine was once
    after the next step's backward had begun."""
    return sorted((e for e in evs if is_request(e) and e["name"] == "allreduce"
                   and e["args"]["bytes"] != 4 * ranks), key=lambda e: e["ts"])


def by_name(evs, name):
    return sorted((e for e in evs if e["name"] == name), key=lambda e: e["ts"])


def check_steps(xs, threads, ranks, k, overlap):
    """The per-step allreduces of a DDP run (see --step-allreduces)."""
    for r in range(ranks):
        tid = {name: t for t, name in threads[r].items()}
        main_evs = xs[(r, tid["main"])]
        backwards, waits = by_name(main_evs, "backward"), by_name(main_evs, "ddp_wait")
        allreduces = bucket_allreduces([e for (p, _), evs in xs.items() if p == r for e in evs],
                                       ranks)
        if not backwards:
            fail("rank %d: no backward events" % r)
        overlapped = 0
        for i, b in enumerate(backwards):
            b_end = b["ts"] + b["dur"]
            w = next((w for w in waits if w["ts"] >= b_end - 1e-3), None)
            if w is None:
                fail("rank %d: backward #%d at %.3f has no ddp_wait after it" % (r, i, b["ts"]))
            step = [a for a in allreduces if b["ts"] <= a["ts"] <= w["ts"] + w["dur"]]
            if len(step) != k:
                fail("rank %d, step %d: %d allreduces between backward and the end of ddp_wait, "
                     "want %d (one per bucket)" % (r, i, len(step), k))
            overlapped += any(a["ts"] < b_end for a in step)
        if overlap and not overlapped:
            fail("rank %d: in none of %d steps did an allreduce start before backward ended"
                 % (r, len(backwards)))
        print("check_timeline: rank %d: %d steps, %d allreduces each, %d with an allreduce "
              "started during backward" % (r, len(backwards), k, overlapped))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("file")
    ap.add_argument("--ranks", type=int, required=True)
    ap.add_argument("--expect", action="append", default=[])
    ap.add_argument("--thread", action="append", default=None)
    ap.add_argument("--step-allreduces", type=int, default=None)
    ap.add_argument("--overlap", action="store_true")
    a = ap.parse_args()
    threads_wanted = a.thread or ["main", "comm"]

    try:
        with open(a.file) as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        fail("%s: %s" % (a.file, e))
    events = doc.get("traceEvents") if isinstance(doc, dict) else None
    if not isinstance(events, list):
        fail("no traceEvents list")

    procs, threads = {}, collections.defaultdict(dict)
    xs = collections.defaultdict(list)
    names = collections.defaultdict(set)
    asyncs = collections.Counter()
    for e in events:
        pid, ph = e.get("pid"), e.get("ph")
        if ph == "M" and e.get("name") == "process_name":
            procs[pid] = e["args"]["name"]
        elif ph == "M" and e.get("name") == "thread_name":
            threads[pid][e["tid"]] = e["args"]["name"]
        elif ph == "X":
            if e["ts"] < 0 or e["dur"] < 0:
                fail("negative time in %r" % e)
            xs[(pid, e["tid"])].append(e)
            names[pid].add(e["name"])
        elif ph in ("b", "e"):
            key = (pid, e["cat"], e["id"], e["name"])
            asyncs[key] += 1 if ph == "b" else -1
            if asyncs[key] < 0:
                fail("async end before its begin: %r" % e)

    want = {r: "rank %d" % r for r in range(a.ranks)}
    if procs != want:
        fail("process names %r, want %r" % (procs, want))
    for r in range(a.ranks):
        for t in threads_wanted:
            if t not in threads[r].values():
                fail("rank %d has no thread named %r (has %r)" % (r, t, threads[r]))
        for n in a.expect:
            if n not in names[r]:
                fail("rank %d has no event %r (has %r)" % (r, n, sorted(names[r])))
    for (pid, tid), evs in xs.items():
        thread = threads[pid].get(tid, tid)
        check_nesting(evs, "rank %s thread %s" % (pid, thread))
        for e in evs:
            args = e.get("args", {})
            if is_request(e) and not ("bytes" in args and "seq" in args):
                fail("collective without bytes/seq args: %r" % e)
    open_asyncs = [k for k, v in asyncs.items() if v != 0]
    if open_asyncs:
        fail("async events without an end: %r" % open_asyncs[:3])
    if a.step_allreduces is not None:
        check_steps(xs, threads, a.ranks, a.step_allreduces, a.overlap)
    print("check_timeline: ok: %d events, %d ranks" % (len(events), a.ranks))


if __name__ == "__main__":
    main()
