#!/usr/bin/python3
"""bench/plot_peers.py - the pictures of bench/peers.py's results (python3-matplotlib).

    plot_peers.py [RESULTS_JSON [OUT_DIR]]   default build/peers.json, build/

peers.png: GFLOP/s of each contender on each shape (the shape's FLOP count,
as bench/bench.c counts them, over its median time), one thread and two.
decode.png: GB/s of one decoding step (the bytes it must read, over its median
time) against the cache length, mha.h on one and two threads and the
llama2.c-style baseline, beside the streaming-read bandwidth measured in the same run.
"""
import json
import os
import re
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after the back end is chosen)

COLOURS = {"mha.h": "#c0392b", "PyTorch": "#7f8c8d", "OpenBLAS": "#2980b9", "oneDNN": "#27ae60",
           "ONNX Runtime": "#8e44ad"}


def draw_peers(res, path):
    shapes = list(res["mflop"])
    who = ["mha.h"] + res["peers"]
    fig, axes = plt.subplots(2, 1, figsize=(10, 7.5), sharex=True)
    width = 0.8 / len(who)
    for ax, t in zip(axes, sorted(res["times"], key=int)):
        for k, name in enumerate(who):
            xs, ys = [], []
            for s, shape in enumerate(shapes):
                ms = res["times"][t][shape].get(name)
                if ms:
                    xs.append(s + (k - (len(who) - 1) / 2) * width)
                    ys.append(res["mflop"][shape] / ms)
            ax.bar(xs, ys, width, label=name, color=COLOURS.get(name))
        ax.set_ylabel("GFLOP/s")
        ax.set_title("%s thread%s" % ("one" if t == "1" else "two", "" if t == "1" else "s"), fontsize=10)
        ax.grid(axis="y", alpha=0.3)
    axes[1].set_xticks(range(len(shapes)))
    axes[1].set_xticklabels(shapes)
    axes[1].set_xlabel("shape (bench/shapes.h); no bar: the peer cannot express the shape")
    axes[0].legend(ncol=len(who), fontsize=8, loc="upper left")
    fig.suptitle("mha_forward against its peers, batch 1 (median of %d rounds)" % res["rounds"])
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def draw_decode(res, path):
    rows = res["decode"]["rows"]
    m = [int(r[4]) for r in rows]
    step = [int(r[6]) for r in rows]
    series = [("mha.h, one thread", [b / float(r[7]) * 1e-6 for b, r in zip(step, rows)], "#c0392b", "o-"),
              ("mha.h, two threads", [b / float(r[11]) * 1e-6 for b, r in zip(step, rows)], "#e67e22", "s-"),
              ("llama2.c-style, one thread", [b / float(r[13]) * 1e-6 for b, r in zip(step, rows)], "#7f8c8d", "^-")]
    bw = [float(x) for x in re.findall(r"([0-9.]+) GB/s", res["decode"]["header"])]
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for label, ys, colour, style in series:
        ax.plot(m, ys, style, label=label, color=colour)
    for b, label, style in zip(bw, ["streaming read, one thread", "streaming read, two threads"], [":", "--"]):
        ax.axhline(b, linestyle=style, color="black", linewidth=1, label="%s (%.1f GB/s)" % (label, b))
    ax.set_xscale("log", base=2)
    ax.set_xticks(m)
    ax.set_xticklabels([str(x) for x in m])
    ax.set_xlabel("cache length (positions)")
    ax.set_ylabel("GB/s (cache + weights read per step)")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title("one decoding step, 32 heads / 8 kv heads, d 2048, p 64 (mha_decode)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def draw(res, out_dir):
    paths = [os.path.join(out_dir, "peers.png")]
    draw_peers(res, paths[0])
    if res.get("decode"):
        paths.append(os.path.join(out_dir, "decode.png"))
        draw_decode(res, paths[1])
    return paths


if __name__ == "__main__":
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    src = sys.argv[1] if len(sys.argv) > 1 else os.path.join(root, "build", "peers.json")
    out = sys.argv[2] if len(sys.argv) > 2 else os.path.join(root, "build")
    with open(src) as f:
        for p in draw(json.load(f), out):
            print(p)
