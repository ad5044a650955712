#!/usr/bin/python3
"""Writes examples/encoder_weights.h for examples/encoder_block.c: a
torch.nn.TransformerEncoderLayer (d_model 16, 4 heads, feed-forward 32,
post-norm, ReLU) trained for 300 Adam steps on a toy task (seeded), its
attention exported by examples/export_torch.py, its layer norms and
feed-forward as plain arrays, and a test batch with PyTorch's output.
Usage: /usr/bin/python3 examples/make_encoder_weights.py [OUT.h]
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import export_torch  # noqa: E402

torch.manual_seed(2026)
D, HEADS, FF, N = 16, 4, 32, 6
layer = torch.nn.TransformerEncoderLayer(D, HEADS, FF, dropout=0.0, batch_first=True)
opt = torch.optim.Adam(layer.parameters(), lr=3e-3)
for step in range(300):  # learn to reverse the order of a sequence's tokens, roughly
    x = torch.randn(16, N, D)
    loss = ((layer(x) - x.flip(1)) ** 2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
layer.eval()
x = torch.randn(1, N, D)
with torch.no_grad():
    y = layer(x)
out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                          "encoder_weights.h")
with open(out, "w") as f:
    f.write("/* Written by examples/make_encoder_weights.py: a TransformerEncoderLayer(d_model %d, nhead %d,\n"
            "   dim_feedforward %d) trained 300 steps (final loss %.4f), and one sequence of %d tokens\n"
            "   with PyTorch's output. */\n" % (D, HEADS, FF, float(loss), N))
    f.write(export_torch.header_text(layer.self_attn, "enc_attn"))
    f.write(export_torch.c_arrays({
        "ff1_w": layer.linear1.weight, "ff1_b": layer.linear1.bias,   # [FF][D], [FF]
        "ff2_w": layer.linear2.weight, "ff2_b": layer.linear2.bias,   # [D][FF], [D]
        "ln1_w": layer.norm1.weight, "ln1_b": layer.norm1.bias,
        "ln2_w": layer.norm2.weight, "ln2_b": layer.norm2.bias,
        "x": x, "y_torch": y}, "enc_") + "\n")
    f.write("#define ENC_D %d\n#define ENC_FF %d\n#define ENC_N %d\n#define ENC_LN_EPS %.9gf\n" % (
        D, FF, N, layer.norm1.eps))
