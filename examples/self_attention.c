/* Causal self-attention over one sequence: queries, keys and values are the
   same 6 vectors of size 16; 4 heads of 4; prints head 0's attention weights. */
#include <stdio.h>
#include <stdlib.h>
#define MHA_IMPLEMENTATION
#include "mha.h"
#include "example_util.h"

enum { N = 6, D = 16, H = 4, P = 4 };

int main(void) {
    static float wq[H * P * D], wk[H * P * D], wv[H * P * D], wo[D * H * P], bo[D];
    static float x[N * D], out[N * D], attn[H * N * N];
    mha_shape s = MHA_INIT;
    mha_weights w = MHA_INIT;
    mha_mask mask = MHA_INIT;
    mha_status st;
    size_t bytes;
    void *ws;
    int i, j;
    s.heads = H; s.d_q = s.d_k = s.d_v = D; s.p_q = s.p_k = s.p_v = P; s.p_o = D;
    example_fill(wq, sizeof wq / sizeof wq[0], 0.43f, 1u);
    example_fill(wk, sizeof wk / sizeof wk[0], 0.43f, 2u);
    example_fill(wv, sizeof wv / sizeof wv[0], 0.43f, 3u);
    example_fill(wo, sizeof wo / sizeof wo[0], 0.43f, 4u);
    example_fill(bo, D, 0.1f, 5u);
    example_fill(x, N * D, 1.0f, 6u);
    w.w_q = wq; w.w_k = wk; w.w_v = wv; w.w_o = wo; w.b_o = bo;
    mask.causal = 1; /* query i sees keys 0..i */
    bytes = mha_workspace_size(&s, 1, N, N);
    ws = malloc(bytes);
    st = mha_forward(&s, &w, 1, N, N, x, x, x, &mask, out, attn, ws, bytes);
    if (st != MHA_OK) {
        printf("mha_forward: %s\n", mha_status_string(st));
        return 1;
    }
    printf("causal self-attention, %d heads of %d, workspace %lu bytes\n", H, P, (unsigned long)bytes);
    printf("head 0 attention weights (row = query, column = key):\n");
    for (i = 0; i < N; ++i) {
        for (j = 0; j < N; ++j) printf(" %6.3f", (double)attn[i * N + j]);
        printf("\n");
    }
    printf("output of the last query (first 8 of %d):", D);
    for (j = 0; j < 8; ++j) printf(" %.4f", (double)out[(N - 1) * D + j]);
    printf("\n");
    free(ws);
    return 0;
}
