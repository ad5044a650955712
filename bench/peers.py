#!/usr/bin/python3
"""bench/peers.py - mha.h against PyTorch's nn.MultiheadAttention, in one run.

For each shape that nn.MultiheadAttention can express (T, M, B, L: one d, p_o = d,
dot scoring, no GQA), alternates ROUNDS times between the C benchmark
(build/bench, one shape) and PyTorch 1.13 in eval mode with need_weights=False,
biases on, torch.set_num_threads(1), batch 1, and prints the median times and
the throughput ratio mha.h / PyTorch (> 1: mha.h is faster).

    peers.py [ROUNDS]     default 3
"""
import os
import subprocess
import sys
import time

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHAPES = [("T", 16, 16, 64, 4), ("M", 256, 256, 512, 8), ("B", 256, 256, 768, 12), ("L", 1024, 1024, 512, 8)]


def mha_ms(name):
    out = subprocess.run([os.path.join(ROOT, "build", "bench"), "0.5", name], check=True, capture_output=True,
                         text=True).stdout
    row = [line for line in out.splitlines() if line.startswith("| %s |" % name)][0]
    return float(row.split("|")[5])  # median ms


def torch_ms(n, m, d, h, seconds=0.5):
    torch.manual_seed(0)
    mod = torch.nn.MultiheadAttention(d, h, bias=True, batch_first=True).eval()
    q, k, v = torch.rand(1, n, d) * 2 - 1, torch.rand(1, m, d) * 2 - 1, torch.rand(1, m, d) * 2 - 1
    times = []
    with torch.no_grad():
        start = time.perf_counter()
        while len(times) < 3 or time.perf_counter() - start < seconds:
            t0 = time.perf_counter()
            mod(q, k, v, need_weights=False)
            times.append(time.perf_counter() - t0)
    times.sort()
    return 1e3 * times[len(times) // 2]


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    torch.set_num_threads(1)
    print("| shape | mha.h median ms | PyTorch median ms | throughput ratio mha.h / PyTorch |")
    print("|---|---|---|---|")
    for name, n, m, d, h in SHAPES:
        ours, theirs = [], []
        for r in range(rounds):
            print("peers: shape %s round %d of %d" % (name, r + 1, rounds), file=sys.stderr, flush=True)
            ours.append(mha_ms(name))
            theirs.append(torch_ms(n, m, d, h))
        a, b = sorted(ours)[rounds // 2], sorted(theirs)[rounds // 2]
        print("| %s | %.3f | %.3f | %.2f |" % (name, a, b, b / a), flush=True)


if __name__ == "__main__":
    main()
