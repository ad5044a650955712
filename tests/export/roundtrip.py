#!/usr/bin/python3
"""Round trip of examples/export_torch.py (`make export-test`, python3-torch):
trains two attention layers for a few hundred Adam steps (so that the
weights are not their initialisation), exports them, runs them in C through
mha.h (tests/export/roundtrip.c) and compares with PyTorch's own outputs.

Writes BUILD/roundtrip_data.h, then builds and runs the C side, which prints
"N passed, M failed". What it backs (docs, "Coming from PyTorch or d2l"):
  - separate q/k/v weights with kdim != vdim != E, every bias; the packed
    in_proj_weight with its in_proj_bias chunks (exported from a state_dict
    by the command line, --heads);
  - key_padding_mask (True = padding, at the end) -> valid_lens (int32);
  - a 2-D bool attn_mask (True = masked), broadcast over the batch -> keep
    (nonzero = may attend) [batch][n][m];
  - is_causal / a triangular attn_mask -> mask.causal = 1;
  - attention weights per head: need_weights=True, average_attn_weights=False
    equals mha.h's attn [batch][heads][n][m];
  - a query whose keys are all masked: PyTorch gives NaN, mha.h gives b_o
    (zero weights), d2l's masked_softmax gives uniform weights;
  - add_bias_kv and add_zero_attn are refused with a message;
  - every save form through the command line (a bare module, its
    state_dict, a whole TransformerEncoderLayer and TransformerDecoderLayer
    with --attr, a whole model's state_dict with --attr
    encoder.layers.0.self_attn): the header of the module API for that
    attention, byte for byte; and mistakes (no --attr, a wrong one, no
    --heads, a missing file) one line on stderr, exit status 1, no traceback.
Usage: roundtrip.py BUILD_DIR [CC]
"""
import os
import subprocess
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "examples"))
import export_torch  # noqa: E402

torch.manual_seed(7)
B, N, M = 2, 5, 7


def train(mod, steps, causal=False):
    """A few hundred Adam steps towards a fixed random map, so the weights move."""
    opt = torch.optim.Adam(mod.parameters(), lr=3e-3)
    g = torch.Generator().manual_seed(1)
    target = torch.nn.Linear(mod.embed_dim, mod.embed_dim)
    for _ in range(steps):
        q = torch.randn(8, N, mod.embed_dim, generator=g)
        k = torch.randn(8, M if not causal else N, mod.kdim, generator=g)
        v = torch.randn(8, M if not causal else N, mod.vdim, generator=g)
        kw = {"attn_mask": torch.triu(torch.ones(N, N, dtype=torch.bool), 1)} if causal else {}
        y, _ = mod(q, k, v, need_weights=False, **kw)
        loss = ((y - torch.tanh(target(q))) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    return mod.eval()


def lines_int(name, vals):
    return "static const int32_t %s[%d] = {%s};" % (name, len(vals), ", ".join(str(int(x)) for x in vals))


def main():
    build = sys.argv[1]
    cc = sys.argv[2] if len(sys.argv) > 2 else "cc"
    os.makedirs(build, exist_ok=True)
    out = []
    passed = failed = 0

    # A: separate q/k/v weights (kdim 12, vdim 10), biases, trained
    a = torch.nn.MultiheadAttention(16, 4, kdim=12, vdim=10, batch_first=True)
    w0 = a.q_proj_weight.detach().clone()
    a = train(a, 300)
    moved = float((a.q_proj_weight - w0).abs().max())
    out.append(export_torch.header_text(a, "sep").replace('#include "mha.h"\n', ""))
    q = torch.randn(B, N, 16)
    k = torch.randn(B, M, 12)
    v = torch.randn(B, M, 10)
    lens = torch.tensor([7, 4])  # key_padding_mask: the last keys of sequence 1 are padding
    kpm = torch.arange(M)[None, :] >= lens[:, None]
    am = torch.rand(N, M) < 0.3  # True = masked; no row all masked
    am[:, 0] = False
    with torch.no_grad():
        y_pad, w_pad = a(q, k, v, key_padding_mask=kpm, need_weights=True, average_attn_weights=False)
        y_am, _ = a(q, k, v, attn_mask=am, need_weights=False)
        lens0 = torch.tensor([0, 7])  # sequence 0: every key masked
        y_nan, _ = a(q, k, v, key_padding_mask=torch.arange(M)[None, :] >= lens0[:, None], need_weights=False)
    out.append(export_torch.c_arrays({"q": q, "k": k, "v": v, "y_pad": y_pad, "w_pad": w_pad, "y_am": y_am}, "a_"))
    out.append(lines_int("a_lens", lens.tolist()))
    keep = (~am).to(torch.int32)[None].expand(B, N, M).reshape(-1).tolist()  # bool polarity, broadcast
    out.append("static const uint8_t a_keep[%d] = {%s};" % (len(keep), ", ".join(str(x) for x in keep)))
    torch_nan = bool(torch.isnan(y_nan[0]).all())

    # B: packed in_proj_weight (kdim = vdim = E), causal; exported by the command line from a state_dict
    bm = train(torch.nn.MultiheadAttention(16, 2, batch_first=True), 300, causal=True)
    sd_path = os.path.join(build, "packed_state.pt")
    torch.save(bm.state_dict(), sd_path)
    hdr = os.path.join(build, "roundtrip_packed.h")
    r = subprocess.run([sys.executable, os.path.join(HERE, "..", "..", "examples", "export_torch.py"), sd_path,
                        "pk", hdr, "--heads", "2"])
    ok = r.returncode == 0
    print("export: command line, state_dict with --heads 2:", "ok" if ok else "FAILED")
    passed, failed = passed + ok, failed + (not ok)
    x = torch.randn(B, N, 16)
    with torch.no_grad():
        y_c, _ = bm(x, x, x, attn_mask=torch.triu(torch.ones(N, N, dtype=torch.bool), 1), need_weights=False)
    out.append(export_torch.c_arrays({"x": x, "y_causal": y_c}, "b_"))

    # every save form through the command line: the module API's header for that attention
    def cli(path, *extra):
        r = subprocess.run([sys.executable, os.path.join(HERE, "..", "..", "examples", "export_torch.py"), path,
                            "x", os.path.join(build, "form.h")] + list(extra), capture_output=True, text=True)
        text = open(os.path.join(build, "form.h")).read() if r.returncode == 0 else None
        return r.returncode, text, r.stderr

    enc = torch.nn.TransformerEncoderLayer(16, 2, dim_feedforward=32, batch_first=True)
    dec = torch.nn.TransformerDecoderLayer(16, 4, dim_feedforward=32, batch_first=True)
    model = torch.nn.TransformerEncoder(torch.nn.TransformerEncoderLayer(16, 2, dim_feedforward=32), 2)
    holder = torch.nn.Module()
    holder.encoder = model
    forms = (("a bare MultiheadAttention", a, False, [], a),
             ("its state_dict, --heads 4", a, True, ["--heads", "4"], a),
             ("a whole TransformerEncoderLayer, --attr self_attn", enc, False, ["--attr", "self_attn"], enc.self_attn),
             ("a whole TransformerDecoderLayer, --attr multihead_attn", dec, False, ["--attr", "multihead_attn"],
              dec.multihead_attn),
             ("a whole model's state_dict, --attr encoder.layers.1.self_attn --heads 2", holder, True,
              ["--attr", "encoder.layers.1.self_attn", "--heads", "2"], model.layers[1].self_attn))
    for what, obj, as_sd, extra, attn in forms:
        path = os.path.join(build, "form.pt")
        torch.save(obj.state_dict() if as_sd else obj, path)
        code, text, err = cli(path, *extra)
        ok = code == 0 and text == export_torch.header_text(attn, "x")
        print("export: command line, %s: %s" % (what, "ok" if ok else "FAILED " + err.strip()))
        passed, failed = passed + ok, failed + (not ok)
    mistakes = (("a whole model's state_dict without --attr", holder, True, ["--heads", "2"], "--attr"),
                ("a whole module without --attr", enc, False, [], "self_attn"),
                ("a wrong --attr", enc, False, ["--attr", "self_atn"], "self_atn"),
                ("a state_dict without --heads", a, True, [], "--heads"))
    for what, obj, as_sd, extra, named in mistakes:
        path = os.path.join(build, "form.pt")
        torch.save(obj.state_dict() if as_sd else obj, path)
        code, _, err = cli(path, *extra)
        lines = [x for x in err.splitlines() if not x.endswith("(load only files you trust)")]
        ok = code == 1 and len(lines) == 1 and named in lines[0] and "Traceback" not in err
        print("export: %s: %s" % (what, (lines or ["(nothing)"])[0] if ok else "FAILED: " + err.strip()))
        passed, failed = passed + ok, failed + (not ok)
    code, _, err = cli(os.path.join(build, "no-such.pt"))
    ok = code == 1 and len(err.splitlines()) == 1 and "no such file" in err
    print("export: a missing file:", err.strip() if ok else "FAILED " + err)
    passed, failed = passed + ok, failed + (not ok)

    # refusals
    for kw, what in (({"add_bias_kv": True}, "add_bias_kv"), ({"add_zero_attn": True}, "add_zero_attn")):
        try:
            export_torch.header_text(torch.nn.MultiheadAttention(8, 2, **kw), "x")
            ok = False
        except ValueError as e:
            ok = what in str(e)
            print("export: %s refused: %s" % (what, e))
        passed, failed = passed + ok, failed + (not ok)
    ok = torch_nan
    print("PyTorch: a query whose keys are all masked gives NaN:", ok)
    passed, failed = passed + ok, failed + (not ok)

    with open(os.path.join(build, "roundtrip_data.h"), "w") as f:
        f.write("/* written by tests/export/roundtrip.py; the weights of layer A moved by up to %.3g in training */\n"
                % moved)
        f.write("\n".join(out) + "\n")
    exe = os.path.join(build, "roundtrip")
    r = subprocess.run([cc, "-O2", "-std=c99", "-Wall", "-Wextra", "-Werror", "-I.", "-I" + build,
                        os.path.join(HERE, "roundtrip.c"), "-o", exe, "-lm"])
    if r.returncode != 0:
        print("roundtrip.c does not build")
        failed += 1
    else:
        run = subprocess.run([exe], capture_output=True, text=True)
        print(run.stdout, end="")
        last = [line for line in run.stdout.splitlines() if line.endswith(" failed")]
        if run.returncode != 0 or not last:
            failed += 1
        p, f_ = last[-1].split(" passed, ")
        passed, failed = passed + int(p), failed + int(f_.split()[0])
    print("training moved the weights by up to %.3g (so they are not the initialisation)" % moved)
    print("%d passed, %d failed" % (passed, failed))
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
