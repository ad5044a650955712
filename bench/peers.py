#!/usr/bin/python3
"""bench/peers.py - mha.h's fast path against its peers, in one run, alternating.

Peers:
  PyTorch   1.13 nn.MultiheadAttention in eval mode, need_weights=False (its
            fast path), biases on, batch_first, batch 1. It can express the
            shapes with one d, p_o = d, dot scoring and no GQA: T, M, B, L, N.
  OpenBLAS  the same attention composed from cblas_sgemm calls with a
            vectorised row softmax (build/blas_mha, bench/blas_mha.c), every shape.
  oneDNN    2.6 (libdnnl-dev) primitives (build/dnnl_mha, bench/dnnl_mha.c):
            matmuls with the bias fused and the weights reordered once, the
            scores of every head in one batched matmul, a softmax primitive, P V
            batched; every shape but A (additive scoring).
  ONNX Runtime  1.30 (the npm package onnxruntime-node, in build/ort: `make ort`),
            MatMul/Add projections around com.microsoft.MultiHeadAttention, run
            from node (bench/ort_peer.py); every shape but A; left out when the
            package is not installed.
Every peer checks its output against mha.h's before it times (bench/peer_check.c;
ONNX Runtime against bench/peer_data's output) and fails the run if they differ.

Each contender runs on one thread, then on two: OPENBLAS_NUM_THREADS and
OMP_NUM_THREADS (oneDNN's OpenMP) set for each peer's own process,
torch.set_num_threads in PyTorch's, ONNX Runtime's intra-op threads; mha.h is
build/bench with packed weights, one thread ("fast") or mha_forward_parallel
with the two-thread pool of tests/two_threads.h ("two"). Each round runs, shape
by shape and thread count by thread count, mha.h and then every peer; a table
per thread count gives the median over rounds of each one's median time and the
throughput ratios mha.h / peer (> 1: mha.h is faster); then mha.h's speed-up on
two threads and the spread of its rounds (the largest distance of a round's time from
their median, as a share of the median: +-).
Then the backward pass (mha_backward, every gradient) against PyTorch's
autograd backward through nn.MultiheadAttention, shapes M, B and L, one thread,
then two (mha_backward_parallel with the same pool; PyTorch's own threads).
Then one decoding step (bench_decode sweep: D2's shape at cache lengths 256 ..
32768) for the plot.

The results go to build/peers.json, and, where python3-matplotlib is installed,
to two pictures (bench/plot_peers.py): build/peers.png (GFLOP/s per shape and
contender, one and two threads) and build/decode.png (GB/s of a decoding step
against the cache length, beside the measured streaming bandwidth).

    peers.py [ROUNDS [SECONDS]]   default 3 rounds, 0.5 s per measurement
    peers.py torch SHAPE SECONDS THREADS [backward]   (internal: PyTorch's timing in its own process)
"""
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.path.join(ROOT, "build")
SHAPES = ["T", "M", "B", "G", "Q", "A", "L", "N"]
THREADS = [1, 2]
BACKWARD = ["M", "B", "L"]  # the backward's shapes
# n, m, d, heads of the shapes nn.MultiheadAttention can express
TORCH = {"T": (16, 16, 64, 4), "M": (256, 256, 512, 8), "B": (256, 256, 768, 12), "L": (1024, 1024, 512, 8),
         "N": (1, 4096, 2048, 16)}


def threads_env(threads):
    return dict(os.environ, OPENBLAS_NUM_THREADS=str(threads), OMP_NUM_THREADS=str(threads))


def run(args, threads=1):
    return subprocess.run(args, check=True, capture_output=True, text=True, env=threads_env(threads)).stdout


def row_of(out, name):
    return [line for line in out.splitlines() if line.startswith("| %s |" % name)][0].split("|")


def mha_ms(name, seconds, threads):
    """Median ms of mha.h's fast path, and its GFLOP/s (one thread's row only)."""
    row = row_of(run([os.path.join(BUILD, "bench"), str(seconds), name, "fast" if threads == 1 else "two"]), name)
    if threads == 1:
        return float(row[5]), float(row[7])
    return float(row[9]), None


def blas_ms(name, seconds, threads):
    return float(run([os.path.join(BUILD, "blas_mha"), str(seconds), name], threads).split()[1])


def dnnl_ms(name, seconds, threads):
    return float(run([os.path.join(BUILD, "dnnl_mha"), str(seconds), name], threads).split()[1])


def ort_ms(name, seconds, threads):
    out = run([sys.executable, os.path.join(ROOT, "bench", "ort_peer.py"), name, str(seconds), str(threads)]).split()
    return float(out[1]), float(out[4])  # median ms, the binding's own ms per run


def torch_ms(name, seconds, threads, backward=False):
    args = [sys.executable, os.path.abspath(__file__), "torch", name, str(seconds), str(threads)]
    return float(run(args + (["backward"] if backward else []), threads))


def torch_child(name, seconds, threads, backward):
    """In its own process, the thread count set before torch is imported (Debian's
    torch does its GEMMs in OpenBLAS): prints the median ms of the forward, or of
    the backward alone (autograd through nn.MultiheadAttention in training mode,
    dropout 0, biases on, for d_out of ones: gradients of the inputs and of every
    parameter; the forward before each is not timed)."""
    import torch
    torch.set_num_threads(threads)
    n, m, d, h = TORCH[name]
    torch.manual_seed(0)
    mod = torch.nn.MultiheadAttention(d, h, bias=True, batch_first=True)
    if not backward:
        mod = mod.eval()
    bound = (3.0 / d) ** 0.5  # weights scaled like real ones: uniform +-sqrt(3 / fan_in)
    with torch.no_grad():
        for p in mod.parameters():
            p.uniform_(-bound, bound)
    q, k, v = torch.rand(1, n, d) * 2 - 1, torch.rand(1, m, d) * 2 - 1, torch.rand(1, m, d) * 2 - 1
    times = []
    start = time.perf_counter()
    if backward:
        q, k, v = q.requires_grad_(), k.requires_grad_(), v.requires_grad_()
        while len(times) < 3 or time.perf_counter() - start < seconds:
            out, _ = mod(q, k, v, need_weights=False)
            grad = torch.ones_like(out)
            t0 = time.perf_counter()
            out.backward(grad)
            times.append(time.perf_counter() - t0)
    else:
        with torch.no_grad():
            while len(times) < 3 or time.perf_counter() - start < seconds:
                t0 = time.perf_counter()
                mod(q, k, v, need_weights=False)
                times.append(time.perf_counter() - t0)
    print(1e3 * median(times))


def mha_backward_ms(name, seconds, threads=1):
    mode = "backward" if threads == 1 else "backward2"  # 2: mha_backward_parallel on two threads
    return float(row_of(run([os.path.join(BUILD, "bench"), str(seconds), name, mode]), name)[2])


def median(xs):
    return sorted(xs)[len(xs) // 2]


def spread(xs):
    """The largest distance of xs from their median, in % of it."""
    m = median(xs)
    return 100 * max(abs(x - m) for x in xs) / m


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    seconds = float(sys.argv[2]) if len(sys.argv) > 2 else 0.5
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
    overhead, gflops = [], {}
    times = {t: {s: {p: [] for p in ["mha.h"] + peers} for s in SHAPES} for t in THREADS}
    for r in range(rounds):
        for name in SHAPES:
            for t in THREADS:
                print("peers: round %d of %d, shape %s, %d thread%s" % (r + 1, rounds, name, t, "s" * (t > 1)),
                      file=sys.stderr, flush=True)
                tt = times[t][name]
                ms, gf = mha_ms(name, seconds, t)
                tt["mha.h"].append(ms)
                if gf:
                    gflops.setdefault(name, []).append(gf * ms)  # GFLOP/s x ms: the shape's MFLOP
                if name in TORCH:
                    tt["PyTorch"].append(torch_ms(name, seconds, t))
                tt["OpenBLAS"].append(blas_ms(name, seconds, t))
                if name != "A":
                    tt["oneDNN"].append(dnnl_ms(name, seconds, t))
                if name != "A" and with_ort:
                    ms, ov = ort_ms(name, seconds, t)
                    tt["ONNX Runtime"].append(ms)
                    overhead.append(ov)
    result = {"rounds": rounds, "seconds": seconds, "peers": peers, "mflop": {s: median(gflops[s]) for s in SHAPES},
              "times": {str(t): {s: {p: (median(v) if v else None) for p, v in times[t][s].items()} for s in SHAPES}
                        for t in THREADS}}
    for t in THREADS:
        print("%s; median of %d rounds of median times" % ("one thread each" if t == 1 else "two threads each",
                                                            rounds))
        print("| shape | mha.h ms | " + " | ".join("%s ms" % p for p in peers) + " | " +
              " | ".join("mha.h / %s" % p for p in peers) + " |")
        print("|---|---|" + "---|" * (2 * len(peers)))
        for name in SHAPES:
            ours = median(times[t][name]["mha.h"])
            cells = []
            for peer in peers:
                x = median(times[t][name][peer]) if times[t][name][peer] else None
                cells.append(("%.4f" % x, "%.2f" % (x / ours)) if x else ("-", "-"))
            print("| %s | %.4f | %s | %s |" % (name, ours, " | ".join(c[0] for c in cells),
                                               " | ".join(c[1] for c in cells)), flush=True)
        print()
    print("mha.h on two threads: speed-up over one thread, and the spread of the rounds' times (the largest "
          "distance from their median)")
    print("| shape | speed-up | spread, one thread | spread, two threads |")
    print("|---|---|---|---|")
    for name in SHAPES:
        one, two = times[1][name]["mha.h"], times[2][name]["mha.h"]
        print("| %s | %.2f | +-%.0f %% | +-%.0f %% |" % (name, median(one) / median(two), spread(one), spread(two)))
    if overhead:
        print("ONNX Runtime's binding: %.4f ms a run (a one-element Identity graph, median), included in its times"
              % median(overhead))
    # the backward pass against PyTorch's autograd, alternating in the same way
    back = {s: {"mha.h": [], "PyTorch": [], "mha.h 2": [], "PyTorch 2": []} for s in BACKWARD}
    for r in range(rounds):
        for name in BACKWARD:
            print("peers: backward, round %d of %d, shape %s" % (r + 1, rounds, name), file=sys.stderr, flush=True)
            back[name]["mha.h"].append(mha_backward_ms(name, seconds))
            back[name]["PyTorch"].append(torch_ms(name, seconds, 1, backward=True))
            back[name]["mha.h 2"].append(mha_backward_ms(name, seconds, 2))
            back[name]["PyTorch 2"].append(torch_ms(name, seconds, 2, backward=True))
    print()
    print("backward (every gradient), one thread each, then two (mha_backward_parallel; PyTorch's intra-op "
          "threads); median of %d rounds of median times" % rounds)
    print("| shape | mha.h ms | PyTorch autograd ms | mha.h / PyTorch | mha.h 2 threads ms | PyTorch 2 threads ms "
          "| mha.h / PyTorch, 2 threads |")
    print("|---|---|---|---|---|---|---|")
    for name in BACKWARD:
        ours, pt = median(back[name]["mha.h"]), median(back[name]["PyTorch"])
        ours2, pt2 = median(back[name]["mha.h 2"]), median(back[name]["PyTorch 2"])
        print("| %s | %.3f | %.3f | %.2f | %.3f | %.3f | %.2f |" % (name, ours, pt, pt / ours, ours2, pt2, pt2 / ours2),
              flush=True)
    # a decoding step against the cache length, for the picture
    print("peers: decoding steps against the cache length (bench_decode sweep)...", file=sys.stderr, flush=True)
    sweep = run([os.path.join(BUILD, "bench_decode"), str(min(seconds, 0.5)), "sweep"])
    result["decode"] = {"header": sweep.splitlines()[0],
                        "rows": [[c.strip() for c in line.split("|")[1:-1]] for line in sweep.splitlines()
                                 if line.startswith("| S")]}
    with open(os.path.join(BUILD, "peers.json"), "w") as f:
        json.dump(result, f, indent=1)
    try:
        import plot_peers
        for path in plot_peers.draw(result, BUILD):
            print("peers: drew %s" % os.path.relpath(path, ROOT), file=sys.stderr)
    except ImportError:
        print("peers: no picture (python3-matplotlib is not installed); results in build/peers.json", file=sys.stderr)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "torch":
        torch_child(sys.argv[2], float(sys.argv[3]), int(sys.argv[4]), len(sys.argv) > 5)
    else:
        main()
