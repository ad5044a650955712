#!/usr/bin/python3
"""Exports a PyTorch attention layer's weights as a C header for mha.h.

As a program:
    python3 examples/export_torch.py MODEL.pt NAME OUT.h [--attr PATH] [--heads H]
MODEL.pt is what torch.save wrote: a torch.nn.MultiheadAttention, a module
holding one (--attr self_attn for a TransformerEncoderLayer, --attr
multihead_attn for a TransformerDecoderLayer's cross-attention, any dotted
path such as encoder.layers.0.self_attn), or a state_dict of either (the
attention's in_proj_weight, or q_proj_weight, k_proj_weight, v_proj_weight,
then in_proj_bias, out_proj.weight, out_proj.bias, under --attr's prefix
when it is a whole model's; --heads H is then required: a state_dict does
not hold it). A state_dict loads with weights_only=True (PyTorch 2.6's
default); a whole module needs weights_only=False, which the exporter then
uses and says so (load only files you trust). Every failure is one line on
stderr and exit status 1.

As a module:
    import export_torch
    export_torch.write_header(layer.self_attn, "enc", "enc_attn.h")
    export_torch.header_text(mha, "name")        # the same text, as a string
    export_torch.c_arrays({"ln1_w": tensor, ...})  # any further tensors, for your own code
    layer = export_torch.GeneralAttention(heads, d_q, d_k, d_v, p_qk, p_v, p_o, kv_heads)
    export_torch.general_header_text(layer, "pool")  # mha.h's general form: train it, export it

The header holds, for NAME:
    static const float NAME_w_q[...], NAME_b_q[...], ... NAME_w_o[...], NAME_b_o[...];
    static const mha_shape NAME_shape = {...};   (heads, d_q = E, d_k = kdim, ...)
    static const mha_weights NAME_weights = {...};
ready for mha_forward(&NAME_shape, &NAME_weights, ...). The weights are
stored as PyTorch stores them (Linear's [out][in]), which is mha.h's layout.
Layers that mha.h cannot express are refused with a message: add_bias_kv,
add_zero_attn. Dropout is not exported (mha.h computes inference).
"""
import argparse
import os
import sys

import torch

__all__ = ["attention_tensors", "header_text", "write_header", "c_arrays", "GeneralAttention", "general_header_text"]


def _f(x, digits=9):
    s = "%.*g" % (digits, float(x))
    if not any(c in s for c in ".en"):
        s += ".0"
    return s + "f"


def c_arrays(tensors, prefix="", digits=9):
    """C definitions `static const float PREFIXname[count] = {...};` for a dict of tensors, each
    value with `digits` significant digits (9: every float exactly)."""
    out = []
    for name, t in tensors.items():
        vals = t.detach().to(torch.float32).reshape(-1).tolist()
        rows = [", ".join(_f(v, digits) for v in vals[i:i + 8]) for i in range(0, len(vals), 8)]
        out.append("static const float %s%s[%d] = {\n    %s\n};" % (prefix, name, len(vals), ",\n    ".join(rows)))
    return "\n".join(out)


def _from_state_dict(sd, heads):
    if heads is None:
        raise ValueError("a state_dict does not hold the number of heads: give heads (--heads)")
    if "bias_k" in sd or "bias_v" in sd:
        raise ValueError("add_bias_kv=True is not supported by mha.h: it appends a learned key and value "
                         "to every sequence; retrain without it")
    if "in_proj_weight" in sd and sd["in_proj_weight"] is not None:
        w = sd["in_proj_weight"]
        e = w.shape[0] // 3
        wq, wk, wv = w[:e], w[e:2 * e], w[2 * e:]
    else:
        wq, wk, wv = sd["q_proj_weight"], sd["k_proj_weight"], sd["v_proj_weight"]
        e = wq.shape[0]
    b = sd.get("in_proj_bias")
    bq, bk, bv = (None, None, None) if b is None else (b[:e], b[e:2 * e], b[2 * e:])
    wo, bo = sd["out_proj.weight"], sd.get("out_proj.bias")
    if e % heads:
        raise ValueError("embed_dim %d is not a multiple of heads %d" % (e, heads))
    p = e // heads
    shape = dict(heads=heads, d_q=wq.shape[1], d_k=wk.shape[1], d_v=wv.shape[1], p=p, p_o=wo.shape[0])
    return shape, dict(w_q=wq, b_q=bq, w_k=wk, b_k=bk, w_v=wv, b_v=bv, w_o=wo, b_o=bo)


def attention_tensors(layer, heads=None):
    """(shape dict, weight dict) of a MultiheadAttention, or of its state_dict (then heads is needed)."""
    if isinstance(layer, torch.nn.MultiheadAttention):
        if layer.bias_k is not None or layer.bias_v is not None:
            raise ValueError("add_bias_kv=True is not supported by mha.h: it appends a learned key and value "
                             "to every sequence; retrain without it")
        if layer.add_zero_attn:
            raise ValueError("add_zero_attn=True is not supported by mha.h: it appends a zero key and value "
                             "to every sequence; retrain without it")
        return _from_state_dict(layer.state_dict(), layer.num_heads)
    if isinstance(layer, dict):
        return _from_state_dict(layer, heads)
    raise TypeError("expected a torch.nn.MultiheadAttention or its state_dict, got %s" % type(layer).__name__)


_WEIGHTS = ("w_q", "b_q", "w_k", "b_k", "w_v", "b_v", "w_o", "b_o")


def _header(name, what, z, w, digits):
    """The header text for weights w (name -> tensor or None) of the sizes z: the arrays, a
    comment line `what`, NAME_shape and NAME_weights."""
    present = {k: v for k, v in w.items() if v is not None}
    lines = ["/* %s: %s exported from PyTorch by examples/export_torch.py for mha.h. */" % (name, what[0]),
             "#include \"mha.h\"", "", c_arrays(present, name + "_", digits), "", "/* %s */" % what[1]]
    lines.append("static const mha_shape %s_shape = {%d, %d, %d, %d, %d, %d, %d, %d, %d, MHA_SCORE_DOT, 0, 0.0f, "
                 "0, MHA_ROPE_HALF, 0.0f, 0, 0.0f};" % (
        name, z["heads"], z["kv_heads"], z["d_q"], z["d_k"], z["d_v"], z["p_q"], z["p_k"], z["p_v"], z["p_o"]))
    ptr = ["%s_%s" % (name, k) if w[k] is not None else "NULL" for k in _WEIGHTS]
    lines.append("static const mha_weights %s_weights = {%s, NULL, NULL, NULL, NULL, NULL, MHA_F32};" % (name, ", ".join(ptr)))
    return "\n".join(lines) + "\n"


def header_text(layer, name, heads=None):
    """The header for one attention layer, as a string."""
    shape, w = attention_tensors(layer, heads)
    p = shape["p"]
    z = dict(heads=shape["heads"], kv_heads=0, d_q=shape["d_q"], d_k=shape["d_k"], d_v=shape["d_v"], p_q=p, p_k=p,
             p_v=p, p_o=shape["p_o"])
    what = ("an attention layer", "heads %d, d_q %d, d_k %d, d_v %d, p_q = p_k = p_v %d, p_o %d, scaled dot product"
            % (z["heads"], z["d_q"], z["d_k"], z["d_v"], p, z["p_o"]))
    return _header(name, what, z, w, 9)


class GeneralAttention(torch.nn.Module):
    """The general form that mha.h computes, as a PyTorch module (scaled dot product scoring):
    every size independent, grouped-query attention (kv_heads divides heads), weights in mha.h's
    layout ([out][in], heads side by side). forward(q [B][n][d_q], k [B][m][d_k], v [B][m][d_v],
    keep=None [n][m] bool or [B][n][m]) -> [B][n][p_o]. A row with every key masked gives
    b_o, as in mha.h (PyTorch's own modules give NaN there)."""

    def __init__(self, heads, d_q, d_k, d_v, p_qk, p_v, p_o, kv_heads=None):
        super().__init__()
        kv = kv_heads or heads
        if heads % kv:
            raise ValueError("kv_heads %d does not divide heads %d" % (kv, heads))
        self.heads, self.kv_heads, self.p_qk, self.p_v = heads, kv, p_qk, p_v
        self.sizes = dict(heads=heads, kv_heads=kv, d_q=d_q, d_k=d_k, d_v=d_v, p_q=p_qk, p_k=p_qk, p_v=p_v,
                          p_o=p_o)

        def lin(o, i):
            return torch.nn.Parameter(torch.empty(o, i).uniform_(-1, 1) * (3.0 / i) ** 0.5)
        self.w_q, self.b_q = lin(heads * p_qk, d_q), torch.nn.Parameter(torch.zeros(heads * p_qk))
        self.w_k, self.b_k = lin(kv * p_qk, d_k), torch.nn.Parameter(torch.zeros(kv * p_qk))
        self.w_v, self.b_v = lin(kv * p_v, d_v), torch.nn.Parameter(torch.zeros(kv * p_v))
        self.w_o, self.b_o = lin(p_o, heads * p_v), torch.nn.Parameter(torch.zeros(p_o))

    def forward(self, q, k, v, keep=None):
        B, n, m, h, g = q.shape[0], q.shape[1], k.shape[1], self.heads, self.kv_heads
        qh = (q @ self.w_q.T + self.b_q).view(B, n, h, self.p_qk).transpose(1, 2)      # [B][h][n][p]
        kh = (k @ self.w_k.T + self.b_k).view(B, m, g, self.p_qk).transpose(1, 2)      # [B][kv][m][p]
        vh = (v @ self.w_v.T + self.b_v).view(B, m, g, self.p_v).transpose(1, 2)
        kh = kh.repeat_interleave(h // g, dim=1)                                        # head i: kv head i / (h/kv)
        vh = vh.repeat_interleave(h // g, dim=1)
        s = (qh @ kh.transpose(-1, -2)) / self.p_qk ** 0.5                              # [B][h][n][m]
        if keep is not None:
            kp = keep if keep.dim() == 2 else keep[:, None]
            s = s.masked_fill(~kp, float("-inf"))
        a = torch.softmax(s, dim=-1)
        if keep is not None and not bool(kp.any(-1).all()):
            a = torch.nan_to_num(a, nan=0.0)                                            # fully masked rows: 0
        o = (a @ vh).transpose(1, 2).reshape(B, n, h * self.p_v)
        return o @ self.w_o.T + self.b_o


def general_header_text(layer, name, digits=9):
    """The header for a GeneralAttention (shape and weights, as header_text writes them), as a string;
    `digits` significant digits a value (9: every float exactly)."""
    z = layer.sizes
    what = ("a general-form attention", "heads %d, kv_heads %d, d_q %d, d_k %d, d_v %d, p_q = p_k %d, p_v %d, p_o %d, "
            "scaled dot product" % (z["heads"], z["kv_heads"], z["d_q"], z["d_k"], z["d_v"], z["p_q"], z["p_v"],
                                    z["p_o"]))
    return _header(name, what, z, {k: getattr(layer, k) for k in _WEIGHTS}, digits)


def write_header(layer, name, path, heads=None):
    text = header_text(layer, name, heads)
    with open(path, "w") as f:
        f.write(text)


_ATTN_KEYS = ("in_proj_weight", "q_proj_weight")


def _attention_prefixes(sd):
    """The prefixes under which a state_dict holds attention layers ('' for one at the top)."""
    out = set()
    for k in sd:
        for a in _ATTN_KEYS:
            if k == a or k.endswith("." + a):
                out.add(k[:-len(a)].rstrip("."))
    return sorted(out)


def load(path):
    """torch.load of a save on the CPU: weights_only=True first (all a state_dict needs), and
    weights_only=False, said on stderr, for a whole module (torch without weights_only: a plain load)."""
    if not os.path.isfile(path):
        raise ValueError("%s: no such file" % path)
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except TypeError:
        return torch.load(path, map_location="cpu")
    except Exception:  # pickled classes: a whole module
        print("export_torch: %s holds a whole module: loaded with weights_only=False (load only files you trust)"
              % path, file=sys.stderr)
        return torch.load(path, map_location="cpu", weights_only=False)


def select(obj, attr=""):
    """The attention that --attr names in what torch.save wrote: an attribute path in a module, a
    key prefix in a state_dict. Raises ValueError, naming the attention layers there, when attr
    does not lead to one."""
    if isinstance(obj, dict):
        prefix = attr + "." if attr else ""
        sd = {k[len(prefix):]: v for k, v in obj.items() if k.startswith(prefix)}
        if not any(k in sd for k in _ATTN_KEYS):
            found = _attention_prefixes(obj)
            raise ValueError("the state_dict holds no attention layer %s%s" % (
                "under '%s'" % attr if attr else "at its top level",
                (": name one with --attr (%s)" % ", ".join(f or "''" for f in found)) if found else ""))
        return sd
    for part in filter(None, attr.split(".")):
        if not hasattr(obj, part):
            raise ValueError("%s has no attribute '%s' (--attr %s)" % (type(obj).__name__, part, attr))
        obj = getattr(obj, part)
    if isinstance(obj, torch.nn.Module) and not isinstance(obj, torch.nn.MultiheadAttention):
        found = [n for n, mod in obj.named_modules() if isinstance(mod, torch.nn.MultiheadAttention)]
        raise ValueError("%s is not a MultiheadAttention%s" % (
            type(obj).__name__, (": name one with --attr (%s)" % ", ".join(
                ".".join(filter(None, (attr, f))) for f in found)) if found else ""))
    return obj


def main(argv):
    ap = argparse.ArgumentParser(description="Export a PyTorch attention layer as a C header for mha.h.")
    ap.add_argument("model", help="torch.save file: a MultiheadAttention, a module holding one, or a state_dict")
    ap.add_argument("name", help="C name prefix")
    ap.add_argument("out", help="header to write")
    ap.add_argument("--attr", default="", help="dotted path to the attention inside the module (e.g. self_attn)")
    ap.add_argument("--heads", type=int, default=None, help="number of heads (a state_dict does not hold it)")
    a = ap.parse_args(argv)
    try:
        write_header(select(load(a.model), a.attr), a.name, a.out, a.heads)
    except Exception as e:  # one line, never a traceback
        print("export_torch: %s" % (str(e).splitlines() or [type(e).__name__])[0], file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
