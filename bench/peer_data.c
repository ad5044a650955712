/* bench/peer_data.c - one benchmark shape's weights, inputs and mha.h's
   output, in a file, for the peers that are not C (bench/ort_peer.py builds
   the ONNX Runtime graph from it and its node script checks the graph's
   output against mha.h's).

       peer_data SHAPE FILE

   FILE: 10 int32 (n, m, d_q, d_k, d_v, heads, kv heads, p_q = p_k, p_v,
   p_o), then float32 arrays in mha.h's layouts: w_q [h][p_q][d_q], b_q,
   w_k [kv][p_k][d_k], b_k, w_v [kv][p_v][d_v], b_v, w_o [p_o][h p_v], b_o,
   queries [n][d_q], keys [m][d_k], values [m][d_v], out [n][p_o]
   (mha_forward, batch 1, no mask). Little-endian, as the machine writes. */
#define _POSIX_C_SOURCE 199309L /* bench_util.h's clock */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "peer_check.h" /* mha.h's output */

int main(int argc, char **argv) {
    const shape_row *r = shape_named(argc > 2 ? argv[1] : NULL);
    size_t i;
    int32_t head[10];
    float *arr[12], *w[11];
    size_t cnt[12];
    FILE *f;
    rng = 777u; /* the data of bench/blas_mha.c and bench/dnnl_mha.c */
    (void)now; /* bench_util.h's timing, unused here */
    (void)cmp_double;
    if (!r || r->pa > 0) {
        fprintf(stderr, "usage: peer_data SHAPE FILE (a shape of bench/shapes.h without additive scoring)\n");
        return 2;
    }
    cnt[0] = (size_t)r->heads * r->pq * r->dq; cnt[1] = (size_t)r->heads * r->pq;
    cnt[2] = (size_t)r->kv * r->pq * r->dk; cnt[3] = (size_t)r->kv * r->pq;
    cnt[4] = (size_t)r->kv * r->pv * r->dv; cnt[5] = (size_t)r->kv * r->pv;
    cnt[6] = (size_t)r->po * r->heads * r->pv; cnt[7] = (size_t)r->po;
    cnt[8] = (size_t)r->n * r->dq; cnt[9] = (size_t)r->m * r->dk; cnt[10] = (size_t)r->m * r->dv;
    cnt[11] = (size_t)r->n * r->po;
    peer_weights(r, w); /* (no additive scoring: the last three are empty) */
    for (i = 0; i < 8; ++i) arr[i] = w[i];
    arr[8] = filled(cnt[8], 1.0f); arr[9] = filled(cnt[9], 1.0f); arr[10] = filled(cnt[10], 1.0f);
    arr[11] = filled(cnt[11], 0.0f);
    peer_reference(r, (const float *const *)w, arr[8], arr[9], arr[10], arr[11]);
    head[0] = r->n; head[1] = r->m; head[2] = r->dq; head[3] = r->dk; head[4] = r->dv; head[5] = r->heads;
    head[6] = r->kv; head[7] = r->pq; head[8] = r->pv; head[9] = r->po;
    f = fopen(argv[2], "wb");
    if (!f || fwrite(head, sizeof head, 1, f) != 1) return 1;
    for (i = 0; i < 12; ++i)
        if (fwrite(arr[i], sizeof(float), cnt[i], f) != cnt[i]) return 1;
    return fclose(f) != 0;
}
