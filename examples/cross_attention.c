/* Cross-attention where every size differs: queries of 10, keys of 7, values
   of 5, 3 heads projecting to p_q = p_k = 6 and p_v = 4, output of 3; two
   sequences of different valid lengths in one batch. */
#include <stdio.h>
#include <stdlib.h>
#define MHA_IMPLEMENTATION
#include "mha.h"
#include "example_util.h"

int main(void) {
    mha_shape s = MHA_INIT;
    mha_weights w = MHA_INIT;
    mha_mask mask = MHA_INIT;
    mha_weight_counts c;
    int32_t valid_lens[2] = {8, 3}; /* sequence 1 has only 3 real keys */
    enum { B = 2, N = 4, M = 8 };
    float *p[8], q[B * N * 10], k[B * M * 7], v[B * M * 5], out[B * N * 3];
    size_t bytes;
    void *ws;
    int i, j;
    mha_status st;
    s.heads = 3; s.d_q = 10; s.d_k = 7; s.d_v = 5; s.p_q = s.p_k = 6; s.p_v = 4; s.p_o = 3;
    if (mha_weight_counts_get(&s, &c) != MHA_OK) return 1;
    p[0] = (float *)malloc(c.w_q * sizeof(float)); example_fill(p[0], c.w_q, 0.5f, 1u);
    p[1] = (float *)malloc(c.w_k * sizeof(float)); example_fill(p[1], c.w_k, 0.6f, 2u);
    p[2] = (float *)malloc(c.w_v * sizeof(float)); example_fill(p[2], c.w_v, 0.7f, 3u);
    p[3] = (float *)malloc(c.w_o * sizeof(float)); example_fill(p[3], c.w_o, 0.5f, 4u);
    p[4] = (float *)malloc(c.b_o * sizeof(float)); example_fill(p[4], c.b_o, 0.1f, 5u);
    w.w_q = p[0]; w.w_k = p[1]; w.w_v = p[2]; w.w_o = p[3]; w.b_o = p[4];
    example_fill(q, sizeof q / sizeof q[0], 1.0f, 6u);
    example_fill(k, sizeof k / sizeof k[0], 1.0f, 7u);
    example_fill(v, sizeof v / sizeof v[0], 1.0f, 8u);
    mask.valid_lens = valid_lens;
    bytes = mha_workspace_size(&s, B, N, M);
    ws = malloc(bytes);
    st = mha_forward(&s, &w, B, N, M, q, k, v, &mask, out, NULL, ws, bytes);
    printf("cross-attention d_q=10 d_k=7 d_v=5 -> p_o=3: %s, workspace %lu bytes\n", mha_status_string(st),
           (unsigned long)bytes);
    for (i = 0; i < B * N; ++i) {
        printf("sequence %d query %d:", i / N, i % N);
        for (j = 0; j < 3; ++j) printf(" %8.4f", (double)out[i * 3 + j]);
        printf("\n");
    }
    for (i = 0; i < 5; ++i) free(p[i]);
    free(ws);
    return st == MHA_OK ? 0 : 1;
}
