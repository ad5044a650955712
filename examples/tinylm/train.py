#!/usr/bin/python3
"""Trains the tiny character language model that examples/tinylm/tinylm.c decodes through
mha.h's KV cache, and writes
  examples/tinylm/tinylm_model.h     its weights and vocabulary (the committed model);
  examples/tinylm/tinylm_expected.h  PyTorch's greedy continuations of three prompts, 200
                                     characters each, and its logits at every step: with a causal
                                     mask, and with a sliding window of 32 positions (the same
                                     weights under a banded mask).

Data: the GPL-3 text that every Debian system carries (/usr/share/common-licenses/GPL-3,
package base-files), characters as tokens.
Model: decoder only, d = 48, 2 layers of pre-norm blocks (mha.h's general form as
export_torch.GeneralAttention: 4 heads of 12, the second layer with 2 kv heads (grouped-query);
a feed-forward of 96 with ReLU), a learned position embedding for 256 positions, a final
layer norm and a linear head. Adam, seeded, one thread, 1500 steps of 16 x 256 characters
(three to nine minutes on this project's machines; train.py prints its time). The exported
weights are rounded to 7 significant digits, and the expected outputs are computed from the
rounded weights.

Usage: /usr/bin/python3 examples/tinylm/train.py [DIR]        train, write both headers into DIR
       /usr/bin/python3 examples/tinylm/train.py --threads N DIR
                                      train on N threads (make models: one, as for the committed
                                      model; N > 1 rounds otherwise, and was slower here)
       /usr/bin/python3 examples/tinylm/train.py --expected MODEL.h OUT.h
                                      only the expected outputs, for the weights in MODEL.h
Prints the loss, the time taken and the continuations.
"""
import os
import re
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
import export_torch  # noqa: E402

TEXT = "/usr/share/common-licenses/GPL-3"
D, HEADS, P, FF, KV, CTX = 48, 4, 12, 96, (4, 2), 256
STEPS, BATCH, T = 1500, 16, 256
WINDOW, GENERATE = 32, 200
DIGITS = 7  # significant digits of the exported weights: the expected outputs use these values too
PROMPTS = ["This program is free software", "The GNU General Public License", "you may"]
NAMES = ["emb", "pos"] + ["l%d_%s" % (k, n) for k in range(2) for n in
                   ("ln1_w", "ln1_b", "ln2_w", "ln2_b", "ff1_w", "ff1_b", "ff2_w", "ff2_b")] + \
    ["lnf_w", "lnf_b", "head_w", "head_b"]


class Block(torch.nn.Module):
    def __init__(self, kv):
        super().__init__()
        self.ln1 = torch.nn.LayerNorm(D)
        self.attn = export_torch.GeneralAttention(HEADS, D, D, D, P, P, D, kv_heads=kv)
        self.ln2 = torch.nn.LayerNorm(D)
        self.ff1 = torch.nn.Linear(D, FF)
        self.ff2 = torch.nn.Linear(FF, D)

    def forward(self, x, keep):
        a = self.ln1(x)
        x = x + self.attn(a, a, a, keep)
        return x + self.ff2(torch.relu(self.ff1(self.ln2(x))))


class TinyLM(torch.nn.Module):
    def __init__(self, vocab):
        super().__init__()
        self.emb = torch.nn.Embedding(vocab, D)
        self.pos = torch.nn.Parameter(torch.randn(CTX, D) * 0.02)
        self.blocks = torch.nn.ModuleList([Block(kv) for kv in KV])
        self.lnf = torch.nn.LayerNorm(D)
        self.head = torch.nn.Linear(D, vocab)

    def forward(self, idx, keep):  # idx [B][n] -> logits [B][n][vocab]
        x = self.emb(idx) + self.pos[:idx.shape[1]]
        for b in self.blocks:
            x = b(x, keep)
        return self.head(self.lnf(x))

    def tensors(self):
        """Every tensor but the attentions', by the C names of NAMES."""
        t = {"emb": self.emb.weight, "pos": self.pos, "lnf_w": self.lnf.weight, "lnf_b": self.lnf.bias,
             "head_w": self.head.weight, "head_b": self.head.bias}
        for k, b in enumerate(self.blocks):
            for n, v in (("ln1_w", b.ln1.weight), ("ln1_b", b.ln1.bias), ("ln2_w", b.ln2.weight),
                         ("ln2_b", b.ln2.bias), ("ff1_w", b.ff1.weight), ("ff1_b", b.ff1.bias),
                         ("ff2_w", b.ff2.weight), ("ff2_b", b.ff2.bias)):
                t["l%d_%s" % (k, n)] = v
        return t


def keep_mask(n, window):
    i = torch.arange(n)[:, None]
    j = torch.arange(n)[None, :]
    k = j <= i
    return k & (j > i - window) if window else k


def generate(model, prompt_ids, window):
    """Greedy continuation, every step recomputed from the whole sequence (no cache): the
    characters and the logits of each step."""
    ids, steps = list(prompt_ids), []
    with torch.no_grad():
        for _ in range(GENERATE):
            x = torch.tensor([ids])
            logits = model(x, keep_mask(len(ids), window))[0, -1]
            steps.append(logits.clone())
            ids.append(int(logits.argmax()))
    return ids[len(prompt_ids):], torch.stack(steps)


def c_string(s):
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def read_header(path):
    """The float arrays and the vocabulary of a tinylm_model.h."""
    text = open(path).read()
    arrays = {m.group(1): torch.tensor([float(v.strip().rstrip("f")) for v in m.group(2).replace("\n", " ").split(",")
                                        if v.strip()])
              for m in re.finditer(r"static const float (\w+)\[\d+\] = \{([^}]*)\};", text)}
    vocab = re.search(r'static const char tl_vocab\[\] = "((?:[^"\\]|\\.)*)";', text).group(1)
    vocab = vocab.encode().decode("unicode_escape")
    return arrays, vocab


def load(path):
    arrays, vocab = read_header(path)
    model = TinyLM(len(vocab))
    with torch.no_grad():
        for name, t in model.tensors().items():
            t.copy_(arrays["tl_" + name].view_as(t))
        for k, b in enumerate(model.blocks):
            for w in ("w_q", "b_q", "w_k", "b_k", "w_v", "b_v", "w_o", "b_o"):
                getattr(b.attn, w).copy_(arrays["tl_attn%d_%s" % (k, w)].view_as(getattr(b.attn, w)))
    model.eval()
    return model, vocab


def write_expected(model, vocab, out):
    index = {c: i for i, c in enumerate(vocab)}
    runs = []
    for window in (0, WINDOW):
        for prompt in PROMPTS:
            ids, logits = generate(model, [index[c] for c in prompt], window)
            text = "".join(vocab[i] for i in ids)
            top2 = logits.topk(2, dim=1).values
            margin = float((top2[:, 0] - top2[:, 1]).min())
            runs.append((window, prompt, text, logits, margin))
            print("tinylm (%s): %r -> %r (smallest margin between the two best logits %.3g)"
                  % ("window %d" % window if window else "causal", prompt, text, margin))
    with open(out, "w") as f:
        f.write("/* Written by examples/tinylm/train.py: PyTorch's greedy continuations (%d characters) of\n"
                "   the prompts with the weights of tinylm_model.h, recomputed from the whole sequence at\n"
                "   every step, and the logits of each step: causal, then a window of %d positions. */\n"
                % (GENERATE, WINDOW))
        f.write("#define TL_RUNS %d\n#define TL_GENERATE %d\n#define TL_WINDOW %d\n" % (len(runs), GENERATE, WINDOW))
        f.write("static const int tl_run_window[TL_RUNS] = {%s};\n" % ", ".join(str(r[0]) for r in runs))
        f.write("static const char *const tl_prompt[TL_RUNS] = {%s};\n" % ", ".join(c_string(r[1]) for r in runs))
        f.write("static const char *const tl_torch_text[TL_RUNS] = {\n    %s};\n"
                % ",\n    ".join(c_string(r[2]) for r in runs))
        f.write("static const float tl_torch_margin[TL_RUNS] = {%s};\n" % ", ".join("%.3gf" % r[4] for r in runs))
        f.write("/* [run][step][vocab], 8 significant digits */\n")
        f.write(export_torch.c_arrays({"torch_logits": torch.stack([r[3] for r in runs])}, "tl_", digits=8) + "\n")


def train(out_dir, threads=1):
    text = open(TEXT).read()
    vocab = "".join(sorted(set(text)))
    data = torch.tensor([vocab.index(c) for c in text])
    torch.manual_seed(2026)
    torch.set_num_threads(threads)
    model = TinyLM(len(vocab))
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=1e-2, total_steps=STEPS)
    keep = keep_mask(T, 0)
    t0 = time.time()
    for step in range(STEPS):
        start = torch.randint(0, len(data) - T - 1, (BATCH,))
        x = torch.stack([data[s:s + T] for s in start])
        y = torch.stack([data[s + 1:s + T + 1] for s in start])
        loss = torch.nn.functional.cross_entropy(model(x, keep).reshape(-1, len(vocab)), y.reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        if (step + 1) % 250 == 0:
            print("tinylm: step %d of %d, loss %.3f" % (step + 1, STEPS, float(loss)), file=sys.stderr)
    seconds = time.time() - t0
    model.eval()
    with torch.no_grad():
        x = data[:4096].view(16, T)
        full = float(torch.nn.functional.cross_entropy(model(x, keep_mask(T, 0)).reshape(-1, len(vocab)),
                                                       data[1:4097]))
    print("tinylm: trained in %.1f s (%d steps of %d x %d characters); loss %.3f nats per character on the"
          " first 4096" % (seconds, STEPS, BATCH, T, full))
    path = os.path.join(out_dir, "tinylm_model.h")
    with open(path, "w") as f:
        f.write("/* Written by examples/tinylm/train.py: a character language model trained on the GPL-3 text\n"
                "   (%d steps, loss %.3f nats per character on its first 4096 characters), its weights\n"
                "   rounded to %d significant digits. */\n" % (STEPS, full, DIGITS))
        f.write("#ifndef TINYLM_MODEL_H\n#define TINYLM_MODEL_H\n")
        for k, b in enumerate(model.blocks):
            f.write(export_torch.general_header_text(b.attn, "tl_attn%d" % k, DIGITS))
        f.write(export_torch.c_arrays(model.tensors(), "tl_", DIGITS) + "\n")
        f.write("static const char tl_vocab[] = %s;\n" % c_string(vocab))
        f.write("#define TL_VOCAB %d\n#define TL_D %d\n#define TL_FF %d\n#define TL_LAYERS %d\n"
                "#define TL_CTX %d\n#define TL_LN_EPS %.9gf\n#endif\n" % (len(vocab), D, FF, len(KV), CTX, model.lnf.eps))
    model, vocab = load(path)  # the expected outputs from the weights as the header holds them
    write_expected(model, vocab, os.path.join(out_dir, "tinylm_expected.h"))


def main(argv):
    if argv[:1] == ["--expected"]:
        model, vocab = load(argv[1])
        write_expected(model, vocab, argv[2])
        return 0
    threads = 1
    if argv[:1] == ["--threads"]:
        threads, argv = int(argv[1]), argv[2:]
    train(argv[0] if argv else HERE, threads)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
