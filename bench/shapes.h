/* bench/shapes.h - the benchmark shapes of docs/performance.md, "Benchmark" (n, m, d, h, p),
   shared by bench/bench.c and the peers' programs (bench/blas_mha.c,
   bench/dnnl_mha.c, bench/peer_data.c). */
#ifndef BENCH_SHAPES_H
#define BENCH_SHAPES_H
#include <string.h>

typedef struct shape_row {
    const char *name;
    int n, m, dq, dk, dv, heads, kv, pq, pv, po, pa; /* pq = p_q = p_k; pa > 0: additive scoring */
} shape_row;

static const shape_row SHAPES[] = {
    {"T", 16, 16, 64, 64, 64, 4, 4, 16, 16, 64, 0},
    {"M", 256, 256, 512, 512, 512, 8, 8, 64, 64, 512, 0},
    {"B", 256, 256, 768, 768, 768, 12, 12, 64, 64, 768, 0},
    {"G", 200, 300, 256, 384, 384, 6, 6, 48, 80, 200, 0},
    {"Q", 512, 512, 1024, 1024, 1024, 16, 4, 64, 64, 1024, 0},
    {"A", 128, 128, 256, 256, 256, 4, 4, 64, 64, 256, 64},
    {"L", 1024, 1024, 512, 512, 512, 8, 8, 64, 64, 512, 0},
    {"N", 1, 4096, 2048, 2048, 2048, 16, 16, 128, 128, 2048, 0}, /* one query, a long context: the projections */
};

#ifdef MHA_H_INCLUDED /* included after mha.h */
/* The layer of a row. */
static inline mha_shape shape_of(const shape_row *r) {
    mha_shape sh = {0};
    sh.heads = r->heads; sh.kv_heads = r->kv;
    sh.d_q = r->dq; sh.d_k = r->dk; sh.d_v = r->dv;
    sh.p_q = sh.p_k = r->pq; sh.p_v = r->pv; sh.p_o = r->po;
    sh.score = r->pa > 0 ? MHA_SCORE_ADDITIVE : MHA_SCORE_DOT;
    sh.p_a = r->pa;
    return sh;
}
#endif

/* The row named `name`, or NULL. */
static inline const shape_row *shape_named(const char *name) {
    size_t s;
    for (s = 0; name && s < sizeof SHAPES / sizeof SHAPES[0]; ++s)
        if (strcmp(SHAPES[s].name, name) == 0) return &SHAPES[s];
    return NULL;
}
#endif
