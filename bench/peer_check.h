/* bench/peer_check.h - what the peers' programs (bench/blas_mha.c,
   bench/dnnl_mha.c, bench/peer_data.c) ask of mha.h, defined in
   bench/peer_check.c, the one translation unit that compiles mha.h (the
   OpenBLAS peer itself is built with -ffast-math, which mha.h must not be).

   The weights are a peer's own arrays in the order it draws them:
   w_q, b_q, w_k, b_k, w_v, b_v, w_o, b_o, a_q, a_k, a_v (the last three
   used by additive scoring only), laid out as mha.h reads them. */
#ifndef BENCH_PEER_CHECK_H
#define BENCH_PEER_CHECK_H
#include "shapes.h"

#ifdef BENCH_UTIL_H /* included after bench_util.h: the peers' programs */
#include <math.h>
/* Row r's weights into w, drawn in that order from bench_util.h's
   generator: uniform in +-sqrt(3 / fan_in), biases in +-0.1, the additive
   three empty but for additive scoring (bench/bench.c draws the same). */
static inline void peer_weights(const shape_row *r, float *w[11]) {
    w[0] = filled((size_t)r->heads * r->pq * r->dq, sqrtf(3.0f / (float)r->dq));
    w[1] = filled((size_t)r->heads * r->pq, 0.1f);
    w[2] = filled((size_t)r->kv * r->pq * r->dk, sqrtf(3.0f / (float)r->dk));
    w[3] = filled((size_t)r->kv * r->pq, 0.1f);
    w[4] = filled((size_t)r->kv * r->pv * r->dv, sqrtf(3.0f / (float)r->dv));
    w[5] = filled((size_t)r->kv * r->pv, 0.1f);
    w[6] = filled((size_t)r->po * r->heads * r->pv, sqrtf(3.0f / (float)(r->heads * r->pv)));
    w[7] = filled((size_t)r->po, 0.1f);
    w[8] = filled((size_t)r->heads * r->pa * r->pq, sqrtf(3.0f / (float)r->pq));
    w[9] = filled((size_t)r->heads * r->pa * r->pq, sqrtf(3.0f / (float)r->pq));
    w[10] = filled((size_t)r->heads * r->pa, r->pa > 0 ? sqrtf(3.0f / (float)r->pa) : 0.0f);
}
#endif

/* out [n][p_o] = mha_forward (the fast path, one thread) of row r's shape,
   batch 1; exits 1 if mha_forward fails. */
void peer_reference(const shape_row *r, const float *const w[11], const float *q, const float *k, const float *v,
                    float *out);

/* The largest |difference| between out and mha.h's output for the same
   weights and inputs; prints a line and exits 1 when it is above
   1e-4 (1 + max |mha.h's|) or not a number. `who` names the peer. */
double peer_check(const char *who, const shape_row *r, const float *const w[11], const float *q, const float *k,
                  const float *v, const float *out);
#endif
