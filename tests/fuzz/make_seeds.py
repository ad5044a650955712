#!/usr/bin/python3
"""Writes the seed corpus of the fuzz harness (tests/fuzz/corpus/): a few
hand-made inputs that reach each part of mha_forward, in the byte layout that
tests/fuzz/fuzz_mha.c reads. libFuzzer grows its own corpus from these."""
import os
import random

random.seed(1)
here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")
os.makedirs(here, exist_ok=True)


def size(v):  # fz_size: byte b gives b % 10 - 1
    return v + 1


def seed(name, heads, kv, d_q, d_k, d_v, p_q, p_v, p_o, score, p_k_sel, p_k, p_a, scale, batch, n, m,
         null_which=0, specials=1, use_mask=0, attn=0, ws_mode=0, tail=600, knobs=None):
    b = [size(heads), 0 if kv == 0 else 1, size(kv) if kv else 0]
    if kv == 0:
        b = [size(heads), 0]
    b += [size(d_q), size(d_k), size(d_v), size(p_q), size(p_v), size(p_o), score, p_k_sel]
    if p_k_sel % 8 == 0 or score == 1:
        b.append(size(p_k))
    b += [size(p_a), scale, size(batch), size(n), size(m)]
    b += [null_which] if knobs is None else [31, knobs]  # 31: the decoder knobs' byte follows
    b += [specials, use_mask, attn, ws_mode]
    b += [random.randrange(256) for _ in range(tail)]
    with open(os.path.join(here, name), "wb") as f:
        f.write(bytes(b))


seed("dot_plain", 2, 0, 4, 3, 5, 2, 3, 4, 0, 1, 0, 0, 0, 2, 3, 4)
seed("dot_gqa_masks", 4, 2, 3, 3, 3, 2, 2, 3, 0, 1, 0, 0, 0, 2, 3, 5, use_mask=31, attn=1)
seed("additive", 2, 0, 3, 4, 2, 3, 2, 2, 1, 0, 4, 3, 0, 1, 3, 4, use_mask=1)
seed("additive_valid_lens", 3, 1, 2, 2, 2, 2, 2, 2, 1, 0, 3, 2, 0, 2, 2, 3, use_mask=6, attn=1)
seed("short_workspace", 2, 0, 3, 3, 3, 2, 2, 2, 0, 1, 0, 0, 0, 1, 2, 2, ws_mode=1)
seed("null_query", 1, 0, 3, 3, 3, 2, 2, 2, 0, 1, 0, 0, 0, 1, 2, 2, null_which=7)
seed("bad_shape", 3, 2, 3, 3, 3, 2, 2, 2, 0, 1, 0, 0, 0, 1, 2, 2)
seed("m_zero", 2, 0, 3, 3, 3, 2, 2, 2, 0, 1, 0, 0, 0, 2, 2, 0, attn=1)
seed("specials", 2, 0, 3, 3, 3, 2, 2, 2, 0, 1, 0, 0, 0, 1, 3, 3, specials=0, use_mask=16)
seed("set_scale", 2, 0, 3, 3, 3, 2, 2, 2, 0, 1, 0, 0, 230, 1, 3, 3)
# the decoder knobs (bits: 0-1 RoPE, 2 pairing, 3 ALiBi, 4-5 soft-cap, 6 sinks, 7 theta)
seed("knobs_rope_alibi_cap_sinks", 4, 2, 3, 3, 3, 6, 3, 3, 0, 1, 0, 0, 0, 2, 3, 4, use_mask=1, attn=1,
     knobs=1 | 8 | 16 | 64)
seed("knobs_rope_adjacent_theta", 2, 0, 3, 3, 3, 4, 2, 3, 0, 1, 0, 0, 0, 1, 3, 3, knobs=1 | 4 | 128)
seed("knobs_additive_cap_sinks", 2, 0, 3, 4, 2, 3, 2, 2, 1, 0, 4, 3, 0, 1, 3, 4, use_mask=6, knobs=16 | 64)
seed("knobs_bad_rope", 2, 0, 3, 3, 3, 4, 2, 3, 0, 1, 0, 0, 0, 1, 2, 2, knobs=2)
seed("knobs_bad_cap", 2, 0, 3, 3, 3, 4, 2, 3, 0, 1, 0, 0, 0, 1, 2, 2, knobs=48)
seed("knobs_bad_theta", 2, 0, 3, 3, 3, 4, 2, 3, 0, 1, 0, 0, 0, 1, 2, 2, knobs=3 | 128)
seed("knobs_alibi_specials", 3, 0, 3, 3, 3, 2, 2, 2, 0, 1, 0, 0, 0, 2, 3, 3, specials=0, use_mask=17, knobs=8 | 64)
