#!/usr/bin/python3
"""The int8 path's arithmetic in numpy, written from docs/int8.md
(not from mha.h), and a generator of test cases for tests/test_q8.c.

    q8_ref.py OUT.bin [--cases N] [--seed S]     N random cases into OUT.bin
    q8_ref.py --header OUT.h [--cases N] [--tiny] a few small (tiny: AVR) ones as a C header
    q8_ref.py --breakdown [--cases N]             where the error against float comes from

Each case is calibrated the way a post-training exporter does it: float
inputs and weights are drawn, weights quantised per row (symmetric), the
activations per tensor from their min/max (asymmetric); a share of the cases
then has its scales spoiled on purpose (clipping, saturation). The expected
outputs are computed here with Python integers held in int64 arrays, for both
rounding modes (TFLite's two roundings, and one).

File layout: int32 little-endian words; per case a header (see HEADER), then
the arrays in the order of write_case. The file ends with a 0 word."""
import math
import struct
import sys

import numpy as np

I32_MIN, I32_MAX = -(1 << 31), (1 << 31) - 1
LOG2E = 1.4426950408889634  # log2(e) as a double
LN2_Q31 = round(math.log(2.0) * 2 ** 31)
POW2_Q31 = [round(2.0 ** (31 - i / 16)) for i in range(16)]
MAGIC = 0x51384D48  # "HM8Q"


# ---- the arithmetic -----------------------------------------------------------

def quantize_multiplier(real):
    """real >= 0 -> (multiplier, shift), real ~ multiplier 2^(shift - 31)."""
    if real == 0.0:
        return 0, 0
    f, e = math.frexp(real)
    q = math.floor(f * 2 ** 31 + 0.5)
    if q == 2 ** 31:
        q //= 2
        e += 1
    if e > 30:
        raise ValueError("factor too large")
    if e < -31:
        return 0, 0
    return q, e


def clip(x, lo, hi):
    """np.clip for integer arrays and bounds (np.clip's own checks cost more than the work here)"""
    return np.minimum(np.maximum(x, lo), hi)


def rescale(x, mult, shift, single):
    """x (int64 array) times mult 2^(shift - 31), as TFLite rounds it."""
    x = np.asarray(x, dtype=np.int64)
    mult = np.asarray(mult, dtype=np.int64)
    shift = np.asarray(shift, dtype=np.int64)
    if single:
        total = 31 - shift
        v = x * mult + np.left_shift(np.int64(1), total - 1)
        return clip(np.right_shift(v, total), I32_MIN, I32_MAX)
    left = np.maximum(shift, 0)
    right = np.maximum(-shift, 0)
    # x 2^left times mult, doubled, high 32 bits, ties up (the exact value
    # saturated where x 2^left would overflow int32)
    hi = clip((x * mult + np.left_shift(np.int64(1), 30 - left)) >> (31 - left), I32_MIN, I32_MAX)
    mask = np.left_shift(np.int64(1), right) - 1
    rem = hi & mask
    thr = (mask >> 1) + (hi < 0)
    return np.right_shift(hi, right) + (rem > thr)


def exp2_q15(y):
    """2^(y / 65536) for y <= 0 (int64 array), in Q15."""
    u = -np.asarray(y, dtype=np.int64)
    k = u >> 16
    r = u & 4095
    z = (r * LN2_Q31 + 32768) >> 16
    z2 = (z * z + (1 << 30)) >> 31
    z3 = (z2 * z + (1 << 30)) >> 31
    poly = (1 << 31) - z + (z2 >> 1) - (z3 + 3) // 6
    t = (np.array(POW2_Q31, dtype=np.int64)[(u >> 12) & 15] * poly + (1 << 30)) >> 31
    kk = np.minimum(k, 15)
    return np.where(k > 15, 0, (t + np.left_shift(np.int64(1), kk + 15)) >> (kk + 16))


def linear(x, zx, w, b, mult, shift, zy, single):
    """rows of x [r][d] -> [r][rows]"""
    acc = (x.astype(np.int64) - zx) @ w.astype(np.int64).T + b.astype(np.int64)
    acc = clip(acc, I32_MIN, I32_MAX)
    return clip(rescale(acc, mult, shift, single) + zy, -128, 127)


def visible(c, b, t):
    """the keys query t of batch entry b sees: bool [m]"""
    m = c["m"]
    vis = np.ones(m, dtype=bool)
    if c["valid_lens"] is not None:
        vl = c["valid_lens"]
        hi = vl[b * c["n"] + t] if c["vl_per_query"] else vl[b]
        vis[hi:] = False
    if c["causal"]:
        j = np.arange(m)
        vis &= j <= t + c["causal_offset"]
    if c["keep"] is not None:
        vis &= c["keep"][b, t] != 0
    return vis


def forward(c, single):
    """every row and head of a batch entry at once (the same integer operations, element by element,
    as one row and head at a time)"""
    h, kv, pq, pv, n, m = c["h"], c["kv"], c["pq"], c["pv"], c["n"], c["m"]
    grp = h // kv
    z = c["zero"]
    out = np.zeros((c["batch"], n, c["po"]), dtype=np.int64)
    g = np.arange(h) // grp  # the kv head of each head
    for b in range(c["batch"]):
        K = linear(c["keys"][b], z["in_k"], c["w_k"], c["b_k"], *c["r_k"], z["k"], single)
        V = linear(c["values"][b], z["in_v"], c["w_v"], c["b_v"], *c["r_v"], z["v"], single)
        Q = linear(c["queries"][b], z["in_q"], c["w_q"], c["b_q"], *c["r_q"], z["q"], single)
        heads = np.full((n, h, pv), z["heads"], dtype=np.int64)
        vis = np.array([visible(c, b, t) for t in range(n)], dtype=bool).reshape(n, m)  # [n][m]
        seen = vis.any(axis=1)  # rows that see a key: the others keep zero_heads
        if seen.any():
            q = Q.reshape(n, h, pq) - z["q"]                 # [n][h][pq]
            k = (K.reshape(m, kv, pq) - z["k"])[:, g, :]      # [m][h][pq]
            v = (V.reshape(m, kv, pv) - z["v"])[:, g, :]      # [m][h][pv]
            s = np.einsum("tip,jip->tij", q, k)               # [n][h][m]
            vis3 = np.broadcast_to(vis[:, None, :], s.shape)
            mx = np.where(vis3, s, np.iinfo(np.int64).min).max(axis=2, keepdims=True)
            mx = np.where(seen[:, None, None], mx, 0)
            e = np.where(vis3, exp2_q15(rescale(np.where(vis3, s - mx, 0), *c["score"], single)), 0)
            total = np.maximum(e.sum(axis=2, keepdims=True), 1)
            recip = ((1 << 46) + total // 2) // total
            p = (e * recip + (1 << 30)) >> 31
            acc = np.einsum("tij,jip->tip", p, v)              # [n][h][pv]
            rows = clip(rescale(acc, *c["head"], single) + z["heads"], -128, 127)
            heads[seen] = rows[seen]
        out[b] = linear(heads.reshape(n, h * pv), z["heads"], c["w_o"], c["b_o"], *c["r_o"], z["out"], single)
    return out


# ---- cases --------------------------------------------------------------------

def act_qparams(lo, hi):
    """per-tensor asymmetric int8 from a range (widened to hold 0)"""
    lo, hi = min(lo, 0.0), max(hi, 0.0)
    if hi - lo < 1e-6:
        hi = lo + 1e-6
    scale = np.float32((hi - lo) / 255.0)
    zero = int(np.clip(round(-128 - lo / float(scale)), -128, 127))
    return scale, zero


def quant_act(x, scale, zero):
    return np.clip(np.round(x / float(scale)) + zero, -128, 127).astype(np.int64)


def quant_rows(w):
    """per-row symmetric int8 weights and their scales"""
    s = np.maximum(np.abs(w).max(axis=1), 1e-6) / 127.0
    s = s.astype(np.float32)
    return np.clip(np.round(w / s[:, None].astype(np.float64)), -127, 127).astype(np.int64), s


def make_case(rng, size):
    """size 0: tiny (AVR), 1: small (the C header), 2: the file's"""
    small = size < 2
    kv = int(rng.integers(1, 3 if small else 4))
    h = kv * int(rng.integers(1, 3 if small else 4))
    big = not small and rng.random() < 0.15
    dq, dk, dv = (int(rng.integers(1, (5, 9, 65 if big else 25)[size])) for _ in range(3))
    pq = int(rng.integers(1, (4, 7, 33 if big else 13)[size]))
    pv = int(rng.integers(1, (4, 7, 13)[size]))
    po = int(rng.integers(1, (4, 9, 17)[size]))
    batch = int(rng.integers(1, 3 if small else 4))
    n = int(rng.integers(0 if rng.random() < 0.05 else 1, (4, 5, 7)[size]))
    m = int(rng.integers(0 if rng.random() < 0.05 else 1, (5, 7, 80 if big else 12)[size]))
    c = dict(h=h, kv=kv, dq=dq, dk=dk, dv=dv, pq=pq, pv=pv, po=po, batch=batch, n=n, m=m)
    c["scale_f"] = 0.0 if rng.random() < 0.7 else float(np.float32(rng.uniform(0.05, 0.6)))
    # masks
    c["causal"] = int(rng.random() < 0.3)
    c["causal_offset"] = int(rng.integers(-2, 4)) if c["causal"] else 0
    c["valid_lens"], c["vl_per_query"], c["keep"] = None, 0, None
    if rng.random() < 0.3:
        c["vl_per_query"] = int(rng.random() < 0.5)
        c["valid_lens"] = rng.integers(0, m + 1, size=batch * (n if c["vl_per_query"] else 1))
    if rng.random() < 0.25:
        c["keep"] = (rng.random((batch, n, m)) < 0.7).astype(np.int64)
    # float model and data
    amp = float(rng.choice([0.3, 1.0, 3.0]))
    xq = rng.normal(0, amp, (batch, n, dq))
    xk = rng.normal(0, amp, (batch, m, dk))
    xv = rng.normal(0, amp, (batch, m, dv))
    wq = rng.normal(0, 1 / math.sqrt(dq), (h * pq, dq))
    wk = rng.normal(0, 1 / math.sqrt(dk), (kv * pq, dk))
    wv = rng.normal(0, 1 / math.sqrt(dv), (kv * pv, dv))
    wo = rng.normal(0, 1 / math.sqrt(h * pv), (po, h * pv))
    bias = rng.random() < 0.7
    bq, bk, bv, bo = (rng.normal(0, 0.2, r) if bias else np.zeros(r) for r in (h * pq, kv * pq, kv * pv, po))
    c["has_bias"] = int(bias)
    # 1. inputs and weights
    sc, zero = {}, {}
    for name, x in (("in_q", xq), ("in_k", xk), ("in_v", xv)):
        sc[name], zero[name] = act_qparams(float(x.min()) if x.size else 0.0, float(x.max()) if x.size else 0.0)
    c["queries"], c["keys"], c["values"] = (quant_act(x, sc[k], zero[k]) for x, k in
                                            ((xq, "in_q"), (xk, "in_k"), (xv, "in_v")))
    for name, w in (("w_q", wq), ("w_k", wk), ("w_v", wv), ("w_o", wo)):
        c[name], c["s_" + name] = quant_rows(w)
    deq = {k: (c[x].astype(np.float64) - zero[k]) * float(sc[k]) for x, k in
           (("queries", "in_q"), ("keys", "in_k"), ("values", "in_v"))}
    wd = {k: c[k] * c["s_" + k][:, None].astype(np.float64) for k in ("w_q", "w_k", "w_v", "w_o")}
    # 2. the projections' ranges, their quantisation, the biases in int32
    Qf = deq["in_q"] @ wd["w_q"].T + bq
    Kf = deq["in_k"] @ wd["w_k"].T + bk
    Vf = deq["in_v"] @ wd["w_v"].T + bv
    for name, x in (("q", Qf), ("k", Kf), ("v", Vf)):
        sc[name], zero[name] = act_qparams(float(x.min()) if x.size else 0.0, float(x.max()) if x.size else 0.0)
    # the heads and out: their ranges in a float forward with the masks (the
    # calibration data are the case's own inputs)
    scale = c["scale_f"] or float(np.float32(1.0) / np.sqrt(np.float32(pq)))
    hf = np.zeros((batch, n, h * pv))
    for b in range(batch):
        for t in range(n):
            vis = visible(c, b, t)
            if not vis.any():
                continue
            for i in range(h):
                g = i // (h // kv)
                s = Kf[b][vis, g * pq:(g + 1) * pq] @ Qf[b, t, i * pq:(i + 1) * pq] * scale
                s = np.exp(s - s.max())
                hf[b, t, i * pv:(i + 1) * pv] = (s / s.sum()) @ Vf[b][vis, g * pv:(g + 1) * pv]
    of = hf @ wd["w_o"].T + bo
    for name, x in (("heads", hf), ("out", of)):
        sc[name], zero[name] = act_qparams(float(x.min()) if x.size else 0.0, float(x.max()) if x.size else 0.0)
    c["calibrated"] = 1
    if rng.random() < 0.2:  # spoiled scales: clipping and saturation everywhere
        c["calibrated"] = 0
        for k in sc:
            sc[k] = np.float32(sc[k] * rng.choice([0.05, 0.3, 3.0]))
        for k in zero:
            zero[k] = int(rng.integers(-128, 128))
    c["sc"], c["zero"] = sc, zero
    for name, b, sin, sw in (("b_q", bq, "in_q", "s_w_q"), ("b_k", bk, "in_k", "s_w_k"),
                             ("b_v", bv, "in_v", "s_w_v"), ("b_o", bo, "heads", "s_w_o")):
        c[name] = np.clip(np.round(b / (float(sc[sin]) * c[sw].astype(np.float64))), -(1 << 30), 1 << 30).astype(np.int64)
    # 3. the rescales, from the scales as mha_q8_prepare computes them (double, this order)
    def rows(sin, sw, sto):
        r = [quantize_multiplier(float(sc[sin]) * float(s) / float(sc[sto])) for s in c[sw]]
        return np.array([a for a, _ in r], dtype=np.int64), np.array([e for _, e in r], dtype=np.int64)
    c["r_q"] = rows("in_q", "s_w_q", "q")
    c["r_k"] = rows("in_k", "s_w_k", "k")
    c["r_v"] = rows("in_v", "s_w_v", "v")
    c["r_o"] = rows("heads", "s_w_o", "out")
    scale32 = float(np.float32(c["scale_f"])) if c["scale_f"] else float(np.float32(1.0) / np.sqrt(np.float32(pq)))
    c["score"] = quantize_multiplier(float(sc["q"]) * float(sc["k"]) * scale32 * LOG2E * 65536.0)
    c["head"] = quantize_multiplier(float(sc["v"]) / 32768.0 / float(sc["heads"]))
    c["out_double"] = forward(c, False)
    c["out_single"] = forward(c, True)
    return c


def breakdown(cases, seed):
    """Where the int8 path's error against the float forward comes from, on calibrated cases:
    the share of outputs within 1 LSB of the float forward (dequantised weights and inputs)
    when only the projected q, k, v are rounded to int8, when the heads are too, and for the
    integer path itself."""
    rng = np.random.default_rng(seed)
    within = {"q, k, v rounded": [0, 0], "q, k, v and heads rounded": [0, 0], "int8 path": [0, 0]}

    def float_out(c, Q, K, V, round_heads):
        h, kv, pq, pv, z, sc = c["h"], c["kv"], c["pq"], c["pv"], c["zero"], c["sc"]
        scale = c["scale_f"] or float(np.float32(1.0) / np.sqrt(np.float32(pq)))
        wo = c["w_o"] * c["s_w_o"][:, None].astype(np.float64)
        bo = c["b_o"] * float(sc["heads"]) * c["s_w_o"].astype(np.float64)
        out = np.zeros((c["batch"], c["n"], c["po"]))
        for b in range(c["batch"]):
            hf = np.zeros((c["n"], h * pv))
            for t in range(c["n"]):
                vis = visible(c, b, t)
                if not vis.any():
                    continue
                for i in range(h):
                    g = i // (h // kv)
                    s = K[b][vis, g * pq:(g + 1) * pq] @ Q[b][t, i * pq:(i + 1) * pq] * scale
                    s = np.exp(s - s.max())
                    hf[t, i * pv:(i + 1) * pv] = (s / s.sum()) @ V[b][vis, g * pv:(g + 1) * pv]
            if round_heads:
                hf = (np.clip(np.round(hf / float(sc["heads"])) + z["heads"], -128, 127) - z["heads"]) * float(sc["heads"])
            out[b] = hf @ wo.T + bo
        return np.clip(np.floor(out / float(sc["out"]) + 0.5) + z["out"], -128, 127)

    for _ in range(cases):
        c = make_case(rng, 2)
        if not c["calibrated"] or c["n"] == 0:
            continue
        z, sc = c["zero"], c["sc"]
        exact, rounded = {}, {}
        for name, xs, zin in (("q", "queries", "in_q"), ("k", "keys", "in_k"), ("v", "values", "in_v")):
            sw, sin = c["s_w_" + name].astype(np.float64), float(sc[zin])
            x = (c[xs] - z[zin]) * sin
            exact[name] = x @ (c["w_" + name] * sw[:, None]).T + c["b_" + name] * sin * sw
            rounded[name] = (np.clip(np.round(exact[name] / float(sc[name])) + z[name], -128, 127) - z[name]) * \
                float(sc[name])
        ref = float_out(c, exact["q"], exact["k"], exact["v"], False)
        for key, out in (("q, k, v rounded", float_out(c, rounded["q"], rounded["k"], rounded["v"], False)),
                         ("q, k, v and heads rounded", float_out(c, rounded["q"], rounded["k"], rounded["v"], True)),
                         ("int8 path", c["out_double"])):
            within[key][0] += int((np.abs(out - ref) <= 1).sum())
            within[key][1] += ref.size
    for key, (a, t) in within.items():
        print("q8_ref.py breakdown: %-26s %.2f %% of %d outputs within 1 LSB of the float forward" % (key, 100 * a / t, t))


def f32_bits(x):
    return struct.unpack("<i", struct.pack("<f", float(x)))[0]


SCALE_NAMES = ("in_q", "in_k", "in_v", "q", "k", "v", "heads", "out")
ZERO_NAMES = SCALE_NAMES


def case_words(c):
    w = [MAGIC, c["h"], c["kv"], c["dq"], c["dk"], c["dv"], c["pq"], c["pv"], c["po"], c["batch"], c["n"], c["m"],
         f32_bits(c["scale_f"]), c["causal"], c["causal_offset"],
         -1 if c["valid_lens"] is None else c["vl_per_query"], 0 if c["keep"] is None else 1, c["has_bias"],
         c["calibrated"]]
    w += [c["zero"][k] for k in ZERO_NAMES]
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
    w += [int(v) for v in c["out_double"].ravel()] + [int(v) for v in c["out_single"].ravel()]
    return w


def main():
    args = sys.argv[1:]
    cases, seed, header = 1000, 1, None
    if "--cases" in args:
        cases = int(args[args.index("--cases") + 1])
    if "--seed" in args:
        seed = int(args[args.index("--seed") + 1])
    if "--header" in args:
        header = args[args.index("--header") + 1]
    size = 0 if "--tiny" in args else 1 if header else 2
    if "--breakdown" in args:
        breakdown(cases, seed)
        return
    rng = np.random.default_rng(seed)
    words = []
    for _ in range(cases):
        words += case_words(make_case(rng, size))
    words.append(0)
    if header:
        with open(header, "w") as f:
            f.write("/* Generated by tests/q8_ref.py --header (seed %d, %d cases): int8 cases and the\n"
                    "   outputs of the numpy reference (see tests/test_q8.c). Do not edit. */\n" % (seed, cases))
            f.write("static const int32_t q8_cases_small[] = {\n")
            for i in range(0, len(words), 12):
                f.write("    " + ", ".join("%d" % v if v != I32_MIN else "(-2147483647 - 1)"
                                           for v in words[i:i + 12]) + ",\n")
            f.write("};\n")
    else:
        with open(args[0], "wb") as f:
            f.write(np.array(words, dtype="<i4").tobytes())
    print("q8_ref.py: %d cases, %d words" % (cases, len(words)))


if __name__ == "__main__":
    main()
