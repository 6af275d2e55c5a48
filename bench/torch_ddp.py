#!/usr/bin/python3
"""torch_ddp.py - the PyTorch peer of `rg-mpirun -np N ringgrad-train`: the same CNN, Adam and
batch, trained data-parallel with torch.nn.parallel.DistributedDataParallel over gloo.

    /usr/bin/python3 bench/torch_ddp.py [--np 2] [--threads 1] [--batch-size 128] [--steps 30]
                                        [--warmup 3] [--data fmnist|synthetic] [--port 29533]

On several hosts (or simulated ones, scripts/sim-cluster.sh), let mpirun start one process per
rank and pass --mpi: each takes its rank and the world size from Open MPI's environment
(OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE; --np is ignored) and meets rank 0 at --master-addr
over gloo (GLOO_SOCKET_IFNAME picks the interface, e.g. eth0):
    scripts/sim-cluster.sh run 2 --rate 1gbit -- -np 2 -x GLOO_SOCKET_IFNAME=eth0 \
        /usr/bin/python3 bench/torch_ddp.py --mpi --master-addr 192.168.77.11

Run it with the system python (/usr/bin/python3 has torch 1.13; the python3 on PATH may not).
It starts --np processes with torch.multiprocessing on 127.0.0.1, each limited to --threads
intra-op threads (as `ringgrad-train --threads`), each taking its own shard of --batch-size
images per step, and prints one JSON line, the same fields bench/scaling.sh reads from
ringgrad-train's trace:
    {"framework": "pytorch", "world_size": 2, ..., "step_ms_median": ..., "images_per_sec": ...}
images_per_sec is world_size * batch_size / the median step time (the first --warmup steps are
left out), as bench/trace_steps.py computes it for ringgrad. Step = forward, loss, backward
(DDP's bucket allreduces overlap it), optimizer step; timed on rank 0 between barriers-free
consecutive step starts, as the allreduce keeps the ranks in step.

The model is ringgrad's `cnn` (models/zoo.c) layer for layer:
conv 1->32 3x3, relu, conv 32->64 3x3, relu, maxpool 2, dropout 0.25, flatten, linear 9216->128,
relu, dropout 0.5, linear 128->10; cross-entropy; Adam lr 1e-3; DDP's default 25 MiB buckets.
"""
import argparse
import gzip
import json
import os
import statistics
import sys
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F

FMNIST = "/usr/share/datasets/fashion-mnist"


class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3)
        self.conv2 = nn.Conv2d(32, 64, 3)
        self.dropout1 = nn.Dropout(0.25)
        self.fc1 = nn.Linear(9216, 128)
        self.dropout2 = nn.Dropout(0.5)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):  # x: (N,1,28,28)
        x = F.relu(self.conv2(F.relu(self.conv1(x))))
        x = self.dropout1(F.max_pool2d(x, 2)).flatten(1)
        return self.fc2(self.dropout2(F.relu(self.fc1(x))))


def load_images(data):
    """Training images as (N,1,28,28) float32 in [0,1] and labels as int64."""
    if data == "synthetic":
        g = torch.Generator().manual_seed(1)
        return torch.rand(60000, 1, 28, 28, generator=g), torch.randint(0, 10, (60000,), generator=g)
    with gzip.open(os.path.join(FMNIST, "train-images-idx3-ubyte.gz")) as f:
        x = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 1, 28, 28)
    with gzip.open(os.path.join(FMNIST, "train-labels-idx1-ubyte.gz")) as f:
        y = np.frombuffer(f.read(), np.uint8, offset=8)
    return torch.from_numpy(x.astype(np.float32) / 255.0), torch.from_numpy(y.astype(np.int64))


def worker(rank, a, out):
    torch.set_num_threads(a.threads)
    os.environ.update(MASTER_ADDR=a.master_addr, MASTER_PORT=str(a.port))
    dist.init_process_group("gloo", rank=rank, world_size=a.np)
    torch.manual_seed(42)
    x, y = load_images(a.data)
    model = nn.parallel.DistributedDataParallel(CNN())  # broadcasts rank 0's weights
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(42)
    order = torch.randperm(x.shape[0], generator=g)
    per_step = a.batch_size * a.np
    starts = []
    model.train()
    for step in range(a.steps + 1):  # one extra start time closes the last step
        starts.append(time.perf_counter())
        if step == a.steps:
            break
        idx = order[(step * per_step + rank * a.batch_size) % x.shape[0]:][: a.batch_size]
        loss = F.cross_entropy(model(x[idx]), y[idx])
        opt.zero_grad(set_to_none=True)
        loss.backward()  # DDP's hooks reduce buckets while backward runs
        opt.step()
    if rank == 0:
        steps = [b - s for s, b in zip(starts[:-1], starts[1:])][a.warmup:]
        med = statistics.median(steps)
        out.put({"framework": "pytorch " + torch.__version__, "backend": "gloo",
                 "world_size": a.np, "threads": a.threads, "batch_size": a.batch_size,
                 "steps": a.steps, "timed_steps": len(steps), "loss": float(loss),
                 "step_ms_median": round(med * 1e3, 2),
                 "images_per_sec": round(per_step / med, 1),
                 "images_per_sec_mean": round(per_step * len(steps) / sum(steps), 1)})
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--np", type=int, default=2, help="processes (ranks)")
    p.add_argument("--threads", type=int, default=1, help="torch threads per rank")
    p.add_argument("--batch-size", type=int, default=128, help="images per step on each rank")
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--warmup", type=int, default=3, help="first steps left out of the timing")
    p.add_argument("--data", choices=["fmnist", "synthetic"], default="fmnist")
    p.add_argument("--port", type=int, default=29533)
    p.add_argument("--master-addr", default="127.0.0.1", help="rank 0's address")
    p.add_argument("--mpi", action="store_true",
                   help="one process per rank started by mpirun (rank and size from OMPI_*)")
    a = p.parse_args()
    if a.steps <= a.warmup:
        p.error("--steps must exceed --warmup")
    if a.mpi:
        a.np = int(os.environ["OMPI_COMM_WORLD_SIZE"])
        rank = int(os.environ["OMPI_COMM_WORLD_RANK"])

        class Out:  # rank 0 prints its result
            def put(self, r):
                print(json.dumps(r), flush=True)
        worker(rank, a, Out())
        return 0
    ctx = mp.get_context("spawn")
    out = ctx.SimpleQueue()
    mp.start_processes(worker, args=(a, out), nprocs=a.np, start_method="spawn")
    print(json.dumps(out.get()))


if __name__ == "__main__":
    sys.exit(main())
