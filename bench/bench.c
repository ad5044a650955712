/* bench/bench.c - times mha_forward on the benchmark shapes (README, "Benchmark").

   For each shape: median and minimum time of repeated runs (single thread,
   batch 1), GFLOP/s by the README's formula, and workspace bytes. Weights are
   uniform in +-sqrt(3 / fan_in), inputs uniform in [-1, 1]. Progress goes to
   stderr as each shape runs.

       bench [SECONDS_PER_SHAPE [SHAPE]]   default 1.0 s, every shape; each shape
                                           runs at least 3 times
*/
#define _POSIX_C_SOURCE 199309L
#define MHA_IMPLEMENTATION
#include "../mha.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct shape_row {
    const char *name;
    int32_t n, m, dq, dk, dv, heads, kv, pq, pv, po, pa; /* pa > 0: additive */
} shape_row;

/* The shapes (n, m, d, h, p) of the benchmark table in the README. */
static const shape_row SHAPES[] = {
    {"T", 16, 16, 64, 64, 64, 4, 4, 16, 16, 64, 0},
    {"M", 256, 256, 512, 512, 512, 8, 8, 64, 64, 512, 0},
    {"B", 256, 256, 768, 768, 768, 12, 12, 64, 64, 768, 0},
    {"G", 200, 300, 256, 384, 384, 6, 6, 48, 80, 200, 0},
    {"Q", 512, 512, 1024, 1024, 1024, 16, 4, 64, 64, 1024, 0},
    {"A", 128, 128, 256, 256, 256, 4, 4, 64, 64, 256, 64},
    {"L", 1024, 1024, 512, 512, 512, 8, 8, 64, 64, 512, 0},
};

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static uint32_t rng = 12345u;
static float uniform(float lim) { /* in [-lim, lim] */
    rng = rng * 1664525u + 1013904223u;
    return lim * (2.0f * (float)(rng >> 8) / 16777216.0f - 1.0f);
}
static float *filled(size_t count, float lim) {
    float *p = (float *)malloc(count * sizeof(float));
    size_t i;
    if (!p) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    for (i = 0; i < count; ++i) p[i] = uniform(lim);
    return p;
}

/* Floating-point operations of one forward pass (multiply and add count as 2). */
static double flops(const shape_row *r) {
    double n = r->n, m = r->m, h = r->heads, kv = r->kv, pq = r->pq, pv = r->pv, pa = r->pa;
    double f = 2.0 * (n * r->dq * h * pq + m * r->dk * kv * pq + m * r->dv * kv * pv) /* projections */
               + 2.0 * n * m * h * pv                                              /* weights x values */
               + 2.0 * n * h * pv * r->po;                                         /* output projection */
    if (pa > 0) f += 2.0 * (m * h * pa * pq + n * h * pa * pq + n * m * h * pa); /* A_k K, A_q q, w_a . tanh */
    else f += 2.0 * n * m * h * pq;                                              /* q . k */
    return f;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    double budget = argc > 1 ? atof(argv[1]) : 1.0;
    size_t s;
    printf("| shape | n | m | heads | median ms | min ms | GFLOP/s | workspace bytes |\n");
    printf("|---|---|---|---|---|---|---|---|\n");
    for (s = 0; s < sizeof SHAPES / sizeof SHAPES[0]; ++s) {
        const shape_row *r = &SHAPES[s];
        mha_shape sh = {0};
        mha_weights w = {0};
        mha_weight_counts c;
        double times[200], t0, start;
        size_t bytes, runs = 0;
        float *q, *k, *v, *out;
        void *ws;
        if (argc > 2 && strcmp(argv[2], r->name) != 0) continue;
        sh.heads = r->heads; sh.kv_heads = r->kv;
        sh.d_q = r->dq; sh.d_k = r->dk; sh.d_v = r->dv;
        sh.p_q = sh.p_k = r->pq; sh.p_v = r->pv; sh.p_o = r->po;
        sh.score = r->pa > 0 ? MHA_SCORE_ADDITIVE : MHA_SCORE_DOT;
        sh.p_a = r->pa;
        if (mha_weight_counts_get(&sh, &c) != MHA_OK) return 1;
        w.w_q = filled(c.w_q, sqrtf(3.0f / (float)r->dq)); w.b_q = filled(c.b_q, 0.1f);
        w.w_k = filled(c.w_k, sqrtf(3.0f / (float)r->dk)); w.b_k = filled(c.b_k, 0.1f);
        w.w_v = filled(c.w_v, sqrtf(3.0f / (float)r->dv)); w.b_v = filled(c.b_v, 0.1f);
        w.w_o = filled(c.w_o, sqrtf(3.0f / (float)(r->heads * r->pv))); w.b_o = filled(c.b_o, 0.1f);
        if (r->pa > 0) {
            w.a_q = filled(c.a_q, sqrtf(3.0f / (float)r->pq));
            w.a_k = filled(c.a_k, sqrtf(3.0f / (float)r->pq));
            w.a_v = filled(c.a_v, sqrtf(3.0f / (float)r->pa));
        }
        q = filled((size_t)r->n * (size_t)r->dq, 1.0f);
        k = filled((size_t)r->m * (size_t)r->dk, 1.0f);
        v = filled((size_t)r->m * (size_t)r->dv, 1.0f);
        out = filled((size_t)r->n * (size_t)r->po, 0.0f);
        bytes = mha_workspace_size(&sh, 1, r->n, r->m);
        ws = malloc(bytes);
        if (!ws) return 1;
        fprintf(stderr, "bench: shape %s (%zu of %zu)...\n", r->name, s + 1, sizeof SHAPES / sizeof SHAPES[0]);
        start = now();
        while (runs < 200 && (runs < 3 || now() - start < budget)) {
            t0 = now();
            if (mha_forward(&sh, &w, 1, r->n, r->m, q, k, v, NULL, out, NULL, ws, bytes) != MHA_OK) return 1;
            times[runs++] = now() - t0;
        }
        qsort(times, runs, sizeof times[0], cmp_double);
        printf("| %s | %d | %d | %d | %.3f | %.3f | %.2f | %zu |\n", r->name, r->n, r->m, r->heads,
               1e3 * times[runs / 2], 1e3 * times[0], flops(r) / times[runs / 2] * 1e-9, bytes);
        fflush(stdout);
        free((void *)w.w_q); free((void *)w.b_q); free((void *)w.w_k); free((void *)w.b_k);
        free((void *)w.w_v); free((void *)w.b_v); free((void *)w.w_o); free((void *)w.b_o);
        free((void *)w.a_q); free((void *)w.a_k); free((void *)w.a_v);
        free(q); free(k); free(v); free(out); free(ws);
    }
    return 0;
}
