#!/usr/bin/env python3
"""Checks a ringgrad timeline (Chrome Trace Event Format JSON) the way a viewer would read it.

usage: check_timeline.py FILE --ranks N [--expect NAME]... [--thread NAME]...

Fails (exit 1, with the reason) unless:
  - FILE is valid JSON with a "traceEvents" list;
  - every rank 0..N-1 has a process_name "rank R", and no other pid appears;
  - every rank has a thread named each --thread NAME (default: main, comm);
  - every "X" event has ts >= 0 and dur >= 0, and the X events of one thread nest (no partial
    overlap), which is what Perfetto needs to stack them;
  - every async "b" has exactly one matching "e" (same pid, cat, id, name) no earlier than it;
  - every rank has an X event named each --expect NAME;
  - the comm thread's collectives (cat "comm" on the thread named comm) carry "bytes" and
    "seq" args.
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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("file")
    ap.add_argument("--ranks", type=int, required=True)
    ap.add_argument("--expect", action="append", default=[])
    ap.add_argument("--thread", action="append", default=None)
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
            if thread == "comm" and e.get("cat") == "comm" and not ("bytes" in args and "seq" in args):
                fail("collective without bytes/seq args: %r" % e)
    open_asyncs = [k for k, v in asyncs.items() if v != 0]
    if open_asyncs:
        fail("async events without an end: %r" % open_asyncs[:3])
    print("check_timeline: ok: %d events, %d ranks" % (len(events), a.ranks))


if __name__ == "__main__":
    main()
