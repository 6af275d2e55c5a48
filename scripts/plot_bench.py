#!/usr/bin/python3
"""plot_bench.py - pictures of the distributed benchmarks' results (bench/results/*).

    /usr/bin/python3 scripts/plot_bench.py allreduce bench/results/allreduce_shm.txt \\
        -o docs/images/allreduce_busbw.png
    /usr/bin/python3 scripts/plot_bench.py scaling bench/results/scaling.json \\
        -o docs/images/scaling.png
    /usr/bin/python3 scripts/plot_bench.py overlap bench/results/overlap.jsonl \\
        -o docs/images/overlap.png
    /usr/bin/python3 scripts/plot_bench.py lab_lr bench/results/lab_lr.jsonl \\
        -o docs/images/lab_lr.png
    /usr/bin/python3 scripts/plot_bench.py lab_sync bench/results/lab_sync.jsonl \\
        -o docs/images/lab_sync.png
    /usr/bin/python3 scripts/plot_bench.py lab_allreduce bench/results/lab_allreduce.jsonl \\
        -o docs/images/lab_allreduce.png
    /usr/bin/python3 scripts/plot_bench.py lab_buckets bench/results/lab_buckets.jsonl \\
        -o docs/images/lab_buckets.png

allreduce  the table bench/allreduce_bench.c prints (saved with tee): bus bandwidth against
           message size, one line per method, and each method's busbw as a fraction of raw
           MPI_Allreduce's, with the targets (90% for the DDP buckets, 70% for the ring).
scaling    bench/scaling.sh's summary: images/s of ringgrad on 1 and 2 ranks (with the ideal
           2x) and of PyTorch DDP on 1 and 2 ranks, the runs as dots, the medians as bars.
overlap    bench/overlap.sh's runs: per network, the median step time of the three modes
           (overlap, no-overlap, compute-only) and the fraction of communication hidden.
lab_bytes  bench/lab_bytes.sh's runs (docs/LABS.md, lab 6): bytes each rank sends per step and
           its optimizer memory, per strategy.
lab_lr     bench/lab_lr.sh's runs (docs/LABS.md, lab 4): test accuracy after each epoch for the
           small batch, the big batch unscaled, with the linear rule, and with warmup.
lab_sync   bench/lab_sync.sh's runs (docs/LABS.md, lab 3): test accuracy against epochs and
           against training seconds for ddp, ps-sync and ps-async at each staleness bound, without
           (solid) and with (dashed) a straggler, from ringgrad-train's --json epoch_log.
lab_allreduce  bench/lab_allreduce.sh's runs (docs/LABS.md, lab 1): allreduce time x link rate /
           bytes against the number of hosts N at the largest size, per method, with the models
           2(N-1)/N (ring) and N-1, 2(N-1) (parameter server on rank 0, push and pull overlapped
           or not); and against message size at the largest N, with the models plus a latency
           alpha fitted (least squares, t = alpha + beta x bytes) on the messages up to 16 KiB.
           Prints the table LABS.md quotes.
lab_buckets  bench/lab_buckets.sh's runs (docs/LABS.md, lab 2): images/s against the DDP bucket
           size (and --no-overlap), and the time rank 0 waits for communication after backward
           (ddp_wait) with the forward time (which no bucket size changes: it shows how much CPU
           the run got); each run a dot, the medians joined.

Needs matplotlib (python3-matplotlib; scripts/install-deps.sh --bench).
"""
import argparse
import json
import statistics

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

METHOD_STYLE = {"raw": ("k", "o", "raw MPI_Allreduce (baseline)"),
                "mpi": ("#4e79a7", "s", "mpi comm (comm thread; MPI_Allreduce, our ring from 1 MiB)"),
                "ring": ("#f28e2b", "^", "ring comm (our ring allreduce)"),
                "avg": ("#76b7b2", "v", "mpi comm, AVG (sum, then x 1/N)"),
                "ddp": ("#e15759", "D", "DDP buckets on the mpi comm (rg_ddp_wait)"),
                "ddpring": ("#b07aa1", "P", "DDP buckets on the ring comm"),
                "ddpsum": ("#59a14f", "*", "DDP buckets, 1/N in the optimizer (mpi comm)"),
                "ddpsumring": ("#9c755f", "X", "DDP buckets, 1/N in the optimizer (ring comm)")}


def parse_allreduce(path):
    """{method: [(bytes, busbw)]} and a title from allreduce_bench's output."""
    methods, data, title = None, {}, ""
    for line in open(path):
        if line.startswith("# allreduce"):
            title = line[2:].split(".")[0]
        elif line.strip().startswith("bytes"):
            methods = [c.split()[0] for c in line.split("|")[1:]]
        elif methods and line.strip() and line.strip()[0].isdigit():
            cols = line.split("|")
            nbytes = int(cols[0].split()[0])
            for m, c in zip(methods, cols[1:]):
                data.setdefault(m, []).append((nbytes, float(c.split()[1])))
    return data, title


def size_label(b):
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if b >= 1 << shift:
            return "%g %s" % (b / (1 << shift), unit)
    return "%d B" % b


def plot_allreduce(path, out):
    data, title = parse_allreduce(path)
    fig, (top, bot) = plt.subplots(2, 1, figsize=(8, 6.5), sharex=True,
                                   gridspec_kw={"height_ratios": [3, 2]})
    raw = dict(data["raw"])
    for m, pts in data.items():
        color, marker, label = METHOD_STYLE.get(m, (None, "x", m))
        xs = [b for b, _ in pts]
        top.plot(xs, [v for _, v in pts], marker=marker, color=color, label=label, ms=4)
        if m != "raw":
            bot.plot(xs, [v / raw[b] for b, v in pts], marker=marker, color=color, ms=4)
    top.set_xscale("log", base=2)
    top.set_ylabel("bus bandwidth, GB/s")
    top.set_title(title, fontsize=9)
    top.legend(fontsize=8)
    top.grid(alpha=0.3)
    for level, what, va in ((0.95, "DDP target 95%", "bottom"), (0.7, "ring target 70%", "top")):
        bot.axhline(level, color="gray", ls="--", lw=0.8)
        bot.text(max(raw) * 1.3, level, what, fontsize=7, va=va, ha="right", color="gray")
    bot.axvspan(1 << 20, max(raw) * 1.5, color="gray", alpha=0.07)
    bot.set_ylim(0, 2)  # small messages can be far off either way; the targets apply from 1 MiB
    bot.set_ylabel("busbw / raw busbw\n(clipped at 2)")
    bot.set_xlabel("message size (float32)")
    bot.grid(alpha=0.3)
    ticks = sorted(raw)
    bot.set_xticks(ticks, [size_label(b) for b in ticks], fontsize=7, rotation=30)
    fig.tight_layout()
    fig.savefig(out, dpi=100)


def plot_scaling(path, out):
    s = json.load(open(path))
    cfg = s["configs"]
    order = [c for c in ("rg1", "rg2", "torch1", "torch2") if c in cfg]
    names = {"rg1": "ringgrad\n1 rank", "rg2": "ringgrad\n2 ranks",
             "torch1": "PyTorch DDP\n1 rank", "torch2": "PyTorch DDP\n2 ranks"}
    colors = {"rg1": "#4e79a7", "rg2": "#4e79a7", "torch1": "#bab0ac", "torch2": "#bab0ac"}
    fig, ax = plt.subplots(figsize=(7, 4))
    for i, c in enumerate(order):
        v = cfg[c]["images_per_sec"]
        ax.bar(i, v, color=colors[c], width=0.6)
        ax.text(i, v / 2, "%.0f" % v, ha="center", va="center", fontsize=9, color="white")
        ax.plot([i] * len(cfg[c]["runs"]), cfg[c]["runs"], "k.", ms=3)
    for one, two in (("rg1", "rg2"), ("torch1", "torch2")):
        if one in cfg and two in cfg:
            i = order.index(two)
            ideal = 2 * cfg[one]["images_per_sec"]
            ax.plot([i - 0.35, i + 0.35], [ideal, ideal], "k--", lw=0.8)
            ax.text(i + 0.36, ideal, "ideal\n(2 x 1 rank)", fontsize=7, va="center")
    ax.set_xlim(-0.5, len(order) - 0.5 + 0.6)
    ax.set_xticks(range(len(order)), [names[c] for c in order], fontsize=8)
    ax.set_ylabel("images/s (median step; dots: runs)")
    parts = []
    if "ringgrad_efficiency" in s:
        parts.append("ringgrad efficiency %.0f%%" % (100 * s["ringgrad_efficiency"]))
    if "torch_efficiency" in s:
        parts.append("PyTorch efficiency %.0f%%" % (100 * s["torch_efficiency"]))
    if "ringgrad_over_torch" in s:
        parts.append("ringgrad / PyTorch on 2 ranks: %.2fx" % s["ringgrad_over_torch"])
    ax.set_title("CNN, batch 128 per rank, 1 thread per rank, 2-core machine\n" +
                 "; ".join(parts), fontsize=9)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(out, dpi=100)


def plot_overlap(path, out):
    runs = [json.loads(l) for l in open(path)]
    nets = list(dict.fromkeys(r["net"] for r in runs))
    modes = (("compute", "compute only", "#59a14f"), ("overlap", "overlap", "#4e79a7"),
             ("no_overlap", "no overlap", "#e15759"))
    fig, ax = plt.subplots(figsize=(7, 4))
    for k, net in enumerate(nets):
        rs = [r["result"]["step_ms"] for r in runs if r["net"] == net]
        med = {m: statistics.median(r[m] for r in rs) for m, _, _ in modes}
        for j, (m, label, color) in enumerate(modes):
            x = k + (j - 1) * 0.25
            ax.bar(x, med[m], width=0.24, color=color, label=label if k == 0 else None)
            ax.plot([x] * len(rs), [r[m] for r in rs], "k.", ms=3)
        comm = med["no_overlap"] - med["compute"]
        hidden = (med["no_overlap"] - med["overlap"]) / comm if comm > 0 else float("nan")
        # a difference of a few ms is within the run-to-run noise: no fraction to speak of
        label = ("comm %.0f ms\nhidden %.0f%%" % (comm, 100 * hidden) if comm > 0.05 * med["compute"]
                 else "comm %.1f ms:\ntoo small to tell" % comm)
        ax.text(k, max(med.values()) * 1.04, label, ha="center", fontsize=8)
    ax.set_ylim(0, ax.get_ylim()[1] * 1.12)
    ax.set_xticks(range(len(nets)), [{"shm": "shared memory"}.get(n, n) for n in nets])
    ax.set_ylabel("step time, ms (median; dots: runs)")
    ax.set_title("CNN on 2 ranks x 1 thread: hidden = (T_no - T_overlap) / (T_no - T_compute)",
                 fontsize=9)
    ax.legend(fontsize=8, loc="lower right")
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(out, dpi=100)


LAB_LR_STYLE = {"small": ("k", "o", "batch B, lr"),
                "big": ("#e15759", "v", "batch kB, lr (unscaled)"),
                "big_scaled": ("#f28e2b", "^", "batch kB, k x lr (linear rule)"),
                "big_warmup": ("#4e79a7", "s", "batch kB, k x lr after warmup from lr")}


def plot_lab_lr(path, out):
    rows = [json.loads(l) for l in open(path) if l.strip()]
    fig, ax = plt.subplots(figsize=(7, 4))
    for cfg in dict.fromkeys(r["config"] for r in rows):
        pts = sorted((r["epoch"], 100 * r["test_accuracy"]) for r in rows if r["config"] == cfg)
        color, marker, label = LAB_LR_STYLE.get(cfg, (None, "x", cfg))
        ax.plot([e for e, _ in pts], [a for _, a in pts], marker=marker, color=color, label=label)
    ax.set_xlabel("epoch (the same images for every curve)")
    ax.set_ylabel("test accuracy, %")
    ax.set_title("SGD on Fashion-MNIST, big batch emulated with --accum-steps", fontsize=9)
    ax.set_xticks(sorted({r["epoch"] for r in rows}))
    ax.legend(fontsize=8, loc="lower right")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(out, dpi=100)


def plot_lab_sync(path, out):
    rows = [json.loads(l) for l in open(path) if l.strip()]
    cfgs = list(dict.fromkeys(r["config"] for r in rows))
    colors = dict(zip(cfgs, ["#e15759", "#4e79a7", "#59a14f", "#f28e2b", "#b07aa1", "#9c755f"]))
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    for r in rows:
        log = r["epoch_log"]
        acc = [100 * e["test_accuracy"] for e in log]
        style = "--" if r["straggle_ms"] else "-"
        label = r["config"] + (" + straggler %g ms" % r["straggle_ms"] if r["straggle_ms"] else "")
        c = colors[r["config"]]
        left.plot(range(1, len(log) + 1), acc, style, marker="o", color=c, label=label)
        right.plot([e["seconds"] for e in log], acc, style, marker="o", color=c)
    left.set_xlabel("epoch (ddp's points lie under ps-sync's: the same weights)")
    left.set_xticks(range(1, max(len(r["epoch_log"]) for r in rows) + 1))
    right.set_xlabel("wall seconds of training, to every worker's epoch end")
    for ax in (left, right):
        ax.set_ylabel("test accuracy, %")
        ax.grid(alpha=0.3)
    left.legend(fontsize=7, loc="lower right")
    r0 = rows[0]
    fig.suptitle("%s, batch %d per worker, %d workers (ps: + %d server rank(s)); load %s-%s" %
                 (r0["model"], r0["batch_size"], r0.get("workers", r0["world_size"]),
                  max(r.get("servers", 0) for r in rows), min(r["load"] for r in rows),
                  max(r["load"] for r in rows)), fontsize=9)
    fig.tight_layout()
    fig.savefig(out, dpi=100)


def plot_lab_bytes(path, out):
    rows = [json.loads(l) for l in open(path) if l.strip()]
    labels = [r["label"] for r in rows]
    fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.6))
    sent = [r.get("bytes_per_step", 0) / 2**20 for r in rows]
    state = [r["optimizer_state_bytes"] / 2**20 for r in rows]
    for ax, vals, what in ((left, sent, "MiB each rank gives the allreduces per step"),
                           (right, state, "optimizer state per rank, MiB")):
        bars = ax.barh(range(len(rows)), vals, color="#4e79a7")
        ax.set_yticks(range(len(rows)), labels, fontsize=8)
        ax.invert_yaxis()
        ax.set_title(what, fontsize=9)
        for b, v in zip(bars, vals):
            ax.text(b.get_width(), b.get_y() + b.get_height() / 2, " %.2f" % v, va="center",
                    fontsize=7)
        ax.set_xlim(0, max(vals) * 1.25)
        ax.grid(axis="x", alpha=0.3)
    fig.suptitle("CNN with Adam on %d ranks (zero1 sends a reduce-scatter and an allgather: "
                 "an allreduce's bytes)" % rows[0]["world_size"], fontsize=9)
    fig.tight_layout()
    fig.savefig(out, dpi=100)


RATE_BYTES = {"100mbit": 12.5e6, "1gbit": 125e6, "10gbit": 1250e6}
AR_MODELS = (("ring", lambda n: 2 * (n - 1) / n, "#f28e2b", "2(N-1)/N: ring"),
             ("ps", lambda n: n - 1, "#e15759", "N-1: server on rank 0, push || pull"),
             ("ps2", lambda n: 2 * (n - 1), "#e15759", "2(N-1): push, then pull"))
AR_STYLE = dict(METHOD_STYLE, ps=("#e15759", "D", "parameter server on rank 0 (point to point)"),
                reducebcast=("#59a14f", "v", "MPI_Reduce + MPI_Bcast"))
AR_STYLE["ring"] = ("#f28e2b", "^", "ring comm (ringgrad's ring, comm thread)")


def fit_alpha(rows, small=16384):
    """Least-squares t = alpha + beta * bytes over the sizes up to `small`: (alpha s, beta s/B)."""
    pts = [(r["bytes"], r["time_s"]) for r in rows if r["bytes"] <= small]
    if len(pts) < 2:
        return (pts[0][1] if pts else 0.0), 0.0
    mx = statistics.mean(b for b, _ in pts)
    my = statistics.mean(t for _, t in pts)
    sxx = sum((b - mx) ** 2 for b, _ in pts)
    beta = sum((b - mx) * (t - my) for b, t in pts) / sxx if sxx else 0.0
    return max(0.0, my - beta * mx), beta


def plot_lab_allreduce(path, out):
    rows = [json.loads(l) for l in open(path) if l.strip()]
    rates = list(dict.fromkeys(r["rate"] for r in rows))
    methods = list(dict.fromkeys(r["method"] for r in rows))
    hosts = sorted(set(r["hosts"] for r in rows))
    big = max(r["bytes"] for r in rows)
    fig, axes = plt.subplots(2, len(rates), figsize=(5.2 * len(rates), 8), squeeze=False)
    print("%-7s %2s %-12s %10s %8s %8s %9s" % ("rate", "N", "method", "ms@%dMiB" % (big >> 20),
                                               "t*B/n", "model", "alpha_us"))
    for col, rate in enumerate(rates):
        bw = RATE_BYTES[rate]
        top, bottom = axes[0][col], axes[1][col]
        xs = [n for n in range(min(hosts), max(hosts) + 1)]
        fine = [min(hosts) + i * (max(hosts) - min(hosts)) / 50 for i in range(51)]
        for name, f, color, label in AR_MODELS:
            top.plot(fine, [f(n) for n in fine], color=color, alpha=0.5,
                     ls="--" if name != "ps2" else ":", label="model " + label)
        for m in methods:
            color, marker, label = AR_STYLE.get(m, ("gray", "o", m))
            pts = []
            for n in hosts:
                rs = [r for r in rows if r["rate"] == rate and r["hosts"] == n and r["method"] == m]
                if not rs:
                    continue
                r = max(rs, key=lambda r: r["bytes"])
                norm = r["time_s"] * bw / r["bytes"]
                pts.append((n, norm))
                model = {"ring": 2 * (n - 1) / n, "ps": n - 1}.get(m)
                print("%-7s %2d %-12s %10.1f %8.2f %8s %9.0f" % (
                    rate, n, m, r["time_s"] * 1e3, norm, "%.2f" % model if model else "-",
                    fit_alpha(rs)[0] * 1e6))
            top.plot([p[0] for p in pts], [p[1] for p in pts], marker=marker, color=color,
                     ls="-", label=label)
        top.set_xticks(xs)
        top.set_xlabel("hosts N (one rank each)")
        top.set_ylabel("time x link rate / bytes")
        top.set_title("%s links, %d MiB of float32" % (rate, big >> 20), fontsize=9)
        top.grid(alpha=0.3)
        top.legend(fontsize=6.5)
        # bottom: against message size at the largest N, models with the fitted alpha
        n = max(hosts)
        for m in methods:
            rs = sorted((r for r in rows if r["rate"] == rate and r["hosts"] == n
                         and r["method"] == m), key=lambda r: r["bytes"])
            if not rs:
                continue
            color, marker, label = AR_STYLE.get(m, ("gray", "o", m))
            bottom.loglog([r["bytes"] for r in rs], [r["time_s"] * bw / r["bytes"] for r in rs],
                          marker=marker, color=color, ls="-", label=label)
            model = {"ring": 2 * (n - 1) / n, "ps": n - 1}.get(m)
            if model is not None:
                alpha = fit_alpha(rs)[0]
                bottom.loglog([r["bytes"] for r in rs],
                              [alpha * bw / r["bytes"] + model for r in rs], color=color, ls="--",
                              alpha=0.6, label="model: alpha %.0f us + %.2f x bytes / rate" % (
                                  alpha * 1e6, model))
        bottom.set_xlabel("bytes")
        bottom.set_ylabel("time x link rate / bytes")
        bottom.set_title("%s links, N = %d" % (rate, n), fontsize=9)
        bottom.grid(alpha=0.3, which="both")
        bottom.legend(fontsize=6.5)
    loads = [r["load_before"] for r in rows]
    fig.suptitle("Allreduce on simulated hosts (scripts/sim-cluster.sh), median of %d rounds; "
                 "load average %.1f-%.1f" % (rows[0]["rounds"], min(loads), max(loads)),
                 fontsize=10)
    fig.tight_layout()
    fig.savefig(out, dpi=100)


def plot_lab_buckets(path, out):
    rows = [json.loads(l) for l in open(path) if l.strip()]
    sizes = list(dict.fromkeys(r["bucket_mb"] for r in rows))
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 3.9))
    x = list(range(len(sizes)))
    med = {"ips": [], "wait": [], "fwd": []}
    print("%-10s %8s %16s %9s %9s %8s" % ("bucket_mb", "img/s", "runs", "ddp_wait", "forward",
                                         "comm_ms"))
    for i, b in enumerate(sizes):
        rs = [r for r in rows if r["bucket_mb"] == b]
        vals = {"ips": [r["trace"]["images_per_sec"] for r in rs],
                "wait": [r["trace"]["phases_ms"]["ddp_wait"] for r in rs],
                "fwd": [r["trace"]["phases_ms"]["forward"] for r in rs]}
        for k, v in vals.items():
            med[k].append(statistics.median(v))
        left.plot([i] * len(rs), vals["ips"], "o", color="#4e79a7", alpha=0.4)
        right.plot([i] * len(rs), vals["wait"], "o", color="#e15759", alpha=0.4)
        right.plot([i] * len(rs), vals["fwd"], ".", color="gray", alpha=0.4)
        print("%-10s %8.1f %16s %9.1f %9.1f %8.1f" % (
            "none" if b is None else b, med["ips"][-1], "/".join("%.0f" % v for v in vals["ips"]),
            med["wait"][-1], med["fwd"][-1],
            statistics.median(r["trace"].get("comm_ms") or 0 for r in rs)))
    left.plot(x, med["ips"], "-s", color="#4e79a7", label="images/s, median")
    right.plot(x, med["wait"], "-s", color="#e15759",
               label="ddp_wait: communication left after backward")
    right.plot(x, med["fwd"], "--", color="gray", label="forward (no communication): the CPU share")
    labels = ["no-overlap" if b is None else ("%g" % b) for b in sizes]
    for ax in (left, right):
        ax.set_xticks(x, labels, fontsize=8)
        ax.set_xlabel("--bucket-mb (MiB; 1e-06 = one bucket per tensor)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    left.set_ylabel("images/s (%d ranks)" % rows[0]["hosts"])
    right.set_ylabel("ms per step (rank 0, median over steps)")
    loads = [r["load_before"] for r in rows]
    fig.suptitle("%s on %d simulated hosts at %s, 1 thread per rank, runs as dots; load %.1f-%.1f"
                 % (rows[0]["model"], rows[0]["hosts"], rows[0]["rate"], min(loads), max(loads)),
                 fontsize=9)
    fig.tight_layout()
    fig.savefig(out, dpi=100)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("kind", choices=["allreduce", "scaling", "overlap", "lab_lr", "lab_bytes",
                                      "lab_sync", "lab_allreduce", "lab_buckets"])
    p.add_argument("input")
    p.add_argument("-o", "--output", required=True)
    a = p.parse_args()
    {"allreduce": plot_allreduce, "scaling": plot_scaling, "overlap": plot_overlap,
     "lab_lr": plot_lab_lr, "lab_bytes": plot_lab_bytes,
     "lab_sync": plot_lab_sync, "lab_allreduce": plot_lab_allreduce,
     "lab_buckets": plot_lab_buckets}[a.kind](a.input, a.output)
    print("wrote", a.output)


if __name__ == "__main__":
    main()
