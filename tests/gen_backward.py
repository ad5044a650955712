#!/usr/bin/python3
"""Writes gradient vectors for mha_backward as C source, computed with PyTorch
autograd in float64.

Usage: /usr/bin/python3 tests/gen_backward.py [OUT.h]   (default tests/ref_backward.h)
       /usr/bin/python3 tests/gen_backward.py --small [OUT.h]
                        (default tests/ref_backward_small.h: a tiny case that fits
                        the AVR's 8 KiB of RAM beside the forward's, tests/cross/avr_test.c)

For a loss L = sum(d_out * out), the gradients of L with respect to the
inputs, the weights, the biases, the additive weights and the sinks, from
  * torch.nn.MultiheadAttention itself (float64, autograd): packed
    in_proj_weight with a key padding mask, and separate kdim/vdim weights;
  * the float64 composition of tests/gen_vectors.py (reference(), itself
    checked there against nn.MultiheadAttention) for the general form: all
    sizes different, GQA, MQA, additive scoring, every mask kind with a fully
    masked row, RoPE in both pairings (partial, with a causal offset), ALiBi,
    the soft-cap and sinks.
Inputs, weights and d_out are drawn in float32 (the values the C code sees).
"""
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_vectors as G  # noqa: E402  (its rand, make_weights, reference and Writer)

torch.manual_seed(20261203)
F64 = torch.float64
W = G.Writer()
CASES = []
GRADS = ("d_queries", "d_keys", "d_values", "w_q", "b_q", "w_k", "b_k", "w_v", "b_v", "w_o", "b_o",
         "a_q", "a_k", "a_v", "sinks")


def emit(group, name, S, w, q, k, v, mask, d_out, grads):
    """One case: the forward's arguments (as tests/gen_vectors.py emits them), d_out and the gradients."""
    G.W = W  # gen_vectors.emit writes through its module's writer
    G.emit(group, name, S, w, q, k, v, mask, d_out, None)
    case = W.cases.pop()  # "{group, name, shape, batch, n, m, q, k, v, {weights}, {mask}, out, attn}"
    expected = ", ".join(W.floats(grads.get(key)) for key in GRADS)
    CASES.append(case[:-1] + ", {" + expected + "}}")


def comp_case(group, name, S, B, n, m, mask=None, bias=True):
    S, mask = G.case_args(S, B, n, m, mask)
    w = G.make_weights(S, bias)
    q, k, v = G.rand(B, n, S["d_q"]), G.rand(B, m, S["d_k"]), G.rand(B, m, S["d_v"])
    d_out = G.rand(B, n, S["p_o"])
    leaves = {key: t.to(F64).requires_grad_() for key, t in w.items()}
    q64, k64, v64 = (t.to(F64).requires_grad_() for t in (q, k, v))
    out, _ = G.reference(S, leaves, q64, k64, v64, mask)
    (out * d_out.to(F64)).sum().backward()
    grads = {key: t.grad for key, t in leaves.items()}
    grads.update(d_queries=q64.grad, d_keys=k64.grad, d_values=v64.grad)
    emit(group, name, S, w, q, k, v, mask, d_out, grads)


def torch_case(group, name, E, h, B, n, m, kdim=None, vdim=None, kpm=None):
    mod = torch.nn.MultiheadAttention(E, h, bias=True, batch_first=True, kdim=kdim, vdim=vdim)
    with torch.no_grad():
        for prm in mod.parameters():
            prm.copy_(G.rand(*prm.shape) / math.sqrt(prm.shape[-1] if prm.dim() > 1 else E))
    kd, vd = kdim or E, vdim or E
    q, k, v, d_out = G.rand(B, n, E), G.rand(B, m, kd), G.rand(B, m, vd), G.rand(B, n, E)
    hd = E // h
    S = dict(heads=h, kv_heads=0, d_q=E, d_k=kd, d_v=vd, p_q=hd, p_k=hd, p_v=hd, p_o=E, score="dot")
    mod64 = mod.double()
    q64, k64, v64 = (t.to(F64).requires_grad_() for t in (q, k, v))
    out, _ = mod64(q64, k64, v64, key_padding_mask=kpm, need_weights=False)
    (out * d_out.to(F64)).sum().backward()
    if mod64._qkv_same_embed_dim:
        ws, gs = mod64.in_proj_weight.detach().chunk(3), mod64.in_proj_weight.grad.chunk(3)
    else:
        ws = (mod64.q_proj_weight.detach(), mod64.k_proj_weight.detach(), mod64.v_proj_weight.detach())
        gs = (mod64.q_proj_weight.grad, mod64.k_proj_weight.grad, mod64.v_proj_weight.grad)
    bs, gbs = mod64.in_proj_bias.detach().chunk(3), mod64.in_proj_bias.grad.chunk(3)
    w = {"w_q": ws[0], "w_k": ws[1], "w_v": ws[2], "w_o": mod64.out_proj.weight.detach(),
         "b_q": bs[0], "b_k": bs[1], "b_v": bs[2], "b_o": mod64.out_proj.bias.detach()}
    grads = {"w_q": gs[0], "w_k": gs[1], "w_v": gs[2], "w_o": mod64.out_proj.weight.grad,
             "b_q": gbs[0], "b_k": gbs[1], "b_v": gbs[2], "b_o": mod64.out_proj.bias.grad,
             "d_queries": q64.grad, "d_keys": k64.grad, "d_values": v64.grad}
    mask = {}
    if kpm is not None:
        mask["keep"] = (~kpm).view(B, 1, m).expand(B, n, m).to(torch.uint8)
    emit(group, name, S, w, q, k, v, mask, d_out, grads)


def cases():
    kpm = torch.tensor([[False, False, True, True, True], [False, True, False, False, True]])
    torch_case("torch_mha", "packed_key_padding", 8, 2, 2, 3, 5, kpm=kpm)
    torch_case("torch_mha", "kdim5_vdim7", 6, 3, 2, 3, 4, kdim=5, vdim=7)
    gen = dict(heads=2, d_q=5, d_k=6, d_v=7, p_q=3, p_k=3, p_v=4, p_o=9, score="dot")
    comp_case("general", "all_different", gen, 2, 3, 4)
    comp_case("general", "no_bias_scale", dict(gen, scale=0.75), 1, 4, 3, bias=False)
    comp_case("gqa", "h4_kv2", dict(gen, heads=4, kv_heads=2), 2, 3, 5)
    comp_case("gqa", "mqa_h3_kv1", dict(gen, heads=3, kv_heads=1), 2, 3, 4)
    add = dict(heads=2, kv_heads=1, d_q=4, d_k=5, d_v=3, p_q=3, p_k=4, p_v=2, p_o=5, score="additive", p_a=3)
    comp_case("additive", "gqa", add, 2, 3, 4)
    comp_case("masks", "causal_lens_keep_bias", dict(gen, heads=2, kv_heads=1), 2, 3, 4, mask=dict(
        causal=1, causal_offset=1,
        valid_lens=torch.tensor([[4, 0, 2], [3, 1, 4]]),  # row 1 of entry 0 sees nothing
        keep=lambda B, n, m: (torch.rand(B, n, m) > 0.25).to(torch.uint8),
        bias=lambda B, n, m: G.rand(B, n, m, lo=-2.0, hi=2.0)))
    comp_case("extras", "alibi_softcap_sinks", dict(gen, heads=3, kv_heads=3, alibi=1, softcap=1.5, sinks=1), 2, 4, 5,
              mask=dict(causal=1))
    rope = dict(heads=4, kv_heads=2, d_q=6, d_k=5, d_v=4, p_q=6, p_k=6, p_v=3, p_o=5, score="dot")
    comp_case("rope", "half_partial_gqa", dict(rope, rope_dim=4, rope_theta=100.0), 2, 3, 5,
              mask=dict(causal=1, causal_offset=2))
    comp_case("rope", "adjacent_alibi_sinks", dict(rope, rope_dim=6, rope_pairs="adjacent", alibi=1, sinks=1), 1, 4, 4,
              mask=dict(causal=1))


def small_cases():
    W.prefix = "rb"  # beside tests/ref_vectors_small.h's arrays
    tiny = dict(heads=2, kv_heads=1, d_q=3, d_k=4, d_v=3, p_q=2, p_k=2, p_v=2, p_o=3, score="dot")
    comp_case("avr", "gqa_causal_bias", tiny, 2, 2, 3, mask=dict(
        causal=1, bias=lambda B, n, m: G.rand(B, n, m, lo=-2.0, hi=2.0)))


def write(path):
    with open(path, "w") as f:
        f.write("/* Generated by tests/gen_backward.py from PyTorch %s. Do not edit. */\n" % torch.__version__)
        f.write("#include \"../mha.h\"\n\n")
        f.write("/* One case: the forward's arguments, d_out (in out's place) and the expected gradients\n"
                "   (NULL where the case has no such array), in the order of BWD_GRADS. */\n")
        f.write("typedef struct bwd_case {\n    const char *group, *name;\n    mha_shape shape;\n"
                "    int32_t batch, n, m;\n    const float *queries, *keys, *values;\n    mha_weights w;\n"
                "    mha_mask mask;\n    const float *d_out, *attn;\n    const float *grad[%d];\n} bwd_case;\n"
                % len(GRADS))
        f.write("#define BWD_GRADS {%s}\n\n" % ", ".join('"%s"' % g for g in GRADS))
        f.write("\n".join(W.arrays))
        f.write("\n\nstatic const bwd_case bwd_cases[] = {\n")
        f.write(",\n".join(CASES))
        f.write("\n};\n#define BWD_CASE_COUNT ((int)(sizeof bwd_cases / sizeof bwd_cases[0]))\n")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--small":
        small_cases()
        write(sys.argv[2] if len(sys.argv) > 2 else "tests/ref_backward_small.h")
    else:
        cases()
        write(sys.argv[1] if len(sys.argv) > 1 else "tests/ref_backward.h")
