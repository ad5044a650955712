#!/usr/bin/python3
"""bench/peers.py - mha.h's fast path against its peers, in one run, alternating.

Peers:
  PyTorch   1.13 nn.MultiheadAttention in eval mode, need_weights=False (its
            fast path), biases on, batch_first, batch 1. It can express the
            shapes with one d, p_o = d, dot scoring and no GQA: T, M, B, L.
  OpenBLAS  the same attention composed from cblas_sgemm calls with a
            vectorised row softmax (build/blas_mha, bench/blas_mha.c), every shape.
  oneDNN    2.6 (libdnnl-dev) primitives (build/dnnl_mha, bench/dnnl_mha.c):
            matmuls with the bias fused and the weights reordered once, the
            scores of every head in one batched matmul, a softmax primitive, P V
            batched; every shape but A (additive scoring). It checks its output
            against mha_forward's before timing (and fails the run if they differ).
  ONNX Runtime  1.30 (the npm package onnxruntime-node, in build/ort: `make ort`),
            MatMul/Add projections around com.microsoft.MultiHeadAttention, run
            from node (bench/ort_peer.py); every shape but A; its output checked
            against mha.h's; left out when the package is not installed.
Then the backward pass (mha_backward, every gradient) against PyTorch's
autograd backward through nn.MultiheadAttention, shapes M, B and L.

Every contender runs on one thread: OPENBLAS_NUM_THREADS=1 (set before torch
is imported; Debian's torch does its GEMMs in OpenBLAS), OMP_NUM_THREADS=1
(oneDNN's OpenMP) and torch.set_num_threads(1). Each round runs mha.h (build/bench, the fast path
with packed weights, one thread), then the peers, shape by shape; the table
gives the median over rounds of each one's median time, and the throughput
ratios mha.h / peer (> 1: mha.h is faster).

    peers.py [ROUNDS [SECONDS]]   default 3 rounds, 0.5 s per measurement
"""
import os
import subprocess
import sys
import time

os.environ["OPENBLAS_NUM_THREADS"] = "1"
os.environ["OMP_NUM_THREADS"] = "1"
import torch  # noqa: E402  (after the environment above)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# name, n, m, d, heads (PyTorch only where nn.MultiheadAttention can express the shape)
SHAPES = ["T", "M", "B", "G", "Q", "A", "L"]
BACKWARD = ["M", "B", "L"]  # the backward's shapes
TORCH = {"T": (16, 16, 64, 4), "M": (256, 256, 512, 8), "B": (256, 256, 768, 12), "L": (1024, 1024, 512, 8)}


def run(args):
    return subprocess.run(args, check=True, capture_output=True, text=True).stdout


def mha_ms(name, seconds):
    out = run([os.path.join(ROOT, "build", "bench"), str(seconds), name, "fast"])
    row = [line for line in out.splitlines() if line.startswith("| %s |" % name)][0]
    return float(row.split("|")[5])  # fast path, one thread, median ms


def blas_ms(name, seconds):
    return float(run([os.path.join(ROOT, "build", "blas_mha"), str(seconds), name]).split()[1])


def dnnl_ms(name, seconds):
    return float(run([os.path.join(ROOT, "build", "dnnl_mha"), str(seconds), name]).split()[1])


def ort_ms(name, seconds):
    out = run([sys.executable, os.path.join(ROOT, "bench", "ort_peer.py"), name, str(seconds)]).split()
    return float(out[1]), float(out[4])  # median ms, the binding's own ms per run


def torch_ms(name, seconds):
    n, m, d, h = TORCH[name]
    torch.manual_seed(0)
    mod = torch.nn.MultiheadAttention(d, h, bias=True, batch_first=True).eval()
    bound = (3.0 / d) ** 0.5  # weights scaled like real ones: uniform +-sqrt(3 / fan_in)
    with torch.no_grad():
        for p in mod.parameters():
            p.uniform_(-bound, bound)
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


def mha_backward_ms(name, seconds):
    out = run([os.path.join(ROOT, "build", "bench"), str(seconds), name, "backward"])
    row = [line for line in out.splitlines() if line.startswith("| %s |" % name)][0]
    return float(row.split("|")[2])  # mha_backward, one thread, median ms


def torch_backward_ms(name, seconds):
    """The backward alone: autograd through nn.MultiheadAttention (training
    mode, dropout 0, biases on) for d_out of ones, gradients of the inputs
    and of every parameter; the forward before each is not timed."""
    n, m, d, h = TORCH[name]
    torch.manual_seed(0)
    mod = torch.nn.MultiheadAttention(d, h, bias=True, batch_first=True)
    bound = (3.0 / d) ** 0.5
    with torch.no_grad():
        for p in mod.parameters():
            p.uniform_(-bound, bound)
    q = (torch.rand(1, n, d) * 2 - 1).requires_grad_()
    k = (torch.rand(1, m, d) * 2 - 1).requires_grad_()
    v = (torch.rand(1, m, d) * 2 - 1).requires_grad_()
    times = []
    start = time.perf_counter()
    while len(times) < 3 or time.perf_counter() - start < seconds:
        out, _ = mod(q, k, v, need_weights=False)
        grad = torch.ones_like(out)
        t0 = time.perf_counter()
        out.backward(grad)
        times.append(time.perf_counter() - t0)
    times.sort()
    return 1e3 * times[len(times) // 2]


def median(xs):
    return sorted(xs)[len(xs) // 2]


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    seconds = float(sys.argv[2]) if len(sys.argv) > 2 else 0.5
    torch.set_num_threads(1)
    sys.path.insert(0, os.path.join(ROOT, "bench"))
    try:
        import ort_peer
        with_ort = ort_peer.available()
    except ImportError:  # python3-onnx missing
        with_ort = False
    if not with_ort:
        print("peers: ONNX Runtime left out (make ort installs onnxruntime-node; needs python3-onnx)",
              file=sys.stderr)
    peers = ["PyTorch", "OpenBLAS", "oneDNN"] + (["ONNX Runtime"] if with_ort else [])
    overhead = []
    times = {s: {p: [] for p in ["mha.h"] + peers} for s in SHAPES}
    for r in range(rounds):
        for name in SHAPES:
            print("peers: round %d of %d, shape %s" % (r + 1, rounds, name), file=sys.stderr, flush=True)
            times[name]["mha.h"].append(mha_ms(name, seconds))
            if name in TORCH:
                times[name]["PyTorch"].append(torch_ms(name, seconds))
            times[name]["OpenBLAS"].append(blas_ms(name, seconds))
            if name != "A":
                times[name]["oneDNN"].append(dnnl_ms(name, seconds))
            if name != "A" and with_ort:
                ms, ov = ort_ms(name, seconds)
                times[name]["ONNX Runtime"].append(ms)
                overhead.append(ov)
    print("one thread each; median of %d rounds of median times" % rounds)
    print("| shape | mha.h ms | " + " | ".join("%s ms" % p for p in peers) + " | " +
          " | ".join("mha.h / %s" % p for p in peers) + " |")
    print("|---|---|" + "---|" * (2 * len(peers)))
    for name in SHAPES:
        ours = median(times[name]["mha.h"])
        cells = []
        for peer in peers:
            t = median(times[name][peer]) if times[name][peer] else None
            cells.append(("%.3f" % t, "%.2f" % (t / ours)) if t else ("-", "-"))
        print("| %s | %.3f | %s | %s |" % (name, ours, " | ".join(c[0] for c in cells),
                                           " | ".join(c[1] for c in cells)), flush=True)
    if overhead:
        print("ONNX Runtime's binding: %.4f ms a run (a one-element Identity graph, median), included in its times"
              % median(overhead))
    # the backward pass against PyTorch's autograd, alternating in the same way
    back = {s: {"mha.h": [], "PyTorch": []} for s in BACKWARD}
    for r in range(rounds):
        for name in BACKWARD:
            print("peers: backward, round %d of %d, shape %s" % (r + 1, rounds, name), file=sys.stderr, flush=True)
            back[name]["mha.h"].append(mha_backward_ms(name, seconds))
            back[name]["PyTorch"].append(torch_backward_ms(name, seconds))
    print()
    print("backward (every gradient), one thread each; median of %d rounds of median times" % rounds)
    print("| shape | mha.h ms | PyTorch autograd ms | mha.h / PyTorch |")
    print("|---|---|---|---|")
    for name in BACKWARD:
        ours, pt = median(back[name]["mha.h"]), median(back[name]["PyTorch"])
        print("| %s | %.3f | %.3f | %.2f |" % (name, ours, pt, pt / ours), flush=True)


if __name__ == "__main__":
    main()
