/* The seed's worked questions, answered by the library's own functions:
   how long the concatenation of 8 heads of 64 is, how big W_o is for 12 heads
   of 64 with a 768 output, and that the order is heads -> concat -> W_o: each
   head's output (mha_head), side by side (mha_concat), times W_o
   (mha_output) is what mha_forward returns for every query. On the
   reference path the two agree bit for bit; on the fast path (the default on
   x86-64 and aarch64) up to rounding, within 1e-5 (1 + max |out|). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#define MHA_IMPLEMENTATION
#include "mha.h"
#include "example_util.h"

int main(void) {
    mha_shape s = MHA_INIT;
    mha_weight_counts c;
    float heads[8][64], concat[8 * 64], *outs, *cmp, *cat2, *hbuf;
    const float *hp[8];
    mha_weights w = MHA_INIT;
    float *wq, *wk, *wv, *wo, *q, *k, *v;
    void *ws;
    size_t bytes, i;
    int32_t t, h;
    float worst = 0.0f, largest = 0.0f;
    int ok = 1;

    /* Question 1: 8 heads with p_v = 64 concatenate to a vector of 8 * 64. */
    for (h = 0; h < 8; ++h) {
        example_fill(heads[h], 64, 1.0f, (uint32_t)h + 1u);
        hp[h] = heads[h];
    }
    if (mha_concat(8, 64, hp, concat) != MHA_OK) return 1;
    s.heads = 8; s.d_q = s.d_k = s.d_v = 512; s.p_q = s.p_k = s.p_v = 64; s.p_o = 512;
    mha_weight_counts_get(&s, &c);
    printf("1. 8 heads of 64: mha_concat fills %lu entries (head 3 starts at %d: %s)\n",
           (unsigned long)(c.w_o / (size_t)s.p_o), 3 * 64, concat[3 * 64] == heads[3][0] ? "yes" : "no");

    /* Question 2: 12 heads of 64 with a 768 output: W_o is p_o x (heads * p_v). */
    s.heads = 12; s.d_q = s.d_k = s.d_v = 768; s.p_o = 768;
    mha_weight_counts_get(&s, &c);
    printf("2. 12 heads of 64, p_o = 768: W_o has %lu entries = %lu x %lu\n", (unsigned long)c.w_o,
           (unsigned long)s.p_o, (unsigned long)(c.w_o / (size_t)s.p_o));

    /* Question 3: heads -> concat -> W_o is what mha_forward computes. */
    s.heads = 4; s.d_q = s.d_k = s.d_v = 16; s.p_q = s.p_k = s.p_v = 8; s.p_o = 16;
    mha_weight_counts_get(&s, &c);
    wq = (float *)malloc(c.w_q * sizeof(float)); wk = (float *)malloc(c.w_k * sizeof(float));
    wv = (float *)malloc(c.w_v * sizeof(float)); wo = (float *)malloc(c.w_o * sizeof(float));
    example_fill(wq, c.w_q, 0.4f, 11u); example_fill(wk, c.w_k, 0.4f, 12u);
    example_fill(wv, c.w_v, 0.4f, 13u); example_fill(wo, c.w_o, 0.3f, 14u);
    w.w_q = wq; w.w_k = wk; w.w_v = wv; w.w_o = wo;
    q = (float *)malloc(5 * 16 * sizeof(float)); k = (float *)malloc(7 * 16 * sizeof(float));
    v = (float *)malloc(7 * 16 * sizeof(float));
    example_fill(q, 5 * 16, 1.0f, 21u); example_fill(k, 7 * 16, 1.0f, 22u); example_fill(v, 7 * 16, 1.0f, 23u);
    outs = (float *)malloc(5 * 16 * sizeof(float)); cmp = (float *)malloc(16 * sizeof(float));
    cat2 = (float *)malloc(4 * 8 * sizeof(float)); hbuf = (float *)malloc(4 * 8 * sizeof(float));
    bytes = mha_workspace_size(&s, 1, 5, 7); /* mha_head runs the reference path: its size may be larger */
    if (mha_reference_workspace_size(&s, 1, 1, 7) > bytes) bytes = mha_reference_workspace_size(&s, 1, 1, 7);
    ws = malloc(bytes);
    if (mha_forward(&s, &w, 1, 5, 7, q, k, v, NULL, outs, NULL, ws, bytes) != MHA_OK) return 1;
    for (t = 0; t < 5; ++t) {
        for (h = 0; h < 4; ++h) {
            hp[h] = hbuf + h * 8;
            ok &= mha_head(&s, &w, h, q + t * 16, k, v, 7, 7, hbuf + h * 8, ws, bytes) == MHA_OK;
        }
        ok &= mha_concat(4, 8, hp, cat2) == MHA_OK;
        ok &= mha_output(&s, &w, cat2, cmp) == MHA_OK;
        for (i = 0; i < 16; ++i) {
            if (fabsf(cmp[i] - outs[t * 16 + (int32_t)i]) > worst) worst = fabsf(cmp[i] - outs[t * 16 + (int32_t)i]);
            if (fabsf(outs[t * 16 + (int32_t)i]) > largest) largest = fabsf(outs[t * 16 + (int32_t)i]);
        }
    }
    printf("3. heads -> concat -> W_o vs mha_forward (%s path) on 5 queries: max difference %g\n",
           mha_build_info().fast ? "fast" : "reference", (double)worst);
    free(wq); free(wk); free(wv); free(wo); free(q); free(k); free(v);
    free(outs); free(cmp); free(cat2); free(hbuf); free(ws);
    return ok && worst <= 1e-5f * (1.0f + largest) ? 0 : 1;
}
