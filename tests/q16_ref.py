#!/usr/bin/python3
"""The 16x8 path's arithmetic (int16 activations, int8 weights) in numpy,
written from docs/int8.md's "16x8" section (not from mha.h), and a generator
of test cases for tests/test_q16.c.

    q16_ref.py OUT.bin [--cases N] [--seed S]   N random cases into OUT.bin
    q16_ref.py --header OUT.h [--cases N] [--tiny]  a few small (tiny: AVR) ones as a C header
    q16_ref.py --breakdown [--cases N]          where the error against float comes from
    q16_ref.py --tables                         the two lookup tables (mha.h holds them)

Each case is calibrated as a post-training exporter does it for TFLite's
16x8 mode: float inputs and weights are drawn, weights quantised per row to
int8 (symmetric), every activation per tensor to int16, symmetric (zero point
0), its scale max|x| / 32767 over the case's own float forward (with its
masks); a share of the cases then has its scales spoiled (clipping and
saturation everywhere). The expected outputs are computed with Python
integers held in int64 arrays.

File layout: int64 little-endian words; per case a header (see case_words),
then the arrays in that order. The file ends with a 0 word."""
import math
import struct
import sys

import numpy as np

from q8_ref import clip, quantize_multiplier, quant_rows, visible

MAGIC = 0x3631384D48  # "HM816"
I64 = np.int64
LIM47 = 1 << 47


# ---- the arithmetic -----------------------------------------------------------

def round_away(x):
    """C's round(): halves away from zero"""
    return math.floor(abs(x) + 0.5) * (1 if x >= 0 else -1)


def gen_lut(func, lo, hi):
    """513 int16 values of func over [lo, hi] in Q15 (TFLite's table for its int16 softmax: each of
    the first 512 corrected by half the error of the interpolation at its step's midpoint)"""
    step = (hi - lo) / 512
    t = []
    for i in range(512):
        val = round_away(func(lo + i * step) * 32768.0)
        interp = round_away((func(lo + (i + 1) * step) * 32768.0 + val) / 2.0)
        mid = round_away(func(lo + i * step + step / 2) * 32768.0)
        t.append(min(max(val - round_away((interp - mid) / 2.0), -32768), 32767))
    t.append(min(max(round_away(func(hi) * 32768.0), -32768), 32767))
    return np.array(t, dtype=I64)


EXP_LUT = gen_lut(math.exp, -10.0, 0.0)
RECIP_LUT = gen_lut(lambda x: 1.0 / (1.0 + x), 0.0, 1.0)


def lookup(v, lut):
    """the table at v (int16 values, int64 array), interpolated between its entries in 128ths"""
    u = np.asarray(v, dtype=I64) + 32768
    i, off = u >> 7, u & 127
    return lut[i] + (((lut[np.minimum(i + 1, 512)] - lut[i]) * off + 64) >> 7)


def rescale64(x, mult, shift):
    """x times mult 2^(shift - 31) with the multiplier rounded to 16 bits (TFLite's int64
    MultiplyByQuantizedMultiplier), x first saturated to [-2^47, 2^47)"""
    x = clip(np.asarray(x, dtype=I64), -LIM47, LIM47 - 1)
    mult = np.asarray(mult, dtype=I64)
    red = np.where(mult < 0x7FFF0000, (mult + (1 << 15)) >> 16, 0x7FFF)
    total = 15 - np.asarray(shift, dtype=I64)
    return (x * red + np.left_shift(I64(1), total - 1)) >> total


def linear(x, w, b, mult, shift):
    """rows of x [r][d] (int16) -> [r][rows] (int16): int64 sums, the bias saturated into them"""
    acc = x.astype(I64) @ w.astype(I64).T + clip(b.astype(I64), -LIM47, LIM47)
    return clip(rescale64(acc, mult, shift), -32768, 32767)


def clz32(x):
    """leading zeros of uint32 values (x >= 1)"""
    return np.array([32 - int(v).bit_length() for v in x.ravel()], dtype=I64).reshape(x.shape)


def softmax16(s, vis, score):
    """Q15 probabilities of the scores s [..][m] (int64) where vis, 0 elsewhere"""
    mx = np.where(vis, s, np.iinfo(I64).min).max(axis=-1, keepdims=True)
    d = np.where(vis, s - mx, 0)
    sym = clip(rescale64(d, *score) + 32767, -32768, 32767)
    e = np.where(vis, lookup(sym, EXP_LUT), 0)
    total = np.maximum(e.sum(axis=-1, keepdims=True), 1)
    h = clz32(total)
    shifted = ((total << (h - 1)) + (1 << 13)) >> 14
    recip = lookup(clip(shifted - 98304, -32768, 32767), RECIP_LUT)
    rs = 31 - h
    return clip((e * recip + np.left_shift(I64(1), rs - 1)) >> rs, 0, 32767)


def forward(c):
    h, kv, pq, pv, n, m = c["h"], c["kv"], c["pq"], c["pv"], c["n"], c["m"]
    g = np.arange(h) // (h // kv)
    out = np.zeros((c["batch"], n, c["po"]), dtype=I64)
    for b in range(c["batch"]):
        K = linear(c["keys"][b], c["w_k"], c["b_k"], *c["r_k"])
        V = linear(c["values"][b], c["w_v"], c["b_v"], *c["r_v"])
        Q = linear(c["queries"][b], c["w_q"], c["b_q"], *c["r_q"])
        heads = np.zeros((n, h, pv), dtype=I64)
        vis = np.array([visible(c, b, t) for t in range(n)], dtype=bool).reshape(n, m)
        seen = vis.any(axis=1)
        if seen.any():
            q = Q.reshape(n, h, pq)
            k = K.reshape(m, kv, pq)[:, g, :]
            v = V.reshape(m, kv, pv)[:, g, :]
            s = np.einsum("tip,jip->tij", q, k)
            vis3 = np.broadcast_to(vis[:, None, :], s.shape)
            p = softmax16(s, vis3, c["score"])
            rows = clip(rescale64(np.einsum("tij,jip->tip", p, v), *c["head"]), -32768, 32767)
            heads[seen] = rows[seen]
        out[b] = linear(heads.reshape(n, h * pv), c["w_o"], c["b_o"], *c["r_o"])
    return out


# ---- cases --------------------------------------------------------------------

def sym_scale(x):
    return np.float32(max(float(np.abs(x).max()) if x.size else 0.0, 1e-6) / 32767.0)


def quant16(x, scale):
    return np.clip(np.round(x / float(scale)), -32768, 32767).astype(I64)


def make_case(rng, small=0):
    """small 1: the sizes of the C header's cases (Cortex-M); 2: tiny ones (AVR)"""
    kv = int(rng.integers(1, 2 if small == 2 else 3 if small else 4))
    h = kv * int(rng.integers(1, 3 if small else 4))
    big = not small and rng.random() < 0.15
    dq, dk, dv = (int(rng.integers(1, (9, 5)[small - 1] if small else 65 if big else 25)) for _ in range(3))
    pq = int(rng.integers(1, (7, 4)[small - 1] if small else 33 if big else 13))
    pv = int(rng.integers(1, (7, 4)[small - 1] if small else 13))
    po = int(rng.integers(1, (9, 5)[small - 1] if small else 17))
    batch = int(rng.integers(1, 3 if small else 4))
    n = int(rng.integers(0 if rng.random() < 0.05 else 1, 5 if small else 7))
    m = int(rng.integers(0 if rng.random() < 0.05 else 1, (7, 5)[small - 1] if small else 80 if big else 12))
    c = dict(h=h, kv=kv, dq=dq, dk=dk, dv=dv, pq=pq, pv=pv, po=po, batch=batch, n=n, m=m)
    c["scale_f"] = 0.0 if rng.random() < 0.7 else float(np.float32(rng.uniform(0.05, 0.6)))
    c["causal"] = int(rng.random() < 0.3)
    c["causal_offset"] = int(rng.integers(-2, 4)) if c["causal"] else 0
    c["valid_lens"], c["vl_per_query"], c["keep"] = None, 0, None
    if rng.random() < 0.3:
        c["vl_per_query"] = int(rng.random() < 0.5)
        c["valid_lens"] = rng.integers(0, m + 1, size=batch * (n if c["vl_per_query"] else 1))
    if rng.random() < 0.25:
        c["keep"] = (rng.random((batch, n, m)) < 0.7).astype(I64)
    amp = float(rng.choice([0.3, 1.0, 3.0]))
    xq, xk, xv = (rng.normal(0, amp, (batch, r, d)) for r, d in ((n, dq), (m, dk), (m, dv)))
    wf = [rng.normal(0, 1 / math.sqrt(cols), (rows, cols))
          for rows, cols in ((h * pq, dq), (kv * pq, dk), (kv * pv, dv), (po, h * pv))]
    bias = rng.random() < 0.7
    bf = [rng.normal(0, 0.2, r) if bias else np.zeros(r) for r in (h * pq, kv * pq, kv * pv, po)]
    c["has_bias"] = int(bias)
    sc = {"in_q": sym_scale(xq), "in_k": sym_scale(xk), "in_v": sym_scale(xv)}
    c["queries"], c["keys"], c["values"] = quant16(xq, sc["in_q"]), quant16(xk, sc["in_k"]), quant16(xv, sc["in_v"])
    for name, w in zip(("w_q", "w_k", "w_v", "w_o"), wf):
        c[name], c["s_" + name] = quant_rows(w)
    wd = [c[k] * c["s_" + k][:, None].astype(np.float64) for k in ("w_q", "w_k", "w_v", "w_o")]
    Qf = c["queries"] * float(sc["in_q"]) @ wd[0].T + bf[0]
    Kf = c["keys"] * float(sc["in_k"]) @ wd[1].T + bf[1]
    Vf = c["values"] * float(sc["in_v"]) @ wd[2].T + bf[2]
    sc["q"], sc["k"], sc["v"] = sym_scale(Qf), sym_scale(Kf), sym_scale(Vf)
    scale = c["scale_f"] or float(np.float32(1.0) / np.sqrt(np.float32(pq)))
    hf = np.zeros((batch, n, h * pv))
    for b in range(batch):
        for t in range(n):
            vis = visible(c, b, t)
            for i in range(h if vis.any() else 0):
                g = i // (h // kv)
                s = Kf[b][vis, g * pq:(g + 1) * pq] @ Qf[b, t, i * pq:(i + 1) * pq] * scale
                s = np.exp(s - s.max())
                hf[b, t, i * pv:(i + 1) * pv] = (s / s.sum()) @ Vf[b][vis, g * pv:(g + 1) * pv]
    sc["heads"] = sym_scale(hf)
    sc["out"] = sym_scale(hf @ wd[3].T + bf[3])
    c["calibrated"] = 1
    if rng.random() < 0.2:
        c["calibrated"] = 0
        for k in sc:
            sc[k] = np.float32(sc[k] * rng.choice([0.05, 0.3, 3.0]))
    c["sc"] = sc
    for name, b, sin in (("b_q", bf[0], "in_q"), ("b_k", bf[1], "in_k"), ("b_v", bf[2], "in_v"),
                         ("b_o", bf[3], "heads")):
        c[name] = np.round(b / (float(sc[sin]) * c["s_w_" + name[2]].astype(np.float64))).astype(I64)

    def rows(sin, sw, sto):  # as mha_q16_prepare computes them (double, this order)
        r = [quantize_multiplier(float(sc[sin]) * float(s) / float(sc[sto])) for s in c[sw]]
        return np.array([a for a, _ in r], dtype=I64), np.array([e for _, e in r], dtype=I64)
    c["r_q"], c["r_k"] = rows("in_q", "s_w_q", "q"), rows("in_k", "s_w_k", "k")
    c["r_v"], c["r_o"] = rows("in_v", "s_w_v", "v"), rows("heads", "s_w_o", "out")
    scale32 = float(np.float32(c["scale_f"])) if c["scale_f"] else float(np.float32(1.0) / np.sqrt(np.float32(pq)))
    c["score"] = quantize_multiplier(float(sc["q"]) * float(sc["k"]) * scale32 / (10.0 / 65535.0))
    c["head"] = quantize_multiplier(float(sc["v"]) / 32768.0 / float(sc["heads"]))
    for r in (c["r_q"][1], c["r_k"][1], c["r_v"][1], c["r_o"][1], [c["score"][1], c["head"][1]]):
        if max(r, default=0) > 7:  # a factor of 2^7 or more: no 16x8 rescale (mha_q16_prepare refuses it)
            return None
    c["out"] = forward(c)
    return c


def breakdown(cases, seed):
    """Where the error against the float layer comes from, on calibrated cases: the share of
    outputs within 1 LSB of the float forward (dequantised weights and inputs, output rounded to
    int16) when only q, k, v are rounded to int16, when the heads are too, when the softmax's
    probabilities are also rounded to Q15, and for the integer path itself."""
    rng = np.random.default_rng(seed)
    keys = ("q, k, v rounded", "q, k, v and heads rounded", "and probabilities in Q15", "16x8 path")
    within = {k: [0, 0] for k in keys}

    def float_out(c, Q, K, V, round_heads, round_p):
        h, kv, pq, pv, sc = c["h"], c["kv"], c["pq"], c["pv"], c["sc"]
        scale = c["scale_f"] or float(np.float32(1.0) / np.sqrt(np.float32(pq)))
        wo = c["w_o"] * c["s_w_o"][:, None].astype(np.float64)
        bo = c["b_o"] * float(sc["heads"]) * c["s_w_o"].astype(np.float64)
        out = np.zeros((c["batch"], c["n"], c["po"]))
        for b in range(c["batch"]):
            hf = np.zeros((c["n"], h * pv))
            for t in range(c["n"]):
                vis = visible(c, b, t)
                for i in range(h if vis.any() else 0):
                    g = i // (h // kv)
                    s = K[b][vis, g * pq:(g + 1) * pq] @ Q[b][t, i * pq:(i + 1) * pq] * scale
                    s = np.exp(s - s.max())
                    p = s / s.sum()
                    if round_p:
                        p = np.round(p * 32768) / 32768
                    hf[t, i * pv:(i + 1) * pv] = p @ V[b][vis, g * pv:(g + 1) * pv]
            if round_heads:
                hf = np.clip(np.round(hf / float(sc["heads"])), -32768, 32767) * float(sc["heads"])
            out[b] = hf @ wo.T + bo
        o = out / float(sc["out"])
        return np.clip(np.sign(o) * np.floor(np.abs(o) + 0.5), -32768, 32767)

    made = 0
    while made < cases:
        c = make_case(rng)
        if c is None or not c["calibrated"] or c["n"] == 0:
            continue
        made += 1
        sc = c["sc"]
        exact, rounded = {}, {}
        for name, xs, zin in (("q", "queries", "in_q"), ("k", "keys", "in_k"), ("v", "values", "in_v")):
            sw, sin = c["s_w_" + name].astype(np.float64), float(sc[zin])
            exact[name] = (c[xs] * sin) @ (c["w_" + name] * sw[:, None]).T + c["b_" + name] * sin * sw
            rounded[name] = np.clip(np.round(exact[name] / float(sc[name])), -32768, 32767) * float(sc[name])
        ref = float_out(c, exact["q"], exact["k"], exact["v"], False, False)
        r = (rounded["q"], rounded["k"], rounded["v"])
        for key, out in ((keys[0], float_out(c, *r, False, False)), (keys[1], float_out(c, *r, True, False)),
                         (keys[2], float_out(c, *r, True, True)), (keys[3], c["out"])):
            within[key][0] += int((np.abs(out - ref) <= 1).sum())
            within[key][1] += ref.size
    for key, (a, t) in within.items():
        print("q16_ref.py breakdown: %-26s %.2f %% of %d outputs within 1 LSB of the float forward" % (key, 100 * a / t, t))


def f32_bits(x):
    return struct.unpack("<i", struct.pack("<f", float(x)))[0]


SCALE_NAMES = ("in_q", "in_k", "in_v", "q", "k", "v", "heads", "out")


def case_words(c):
    w = [MAGIC, c["h"], c["kv"], c["dq"], c["dk"], c["dv"], c["pq"], c["pv"], c["po"], c["batch"], c["n"], c["m"],
         f32_bits(c["scale_f"]), c["causal"], c["causal_offset"],
         -1 if c["valid_lens"] is None else c["vl_per_query"], 0 if c["keep"] is None else 1, c["has_bias"],
         c["calibrated"]]
    w += [f32_bits(c["sc"][k]) for k in SCALE_NAMES]
    w += [c["score"][0], c["score"][1], c["head"][0], c["head"][1]]
    for name in ("w_q", "w_k", "w_v", "w_o"):
        w += [int(v) for v in c[name].ravel()]
        w += [f32_bits(v) for v in c["s_" + name]]
        w += [int(v) for v in c["b_" + name[2]]]
        w += [int(v) for v in c["r_" + name[2]][0]] + [int(v) for v in c["r_" + name[2]][1]]
    for name in ("queries", "keys", "values"):
        w += [int(v) for v in c[name].ravel()]
    if c["valid_lens"] is not None:
        w += [int(v) for v in c["valid_lens"]]
    if c["keep"] is not None:
        w += [int(v) for v in c["keep"].ravel()]
    w += [int(v) for v in c["out"].ravel()]
    return w


def tables():
    for name, t in (("exp", EXP_LUT), ("recip", RECIP_LUT)):
        print("%s: %s" % (name, ", ".join(str(int(v)) for v in t)))


def main():
    args = sys.argv[1:]
    cases, seed = 1000, 1
    if "--cases" in args:
        cases = int(args[args.index("--cases") + 1])
    if "--seed" in args:
        seed = int(args[args.index("--seed") + 1])
    if "--breakdown" in args:
        breakdown(cases, seed)
        return
    if "--tables" in args:
        tables()
        return
    header = args[args.index("--header") + 1] if "--header" in args else None
    rng = np.random.default_rng(seed)
    words, made = [], 0
    while made < cases:
        c = make_case(rng, 0 if header is None else 2 if "--tiny" in args else 1)
        if c is not None:
            words += case_words(c)
            made += 1
    words.append(0)
    if header:
        with open(header, "w") as f:
            f.write("/* Generated by tests/q16_ref.py --header%s (seed %d, %d cases): 16x8 cases and the\n"
                    "   outputs of the numpy reference (see tests/test_q16.c). Do not edit. */\n"
                    % (" --tiny" if "--tiny" in args else "", seed, cases))
            f.write("#define Q16_BUILTIN %d\n" % cases)
            f.write("static const Q16_FLASH int64_t q16_cases_small[] = {\n")
            for i in range(0, len(words), 10):
                f.write("    " + ", ".join("%dLL" % v for v in words[i:i + 10]) + ",\n")
            f.write("};\n")
    else:
        with open(args[0], "wb") as f:
            f.write(np.array(words, dtype="<i8").tobytes())
    print("q16_ref.py: %d cases, %d words" % (cases, len(words)))


if __name__ == "__main__":
    main()
