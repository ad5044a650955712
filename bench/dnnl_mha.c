/* bench/dnnl_mha.c - the oneDNN peer of bench/peers.py (Debian's libdnnl-dev,
   oneDNN 2.6): the same multi-head attention composed from oneDNN primitives,
   as a oneDNN user would write it.

   Projections are matmul primitives over every head with the bias fused, their
   weights reordered once, at set-up, into the layout the primitive asks for
   (format_tag_any). The attention is batched over heads: S = Q K^T for all
   heads in one matmul ([kv][grp][n][pq] by [kv][1][pq][m], the keys
   broadcast over a group: GQA), the scale as the primitive's output scale; a
   softmax primitive over the last axis in place; H = P V in one matmul
   written straight into the concatenation's blocks (strides); then the
   output projection. It materialises the n x m scores of every head.
   Additive scoring has no oneDNN composition here (shape A is skipped).

   Before timing it checks its output against mha.h's (mha_forward on the same
   weights and inputs, bench/peer_check.c): within 1e-4 (1 + max |out|), else it exits 1.

       dnnl_mha SECONDS SHAPE    prints "SHAPE median_ms min_ms max_abs_diff"
*/
#define _POSIX_C_SOURCE 199309L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <oneapi/dnnl/dnnl.h>

#include "bench_util.h"
#include "peer_check.h" /* mha.h's output, and the check against it */

#define CHECK_DNNL(call)                                                                                    \
    do {                                                                                                    \
        dnnl_status_t st_ = (call);                                                                         \
        if (st_ != dnnl_success) {                                                                          \
            fprintf(stderr, "dnnl_mha: %s failed (%d) at line %d\n", #call, (int)st_, __LINE__);           \
            exit(1);                                                                                        \
        }                                                                                                   \
    } while (0)

static dnnl_engine_t eng;
static dnnl_stream_t strm;


/* A plain f32 memory descriptor of ndims dims with the given strides. */
static dnnl_memory_desc_t md_strided(int ndims, const dnnl_dims_t dims, const dnnl_dims_t strides) {
    dnnl_memory_desc_t md;
    CHECK_DNNL(dnnl_memory_desc_init_by_strides(&md, ndims, dims, dnnl_f32, strides));
    return md;
}

static dnnl_memory_t mem_on(const dnnl_memory_desc_t *md, void *data) {
    dnnl_memory_t m;
    CHECK_DNNL(dnnl_memory_create(&m, md, eng, data ? data : DNNL_MEMORY_ALLOCATE));
    return m;
}

/* y[rows][cols] = x[rows][in] W^T + b (W [cols][in]): a matmul primitive with
   its weights reordered once into the layout it prefers. */
typedef struct linear {
    dnnl_primitive_t prim;
    dnnl_memory_t src, wts, bias, dst;
} linear;

static void linear_make(linear *l, int rows, int in, const float *w, const float *b, int cols, float *x, float *y,
                        int ldy) {
    dnnl_dims_t sd = {rows, in}, ss = {in, 1}, wd = {in, cols}, ws = {1, in}, bd = {1, cols}, bs = {cols, 1},
                dd = {rows, cols}, ds = {ldy, 1};
    dnnl_memory_desc_t smd = md_strided(2, sd, ss), wplain = md_strided(2, wd, ws), bmd = md_strided(2, bd, bs),
                       dmd = md_strided(2, dd, ds), wany;
    dnnl_matmul_desc_t desc;
    dnnl_primitive_desc_t pd, rpd;
    dnnl_primitive_t reorder;
    dnnl_memory_t wsrc;
    dnnl_exec_arg_t rargs[2];
    CHECK_DNNL(dnnl_memory_desc_init_by_tag(&wany, 2, wd, dnnl_f32, dnnl_format_tag_any));
    CHECK_DNNL(dnnl_matmul_desc_init(&desc, &smd, &wany, &bmd, &dmd));
    CHECK_DNNL(dnnl_primitive_desc_create(&pd, &desc, NULL, eng, NULL));
    CHECK_DNNL(dnnl_primitive_create(&l->prim, pd));
    l->wts = mem_on(dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0), NULL);
    wsrc = mem_on(&wplain, (void *)(size_t)w);
    CHECK_DNNL(dnnl_reorder_primitive_desc_create(&rpd, &wplain, eng,
                                                  dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0), eng,
                                                  NULL));
    CHECK_DNNL(dnnl_primitive_create(&reorder, rpd));
    rargs[0].arg = DNNL_ARG_FROM; rargs[0].memory = wsrc;
    rargs[1].arg = DNNL_ARG_TO; rargs[1].memory = l->wts;
    CHECK_DNNL(dnnl_primitive_execute(reorder, strm, 2, rargs));
    CHECK_DNNL(dnnl_stream_wait(strm));
    dnnl_primitive_destroy(reorder);
    dnnl_primitive_desc_destroy(rpd);
    dnnl_memory_destroy(wsrc);
    l->src = mem_on(&smd, x);
    l->bias = mem_on(&bmd, (void *)(size_t)b);
    l->dst = mem_on(&dmd, y);
    dnnl_primitive_desc_destroy(pd);
}

static void linear_run(const linear *l) {
    dnnl_exec_arg_t a[4] = {{DNNL_ARG_SRC, l->src}, {DNNL_ARG_WEIGHTS, l->wts}, {DNNL_ARG_BIAS, l->bias},
                            {DNNL_ARG_DST, l->dst}};
    CHECK_DNNL(dnnl_primitive_execute(l->prim, strm, 4, a));
}

typedef struct model {
    const shape_row *r;
    float *wq, *bq, *wk, *bk, *wv, *bv, *wo, *bo;
    float *q, *k, *v, *qp, *kp, *vp, *cat, *s, *out;
    linear lq, lk, lv, lo;
    dnnl_primitive_t qk, soft, pv;
    dnnl_memory_t qk_src, qk_wts, s_mem, pv_wts, pv_dst;
} model;

static void model_make(model *md) {
    const shape_row *r = md->r;
    const dnnl_dim_t h = r->heads, kv = r->kv, grp = h / kv, n = r->n, m = r->m, pq = r->pq, pv = r->pv;
    const float scale = 1.0f / sqrtf((float)r->pq);
    dnnl_dims_t qd = {kv, grp, n, pq}, qs = {grp * pq, pq, h * pq, 1};          /* Q_i, i = g grp + j */
    dnnl_dims_t kd = {kv, 1, pq, m}, ks = {pq, pq, 1, kv * pq};                  /* K_g^T */
    dnnl_dims_t sd = {kv, grp, n, m}, ss = {grp * n * m, n * m, m, 1};           /* S, every head */
    dnnl_dims_t vd = {kv, 1, m, pv}, vs = {pv, pv, kv * pv, 1};                  /* V_g */
    dnnl_dims_t hd = {kv, grp, n, pv}, hs = {grp * pv, pv, h * pv, 1};           /* H_i in the concatenation */
    dnnl_memory_desc_t qmd = md_strided(4, qd, qs), kmd = md_strided(4, kd, ks), smd = md_strided(4, sd, ss),
                       vmd = md_strided(4, vd, vs), hmd = md_strided(4, hd, hs);
    dnnl_matmul_desc_t desc;
    dnnl_softmax_desc_t sdesc;
    dnnl_primitive_desc_t pd;
    dnnl_primitive_attr_t attr;
    linear_make(&md->lq, r->n, r->dq, md->wq, md->bq, r->heads * r->pq, md->q, md->qp, r->heads * r->pq);
    linear_make(&md->lk, r->m, r->dk, md->wk, md->bk, r->kv * r->pq, md->k, md->kp, r->kv * r->pq);
    linear_make(&md->lv, r->m, r->dv, md->wv, md->bv, r->kv * r->pv, md->v, md->vp, r->kv * r->pv);
    linear_make(&md->lo, r->n, r->heads * r->pv, md->wo, md->bo, r->po, md->cat, md->out, r->po);
    /* S = scale Q K^T, every head */
    CHECK_DNNL(dnnl_primitive_attr_create(&attr));
    CHECK_DNNL(dnnl_primitive_attr_set_output_scales(attr, 1, 0, &scale));
    CHECK_DNNL(dnnl_matmul_desc_init(&desc, &qmd, &kmd, NULL, &smd));
    CHECK_DNNL(dnnl_primitive_desc_create(&pd, &desc, attr, eng, NULL));
    CHECK_DNNL(dnnl_primitive_create(&md->qk, pd));
    dnnl_primitive_desc_destroy(pd);
    dnnl_primitive_attr_destroy(attr);
    md->qk_src = mem_on(&qmd, md->qp);
    md->qk_wts = mem_on(&kmd, md->kp);
    md->s_mem = mem_on(&smd, md->s);
    /* softmax over the keys, in place */
    CHECK_DNNL(dnnl_softmax_forward_desc_init(&sdesc, dnnl_forward_inference, &smd, 3));
    CHECK_DNNL(dnnl_primitive_desc_create(&pd, &sdesc, NULL, eng, NULL));
    CHECK_DNNL(dnnl_primitive_create(&md->soft, pd));
    dnnl_primitive_desc_destroy(pd);
    /* H = P V into the concatenation */
    CHECK_DNNL(dnnl_matmul_desc_init(&desc, &smd, &vmd, NULL, &hmd));
    CHECK_DNNL(dnnl_primitive_desc_create(&pd, &desc, NULL, eng, NULL));
    CHECK_DNNL(dnnl_primitive_create(&md->pv, pd));
    dnnl_primitive_desc_destroy(pd);
    md->pv_wts = mem_on(&vmd, md->vp);
    md->pv_dst = mem_on(&hmd, md->cat);
}

static void forward(const model *md) {
    dnnl_exec_arg_t qk[3] = {{DNNL_ARG_SRC, md->qk_src}, {DNNL_ARG_WEIGHTS, md->qk_wts}, {DNNL_ARG_DST, md->s_mem}};
    dnnl_exec_arg_t sm[2] = {{DNNL_ARG_SRC, md->s_mem}, {DNNL_ARG_DST, md->s_mem}};
    dnnl_exec_arg_t pv[3] = {{DNNL_ARG_SRC, md->s_mem}, {DNNL_ARG_WEIGHTS, md->pv_wts}, {DNNL_ARG_DST, md->pv_dst}};
    linear_run(&md->lq);
    linear_run(&md->lk);
    linear_run(&md->lv);
    CHECK_DNNL(dnnl_primitive_execute(md->qk, strm, 3, qk));
    CHECK_DNNL(dnnl_primitive_execute(md->soft, strm, 2, sm));
    CHECK_DNNL(dnnl_primitive_execute(md->pv, strm, 3, pv));
    linear_run(&md->lo);
    CHECK_DNNL(dnnl_stream_wait(strm));
}

int main(int argc, char **argv) {
    double budget = argc > 1 ? atof(argv[1]) : 1.0, times[2000], t0, start, diff;
    const shape_row *r = shape_named(argc > 2 ? argv[2] : NULL);
    size_t runs = 0;
    model md;
    float *w[11];
    rng = 777u; /* the data of bench/blas_mha.c */
    if (!r || r->pa > 0) {
        fprintf(stderr, "usage: dnnl_mha SECONDS SHAPE (a shape of bench/shapes.h without additive scoring)\n");
        return 2;
    }
    CHECK_DNNL(dnnl_engine_create(&eng, dnnl_cpu, 0));
    CHECK_DNNL(dnnl_stream_create(&strm, eng, dnnl_stream_default_flags));
    memset(&md, 0, sizeof md);
    md.r = r;
    peer_weights(r, w); /* (no additive scoring: the last three are empty) */
    md.wq = w[0]; md.bq = w[1]; md.wk = w[2]; md.bk = w[3]; md.wv = w[4]; md.bv = w[5]; md.wo = w[6]; md.bo = w[7];
    md.q = filled((size_t)r->n * r->dq, 1.0f);
    md.k = filled((size_t)r->m * r->dk, 1.0f);
    md.v = filled((size_t)r->m * r->dv, 1.0f);
    md.qp = filled((size_t)r->n * r->heads * r->pq, 0.0f);
    md.kp = filled((size_t)r->m * r->kv * r->pq, 0.0f);
    md.vp = filled((size_t)r->m * r->kv * r->pv, 0.0f);
    md.cat = filled((size_t)r->n * r->heads * r->pv, 0.0f);
    md.s = filled((size_t)r->heads * r->n * r->m, 0.0f);
    md.out = filled((size_t)r->n * r->po, 0.0f);
    model_make(&md);
    forward(&md);
    diff = peer_check("dnnl_mha", r, (const float *const *)w, md.q, md.k, md.v, md.out);
    start = now();
    while (runs < 2000 && (runs < 3 || now() - start < budget)) {
        t0 = now();
        forward(&md);
        times[runs++] = now() - t0;
    }
    qsort(times, runs, sizeof times[0], cmp_double);
    printf("%s %.5f %.5f %.3g\n", r->name, 1e3 * times[runs / 2], 1e3 * times[0], diff);
    return 0;
}
