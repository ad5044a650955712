/* bench/peer_check.c - mha.h's output for a peer's data, and the check of
   the peer's output against it (bench/peer_check.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#define MHA_IMPLEMENTATION
#include "../mha.h"
#include "peer_check.h"

void peer_reference(const shape_row *r, const float *const w[11], const float *q, const float *k, const float *v,
                    float *out) {
    mha_shape s = shape_of(r);
    mha_weights mw;
    size_t bytes;
    void *ws;
    memset(&mw, 0, sizeof mw);
    mw.w_q = w[0]; mw.b_q = w[1]; mw.w_k = w[2]; mw.b_k = w[3]; mw.w_v = w[4]; mw.b_v = w[5];
    mw.w_o = w[6]; mw.b_o = w[7];
    if (r->pa > 0) {
        mw.a_q = w[8]; mw.a_k = w[9]; mw.a_v = w[10];
    }
    bytes = mha_workspace_size(&s, 1, r->n, r->m);
    ws = malloc(bytes);
    if (!ws || mha_forward(&s, &mw, 1, r->n, r->m, q, k, v, NULL, out, NULL, ws, bytes) != MHA_OK) {
        fprintf(stderr, "peer_check: mha_forward failed on shape %s\n", r->name);
        exit(1);
    }
    free(ws);
}

double peer_check(const char *who, const shape_row *r, const float *const w[11], const float *q, const float *k,
                  const float *v, const float *out) {
    size_t i, count = (size_t)r->n * (size_t)r->po;
    float *ref = (float *)malloc(count * sizeof(float)), big = 0.0f, diff = 0.0f, d;
    if (!ref) exit(1);
    peer_reference(r, w, q, k, v, ref);
    for (i = 0; i < count; ++i) {
        d = fabsf(ref[i] - out[i]);
        big = fabsf(ref[i]) > big ? fabsf(ref[i]) : big;
        diff = d > diff || d != d ? d : diff;
    }
    free(ref);
    if (!(diff <= 1e-4f * (1.0f + big))) {
        fprintf(stderr, "%s: shape %s differs from mha.h by %g (max |out| %g)\n", who, r->name, (double)diff,
                (double)big);
        exit(1);
    }
    return (double)diff;
}
