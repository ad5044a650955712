/* The fast path (MHA_FAST 1) against the reference path, which is always
   compiled and serves as the oracle. Built once per vector unit: the portable
   code (MHA_NO_SIMD 1) and each SIMD path the compiler offers (make test
   runs those that this CPU can execute).
     - 240 random problems: sizes from {1, 3, 15, 17, 31, 33, 63, 65, 127}
       and others, every mask kind, GQA, additive scoring, batch > 1, with and
       without attn; out and attn within the core tolerance of the reference;
     - the reference's rules on non-finite values (masked keys with inf
       values, +inf and NaN scores, rows with every key masked);
     - mha_forward_parallel: bit for bit the result of mha_forward for any
       parallel-for (reversed, two threads' interleaving);
     - packed weights: same result as unpacked, checked against the shape;
     - workspace: exact size, any alignment, no n x m term;
     - the vector exp: within 1 ulp over [-87.34, 88], exact 0 below,
       and -inf, NaN and subnormal inputs; the vector tanh within 1.2 ulp. */
#define MHA_FAST 1
#include "test_util.h"
#include "test_hooks.h" /* linked against an object of tests/test_impl.c built with MHA_FAST 1 */

#define TOL 1e-5f

static const int32_t SIZES[] = {1, 3, 15, 17, 31, 33, 63, 65, 127};
static int32_t pick_size(int32_t cap) {
    int32_t s;
    do {
        s = tu_next() % 4 == 0 ? (int32_t)(1 + tu_next() % 40) : SIZES[tu_next() % 9];
    } while (s > cap);
    return s;
}

/* A parallel-for that runs the tasks in reverse order: a different schedule
   must not change a bit of the result. */
static void reversed(void *user, mha_task task, void *arg, int32_t count) {
    int32_t i;
    ++*(int *)user;
    for (i = count - 1; i >= 0; --i) task(arg, i);
}
/* odd indices first, then even: what two workers interleaving could do */
static void interleaved(void *user, mha_task task, void *arg, int32_t count) {
    int32_t i;
    (void)user;
    for (i = 1; i < count; i += 2) task(arg, i);
    for (i = 0; i < count; i += 2) task(arg, i);
}

#ifdef TEST_FAST_THREADS /* make tsan: also on two real threads */
#include "two_threads.h"
#define TEST_FAST_OTHER two_threads
#else
#define TEST_FAST_OTHER interleaved
#endif

typedef struct stats {
    int problems, with_attn, masked, gqa, additive, batched, extras, checked_ok;
    float worst; /* error / allowed, worst seen */
} stats;

/* One random problem, fast against reference; returns 1 when it agrees. */
static int one_problem(stats *st, int index) {
    mha_shape s = {0};
    tu_problem p;
    mha_mask mask = {0, 0, NULL, 0, NULL, NULL};
    int32_t kvh, i, *lens = NULL, kinds;
    int extras;
    size_t n_out, n_attn, ref_bytes, j;
    float *ref_out, *ref_attn, *fast_out, *fast_attn, err, allow, ea;
    uint8_t *keep = NULL;
    float *bias = NULL;
    void *ref_ws;
    int want_attn, ok = 1;
    mha_status a, b;
    s.heads = 1 + (int32_t)(tu_next() % 4);
    kvh = s.heads;
    if (tu_next() % 3 == 0) { /* grouped-query: a divisor of heads */
        do kvh = 1 + (int32_t)(tu_next() % (uint32_t)s.heads);
        while (s.heads % kvh != 0);
    }
    s.kv_heads = tu_next() % 2 ? kvh : (kvh == s.heads ? 0 : kvh);
    s.d_q = pick_size(127);
    s.d_k = tu_next() % 2 ? s.d_q : pick_size(65);
    s.d_v = tu_next() % 2 ? s.d_k : pick_size(65);
    s.p_q = s.p_k = pick_size(65);
    s.p_v = pick_size(65);
    s.p_o = pick_size(127);
    if (index % 6 == 5) { /* additive scoring */
        s.score = MHA_SCORE_ADDITIVE;
        s.p_a = pick_size(33);
        s.p_k = pick_size(33);
        ++st->additive;
    }
    if (tu_next() % 4 == 0) s.scale = tu_uniform(0.05f, 2.0f);
    extras = index % 2 ? tu_extras(&s) : 0; /* RoPE, ALiBi, soft-cap, sinks on half of the problems */
    tu_problem_make(&p, &s, 1 + (int32_t)(tu_next() % 3), pick_size(127), tu_next() % 16 == 0 ? 0 : pick_size(127),
                    (int)(tu_next() % 4 != 0));
    tu_sinks(&p, extras);
    if (extras) ++st->extras;
    if (p.batch > 1) ++st->batched;
    if (kvh != s.heads) ++st->gqa;
    kinds = (int32_t)(tu_next() % 16); /* bit 0 lengths, 1 causal, 2 keep, 3 bias */
    if (kinds & 1) {
        mask.valid_lens_per_query = (int32_t)(tu_next() % 2);
        j = (size_t)p.batch * (mask.valid_lens_per_query ? (size_t)p.n : 1);
        lens = (int32_t *)malloc(j * sizeof(int32_t));
        for (i = 0; i < (int32_t)j; ++i) lens[i] = (int32_t)(tu_next() % (uint32_t)(p.m + 1));
        mask.valid_lens = lens;
    }
    if (kinds & 2) {
        mask.causal = 1;
        mask.causal_offset = (int32_t)(tu_next() % 5) - 2 + (tu_next() % 2 ? p.m - p.n : 0);
    }
    j = (size_t)p.batch * (size_t)p.n * (size_t)p.m;
    if (kinds & 4) {
        keep = (uint8_t *)malloc(j ? j : 1);
        for (i = 0; i < (int32_t)j; ++i) keep[i] = (uint8_t)(tu_next() % 5 != 0);
        if (j >= (size_t)p.m) memset(keep, 0, (size_t)p.m); /* the first row sees nothing */
        mask.keep = keep;
    }
    if (kinds & 8) {
        bias = tu_floats(j, 2.0f);
        for (i = 0; i < (int32_t)j; ++i)
            if (tu_next() % 7 == 0) bias[i] = -INFINITY;
        mask.bias = bias;
    }
    if (kinds) ++st->masked;
    want_attn = (int)(tu_next() % 3 == 0);
    st->with_attn += want_attn;
    n_out = (size_t)p.batch * (size_t)p.n * (size_t)s.p_o;
    n_attn = j * (size_t)s.heads;
    ref_out = (float *)calloc(n_out + 1, sizeof(float));
    fast_out = (float *)calloc(n_out + 1, sizeof(float));
    ref_attn = (float *)calloc(n_attn + 1, sizeof(float));
    fast_attn = (float *)calloc(n_attn + 1, sizeof(float));
    ref_bytes = mha_reference_workspace_size(&s, p.batch, p.n, p.m);
    ref_ws = malloc(ref_bytes);
    a = mha_forward_reference(&s, &p.w, p.batch, p.n, p.m, p.q, p.k, p.v, &mask, ref_out,
                              want_attn ? ref_attn : NULL, ref_ws, ref_bytes);
    b = mha_forward(&s, &p.w, p.batch, p.n, p.m, p.q, p.k, p.v, &mask, fast_out, want_attn ? fast_attn : NULL, p.ws,
                    p.ws_bytes);
    err = tu_max_diff(fast_out, ref_out, n_out);
    allow = TOL * (1.0f + tu_max_abs(ref_out, n_out));
    ea = want_attn ? tu_max_diff(fast_attn, ref_attn, n_attn) : 0.0f;
    ok = a == MHA_OK && b == MHA_OK && err <= allow && ea <= TOL * 2.0f;
    { /* asking for attn (or not) changes no bit of out */
        float *other = (float *)calloc(n_out + 1, sizeof(float));
        const mha_status c = mha_forward(&s, &p.w, p.batch, p.n, p.m, p.q, p.k, p.v, &mask, other,
                                         want_attn ? NULL : fast_attn, p.ws, p.ws_bytes);
        const int same = c == MHA_OK && memcmp(other, fast_out, n_out * sizeof(float)) == 0;
        CHECK(same, "random problem %d: out bit for bit the same with and without attn", index);
        ok &= same;
        free(other);
    }
    CHECK(ok, "random problem %d agrees with the reference", index);
    if (!ok)
        printf("problem %d: h %d kv %d d %d/%d/%d p %d/%d/%d/%d pa %d batch %d n %d m %d masks %d attn %d extras %d: "
               "status %d/%d, out error %g (allowed %g), attn error %g\n",
               index, s.heads, s.kv_heads, s.d_q, s.d_k, s.d_v, s.p_q, s.p_k, s.p_v, s.p_o, s.p_a, p.batch, p.n, p.m,
               kinds, want_attn, extras, (int)a, (int)b, (double)err, (double)allow, (double)ea);
    if (err / allow > st->worst) st->worst = err / allow;
    ++st->problems;
    free(ref_out); free(fast_out); free(ref_attn); free(fast_attn); free(ref_ws);
    free(lens); free(keep); free(bias);
    tu_problem_free(&p);
    return ok;
}

static void test_random_problems(int count) {
    stats st;
    int i, ok = 0;
    memset(&st, 0, sizeof st);
    tu_seed(20261202u);
    for (i = 0; i < count; ++i) ok += one_problem(&st, i);
    printf("%s: %d of %d random problems agree (%d masked, %d GQA, %d additive, %d batch > 1, %d with attn, "
           "%d with RoPE/ALiBi/soft-cap/sinks): worst error %.3g of the tolerance\n",
           mha_build_info().vector, ok, st.problems, st.masked, st.gqa, st.additive, st.batched, st.with_attn, st.extras,
           (double)st.worst);
}

/* Both paths on one problem with hand-set values; 1 if out (and attn) agree
   in the same NaN places and within tolerance elsewhere. */
static int same_as_reference(tu_problem *p, const mha_mask *mask, int with_attn, const char *what) {
    size_t n_out = (size_t)p->batch * (size_t)p->n * (size_t)p->s.p_o;
    size_t n_attn = (size_t)p->batch * (size_t)p->s.heads * (size_t)p->n * (size_t)p->m, i;
    size_t rb = mha_reference_workspace_size(&p->s, p->batch, p->n, p->m);
    float *ro = (float *)calloc(n_out, sizeof(float)), *ra = (float *)calloc(n_attn + 1, sizeof(float));
    float *fo = (float *)calloc(n_out, sizeof(float)), *fa = (float *)calloc(n_attn + 1, sizeof(float));
    void *rws = malloc(rb);
    int ok = mha_forward_reference(&p->s, &p->w, p->batch, p->n, p->m, p->q, p->k, p->v, mask, ro,
                                   with_attn ? ra : NULL, rws, rb) == MHA_OK &&
             mha_forward(&p->s, &p->w, p->batch, p->n, p->m, p->q, p->k, p->v, mask, fo, with_attn ? fa : NULL, p->ws,
                         p->ws_bytes) == MHA_OK;
    float allow = 0.0f;
    for (i = 0; i < n_out; ++i) /* the core tolerance, 1e-5 (1 + max |ref| over the finite values) */
        if (ro[i] - ro[i] == 0.0f && fabsf(ro[i]) > allow) allow = fabsf(ro[i]);
    allow = TOL * (1.0f + allow);
    for (i = 0; i < n_out; ++i)
        ok &= (ro[i] != ro[i]) == (fo[i] != fo[i]) && (ro[i] != ro[i] || fabsf(ro[i] - fo[i]) <= allow);
    for (i = 0; with_attn && i < n_attn; ++i)
        ok &= (ra[i] != ra[i]) == (fa[i] != fa[i]) && (ra[i] != ra[i] || fabsf(ra[i] - fa[i]) <= TOL * 2.0f);
    CHECK(ok, "non-finite rules: %s", what);
    free(ro); free(ra); free(fo); free(fa); free(rws);
    return ok;
}

static void test_non_finite(void) {
    mha_shape s = {0};
    tu_problem p;
    mha_mask mask = {0, 0, NULL, 0, NULL, NULL};
    int32_t lens[2] = {5, 0}, w;
    size_t i;
    s.heads = 2; s.d_q = s.d_k = s.d_v = 6; s.p_q = s.p_k = 4; s.p_v = 3; s.p_o = 5;
    tu_seed(7u);
    for (w = 0; w < 2; ++w) {
        tu_problem_make(&p, &s, 2, 4, 40, 1);
        /* values of key 30 of batch 0 are +inf, keys >= 5 are masked: no NaN may reach out */
        for (i = 0; i < 6; ++i) p.v[30 * 6 + i] = INFINITY;
        mask.valid_lens = lens;
        same_as_reference(&p, &mask, w, w ? "inf values behind a valid length, attn" : "inf values behind a valid length");
        CHECK(tu_all_finite(p.out, 2 * 4 * 5), "masked inf values leave out finite");
        /* a huge query: scores of +inf, the +inf keys share the weight */
        for (i = 0; i < 6; ++i) p.q[i] = 3e37f;
        mask.valid_lens = NULL;
        for (i = 0; i < 6; ++i) p.v[30 * 6 + i] = 1.0f;
        same_as_reference(&p, &mask, w, "scores of +inf");
        /* a NaN key at a visible position: that row is NaN on both paths */
        p.k[3] = NAN;
        same_as_reference(&p, &mask, w, "a NaN key");
        p.k[3] = 0.5f;
        /* every key masked for one batch entry: out = b_o there */
        mask.valid_lens = lens;
        same_as_reference(&p, &mask, w, "rows with every key masked");
        { /* sinks with a value that is not finite (the fast path's max-only pass) and ALiBi, causal
             offset -1: the first row sees only its sink */
            float sinks[2] = {1.5f, -0.75f};
            mha_mask cm = {1, -1, NULL, 0, NULL, NULL};
            p.w.sinks = sinks;
            p.s.alibi = 1;
            for (i = 0; i < 6; ++i) p.v[(40 + 7) * 6 + i] = INFINITY; /* batch 1, key 7 */
            same_as_reference(&p, &cm, w, "sinks and ALiBi with an inf value, causal offset -1");
            p.s.alibi = 0;
            p.w.sinks = NULL;
        }
        tu_problem_free(&p);
    }
}

/* One head, every size 1, identity weights, no biases, q = 1, keys 0: every
   score is 0 (+ bias[j]), so out is the weighted mean of v over the visible
   keys. Runs both paths (attn asked for or not) and returns the fast path's
   out without attn; *ref gets the reference's. */
static float tiny_layer(int32_t m, const float *v, const float *bias, int with_attn, float *ref) {
    static const float one = 1.0f;
    mha_shape s = {0};
    mha_weights w = {0};
    mha_mask mask = {0, 0, NULL, 0, NULL, NULL};
    float q = 1.0f, out = 0.0f, *keys = (float *)calloc((size_t)m, sizeof(float));
    float *attn = (float *)malloc((size_t)m * sizeof(float));
    size_t bytes;
    void *ws;
    s.heads = 1; s.d_q = s.d_k = s.d_v = s.p_q = s.p_k = s.p_v = s.p_o = 1;
    w.w_q = w.w_k = w.w_v = w.w_o = &one;
    mask.bias = bias;
    bytes = mha_reference_workspace_size(&s, 1, 1, m) + mha_workspace_size(&s, 1, 1, m);
    ws = malloc(bytes);
    *ref = 0.0f;
    if (mha_forward_reference(&s, &w, 1, 1, m, &q, keys, v, &mask, ref, NULL, ws, bytes) != MHA_OK ||
        mha_forward(&s, &w, 1, 1, m, &q, keys, v, &mask, &out, with_attn ? attn : NULL, ws, bytes) != MHA_OK)
        out = -1.0f;
    free(keys);
    free(attn);
    free(ws);
    return out;
}

/* The non-finite cases of the fast path's key blocks, against known answers:
   finite values whose unnormalised weighted sum would overflow, a NaN or inf
   value whose weight is 0 only once a later block raises the max, and the
   one underflow rule (a weight below e^-87.34 is 0 on both paths). */
static void test_blocks_non_finite(void) {
    const float big = 2e38f; /* a float: with x87 excess precision the literal itself is not rounded */
    float v[300], bias[300], ref, got;
    int a, j, k;
    for (a = 0; a < 2; ++a) {
        for (j = 0; j < 300; ++j) v[j] = big, bias[j] = 0.0f;
        got = tiny_layer(2, v, bias, a, &ref);
        CHECK(got == big && ref == big, "v = {2e38, 2e38}%s: fast %g, reference %g (want 2e38)",
              a ? ", attn" : "", (double)got, (double)ref);
        for (j = 0; j < 300; ++j) v[j] = 1e37f;
        got = tiny_layer(200, v, bias, a, &ref);
        CHECK(fabsf(got - 1e37f) <= 1e32f && fabsf(ref - 1e37f) <= 1e32f,
              "m = 200, v = 1e37%s: fast %g, reference %g", a ? ", attn" : "", (double)got, (double)ref);
        for (k = 0; k < 4; ++k) { /* NaN or inf at key 5, a larger max in a later block (key 150) */
            for (j = 0; j < 300; ++j) v[j] = 1.0f, bias[j] = 0.0f;
            v[5] = k & 1 ? INFINITY : NAN;
            bias[150] = k & 2 ? INFINITY : 200.0f;
            got = tiny_layer(200, v, bias, a, &ref);
            CHECK(got == 1.0f && ref == 1.0f, "v[5] = %s, bias[150] = %s%s: fast %g, reference %g (want 1)",
                  k & 1 ? "inf" : "NaN", k & 2 ? "inf" : "200", a ? ", attn" : "", (double)got, (double)ref);
        }
        for (k = 0; k < 3; ++k) { /* the underflow rule: weight e^-95 is 0, e^-80 is not */
            for (j = 0; j < 300; ++j) v[j] = 1.0f, bias[j] = 0.0f;
            v[7] = NAN;
            bias[7] = k == 0 ? -95.0f : k == 1 ? -87.34f : -80.0f;
            got = tiny_layer(20, v, bias, a, &ref);
            if (k < 2)
                CHECK(fabsf(got - 1.0f) <= 1e-6f && fabsf(ref - 1.0f) <= 1e-6f,
                      "NaN value %g below the max%s: skipped on both paths (%g, %g)",
                      (double)-bias[7], a ? ", attn" : "", (double)got, (double)ref);
            else
                CHECK(got != got && ref != ref, "NaN value 80 below the max%s: NaN on both paths (%g, %g)",
                      a ? ", attn" : "", (double)got, (double)ref);
        }
    }
}

/* TEST_FAST_SMALL 1 (firmware targets): the schedule test's problem a
   quarter of the size (its attention weights alone would be 1.6 MB). */
#if defined(TEST_FAST_SMALL) && TEST_FAST_SMALL
#define PN 67
#define PM 129
#else
#define PN 131
#define PM 257
#endif
static void test_parallel_and_packed(void) {
    mha_shape s = {0};
    tu_problem p;
    mha_mask mask = {1, 3, NULL, 0, NULL, NULL};
    size_t n_out, pbytes;
    float *base, *other;
    void *pack;
    int calls = 0;
    mha_weights pw;
    s.heads = 6; s.kv_heads = 2; s.d_q = 70; s.d_k = 33; s.d_v = 65; s.p_q = s.p_k = 17; s.p_v = 31; s.p_o = 63;
    tu_seed(99u);
    tu_problem_make(&p, &s, 2, PN, PM, 1);
    n_out = (size_t)2 * PN * 63;
    base = (float *)malloc(n_out * sizeof(float));
    other = (float *)malloc(n_out * sizeof(float));
    CHECK(tu_forward(&p, &mask, NULL) == MHA_OK, "parallel: serial run");
    memcpy(base, p.out, n_out * sizeof(float));
    CHECK(mha_forward_parallel(&s, &p.w, 2, PN, PM, p.q, p.k, p.v, &mask, other, NULL, p.ws, p.ws_bytes, reversed,
                               &calls) == MHA_OK && calls > 0,
          "parallel: reversed schedule runs (%d parallel-for calls)", calls);
    CHECK(memcmp(base, other, n_out * sizeof(float)) == 0, "parallel: reversed schedule, bit for bit");
    calls = 0; /* a call below MHA__PAR_MIN multiply-adds a pass stays on the calling thread */
    CHECK(mha_forward_parallel(&s, &p.w, 2, 3, 5, p.q, p.k, p.v, NULL, other, NULL, p.ws, p.ws_bytes, reversed,
                               &calls) == MHA_OK && calls == 0,
          "parallel: a small call does not use the parallel-for (%d calls)", calls);
    CHECK(mha_forward_parallel(&s, &p.w, 2, PN, PM, p.q, p.k, p.v, &mask, other, NULL, p.ws, p.ws_bytes,
                               interleaved, NULL) == MHA_OK &&
              memcmp(base, other, n_out * sizeof(float)) == 0,
          "parallel: interleaved schedule, bit for bit");
#ifdef TEST_FAST_THREADS
    CHECK(mha_forward_parallel(&s, &p.w, 2, PN, PM, p.q, p.k, p.v, &mask, other, NULL, p.ws, p.ws_bytes,
                               two_threads, NULL) == MHA_OK &&
              memcmp(base, other, n_out * sizeof(float)) == 0,
          "parallel: two threads, bit for bit");
#endif
    { /* mha_backward_parallel: the same gradients for any schedule (2 kv heads: two tasks), and within rounding
         of mha_backward's; two sets of gradients at a time (the Cortex-M55 has 2 MiB), each allocation checked */
        const size_t nx[3] = {(size_t)2 * PN * 70, (size_t)2 * PM * 33, (size_t)2 * PM * 65};
        const size_t bb = mha_backward_parallel_workspace_size(&s, 2, PN, PM), b1 = mha_backward_workspace_size(&s, 2, PN, PM);
        float *ref[3] = {NULL, NULL, NULL}, *g[3] = {NULL, NULL, NULL}, *dout = (float *)malloc(n_out * sizeof(float));
        void *bws = malloc(bb > b1 ? bb : b1);
        int run, j3, have = dout && bws, diff = 0;
        double worst = 0.0, mx = 0.0;
        size_t j;
        for (j3 = 0; j3 < 3; ++j3) {
            ref[j3] = (float *)malloc(nx[j3] * sizeof(float));
            g[j3] = (float *)malloc(nx[j3] * sizeof(float));
            have = have && ref[j3] && g[j3];
        }
        for (j = 0; have && j < n_out; ++j) dout[j] = tu_uniform(-1.0f, 1.0f);
        for (run = 1; have && run < 5; ++run) { /* 1: parallel, NULL (the reference here); 2: reversed; 3:
                                                   interleaved or two threads; 4: mha_backward */
            float *const *x = run == 1 ? ref : g;
            CHECK((run == 4 ? mha_backward(&s, &p.w, 2, PN, PM, p.q, p.k, p.v, &mask, NULL, dout, x[0], x[1], x[2], NULL,
                                           bws, b1)
                            : mha_backward_parallel(&s, &p.w, 2, PN, PM, p.q, p.k, p.v, &mask, NULL, dout, x[0], x[1],
                                                    x[2], NULL, bws, bb,
                                                    run == 1 ? NULL : run == 2 ? reversed : TEST_FAST_OTHER, &calls)) ==
                      MHA_OK,
                  "backward parallel: run %d", run);
            for (j3 = 0; run == 2 || run == 3 ? j3 < 3 : 0; ++j3)
                diff |= memcmp(ref[j3], g[j3], nx[j3] * sizeof(float)) != 0;
            for (j = 0; run == 4 && j < nx[0]; ++j) {
                const double d = fabs((double)ref[0][j] - g[0][j]);
                if (fabs((double)g[0][j]) > mx) mx = fabs((double)g[0][j]);
                if (!(d <= worst)) worst = d;
            }
        }
        if (have) {
            CHECK(!diff, "backward parallel: the same gradients, bit for bit, for each schedule");
            CHECK(worst <= 1e-5 * (1.0 + mx), "backward parallel: d_queries %.3g from mha_backward's", worst);
        } else {
            printf("backward parallel: not run (no memory for it here)\n");
        }
        for (j3 = 0; j3 < 3; ++j3) {
            free(ref[j3]);
            free(g[j3]);
        }
        free(dout);
        free(bws);
    }

    pbytes = mha_packed_weights_size(&s);
    pack = malloc(pbytes + 1);
    CHECK(pbytes > 0, "packed: a size for a valid shape");
    CHECK(mha_pack_weights(&s, &p.w, pack, pbytes - 1) == MHA_ERR_WORKSPACE, "packed: buffer one byte short");
    CHECK(mha_pack_weights(&s, &p.w, NULL, pbytes) == MHA_ERR_WORKSPACE, "packed: NULL buffer");
    CHECK(mha_pack_weights(&s, &p.w, (char *)pack + 1, pbytes) == MHA_OK, "packed: any alignment");
    pw = p.w;
    pw.packed = (char *)pack + 1;
    CHECK(mha_forward(&s, &pw, 2, PN, PM, p.q, p.k, p.v, &mask, other, NULL, p.ws, p.ws_bytes) == MHA_OK &&
              memcmp(base, other, n_out * sizeof(float)) == 0,
          "packed: same result, bit for bit");
    { /* the buffer is tied to its address modulo 64: a copy at the same offset works, another is refused */
        unsigned char *moved = (unsigned char *)malloc(pbytes + 128), *at;
        size_t base_off = (size_t)(64 - (uintptr_t)moved % 64) % 64;
        size_t from = (size_t)((uintptr_t)((char *)pack + 1) % 64);
        at = moved + base_off + from;
        memcpy(at, (char *)pack + 1, pbytes);
        pw.packed = at;
        CHECK(mha_forward(&s, &pw, 2, PN, PM, p.q, p.k, p.v, &mask, other, NULL, p.ws, p.ws_bytes) == MHA_OK &&
                  memcmp(base, other, n_out * sizeof(float)) == 0,
              "packed: a copy at the same offset from a 64-byte boundary works");
        memmove(at + 1, at, pbytes);
        pw.packed = at + 1;
        CHECK(mha_forward(&s, &pw, 2, PN, PM, p.q, p.k, p.v, &mask, other, NULL, p.ws, p.ws_bytes) == MHA_ERR_SHAPE,
              "packed: a copy at another offset is refused");
        pw.packed = (char *)pack + 1;
        free(moved);
    }
    s.p_o = 62;
    CHECK(mha_forward(&s, &pw, 2, PN, PM, p.q, p.k, p.v, &mask, other, NULL, p.ws, p.ws_bytes) == MHA_ERR_SHAPE,
          "packed: weights packed for another shape are refused");
    s.p_o = 63;
    memset(pack, 0, pbytes + 1);
    CHECK(mha_forward(&s, &pw, 2, PN, PM, p.q, p.k, p.v, &mask, other, NULL, p.ws, p.ws_bytes) == MHA_ERR_SHAPE,
          "packed: a buffer that was never packed is refused");
    free(pack);
    free(base);
    free(other);
    tu_problem_free(&p);
}

static void test_workspace(void) {
    mha_shape s = {0};
    tu_problem p;
    unsigned char *buf;
    size_t big, bigger, scores;
    int off, ok = 1;
    s.heads = 8; s.d_q = s.d_k = s.d_v = 512; s.p_q = s.p_k = s.p_v = 64; s.p_o = 512;
    big = mha_workspace_size(&s, 1, 1024, 1024);
    scores = (size_t)8 * 1024 * 1024 * sizeof(float);
    CHECK(big > 0 && big < scores / 8, "workspace at L (n = m = 1024, h 8): %lu bytes < 1/8 of the score matrices (%lu)",
          (unsigned long)big, (unsigned long)(scores / 8));
    bigger = mha_workspace_size(&s, 1, 4096, 4096);
    CHECK(bigger < 5 * big, "no n x m term: n = m = 4096 needs %lu bytes (n = m = 1024: %lu)", (unsigned long)bigger,
          (unsigned long)big);
    printf("workspace at shape L: %lu bytes; score matrices %lu bytes\n", (unsigned long)big, (unsigned long)scores);
    s.heads = 3; s.d_q = 20; s.d_k = s.d_v = 9; s.p_q = s.p_k = 5; s.p_v = 7; s.p_o = 4;
    tu_seed(5u);
    tu_problem_make(&p, &s, 2, 30, 50, 1);
    CHECK(tu_forward(&p, NULL, NULL) == MHA_OK, "workspace: exact size");
    CHECK(mha_forward(&s, &p.w, 2, 30, 50, p.q, p.k, p.v, NULL, p.out, NULL, p.ws, p.ws_bytes - 1) ==
              MHA_ERR_WORKSPACE,
          "workspace: one byte short");
    buf = (unsigned char *)malloc(p.ws_bytes + 192);
    for (off = 0; off < 64; off += 7) {
        size_t i;
        memset(buf, 0x5A, p.ws_bytes + 192);
        ok &= mha_forward(&s, &p.w, 2, 30, 50, p.q, p.k, p.v, NULL, p.out, NULL, buf + 64 + off, p.ws_bytes) == MHA_OK;
        for (i = 0; i < (size_t)(64 + off); ++i) ok &= buf[i] == 0x5A;
        for (i = 64 + (size_t)off + p.ws_bytes; i < p.ws_bytes + 192; ++i) ok &= buf[i] == 0x5A;
    }
    CHECK(ok, "workspace: any alignment, nothing written outside it");
    free(buf);
    tu_problem_free(&p);
}

/* fn(x) in every lane; lane 0 of the result */
static float lane0(void (*fn)(const float *, float *), float x) {
    float in[HOOK_VL_MAX], out[HOOK_VL_MAX];
    int l;
    for (l = 0; l < hook_vl(); ++l) in[l] = x;
    fn(in, out);
    return out[0];
}
#define vexp1(x) lane0(hook_vexp, x)
#define vtanh1(x) lane0(hook_vtanh, x)

/* The worst ulp error of fn against the double function ref over every
   stride-th float magnitude from the smallest normal up, both signs, that
   falls in [lo, hi]; *at gets where. */
static double sweep(void (*fn)(const float *, float *), double (*ref)(double), float lo, float hi, uint32_t stride,
                    double *at) {
    float in[HOOK_VL_MAX], out[HOOK_VL_MAX], x, sx;
    double worst = 0.0, e;
    uint32_t b;
    int l = 0, i, sign, done = 0;
    for (b = 0x00800000u; !done; b += stride) {
        memcpy(&x, &b, 4);
        done = b >= 0x7f000000u || (x > hi && -x < lo);
        for (sign = 0; sign < 2; ++sign) {
            sx = sign ? -x : x;
            if (done || sx < lo || sx > hi) continue;
            in[l++] = sx;
            if (l < hook_vl()) continue;
            fn(in, out);
            for (i = 0; i < hook_vl(); ++i) {
                e = tu_ulp_err(out[i], ref((double)in[i]));
                if (e > worst) worst = e, *at = in[i];
            }
            l = 0;
        }
    }
    return worst;
}

static void test_vexp(uint32_t stride) {
    double worst, at = 0.0;
    float y;
    uint32_t u, bits_lo;
    int below_zero = 1;
    worst = sweep(hook_vexp, exp, -87.33654f, 88.0f, stride, &at);
    printf("vector exp (%s): max error %.3f ulp on [-87.34, 88] (at x = %.9g)\n", mha_build_info().vector, worst, at);
    CHECK(worst <= 1.0, "vector exp within 1 ulp: %.3f", worst);
    y = nextafterf(-87.33654475f, -INFINITY); /* the float below the threshold */
    memcpy(&bits_lo, &y, 4);
    for (u = 0; u < 4096; ++u) { /* below ln(FLT_MIN): exactly 0, never subnormal */
        float f;
        uint32_t b = bits_lo + u * 4099u;
        memcpy(&f, &b, 4);
        if (f == f) below_zero &= vexp1(f) == 0.0f;
    }
    CHECK(below_zero && vexp1(-1e30f) == 0.0f && vexp1(-INFINITY) == 0.0f, "vector exp: 0 below ln(FLT_MIN) and at -inf");
    y = vexp1(NAN);
    CHECK(y != y, "vector exp: NaN stays NaN");
    CHECK(vexp1(0.0f) == 1.0f && vexp1(-0.0f) == 1.0f && vexp1(1e-40f) == 1.0f && vexp1(-1e-40f) == 1.0f,
          "vector exp: exp(0) and exp(subnormal) are exactly 1");
}

static void test_vtanh(uint32_t stride) {
    double worst, at = 0.0;
    float y;
    worst = sweep(hook_vtanh, tanh, -10.0f, 10.0f, stride, &at);
    printf("vector tanh (%s): max error %.3f ulp on [-10, 10] (at x = %.9g)\n", mha_build_info().vector, worst, at);
    CHECK(worst <= 1.2, "vector tanh within 1.2 ulp: %.3f", worst);
    CHECK(vtanh1(20.0f) == 1.0f && vtanh1(-1e30f) == -1.0f && vtanh1(INFINITY) == 1.0f && vtanh1(0.0f) == 0.0f,
          "vector tanh: +-1 far out, 0 at 0");
    y = vtanh1(NAN);
    CHECK(y != y, "vector tanh: NaN stays NaN");
}

/* test_fast [PROBLEMS [STRIDE]]: 240 random problems and every 331st float
   magnitude in the exp and tanh sweeps by default. */
int main(int argc, char **argv) {
    int problems = argc > 1 ? atoi(argv[1]) : 240;
    uint32_t stride = argc > 2 ? (uint32_t)atoi(argv[2]) : 331u;
    printf("fast path: %s, MR %d, NR %d\n", mha_build_info().vector, hook_mr(), hook_nr());
    CHECK(mha_build_info().fast == 1 && hook_vl() >= 1 && hook_vl() <= HOOK_VL_MAX,
          "the object linked is the fast path's (mha_build_info: %s, %d lanes)", mha_build_info().vector, hook_vl());
    if (!mha_build_info().fast) return 1;
    test_random_problems(problems);
    test_non_finite();
    test_blocks_non_finite();
    test_parallel_and_packed();
    test_workspace();
    test_vexp(stride);
    test_vtanh(stride);
    return tu_summary();
}
