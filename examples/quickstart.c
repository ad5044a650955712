/* examples/quickstart.c - one attention layer, one call (the README's quick start). */
#define MHA_IMPLEMENTATION /* in exactly one file of your program */
#include "mha.h"
#include <stdio.h>
#include <stdlib.h>

#define BATCH 2 /* 2 sequences of 3 queries and 5 keys, d_model 512 */
#define N 3
#define M 5
#define D 512

int main(void) {
    float *wq = (float *)calloc(D * D, sizeof(float)), *wk = (float *)calloc(D * D, sizeof(float));
    float *wv = (float *)calloc(D * D, sizeof(float)), *wo = (float *)calloc(D * D, sizeof(float));
    float *queries = (float *)calloc(BATCH * N * D, sizeof(float)); /* [batch][n][d_q] */
    float *keys = (float *)calloc(BATCH * M * D, sizeof(float));    /* [batch][m][d_k] */
    float *values = (float *)calloc(BATCH * M * D, sizeof(float));  /* [batch][m][d_v] */
    float *out = (float *)calloc(BATCH * N * D, sizeof(float));     /* [batch][n][p_o] */
    mha_shape s = MHA_INIT; /* all zero: zero means default */
    mha_weights w = MHA_INIT;
    size_t bytes, i;
    void *ws;
    mha_status st;
    for (i = 0; i < D; ++i) /* identities */
        wq[i * D + i] = wk[i * D + i] = wv[i * D + i] = wo[i * D + i] = 1.0f;
    for (i = 0; i < BATCH * M * D; ++i) values[i] = (float)(i % 7);
    s.heads = 8; /* 8 heads of 64, as PyTorch's MultiheadAttention(512, 8) */
    s.d_q = s.d_k = s.d_v = D;
    s.p_q = s.p_k = s.p_v = 64;
    s.p_o = D;                                      /* MHA_SCORE_DOT, scale 1/sqrt(p_k) */
    mha_weights_f32(&w, wq, wk, wv, wo); /* [out][in] as Linear's; biases NULL */
    bytes = mha_workspace_size(&s, BATCH, N, M);
    ws = malloc(bytes);
    st = mha_forward(&s, &w, BATCH, N, M, queries, keys, values, NULL /* mask */, out,
                     NULL /* attn */, ws, bytes);
    if (st != MHA_OK) {
        fprintf(stderr, "mha_forward: %s\n", mha_status_string(st));
        return 1;
    }
    /* zero queries: every key weighs 1/5, so out is the mean of the values (2 3 4 3.6 ...) */
    printf("out[0][0][0..3] = %g %g %g %g\n", (double)out[0], (double)out[1], (double)out[2],
           (double)out[3]);
    free(ws); free(wq); free(wk); free(wv); free(wo);
    free(queries); free(keys); free(values); free(out);
    return 0;
}
