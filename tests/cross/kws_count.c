/* Instructions of one attention layer of keyword-spotting size on a
   Cortex-M core (tests/cross/insn_report.sh counts them under QEMU):
   d_q = d_k = d_v = p_o = 64, 4 heads of 16, self-attention over n = m = 49
   frames (mha_forward), then the 49 frames appended to a KV cache
   (mha_cache_append) and one streaming step: a new frame against the 49
   cached (mha_decode, t = 1); then the same in int8 (mha_forward_q8, its
   rescales made before by mha_q8_prepare; mha_cache_append_q8,
   mha_decode_q8); then the fp32 layer with a q8 block cache (append and
   step); then the layer in 16x8 (mha_forward_q16: the int8 weights, int16
   inputs, every scale of the int8 layer's divided by 256). A call of kws_mark()
   separates them, so the counts are of the library's calls alone. Weights
   and inputs are deterministic made-up values; the statuses and a finite
   result are checked. */
#include <stdint.h>
#include <stdio.h>

#include "../../mha.h"
#include "kws_scales.h"

#define D 64
#define H 4
#define P 16
#define N 49

static float wq[H * P * D], wk[H * P * D], wv[H * P * D], wo[D * H * P], x[(N + 1) * D], out[N * D];
static float cache_k[H * (N + 1) * P], cache_v[H * (N + 1) * P];
#ifndef KWS_WS /* the workspace's bytes (the fast path's needs more: insn_report.py's Helium row) */
#define KWS_WS 32768
#endif
static unsigned char ws[KWS_WS];
static int8_t q8w[4][H * P * D], q8x[(N + 1) * D], q8out[N * D], q8cache[2 * H * (N + 1) * P];
static float q8ws[4][D];
static uint16_t qcache[2 * H * (N + 1) * 17]; /* q8 blocks: 34 bytes a row of 16 */
static float outq[D];
static mha_q8_rescale q8rows[4 * D], q16rows[4 * D];
static int16_t q16x[N * D], q16out[N * D];

__attribute__((noinline)) void kws_mark(void);
__attribute__((noinline)) void kws_mark(void) { __asm__ volatile(""); }

static void fill(float *v, int count, uint32_t seed, float scale) {
    int i;
    for (i = 0; i < count; ++i) {
        seed = seed * 1664525u + 1013904223u;
        v[i] = scale * ((float)(seed >> 8) * (2.0f / 16777216.0f) - 1.0f);
    }
}

int main(void) {
    mha_shape s = MHA_INIT;
    mha_weights w = MHA_INIT;
    mha_cache c = {cache_k, cache_v, NULL, N + 1, 0, 0, 0, 0};
    int32_t length = 0;
    mha_status st1, st2, st3, st4, st5, st6, st7;
    mha_q16_weights w16 = MHA_INIT;
    mha_q8_params p16;
    mha_q8_scales sc16;
    mha_q8_weights w8 = MHA_INIT;
    mha_q8_params p8 = MHA_INIT;
    mha_q8_scales sc8;
    size_t fw, dw;
    int i, finite = 1;
    s.heads = H; s.d_q = s.d_k = s.d_v = D; s.p_q = s.p_k = s.p_v = P; s.p_o = D;
    fill(wq, H * P * D, 1u, 0.2f); fill(wk, H * P * D, 2u, 0.2f); fill(wv, H * P * D, 3u, 0.2f);
    fill(wo, D * H * P, 4u, 0.2f); fill(x, (N + 1) * D, 5u, 1.0f);
    w.w_q = wq; w.w_k = wk; w.w_v = wv; w.w_o = wo;
    c.length = &length;
    fw = mha_workspace_size(&s, 1, N, N);
    dw = mha_decode_workspace_size(&s, 1, N, N + 1);
    if (fw > sizeof ws || dw > sizeof ws) {
        printf("kws: workspace %u / %u bytes > %u\n0 passed, 1 failed\n", (unsigned)fw, (unsigned)dw, (unsigned)sizeof ws);
        return 1;
    }
    kws_mark();
    st1 = mha_forward(&s, &w, 1, N, N, x, x, x, NULL, out, NULL, ws, fw); /* 49 x 49 self-attention */
    kws_mark();
    st2 = mha_cache_append(&s, &w, &c, 1, N, x, x, ws, dw); /* 49 frames into the cache */
    kws_mark();
    st3 = mha_decode(&s, &w, &c, 1, 1, x + N * D, x + N * D, x + N * D, out, ws, dw); /* one step */
    kws_mark();
    /* int8 (between these two marks the set-up, not counted): the weights and inputs quantised from
       the same values, scales made up */
    for (i = 0; i < H * P * D; ++i) {
        q8w[0][i] = (int8_t)(wq[i] * 600.0f);
        q8w[1][i] = (int8_t)(wk[i] * 600.0f);
        q8w[2][i] = (int8_t)(wv[i] * 600.0f);
        q8w[3][i] = (int8_t)(wo[i] * 600.0f);
    }
    for (i = 0; i < (N + 1) * D; ++i) q8x[i] = (int8_t)(x[i] * 120.0f);
    kws_scales(&sc8, q8ws);
    w8.w_q = q8w[0]; w8.w_k = q8w[1]; w8.w_v = q8w[2]; w8.w_o = q8w[3];
    st4 = mha_q8_prepare(&s, &sc8, &w8, &p8, q8rows, 4 * D);
    fw = mha_q8_workspace_size(&s, 1, N, N);
    if (fw > sizeof ws) st4 = MHA_ERR_WORKSPACE;
    kws_mark();
    st5 = st4 == MHA_OK ? mha_forward_q8(&s, &w8, &p8, 1, N, N, q8x, q8x, q8x, NULL, q8out, ws, fw) : st4;
    kws_mark();
    /* int8 decoding: the 49 frames into an int8 cache, then one streaming step */
    c.k = q8cache;
    c.v = q8cache + H * (N + 1) * P;
    c.type = MHA_I8;
    length = 0;
    dw = mha_q8_decode_workspace_size(&s, 1, N, N + 1);
    if (dw > sizeof ws) st5 = MHA_ERR_WORKSPACE;
    kws_mark();
    if (st5 == MHA_OK) st5 = mha_cache_append_q8(&s, &w8, &p8, &c, 1, N, q8x, q8x, ws, dw);
    kws_mark();
    if (st5 == MHA_OK)
        st5 = mha_decode_q8(&s, &w8, &p8, &c, 1, 1, q8x + N * D, q8x + N * D, q8x + N * D, q8out, ws, dw);
    kws_mark();
    /* a q8 block cache (docs/quantized.md; p 16: one short block a row): the 49 frames, then a step */
    c.k = qcache;
    c.v = qcache + H * (N + 1) * 17;
    c.type = MHA_Q8;
    length = 0;
    dw = mha_decode_workspace_size(&s, 1, N, N + 1);
    kws_mark();
    st6 = mha_cache_append(&s, &w, &c, 1, N, x, x, ws, dw);
    kws_mark();
    if (st6 == MHA_OK) st6 = mha_decode(&s, &w, &c, 1, 1, x + N * D, x + N * D, x + N * D, outq, ws, dw);
    kws_mark();
    /* 16x8 (set-up not counted) */
    sc16 = sc8;
    sc16.in_q = sc16.in_k = sc16.in_v = sc8.in_q / 256.0f;
    sc16.q = sc16.k = sc16.v = sc16.heads = sc8.q / 256.0f;
    sc16.out = sc8.out / 256.0f;
    for (i = 0; i < N * D; ++i) q16x[i] = (int16_t)(x[i] * 30720.0f);
    w16.w_q = q8w[0]; w16.w_k = q8w[1]; w16.w_v = q8w[2]; w16.w_o = q8w[3];
    st7 = mha_q16_prepare(&s, &sc16, &w16, &p16, q16rows, 4 * D);
    fw = mha_q16_workspace_size(&s, 1, N, N);
    if (fw > sizeof ws) st7 = MHA_ERR_WORKSPACE;
    kws_mark();
    if (st7 == MHA_OK) st7 = mha_forward_q16(&s, &w16, &p16, 1, N, N, q16x, q16x, q16x, NULL, q16out, ws, fw);
    kws_mark();
    for (i = 0; i < D; ++i) finite &= out[i] - out[i] == 0.0f && outq[i] - outq[i] == 0.0f;
    printf("kws: forward %s, append %s, decode %s, length %d, int8 forward %s (out[0] %d), workspace %u bytes "
           "(int8 forward), %u (decode)\n",
           mha_status_string(st1), mha_status_string(st2), mha_status_string(st3), (int)length,
           mha_status_string(st5), q8out[0], (unsigned)fw, (unsigned)dw);
    printf("kws: q8 cache append and step %s; 16x8 forward %s (out[0] %d)\n", mha_status_string(st6),
           mha_status_string(st7), q16out[0]);
    i = st1 == MHA_OK && st2 == MHA_OK && st3 == MHA_OK && st5 == MHA_OK && st6 == MHA_OK && st7 == MHA_OK &&
        length == N + 1 && finite;
    printf("%d passed, %d failed\n", i, !i);
    return !i;
}
