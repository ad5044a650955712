/* The test suite of mha.h: PyTorch reference vectors, the seed's questions,
   properties, every status code, workspace and number handling.
   The implementation is compiled in tests/test_impl.c, so this file also
   proves that a second translation unit links against it. */
#include "test_util.h"

#ifdef REF_VECTORS_FILE
#include REF_VECTORS_FILE
#else
#include "ref_vectors.h"
#endif

/* ---- reference vectors ---------------------------------------------------- */

#define TOL 1e-5f /* max |y - y_ref| <= TOL * (1 + max |y_ref|) */

/* A case that uses RoPE, ALiBi, the soft-cap or sinks, which a build with
   MHA_NO_EXTRAS refuses (MHA_ERR_SHAPE). */
static int refused_knobs(const ref_case *rc) {
    return mha_build_info().no_extras &&
           (rc->shape.rope_dim || rc->shape.alibi || rc->shape.softcap != 0.0f || rc->w.sinks);
}

typedef struct group_stat {
    const char *group;
    float worst; /* worst error relative to the case's allowance 1 + max|ref| */
    float worst_abs;
    int cases;
} group_stat;

static void test_reference_vectors(void) {
    group_stat groups[32];
    int n_groups = 0, c, g;
    for (c = 0; c < REF_CASE_COUNT; ++c) {
        const ref_case *rc = &ref_cases[c];
        size_t n_out = (size_t)rc->batch * (size_t)rc->n * (size_t)rc->shape.p_o;
        size_t n_attn = (size_t)rc->batch * (size_t)rc->shape.heads * (size_t)rc->n * (size_t)rc->m;
        size_t bytes = mha_workspace_size(&rc->shape, rc->batch, rc->n, rc->m);
        float *out = (float *)calloc(n_out, sizeof(float));
        float *attn = rc->attn ? (float *)calloc(n_attn, sizeof(float)) : NULL;
        void *ws = malloc(bytes);
        mha_status st = mha_forward(&rc->shape, &rc->w, rc->batch, rc->n, rc->m, rc->queries, rc->keys, rc->values,
                                    &rc->mask, out, attn, ws, bytes);
        float err = tu_max_diff(out, rc->out, n_out), allow = 1.0f + tu_max_abs(rc->out, n_out);
#if defined(MHA_NO_ADDITIVE) && MHA_NO_ADDITIVE
        if (rc->shape.score == MHA_SCORE_ADDITIVE) { /* compiled out: refused, nothing to compare */
            CHECK(st == MHA_ERR_SHAPE, "%s/%s: MHA_NO_ADDITIVE gives status %d", rc->group, rc->name, (int)st);
            free(out); free(attn); free(ws);
            continue;
        }
#endif
        if (refused_knobs(rc)) {
            CHECK(st == MHA_ERR_SHAPE, "%s/%s: MHA_NO_EXTRAS gives status %d", rc->group, rc->name, (int)st);
            free(out); free(attn); free(ws);
            continue;
        }
        CHECK(st == MHA_OK, "%s/%s: status %d", rc->group, rc->name, (int)st);
        CHECK(err <= TOL * allow, "%s/%s: out error %g > %g", rc->group, rc->name, (double)err,
              (double)(TOL * allow));
        if (attn) {
            float ea = tu_max_diff(attn, rc->attn, n_attn);
            CHECK(ea <= TOL * 2.0f, "%s/%s: attn error %g", rc->group, rc->name, (double)ea);
            if (ea / 2.0f > err / allow) err = ea, allow = 2.0f;
        }
        for (g = 0; g < n_groups && strcmp(groups[g].group, rc->group) != 0; ++g) {}
        if (g == n_groups) {
            groups[g].group = rc->group;
            groups[g].worst = 0.0f;
            groups[g].worst_abs = 0.0f;
            groups[g].cases = 0;
            ++n_groups;
        }
        ++groups[g].cases;
        if (err / allow > groups[g].worst || err != err) groups[g].worst = err / allow, groups[g].worst_abs = err;
        free(out);
        free(attn);
        free(ws);
    }
    printf("reference vectors: %d cases, tolerance %.0e * (1 + max|ref|)\n", REF_CASE_COUNT, (double)TOL);
    for (g = 0; g < n_groups; ++g)
        printf("  %-24s %2d cases  worst |err| %.3g  (%.3g of the tolerance)\n", groups[g].group, groups[g].cases,
               (double)groups[g].worst_abs, (double)(groups[g].worst / TOL));
}

/* The attend stage alone (mha_attend) on the generator's projected inputs,
   against its float64 composition: the heads' outputs before W_o, and attn;
   then mha_output_rows on those outputs equals W_o h + b_o in double. */
static void test_core_vectors(void) {
#ifdef REF_CORE_COUNT
    int c;
    float worst = 0.0f;
    for (c = 0; c < REF_CORE_COUNT; ++c) {
        const ref_case *rc = &ref_core_cases[c];
        size_t n_out = (size_t)rc->batch * (size_t)rc->n * (size_t)rc->shape.p_o;
        size_t n_attn = (size_t)rc->batch * (size_t)rc->shape.heads * (size_t)rc->n * (size_t)rc->m;
        size_t bytes = mha_attend_workspace_size(&rc->shape, rc->batch, rc->n, rc->m);
        float *out = (float *)calloc(n_out, sizeof(float)), *attn = (float *)calloc(n_attn, sizeof(float));
        void *ws = malloc(bytes);
        mha_status st = mha_attend(&rc->shape, &rc->w, rc->batch, rc->n, rc->m, rc->queries, rc->keys, rc->values,
                                   &rc->mask, out, attn, ws, bytes);
        float err = tu_max_diff(out, rc->out, n_out), allow = 1.0f + tu_max_abs(rc->out, n_out);
        float ea = tu_max_diff(attn, rc->attn, n_attn);
#if defined(MHA_NO_ADDITIVE) && MHA_NO_ADDITIVE
        if (rc->shape.score == MHA_SCORE_ADDITIVE) {
            CHECK(st == MHA_ERR_SHAPE, "core/%s: MHA_NO_ADDITIVE gives status %d", rc->name, (int)st);
            free(out); free(attn); free(ws);
            continue;
        }
#endif
        if (refused_knobs(rc)) {
            CHECK(st == MHA_ERR_SHAPE, "core/%s: MHA_NO_EXTRAS gives status %d", rc->name, (int)st);
            free(out); free(attn); free(ws);
            continue;
        }
        CHECK(st == MHA_OK && err <= TOL * allow && ea <= TOL * 2.0f, "core/%s: status %d, error %g, attn %g",
              rc->name, (int)st, (double)err, (double)ea);
        if (err / allow > worst) worst = err / allow;
        free(out);
        free(attn);
        free(ws);
    }
    printf("attend stage (mha_attend) on projected inputs: %d PyTorch cases, worst %.3g of the tolerance\n",
           REF_CORE_COUNT, (double)(worst / TOL));
    {   /* mha_output_rows: rows of W_o h + b_o */
        mha_shape s = {0};
        tu_problem p;
        float *cat, *got;
        size_t rows = 5, r, o, i, hpv;
        int ok;
        s.heads = 3; s.d_q = s.d_k = s.d_v = 2; s.p_q = s.p_k = 2; s.p_v = 3; s.p_o = 4;
        tu_problem_make(&p, &s, 1, 1, 1, 1);
        hpv = (size_t)s.heads * (size_t)s.p_v;
        cat = tu_floats(rows * hpv, 1.0f);
        got = tu_floats(rows * (size_t)s.p_o, 0.0f);
        ok = mha_output_rows(&s, &p.w, (int32_t)rows, cat, got) == MHA_OK;
        for (r = 0; r < rows; ++r)
            for (o = 0; o < (size_t)s.p_o; ++o) {
                double want = p.w.b_o[o];
                for (i = 0; i < hpv; ++i) want += (double)((const float *)p.w.w_o)[o * hpv + i] * cat[r * hpv + i];
                ok &= fabs(got[r * (size_t)s.p_o + o] - want) <= 1e-5 * (1.0 + fabs(want));
            }
        CHECK(ok, "mha_output_rows: 5 rows of W_o h + b_o against double");
        CHECK(mha_output_rows(&s, &p.w, -1, cat, got) == MHA_ERR_SHAPE &&
                  mha_output_rows(&s, &p.w, 5, NULL, got) == MHA_ERR_NULL &&
                  mha_output_rows(&s, &p.w, 0, cat, got) == MHA_OK,
              "mha_output_rows: rows < 0, concat NULL, rows 0");
        {
            mha_shape big = s;
            big.heads = 65536;
            big.p_v = 65536;
            big.p_o = 1; /* W_o of 2^32 floats; INT32_MAX rows of 2^32 floats overflow */
            CHECK(mha_output_rows(&big, &p.w, INT32_MAX, cat, got) == MHA_ERR_OVERFLOW,
                  "mha_output_rows: rows beyond size_t: MHA_ERR_OVERFLOW");
        }
        free(cat);
        free(got);
        tu_problem_free(&p);
    }
#endif
}

/* The reference path (mha_forward_reference, which is mha_forward under
   MHA_FAST 0) agrees bit for bit with mha_head -> mha_concat -> mha_output,
   for every reference case whose mask mha_head can express (none, or [batch]
   lengths). */
static void test_composition(void) {
    int c, checked = 0;
    for (c = 0; c < REF_CASE_COUNT; ++c) {
        const ref_case *rc = &ref_cases[c];
        const mha_shape *s = &rc->shape;
        size_t n_out = (size_t)rc->batch * (size_t)rc->n * (size_t)s->p_o;
        size_t bytes = mha_reference_workspace_size(s, rc->batch, rc->n, rc->m);
        size_t head_bytes = mha_reference_workspace_size(s, 1, 1, rc->m);
        float *fwd, *cmp, *heads, *cat;
        const float *hp[64];
        void *ws;
        int32_t b, t, i;
        int ok = 1;
        if (rc->mask.causal || rc->mask.keep || rc->mask.bias || rc->mask.valid_lens_per_query || s->heads > 64 ||
            s->rope_dim || s->alibi || refused_knobs(rc)) /* mha_head's query has no position */
            continue;
#if defined(MHA_NO_ADDITIVE) && MHA_NO_ADDITIVE
        if (s->score == MHA_SCORE_ADDITIVE) continue;
#endif
        fwd = (float *)malloc(n_out * sizeof(float));
        cmp = (float *)malloc(n_out * sizeof(float));
        heads = (float *)malloc((size_t)s->heads * (size_t)s->p_v * sizeof(float));
        cat = (float *)malloc((size_t)s->heads * (size_t)s->p_v * sizeof(float));
        ws = malloc(bytes > head_bytes ? bytes : head_bytes);
        CHECK(head_bytes <= bytes, "%s: head workspace larger than forward's", rc->name);
        ok &= mha_forward_reference(s, &rc->w, rc->batch, rc->n, rc->m, rc->queries, rc->keys, rc->values,
                                    &rc->mask, fwd, NULL, ws, bytes) == MHA_OK;
        for (b = 0; b < rc->batch; ++b) {
            const float *k = rc->keys + (size_t)b * (size_t)rc->m * (size_t)s->d_k;
            const float *v = rc->values + (size_t)b * (size_t)rc->m * (size_t)s->d_v;
            int32_t len = rc->mask.valid_lens ? rc->mask.valid_lens[b] : rc->m;
            for (t = 0; t < rc->n; ++t) {
                size_t row = (size_t)b * (size_t)rc->n + (size_t)t;
                for (i = 0; i < s->heads; ++i) {
                    hp[i] = heads + (size_t)i * (size_t)s->p_v;
                    ok &= mha_head(s, &rc->w, i, rc->queries + row * (size_t)s->d_q, k, v, rc->m, len,
                                   heads + (size_t)i * (size_t)s->p_v, ws, head_bytes) == MHA_OK;
                }
                ok &= mha_concat(s->heads, s->p_v, hp, cat) == MHA_OK;
                ok &= mha_output(s, &rc->w, cat, cmp + row * (size_t)s->p_o) == MHA_OK;
            }
        }
        CHECK(ok, "%s/%s: a step returned an error", rc->group, rc->name);
        CHECK(memcmp(fwd, cmp, n_out * sizeof(float)) == 0, "%s/%s: forward != head->concat->output (max %g)",
              rc->group, rc->name, (double)tu_max_diff(fwd, cmp, n_out));
        ++checked;
        free(fwd); free(cmp); free(heads); free(cat); free(ws);
    }
    printf("composition head -> concat -> output equals forward bitwise on %d cases\n", checked);
}

/* ---- the seed's worked questions ------------------------------------------ */

static void test_seed_questions(void) {
    mha_shape s;
    mha_weight_counts c;
    float heads[8][64], cat[8 * 64 + 1];
    const float *hp[8];
    int i, a, ok = 1;
    /* 8 heads of 64 concatenate to a 512-vector */
    for (i = 0; i < 8; ++i) {
        for (a = 0; a < 64; ++a) heads[i][a] = (float)(i * 1000 + a);
        hp[i] = heads[i];
    }
    cat[512] = -1.0f;
    CHECK(mha_concat(8, 64, hp, cat) == MHA_OK, "concat 8 x 64");
    for (i = 0; i < 8; ++i)
        for (a = 0; a < 64; ++a) ok &= cat[i * 64 + a] == heads[i][a];
    CHECK(ok && cat[512] == -1.0f, "8 heads of 64 fill exactly cat[0..511], in head order");
    memset(&s, 0, sizeof s);
    s.heads = 8; s.d_q = s.d_k = s.d_v = 512; s.p_q = s.p_k = s.p_v = 64; s.p_o = 512;
    CHECK(mha_weight_counts_get(&s, &c) == MHA_OK && c.w_o == 512u * 512u && c.b_q == 512u,
          "8 x 64: the concatenation has 512 entries, W_o is 512 x 512");
    /* 12 heads of 64 with a 768 output need W_o of 768 x 768 */
    s.heads = 12; s.d_q = s.d_k = s.d_v = 768; s.p_o = 768;
    CHECK(mha_weight_counts_get(&s, &c) == MHA_OK && c.w_o == 768u * 768u && c.b_o == 768u,
          "12 x 64 with p_o 768: W_o has %lu entries, want 768 x 768", (unsigned long)c.w_o);
    printf("seed: 8 heads x 64 -> concat of 512; 12 heads x 64, p_o 768 -> W_o %lu = 768 x 768\n",
           (unsigned long)c.w_o);
}

/* ---- properties ------------------------------------------------------------ */

/* Permuting key/value pairs leaves the output unchanged when nothing is masked. */
static void test_permutation(int additive) {
    mha_shape s = shape_of(4, 2, 7, 5, 6, 4, 3, 8, additive);
    tu_problem p;
    int32_t j, perm[9], b;
    float *ref, *pk, *pv;
    size_t n_out;
    tu_problem_make(&p, &s, 2, 3, 9, 1);
    n_out = (size_t)p.batch * (size_t)p.n * (size_t)s.p_o;
    ref = (float *)malloc(n_out * sizeof(float));
    CHECK(tu_forward(&p, NULL, NULL) == MHA_OK, "permutation: forward");
    memcpy(ref, p.out, n_out * sizeof(float));
    for (j = 0; j < 9; ++j) perm[j] = (j * 4 + 3) % 9; /* a permutation: 4 is coprime with 9 */
    pk = (float *)malloc((size_t)p.batch * 9 * (size_t)s.d_k * sizeof(float));
    pv = (float *)malloc((size_t)p.batch * 9 * (size_t)s.d_v * sizeof(float));
    for (b = 0; b < p.batch; ++b)
        for (j = 0; j < 9; ++j) {
            memcpy(pk + ((size_t)b * 9 + (size_t)j) * (size_t)s.d_k, p.k + ((size_t)b * 9 + (size_t)perm[j]) * (size_t)s.d_k,
                   (size_t)s.d_k * sizeof(float));
            memcpy(pv + ((size_t)b * 9 + (size_t)j) * (size_t)s.d_v, p.v + ((size_t)b * 9 + (size_t)perm[j]) * (size_t)s.d_v,
                   (size_t)s.d_v * sizeof(float));
        }
    memcpy(p.k, pk, (size_t)p.batch * 9 * (size_t)s.d_k * sizeof(float));
    memcpy(p.v, pv, (size_t)p.batch * 9 * (size_t)s.d_v * sizeof(float));
    CHECK(tu_forward(&p, NULL, NULL) == MHA_OK, "permutation: forward");
    CHECK(tu_max_diff(ref, p.out, n_out) <= 1e-6f * (1.0f + tu_max_abs(ref, n_out)),
          "permuting keys changes the output by %g (additive %d)", (double)tu_max_diff(ref, p.out, n_out), additive);
    free(ref); free(pk); free(pv);
    tu_problem_free(&p);
}

/* Masking key j (by keep, or by a -inf bias) is the same as deleting it. */
static void test_mask_is_delete(int additive) {
    mha_shape s = shape_of(3, 1, 6, 4, 5, 3, 4, 7, additive);
    tu_problem p, d;
    mha_mask mask;
    uint8_t *keep;
    float *bias;
    int32_t b, t, j, jd = 2, m = 6;
    size_t n_out, i;
    tu_seed(77);
    tu_problem_make(&p, &s, 2, 3, m, 1);
    tu_problem_make(&d, &s, 2, 3, m - 1, 1);
    d.w = p.w; /* same weights */
    memcpy(d.q, p.q, (size_t)p.batch * (size_t)p.n * (size_t)s.d_q * sizeof(float));
    for (b = 0; b < p.batch; ++b)
        for (j = 0, i = 0; j < m; ++j) {
            if (j == jd) continue;
            memcpy(d.k + ((size_t)b * (size_t)(m - 1) + i) * (size_t)s.d_k, p.k + ((size_t)b * (size_t)m + (size_t)j) * (size_t)s.d_k,
                   (size_t)s.d_k * sizeof(float));
            memcpy(d.v + ((size_t)b * (size_t)(m - 1) + i) * (size_t)s.d_v, p.v + ((size_t)b * (size_t)m + (size_t)j) * (size_t)s.d_v,
                   (size_t)s.d_v * sizeof(float));
            ++i;
        }
    /* the deleted key's value is NaN: a masked key must not reach the output */
    p.v[(size_t)jd * (size_t)s.d_v] = NAN;
    keep = (uint8_t *)malloc((size_t)p.batch * (size_t)p.n * (size_t)m);
    bias = (float *)calloc((size_t)p.batch * (size_t)p.n * (size_t)m, sizeof(float));
    for (b = 0; b < p.batch; ++b)
        for (t = 0; t < p.n; ++t)
            for (j = 0; j < m; ++j) {
                keep[((size_t)b * (size_t)p.n + (size_t)t) * (size_t)m + (size_t)j] = j != jd;
                bias[((size_t)b * (size_t)p.n + (size_t)t) * (size_t)m + (size_t)j] = j == jd ? -INFINITY : 0.0f;
            }
    n_out = (size_t)p.batch * (size_t)p.n * (size_t)s.p_o;
    CHECK(mha_forward(&d.s, &d.w, d.batch, d.n, d.m, d.q, d.k, d.v, NULL, d.out, NULL, d.ws, d.ws_bytes) == MHA_OK,
          "delete: forward");
    memset(&mask, 0, sizeof mask);
    mask.keep = keep;
    CHECK(tu_forward(&p, &mask, NULL) == MHA_OK, "keep: forward");
    CHECK(tu_max_diff(p.out, d.out, n_out) <= 1e-6f * (1.0f + tu_max_abs(d.out, n_out)),
          "masking key %d by keep differs from deleting it by %g (additive %d)", (int)jd,
          (double)tu_max_diff(p.out, d.out, n_out), additive);
    mask.keep = NULL;
    mask.bias = bias;
    CHECK(tu_forward(&p, &mask, NULL) == MHA_OK, "bias: forward");
    CHECK(tu_max_diff(p.out, d.out, n_out) <= 1e-6f * (1.0f + tu_max_abs(d.out, n_out)),
          "masking key %d by a -inf bias differs from deleting it by %g", (int)jd,
          (double)tu_max_diff(p.out, d.out, n_out));
    free(keep); free(bias);
    tu_problem_free(&p);
    tu_problem_free(&d); /* frees d's own (unused) weights; p's were freed above */
}

/* With W_o selecting block i (and no b_o), the output is h_i of mha_head. */
static void test_wo_selects_head(void) {
    mha_shape s = shape_of(3, 3, 5, 6, 4, 4, 3, 3, 0);
    tu_problem p;
    float wo[3 * 9], h[3];
    const float *saved_wo, *saved_bo;
    int32_t i, r, t;
    int ok = 1;
    tu_problem_make(&p, &s, 1, 2, 5, 1);
    saved_wo = p.w.w_o;
    saved_bo = p.w.b_o;
    p.w.w_o = wo;
    p.w.b_o = NULL;
    for (i = 0; i < 3; ++i) {
        memset(wo, 0, sizeof wo);
        for (r = 0; r < 3; ++r) wo[r * 9 + i * 3 + r] = 1.0f;
        ok &= tu_forward(&p, NULL, NULL) == MHA_OK;
        for (t = 0; t < 2; ++t) {
            ok &= mha_head(&p.s, &p.w, i, p.q + (size_t)t * 5, p.k, p.v, 5, 5, h, p.ws, p.ws_bytes) == MHA_OK;
            CHECK(tu_max_diff(h, p.out + (size_t)t * 3, 3) <= 1e-6f, "W_o picking block %d: out != h_%d", (int)i,
                  (int)i);
        }
    }
    CHECK(ok, "W_o picks a block: calls succeed");
    p.w.w_o = saved_wo;
    p.w.b_o = saved_bo;
    tu_problem_free(&p);
}

/* h = 1 with W_o = I is single-head attention; checked against a direct
   double-precision computation written here, independent of the library. */
static void test_single_head(void) {
    mha_shape s = shape_of(1, 0, 4, 5, 6, 3, 2, 2, 0);
    tu_problem p;
    float wo[4] = {1.0f, 0.0f, 0.0f, 1.0f};
    int32_t t, j, a, r, m = 7;
    double worst = 0.0;
    tu_problem_make(&p, &s, 1, 3, m, 1);
    p.w.w_o = wo;
    p.w.b_o = NULL;
    CHECK(tu_forward(&p, NULL, NULL) == MHA_OK, "single head: forward");
    for (t = 0; t < p.n; ++t) {
        double qp[3], sc[7], mx = -1e300, sum = 0.0, o[2] = {0.0, 0.0};
        for (r = 0; r < 3; ++r) {
            qp[r] = p.w.b_q[r];
            for (a = 0; a < 4; ++a) qp[r] += (double)((const float *)p.w.w_q)[r * 4 + a] * p.q[t * 4 + a];
        }
        for (j = 0; j < m; ++j) {
            double kp, dot = 0.0;
            for (r = 0; r < 3; ++r) {
                kp = p.w.b_k[r];
                for (a = 0; a < 5; ++a) kp += (double)((const float *)p.w.w_k)[r * 5 + a] * p.k[j * 5 + a];
                dot += qp[r] * kp;
            }
            sc[j] = dot / sqrt(3.0);
            if (sc[j] > mx) mx = sc[j];
        }
        for (j = 0; j < m; ++j) sum += (sc[j] = exp(sc[j] - mx));
        for (j = 0; j < m; ++j)
            for (r = 0; r < 2; ++r) {
                double vp = p.w.b_v[r];
                for (a = 0; a < 6; ++a) vp += (double)((const float *)p.w.w_v)[r * 6 + a] * p.v[j * 6 + a];
                o[r] += sc[j] / sum * vp;
            }
        for (r = 0; r < 2; ++r)
            if (fabs(o[r] - p.out[t * 2 + r]) > worst) worst = fabs(o[r] - p.out[t * 2 + r]);
    }
    CHECK(worst <= 1e-5, "single-head attention differs from the direct computation by %g", worst);
    tu_problem_free(&p);
}

/* m == 0 and fully masked rows: zero head output, output b_o, zero weights. */
static void test_fully_masked(void) {
    mha_shape s = shape_of(2, 1, 3, 4, 5, 2, 3, 4, 0);
    tu_problem p;
    mha_mask mask;
    int32_t lens[2] = {0, 3}, t;
    size_t i, n_attn;
    int ok = 1;
    tu_problem_make(&p, &s, 2, 3, 0, 1);
    CHECK(tu_forward(&p, NULL, p.attn) == MHA_OK, "m = 0: forward");
    for (i = 0; i < 2 * 3; ++i) ok &= memcmp(p.out + i * 4, p.w.b_o, 4 * sizeof(float)) == 0;
    CHECK(ok, "m = 0: every output row is b_o");
    tu_problem_free(&p);

    tu_problem_make(&p, &s, 2, 3, 3, 1);
    n_attn = 2 * 2 * 3 * 3;
    for (i = 0; i < n_attn; ++i) p.attn[i] = 7.0f;
    memset(&mask, 0, sizeof mask);
    mask.valid_lens = lens;
    CHECK(tu_forward(&p, &mask, p.attn) == MHA_OK, "valid_len 0: forward");
    ok = tu_all_finite(p.out, 2 * 3 * 4);
    for (t = 0; t < 3; ++t) ok &= memcmp(p.out + (size_t)t * 4, p.w.b_o, 4 * sizeof(float)) == 0;
    CHECK(ok, "valid_len 0: batch 0's rows are exactly b_o, all finite");
    ok = 1;
    for (i = 0; i < 2 * 3 * 3; ++i) ok &= p.attn[i] == 0.0f; /* batch 0's weights: [0][heads][n][m] */
    CHECK(ok, "valid_len 0: batch 0's attention weights are zero, not uniform");
    p.w.b_o = NULL;
    CHECK(tu_forward(&p, &mask, NULL) == MHA_OK && tu_max_abs(p.out, 3 * 4) == 0.0f,
          "fully masked without b_o: output is 0");
    tu_problem_free(&p);
}

/* ---- status codes ---------------------------------------------------------- */

static void test_statuses(void) {
    mha_shape s = shape_of(2, 0, 3, 4, 5, 2, 3, 4, 0), bad;
    tu_problem p;
    mha_mask mask;
    mha_weights w;
    mha_weight_counts c;
    int32_t lens[2] = {1, 5};
    const float *hp[2];
    float h[3];
    const char *strs[7];
    int i, j, distinct = 1;
    tu_problem_make(&p, &s, 2, 3, 4, 1);
    CHECK(tu_forward(&p, NULL, NULL) == MHA_OK, "ok");
    /* NULL */
    CHECK(mha_forward(NULL, &p.w, 2, 3, 4, p.q, p.k, p.v, NULL, p.out, NULL, p.ws, p.ws_bytes) == MHA_ERR_NULL,
          "NULL shape");
    CHECK(mha_forward(&s, NULL, 2, 3, 4, p.q, p.k, p.v, NULL, p.out, NULL, p.ws, p.ws_bytes) == MHA_ERR_NULL,
          "NULL weights");
    CHECK(mha_forward(&s, &p.w, 2, 3, 4, NULL, p.k, p.v, NULL, p.out, NULL, p.ws, p.ws_bytes) == MHA_ERR_NULL,
          "NULL queries");
    CHECK(mha_forward(&s, &p.w, 2, 3, 4, p.q, p.k, p.v, NULL, NULL, NULL, p.ws, p.ws_bytes) == MHA_ERR_NULL,
          "NULL out");
    w = p.w;
    w.w_o = NULL;
    CHECK(mha_forward(&s, &w, 2, 3, 4, p.q, p.k, p.v, NULL, p.out, NULL, p.ws, p.ws_bytes) == MHA_ERR_NULL,
          "NULL w_o");
    CHECK(mha_output(&s, &w, p.q, p.out) == MHA_ERR_NULL, "mha_output: NULL w_o");
    bad = s;
    bad.score = MHA_SCORE_ADDITIVE;
    bad.p_a = 3;
#if defined(MHA_NO_ADDITIVE) && MHA_NO_ADDITIVE
    CHECK(mha_forward(&bad, &p.w, 2, 3, 4, p.q, p.k, p.v, NULL, p.out, NULL, p.ws, p.ws_bytes) == MHA_ERR_SHAPE,
          "MHA_NO_ADDITIVE: additive scoring is MHA_ERR_SHAPE");
#else
    CHECK(mha_forward(&bad, &p.w, 2, 3, 4, p.q, p.k, p.v, NULL, p.out, NULL, p.ws, p.ws_bytes) == MHA_ERR_NULL,
          "additive without a_q/a_k/a_v");
#endif
    hp[0] = h;
    hp[1] = NULL;
    CHECK(mha_concat(2, 3, hp, h) == MHA_ERR_NULL, "concat: NULL entry");
    CHECK(mha_concat(2, 3, NULL, h) == MHA_ERR_NULL, "concat: NULL list");
    CHECK(mha_weight_counts_get(&s, NULL) == MHA_ERR_NULL, "counts: NULL");
    /* SHAPE */
    CHECK(mha_forward(&s, &p.w, -1, 3, 4, p.q, p.k, p.v, NULL, p.out, NULL, p.ws, p.ws_bytes) == MHA_ERR_SHAPE,
          "batch < 0");
    CHECK(mha_forward(&s, &p.w, 2, 3, -4, p.q, p.k, p.v, NULL, p.out, NULL, p.ws, p.ws_bytes) == MHA_ERR_SHAPE,
          "m < 0");
    bad = s;
    bad.p_k = 3;
    CHECK(mha_forward(&bad, &p.w, 2, 3, 4, p.q, p.k, p.v, NULL, p.out, NULL, p.ws, p.ws_bytes) == MHA_ERR_SHAPE,
          "p_q != p_k with dot scoring");
    bad = s;
    bad.kv_heads = 3;
    CHECK(mha_workspace_size(&bad, 2, 3, 4) == 0 && mha_weight_counts_get(&bad, &c) == MHA_ERR_SHAPE,
          "heads %% kv_heads != 0");
    bad = s;
    bad.score = (mha_score)7;
    CHECK(mha_forward(&bad, &p.w, 2, 3, 4, p.q, p.k, p.v, NULL, p.out, NULL, p.ws, p.ws_bytes) == MHA_ERR_SHAPE,
          "unknown score kind");
    bad = s;
    bad.scale = NAN;
    CHECK(mha_workspace_size(&bad, 1, 1, 1) == 0, "NaN scale");
    bad = s;
    bad.p_o = 0;
    CHECK(mha_output(&bad, &p.w, p.q, p.out) == MHA_ERR_SHAPE, "p_o = 0");
    CHECK(mha_head(&s, &p.w, 2, p.q, p.k, p.v, 4, 4, h, p.ws, p.ws_bytes) == MHA_ERR_SHAPE, "head out of range");
    CHECK(mha_concat(0, 3, hp, h) == MHA_ERR_SHAPE, "concat: heads 0");
    /* OVERFLOW: byte counts beyond size_t, in 64-bit and 32-bit builds alike */
    bad = s;
    bad.heads = 4; bad.kv_heads = 1;
    bad.d_q = INT32_MAX; bad.p_q = bad.p_k = INT32_MAX;
    CHECK(mha_weight_counts_get(&bad, &c) == MHA_ERR_OVERFLOW, "W_q of 4 x 2^31 x 2^31 floats");
    CHECK(mha_workspace_size(&bad, 1, 1, 1) == 0, "workspace size: overflow reported as 0");
    CHECK(mha_forward(&bad, &p.w, 2, 3, 4, p.q, p.k, p.v, NULL, p.out, NULL, p.ws, p.ws_bytes) == MHA_ERR_OVERFLOW,
          "forward: overflow");
    bad = s;
    bad.p_q = bad.p_k = 1 << 30;
    CHECK(mha_forward(&bad, &p.w, 2, 3, INT32_MAX, p.q, p.k, p.v, NULL, p.out, NULL, p.ws, p.ws_bytes) ==
              MHA_ERR_OVERFLOW,
          "forward: m x p_k workspace overflow");
    /* WORKSPACE */
    CHECK(mha_forward(&s, &p.w, 2, 3, 4, p.q, p.k, p.v, NULL, p.out, NULL, NULL, p.ws_bytes) == MHA_ERR_WORKSPACE,
          "NULL workspace");
    CHECK(mha_forward(&s, &p.w, 2, 3, 4, p.q, p.k, p.v, NULL, p.out, NULL, p.ws, p.ws_bytes - 1) ==
              MHA_ERR_WORKSPACE,
          "workspace one byte short");
    /* MASK */
    memset(&mask, 0, sizeof mask);
    mask.valid_lens = lens;
    CHECK(tu_forward(&p, &mask, NULL) == MHA_ERR_MASK, "valid length 5 > m = 4");
    lens[1] = -1;
    CHECK(tu_forward(&p, &mask, NULL) == MHA_ERR_MASK, "valid length -1");
    CHECK(mha_head(&s, &p.w, 0, p.q, p.k, p.v, 4, 5, h, p.ws, p.ws_bytes) == MHA_ERR_MASK, "head: valid_len > m");
    { /* an error writes nothing: MHA_ERR_MASK is the last check, and the reference
         path copies its call state into the workspace only after it */
        size_t k, outn = (size_t)p.batch * (size_t)p.n * (size_t)p.s.p_o;
        int clean = 1;
        memset(p.ws, 0xA5, p.ws_bytes);
        for (k = 0; k < outn; ++k) p.out[k] = 7.0f;
        CHECK(tu_forward(&p, &mask, NULL) == MHA_ERR_MASK, "valid length -1, again");
        for (k = 0; k < p.ws_bytes; ++k) clean &= ((const unsigned char *)p.ws)[k] == 0xA5;
        for (k = 0; k < outn; ++k) clean &= p.out[k] == 7.0f;
        CHECK(clean, "MHA_ERR_MASK wrote neither out nor the workspace");
    }
    /* strings: never NULL, distinct for each code, also for unknown codes */
    strs[0] = mha_status_string(MHA_OK);
    strs[1] = mha_status_string(MHA_ERR_NULL);
    strs[2] = mha_status_string(MHA_ERR_SHAPE);
    strs[3] = mha_status_string(MHA_ERR_OVERFLOW);
    strs[4] = mha_status_string(MHA_ERR_WORKSPACE);
    strs[5] = mha_status_string(MHA_ERR_MASK);
    strs[6] = mha_status_string((mha_status)-99);
#if defined(MHA_NO_STATUS_STRINGS) && MHA_NO_STATUS_STRINGS
    for (i = 0; i < 7; ++i) distinct &= strs[i] && strs[i][0] == '\0';
    CHECK(distinct, "MHA_NO_STATUS_STRINGS: every status string is \"\"");
    (void)j;
#else
    for (i = 0; i < 7; ++i)
        for (j = 0; j < i; ++j) distinct &= strs[i] && strs[j] && strcmp(strs[i], strs[j]) != 0;
    CHECK(distinct, "status strings are non-NULL and distinct");
#endif
    tu_problem_free(&p);
}

/* Exactly mha_workspace_size() bytes work at every offset, with the same result;
   nothing outside the workspace and out is written. */
static void test_workspace(void) {
    mha_shape s = shape_of(4, 2, 6, 5, 4, 3, 5, 7, 1);
    tu_problem p;
    unsigned char *buf;
    float *ref;
    size_t n_out, off, i;
    int same = 1, guard = 1;
    tu_problem_make(&p, &s, 2, 3, 5, 1);
    n_out = 2 * 3 * 7;
    ref = (float *)malloc(n_out * sizeof(float));
    CHECK(tu_forward(&p, NULL, NULL) == MHA_OK, "workspace: forward");
    memcpy(ref, p.out, n_out * sizeof(float));
    CHECK(mha_reference_workspace_size(&s, 2, 3, 5) == MHA_WORKSPACE_BYTES(4, 2, 3, 4, 5, 5, 5),
          "MHA_WORKSPACE_BYTES equals mha_reference_workspace_size");
    CHECK(mha_reference_workspace_size(&s, 1, 1, 5) == mha_reference_workspace_size(&s, 9, 99, 5),
          "the reference workspace does not depend on batch or n");
    if (!mha_build_info().fast)
        CHECK(p.ws_bytes == MHA_WORKSPACE_BYTES(4, 2, 3, 4, 5, 5, 5), "MHA_FAST 0: mha_workspace_size is the same");
    buf = (unsigned char *)malloc(p.ws_bytes + 64 + 64);
    for (off = 0; off < 64; ++off) {
        memset(buf, 0xA5, p.ws_bytes + 128);
        memset(p.out, 0, n_out * sizeof(float));
        CHECK(mha_forward(&s, &p.w, 2, 3, 5, p.q, p.k, p.v, NULL, p.out, NULL, buf + 64 + off, p.ws_bytes) == MHA_OK,
              "workspace at offset %lu", (unsigned long)off);
        same &= memcmp(ref, p.out, n_out * sizeof(float)) == 0;
        for (i = 0; i < 64 + off; ++i) guard &= buf[i] == 0xA5;
        for (i = 64 + off + p.ws_bytes; i < p.ws_bytes + 128; ++i) guard &= buf[i] == 0xA5;
    }
    CHECK(same, "every workspace offset gives the same result");
    CHECK(guard, "no byte outside the workspace is written");
    free(buf);
    free(ref);
    tu_problem_free(&p);
}

/* Huge and non-finite numbers. */
static void test_numbers(void) {
    mha_shape s = shape_of(2, 0, 3, 3, 3, 2, 2, 3, 0);
    tu_problem p;
    mha_mask mask;
    float *bias, *ref;
    size_t nm = 2 * 3 * 4, i, n_out = 2 * 3 * 3;
    int ok;
    tu_problem_make(&p, &s, 2, 3, 4, 1);
    bias = (float *)calloc(nm, sizeof(float));
    ref = (float *)malloc(n_out * sizeof(float));
    memset(&mask, 0, sizeof mask);
    mask.bias = bias;
    /* scores of magnitude 1e30 do not overflow the softmax */
    for (i = 0; i < nm; ++i) bias[i] = (i % 2) ? 1e30f : -1e30f;
    CHECK(tu_forward(&p, &mask, p.attn) == MHA_OK && tu_all_finite(p.out, n_out) && tu_all_finite(p.attn, 2 * nm),
          "scores of +-1e30 give finite results");
    /* +inf: the +inf keys share the weight; the rest get 0 */
    memset(bias, 0, nm * sizeof(float));
    for (i = 0; i < nm; i += 4) bias[i + 1] = bias[i + 3] = INFINITY;
    CHECK(tu_forward(&p, &mask, p.attn) == MHA_OK && tu_all_finite(p.out, n_out), "+inf bias: finite");
    ok = 1;
    for (i = 0; i < 2 * nm; i += 4)
        ok &= p.attn[i] == 0.0f && p.attn[i + 1] == 0.5f && p.attn[i + 2] == 0.0f && p.attn[i + 3] == 0.5f;
    CHECK(ok, "+inf bias: the two +inf keys get 0.5 each");
    /* NaN in one bias row: that row only */
    memset(bias, 0, nm * sizeof(float));
    CHECK(tu_forward(&p, &mask, NULL) == MHA_OK, "zero bias");
    memcpy(ref, p.out, n_out * sizeof(float));
    bias[1 * 4 + 2] = NAN; /* batch 0, query 1, key 2 */
    CHECK(tu_forward(&p, &mask, NULL) == MHA_OK, "NaN bias: ok");
    ok = 1;
    for (i = 0; i < n_out; ++i) ok &= (i / 3 == 1) ? p.out[i] != p.out[i] : p.out[i] == ref[i];
    CHECK(ok, "NaN bias: only query row 1 of batch 0 is NaN");
    /* NaN in one query: that row only */
    p.q[3 * 3 + 1] = NAN; /* batch 1, query 0 */
    CHECK(tu_forward(&p, NULL, NULL) == MHA_OK, "NaN query: ok");
    ok = 1;
    for (i = 0; i < n_out; ++i) ok &= (i / 3 == 3) ? p.out[i] != p.out[i] : p.out[i] == ref[i];
    CHECK(ok, "NaN query: only that query's row is NaN");
    free(bias);
    free(ref);
    tu_problem_free(&p);
}

/* The entry points beside mha_forward, in whichever build this is: the
   parallel variant gives mha_forward's result bit for bit (the reference
   build ignores its parallel-for), the reference variant agrees with it, and
   the packing functions check their arguments (under MHA_FAST 0 there is
   nothing to pack: size 0, and packing is a no-op that succeeds). */
static int serial_calls;
static void serial_for(void *user, mha_task task, void *arg, int32_t count) {
    int32_t i;
    (void)user;
    ++serial_calls;
    for (i = 0; i < count; ++i) task(arg, i);
}
static void test_entry_points(void) {
    mha_shape s = shape_of(3, 1, 5, 4, 6, 2, 3, 7, 0);
    tu_problem p;
    size_t n_out = 2 * 4 * 7, rb, pb;
    float *a, *b;
    void *rws, *pack;
    mha_weights w;
    tu_problem_make(&p, &s, 2, 4, 6, 1);
    a = (float *)malloc(n_out * sizeof(float));
    b = (float *)malloc(n_out * sizeof(float));
    CHECK(tu_forward(&p, NULL, NULL) == MHA_OK, "entry points: mha_forward");
    memcpy(a, p.out, n_out * sizeof(float));
    CHECK(mha_forward_parallel(&s, &p.w, 2, 4, 6, p.q, p.k, p.v, NULL, b, NULL, p.ws, p.ws_bytes, serial_for, NULL) ==
                  MHA_OK &&
              memcmp(a, b, n_out * sizeof(float)) == 0,
          "mha_forward_parallel equals mha_forward bit for bit");
    /* MHA_FAST 0: the reference path, on the calling thread; MHA_FAST 1: a call this small (below
       MHA__PAR_MIN multiply-adds a pass) too (tests/test_fast.c: a larger one uses the parallel-for) */
    CHECK(serial_calls == 0, "a call this small does not use the parallel-for");
    CHECK(mha_forward_parallel(&s, &p.w, 2, 4, 6, p.q, p.k, NULL, NULL, b, NULL, p.ws, p.ws_bytes, serial_for, NULL) ==
              MHA_ERR_NULL,
          "mha_forward_parallel checks as mha_forward");
    rb = mha_reference_workspace_size(&s, 2, 4, 6);
    rws = malloc(rb);
    CHECK(mha_forward_reference(&s, &p.w, 2, 4, 6, p.q, p.k, p.v, NULL, b, NULL, rws, rb) == MHA_OK &&
              tu_max_diff(a, b, n_out) <= 1e-5f * (1.0f + tu_max_abs(a, n_out)),
          "mha_forward_reference agrees with mha_forward");
    CHECK(mha_forward_reference(&s, &p.w, 2, 4, 6, p.q, p.k, p.v, NULL, b, NULL, rws, rb - 1) == MHA_ERR_WORKSPACE,
          "mha_forward_reference: one byte short");
    CHECK(mha_reference_workspace_size(NULL, 1, 1, 1) == 0 && mha_packed_weights_size(NULL) == 0,
          "sizes of a NULL shape are 0");
    pb = mha_packed_weights_size(&s);
    pack = malloc(pb + 1);
    w = p.w;
    w.w_o = NULL;
    CHECK(mha_pack_weights(NULL, &p.w, pack, pb) == MHA_ERR_NULL && mha_pack_weights(&s, NULL, pack, pb) == MHA_ERR_NULL &&
              mha_pack_weights(&s, &w, pack, pb) == MHA_ERR_NULL,
          "mha_pack_weights: NULL shape, weights or weight");
    s.p_k = 0;
    CHECK(mha_pack_weights(&s, &p.w, pack, pb) == MHA_ERR_SHAPE && mha_packed_weights_size(&s) == 0,
          "mha_pack_weights: a bad shape");
    s.p_k = 2;
    CHECK(mha_pack_weights(&s, &p.w, pack, pb) == MHA_OK, "mha_pack_weights into its size");
    w = p.w;
    w.packed = pack;
    CHECK(mha_forward(&s, &w, 2, 4, 6, p.q, p.k, p.v, NULL, b, NULL, p.ws, p.ws_bytes) == MHA_OK &&
              memcmp(a, b, n_out * sizeof(float)) == 0,
          "packed weights: the same result bit for bit");
    if (!mha_build_info().fast) CHECK(pb == 0, "MHA_FAST 0: nothing to pack");
    free(a); free(b); free(rws); free(pack);
    tu_problem_free(&p);
}


/* ---- the decoder knobs' properties ------------------------------------------ */

/* The two RoPE pairings are one rotation with the entries of each head
   permuted: a model with adjacent pairs, its W_q and W_k rows (and biases)
   reordered so that entries 2a, 2a+1 become a, a + r/2, gives the same
   output with half-split pairs. */
static void test_rope_pairings(void) {
    static const int32_t dims[3] = {2, 6, 8};
    int d, ok = 1;
    float worst = 0.0f;
    for (d = 0; d < 3; ++d) {
        mha_shape s = {0};
        tu_problem p;
        mha_weights w2;
        mha_mask mask = {1, 1, NULL, 0, NULL, NULL};
        float *wq, *wk, *bq, *bk, *out1, *out2;
        size_t n_out, hq, hk, a, e, r = (size_t)dims[d];
        int32_t dq, dk;
        s.heads = 4; s.kv_heads = 2; s.d_q = 7; s.d_k = 5; s.d_v = 6; s.p_q = s.p_k = 8; s.p_v = 3; s.p_o = 5;
        s.rope_dim = dims[d];
        s.rope_pairs = MHA_ROPE_ADJACENT;
        s.rope_theta = d == 1 ? 500000.0f : 0.0f;
        tu_problem_make(&p, &s, 2, 5, 6, 1);
        n_out = (size_t)2 * 5 * (size_t)s.p_o;
        out1 = tu_floats(n_out, 0.0f);
        out2 = tu_floats(n_out, 0.0f);
        ok &= tu_forward(&p, &mask, NULL) == MHA_OK;
        memcpy(out1, p.out, n_out * sizeof(float));
        dq = s.d_q; dk = s.d_k;
        wq = tu_floats((size_t)s.heads * 8 * (size_t)dq, 0.0f);
        wk = tu_floats((size_t)s.kv_heads * 8 * (size_t)dk, 0.0f);
        bq = tu_floats((size_t)s.heads * 8, 0.0f);
        bk = tu_floats((size_t)s.kv_heads * 8, 0.0f);
        for (hq = 0; hq < (size_t)s.heads; ++hq) /* new row e of a head takes old row (e < r ? pair's : e) */
            for (e = 0; e < 8; ++e) {
                a = e < r ? (e < r / 2 ? 2 * e : 2 * (e - r / 2) + 1) : e;
                memcpy(wq + (hq * 8 + e) * (size_t)dq, (const float *)p.w.w_q + (hq * 8 + a) * (size_t)dq, (size_t)dq * sizeof(float));
                bq[hq * 8 + e] = p.w.b_q[hq * 8 + a];
                if (hq < (size_t)s.kv_heads) {
                    hk = hq;
                    memcpy(wk + (hk * 8 + e) * (size_t)dk, (const float *)p.w.w_k + (hk * 8 + a) * (size_t)dk, (size_t)dk * sizeof(float));
                    bk[hk * 8 + e] = p.w.b_k[hk * 8 + a];
                }
            }
        w2 = p.w;
        w2.w_q = wq; w2.b_q = bq; w2.w_k = wk; w2.b_k = bk;
        s.rope_pairs = MHA_ROPE_HALF;
        ok &= mha_forward(&s, &w2, 2, 5, 6, p.q, p.k, p.v, &mask, out2, NULL, p.ws, p.ws_bytes) == MHA_OK;
        if (tu_max_diff(out1, out2, n_out) / (1.0f + tu_max_abs(out1, n_out)) > worst)
            worst = tu_max_diff(out1, out2, n_out) / (1.0f + tu_max_abs(out1, n_out));
        free(wq); free(wk); free(bq); free(bk); free(out1); free(out2);
        tu_problem_free(&p);
    }
    ok &= worst <= TOL;
    printf("RoPE: adjacent pairs = half-split pairs on permuted W_q, W_k rows: worst %.3g of the tolerance\n",
           (double)(worst / TOL));
    CHECK(ok, "RoPE: adjacent pairs equal half-split pairs on W_q, W_k rows permuted (rope_dim 2, 6, 8 of 8; "
              "worst %.3g of the tolerance)", (double)(worst / TOL));
}

/* ALiBi's slopes, read back from the attention weights: with q = 0 every
   score is -slope (P_q - P_k); a query at position D sees keys 0 and D
   (keep), so slope = ln(w_D / w_0) / D. Against the published formula,
   transcribed here in double: 2^(-8/p) to the powers 1..p for the largest
   power of two p <= h, then every other slope of the 2p-head series. */
static double alibi_formula(int32_t h, int32_t i) {
    int32_t p = 1;
    double start;
    while (p * 2 <= h) p *= 2;
    if (i >= p) return alibi_formula(2 * p, 2 * (i - p));
    start = pow(2.0, -pow(2.0, -(log2((double)p) - 3.0)));
    return pow(start, (double)(i + 1));
}
static void test_alibi_slopes(void) {
    static const int32_t counts[4] = {8, 12, 32, 6};
    const int32_t D = 64, m = D + 1;
    int c;
    for (c = 0; c < 4; ++c) {
        int32_t h = counts[c], i, j;
        mha_shape s = {0};
        mha_weights w = {0};
        mha_mask mask = {0, D, NULL, 0, NULL, NULL};
        uint8_t keep[65];
        float *q = tu_floats((size_t)h, 0.0f), *k = tu_floats((size_t)h * (size_t)m, 1.0f);
        float *v = tu_floats((size_t)h * (size_t)m, 1.0f), *ho = tu_floats((size_t)h, 0.0f);
        float *attn = tu_floats((size_t)h * (size_t)m, 0.0f);
        double worst = 0.0;
        size_t bytes;
        void *ws;
        int ok;
        for (i = 0; i < h; ++i) q[i] = 0.0f;
        for (j = 0; j < m; ++j) keep[j] = j == 0 || j == D;
        mask.keep = keep;
        s.heads = h; s.d_q = s.d_k = s.d_v = s.p_o = 1; s.p_q = s.p_k = s.p_v = 1;
        s.alibi = 1;
        bytes = mha_attend_workspace_size(&s, 1, 1, m);
        ws = malloc(bytes);
        ok = mha_attend(&s, &w, 1, 1, m, q, k, v, &mask, ho, attn, ws, bytes) == MHA_OK;
        for (i = 0; i < h && ok; ++i) {
            double got = log((double)attn[(size_t)i * (size_t)m + (size_t)D] / (double)attn[(size_t)i * (size_t)m]) / D;
            double want = alibi_formula(h, i), rel = fabs(got - want) / want;
            if (rel > worst) worst = rel;
        }
        printf("ALiBi slopes of %d heads read back from the weights: worst relative error %.3g\n", (int)h, worst);
        CHECK(ok && worst <= 1e-5, "ALiBi slopes of %d heads against the published formula: worst relative error %.3g",
              (int)h, worst);
        free(q); free(k); free(v); free(ho); free(attn); free(ws);
    }
}


/* 16-bit floats (test_mathf.c checks them against an independent search):
   every pattern back to itself, NaN quiet, and rounding cases whose answers
   follow from the formats' definitions. */
static void test_16bit_floats(void) {
    static const struct { float x; uint16_t f16, bf16; } cases[] = {
        {1.0f, 0x3c00, 0x3f80},        {-2.0f, 0xc000, 0xc000},       {65504.0f, 0x7bff, 0x4780},
        {65519.0f, 0x7bff, 0x4780},    {65520.0f, 0x7c00, 0x4780},    {1e30f, 0x7c00, 0x714a}, /* bits 0x7149f2ca: the low half rounds up */
        {1.00048828125f, 0x3c00, 0x3f80}, /* 1 + 2^-11: a tie, to even */
        {1.00146484375f, 0x3c02, 0x3f80}, /* 1 + 3 2^-11: a tie, to even (up) */
        {2.98023224e-8f, 0x0000, 0x3300}, /* 2^-25: a tie between 0 and 2^-24, to 0 */
        {2.98023259e-8f, 0x0001, 0x3300}, /* just above: the smallest subnormal */
        {6.10351562e-5f, 0x0400, 0x3880}, /* 2^-14, the smallest normal */
        {-0.0f, 0x8000, 0x8000},       {3.40282347e38f, 0x7c00, 0x7f80}, /* FLT_MAX rounds up to inf in bf16 */
        {1.00390625f, 0x3c04, 0x3f80}, /* 1 + 2^-8: exact in f16; a tie in bf16, to even */
        {1.01171875f, 0x3c0c, 0x3f82}, /* 1 + 3 2^-8: a tie in bf16, to even (up) */
    };
    uint32_t h;
    size_t k;
    int ok = 1;
    for (h = 0; h < 65536; ++h) {
        float f = mha_f32_from_f16((uint16_t)h), b = mha_f32_from_bf16((uint16_t)h);
        int nan16 = (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu), nanb = (h & 0x7f80u) == 0x7f80u && (h & 0x7fu);
        ok &= nan16 ? f != f && mha_f16_from_f32(f) == (h | 0x200u) : mha_f16_from_f32(f) == h;
        ok &= nanb ? b != b && mha_bf16_from_f32(b) == (h | 0x40u) : mha_bf16_from_f32(b) == h;
    }
    CHECK(ok, "16-bit floats: all 65536 f16 and bf16 patterns back to themselves (NaN made quiet)");
    for (k = 0; k < sizeof cases / sizeof cases[0]; ++k)
        CHECK(mha_f16_from_f32(cases[k].x) == cases[k].f16 && mha_bf16_from_f32(cases[k].x) == cases[k].bf16,
              "16-bit floats: %.9g gives f16 %04x (want %04x), bf16 %04x (want %04x)", (double)cases[k].x,
              mha_f16_from_f32(cases[k].x), cases[k].f16, mha_bf16_from_f32(cases[k].x), cases[k].bf16);
    CHECK(mha_f32_from_f16(0x0001) == 1.0f / 16777216.0f && mha_f32_from_f16(0x7bff) == 65504.0f && /* 2^-24 */
              mha_f32_from_f16(0xfc00) < -3.4e38f && mha_f32_from_bf16(0x3f80) == 1.0f,
          "16-bit floats: known values back to float");
}

/* 16-bit weights: mha_forward (packed and not), mha_head and
   mha_output_rows with f16 and bf16 matrices give, bit for bit, what they
   give with float matrices holding the same rounded values (the elements
   are converted exactly and summed in the same order), on both paths;
   mha_cache_bytes_typed is half the float cache. */
static void test_16bit_weights(void) {
    mha_shape s = shape_of(4, 2, 37, 19, 23, 20, 17, 33, 0); /* odd sizes, d_q past one block of 32 */
    tu_problem p;
    mha_weight_counts wc;
    size_t hbytes = mha_reference_workspace_size(&s, 1, 1, 7);
    void *hws = malloc(hbytes);
    int ti, ok = 1;
    tu_problem_make(&p, &s, 2, 5, 7, 1);
    mha_weight_counts_get(&s, &wc);
    for (ti = 0; ti < 2; ++ti) {
        const int32_t type = ti ? MHA_BF16 : MHA_F16;
        const size_t counts[4] = {wc.w_q, wc.w_k, wc.w_v, wc.w_o};
        const void *src[4];
        uint16_t *h[4];
        float *f[4], *out16 = tu_floats((size_t)2 * 5 * (size_t)s.p_o, 0.0f), *out32 = tu_floats((size_t)2 * 5 * (size_t)s.p_o, 0.0f);
        mha_weights w16 = p.w, w32 = p.w;
        size_t k, i, pbytes = mha_packed_weights_size(&s), no = (size_t)2 * 5 * (size_t)s.p_o;
        void *pk16 = malloc(pbytes ? pbytes : 1), *pk32 = malloc(pbytes ? pbytes : 1);
        float h16[64], h32[64];
        src[0] = p.w.w_q; src[1] = p.w.w_k; src[2] = p.w.w_v; src[3] = p.w.w_o;
        for (k = 0; k < 4; ++k) {
            h[k] = (uint16_t *)malloc(counts[k] * sizeof(uint16_t));
            f[k] = (float *)malloc(counts[k] * sizeof(float));
            for (i = 0; i < counts[k]; ++i) {
                float x = ((const float *)src[k])[i] * 3.0f;
                h[k][i] = type == MHA_F16 ? mha_f16_from_f32(x) : mha_bf16_from_f32(x);
                f[k][i] = type == MHA_F16 ? mha_f32_from_f16(h[k][i]) : mha_f32_from_bf16(h[k][i]);
            }
        }
        w16.w_q = h[0]; w16.w_k = h[1]; w16.w_v = h[2]; w16.w_o = h[3];
        w16.type = type;
        w32.w_q = f[0]; w32.w_k = f[1]; w32.w_v = f[2]; w32.w_o = f[3];
        ok &= mha_forward(&s, &w16, 2, 5, 7, p.q, p.k, p.v, NULL, out16, NULL, p.ws, p.ws_bytes) == MHA_OK;
        ok &= mha_forward(&s, &w32, 2, 5, 7, p.q, p.k, p.v, NULL, out32, NULL, p.ws, p.ws_bytes) == MHA_OK;
        ok &= memcmp(out16, out32, no * sizeof(float)) == 0 && tu_all_finite(out16, no);
        if (pbytes) { /* packed from the 16-bit weights: the same panels */
            ok &= mha_pack_weights(&s, &w16, pk16, pbytes) == MHA_OK && mha_pack_weights(&s, &w32, pk32, pbytes) == MHA_OK;
            w16.packed = pk16;
            w32.packed = pk32;
            ok &= mha_forward(&s, &w16, 2, 5, 7, p.q, p.k, p.v, NULL, out16, NULL, p.ws, p.ws_bytes) == MHA_OK;
            ok &= mha_forward(&s, &w32, 2, 5, 7, p.q, p.k, p.v, NULL, out32, NULL, p.ws, p.ws_bytes) == MHA_OK;
            ok &= memcmp(out16, out32, no * sizeof(float)) == 0;
            w16.packed = w32.packed = NULL;
        }
        ok &= mha_forward_reference(&s, &w16, 2, 5, 7, p.q, p.k, p.v, NULL, out16, NULL, p.ws, p.ws_bytes) == MHA_OK;
        ok &= mha_forward_reference(&s, &w32, 2, 5, 7, p.q, p.k, p.v, NULL, out32, NULL, p.ws, p.ws_bytes) == MHA_OK;
        ok &= memcmp(out16, out32, no * sizeof(float)) == 0;
        ok &= mha_head(&s, &w16, 3, p.q, p.k, p.v, 7, 6, h16, hws, hbytes) == MHA_OK;
        ok &= mha_head(&s, &w32, 3, p.q, p.k, p.v, 7, 6, h32, hws, hbytes) == MHA_OK;
        ok &= memcmp(h16, h32, (size_t)s.p_v * sizeof(float)) == 0;
        ok &= mha_output_rows(&s, &w16, 3, p.q, out16) == MHA_OK && mha_output_rows(&s, &w32, 3, p.q, out32) == MHA_OK;
        ok &= memcmp(out16, out32, (size_t)3 * (size_t)s.p_o * sizeof(float)) == 0;
        for (k = 0; k < 4; ++k) {
            free(h[k]);
            free(f[k]);
        }
        free(out16);
        free(out32);
        free(pk16);
        free(pk32);
    }
    CHECK(ok, "f16 and bf16 weights: mha_forward (packed and not, both paths), mha_head, mha_output_rows equal "
              "float weights of the same values bit for bit");
    CHECK(mha_cache_bytes_typed(&s, 2, 5, MHA_F16) * 2 == mha_cache_bytes(&s, 2, 5) &&
              mha_cache_bytes_typed(&s, 2, 5, MHA_BF16) * 2 == mha_cache_bytes_typed(&s, 2, 5, MHA_F32),
          "mha_cache_bytes_typed: 16-bit caches are half a float cache");
    free(hws);
    tu_problem_free(&p);
}

int main(void) {
    test_reference_vectors();
    test_core_vectors();
    test_composition();
    test_seed_questions();
    test_permutation(0);
    test_mask_is_delete(0);
#if !(defined(MHA_NO_ADDITIVE) && MHA_NO_ADDITIVE)
    test_permutation(1);
    test_mask_is_delete(1);
    test_workspace();
#endif
    test_wo_selects_head();
    test_single_head();
    test_fully_masked();
    test_statuses();
    test_numbers();
    test_entry_points();
    test_16bit_floats();
    if (!mha_build_info().no_extras) {
        test_rope_pairings();
        test_alibi_slopes();
        test_16bit_weights();
    }
    return tu_summary();
}
