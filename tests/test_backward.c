/* tests/test_backward.c - mha_backward against central finite differences.

   For a loss L = sum(d_out * out), out the forward of tests/naive_ref.h in
   double, every gradient mha_backward returns (the inputs' and every
   weight's, bias's and sink's) is compared with (L(x + h) - L(x - h)) /
   ((x + h) - (x - h)), the perturbed values rounded to float and the
   difference taken of those floats (so that the step is exact), h = 2^-10:
   the truncation error is of order h^2 = 1e-6 of the third derivative.
   Bound per array: max |grad - fd| <= TOL (1 + max |fd|), TOL = 2e-5.
   Cases: all sizes different with GQA and biases, batch 2; additive
   scoring; every mask kind with a fully masked row; ALiBi, the soft-cap and
   sinks; a scale of its own. Also: gradients add up over calls (+=), NULL
   outputs are skipped, finite inputs give finite gradients where rows are
   fully masked, bad input gives its status with nothing written, and the
   workspace has no n x m term (it doubles from n = m = 2048 to 4096). And
   (check_fast) mha_backward against mha_backward_reference, with and without
   the forward's statistics, and mha_forward_lse against the double forward;
   check_nan_masked: a NaN in d_out never reaches a key its row cannot see;
   check_lse_empty_row: the lse of a row that sees no key, and an lse that
   is not finite given back. */
#include "test_util.h"
#include "naive_ref.h"
#ifdef REF_BACKWARD_FILE
#include REF_BACKWARD_FILE
#else
#include "ref_backward.h" /* tests/gen_backward.py: PyTorch autograd in float64 */
#endif

#define TOL 2e-5
#if defined(MHA_NO_EXTRAS) && MHA_NO_EXTRAS /* (set for the implementation's file too) */
#define TB_NO_EXTRAS 1
#else
#define TB_NO_EXTRAS 0
#endif
#define STEP (1.0f / 1024.0f)

static double worst_ratio;

typedef struct fd_case {
    tu_problem p;
    mha_mask mask;
    float *dout;
} fd_case;

/* The loss of the case, in double. */
static double loss(fd_case *fc) {
    const tu_problem *p = &fc->p;
    size_t no = (size_t)p->batch * (size_t)p->n * (size_t)p->s.p_o, i;
    double *out = (double *)malloc((no ? no : 1) * sizeof(double)), L = 0.0;
    naive_forward(&p->s, &p->w, p->batch, p->n, p->m, p->q, p->k, p->v, &fc->mask, out, NULL);
    for (i = 0; i < no; ++i) L += (double)fc->dout[i] * out[i];
    free(out);
    return L;
}

/* Compares grad [count] with the finite differences of the loss in the
   float array x [count] (perturbed in place and restored). */
static void compare(fd_case *fc, const char *what, const char *name, float *x, const float *grad, size_t count) {
    double e = 0.0, big = 0.0, fd;
    size_t i;
    for (i = 0; i < count; ++i) {
        const float x0 = x[i], xp = x0 + STEP, xm = x0 - STEP;
        double lp, lm;
        x[i] = xp;
        lp = loss(fc);
        x[i] = xm;
        lm = loss(fc);
        x[i] = x0;
        fd = (lp - lm) / ((double)xp - (double)xm);
        if (fabs(fd) > big) big = fabs(fd);
        if (!(fabs(fd - (double)grad[i]) <= e)) e = fabs(fd - (double)grad[i]);
    }
    if (e / (TOL * (1.0 + big)) > worst_ratio) worst_ratio = e / (TOL * (1.0 + big));
    CHECK(e <= TOL * (1.0 + big), "%s: %s: max |grad - fd| %.3g > %.3g (max |fd| %.3g)", what, name, e,
          TOL * (1.0 + big), big);
}

/* One case: mha_backward's gradients of everything against finite differences. */
static void check_case(const char *what, fd_case *fc) {
    tu_problem *p = &fc->p;
    mha_weight_counts wc;
    mha_grads g;
    size_t nq = (size_t)p->batch * (size_t)p->n * (size_t)p->s.d_q, nk = (size_t)p->batch * (size_t)p->m * (size_t)p->s.d_k;
    size_t nv = (size_t)p->batch * (size_t)p->m * (size_t)p->s.d_v, bytes = mha_backward_workspace_size(&p->s, p->batch, p->n, p->m);
    float *dq = tu_floats(nq, 0.0f), *dk = tu_floats(nk, 0.0f), *dv = tu_floats(nv, 0.0f);
    void *ws = malloc(bytes);
    size_t k;
    float *arrays[12];
    mha_weight_counts_get(&p->s, &wc);
    memset(&g, 0, sizeof g);
    g.w_q = tu_floats(wc.w_q, 0.0f); g.w_k = tu_floats(wc.w_k, 0.0f); g.w_v = tu_floats(wc.w_v, 0.0f);
    g.w_o = tu_floats(wc.w_o, 0.0f);
    g.b_q = tu_floats(wc.b_q, 0.0f); g.b_k = tu_floats(wc.b_k, 0.0f); g.b_v = tu_floats(wc.b_v, 0.0f);
    g.b_o = tu_floats(wc.b_o, 0.0f);
    g.a_q = tu_floats(wc.a_q, 0.0f); g.a_k = tu_floats(wc.a_k, 0.0f); g.a_v = tu_floats(wc.a_v, 0.0f);
    g.sinks = tu_floats((size_t)p->s.heads, 0.0f);
    for (k = 0; k < wc.w_q; ++k) g.w_q[k] = 0.0f; /* tu_floats(.., 0) is already 0: kept explicit */
    CHECK(mha_backward(&p->s, &p->w, p->batch, p->n, p->m, p->q, p->k, p->v, &fc->mask, NULL, fc->dout, dq, dk, dv, &g, ws,
                       bytes) == MHA_OK,
          "%s: mha_backward", what);
    compare(fc, what, "d_queries", p->q, dq, nq);
    compare(fc, what, "d_keys", p->k, dk, nk);
    compare(fc, what, "d_values", p->v, dv, nv);
    compare(fc, what, "W_q", (float *)(uintptr_t)p->w.w_q, g.w_q, wc.w_q);
    compare(fc, what, "W_k", (float *)(uintptr_t)p->w.w_k, g.w_k, wc.w_k);
    compare(fc, what, "W_v", (float *)(uintptr_t)p->w.w_v, g.w_v, wc.w_v);
    compare(fc, what, "W_o", (float *)(uintptr_t)p->w.w_o, g.w_o, wc.w_o);
    if (p->w.b_q) {
        compare(fc, what, "b_q", (float *)(uintptr_t)p->w.b_q, g.b_q, wc.b_q);
        compare(fc, what, "b_k", (float *)(uintptr_t)p->w.b_k, g.b_k, wc.b_k);
        compare(fc, what, "b_v", (float *)(uintptr_t)p->w.b_v, g.b_v, wc.b_v);
        compare(fc, what, "b_o", (float *)(uintptr_t)p->w.b_o, g.b_o, wc.b_o);
    }
    if (p->s.score == MHA_SCORE_ADDITIVE) {
        compare(fc, what, "A_q", (float *)(uintptr_t)p->w.a_q, g.a_q, wc.a_q);
        compare(fc, what, "A_k", (float *)(uintptr_t)p->w.a_k, g.a_k, wc.a_k);
        compare(fc, what, "w_a", (float *)(uintptr_t)p->w.a_v, g.a_v, wc.a_v);
    }
    if (p->w.sinks) compare(fc, what, "sinks", (float *)(uintptr_t)p->w.sinks, g.sinks, (size_t)p->s.heads);
    printf("%-40s gradients agree with finite differences\n", what);
    arrays[0] = dq; arrays[1] = dk; arrays[2] = dv; arrays[3] = g.w_q; arrays[4] = g.w_k; arrays[5] = g.w_v;
    arrays[6] = g.w_o; arrays[7] = g.b_q; arrays[8] = g.b_k; arrays[9] = g.b_v; arrays[10] = g.b_o; arrays[11] = g.sinks;
    for (k = 0; k < 12; ++k) free(arrays[k]);
    free(g.a_q); free(g.a_k); free(g.a_v); free(ws);
}

static void make_case(fd_case *fc, const mha_shape *s, int32_t batch, int32_t n, int32_t m, int bias) {
    tu_problem_make(&fc->p, s, batch, n, m, bias);
    memset(&fc->mask, 0, sizeof fc->mask);
    fc->dout = tu_own(&fc->p, tu_floats((size_t)batch * (size_t)n * (size_t)s->p_o, 1.0f));
}

/* The fast path (mha_backward under MHA_FAST 1) against the reference path
   (mha_backward_reference): every gradient array within FTOL (1 + max |ref|)
   on problems with several blocks of query rows and, with m > 1024, several
   chunks of keys; where the fast path does not run (additive scoring, the
   soft-cap) the two are bit for bit the same. Under MHA_FAST 0 both are
   the reference and agree trivially. */
#define FTOL 2e-5
typedef struct fast_case {
    const char *name;
    int32_t heads, kv, dq, dk, dv, pqk, pv, po, additive, batch, n, m;
    int masks; /* 1 causal (offset m - n), 2 valid lengths per query (some 0), 4 keep, 8 bias, 16 causal offset
                  100000 (every key visible, each row's logits shifted: ALiBi's reference distance) */
    int knobs; /* 1 RoPE, 2 ALiBi, 4 soft-cap, 8 sinks, 16 f16 weights, 32 bf16 weights, 64 some outputs NULL */
} fast_case;

static double fast_worst, lse_worst;

static void fast_compare(const char *what, const char *name, const float *got, const float *ref, size_t count,
                         int exact) {
    double e = 0.0, big = 0.0;
    size_t i;
    int finite = 1;
    for (i = 0; i < count; ++i) {
        const double d = fabs((double)got[i] - (double)ref[i]);
        if (fabs((double)ref[i]) > big) big = fabs((double)ref[i]);
        if (!(d <= e)) e = d;
        finite &= isfinite(got[i]) != 0;
    }
    if (exact) {
        CHECK(e == 0.0, "%s: %s: the same path, yet %.3g apart", what, name, e);
        return;
    }
    if (e / (FTOL * (1.0 + big)) > fast_worst) fast_worst = e / (FTOL * (1.0 + big));
    CHECK(finite && e <= FTOL * (1.0 + big), "%s: %s: fast differs from reference by %.3g (max |ref| %.3g)", what,
          name, e, big);
}

/* A parallel-for that runs the tasks last to first (mha_backward_parallel's result must not
   depend on the order); it counts the tasks it ran. */
static int32_t backwards_tasks;
static void backwards_for(void *user, mha_task task, void *arg, int32_t count) {
    int32_t k;
    for (k = count; k-- > 0;) task(arg, k);
    *(int32_t *)user += count;
}

static void check_fast(void) {
    static const fast_case cases[] = {
        {"GQA, sizes different, 3 row blocks", 4, 2, 24, 20, 28, 16, 12, 20, 0, 2, 200, 150, 0, 0},
        {"every mask, rows fully masked", 2, 2, 16, 16, 16, 8, 8, 16, 0, 2, 130, 90, 15, 0},
        {"RoPE, ALiBi, sinks, causal", 4, 1, 16, 12, 16, 8, 6, 10, 0, 1, 70, 60, 1, 1 | 2 | 8},
        {"2 key chunks, every mask", 2, 1, 12, 12, 12, 8, 8, 12, 0, 1, 60, 1100, 15, 0},
        {"5 key chunks, RoPE, ALiBi, sinks", 2, 2, 8, 8, 8, 4, 4, 8, 0, 2, 40, 1300, 1, 1 | 2 | 8},
        {"3 key chunks, ALiBi far from the keys", 2, 1, 8, 8, 8, 4, 4, 8, 0, 1, 20, 700 + 500, 16, 2},
        {"f16 weights, some outputs NULL", 3, 3, 20, 20, 20, 8, 8, 20, 0, 1, 50, 70, 1, 16 | 64},
        {"bf16 weights, GQA", 4, 2, 20, 16, 12, 8, 8, 12, 0, 1, 40, 45, 0, 32},
        {"additive: the reference's", 2, 1, 8, 8, 8, 4, 4, 8, 1, 1, 30, 20, 1, 0},
        {"soft-cap: the reference's", 2, 2, 8, 8, 8, 4, 4, 8, 0, 1, 30, 20, 1, 4},
        {"10 kv heads: 8 tasks, masks", 10, 10, 12, 8, 8, 4, 4, 8, 0, 2, 20, 30, 15, 0},
        {"3 kv heads, 2 key chunks, RoPE", 6, 3, 8, 8, 8, 4, 4, 8, 0, 1, 20, 1100, 1, 1},
    };
    size_t c;
    for (c = 0; c < sizeof cases / sizeof cases[0]; ++c) {
        const fast_case *fc = &cases[c];
        mha_shape s = shape_of(fc->heads, fc->kv, fc->dq, fc->dk, fc->dv, fc->pqk, fc->pv, fc->po, fc->additive);
        tu_problem p;
        tu_w16 w16;
        mha_mask mask;
        mha_weight_counts wc;
        mha_grads g[5];
        const mha_weights *w;
        float *arr[5][15], *dout, *lse, *fout;
        double *dlse, *dref, lerr = 0.0;
        void *fws;
        size_t nl = (size_t)fc->batch * (size_t)fc->heads * (size_t)fc->n;
        size_t counts[15], bytes[5], k, r;
        int32_t *lens = NULL, path;
        uint8_t *keep = NULL;
        float *bias = NULL;
        const size_t nm = (size_t)fc->batch * (size_t)fc->n * (size_t)fc->m;
        const int exact = fc->additive || (fc->knobs & 4);
        static const char *names[15] = {"d_queries", "d_keys", "d_values", "W_q", "b_q", "W_k", "b_k", "W_v", "b_v",
                                        "W_o", "b_o", "A_q", "A_k", "w_a", "sinks"};
        if (TB_NO_EXTRAS && (fc->knobs & 63)) continue;
        if (fc->knobs & 1) s.rope_dim = fc->pqk;
        s.alibi = (fc->knobs & 2) != 0;
        if (fc->knobs & 4) s.softcap = 2.0f;
        tu_problem_make(&p, &s, fc->batch, fc->n, fc->m, 1);
        if (fc->knobs & 8) p.w.sinks = tu_own(&p, tu_floats((size_t)s.heads, 1.0f));
        w = &p.w;
        if (fc->knobs & 48) {
            tu_w16_make(&w16, &s, &p.w, (fc->knobs & 16) ? MHA_F16 : MHA_BF16);
            w = &w16.w16;
        }
        memset(&mask, 0, sizeof mask);
        if (fc->masks & 17) {
            mask.causal = 1;
            mask.causal_offset = (fc->masks & 16) ? 100000 : fc->m - fc->n;
        }
        if (fc->masks & 2) {
            lens = (int32_t *)malloc((size_t)fc->batch * (size_t)fc->n * sizeof *lens);
            for (r = 0; r < (size_t)fc->batch * (size_t)fc->n; ++r)
                lens[r] = r % 7 == 3 ? 0 : (int32_t)(tu_next() % (uint32_t)(fc->m + 1));
            mask.valid_lens = lens;
            mask.valid_lens_per_query = 1;
        }
        if (fc->masks & 4) {
            keep = (uint8_t *)malloc(nm);
            for (r = 0; r < nm; ++r) keep[r] = (uint8_t)(tu_next() % 5 != 0);
            mask.keep = keep;
        }
        if (fc->masks & 8) {
            bias = tu_floats(nm, 2.0f);
            mask.bias = bias;
        }
        dout = tu_floats((size_t)fc->batch * (size_t)fc->n * (size_t)fc->po, 1.0f);
        mha_weight_counts_get(&s, &wc);
        counts[0] = (size_t)fc->batch * (size_t)fc->n * (size_t)fc->dq;
        counts[1] = (size_t)fc->batch * (size_t)fc->m * (size_t)fc->dk;
        counts[2] = (size_t)fc->batch * (size_t)fc->m * (size_t)fc->dv;
        counts[3] = wc.w_q; counts[4] = wc.b_q; counts[5] = wc.w_k; counts[6] = wc.b_k; counts[7] = wc.w_v;
        counts[8] = wc.b_v; counts[9] = wc.w_o; counts[10] = wc.b_o; counts[11] = wc.a_q; counts[12] = wc.a_k;
        counts[13] = wc.a_v; counts[14] = (size_t)s.heads;
        /* the forward's statistics (mha_forward_lse) against the double forward's */
        lse = tu_floats(nl, 0.0f);
        fout = tu_floats((size_t)fc->batch * (size_t)fc->n * (size_t)fc->po, 0.0f);
        dlse = (double *)malloc(nl * sizeof(double));
        dref = (double *)malloc((size_t)fc->batch * (size_t)fc->n * (size_t)fc->po * sizeof(double));
        fws = malloc(mha_workspace_size(&s, fc->batch, fc->n, fc->m));
        CHECK(mha_forward_lse(&s, w, fc->batch, fc->n, fc->m, p.q, p.k, p.v, &mask, fout, lse, fws,
                              mha_workspace_size(&s, fc->batch, fc->n, fc->m)) == MHA_OK,
              "%s: mha_forward_lse", fc->name);
        naive_lse = dlse;
        naive_forward(&s, (fc->knobs & 48) ? &w16.w32 : &p.w, fc->batch, fc->n, fc->m, p.q, p.k, p.v, &mask, dref, NULL);
        naive_lse = NULL;
        for (r = 0; r < nl; ++r) {
            const double d = dlse[r] == -HUGE_VAL ? (lse[r] == -INFINITY ? 0.0 : 1.0) : fabs((double)lse[r] - dlse[r]) /
                                                                                           (1.0 + fabs(dlse[r]));
            if (!(d <= lerr)) lerr = d;
        }
        CHECK(lerr <= 1e-5, "%s: mha_forward_lse differs from the double forward's by %.3g (relative to 1 + |lse|)",
              fc->name, lerr);
        if (lerr > lse_worst) lse_worst = lerr;
        bytes[0] = bytes[2] = mha_backward_workspace_size(&s, fc->batch, fc->n, fc->m);
        bytes[1] = mha_backward_reference_workspace_size(&s, fc->batch, fc->n, fc->m);
        bytes[3] = bytes[4] = mha_backward_parallel_workspace_size(&s, fc->batch, fc->n, fc->m);
        for (path = 0; path < 5; ++path) { /* fast, reference, fast with lse, parallel (NULL), parallel (backwards) */
            void *ws = malloc(bytes[path]);
            mha_status st;
            for (k = 0; k < 15; ++k) /* the weights' gradients start at 0.5: they are added to */
                arr[path][k] = (fc->knobs & 64) && (k == 1 || k == 5 || k == 10) ? NULL
                                                                                  : tu_floats(counts[k] ? counts[k] : 1, 0.0f);
            for (k = 3; k < 15; ++k)
                for (r = 0; arr[path][k] && r < counts[k]; ++r) arr[path][k][r] = 0.5f;
            g[path].w_q = arr[path][3]; g[path].b_q = arr[path][4]; g[path].w_k = arr[path][5];
            g[path].b_k = arr[path][6]; g[path].w_v = arr[path][7]; g[path].b_v = arr[path][8];
            g[path].w_o = arr[path][9]; g[path].b_o = arr[path][10]; g[path].a_q = arr[path][11];
            g[path].a_k = arr[path][12]; g[path].a_v = arr[path][13]; g[path].sinks = arr[path][14];
            if (path < 3)
                st = (path == 1 ? mha_backward_reference : mha_backward)(&s, w, fc->batch, fc->n, fc->m, p.q, p.k, p.v,
                                                                          &mask, path == 2 ? lse : NULL, dout,
                                                                          arr[path][0], arr[path][1], arr[path][2],
                                                                          &g[path], ws, bytes[path]);
            else
                st = mha_backward_parallel(&s, w, fc->batch, fc->n, fc->m, p.q, p.k, p.v, &mask, NULL, dout,
                                           arr[path][0], arr[path][1], arr[path][2], &g[path], ws, bytes[path],
                                           path == 4 ? backwards_for : NULL, &backwards_tasks);
            CHECK(st == MHA_OK, "%s: %s", fc->name, path == 1 ? "mha_backward_reference" : path < 3 ? "mha_backward"
                                                                                                   : "mha_backward_parallel");
            if (path == 3 && bytes[3] > 1) /* one byte short */
                CHECK(mha_backward_parallel(&s, w, fc->batch, fc->n, fc->m, p.q, p.k, p.v, &mask, NULL, dout,
                                            arr[path][0], arr[path][1], arr[path][2], &g[path], ws, bytes[3] - 1, NULL,
                                            NULL) == MHA_ERR_WORKSPACE,
                      "%s: mha_backward_parallel, a workspace one byte short", fc->name);
            free(ws);
            /* compared as soon as they can be, and freed: at most three sets at once (the 2 MiB
               Cortex-M33 and M55) */
            for (k = 0; k < 15 && path >= 2; ++k) {
                if (!arr[path][k] || !counts[k]) continue;
                if (path == 2) { /* without and with the forward's statistics */
                    fast_compare(fc->name, names[k], arr[0][k], arr[1][k], counts[k], exact);
                    fast_compare(fc->name, names[k], arr[2][k], arr[1][k], counts[k], exact);
                } else if (path == 3) { /* mha_backward_parallel: within the bound; a weight's gradient is one
                                           task's, mha_backward's bit for bit */
                    fast_compare(fc->name, names[k], arr[3][k], arr[1][k], counts[k], exact);
                    CHECK(k < 3 || memcmp(arr[3][k], arr[0][k], counts[k] * sizeof(float)) == 0,
                          "%s: mha_backward_parallel's %s differ from mha_backward's (a weight's gradient is one "
                          "task's)", fc->name, names[k]);
                } else { /* the same bits for any parallel_for */
                    CHECK(memcmp(arr[3][k], arr[4][k], counts[k] * sizeof(float)) == 0,
                          "%s: mha_backward_parallel's %s differ with its tasks run in another order", fc->name,
                          names[k]);
                }
            }
            for (k = 0; k < 15 && path >= 2; ++k) { /* no longer needed */
                const int last = path == 2 ? 2 : path == 3 ? 1 : 4;
                int q;
                for (q = path == 3 ? 0 : last; q <= last; ++q) {
                    free(arr[q][k]);
                    arr[q][k] = NULL;
                }
            }
            if (path == 4)
                for (k = 0; k < 15; ++k) {
                    free(arr[3][k]);
                    arr[3][k] = NULL;
                }
        }
        CHECK(backwards_tasks > 0 || !mha_build_info().fast || exact, "%s: mha_backward_parallel never called "
              "its parallel_for", fc->name);
        backwards_tasks = 0;
        printf("fast path: %-36s %s\n", fc->name, exact ? "the reference's, bit for bit" : "agrees with the reference");
        for (path = 0; path < 5; ++path)
            for (k = 0; k < 15; ++k) free(arr[path][k]);
        free(lse);
        free(fout);
        free(dlse);
        free(dref);
        free(fws);
        if (fc->knobs & 48) tu_w16_free(&w16);
        free(dout);
        free(lens);
        free(keep);
        free(bias);
        tu_problem_free(&p);
    }
    printf("fast path against the reference: worst %.3f of %.0e (1 + max |ref|)%s\n", fast_worst, FTOL,
           mha_build_info().fast ? "" : " (MHA_FAST 0: both are the reference)");
    printf("mha_forward_lse against the double forward: worst %.2e relative to 1 + |lse|\n", lse_worst);
}

/* The PyTorch cases: every gradient within 1e-5 (1 + max |ref|). */
static void check_torch(void) {
    static const char *names[] = BWD_GRADS;
    double worst = 0.0;
    int c, k;
    for (c = 0; c < BWD_CASE_COUNT; ++c) {
        const bwd_case *bc = &bwd_cases[c];
        mha_weight_counts wc;
        mha_grads g;
        size_t counts[15], bytes = mha_backward_workspace_size(&bc->shape, bc->batch, bc->n, bc->m), i;
        float *got[15];
        void *ws = malloc(bytes ? bytes : 1);
        int ok = 1;
        mha_status st;
        mha_weight_counts_get(&bc->shape, &wc);
        counts[0] = (size_t)bc->batch * (size_t)bc->n * (size_t)bc->shape.d_q;
        counts[1] = (size_t)bc->batch * (size_t)bc->m * (size_t)bc->shape.d_k;
        counts[2] = (size_t)bc->batch * (size_t)bc->m * (size_t)bc->shape.d_v;
        counts[3] = wc.w_q; counts[4] = wc.b_q; counts[5] = wc.w_k; counts[6] = wc.b_k; counts[7] = wc.w_v;
        counts[8] = wc.b_v; counts[9] = wc.w_o; counts[10] = wc.b_o; counts[11] = wc.a_q; counts[12] = wc.a_k;
        counts[13] = wc.a_v; counts[14] = (size_t)bc->shape.heads;
        for (k = 0; k < 15; ++k) got[k] = bc->grad[k] ? tu_floats(counts[k], 0.0f) : NULL;
        g.w_q = got[3]; g.b_q = got[4]; g.w_k = got[5]; g.b_k = got[6]; g.w_v = got[7]; g.b_v = got[8];
        g.w_o = got[9]; g.b_o = got[10]; g.a_q = got[11]; g.a_k = got[12]; g.a_v = got[13]; g.sinks = got[14];
        st = mha_backward(&bc->shape, &bc->w, bc->batch, bc->n, bc->m, bc->queries, bc->keys, bc->values, &bc->mask, NULL,
                          bc->d_out, got[0], got[1], got[2], &g, ws, bytes);
        if (TB_NO_EXTRAS && (bc->shape.rope_dim || bc->shape.alibi || bc->shape.softcap != 0.0f || bc->w.sinks)) {
            CHECK(st == MHA_ERR_SHAPE, "PyTorch %s/%s: the knobs refused under MHA_NO_EXTRAS", bc->group, bc->name);
            for (k = 0; k < 15; ++k) free(got[k]);
            free(ws);
            continue;
        }
        ok &= st == MHA_OK;
        for (k = 0; k < 15; ++k) {
            double e = 0.0, big = 0.0;
            if (!bc->grad[k]) continue;
            for (i = 0; i < counts[k]; ++i) {
                const double d = fabs((double)got[k][i] - (double)bc->grad[k][i]);
                if (fabs((double)bc->grad[k][i]) > big) big = fabs((double)bc->grad[k][i]);
                if (!(d <= e)) e = d;
            }
            if (e / (1e-5 * (1.0 + big)) > worst) worst = e / (1e-5 * (1.0 + big));
            CHECK(e <= 1e-5 * (1.0 + big), "PyTorch %s/%s: %s differs by %.3g (max |ref| %.3g)", bc->group, bc->name,
                  names[k], e, big);
            ok &= e <= 1e-5 * (1.0 + big);
        }
        CHECK(ok, "PyTorch %s/%s", bc->group, bc->name);
        for (k = 0; k < 15; ++k) free(got[k]);
        free(ws);
    }
    printf("%d PyTorch autograd cases: worst gradient error %.3f of 1e-5 (1 + max |ref|)\n", BWD_CASE_COUNT, worst);
}

/* Gradients add up (+=), NULL outputs are skipped, and a fully masked row
   leaves finite gradients. */
static void check_accumulate(void) {
    mha_shape s = shape_of(2, 1, 4, 5, 3, 3, 2, 4, 0);
    fd_case fc;
    mha_grads g;
    mha_weight_counts wc;
    int32_t lens[2] = {0, 3}; /* batch entry 0 sees nothing */
    size_t bytes, k, nk;
    void *ws;
    float *once, *dk;
    int finite = 1, doubled = 1;
    make_case(&fc, &s, 2, 3, 3, 1);
    fc.mask.valid_lens = lens;
    bytes = mha_backward_workspace_size(&s, 2, 3, 3);
    ws = malloc(bytes);
    mha_weight_counts_get(&s, &wc);
    memset(&g, 0, sizeof g);
    g.w_k = tu_floats(wc.w_k, 0.0f);
    once = tu_floats(wc.w_k, 0.0f);
    nk = (size_t)2 * 3 * (size_t)s.d_k;
    dk = tu_floats(nk, 0.0f);
    CHECK(mha_backward(&s, &fc.p.w, 2, 3, 3, fc.p.q, fc.p.k, fc.p.v, &fc.mask, NULL, fc.dout, NULL, dk, NULL, &g, ws, bytes) ==
              MHA_OK,
          "accumulate: first call");
    memcpy(once, g.w_k, wc.w_k * sizeof(float));
    CHECK(mha_backward(&s, &fc.p.w, 2, 3, 3, fc.p.q, fc.p.k, fc.p.v, &fc.mask, NULL, fc.dout, NULL, NULL, NULL, &g, ws,
                       bytes) == MHA_OK,
          "accumulate: second call");
    for (k = 0; k < wc.w_k; ++k) doubled &= fabsf(g.w_k[k] - 2.0f * once[k]) <= 1e-6f * (1.0f + fabsf(once[k]));
    for (k = 0; k < nk; ++k) finite &= dk[k] - dk[k] == 0.0f;
    for (k = 0; k < (size_t)3 * (size_t)s.d_k; ++k) finite &= dk[k] == 0.0f; /* entry 0's keys: no gradient */
    CHECK(doubled, "accumulate: a second call adds the same gradient (to float rounding)");
    CHECK(finite, "accumulate: finite, and 0 for keys no query sees");
    CHECK(mha_backward(&s, &fc.p.w, 2, 3, 3, fc.p.q, fc.p.k, fc.p.v, &fc.mask, NULL, fc.dout, NULL, NULL, NULL, NULL, ws,
                       bytes) == MHA_OK,
          "accumulate: nothing wanted");
    free(g.w_k); free(once); free(dk); free(ws);
    tu_problem_free(&fc.p);
}

/* A bias of -inf masks its key: the gradients equal those of keep = 0 there,
   bit for bit. */
static void check_bias_inf(void) {
    mha_shape s = shape_of(2, 1, 4, 3, 5, 3, 2, 3, 0);
    fd_case fc;
    float bias_inf[2 * 3 * 4], bias_fin[2 * 3 * 4], *r1, *r2;
    uint8_t keep[2 * 3 * 4];
    size_t k, bytes = mha_backward_workspace_size(&s, 2, 3, 4), nk = (size_t)2 * 4 * (size_t)s.d_k;
    void *ws = malloc(bytes);
    make_case(&fc, &s, 2, 3, 4, 1);
    for (k = 0; k < sizeof keep; ++k) {
        bias_fin[k] = tu_uniform(-1.0f, 1.0f);
        keep[k] = (uint8_t)(k % 4 == 0 || tu_next() % 3 != 0);
        bias_inf[k] = keep[k] ? bias_fin[k] : -INFINITY;
    }
    r1 = tu_floats(nk, 0.0f);
    r2 = tu_floats(nk, 0.0f);
    fc.mask.bias = bias_inf;
    CHECK(mha_backward(&s, &fc.p.w, 2, 3, 4, fc.p.q, fc.p.k, fc.p.v, &fc.mask, NULL, fc.dout, NULL, r1, NULL, NULL, ws,
                       bytes) == MHA_OK,
          "bias -inf: call");
    fc.mask.bias = bias_fin;
    fc.mask.keep = keep;
    CHECK(mha_backward(&s, &fc.p.w, 2, 3, 4, fc.p.q, fc.p.k, fc.p.v, &fc.mask, NULL, fc.dout, NULL, r2, NULL, NULL, ws,
                       bytes) == MHA_OK,
          "bias -inf: keep call");
    CHECK(memcmp(r1, r2, nk * sizeof(float)) == 0 && tu_all_finite(r1, nk),
          "bias -inf: the same key gradients as keep = 0");
    free(r1); free(r2); free(ws);
    tu_problem_free(&fc.p);
}

#if !MHA_NO_EXTRAS
/* 16-bit weights: the gradients of float weights of the same values, bit for bit. */
static void check_16bit(void) {
    mha_shape s = shape_of(4, 2, 6, 5, 7, 4, 3, 5, 0);
    int ti;
    s.rope_dim = 2;
    for (ti = 0; ti < 2; ++ti) {
        const int32_t type = ti ? MHA_BF16 : MHA_F16;
        fd_case fc;
        mha_weight_counts wc;
        tu_w16 b;
        mha_grads g16, g32;
        float *gr[2][4], *dq[2];
        size_t counts[4], k, bytes = mha_backward_workspace_size(&s, 2, 3, 4), nq;
        void *ws = malloc(bytes);
        int same = 1, v;
        make_case(&fc, &s, 2, 3, 4, 1);
        mha_weight_counts_get(&s, &wc);
        counts[0] = wc.w_q; counts[1] = wc.w_k; counts[2] = wc.w_v; counts[3] = wc.w_o;
        tu_w16_make(&b, &s, &fc.p.w, type);
        for (k = 0; k < 4; ++k)
            for (v = 0; v < 2; ++v) gr[v][k] = tu_floats(counts[k], 0.0f);
        nq = (size_t)2 * 3 * (size_t)s.d_q;
        dq[0] = tu_floats(nq, 0.0f);
        dq[1] = tu_floats(nq, 0.0f);
        memset(&g16, 0, sizeof g16);
        memset(&g32, 0, sizeof g32);
        g16.w_q = gr[0][0]; g16.w_k = gr[0][1]; g16.w_v = gr[0][2]; g16.w_o = gr[0][3];
        g32.w_q = gr[1][0]; g32.w_k = gr[1][1]; g32.w_v = gr[1][2]; g32.w_o = gr[1][3];
        CHECK(mha_backward(&s, &b.w16, 2, 3, 4, fc.p.q, fc.p.k, fc.p.v, NULL, NULL, fc.dout, dq[0], NULL, NULL, &g16, ws,
                           bytes) == MHA_OK &&
                  mha_backward(&s, &b.w32, 2, 3, 4, fc.p.q, fc.p.k, fc.p.v, NULL, NULL, fc.dout, dq[1], NULL, NULL, &g32, ws,
                               bytes) == MHA_OK,
              "16-bit weights: calls");
        for (k = 0; k < 4; ++k) same &= memcmp(gr[0][k], gr[1][k], counts[k] * sizeof(float)) == 0;
        same &= memcmp(dq[0], dq[1], nq * sizeof(float)) == 0;
        CHECK(same, "%s weights: the gradients of float weights of the same values, bit for bit",
              ti ? "bf16" : "f16");
        for (k = 0; k < 4; ++k) {
            free(gr[0][k]); free(gr[1][k]);
        }
        tu_w16_free(&b);
        free(dq[0]); free(dq[1]); free(ws);
        tu_problem_free(&fc.p);
    }
}
#endif

/* A NaN in d_out never crosses a mask: 1 head, d = p = 2, n = 2, m = 2 and
   m = 1030 (several chunks on the fast path); d_out's row 0 NaN, row 0
   seeing no key (valid lengths per query 0, m) or key 0 only (causal): the
   gradients of every key row 0 cannot see are finite, and each gradient is
   NaN on the fast path exactly where it is on the reference path. */
static void check_nan_masked(void) {
    mha_shape s = shape_of(1, 1, 2, 2, 2, 2, 2, 2, 0);
    int mi, kind;
    for (mi = 0; mi < 2; ++mi)
        for (kind = 0; kind < 2; ++kind) {
            const int32_t m = mi ? 1030 : 2;
            fd_case fc;
            int32_t lens[2] = {0, m};
            size_t nk = (size_t)m * 2, bytes = mha_backward_workspace_size(&s, 1, 2, m), rbytes, k;
            size_t rb = mha_backward_reference_workspace_size(&s, 1, 2, m);
            float *dk[2], *dv[2], *dq[2];
            void *ws;
            int finite = 1, same = 1, v;
            rbytes = rb > bytes ? rb : bytes;
            ws = malloc(rbytes);
            make_case(&fc, &s, 1, 2, m, 1);
            fc.dout[0] = NAN;
            if (kind) {
                fc.mask.causal = 1;
            } else {
                fc.mask.valid_lens = lens;
                fc.mask.valid_lens_per_query = 1;
            }
            for (v = 0; v < 2; ++v) {
                dk[v] = tu_floats(nk, 0.0f);
                dv[v] = tu_floats(nk, 0.0f);
                dq[v] = tu_floats(4, 0.0f);
            }
            CHECK(mha_backward(&s, &fc.p.w, 1, 2, m, fc.p.q, fc.p.k, fc.p.v, &fc.mask, NULL, fc.dout, dq[0], dk[0],
                               dv[0], NULL, ws, bytes) == MHA_OK &&
                      mha_backward_reference(&s, &fc.p.w, 1, 2, m, fc.p.q, fc.p.k, fc.p.v, &fc.mask, NULL, fc.dout,
                                             dq[1], dk[1], dv[1], NULL, ws, rb) == MHA_OK,
                  "NaN in d_out, m %d: calls", (int)m);
            for (v = 0; v < 2; ++v) {
                finite &= tu_all_finite(dk[v] + (kind ? 2 : 0), nk - (kind ? 2 : 0));
                finite &= tu_all_finite(dv[v] + (kind ? 2 : 0), nk - (kind ? 2 : 0));
            }
            for (k = 0; k < nk; ++k) same &= isnan(dk[0][k]) == isnan(dk[1][k]) && isnan(dv[0][k]) == isnan(dv[1][k]);
            for (k = 0; k < 4; ++k) same &= isnan(dq[0][k]) == isnan(dq[1][k]);
            CHECK(finite, "NaN in d_out, m %d, row 0 %s: the keys it cannot see get finite gradients", (int)m,
                  kind ? "sees key 0" : "sees nothing");
            CHECK(same, "NaN in d_out, m %d, row 0 %s: NaN where the reference has NaN", (int)m,
                  kind ? "sees key 0" : "sees nothing");
            for (v = 0; v < 2; ++v) {
                free(dk[v]); free(dv[v]); free(dq[v]);
            }
            free(ws);
            tu_problem_free(&fc.p);
        }
}

#if !MHA_NO_EXTRAS
/* The lse of a row that sees no key: -inf without sinks, the sink's logit
   with one (ln e^sink); given to mha_backward, -inf (as a caller may save
   it for such a row) or any other value that is not finite gives the
   gradients of lse NULL, bit for bit. 1 head, all sizes 1, m = 1100 (several
   chunks on the fast path), n = 3, causal offset -1: row 0 sees nothing. */
static void check_lse_empty_row(void) {
    mha_shape s = shape_of(1, 1, 1, 1, 1, 1, 1, 1, 0);
    const int32_t n = 3, m = 1100;
    int sinks, v;
    for (sinks = 0; sinks < 2; ++sinks) {
        fd_case fc;
        float lse[3], given[3], sink[1] = {0.5f}, *dk[4], gs[4], *out;
        const float bad[4] = {0.0f, -INFINITY, NAN, INFINITY}; /* v 0: the forward's lse; 1-3: row 0's replaced */
        mha_grads g[4];
        size_t bytes = mha_backward_workspace_size(&s, 1, n, m), fb = mha_workspace_size(&s, 1, n, m);
        void *ws = malloc(bytes > fb ? bytes : fb), *ws2 = malloc(bytes);
        float *nul_dk = tu_floats((size_t)m, 0.0f), nul_gs = 0.0f;
        mha_grads gn;
        int same = 1;
        make_case(&fc, &s, 1, n, m, 1);
        if (sinks) fc.p.w.sinks = sink;
        fc.mask.causal = 1;
        fc.mask.causal_offset = -1;
        out = tu_floats((size_t)n, 0.0f);
        CHECK(mha_forward_lse(&s, &fc.p.w, 1, n, m, fc.p.q, fc.p.k, fc.p.v, &fc.mask, out, lse, ws, fb) == MHA_OK,
              "lse, empty row: forward");
        CHECK(sinks ? lse[0] == 0.5f : lse[0] == -INFINITY,
              "lse of a row that sees no key, %s: %s (got %g)", sinks ? "sink 0.5" : "no sink",
              sinks ? "the sink's logit" : "-inf", (double)lse[0]);
        memset(&gn, 0, sizeof gn);
        gn.sinks = sinks ? &nul_gs : NULL;
        CHECK(mha_backward(&s, &fc.p.w, 1, n, m, fc.p.q, fc.p.k, fc.p.v, &fc.mask, NULL, fc.dout, NULL, nul_dk, NULL,
                           &gn, ws2, bytes) == MHA_OK,
              "lse, empty row: backward, lse NULL");
        for (v = 0; v < 4; ++v) {
            memcpy(given, lse, sizeof lse);
            if (v) given[0] = bad[v];
            dk[v] = tu_floats((size_t)m, 0.0f);
            gs[v] = 0.0f;
            memset(&g[v], 0, sizeof g[v]);
            g[v].sinks = sinks ? &gs[v] : NULL;
            CHECK(mha_backward(&s, &fc.p.w, 1, n, m, fc.p.q, fc.p.k, fc.p.v, &fc.mask, given, fc.dout, NULL, dk[v],
                               NULL, &g[v], ws2, bytes) == MHA_OK,
                  "lse, empty row: backward, lse %d", v);
            if (v == 0) {
                CHECK(fabs((double)gs[0] - (double)nul_gs) <= 1e-5 * (1.0 + fabs((double)nul_gs)) &&
                          tu_max_diff(dk[0], nul_dk, (size_t)m) <= 1e-5f * (1.0f + tu_max_abs(nul_dk, (size_t)m)),
                      "lse, empty row, %s: the forward's lse gives lse NULL's gradients (d sink %g against %g)",
                      sinks ? "sink" : "no sink", (double)gs[0], (double)nul_gs);
                continue;
            }
            same &= memcmp(dk[v], nul_dk, (size_t)m * sizeof(float)) == 0 && memcmp(&gs[v], &nul_gs, sizeof gs[v]) == 0;
        }
        CHECK(same && tu_all_finite(nul_dk, (size_t)m) && nul_gs == nul_gs,
              "lse, empty row, %s: -inf, NaN or +inf given for it gives lse NULL's gradients, bit for bit",
              sinks ? "sink" : "no sink");
        for (v = 0; v < 4; ++v) free(dk[v]);
        free(nul_dk); free(out); free(ws); free(ws2);
        tu_problem_free(&fc.p);
    }
}
#endif

/* Bad input: its status, and nothing written. */
static void check_bad_input(void) {
    mha_shape s = shape_of(2, 2, 4, 4, 4, 2, 2, 4, 0), r;
    fd_case fc;
    mha_grads g;
    float gw[32], dq[64], canary = 12345.0f;
    int32_t lens[1] = {4};
    size_t bytes = mha_backward_workspace_size(&s, 1, 3, 3), k;
    unsigned char *ws = (unsigned char *)malloc(bytes + 1);
    int untouched = 1;
    mha_weights w16;
    make_case(&fc, &s, 1, 3, 3, 0);
    memset(&g, 0, sizeof g);
    for (k = 0; k < 32; ++k) gw[k] = canary;
    for (k = 0; k < 64; ++k) dq[k] = canary;
    g.w_q = gw;
    CHECK(mha_backward(&s, &fc.p.w, 1, 3, 3, fc.p.q, fc.p.k, fc.p.v, NULL, NULL, NULL, dq, NULL, NULL, &g, ws, bytes) ==
              MHA_ERR_NULL,
          "bad input: d_out NULL");
    CHECK(mha_backward(&s, &fc.p.w, 1, 3, 3, fc.p.q, fc.p.k, fc.p.v, NULL, NULL, fc.dout, dq, NULL, NULL, &g, ws,
                       bytes - 1) == MHA_ERR_WORKSPACE,
          "bad input: workspace one byte short");
    fc.mask.valid_lens = lens;
    CHECK(mha_backward(&s, &fc.p.w, 1, 3, 3, fc.p.q, fc.p.k, fc.p.v, &fc.mask, NULL, fc.dout, dq, NULL, NULL, &g, ws,
                       bytes) == MHA_ERR_MASK,
          "bad input: valid length 4 > m = 3");
    r = s;
    r.rope_dim = 3; /* odd */
    CHECK(mha_backward(&r, &fc.p.w, 1, 3, 3, fc.p.q, fc.p.k, fc.p.v, NULL, NULL, fc.dout, dq, NULL, NULL, &g, ws, bytes) ==
              MHA_ERR_SHAPE,
          "bad input: an odd rotary dimension");
    w16 = fc.p.w;
    w16.type = 3;
    CHECK(mha_backward(&s, &w16, 1, 3, 3, fc.p.q, fc.p.k, fc.p.v, NULL, NULL, fc.dout, dq, NULL, NULL, &g, ws, bytes) ==
              MHA_ERR_SHAPE,
          "bad input: weight type 3");
    w16 = fc.p.w;
    w16.w_o = NULL;
    CHECK(mha_backward(&s, &w16, 1, 3, 3, fc.p.q, fc.p.k, fc.p.v, NULL, NULL, fc.dout, dq, NULL, NULL, &g, ws, bytes) ==
              MHA_ERR_NULL,
          "bad input: W_o NULL");
    CHECK(mha_backward(&s, &fc.p.w, 1, 3, 3, fc.p.q, NULL, fc.p.v, NULL, NULL, fc.dout, dq, NULL, NULL, &g, ws, bytes) ==
              MHA_ERR_NULL,
          "bad input: keys NULL");
    CHECK(mha_backward(&s, &fc.p.w, -1, 3, 3, fc.p.q, fc.p.k, fc.p.v, NULL, NULL, fc.dout, dq, NULL, NULL, &g, ws, bytes) ==
              MHA_ERR_SHAPE,
          "bad input: batch -1");
    CHECK(mha_backward_workspace_size(&s, 1, INT32_MAX, INT32_MAX) == 0 || sizeof(size_t) > 4,
          "bad input: an overflowing size gives 0");
    for (k = 0; k < 32; ++k) untouched &= gw[k] == canary;
    for (k = 0; k < 64; ++k) untouched &= dq[k] == canary;
    CHECK(untouched, "bad input: nothing written");
    CHECK(mha_backward(&s, &fc.p.w, 1, 3, 3, fc.p.q, fc.p.k, fc.p.v, NULL, NULL, fc.dout, dq, NULL, NULL, &g, ws + 1,
                       bytes) == MHA_OK,
          "bad input: the exact size at an odd address works");
    free(ws);
    tu_problem_free(&fc.p);
}

int main(void) {
    mha_shape s, big;
    fd_case fc;
    int32_t lens[6] = {4, 0, 2, 3, 1, 4};
    uint8_t keep[2 * 3 * 4];
    float bias[2 * 3 * 4];
    size_t k, ws4096, ws2048;
    tu_seed(20261203u);

    s = shape_of(4, 2, 5, 6, 7, 3, 4, 5, 0); /* every size different, GQA */
    make_case(&fc, &s, 2, 3, 4, 1);
    check_case("dot, GQA, all sizes different, batch 2", &fc);
    tu_problem_free(&fc.p);

#if !MHA_NO_ADDITIVE
    s = shape_of(2, 1, 4, 5, 3, 3, 2, 4, 1); /* additive */
    make_case(&fc, &s, 2, 3, 4, 1);
    check_case("additive scoring, GQA", &fc);
    tu_problem_free(&fc.p);
#endif

    s = shape_of(2, 2, 4, 3, 5, 3, 2, 3, 0); /* every mask kind; row 1 of entry 0 sees nothing */
    make_case(&fc, &s, 2, 3, 4, 1);
    fc.mask.causal = 1;
    fc.mask.causal_offset = 1;
    fc.mask.valid_lens = lens;
    fc.mask.valid_lens_per_query = 1;
    for (k = 0; k < sizeof keep; ++k) keep[k] = (uint8_t)(tu_next() % 4 != 0);
    for (k = 0; k < sizeof bias / sizeof bias[0]; ++k) bias[k] = tu_uniform(-3.0f, 3.0f); /* finite: the oracle takes
                                                                                              -inf as a score */
    fc.mask.keep = keep;
    fc.mask.bias = bias;
    check_case("causal, valid lengths, keep, bias masks", &fc);
    tu_problem_free(&fc.p);

#if !MHA_NO_EXTRAS
    s = shape_of(3, 3, 4, 4, 4, 4, 3, 5, 0); /* the knobs */
    s.alibi = 1;
    s.softcap = 1.5f;
    make_case(&fc, &s, 1, 4, 5, 1);
    fc.p.w.sinks = tu_own(&fc.p, tu_floats(3, 1.0f));
    fc.mask.causal = 1;
    check_case("ALiBi, soft-cap, sinks, causal", &fc);
    tu_problem_free(&fc.p);

    s = shape_of(4, 2, 6, 5, 4, 6, 3, 5, 0); /* RoPE, half-split pairs, partial (4 of 6), causal offset */
    s.rope_dim = 4;
    s.rope_theta = 100.0f;
    make_case(&fc, &s, 2, 3, 5, 1);
    fc.mask.causal = 1;
    fc.mask.causal_offset = 2;
    check_case("RoPE half-split, partial, GQA", &fc);
    tu_problem_free(&fc.p);

    s = shape_of(2, 2, 4, 4, 4, 4, 3, 4, 1); /* RoPE, adjacent pairs, additive, ALiBi */
    s.rope_dim = 4;
    s.rope_pairs = MHA_ROPE_ADJACENT;
    s.alibi = 1;
    make_case(&fc, &s, 1, 4, 4, 1);
    check_case("RoPE adjacent, additive, ALiBi", &fc);
    tu_problem_free(&fc.p);
#endif

    s = shape_of(2, 1, 3, 3, 3, 4, 3, 2, 0); /* a scale of its own */
    s.scale = 0.9f;
    make_case(&fc, &s, 1, 2, 3, 0);
    check_case("scale 0.9, no biases, MQA", &fc);
    tu_problem_free(&fc.p);

    check_torch();
    check_fast();
    check_accumulate();
    check_bias_inf();
    check_nan_masked();
#if !MHA_NO_EXTRAS
    check_16bit();
    check_lse_empty_row();
#endif
    check_bad_input();

    big = shape_of(8, 8, 512, 512, 512, 64, 64, 512, 0);
    ws4096 = mha_backward_workspace_size(&big, 1, 4096, 4096);
    ws2048 = mha_backward_workspace_size(&big, 1, 2048, 2048);
    CHECK(ws4096 > 0 && ws2048 > 0 && (double)ws4096 < 2.01 * (double)ws2048,
          "workspace grows with m, not n m: %lu bytes at 2048, %lu at 4096", (unsigned long)ws2048,
          (unsigned long)ws4096);
    printf("workspace at n = m = 4096 (d 512, 8 heads of 64): %lu bytes, 1/%.0f of one n x m fp32 matrix\n",
           (unsigned long)ws4096, 4096.0 * 4096.0 * 4.0 / (double)ws4096);
    printf("worst gradient error %.3f of the bound\n", worst_ratio);
    return tu_summary();
}
