/* bench/blas_mha.c - the OpenBLAS peer of bench/peers.py: the same multi-head
   attention composed from cblas_sgemm calls, as a BLAS user would write it.

   Projections are single GEMMs over every head (biases preloaded, beta 1);
   per head, S = Q_i K_g^T (scaled by alpha), a row softmax, H_i = P V_g into
   its block of the concatenation; then the output projection. Additive
   scoring projects A_q Q_i and A_k K_g with GEMMs and forms w_a . tanh(..)
   in a loop. The softmax and tanh loops are compiled with -O3 -ffast-math
   so that gcc vectorises them with glibc's vector expf/tanhf. It materialises
   the n x m score matrix of one head (n*m floats).

   Before timing it checks its output against mha.h's (bench/peer_check.c):
   within 1e-4 (1 + max |out|), else it exits 1.

       blas_mha SECONDS SHAPE    prints "SHAPE median_ms min_ms max_abs_diff"
*/
#define _POSIX_C_SOURCE 199309L
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <stdint.h>

#include "bench_util.h"
#include "peer_check.h" /* mha.h's output, and the check against it */

typedef struct model {
    const shape_row *r;
    float *wq, *bq, *wk, *bk, *wv, *bv, *wo, *bo, *aq, *ak, *av;
    float *qp, *kp, *vp, *cat, *s, *aqp, *akp; /* scratch */
} model;


/* y[rows][cols] = x[rows][in] W^T + b, W [cols][in] */
static void linear(const float *x, int rows, int in, const float *w, const float *b, int cols, float *y, int ldy) {
    int r;
    for (r = 0; r < rows; ++r) memcpy(y + (size_t)r * (size_t)ldy, b, (size_t)cols * sizeof(float));
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, cols, in, 1.0f, x, in, w, in, 1.0f, y, ldy);
}

/* Row softmax of s[rows][cols] in place; vectorised by gcc (-O3 -ffast-math). */
static void softmax_rows(float *s, int rows, int cols) {
    int r, j;
    for (r = 0; r < rows; ++r) {
        float *x = s + (size_t)r * (size_t)cols, mx = x[0], sum = 0.0f, inv;
        for (j = 1; j < cols; ++j) mx = x[j] > mx ? x[j] : mx;
        for (j = 0; j < cols; ++j) {
            x[j] = expf(x[j] - mx);
            sum += x[j];
        }
        inv = 1.0f / sum;
        for (j = 0; j < cols; ++j) x[j] *= inv;
    }
}

/* s[t][j] = sum_a w_a[a] tanh(aq[t][a] + ak[j][a]) */
static void additive_scores(const float *aq, const float *ak, const float *wa, int n, int m, int pa, float *s) {
    int t, j, a;
    for (t = 0; t < n; ++t)
        for (j = 0; j < m; ++j) {
            float acc = 0.0f;
            for (a = 0; a < pa; ++a) acc += wa[a] * tanhf(aq[(size_t)t * (size_t)pa + (size_t)a] +
                                                          ak[(size_t)j * (size_t)pa + (size_t)a]);
            s[(size_t)t * (size_t)m + (size_t)j] = acc;
        }
}

static void forward(model *md, const float *q, const float *k, const float *v, float *out) {
    const shape_row *r = md->r;
    int h = r->heads, kv = r->kv, grp = h / kv, i;
    float scale = 1.0f / sqrtf((float)r->pq);
    linear(q, r->n, r->dq, md->wq, md->bq, h * r->pq, md->qp, h * r->pq);
    linear(k, r->m, r->dk, md->wk, md->bk, kv * r->pq, md->kp, kv * r->pq);
    linear(v, r->m, r->dv, md->wv, md->bv, kv * r->pv, md->vp, kv * r->pv);
    for (i = 0; i < h; ++i) {
        int g = i / grp;
        const float *qi = md->qp + (size_t)i * (size_t)r->pq, *kg = md->kp + (size_t)g * (size_t)r->pq;
        if (r->pa > 0) {
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, r->n, r->pa, r->pq, 1.0f, qi, h * r->pq,
                        md->aq + (size_t)i * (size_t)r->pa * (size_t)r->pq, r->pq, 0.0f, md->aqp, r->pa);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, r->m, r->pa, r->pq, 1.0f, kg, kv * r->pq,
                        md->ak + (size_t)i * (size_t)r->pa * (size_t)r->pq, r->pq, 0.0f, md->akp, r->pa);
            additive_scores(md->aqp, md->akp, md->av + (size_t)i * (size_t)r->pa, r->n, r->m, r->pa, md->s);
        } else {
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, r->n, r->m, r->pq, scale, qi, h * r->pq, kg,
                        kv * r->pq, 0.0f, md->s, r->m);
        }
        softmax_rows(md->s, r->n, r->m);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, r->n, r->pv, r->m, 1.0f, md->s, r->m,
                    md->vp + (size_t)g * (size_t)r->pv, kv * r->pv, 0.0f, md->cat + (size_t)i * (size_t)r->pv,
                    h * r->pv);
    }
    linear(md->cat, r->n, h * r->pv, md->wo, md->bo, r->po, out, r->po);
}

int main(int argc, char **argv) {
    double budget = argc > 1 ? atof(argv[1]) : 1.0, times[2000], t0, start, diff;
    const shape_row *r = shape_named(argc > 2 ? argv[2] : NULL);
    size_t runs = 0;
    model md;
    float *q, *k, *v, *out, *w[11];
    rng = 777u;
    if (!r) {
        fprintf(stderr, "usage: blas_mha SECONDS SHAPE (a shape of bench/shapes.h)\n");
        return 2;
    }
    md.r = r;
    peer_weights(r, w);
    md.wq = w[0]; md.bq = w[1]; md.wk = w[2]; md.bk = w[3]; md.wv = w[4]; md.bv = w[5]; md.wo = w[6]; md.bo = w[7];
    md.aq = w[8]; md.ak = w[9]; md.av = w[10];
    md.qp = filled((size_t)r->n * r->heads * r->pq, 0.0f);
    md.kp = filled((size_t)r->m * r->kv * r->pq, 0.0f);
    md.vp = filled((size_t)r->m * r->kv * r->pv, 0.0f);
    md.cat = filled((size_t)r->n * r->heads * r->pv, 0.0f);
    md.s = filled((size_t)r->n * r->m, 0.0f);
    md.aqp = filled((size_t)r->n * r->pa, 0.0f);
    md.akp = filled((size_t)r->m * r->pa, 0.0f);
    q = filled((size_t)r->n * r->dq, 1.0f);
    k = filled((size_t)r->m * r->dk, 1.0f);
    v = filled((size_t)r->m * r->dv, 1.0f);
    out = filled((size_t)r->n * r->po, 0.0f);
    forward(&md, q, k, v, out);
    diff = peer_check("blas_mha", r, (const float *const *)w, q, k, v, out);
    start = now();
    while (runs < 2000 && (runs < 3 || now() - start < budget)) {
        t0 = now();
        forward(&md, q, k, v, out);
        times[runs++] = now() - t0;
    }
    qsort(times, runs, sizeof times[0], cmp_double);
    printf("%s %.5f %.5f %.3g\n", r->name, 1e3 * times[runs / 2], 1e3 * times[0], diff);
    return 0;
}
