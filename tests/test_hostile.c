/* Hostile input: one group of checks per row of the docs' bad-input table,
   plus the canary test (guard bytes around every output, hashes of every
   input) and run-to-run determinism. */
#include "naive_ref.h"
#include "test_util.h"

/* ---- canaries and hashes ---------------------------------------------------- */

#define GUARD 64
#define GUARD_BYTE 0xA5

/* A buffer of `bytes` with GUARD guard bytes on each side. */
typedef struct guarded {
    unsigned char *block;
    size_t bytes;
} guarded;

static void *guarded_make(guarded *g, size_t bytes) {
    g->bytes = bytes;
    g->block = (unsigned char *)malloc(bytes + 2 * GUARD);
    memset(g->block, GUARD_BYTE, bytes + 2 * GUARD);
    return g->block + GUARD;
}
static int guarded_intact(const guarded *g) {
    size_t i;
    for (i = 0; i < GUARD; ++i)
        if (g->block[i] != GUARD_BYTE || g->block[GUARD + g->bytes + i] != GUARD_BYTE) return 0;
    return 1;
}

static uint64_t fnv(uint64_t h, const void *p, size_t bytes) {
    const unsigned char *c = (const unsigned char *)p;
    size_t i;
    if (!p) return h;
    for (i = 0; i < bytes; ++i) h = (h ^ c[i]) * 1099511628211ull;
    return h;
}
static uint64_t hash_inputs(const tu_problem *p, const mha_mask *mask) {
    mha_weight_counts c;
    uint64_t h = 14695981039346656037ull;
    mha_weight_counts_get(&p->s, &c);
    h = fnv(h, p->w.w_q, c.w_q * 4); h = fnv(h, p->w.b_q, c.b_q * 4);
    h = fnv(h, p->w.w_k, c.w_k * 4); h = fnv(h, p->w.b_k, c.b_k * 4);
    h = fnv(h, p->w.w_v, c.w_v * 4); h = fnv(h, p->w.b_v, c.b_v * 4);
    h = fnv(h, p->w.w_o, c.w_o * 4); h = fnv(h, p->w.b_o, c.b_o * 4);
    h = fnv(h, p->w.a_q, c.a_q * 4); h = fnv(h, p->w.a_k, c.a_k * 4); h = fnv(h, p->w.a_v, c.a_v * 4);
    h = fnv(h, p->q, (size_t)p->batch * (size_t)p->n * (size_t)p->s.d_q * 4);
    h = fnv(h, p->k, (size_t)p->batch * (size_t)p->m * (size_t)p->s.d_k * 4);
    h = fnv(h, p->v, (size_t)p->batch * (size_t)p->m * (size_t)p->s.d_v * 4);
    h = fnv(h, &p->s, sizeof p->s);
    if (mask) {
        size_t nm = (size_t)p->batch * (size_t)p->n * (size_t)p->m;
        h = fnv(h, mask, sizeof *mask);
        h = fnv(h, mask->keep, nm);
        h = fnv(h, mask->bias, nm * 4);
        h = fnv(h, mask->valid_lens, (size_t)p->batch * (size_t)(mask->valid_lens_per_query ? p->n : 1) * 4);
    }
    return h;
}

static mha_shape shape_rand(int additive) {
    mha_shape s;
    int32_t kv = 1 + (int32_t)(tu_next() % 3);
    memset(&s, 0, sizeof s);
    s.kv_heads = kv;
    s.heads = kv * (1 + (int32_t)(tu_next() % 3));
    s.d_q = 1 + (int32_t)(tu_next() % 7); s.d_k = 1 + (int32_t)(tu_next() % 7); s.d_v = 1 + (int32_t)(tu_next() % 7);
    s.p_q = 1 + (int32_t)(tu_next() % 6);
    s.p_k = additive ? 1 + (int32_t)(tu_next() % 6) : s.p_q;
    s.p_v = 1 + (int32_t)(tu_next() % 6); s.p_o = 1 + (int32_t)(tu_next() % 7);
    s.score = additive ? MHA_SCORE_ADDITIVE : MHA_SCORE_DOT;
    s.p_a = additive ? 1 + (int32_t)(tu_next() % 5) : 0;
    return s;
}

/* Exactly mha_workspace_size() bytes work; no byte outside out, attn and the
   workspace changes; inputs are unchanged; a second run is bitwise identical. */
static void test_canary(void) {
    int trial, intact = 1, unchanged = 1, same = 1, ok = 1, agree = 1;
    for (trial = 0; trial < 60; ++trial) {
        mha_shape s = shape_rand(trial % 3 == 2);
        tu_problem p;
        guarded go, ga, gw;
        mha_mask mask;
        int32_t *lens = NULL;
        uint8_t *keep = NULL;
        float *out, *attn, *first;
        double *ref, mx = 0.0;
        size_t n_out, n_attn, nm, i;
        uint64_t h0;
        void *ws;
        tu_problem_make(&p, &s, 1 + (int32_t)(tu_next() % 3), 1 + (int32_t)(tu_next() % 5), (int32_t)(tu_next() % 6), 1);
        n_out = (size_t)p.batch * (size_t)p.n * (size_t)s.p_o;
        n_attn = (size_t)p.batch * (size_t)s.heads * (size_t)p.n * (size_t)p.m;
        nm = (size_t)p.batch * (size_t)p.n * (size_t)p.m;
        memset(&mask, 0, sizeof mask);
        mask.causal = trial % 2;
        mask.causal_offset = (int32_t)(tu_next() % 7) - 3;
        if (trial % 4 >= 2) {
            mask.valid_lens_per_query = trial % 8 >= 4;
            lens = (int32_t *)malloc(sizeof(int32_t) * (size_t)(p.batch * p.n));
            for (i = 0; i < (size_t)(p.batch * p.n); ++i) lens[i] = (int32_t)(tu_next() % (uint32_t)(p.m + 1));
            mask.valid_lens = lens;
        }
        if (trial % 5 == 0) {
            keep = (uint8_t *)malloc(nm + 1);
            for (i = 0; i < nm; ++i) keep[i] = (uint8_t)(tu_next() % 3 != 0);
            mask.keep = keep;
        }
        out = (float *)guarded_make(&go, n_out * sizeof(float));
        attn = (float *)guarded_make(&ga, n_attn * sizeof(float));
        ws = guarded_make(&gw, p.ws_bytes);
        h0 = hash_inputs(&p, &mask);
        ok &= mha_forward(&s, &p.w, p.batch, p.n, p.m, p.q, p.k, p.v, &mask, out, attn, ws, p.ws_bytes) == MHA_OK;
        intact &= guarded_intact(&go) && guarded_intact(&ga) && guarded_intact(&gw);
        unchanged &= hash_inputs(&p, &mask) == h0;
        first = (float *)malloc((n_out ? n_out : 1) * sizeof(float));
        memcpy(first, out, n_out * sizeof(float));
        memset(ws, 0x5A, p.ws_bytes); /* a dirty workspace must not matter */
        ok &= mha_forward(&s, &p.w, p.batch, p.n, p.m, p.q, p.k, p.v, &mask, out, attn, ws, p.ws_bytes) == MHA_OK;
        same &= memcmp(first, out, n_out * sizeof(float)) == 0;
        ref = (double *)malloc((n_out ? n_out : 1) * sizeof(double));
        naive_forward(&s, &p.w, p.batch, p.n, p.m, p.q, p.k, p.v, &mask, ref, NULL);
        for (i = 0; i < n_out; ++i) mx = fabs(ref[i]) > mx ? fabs(ref[i]) : mx;
        for (i = 0; i < n_out; ++i) agree &= fabs((double)out[i] - ref[i]) <= 1e-5 * (1.0 + mx);
        free(go.block); free(ga.block); free(gw.block); free(first); free(ref); free(lens); free(keep);
        tu_problem_free(&p);
    }
    CHECK(ok, "canary: every call succeeds with exactly mha_workspace_size() bytes");
    CHECK(intact, "canary: no guard byte around out, attn or the workspace changed");
    CHECK(unchanged, "canary: inputs, weights and masks hash the same after the call");
    CHECK(same, "determinism: a second run (dirty workspace) is bitwise identical");
    CHECK(agree, "canary shapes agree with the naive double reference");
}

/* ---- NULL pointers ------------------------------------------------------------ */

static void test_nulls(void) {
    mha_shape s = shape_rand(1);
    tu_problem p;
    mha_weights w;
    mha_weights wi;
    const float *hp[4];
    float h[8], cat[64];
    int i, ok_fwd = 1, ok_head = 1;
    s.heads = 4; s.kv_heads = 2; s.p_v = 2;
    tu_problem_make(&p, &s, 1, 2, 3, 1);
    w = p.w;
    for (i = 0; i < 7; ++i) { /* w_q, w_k, w_v, w_o, a_q, a_k, a_v NULL in turn */
        wi = w;
        if (i == 0) wi.w_q = NULL;
        if (i == 1) wi.w_k = NULL;
        if (i == 2) wi.w_v = NULL;
        if (i == 3) wi.w_o = NULL;
        if (i == 4) wi.a_q = NULL;
        if (i == 5) wi.a_k = NULL;
        if (i == 6) wi.a_v = NULL;
        ok_fwd &= mha_forward(&s, &wi, 1, 2, 3, p.q, p.k, p.v, NULL, p.out, NULL, p.ws, p.ws_bytes) == MHA_ERR_NULL;
        if (i != 3) /* mha_head does not use w_o */
            ok_head &= mha_head(&s, &wi, 1, p.q, p.k, p.v, 3, 3, h, p.ws, p.ws_bytes) == MHA_ERR_NULL;
    }
    CHECK(ok_fwd, "each required weight (w_q, w_k, w_v, w_o, a_q, a_k, a_v) NULL in turn: MHA_ERR_NULL");
    CHECK(ok_head, "mha_head: each required weight NULL in turn: MHA_ERR_NULL");
    CHECK(mha_head(&s, &w, 1, p.q, p.k, p.v, 3, 3, h, p.ws, p.ws_bytes) == MHA_OK, "mha_head without w_o: OK");
    w.w_o = NULL;
    CHECK(mha_head(&s, &w, 1, p.q, p.k, p.v, 3, 3, h, p.ws, p.ws_bytes) == MHA_OK, "mha_head ignores w_o");
    w = p.w;
    w.b_q = w.b_k = w.b_v = w.b_o = NULL;
    CHECK(mha_forward(&s, &w, 1, 2, 3, p.q, p.k, p.v, NULL, p.out, NULL, p.ws, p.ws_bytes) == MHA_OK,
          "biases may be NULL");
    CHECK(mha_forward(NULL, &w, 1, 2, 3, p.q, p.k, p.v, NULL, p.out, NULL, p.ws, p.ws_bytes) == MHA_ERR_NULL &&
              mha_forward(&s, NULL, 1, 2, 3, p.q, p.k, p.v, NULL, p.out, NULL, p.ws, p.ws_bytes) == MHA_ERR_NULL &&
              mha_forward(&s, &w, 1, 2, 3, NULL, p.k, p.v, NULL, p.out, NULL, p.ws, p.ws_bytes) == MHA_ERR_NULL &&
              mha_forward(&s, &w, 1, 2, 3, p.q, NULL, p.v, NULL, p.out, NULL, p.ws, p.ws_bytes) == MHA_ERR_NULL &&
              mha_forward(&s, &w, 1, 2, 3, p.q, p.k, NULL, NULL, p.out, NULL, p.ws, p.ws_bytes) == MHA_ERR_NULL &&
              mha_forward(&s, &w, 1, 2, 3, p.q, p.k, p.v, NULL, NULL, NULL, p.ws, p.ws_bytes) == MHA_ERR_NULL,
          "shape, weights, queries, keys, values, out NULL in turn: MHA_ERR_NULL");
    CHECK(mha_forward(&s, &w, 1, 2, 3, p.q, p.k, p.v, NULL, p.out, NULL, NULL, p.ws_bytes) == MHA_ERR_WORKSPACE,
          "workspace NULL: MHA_ERR_WORKSPACE");
    CHECK(mha_forward(&s, &w, 0, 0, 0, NULL, p.k, p.v, NULL, p.out, NULL, p.ws, p.ws_bytes) == MHA_ERR_NULL,
          "pointers are required even when counts are 0");
    CHECK(mha_head(NULL, &w, 0, p.q, p.k, p.v, 3, 3, h, p.ws, p.ws_bytes) == MHA_ERR_NULL &&
              mha_head(&s, NULL, 0, p.q, p.k, p.v, 3, 3, h, p.ws, p.ws_bytes) == MHA_ERR_NULL &&
              mha_head(&s, &w, 0, NULL, p.k, p.v, 3, 3, h, p.ws, p.ws_bytes) == MHA_ERR_NULL &&
              mha_head(&s, &w, 0, p.q, NULL, p.v, 3, 3, h, p.ws, p.ws_bytes) == MHA_ERR_NULL &&
              mha_head(&s, &w, 0, p.q, p.k, NULL, 3, 3, h, p.ws, p.ws_bytes) == MHA_ERR_NULL &&
              mha_head(&s, &w, 0, p.q, p.k, p.v, 3, 3, NULL, p.ws, p.ws_bytes) == MHA_ERR_NULL &&
              mha_head(&s, &w, 0, p.q, p.k, p.v, 3, 3, h, NULL, p.ws_bytes) == MHA_ERR_WORKSPACE,
          "mha_head: each pointer NULL in turn");
    for (i = 0; i < 4; ++i) hp[i] = h;
    ok_fwd = mha_concat(4, 2, hp, cat) == MHA_OK;
    for (i = 0; i < 4; ++i) {
        hp[i] = NULL;
        ok_fwd &= mha_concat(4, 2, hp, cat) == MHA_ERR_NULL;
        hp[i] = h;
    }
    CHECK(ok_fwd && mha_concat(4, 2, hp, NULL) == MHA_ERR_NULL, "mha_concat: each head_outs entry NULL in turn");
    CHECK(mha_output(NULL, &p.w, cat, h) == MHA_ERR_NULL && mha_output(&s, NULL, cat, h) == MHA_ERR_NULL &&
              mha_output(&s, &p.w, NULL, h) == MHA_ERR_NULL && mha_output(&s, &p.w, cat, NULL) == MHA_ERR_NULL,
          "mha_output: each pointer NULL in turn");
    CHECK(mha_workspace_size(NULL, 1, 1, 1) == 0, "mha_workspace_size(NULL): 0");
    tu_problem_free(&p);
}

/* ---- sizes -------------------------------------------------------------------- */

static void test_sizes(void) {
    mha_shape base = shape_rand(1), s;
    tu_problem p;
    int32_t *field[10], bad[2] = {0, -1};
    int i, j, ok = 1, ok_ws = 1;
    base.p_v = 3;
    tu_problem_make(&p, &base, 1, 2, 3, 1);
    for (j = 0; j < 2; ++j)
        for (i = 0; i < 10; ++i) {
            s = base;
            field[0] = &s.heads; field[1] = &s.d_q; field[2] = &s.d_k; field[3] = &s.d_v; field[4] = &s.p_q;
            field[5] = &s.p_k; field[6] = &s.p_v; field[7] = &s.p_o; field[8] = &s.p_a; field[9] = &s.kv_heads;
            if (i == 9 && j == 0) continue; /* kv_heads 0 means heads */
            *field[i] = bad[j];
            ok &= mha_forward(&s, &p.w, 1, 2, 3, p.q, p.k, p.v, NULL, p.out, NULL, p.ws, p.ws_bytes) == MHA_ERR_SHAPE;
            ok_ws &= mha_workspace_size(&s, 1, 2, 3) == 0;
        }
    CHECK(ok, "each shape size 0, then negative, in turn: MHA_ERR_SHAPE");
    CHECK(ok_ws, "each shape size 0, then negative, in turn: mha_workspace_size 0");
    CHECK(mha_forward(&base, &p.w, -1, 2, 3, p.q, p.k, p.v, NULL, p.out, NULL, p.ws, p.ws_bytes) == MHA_ERR_SHAPE &&
              mha_forward(&base, &p.w, 1, -2, 3, p.q, p.k, p.v, NULL, p.out, NULL, p.ws, p.ws_bytes) == MHA_ERR_SHAPE &&
              mha_forward(&base, &p.w, 1, 2, -3, p.q, p.k, p.v, NULL, p.out, NULL, p.ws, p.ws_bytes) == MHA_ERR_SHAPE &&
              mha_forward(&base, &p.w, INT32_MIN, 2, 3, p.q, p.k, p.v, NULL, p.out, NULL, p.ws, p.ws_bytes) ==
                  MHA_ERR_SHAPE,
          "batch, n, m negative in turn: MHA_ERR_SHAPE");
    CHECK(mha_forward(&base, &p.w, 0, 2, 3, p.q, p.k, p.v, NULL, p.out, NULL, p.ws, p.ws_bytes) == MHA_OK &&
              mha_forward(&base, &p.w, 1, 0, 3, p.q, p.k, p.v, NULL, p.out, NULL, p.ws, p.ws_bytes) == MHA_OK &&
              mha_forward(&base, &p.w, 1, 2, 0, p.q, p.k, p.v, NULL, p.out, NULL, p.ws, p.ws_bytes) == MHA_OK,
          "batch, n, m zero in turn: MHA_OK");
    s = base;
    s.score = MHA_SCORE_DOT;
    s.p_k = s.p_q + 1;
    CHECK(mha_forward(&s, &p.w, 1, 2, 3, p.q, p.k, p.v, NULL, p.out, NULL, p.ws, p.ws_bytes) == MHA_ERR_SHAPE,
          "p_q != p_k with dot scoring");
    s = base;
    s.heads = 3; s.kv_heads = 2;
    CHECK(mha_forward(&s, &p.w, 1, 2, 3, p.q, p.k, p.v, NULL, p.out, NULL, p.ws, p.ws_bytes) == MHA_ERR_SHAPE,
          "heads %% kv_heads != 0");
    s = base;
    s.score = (mha_score)-1;
    CHECK(mha_forward(&s, &p.w, 1, 2, 3, p.q, p.k, p.v, NULL, p.out, NULL, p.ws, p.ws_bytes) == MHA_ERR_SHAPE,
          "unknown score enum value");
    /* overflow of the byte counts, checked with this build's size_t */
    s = base;
    s.d_q = INT32_MAX; s.p_q = INT32_MAX; s.heads = s.kv_heads = 4;
    CHECK(mha_forward(&s, &p.w, 1, 2, 3, p.q, p.k, p.v, NULL, p.out, NULL, p.ws, p.ws_bytes) == MHA_ERR_OVERFLOW &&
              mha_workspace_size(&s, 1, 2, 3) == 0,
          "weights beyond size_t: MHA_ERR_OVERFLOW and workspace size 0");
    CHECK(mha_head(&s, &p.w, 0, p.q, p.k, p.v, 3, 3, p.out, p.ws, p.ws_bytes) == MHA_ERR_OVERFLOW &&
              mha_output(&s, &p.w, p.q, p.out) == MHA_ERR_OVERFLOW,
          "weights beyond size_t: mha_head and mha_output give MHA_ERR_OVERFLOW");
    s = base;
    s.d_q = INT32_MAX;
    CHECK(mha_forward(&s, &p.w, INT32_MAX, INT32_MAX, 3, p.q, p.k, p.v, NULL, p.out, NULL, p.ws, p.ws_bytes) ==
                  MHA_ERR_OVERFLOW &&
              mha_workspace_size(&s, INT32_MAX, INT32_MAX, 3) == 0,
          "queries [batch][n][d_q] beyond size_t: MHA_ERR_OVERFLOW and workspace size 0");
    s = base;
    s.p_q = INT32_MAX; s.p_k = INT32_MAX; s.p_a = INT32_MAX; s.heads = s.kv_heads = 4;
    CHECK(mha_workspace_size(&s, 1, 1, INT32_MAX) == 0, "additive A_q beyond size_t: workspace size 0");
    { /* keep has one byte per element, bias four: sizes where only the bias overflows */
        mha_mask km;
        int32_t kb = sizeof(size_t) == 4 ? 1 : 2, kn = sizeof(size_t) == 4 ? 46341 : INT32_MAX;
        memset(&km, 0, sizeof km);
        s = base;
        km.keep = (const uint8_t *)p.q; /* never read: the call stops at the workspace check */
        CHECK(mha_forward(&s, &p.w, kb, kn, kn, p.q, p.k, p.v, &km, p.out, NULL, p.ws, p.ws_bytes) ==
                  MHA_ERR_WORKSPACE,
              "keep [batch][n][m] of %d x %d x %d bytes fits in size_t: not MHA_ERR_OVERFLOW", (int)kb, (int)kn,
              (int)kn);
        km.keep = NULL;
        km.bias = p.q;
        CHECK(mha_forward(&s, &p.w, kb, kn, kn, p.q, p.k, p.v, &km, p.out, NULL, p.ws, p.ws_bytes) ==
                  MHA_ERR_OVERFLOW,
              "bias [batch][n][m] of 4 bytes each beyond size_t: MHA_ERR_OVERFLOW");
    }
    if (sizeof(size_t) == 4) {
        s = base;
        s.d_q = 1 << 15; s.p_q = 1 << 15; s.heads = s.kv_heads = 1;
        CHECK(mha_workspace_size(&s, 1, 1, 1) == 0, "32-bit size_t: W_q of 2^30 floats overflows");
    } else {
        mha_weight_counts c;
        s = base;
        s.d_q = 1 << 15; s.p_q = 1 << 15; s.heads = s.kv_heads = 1;
        CHECK(mha_weight_counts_get(&s, &c) == MHA_OK && c.w_q == (size_t)1 << 30,
              "64-bit size_t: W_q of 2^30 floats fits");
    }
    tu_problem_free(&p);
}

/* ---- the decoder knobs: bad values are MHA_ERR_SHAPE, and nothing is written --------- */

static void test_knobs(void) {
    mha_shape base = shape_rand(0), s;
    tu_problem p;
    const float nan = NAN, inf = INFINITY;
    float sinks[16];
    int k, ok = 1, ok_ws = 1, nothing = 1;
    size_t n_out;
    base.p_q = base.p_k = 6;
    tu_problem_make(&p, &base, 2, 3, 4, 1);
    n_out = (size_t)2 * 3 * (size_t)base.p_o;
    for (k = 0; k < 12; ++k) {
        s = base;
        switch (k) {
        case 0: s.rope_dim = -2; break;                    /* negative */
        case 1: s.rope_dim = 3; break;                     /* odd */
        case 2: s.rope_dim = 8; break;                     /* > p_q = p_k */
        case 3: s.rope_dim = 2; s.rope_pairs = 2; break;   /* no such pairing */
        case 4: s.rope_dim = 2; s.rope_pairs = -1; break;
        case 5: s.rope_dim = 2; s.rope_theta = -10000.0f; break; /* theta <= 0 (0 means 10000) */
        case 6: s.rope_dim = 2; s.rope_theta = nan; break;
        case 7: s.rope_dim = 2; s.rope_theta = inf; break;
        case 8: s.softcap = -1.0f; break;
        case 9: s.softcap = nan; break;
        case 10: s.softcap = inf; break;
        default: s.rope_dim = INT32_MIN; break;
        }
        memset(p.out, 0x5a, n_out * sizeof(float));
        ok &= mha_forward(&s, &p.w, 2, 3, 4, p.q, p.k, p.v, NULL, p.out, NULL, p.ws, p.ws_bytes) == MHA_ERR_SHAPE;
        ok &= mha_forward_reference(&s, &p.w, 2, 3, 4, p.q, p.k, p.v, NULL, p.out, NULL, p.ws, p.ws_bytes) ==
              MHA_ERR_SHAPE;
        ok_ws &= mha_workspace_size(&s, 2, 3, 4) == 0 && mha_decode_workspace_size(&s, 2, 1, 4) == 0;
        for (n_out = 0; n_out < (size_t)2 * 3 * (size_t)base.p_o; ++n_out) {
            uint32_t u;
            memcpy(&u, p.out + n_out, 4);
            nothing &= u == 0x5a5a5a5au;
        }
    }
    CHECK(ok, "RoPE dimension negative, odd, > p_k; pairing 2, -1; theta < 0, NaN, inf; soft-cap < 0, NaN, inf: "
              "MHA_ERR_SHAPE on both paths");
    CHECK(ok_ws, "the same shapes: workspace sizes 0");
    CHECK(nothing, "the same shapes: out untouched");
    for (k = 0; k < 3; ++k) { /* weights of no known element type */
        mha_weights w = p.w;
        w.type = k == 0 ? 3 : k == 1 ? -1 : INT32_MAX;
        CHECK(mha_forward(&base, &w, 2, 3, 4, p.q, p.k, p.v, NULL, p.out, NULL, p.ws, p.ws_bytes) == MHA_ERR_SHAPE &&
                  mha_pack_weights(&base, &w, p.ws, p.ws_bytes) == MHA_ERR_SHAPE,
              "weights of element type %d: MHA_ERR_SHAPE", (int)w.type);
    }
    CHECK(mha_cache_bytes_typed(&base, 2, 5, 7) == 0 && mha_cache_bytes_typed(&base, 2, 5, -1) == 0,
          "mha_cache_bytes_typed of an unknown type: 0");
    if (mha_build_info().no_extras) { /* compiled out: every knob and 16-bit type is refused */
        for (k = 0; k < 5; ++k) {
            s = base;
            if (k == 0) s.rope_dim = 2;
            if (k == 1) s.alibi = 1;
            if (k == 2) s.softcap = 1.0f;
            p.w.sinks = k == 3 ? p.q : NULL;
            p.w.type = k == 4 ? MHA_F16 : MHA_F32;
            CHECK(mha_forward(&s, &p.w, 2, 3, 4, p.q, p.k, p.v, NULL, p.out, NULL, p.ws, p.ws_bytes) == MHA_ERR_SHAPE,
                  "MHA_NO_EXTRAS: knob %d refused", k);
        }
        p.w.sinks = NULL;
        p.w.type = MHA_F32;
        CHECK(mha_cache_bytes_typed(&base, 2, 5, MHA_F16) == 0, "MHA_NO_EXTRAS: no 16-bit cache");
        tu_problem_free(&p);
        return;
    }
    s = base;
    s.rope_dim = 6;
    s.rope_theta = 1.0f; /* every frequency 1: a legal, if odd, base */
    {
        size_t bytes = mha_workspace_size(&s, 2, 3, 4);
        void *ws = malloc(bytes);
        CHECK(mha_forward(&s, &p.w, 2, 3, 4, p.q, p.k, p.v, NULL, p.out, NULL, ws, bytes) == MHA_OK &&
                  tu_all_finite(p.out, (size_t)2 * 3 * (size_t)base.p_o),
              "RoPE with theta 1 and rope_dim = p_k: finite");
        free(ws);
    }
    s = base;
    s.alibi = 1;
    CHECK(mha_head(&s, &p.w, 0, p.q, p.k, p.v, 4, 4, p.out, p.ws, p.ws_bytes) == MHA_ERR_SHAPE,
          "mha_head with ALiBi (its query has no position): MHA_ERR_SHAPE");
    s = base;
    s.rope_dim = 2;
    CHECK(mha_head(&s, &p.w, 0, p.q, p.k, p.v, 4, 4, p.out, p.ws, p.ws_bytes) == MHA_ERR_SHAPE,
          "mha_head with RoPE: MHA_ERR_SHAPE");
    { /* ALiBi with queries far from every key (causal offset near INT32_MAX), with sinks: as the
         double-precision naive implementation (the scores' precision is kept) */
        mha_mask far = {1, INT32_MAX - 10, NULL, 0, NULL, NULL};
        double ref[2 * 3 * 16], mx, err;
        size_t j, no = (size_t)2 * 3 * (size_t)base.p_o;
        int v;
        for (k = 0; k < 16; ++k) sinks[k] = 0.25f * (float)k - 1.0f;
        s = base;
        s.alibi = 1;
        for (v = 0; v < 2; ++v) { /* without sinks (the keys' own weights), then with them */
            p.w.sinks = v ? sinks : NULL;
            ok = mha_forward(&s, &p.w, 2, 3, 4, p.q, p.k, p.v, &far, p.out, NULL, p.ws, p.ws_bytes) == MHA_OK;
            naive_forward(&s, &p.w, 2, 3, 4, p.q, p.k, p.v, &far, ref, NULL);
            for (j = 0, mx = err = 0.0; j < no && no <= 96; ++j) {
                mx = fabs(ref[j]) > mx ? fabs(ref[j]) : mx;
                err = fabs((double)p.out[j] - ref[j]) > err ? fabs((double)p.out[j] - ref[j]) : err;
            }
            CHECK(ok && no <= 96 && err <= 1e-5 * (1.0 + mx),
                  "ALiBi%s at causal offset INT32_MAX - 10: as the double reference (error %.3g)",
                  v ? " and sinks" : "", err);
        }
        p.w.sinks = NULL;
    }
    for (k = 0; k < 16; ++k) sinks[k] = k % 3 ? -INFINITY : (k % 2 ? NAN : INFINITY);
    p.w.sinks = sinks;
    s = base;
    ok = mha_forward(&s, &p.w, 2, 3, 4, p.q, p.k, p.v, NULL, p.out, NULL, p.ws, p.ws_bytes) == MHA_OK;
    CHECK(ok, "sinks of +inf, NaN and -inf: MHA_OK (+inf: a zero head output; NaN: NaN; -inf: no sink)");
    p.w.sinks = NULL;
    tu_problem_free(&p);
}

/* ---- masks ---------------------------------------------------------------------- */

static void test_masks(void) {
    mha_shape s = shape_rand(0);
    tu_problem p;
    mha_mask mask;
    int32_t lens[2 * 3], offs[6], i;
    uint8_t keep[2 * 3 * 4];
    float *ref;
    size_t n_out = 0, j;
    int ok = 1;
    s.p_o = 3;
    tu_problem_make(&p, &s, 2, 3, 4, 1);
    n_out = 2 * 3 * 3;
    ref = (float *)malloc(n_out * sizeof(float));
    memset(&mask, 0, sizeof mask);
    mask.valid_lens = lens;
    for (i = 0; i < 6; ++i) lens[i] = 2;
    CHECK(tu_forward(&p, &mask, NULL) == MHA_OK, "valid lengths in range");
    lens[1] = 5;
    CHECK(tu_forward(&p, &mask, NULL) == MHA_ERR_MASK, "[batch] valid length > m");
    lens[1] = -1;
    CHECK(tu_forward(&p, &mask, NULL) == MHA_ERR_MASK, "[batch] valid length < 0");
    lens[1] = 2;
    mask.valid_lens_per_query = 1;
    lens[5] = 5;
    CHECK(tu_forward(&p, &mask, NULL) == MHA_ERR_MASK, "[batch][n] valid length > m");
    lens[5] = INT32_MIN;
    CHECK(tu_forward(&p, &mask, NULL) == MHA_ERR_MASK, "[batch][n] valid length INT32_MIN");
    mask.valid_lens_per_query = 0;
    CHECK(tu_forward(&p, &mask, NULL) == MHA_OK, "[batch] layout reads only lens[0..batch-1]");
    /* keep masks that mask everything: every row is b_o, weights 0 */
    memset(&mask, 0, sizeof mask);
    memset(keep, 0, sizeof keep);
    mask.keep = keep;
    for (j = 0; j < 2 * (size_t)s.heads * 3 * 4; ++j) p.attn[j] = 9.0f;
    CHECK(tu_forward(&p, &mask, p.attn) == MHA_OK, "keep all zero: OK");
    for (j = 0; j < n_out; ++j) ok &= p.out[j] == p.w.b_o[j % 3];
    for (j = 0; j < 2 * (size_t)s.heads * 3 * 4; ++j) ok &= p.attn[j] == 0.0f;
    CHECK(ok, "keep all zero: every output row is exactly b_o, every weight 0");
    /* causal offsets far outside [-n, m] */
    memset(&mask, 0, sizeof mask);
    CHECK(tu_forward(&p, NULL, NULL) == MHA_OK, "no mask");
    memcpy(ref, p.out, n_out * sizeof(float));
    offs[0] = INT32_MAX; offs[1] = INT32_MAX - 1; offs[2] = 4; offs[3] = 1000000;
    mask.causal = 1;
    for (i = 0; i < 4; ++i) {
        mask.causal_offset = offs[i];
        CHECK(tu_forward(&p, &mask, NULL) == MHA_OK && memcmp(ref, p.out, n_out * sizeof(float)) == 0,
              "causal offset %ld >= m: same as no mask", (long)offs[i]);
    }
    offs[0] = INT32_MIN; offs[1] = INT32_MIN + 1; offs[2] = -3; offs[3] = -1000000;
    for (i = 0; i < 4; ++i) {
        mask.causal_offset = offs[i];
        ok = tu_forward(&p, &mask, NULL) == MHA_OK;
        for (j = 0; j < n_out; ++j) ok &= p.out[j] == p.w.b_o[j % 3];
        CHECK(ok, "causal offset %ld <= -n: every row fully masked (b_o)", (long)offs[i]);
    }
    free(ref);
    tu_problem_free(&p);
}

/* ---- numbers in the inputs ------------------------------------------------------ */

static int row_is(const float *out, size_t row, size_t p_o, int want_nan) {
    size_t i;
    int any_nan = 0;
    for (i = 0; i < p_o; ++i) any_nan |= out[row * p_o + i] != out[row * p_o + i];
    return want_nan ? any_nan : !any_nan;
}

static void test_numbers(void) {
    mha_shape s = shape_rand(0);
    tu_problem p;
    mha_mask mask;
    float *keep_v, saved;
    double *ref, mx = 0.0;
    size_t i, n_out, po;
    int ok;
    int32_t lens[2] = {4, 2};
    s.heads = s.kv_heads = 1;
    tu_problem_make(&p, &s, 2, 3, 4, 1);
    po = (size_t)s.p_o;
    n_out = 2 * 3 * po;
    /* NaN in one key of batch 1: all of batch 1's rows NaN, batch 0 clean */
    saved = p.k[(4 + 1) * (size_t)s.d_k];
    p.k[(4 + 1) * (size_t)s.d_k] = NAN;
    ok = tu_forward(&p, NULL, NULL) == MHA_OK;
    for (i = 0; i < 6; ++i) ok &= row_is(p.out, i, po, i >= 3);
    CHECK(ok, "NaN in a key: the rows of its sequence are NaN, other sequences are not");
    /* ... unless that key is masked for them */
    memset(&mask, 0, sizeof mask);
    lens[1] = 1; /* batch 1 sees key 0 only; the NaN key is key 1 */
    mask.valid_lens = lens;
    ok = tu_forward(&p, &mask, NULL) == MHA_OK;
    for (i = 0; i < 6; ++i) ok &= row_is(p.out, i, po, 0);
    CHECK(ok, "NaN in a masked key: no row is NaN");
    p.k[(4 + 1) * (size_t)s.d_k] = saved;
    /* Inf in a value: rows that weight it get Inf/NaN, others stay finite */
    keep_v = p.v + 0; /* batch 0, key 0 */
    saved = *keep_v;
    *keep_v = INFINITY;
    ok = tu_forward(&p, NULL, NULL) == MHA_OK;
    for (i = 0; i < 6; ++i) ok &= (i < 3) ? !tu_all_finite(p.out + i * po, po) : tu_all_finite(p.out + i * po, po);
    CHECK(ok, "Inf in a value: only rows of its sequence are non-finite");
    *keep_v = saved;
    /* NaN in a weight of W_o: only output column 0 is NaN */
    saved = ((const float *)p.w.w_o)[0];
    ((float *)p.w.w_o)[0] = NAN;
    ok = tu_forward(&p, NULL, NULL) == MHA_OK;
    for (i = 0; i < n_out; ++i) ok &= (i % po == 0) ? p.out[i] != p.out[i] : p.out[i] == p.out[i];
    CHECK(ok, "NaN in W_o[0][0]: output column 0 is NaN in every row, the other columns are not");
    ((float *)p.w.w_o)[0] = saved;
    /* huge finite inputs: projections of 1e15 give scores near 1e30 */
    for (i = 0; i < 2 * 3 * (size_t)s.d_q; ++i) p.q[i] *= 1e15f;
    for (i = 0; i < 2 * 4 * (size_t)s.d_k; ++i) p.k[i] *= 1e15f;
    CHECK(tu_forward(&p, NULL, p.attn) == MHA_OK && tu_all_finite(p.out, n_out) &&
              tu_all_finite(p.attn, 2 * 3 * 4),
          "queries and keys of 1e15 (scores ~1e30): finite output");
    /* subnormal inputs: finite and equal to the double reference */
    for (i = 0; i < 2 * 3 * (size_t)s.d_q; ++i) p.q[i] = 1e-39f;
    for (i = 0; i < 2 * 4 * (size_t)s.d_k; ++i) p.k[i] = -2e-39f;
    for (i = 0; i < 2 * 4 * (size_t)s.d_v; ++i) p.v[i] = 3e-40f * (float)(i % 5);
    ref = (double *)malloc(n_out * sizeof(double));
    ok = tu_forward(&p, NULL, NULL) == MHA_OK && tu_all_finite(p.out, n_out);
    naive_forward(&s, &p.w, 2, 3, 4, p.q, p.k, p.v, NULL, ref, NULL);
    for (i = 0; i < n_out; ++i) mx = fabs(ref[i]) > mx ? fabs(ref[i]) : mx;
    for (i = 0; i < n_out; ++i) ok &= fabs((double)p.out[i] - ref[i]) <= 1e-5 * (1.0 + mx);
    CHECK(ok, "subnormal inputs: finite, and agree with the double reference");
    free(ref);
    tu_problem_free(&p);
}

/* ---- decoding and mha_attend ------------------------------------------------
   Every status of mha_cache_bytes, mha_decode, mha_cache_append, mha_attend,
   their order, nothing written on an error (cache and lengths included), any
   alignment. */
static void test_decode_statuses(void) {
    mha_shape s = {0};
    tu_problem p;
    mha_cache c;
    int32_t lens[2] = {3, 1}, len_copy[2];
    size_t cbytes, bytes;
    float *store, *store_copy, *out;
    unsigned char *ws, *ws_copy;
    s.heads = 2; s.kv_heads = 1; s.d_q = 5; s.d_k = 4; s.d_v = 3; s.p_q = s.p_k = 3; s.p_v = 2; s.p_o = 4;
    tu_problem_make(&p, &s, 2, 2, 2, 1);
    memset(&c, 0, sizeof c);
    c.capacity = 4;
    cbytes = mha_cache_bytes(&s, 2, 4);
    CHECK(cbytes == (size_t)2 * 1 * 4 * (3 + 2) * sizeof(float), "mha_cache_bytes: batch kv capacity (p_k + p_v) floats");
    CHECK(mha_cache_bytes(&s, 2, 0) == 0 && mha_cache_bytes(&s, -1, 4) == 0 && mha_cache_bytes(NULL, 2, 4) == 0,
          "mha_cache_bytes: 0 for a capacity < 1, a negative batch, no shape");
    store = tu_floats(cbytes / sizeof(float), 1.0f);
    store_copy = tu_floats(cbytes / sizeof(float), 0.0f);
    c.k = store;
    c.v = store + 2 * 4 * 3;
    c.length = lens;
    bytes = mha_decode_workspace_size(&s, 2, 2, 4);
    CHECK(bytes > 0 && mha_decode_workspace_size(&s, 2, 2, 0) == 0 && mha_decode_workspace_size(&s, -1, 2, 4) == 0,
          "mha_decode_workspace_size: a size, and 0 for capacity 0 or batch < 0");
    ws = (unsigned char *)malloc(bytes + 64);
    ws_copy = (unsigned char *)malloc(bytes + 64);
    out = tu_floats(2 * 2 * 4, 0.0f);
#define DEC(cache, q, k, v, o, wsp, nb) mha_decode(&s, &p.w, cache, 2, 2, q, k, v, o, wsp, nb)
    CHECK(mha_decode(NULL, &p.w, &c, 2, 2, p.q, p.k, p.v, out, ws, bytes) == MHA_ERR_NULL &&
              mha_decode(&s, NULL, &c, 2, 2, p.q, p.k, p.v, out, ws, bytes) == MHA_ERR_NULL &&
              DEC(NULL, p.q, p.k, p.v, out, ws, bytes) == MHA_ERR_NULL,
          "decode: shape, w or cache NULL: MHA_ERR_NULL");
    c.capacity = 0;
    CHECK(DEC(&c, p.q, p.k, p.v, out, ws, bytes) == MHA_ERR_SHAPE, "decode: capacity 0: MHA_ERR_SHAPE");
    c.capacity = 4;
    c.window = -1;
    CHECK(DEC(&c, p.q, p.k, p.v, out, ws, bytes) == MHA_ERR_SHAPE, "decode: window < 0: MHA_ERR_SHAPE");
    c.window = 4;
    CHECK(DEC(&c, p.q, p.k, p.v, out, ws, bytes) == MHA_ERR_SHAPE,
          "decode: window 4, chunk 2, capacity 4 < 4 + 2 - 1: MHA_ERR_SHAPE");
    c.window = 3;
    CHECK(DEC(&c, p.q, NULL, NULL, out, ws, bytes) != MHA_ERR_SHAPE, "decode: the ring rule only when appending");
    { /* keep_first: the first slots kept (not with MHA_NO_EXTRAS) */
        static const int32_t bad[6][3] = {/* keep_first, window, capacity */
                                          {-1, 3, 4}, {1, 0, 4}, {3, 3, 9}, {4, 3, 9}, {1, 3, 4}, {2, 3, 2}};
        int32_t k, no_extras = mha_build_info().no_extras;
        memcpy(store_copy, store, cbytes);
        memcpy(len_copy, lens, sizeof lens);
        memset(out, 0, 2 * 2 * 4 * sizeof(float));
        for (k = 0; k < 6; ++k) {
            int st;
            c.keep_first = bad[k][0];
            c.window = bad[k][1];
            c.capacity = bad[k][2];
            memset(out, 0, 2 * 2 * 4 * sizeof(float));
            c.k = NULL; /* MHA_ERR_SHAPE comes first */
            st = DEC(&c, p.q, p.k, p.v, out, ws, bytes);
            c.k = store;
            CHECK(st == MHA_ERR_SHAPE && DEC(&c, p.q, p.k, p.v, out, ws, bytes) == MHA_ERR_SHAPE &&
                      mha_cache_append(&s, &p.w, &c, 2, 2, p.k, p.v, ws, bytes) == MHA_ERR_SHAPE &&
                      tu_max_abs(out, 2 * 2 * 4) == 0.0f &&
                      (k != 4 || no_extras) == (DEC(&c, p.q, NULL, NULL, out, ws, bytes) == MHA_ERR_SHAPE),
                  "decode and append: keep_first %d, window %d, capacity %d, chunk 2: MHA_ERR_SHAPE (before a NULL "
                  "cache array; cross-attention only where the kept slots do not fit at all, or with MHA_NO_EXTRAS)",
                  (int)bad[k][0], (int)bad[k][1], (int)bad[k][2]);
        }
        CHECK(memcmp(store, store_copy, cbytes) == 0 && memcmp(lens, len_copy, sizeof lens) == 0,
              "keep_first refused: nothing written (cache, lengths; out before any call that passed)");
        c.keep_first = 1; /* 1 + 2 + 2 - 1 <= 4 */
        c.window = 2;
        c.capacity = 4;
        lens[0] = 7;
        lens[1] = 0;
        k = DEC(&c, p.q, p.k, p.v, out, ws, bytes);
        CHECK(no_extras ? k == MHA_ERR_SHAPE : k == MHA_OK && lens[0] == 9 && lens[1] == 2,
              "decode: keep_first 1, window 2, capacity 4 = 1 + 2 + 2 - 1: %s",
              no_extras ? "MHA_ERR_SHAPE (MHA_NO_EXTRAS)" : "MHA_OK");
        memcpy(store, store_copy, cbytes);
        memcpy(lens, len_copy, sizeof lens);
        c.keep_first = 0;
        c.capacity = 4;
    }
    { /* mha_cache_row: bad arguments, and its address in each element type (the cache: batch 2, capacity 4) */
        static const int32_t types[5] = {MHA_F32, MHA_F16, MHA_BF16, MHA_I8, MHA_I16}, sizes[5] = {4, 2, 2, 1, 2};
        mha_cache r = c;
        int32_t k, ok = 1, no_extras = mha_build_info().no_extras;
        lens[0] = 3;
        lens[1] = 1;
        r.window = 0;
        r.keep_first = 0;
        for (k = 0; k < 5; ++k) {
            r.type = types[k];
            if (no_extras && (k == 1 || k == 2)) {
                ok &= mha_cache_row(&s, &r, 2, 0, 0, 0, 0) == NULL; /* no 16-bit caches */
                continue;
            }
            /* k [2][1][4][3], v [2][1][4][2] in elements: sequence 1, position 0 is element 1 4 3 (k), 4 2 (v) */
            ok &= mha_cache_row(&s, &r, 2, 1, 0, 0, 0) == (unsigned char *)r.k + 12 * sizes[k] &&
                  mha_cache_row(&s, &r, 2, 1, 0, 0, 1) == (unsigned char *)r.v + 8 * sizes[k] &&
                  mha_cache_row(&s, &r, 2, 0, 0, 2, 1) == (unsigned char *)r.v + 4 * sizes[k] &&
                  mha_cache_row(&s, &r, 2, 1, 0, 1, 0) == NULL; /* past sequence 1's length */
        }
        r.type = MHA_F32;
        CHECK(ok, "mha_cache_row: float, f16, bf16, int8 and int16 rows where the layout puts them; NULL past the "
                  "length");
        CHECK(mha_cache_row(NULL, &r, 2, 0, 0, 0, 0) == NULL && mha_cache_row(&s, NULL, 2, 0, 0, 0, 0) == NULL &&
                  mha_cache_row(&s, &r, 2, -1, 0, 0, 0) == NULL && mha_cache_row(&s, &r, 2, 0, -1, 0, 0) == NULL &&
                  mha_cache_row(&s, &r, 2, 0, 1, 0, 0) == NULL && mha_cache_row(&s, &r, 2, 0, 0, -1, 0) == NULL &&
                  mha_cache_row(&s, &r, 2, 0, 0, 0, 2) == NULL && mha_cache_row(&s, &r, 2, 0, 0, 0, -1) == NULL &&
                  mha_cache_row(&s, &r, 2, 2, 0, 0, 0) == NULL && mha_cache_row(&s, &r, 2, INT32_MAX, 0, 0, 0) == NULL &&
                  mha_cache_row(&s, &r, 0, 0, 0, 0, 0) == NULL && mha_cache_row(&s, &r, -1, 0, 0, 0, 0) == NULL,
              "mha_cache_row: shape or cache NULL, b, kv_head, position < 0, kv_head >= kv_heads, which not 0 or 1, "
              "b >= batch (2, INT32_MAX), batch 0 or -1: NULL");
        r.type = 7;
        ok = mha_cache_row(&s, &r, 2, 0, 0, 0, 0) == NULL;
        r.type = MHA_F32;
        r.capacity = 0;
        ok &= mha_cache_row(&s, &r, 2, 0, 0, 0, 0) == NULL;
        r.capacity = 4;
        r.window = -1;
        ok &= mha_cache_row(&s, &r, 2, 0, 0, 0, 0) == NULL;
        r.window = 0;
        r.keep_first = 1; /* without a window */
        ok &= mha_cache_row(&s, &r, 2, 0, 0, 0, 0) == NULL;
        r.keep_first = 0;
        r.length = NULL;
        ok &= mha_cache_row(&s, &r, 2, 0, 0, 0, 0) == NULL;
        r.length = lens;
        r.k = NULL;
        ok &= mha_cache_row(&s, &r, 2, 0, 0, 0, 0) == NULL;
        CHECK(ok, "mha_cache_row: an unknown type, capacity 0, window < 0, keep_first without a window, length or k "
                  "NULL: NULL");
        memcpy(lens, len_copy, sizeof lens);
    }
    { /* mha_decode_tree: parents [2][2] */
        int32_t par[4] = {-1, 0, -1, -1}, k, no_extras = mha_build_info().no_extras, st;
        static const int32_t bad[4][2] = {{-2, 0}, {0, 0}, {-1, 1}, {-1, 5}}; /* draft 0's and 1's parents */
        c.window = 0;
        lens[0] = 1;
        lens[1] = 0;
        memcpy(store_copy, store, cbytes);
        memcpy(len_copy, lens, sizeof lens);
        memset(out, 0, 2 * 2 * 4 * sizeof(float));
#define TREE(parents, keys, values) mha_decode_tree(&s, &p.w, &c, 2, 2, parents, p.q, keys, values, out, ws, bytes)
        if (no_extras) {
            CHECK(TREE(par, p.k, p.v) == MHA_ERR_SHAPE && TREE(NULL, p.k, p.v) == MHA_ERR_SHAPE,
                  "mha_decode_tree under MHA_NO_EXTRAS: MHA_ERR_SHAPE");
        } else {
            CHECK(TREE(NULL, p.k, p.v) == MHA_ERR_NULL && TREE(par, NULL, NULL) == MHA_ERR_NULL &&
                      TREE(par, p.k, NULL) == MHA_ERR_NULL,
                  "mha_decode_tree: parents, or keys and values NULL: MHA_ERR_NULL");
            for (k = 0; k < 4; ++k) {
                par[2] = bad[k][0];
                par[3] = bad[k][1];
                st = TREE(par, p.k, p.v);
                CHECK(st == MHA_ERR_MASK, "mha_decode_tree: sequence 1's parents %d, %d: MHA_ERR_MASK (%d)",
                      (int)par[2], (int)par[3], st);
            }
            par[2] = par[3] = -1;
            lens[1] = -1;
            par[0] = 5;
            CHECK(TREE(par, p.k, p.v) == MHA_ERR_MASK, "mha_decode_tree: a length < 0 and a bad parent: MHA_ERR_MASK");
            lens[1] = 3;
            par[0] = -1;
            CHECK(TREE(par, p.k, p.v) == MHA_ERR_CAPACITY, "mha_decode_tree: 3 + 2 drafts in 4 slots: MHA_ERR_CAPACITY");
            lens[1] = 0;
            CHECK(memcmp(store, store_copy, cbytes) == 0 && lens[0] == 1 && lens[1] == 0 &&
                      tu_max_abs(out, 2 * 2 * 4) == 0.0f,
                  "mha_decode_tree refused: nothing written (cache, lengths, out)");
            CHECK(TREE(par, p.k, p.v) == MHA_OK && lens[0] == 1 && lens[1] == 0 && tu_max_abs(out, 2 * 2 * 4) > 0.0f,
                  "mha_decode_tree: MHA_OK, the lengths unchanged");
        }
#undef TREE
        memcpy(store, store_copy, cbytes);
        memcpy(lens, len_copy, sizeof lens);
    }
    c.window = 0;
    c.type = 3;
    CHECK(DEC(&c, p.q, p.k, p.v, out, ws, bytes) == MHA_ERR_SHAPE,
          "decode: element type 3 (MHA_I8: the int8 path's only): MHA_ERR_SHAPE");
    c.type = -1;
    CHECK(DEC(&c, p.q, p.k, p.v, out, ws, bytes) == MHA_ERR_SHAPE, "decode: element type -1: MHA_ERR_SHAPE");
    c.type = MHA_I16;
    CHECK(DEC(&c, p.q, p.k, p.v, out, ws, bytes) == MHA_ERR_SHAPE,
          "decode: element type 6 (MHA_I16: the 16x8 path's only): MHA_ERR_SHAPE");
    c.type = 7;
    CHECK(DEC(&c, p.q, p.k, p.v, out, ws, bytes) == MHA_ERR_SHAPE, "decode: element type 7: MHA_ERR_SHAPE");
    c.type = 0;
    {
        static const int32_t vt[4] = {MHA_I8, MHA_I16, -1, INT32_MAX};
        int k;
        int ok = 1;
        for (k = 0; k < 4; ++k) {
            c.value_type = vt[k];
            ok &= DEC(&c, p.q, p.k, p.v, out, ws, bytes) == MHA_ERR_SHAPE &&
                  mha_cache_append(&s, &p.w, &c, 2, 2, p.k, p.v, ws, bytes) == MHA_ERR_SHAPE;
        }
        c.value_type = 0;
        CHECK(ok && memcmp(lens, len_copy, sizeof lens) == 0,
              "decode and append: value_type MHA_I8, MHA_I16, -1 or INT32_MAX: MHA_ERR_SHAPE, lengths unchanged");
    }
    CHECK(mha_decode(&s, &p.w, &c, -1, 2, p.q, p.k, p.v, out, ws, bytes) == MHA_ERR_SHAPE &&
              mha_decode(&s, &p.w, &c, 2, -1, p.q, p.k, p.v, out, ws, bytes) == MHA_ERR_SHAPE,
          "decode: batch or t < 0: MHA_ERR_SHAPE");
    c.k = NULL;
    CHECK(DEC(&c, p.q, p.k, p.v, out, ws, bytes) == MHA_ERR_NULL, "decode: cache->k NULL: MHA_ERR_NULL");
    c.k = store;
    c.length = NULL;
    CHECK(DEC(&c, p.q, p.k, p.v, out, ws, bytes) == MHA_ERR_NULL, "decode: cache->length NULL: MHA_ERR_NULL");
    c.length = lens;
    CHECK(DEC(&c, NULL, p.k, p.v, out, ws, bytes) == MHA_ERR_NULL && DEC(&c, p.q, p.k, p.v, NULL, ws, bytes) == MHA_ERR_NULL &&
              DEC(&c, p.q, p.k, NULL, out, ws, bytes) == MHA_ERR_NULL && DEC(&c, p.q, NULL, p.v, out, ws, bytes) == MHA_ERR_NULL,
          "decode: queries, out, or one of keys and values NULL: MHA_ERR_NULL");
    CHECK(DEC(&c, p.q, p.k, p.v, out, NULL, bytes) == MHA_ERR_WORKSPACE &&
              DEC(&c, p.q, p.k, p.v, out, ws, bytes - 1) == MHA_ERR_WORKSPACE,
          "decode: workspace NULL or one byte short: MHA_ERR_WORKSPACE");
    memcpy(store_copy, store, cbytes);
    memset(ws, 0x5A, bytes);
    memcpy(ws_copy, ws, bytes);
    lens[1] = -1;
    CHECK(DEC(&c, p.q, p.k, p.v, out, ws, bytes) == MHA_ERR_MASK, "decode: a length < 0: MHA_ERR_MASK");
    lens[1] = 5;
    CHECK(DEC(&c, p.q, p.k, p.v, out, ws, bytes) == MHA_ERR_MASK, "decode: a length > capacity: MHA_ERR_MASK");
    lens[1] = 3;
    memcpy(len_copy, lens, sizeof lens);
    CHECK(DEC(&c, p.q, p.k, p.v, out, ws, bytes) == MHA_ERR_CAPACITY, "decode: 3 + 2 tokens in 4 slots: MHA_ERR_CAPACITY");
    CHECK(memcmp(store, store_copy, cbytes) == 0 && memcmp(lens, len_copy, sizeof lens) == 0 &&
              memcmp(ws, ws_copy, bytes) == 0,
          "decode: on an error nothing is written (cache, lengths, workspace)");
    c.window = 2; /* a ring has room for any length; only INT32_MAX is a limit */
    lens[0] = INT32_MAX - 1;
    CHECK(DEC(&c, p.q, p.k, p.v, out, ws, bytes) == MHA_ERR_CAPACITY, "decode: a ring past INT32_MAX positions: MHA_ERR_CAPACITY");
    lens[0] = 1000;
    CHECK(DEC(&c, p.q, p.k, p.v, out, ws, bytes) == MHA_OK && lens[0] == 1002 && lens[1] == 5,
          "decode: a ring, lengths past the capacity: MHA_OK, lengths grow by t");
    c.window = 0;
    lens[0] = 0;
    lens[1] = 2;
    CHECK(DEC(&c, p.q, p.k, p.v, out, ws + 1, bytes) == MHA_OK && lens[0] == 2 && lens[1] == 4,
          "decode: a misaligned workspace works");
    CHECK(DEC(&c, p.q, p.k, p.v, out, ws, bytes) == MHA_ERR_CAPACITY, "decode: a full cache: MHA_ERR_CAPACITY");
    CHECK(DEC(&c, p.q, NULL, NULL, out, ws, bytes) == MHA_OK && lens[0] == 2 && lens[1] == 4,
          "decode: cross-attention on a full cache: MHA_OK, lengths unchanged");
    /* mha_cache_append */
    lens[0] = lens[1] = 0;
    CHECK(mha_cache_append(&s, &p.w, NULL, 2, 2, p.k, p.v, ws, bytes) == MHA_ERR_NULL &&
              mha_cache_append(&s, &p.w, &c, 2, 2, NULL, p.v, ws, bytes) == MHA_ERR_NULL &&
              mha_cache_append(&s, &p.w, &c, 2, 2, p.k, NULL, ws, bytes) == MHA_ERR_NULL,
          "append: cache, keys or values NULL: MHA_ERR_NULL");
    CHECK(mha_cache_append(&s, &p.w, &c, 2, 2, p.k, p.v, ws, bytes) == MHA_OK && lens[0] == 2 && lens[1] == 2 &&
              mha_cache_append(&s, &p.w, &c, 2, 2, p.k, p.v, ws, bytes) == MHA_OK && lens[0] == 4 &&
              mha_cache_append(&s, &p.w, &c, 2, 1, p.k, p.v, ws, bytes) == MHA_ERR_CAPACITY && lens[0] == 4,
          "append: 2 + 2 tokens fit in 4 slots, 1 more is MHA_ERR_CAPACITY");
    {
        mha_weights w2 = p.w;
        w2.w_k = NULL;
        lens[0] = lens[1] = 0;
        CHECK(mha_cache_append(&s, &w2, &c, 2, 2, p.k, p.v, ws, bytes) == MHA_ERR_NULL,
              "append: w_k NULL: MHA_ERR_NULL");
        w2 = p.w;
        w2.w_q = w2.w_o = NULL;
        CHECK(mha_cache_append(&s, &w2, &c, 2, 2, p.k, p.v, ws, bytes) == MHA_OK,
              "append: needs neither w_q nor w_o");
    }
    /* overflow: a cache of more than SIZE_MAX bytes */
    {
        mha_shape big = s;
        big.p_k = big.p_q = INT32_MAX;
        c.capacity = INT32_MAX;
        CHECK(mha_cache_bytes(&big, INT32_MAX, INT32_MAX) == 0 &&
                  mha_decode(&big, &p.w, &c, 2, 2, p.q, p.k, p.v, out, ws, bytes) == MHA_ERR_OVERFLOW,
              "decode: a cache beyond size_t: MHA_ERR_OVERFLOW, mha_cache_bytes 0");
        c.capacity = 4;
    }
    /* mha_attend's statuses */
    {
        size_t ab = mha_attend_workspace_size(&s, 2, 2, 2);
        void *aw = malloc(ab);
        /* [2][2][2*3], [2][2][1*3], [2][2][1*2], [2][2][2*2] */
        float *aq = tu_floats(24, 1.0f), *ak = tu_floats(12, 1.0f), *av = tu_floats(8, 1.0f), *ah = tu_floats(16, 0.0f);
        mha_weights none;
        memset(&none, 0, sizeof none);
        CHECK(ab > 0 && mha_attend(&s, &none, 2, 2, 2, aq, ak, av, NULL, ah, NULL, aw, ab) == MHA_OK,
              "attend: dot scoring needs no weights");
        CHECK(mha_attend(&s, &none, 2, 2, 2, NULL, ak, av, NULL, ah, NULL, aw, ab) == MHA_ERR_NULL &&
                  mha_attend(&s, &none, 2, 2, 2, aq, ak, av, NULL, NULL, NULL, aw, ab) == MHA_ERR_NULL,
              "attend: q or heads_out NULL: MHA_ERR_NULL");
        CHECK(mha_attend(&s, &none, 2, 2, 2, aq, ak, av, NULL, ah, NULL, aw, ab - 1) == MHA_ERR_WORKSPACE,
              "attend: workspace one byte short: MHA_ERR_WORKSPACE");
        free(aw);
        free(aq);
        free(ak);
        free(av);
        free(ah);
    }
    CHECK(strcmp(mha_status_string(MHA_ERR_CAPACITY), "unknown mha_status") != 0, "MHA_ERR_CAPACITY has a message");
    free(store);
    free(store_copy);
    free(ws);
    free(ws_copy);
    free(out);
    tu_problem_free(&p);
}


/* ---- mha_explain ------------------------------------------------------------- */

/* One mutation of shape s and weights w, chosen by k: a size, a knob, the score or a weight
   pointer made bad, or a size made smaller (the inputs made for the original stay big enough). */
static void mutate(mha_shape *s, mha_weights *w, uint32_t k) {
    static const int32_t bad[] = {0, -1, INT32_MIN, 1};
    int32_t v = bad[(k >> 5) % 4];
    switch (k % 26) {
    case 0: s->heads = v; break;
    case 1: s->kv_heads = v; break;
    case 2: s->d_q = v; break;
    case 3: s->d_k = v; break;
    case 4: s->d_v = v; break;
    case 5: s->p_q = v; break;
    case 6: s->p_k = v; break;
    case 7: s->p_v = v; break;
    case 8: s->p_o = v; break;
    case 9: s->p_a = v; break;
    case 10: s->score = (mha_score)(v == 1 ? 2 : v); break;
    case 11: s->score = MHA_SCORE_DOT; break;
    case 12: s->kv_heads = s->heads + 1; break;
    case 13: s->rope_dim = v == 1 ? 3 : v == 0 ? 2 * s->p_q + 2 : v; break;
    case 14: s->rope_pairs = v == 1 ? 2 : v; break;
    case 15: s->rope_theta = v == 0 ? NAN : v == 1 ? INFINITY : (float)v; break;
    case 16: s->softcap = v == 0 ? NAN : v == 1 ? INFINITY : -1.0f; break;
    case 17: s->scale = v == 0 ? NAN : v == 1 ? -INFINITY : 2.0f; break;
    case 18: w->type = v == 1 ? 3 : v; break;
    case 19: w->w_q = NULL; break;
    case 20: w->w_k = NULL; break;
    case 21: w->w_v = NULL; break;
    case 22: w->w_o = NULL; break;
    case 23: w->a_q = NULL; break;
    case 24: w->a_k = NULL; break;
    default: w->a_v = NULL; break;
    }
}

/* mha_explain names the check that fails, with its values, and returns the
   status mha_forward returns for the same shape and weights; with
   MHA_NO_STATUS_STRINGS its message is "" (SAID). */
#if defined(MHA_NO_STATUS_STRINGS) && MHA_NO_STATUS_STRINGS
#define SAID(text) ""
#else
#define SAID(text) text
#endif
static void test_explain(void) {
    mha_shape s = shape_rand(0), base;
    mha_weights w;
    tu_problem p;
    char msg[96], small[8];
    int trial, same = 1, said = 1, cut = 1, errors = 0;
    s.heads = 4; s.kv_heads = 2; s.p_q = s.p_k = 64;
    tu_problem_make(&p, &s, 1, 2, 3, 1);
    base = s;
    CHECK(mha_explain(&s, &p.w, msg, sizeof msg) == MHA_OK && strcmp(msg, SAID("ok")) == 0, "mha_explain: \"%s\"", msg);
    s.p_k = 32;
    CHECK(mha_explain(&s, &p.w, msg, sizeof msg) == MHA_ERR_SHAPE &&
              strcmp(msg, SAID("p_q 64 != p_k 32: dot scoring needs p_q = p_k")) == 0,
          "mha_explain: \"%s\"", msg);
    s = base;
    s.heads = 6; s.kv_heads = 4;
    CHECK(mha_explain(&s, &p.w, msg, sizeof msg) == MHA_ERR_SHAPE &&
              strcmp(msg, SAID("heads 6 is not a multiple of kv_heads 4")) == 0,
          "mha_explain: \"%s\"", msg);
    s = base;
    s.d_k = -3;
    CHECK(mha_explain(&s, &p.w, msg, sizeof msg) == MHA_ERR_SHAPE && strcmp(msg, SAID("d_k is -3: must be >= 1")) == 0,
          "mha_explain: \"%s\"", msg);
    s.d_k = INT32_MIN;
    CHECK(mha_explain(&s, &p.w, msg, sizeof msg) == MHA_ERR_SHAPE &&
              strcmp(msg, SAID("d_k is -2147483648: must be >= 1")) == 0,
          "mha_explain: \"%s\"", msg);
    s = base;
    w = p.w;
    w.w_o = NULL;
    CHECK(mha_explain(&s, &w, msg, sizeof msg) == MHA_ERR_NULL && strcmp(msg, SAID("w_o is NULL")) == 0,
          "mha_explain: \"%s\"", msg);
    CHECK(mha_explain(NULL, &w, msg, sizeof msg) == MHA_ERR_NULL && strcmp(msg, SAID("shape is NULL")) == 0 &&
              mha_explain(&s, NULL, msg, sizeof msg) == MHA_ERR_NULL &&
              strcmp(msg, SAID("w (the weights) is NULL")) == 0,
          "mha_explain: shape, weights NULL");
    /* cut to fit, always ended; nothing written past msg_bytes; msg NULL or 0 bytes: the status alone */
    s.p_k = 32;
    memset(small, 'x', sizeof small);
    cut &= mha_explain(&s, &p.w, small, 5) == MHA_ERR_SHAPE && strcmp(small, SAID("p_q ")) == 0 && small[5] == 'x';
    memset(small, 'x', sizeof small);
    cut &= mha_explain(&s, &p.w, small, 7) == MHA_ERR_SHAPE && strcmp(small, SAID("p_q 64")) == 0 && small[7] == 'x';
    memset(small, 'x', sizeof small);
    cut &= mha_explain(&s, &p.w, small, 1) == MHA_ERR_SHAPE && small[0] == '\0' && small[1] == 'x';
    cut &= mha_explain(&s, &p.w, small, 0) == MHA_ERR_SHAPE && small[0] == '\0' && small[1] == 'x';
    cut &= mha_explain(&s, &p.w, NULL, 40) == MHA_ERR_SHAPE;
    CHECK(cut, "mha_explain: the message cut to msg_bytes, ended by a zero byte; msg NULL: the status alone");
    tu_problem_free(&p);
    /* the same status as mha_forward (its other arguments valid) for 1200 shapes and weights with
       one or two mutations, additive and dot; a message for every failure */
    for (trial = 0; trial < 1200; ++trial) {
        mha_status e, f;
        size_t bytes;
        void *ws;
        s = shape_rand(trial % 2);
        tu_problem_make(&p, &s, 1, 2, 3, 1);
        w = p.w;
        mutate(&s, &w, (uint32_t)tu_next());
        if (trial % 3 == 0) mutate(&s, &w, (uint32_t)tu_next());
        bytes = mha_workspace_size(&s, 1, 2, 3);
        ws = malloc(bytes ? bytes : 1);
        msg[0] = '\0';
        e = mha_explain(&s, &w, msg, sizeof msg);
        if (e == MHA_OK) { /* a mutation the checks allow (kv_heads 0: heads): arrays of the new sizes */
            mha_weights m = w;
            tu_problem_free(&p);
            tu_problem_make(&p, &s, 1, 2, 3, 1);
            w = p.w;
            if (!m.a_q) w.a_q = NULL;
            if (!m.a_k) w.a_k = NULL;
            if (!m.a_v) w.a_v = NULL;
        }
        f = mha_forward(&s, &w, 1, 2, 3, p.q, p.k, p.v, NULL, p.out, NULL, ws, bytes);
        if (e != f) {
            same = 0;
            printf("mha_explain %d, mha_forward %d: %s\n", (int)e, (int)f, msg);
        }
        said &= (msg[0] != '\0' || !SAID("x")[0]) && (e != MHA_OK || strcmp(msg, SAID("ok")) == 0);
        errors += e != MHA_OK;
        free(ws);
        tu_problem_free(&p);
    }
    printf("mha_explain: %d of 1200 mutated shapes and weights fail a check, each with mha_forward's status\n", errors);
    CHECK(same && errors > 600, "mha_explain: the status of mha_forward on 1200 mutated shapes and weights (%d errors)",
          errors);
    CHECK(said, "mha_explain: a message for each");
}

int main(void) {
    tu_seed(2026);
    test_canary();
    test_nulls();
    test_sizes();
    test_knobs();
    test_masks();
    test_numbers();
    test_decode_statuses();
    test_explain();
    CHECK((mha_build_info().fast == 0) == (strcmp(mha_build_info().vector, "none") == 0) &&
              strcmp(mha_build_info().version, MHA_VERSION_STRING) == 0,
          "mha_build_info: fast %d, vector code %s, version %s", (int)mha_build_info().fast, mha_build_info().vector,
          mha_build_info().version);
    return tu_summary();
}
