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
