#!/usr/bin/python3
"""Post-training int8 quantisation of the digit classifier's two attention layers, for
mha_forward_q8 (README, "int8 attention"), or 16x8 for mha_forward_q16.

    quantize.py [MODEL_H [OUT_H]] [--percentile=P] [--q16]
                          default examples/digits/digits_model.h -> build/digits_q8.h;
                          --percentile=P: each activation's range from its (100 - P)th and
                          Pth percentiles over the calibration set (e.g. 99.99), values
                          beyond it saturating, instead of its min and max;
                          --q16: 16x8 (int16 activations, symmetric; int64 biases)

Reads the trained float model from the header that examples/digits/train.py wrote (the
layers as exported for mha.h), runs its forward pass in numpy (float64) over the calibration
inputs, the 1437 training images, and records the range of every tensor of each attention
layer: the inputs, the projected q, k and v, the heads side by side and the output. Then:
- each activation gets a scale and zero point from its min and max, or from two
  percentiles (asymmetric int8, the range widened to hold 0);
- each weight matrix an int8 copy with a scale per row (symmetric: max |row| / 127);
- each bias an int32 copy with scale s_in s_w[row].
The header it writes holds the int8 weights, the int32 biases, the scales and zero points;
digits.c built with -DDG_Q8 makes the rescales with mha_q8_prepare and runs both attention
layers in int8, the rest of the model in float. With --q16 each activation is int16 with zero
point 0 and scale max(|min|, |max|) / 32767, each bias int64, and digits.c built with -DDG_Q16
runs both layers with mha_forward_q16. No test image is used for calibration."""
import math
import os
import re
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
NAMES = ("in_q", "in_k", "in_v", "q", "k", "v", "heads", "out")


def read_header(path):
    """the static const float arrays, the shapes and the pixels of a digits_model.h"""
    text = open(path).read()
    arrays = {}
    for m in re.finditer(r"static const float (\w+)\[(\d+)\] = \{([^}]*)\};", text):
        vals = [float(v.strip().rstrip("f")) for v in m.group(3).replace("\n", " ").split(",") if v.strip()]
        assert len(vals) == int(m.group(2)), m.group(1)
        arrays[m.group(1)] = np.array(vals, dtype=np.float64)
    shapes = {}
    for m in re.finditer(r"static const mha_shape (\w+)_shape = \{([^}]*)\};", text):
        f = [v.strip() for v in m.group(2).split(",")]
        shapes[m.group(1)] = dict(heads=int(f[0]), kv=int(f[1]) or int(f[0]), dq=int(f[2]), dk=int(f[3]),
                                  dv=int(f[4]), pq=int(f[5]), pv=int(f[7]), po=int(f[8]))
    pixels = re.search(r"dg_pixels\[\d+\]\[65\] = \{([^}]*)\};", text).group(1)
    images = np.array([[ord(ch) - ord("a") for ch in s] for s in re.findall(r'"([a-q]{64})"', pixels)],
                      dtype=np.float64) / 16.0
    split = re.search(r'dg_split\[\] = "([tr]+)"', text).group(1)
    eps = float(re.search(r"#define DG_LN_EPS ([0-9.e+-]+)f", text).group(1))
    return arrays, shapes, images, split, eps


def layer_norm(x, w, b, eps):
    mu = x.mean(axis=-1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w + b


def attention(a, z, q, k, v, rec):
    """mha_forward's arithmetic in float64 on one sequence; every tensor's range into rec"""
    h, kv, pq, pv = z["heads"], z["kv"], z["pq"], z["pv"]
    Q = q @ a["w_q"].reshape(h * pq, -1).T + a["b_q"]
    K = k @ a["w_k"].reshape(kv * pq, -1).T + a["b_k"]
    V = v @ a["w_v"].reshape(kv * pv, -1).T + a["b_v"]
    H = np.zeros((q.shape[0], h * pv))
    for i in range(h):
        g = i // (h // kv)
        s = Q[:, i * pq:(i + 1) * pq] @ K[:, g * pq:(g + 1) * pq].T / math.sqrt(pq)
        s = np.exp(s - s.max(axis=1, keepdims=True))
        H[:, i * pv:(i + 1) * pv] = (s / s.sum(axis=1, keepdims=True)) @ V[:, g * pv:(g + 1) * pv]
    out = H @ a["w_o"].reshape(z["po"], -1).T + a["b_o"]
    for name, x in zip(NAMES, (q, k, v, Q, K, V, H, out)):
        rec.setdefault(name, []).append(x.ravel())
    return out


def ranges(rec, percentile):
    """each tensor's calibrated range: min and max, or the percentiles (100 - P, P)"""
    out = {}
    for name, parts in rec.items():
        x = np.concatenate(parts)
        if percentile is None:
            out[name] = (float(x.min()), float(x.max()))
        else:
            out[name] = (float(np.percentile(x, 100.0 - percentile)), float(np.percentile(x, percentile)))
    return out


def forward(arr, shapes, img, eps, rec_attn, rec_pool):
    """the classifier on one image [64] (digits.c's classify, in float64): logits [10]"""
    layer = lambda name: {k: arr["%s_%s" % (name, k)] for k in ("w_q", "b_q", "w_k", "b_k", "w_v", "b_v", "w_o", "b_o")}
    d = shapes["dg_attn"]["dq"]
    x = img.reshape(8, 8)
    t = x @ arr["dg_embed_w"].reshape(d, 8).T + arr["dg_embed_b"] + arr["dg_pos"].reshape(8, d)
    a = layer_norm(t, arr["dg_ln1_w"], arr["dg_ln1_b"], eps)
    t = t + attention(layer("dg_attn"), shapes["dg_attn"], a, a, a, rec_attn)
    a = layer_norm(t, arr["dg_ln2_w"], arr["dg_ln2_b"], eps)
    f = np.maximum(a @ arr["dg_ff1_w"].reshape(-1, d).T + arr["dg_ff1_b"], 0.0)
    t = t + f @ arr["dg_ff2_w"].reshape(d, -1).T + arr["dg_ff2_b"]
    u = layer_norm(t, arr["dg_ln3_w"], arr["dg_ln3_b"], eps)
    p = attention(layer("dg_pool"), shapes["dg_pool"], arr["dg_query"].reshape(1, d), u, u, rec_pool)
    return np.maximum(p[0], 0.0) @ arr["dg_cls_w"].reshape(10, -1).T + arr["dg_cls_b"]


def act_qparams(lo, hi):
    """a tensor's int8 scale and zero point from its range (widened to hold 0)"""
    lo, hi = min(lo, 0.0), max(hi, 0.0)
    scale = float(np.float32(max(hi - lo, 1e-8) / 255.0))
    return scale, int(np.clip(round(-128 - lo / scale), -128, 127))


def c_array(ctype, name, values, fmt):
    vals = [fmt % v for v in values]
    lines = ["    " + ", ".join(vals[i:i + 16]) + "," for i in range(0, len(vals), 16)]
    return "static const %s %s[%d] = {\n%s\n};" % (ctype, name, len(vals), "\n".join(lines))


def act_qparams16(lo, hi):
    """a tensor's int16 scale (zero point 0) from its range"""
    return float(np.float32(max(abs(lo), abs(hi), 1e-8) / 32767.0)), 0


def quantize_layer(arr, prefix, z, rec, q16=False):
    """int8 weights (per row), int32 (16x8: int64) biases, scales and zero points of one layer, as C text"""
    sc, zero = {}, {}
    for name in NAMES:
        sc[name], zero[name] = (act_qparams16 if q16 else act_qparams)(*rec[name])
    out = []
    sizes = {"q": (z["heads"] * z["pq"], "in_q"), "k": (z["kv"] * z["pq"], "in_k"), "v": (z["kv"] * z["pv"], "in_v"),
             "o": (z["po"], "heads")}
    for m, (rows, src) in sizes.items():
        w = arr["%s_w_%s" % (prefix, m)].reshape(rows, -1)
        s = (np.maximum(np.abs(w).max(axis=1), 1e-8) / 127.0).astype(np.float32)
        wq = np.clip(np.round(w / s[:, None].astype(np.float64)), -127, 127).astype(int)
        b = np.round(arr["%s_b_%s" % (prefix, m)] / (sc[src] * s.astype(np.float64))).astype(int)
        q8 = prefix.replace("dg_", "dg8_")
        out.append(c_array("int8_t", "%s_w_%s" % (q8, m), wq.ravel(), "%d"))
        if q16:
            out.append(c_array("int64_t", "%s_b_%s" % (q8, m), b, "%dLL"))
        else:
            out.append(c_array("int32_t", "%s_b_%s" % (q8, m), b, "%d"))
        out.append(c_array("float", "%s_sw_%s" % (q8, m), s, "%.9gf"))
    q8 = prefix.replace("dg_", "dg8_")
    out.append("/* in_q, in_k, in_v, q, k, v, heads, out */")
    out.append("static const float %s_scales[8] = {%s};" % (q8, ", ".join("%.9gf" % sc[n] for n in NAMES)))
    out.append("static const int32_t %s_zeros[8] = {%s};" % (q8, ", ".join(str(zero[n]) for n in NAMES)))
    return "\n".join(out)


def main(argv):
    percentile = None
    for a in [a for a in argv if a.startswith("--percentile=")]:
        percentile = float(a.split("=", 1)[1])
        if not 50.0 < percentile <= 100.0:
            raise SystemExit("quantize.py: --percentile=P needs 50 < P <= 100")
    q16 = "--q16" in argv
    argv = [a for a in argv if not a.startswith("--")]
    src = argv[0] if argv else os.path.join(HERE, "digits_model.h")
    dst = argv[1] if len(argv) > 1 else os.path.join(HERE, "..", "..", "build", "digits_q8.h")
    arr, shapes, images, split, eps = read_header(src)
    rec_attn, rec_pool = {}, {}
    calib = [i for i, c in enumerate(split) if c == "r"]
    worst = 0.0
    for i in calib:  # the float64 forward is checked against the logits PyTorch exported
        logits = forward(arr, shapes, images[i], eps, rec_attn, rec_pool)
        worst = max(worst, float(np.abs(logits - arr["dg_logits_torch"][i * 10:(i + 1) * 10]).max()))
    if worst > 1e-3:
        raise SystemExit("quantize.py: the float forward differs from PyTorch's logits by %g" % worst)
    how = "min/max" if percentile is None else "percentiles %g and %g" % (100.0 - percentile, percentile)
    rec_attn, rec_pool = ranges(rec_attn, percentile), ranges(rec_pool, percentile)
    kind = "16x8 for mha_forward_q16" if q16 else "int8 for mha_forward_q8"
    text = ["/* Written by examples/digits/quantize.py from digits_model.h: the classifier's two attention",
            "   layers quantised to %s, calibrated on the %d training images" % (kind, len(calib)),
            "   (%s per tensor; weights per row, symmetric). */" % how,
            "#ifndef DIGITS_Q8_H", "#define DIGITS_Q8_H", "#include <stdint.h>",
            quantize_layer(arr, "dg_attn", shapes["dg_attn"], rec_attn, q16),
            quantize_layer(arr, "dg_pool", shapes["dg_pool"], rec_pool, q16), "#endif", ""]
    with open(dst, "w") as f:
        f.write("\n".join(text))
    print("quantize.py: %s from %d calibration images, %s (the float forward within %.2g of PyTorch's logits)"
          % (dst, len(calib), how, worst))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
