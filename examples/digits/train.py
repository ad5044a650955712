#!/usr/bin/python3
"""Trains the digit classifier that examples/digits/digits.c runs through mha.h, and writes
examples/digits/digits_model.h: its weights, every image of the data set, and PyTorch's logits
for each of them.

Data: scikit-learn's bundled load_digits (Debian python3-sklearn; 1797 images of 8x8 pixels
0..16, shipped inside the package). A seeded permutation splits it into 1437 training and 360
test images.

Model: each image is a sequence of 8 row tokens (8 pixels / 16 each), embedded to d = 32 with
a learned position embedding; one pre-norm encoder block (torch.nn.MultiheadAttention, 4 heads,
layer norm, a feed-forward of 64 with ReLU); then attention pooling in mha.h's general form
(export_torch.GeneralAttention: a learned query, 2 heads, p_q = p_k = 8, p_v = 16, p_o = 24),
ReLU and a linear classifier. Adam, seeded, one thread.

Usage: /usr/bin/python3 examples/digits/train.py [OUT.h]     (default: next to this script)
Prints the accuracies and the time taken.
"""
import os
import sys
import time

import torch
from sklearn.datasets import load_digits

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
import export_torch  # noqa: E402

D, HEADS, FF, N = 32, 4, 64, 8
POOL_HEADS, POOL_P, POOL_PV, POOL_PO = 2, 8, 16, 24
EPOCHS, BATCH = 60, 64


class Digits(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Linear(8, D)
        self.pos = torch.nn.Parameter(torch.randn(N, D) * 0.1)
        self.ln1 = torch.nn.LayerNorm(D)
        self.attn = torch.nn.MultiheadAttention(D, HEADS, batch_first=True)
        self.ln2 = torch.nn.LayerNorm(D)
        self.ff1 = torch.nn.Linear(D, FF)
        self.ff2 = torch.nn.Linear(FF, D)
        self.ln3 = torch.nn.LayerNorm(D)
        self.query = torch.nn.Parameter(torch.randn(1, D) * 0.5)
        self.pool = export_torch.GeneralAttention(POOL_HEADS, D, D, D, POOL_P, POOL_PV, POOL_PO)
        self.cls = torch.nn.Linear(POOL_PO, 10)

    def forward(self, x):  # x [B][8][8] -> logits [B][10]
        t = self.embed(x) + self.pos
        a = self.ln1(t)
        t = t + self.attn(a, a, a, need_weights=False)[0]
        t = t + self.ff2(torch.relu(self.ff1(self.ln2(t))))
        u = self.ln3(t)
        p = self.pool(self.query.expand(x.shape[0], 1, D), u, u)[:, 0]
        return self.cls(torch.relu(p))


def main(argv):
    out = argv[0] if argv else os.path.join(HERE, "digits_model.h")
    torch.manual_seed(2026)
    torch.set_num_threads(1)
    data = load_digits()
    x = torch.tensor(data.images, dtype=torch.float32) / 16.0
    y = torch.tensor(data.target)
    perm = torch.randperm(len(y), generator=torch.Generator().manual_seed(1797))
    train, test = perm[:1437], perm[1437:]
    model = Digits()
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, EPOCHS)
    t0 = time.time()
    for epoch in range(EPOCHS):
        order = train[torch.randperm(len(train))]
        for k in range(0, len(order), BATCH):
            idx = order[k:k + BATCH]
            loss = torch.nn.functional.cross_entropy(model(x[idx]), y[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
        sched.step()
        if (epoch + 1) % 10 == 0:
            print("digits: epoch %d of %d, loss %.4f" % (epoch + 1, EPOCHS, float(loss)), file=sys.stderr)
    seconds = time.time() - t0
    model.eval()
    with torch.no_grad():
        logits = model(x)
    pred = logits.argmax(1)
    acc_test = float((pred[test] == y[test]).float().mean())
    acc_train = float((pred[train] == y[train]).float().mean())
    print("digits: trained in %.1f s; accuracy %.2f %% on the 360 test images, %.2f %% on the 1437 training images"
          % (seconds, 100 * acc_test, 100 * acc_train))
    split = ["r"] * len(y)
    for i in test.tolist():
        split[i] = "t"
    pixels = ",\n    ".join('"%s"' % "".join(chr(ord("a") + int(v)) for v in img.reshape(-1).tolist())
                           for img in data.images)
    with open(out, "w") as f:
        f.write("/* Written by examples/digits/train.py: a digit classifier trained on scikit-learn's 8x8 digits\n"
                "   (%d epochs, test accuracy %.2f %%), every image of the data set, and PyTorch's logits. */\n"
                % (EPOCHS, 100 * acc_test))
        f.write("#ifndef DIGITS_MODEL_H\n#define DIGITS_MODEL_H\n")
        f.write(export_torch.header_text(model.attn, "dg_attn"))
        f.write(export_torch.general_header_text(model.pool, "dg_pool"))
        f.write(export_torch.c_arrays({
            "embed_w": model.embed.weight, "embed_b": model.embed.bias, "pos": model.pos,   # [D][8], [D], [N][D]
            "ln1_w": model.ln1.weight, "ln1_b": model.ln1.bias, "ln2_w": model.ln2.weight, "ln2_b": model.ln2.bias,
            "ff1_w": model.ff1.weight, "ff1_b": model.ff1.bias,                              # [FF][D], [FF]
            "ff2_w": model.ff2.weight, "ff2_b": model.ff2.bias,                              # [D][FF], [D]
            "ln3_w": model.ln3.weight, "ln3_b": model.ln3.bias, "query": model.query,
            "cls_w": model.cls.weight, "cls_b": model.cls.bias,                              # [10][p_o], [10]
            "logits_torch": logits}, "dg_") + "\n")
        f.write("/* image i: 64 pixels row by row, 'a' + value (0..16) */\n")
        f.write("static const char dg_pixels[%d][65] = {\n    %s\n};\n" % (len(y), pixels))
        f.write("static const char dg_labels[] = \"%s\";\n" % "".join(str(int(v)) for v in y.tolist()))
        f.write("static const char dg_split[] = \"%s\"; /* t: test image, r: training image */\n" % "".join(split))
        f.write("#define DG_IMAGES %d\n#define DG_D %d\n#define DG_FF %d\n#define DG_N %d\n#define DG_PO %d\n"
                "#define DG_LN_EPS %.9gf\n#define DG_TORCH_TEST_ACCURACY %.4f\n#endif\n"
                % (len(y), D, FF, N, POOL_PO, model.ln1.eps, 100 * acc_test))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
