/* The int8 path (mha_forward_q8):
   - bit for bit against tests/q8_ref.py, the same arithmetic written in
     numpy: every case of the file given as argv[1] (make test writes 1000),
     or of tests/ref_q8_small.h where no file is given (cross targets);
     the expected outputs of both rounding modes are in the file, and this
     build's (MHA_Q8_SINGLE_ROUNDING) is checked;
   - mha_q8_prepare from the cases' float scales gives the file's rescales
     (where double has 53 bits);
   - against mha_forward_reference (fp32) on the dequantised weights and
     inputs of the calibrated cases: the output error in LSBs, its
     distribution printed, and at least 99 % within 1 LSB;
   - int8 decoding (mha_decode_q8, mha_cache_append_q8) against
     mha_forward_q8 bit for bit on every case: token by token, in chunks,
     with a window as a ring, and as cross-attention;
   - the integer exp against 2^x for every input that is not 0, and the
     integer softmax against the real one;
   - bad input: each status, nothing written (the cache and its lengths
     included). */
#include "test_util.h"
#include "test_hooks.h" /* linked against an object of tests/test_impl.c; the integer exp through it */
#define Q8_SINGLE hook_q8_single() /* the object's MHA_Q8_SINGLE_ROUNDING */

#ifdef Q8_HEADER /* AVR: tests/ref_q8_tiny.h, small enough for its RAM */
#include Q8_HEADER
#else
#include "ref_q8_small.h"
#endif

/* every Q8_EXP_STRIDE-th input of the integer exp (cross targets: fewer) */
#ifndef Q8_EXP_STRIDE
#define Q8_EXP_STRIDE 1
#endif

#define Q8_MAGIC 0x51384D48

/* a cursor over a case list's words */
static const int32_t *q8_w;
static int32_t q8_take(void) { return *q8_w++; }
static float q8_float(void) {
    int32_t b = q8_take();
    float f;
    memcpy(&f, &b, sizeof f);
    return f;
}
static int8_t *q8_bytes(size_t count) {
    int8_t *p = (int8_t *)malloc(count ? count : 1);
    size_t i;
    for (i = 0; i < count; ++i) p[i] = (int8_t)q8_take();
    return p;
}
static int32_t *q8_ints(size_t count) {
    int32_t *p = (int32_t *)malloc((count ? count : 1) * sizeof(int32_t));
    size_t i;
    for (i = 0; i < count; ++i) p[i] = q8_take();
    return p;
}
static float *q8_floats(size_t count) {
    float *p = (float *)malloc((count ? count : 1) * sizeof(float));
    size_t i;
    for (i = 0; i < count; ++i) p[i] = q8_float();
    return p;
}

/* one case, as q8_ref.py's case_words writes it */
typedef struct q8_case {
    mha_shape s;
    int32_t batch, n, m, calibrated, has_bias;
    mha_mask mask;
    int has_mask;
    mha_q8_params p;
    float sc[8]; /* in_q, in_k, in_v, q, k, v, heads, out */
    mha_q8_weights w;
    int8_t *wt[4];
    float *sw[4];
    int32_t *bias[4];
    mha_q8_rescale *r[4];
    int8_t *q, *k, *v;
    int32_t *vl;
    uint8_t *keep;
    int8_t *expect_double, *expect_single;
} q8_case;

static void q8_free(q8_case *c) {
    int i;
    for (i = 0; i < 4; ++i) {
        free(c->wt[i]);
        free(c->sw[i]);
        free(c->bias[i]);
        free(c->r[i]);
    }
    free(c->q);
    free(c->k);
    free(c->v);
    free(c->vl);
    free(c->keep);
    free(c->expect_double);
    free(c->expect_single);
}

/* The rows and columns of W_q, W_k, W_v, W_o. */
static void q8_dims(const q8_case *c, size_t rows[4], size_t cols[4]) {
    rows[0] = (size_t)(c->s.heads * c->s.p_q);
    rows[1] = (size_t)(c->s.kv_heads * c->s.p_k);
    rows[2] = (size_t)(c->s.kv_heads * c->s.p_v);
    rows[3] = (size_t)c->s.p_o;
    cols[0] = (size_t)c->s.d_q;
    cols[1] = (size_t)c->s.d_k;
    cols[2] = (size_t)c->s.d_v;
    cols[3] = (size_t)(c->s.heads * c->s.p_v);
}

/* Reads the case at q8_w; 0 at the list's end. */
static int q8_read(q8_case *c) {
    int32_t magic = q8_take(), vlq, keep, i;
    size_t rows[4], cols[4], j, nq, nk, nv, no;
    if (magic != Q8_MAGIC) return 0;
    memset(c, 0, sizeof *c);
    c->s.heads = q8_take();
    c->s.kv_heads = q8_take();
    c->s.d_q = q8_take();
    c->s.d_k = q8_take();
    c->s.d_v = q8_take();
    c->s.p_q = c->s.p_k = q8_take();
    c->s.p_v = q8_take();
    c->s.p_o = q8_take();
    c->batch = q8_take();
    c->n = q8_take();
    c->m = q8_take();
    c->s.scale = q8_float();
    c->mask.causal = q8_take();
    c->mask.causal_offset = q8_take();
    vlq = q8_take();
    keep = q8_take();
    c->has_bias = q8_take();
    c->calibrated = q8_take();
    c->p.zero_in_q = q8_take();
    c->p.zero_in_k = q8_take();
    c->p.zero_in_v = q8_take();
    c->p.zero_q = q8_take();
    c->p.zero_k = q8_take();
    c->p.zero_v = q8_take();
    c->p.zero_heads = q8_take();
    c->p.zero_out = q8_take();
    for (i = 0; i < 8; ++i) c->sc[i] = q8_float();
    c->p.score.multiplier = q8_take();
    c->p.score.shift = q8_take();
    c->p.head.multiplier = q8_take();
    c->p.head.shift = q8_take();
    q8_dims(c, rows, cols);
    for (i = 0; i < 4; ++i) {
        c->wt[i] = q8_bytes(rows[i] * cols[i]);
        c->sw[i] = q8_floats(rows[i]);
        c->bias[i] = q8_ints(rows[i]);
        c->r[i] = (mha_q8_rescale *)malloc(rows[i] * sizeof(mha_q8_rescale));
        for (j = 0; j < rows[i]; ++j) c->r[i][j].multiplier = q8_take();
        for (j = 0; j < rows[i]; ++j) c->r[i][j].shift = q8_take();
    }
    c->w.w_q = c->wt[0];
    c->w.w_k = c->wt[1];
    c->w.w_v = c->wt[2];
    c->w.w_o = c->wt[3];
    c->w.b_q = c->has_bias ? c->bias[0] : NULL;
    c->w.b_k = c->has_bias ? c->bias[1] : NULL;
    c->w.b_v = c->has_bias ? c->bias[2] : NULL;
    c->w.b_o = c->has_bias ? c->bias[3] : NULL;
    c->w.r_q = c->r[0];
    c->w.r_k = c->r[1];
    c->w.r_v = c->r[2];
    c->w.r_o = c->r[3];
    nq = (size_t)(c->batch * c->n * c->s.d_q);
    nk = (size_t)(c->batch * c->m * c->s.d_k);
    nv = (size_t)(c->batch * c->m * c->s.d_v);
    no = (size_t)(c->batch * c->n * c->s.p_o);
    c->q = q8_bytes(nq);
    c->k = q8_bytes(nk);
    c->v = q8_bytes(nv);
    if (vlq >= 0) {
        c->mask.valid_lens_per_query = vlq;
        c->vl = q8_ints((size_t)(c->batch * (vlq ? c->n : 1)));
        c->mask.valid_lens = c->vl;
    }
    if (keep) {
        size_t count = (size_t)(c->batch * c->n * c->m);
        c->keep = (uint8_t *)malloc(count ? count : 1);
        for (j = 0; j < count; ++j) c->keep[j] = (uint8_t)q8_take();
        c->mask.keep = c->keep;
    }
    c->has_mask = c->mask.causal || vlq >= 0 || keep;
    c->expect_double = q8_bytes(no);
    c->expect_single = q8_bytes(no);
    return 1;
}

/* The error histogram against fp32, in output LSBs: 0, 1, 2, 3+ */
static long q8_lsb[4], q8_calibrated;

/* fp32 forward on the dequantised case, its output quantised as out is */
static void q8_against_fp32(const q8_case *c, const int8_t *got) {
    const float *in_sc[4] = {&c->sc[0], &c->sc[1], &c->sc[2], &c->sc[6]};
    const int32_t zin[4] = {c->p.zero_in_q, c->p.zero_in_k, c->p.zero_in_v, c->p.zero_heads};
    size_t rows[4], cols[4], i, j, nq, nk, nv, no;
    float *wf[4], *bf[4], *qf, *kf, *vf, *of;
    mha_weights w = MHA_INIT;
    size_t bytes = mha_reference_workspace_size(&c->s, c->batch, c->n, c->m);
    void *ws = malloc(bytes);
    mha_status st;
    q8_dims(c, rows, cols);
    for (i = 0; i < 4; ++i) {
        wf[i] = (float *)malloc(rows[i] * cols[i] * sizeof(float) + 1);
        bf[i] = (float *)malloc(rows[i] * sizeof(float) + 1);
        for (j = 0; j < rows[i] * cols[i]; ++j) wf[i][j] = (float)c->wt[i][j] * c->sw[i][j / cols[i]];
        for (j = 0; j < rows[i]; ++j)
            bf[i][j] = c->has_bias ? (float)((double)c->bias[i][j] * (double)*in_sc[i] * (double)c->sw[i][j]) : 0.0f;
    }
    (void)zin;
    nq = (size_t)(c->batch * c->n * c->s.d_q);
    nk = (size_t)(c->batch * c->m * c->s.d_k);
    nv = (size_t)(c->batch * c->m * c->s.d_v);
    no = (size_t)(c->batch * c->n * c->s.p_o);
    qf = (float *)malloc(nq * sizeof(float) + 1);
    kf = (float *)malloc(nk * sizeof(float) + 1);
    vf = (float *)malloc(nv * sizeof(float) + 1);
    of = (float *)malloc(no * sizeof(float) + 1);
    for (j = 0; j < nq; ++j) qf[j] = (float)(c->q[j] - c->p.zero_in_q) * c->sc[0];
    for (j = 0; j < nk; ++j) kf[j] = (float)(c->k[j] - c->p.zero_in_k) * c->sc[1];
    for (j = 0; j < nv; ++j) vf[j] = (float)(c->v[j] - c->p.zero_in_v) * c->sc[2];
    w.w_q = wf[0];
    w.w_k = wf[1];
    w.w_v = wf[2];
    w.w_o = wf[3];
    w.b_q = bf[0];
    w.b_k = bf[1];
    w.b_v = bf[2];
    w.b_o = bf[3];
    st = mha_forward_reference(&c->s, &w, c->batch, c->n, c->m, qf, kf, vf, c->has_mask ? &c->mask : NULL, of, NULL,
                               ws, bytes);
    CHECK(st == MHA_OK, "fp32 forward of a q8 case: %s", mha_status_string(st));
    for (j = 0; st == MHA_OK && j < no; ++j) {
        double x = floor((double)of[j] / (double)c->sc[7] + 0.5) + c->p.zero_out;
        long d = labs((long)got[j] - (long)(x < -128 ? -128 : x > 127 ? 127 : x));
        ++q8_lsb[d > 3 ? 3 : d];
    }
    ++q8_calibrated;
    for (i = 0; i < 4; ++i) {
        free(wf[i]);
        free(bf[i]);
    }
    free(qf);
    free(kf);
    free(vf);
    free(of);
    free(ws);
}

/* mha_q8_prepare from the case's float scales gives its rescales */
static void q8_prepare_check(const q8_case *c) {
    mha_q8_scales sc;
    mha_q8_weights w = MHA_INIT;
    mha_q8_params p = MHA_INIT;
    size_t count = mha_q8_rows(&c->s), i, j, rows[4], cols[4];
    mha_q8_rescale *r = (mha_q8_rescale *)malloc(count * sizeof *r);
    const mha_q8_rescale *got[4];
    mha_status st;
    int same = 1;
    sc.in_q = c->sc[0];
    sc.in_k = c->sc[1];
    sc.in_v = c->sc[2];
    sc.q = c->sc[3];
    sc.k = c->sc[4];
    sc.v = c->sc[5];
    sc.heads = c->sc[6];
    sc.out = c->sc[7];
    sc.w_q = c->sw[0];
    sc.w_k = c->sw[1];
    sc.w_v = c->sw[2];
    sc.w_o = c->sw[3];
    st = mha_q8_prepare(&c->s, &sc, &w, &p, r, count);
    CHECK(st == MHA_OK, "mha_q8_prepare: %s", mha_status_string(st));
    if (st != MHA_OK) {
        free(r);
        return;
    }
    q8_dims(c, rows, cols);
    got[0] = w.r_q;
    got[1] = w.r_k;
    got[2] = w.r_v;
    got[3] = w.r_o;
    for (i = 0; i < 4; ++i)
        for (j = 0; j < rows[i]; ++j)
            same &= got[i][j].multiplier == c->r[i][j].multiplier && got[i][j].shift == c->r[i][j].shift;
    same &= p.score.multiplier == c->p.score.multiplier && p.score.shift == c->p.score.shift &&
            p.head.multiplier == c->p.head.multiplier && p.head.shift == c->p.head.shift;
    CHECK(same, "mha_q8_prepare's rescales differ from q8_ref.py's (score %d %d / %d %d, head %d %d / %d %d)",
          (int)p.score.multiplier, (int)p.score.shift, (int)c->p.score.multiplier, (int)c->p.score.shift,
          (int)p.head.multiplier, (int)p.head.shift, (int)c->p.head.multiplier, (int)c->p.head.shift);
    CHECK(w.r_q == r && w.r_o == r + rows[0] + rows[1] + rows[2], "mha_q8_prepare's row pointers");
    free(r);
}

static long q8_cases, q8_exact, q8_decoded;

/* Decoding in int8 against mha_forward_q8, bit for bit, with the case's
   weights and parameters and T = m tokens per sequence (its keys and values,
   and queries made here): token by token, and in chunks of 2 and 3, each
   equal to a causal forward; with a window w as a ring of capacity
   w + chunk - 1, equal to a forward whose keep mask is the window (with
   kept first positions: keep_first + w + chunk - 1, and the mask keeps the
   first columns too); and cross-attention over the m keys appended
   (mha_cache_append_q8), equal to a forward without a mask, and over a ring
   that holds the last half of them (and the first position), equal to a
   forward that keeps those. */
static void q8_decode_check(const q8_case *c) {
    const int32_t B = c->batch, T = c->m, dq = c->s.d_q, po = c->s.p_o;
    const int32_t kvh = c->s.kv_heads ? c->s.kv_heads : c->s.heads;
    int8_t *q = (int8_t *)malloc((size_t)(B * T * dq) + 1), *fwd = (int8_t *)malloc((size_t)(B * T * po) + 1);
    int8_t *dec = (int8_t *)malloc((size_t)(B * T * po) + 1);
    uint8_t *keep = (uint8_t *)malloc((size_t)(B * T * T) + 1);
    int32_t len[4], i, j, b, mode, ok = 1;
    size_t fb = mha_q8_workspace_size(&c->s, B, T, T), cap_max = (size_t)T + 8;
    void *fws = malloc(fb + 1), *dws = malloc(mha_q8_decode_workspace_size(&c->s, B, 3, (int32_t)cap_max) + 2);
    int8_t *store = (int8_t *)malloc(mha_cache_bytes_typed(&c->s, B, (int32_t)cap_max, MHA_I8) + 1);
    int8_t *rows = (int8_t *)malloc((size_t)(B * 3 * (dq + c->s.d_k + c->s.d_v + po)) + 1); /* a chunk's */
    mha_mask mask = MHA_INIT;
    if (T == 0 || B > 4) goto done;
    for (i = 0; i < B * T * dq; ++i) q[i] = (int8_t)(tu_next() % 256u);
    for (mode = 0; mode < 10; ++mode) { /* chunks of 1, 2, 3; window 2 with chunks of 1, 2; cross; cross, ring;
                                           window 2, 1 kept, chunks of 1; window 3, 2 kept, chunks of 2;
                                           cross, a ring with 1 kept */
        const int32_t chunk = mode < 3 ? mode + 1 : mode == 3 || mode == 7 ? 1 : mode == 4 || mode == 8 ? 2 : T;
        const int32_t win = mode == 3 || mode == 4 || mode == 7 ? 2 : mode == 8 ? 3 : mode >= 6 ? (T + 1) / 2 : 0;
        const int32_t kept = mode == 7 ? 1 : mode == 8 ? 2 : mode == 9 && win > 1 ? 1 : 0;
        const int cross = mode == 5 || mode == 6 || mode == 9;
        mha_cache cache;
        mha_status st;
        int32_t cap = mode == 6 ? win : mode == 9 ? kept + win : win ? kept + win + chunk - 1 : T;
        memset(&mask, 0, sizeof mask);
        if (mode == 5) {
            st = mha_forward_q8(&c->s, &c->w, &c->p, B, T, T, q, c->k, c->v, NULL, fwd, fws, fb);
        } else if (mode == 6 || mode == 9) { /* the ring holds positions T - (cap - kept) .. T - 1, and < kept */
            for (i = 0; i < B * T * T; ++i) keep[i] = (uint8_t)(i % T >= T - (cap - kept) || i % T < kept);
            mask.keep = keep;
            st = mha_forward_q8(&c->s, &c->w, &c->p, B, T, T, q, c->k, c->v, &mask, fwd, fws, fb);
        } else if (win) {
            for (b = 0; b < B; ++b)
                for (i = 0; i < T; ++i)
                    for (j = 0; j < T; ++j) keep[(b * T + i) * T + j] = (uint8_t)(j <= i && (j > i - win || j < kept));
            mask.keep = keep;
            st = mha_forward_q8(&c->s, &c->w, &c->p, B, T, T, q, c->k, c->v, &mask, fwd, fws, fb);
        } else {
            mask.causal = 1;
            st = mha_forward_q8(&c->s, &c->w, &c->p, B, T, T, q, c->k, c->v, &mask, fwd, fws, fb);
        }
        ok &= st == MHA_OK;
        memset(&cache, 0, sizeof cache);
        cache.k = store;
        cache.v = store + (size_t)(B * kvh * cap * c->s.p_k);
        cache.length = len;
        cache.capacity = cap;
        cache.window = win;
        cache.keep_first = kept;
        cache.type = MHA_I8;
        for (b = 0; b < B; ++b) len[b] = 0;
        if (cross) { /* cross-attention: every key appended (one at a time into the ring), then all T
                        queries at once */
            size_t db = mha_q8_decode_workspace_size(&c->s, B, T, cap);
            int8_t *ks = rows, *vs = rows + B * c->s.d_k;
            if (mode == 5) st = mha_cache_append_q8(&c->s, &c->w, &c->p, &cache, B, T, c->k, c->v, dws, db);
            for (i = 0; mode != 5 && i < T; ++i) {
                for (b = 0; b < B; ++b) {
                    memcpy(ks + b * c->s.d_k, c->k + (b * T + i) * c->s.d_k, (size_t)c->s.d_k);
                    memcpy(vs + b * c->s.d_v, c->v + (b * T + i) * c->s.d_v, (size_t)c->s.d_v);
                }
                st = mha_cache_append_q8(&c->s, &c->w, &c->p, &cache, B, 1, ks, vs, dws, db);
                ok &= st == MHA_OK;
            }
            ok &= st == MHA_OK && len[0] == T;
            st = mha_decode_q8(&c->s, &c->w, &c->p, &cache, B, T, q, NULL, NULL, dec, dws, db);
            ok &= st == MHA_OK && len[0] == T;
        } else {
            for (i = 0; i < T; i += chunk) { /* the inputs' rows i .. i + n - 1 of every sequence */
                const int32_t n = T - i < chunk ? T - i : chunk;
                int8_t *qs = rows, *ks = qs + B * n * dq, *vs = ks + B * n * c->s.d_k, *os = vs + B * n * c->s.d_v;
                size_t db = mha_q8_decode_workspace_size(&c->s, B, n, cap);
                for (b = 0; b < B; ++b)
                    for (j = 0; j < n; ++j) {
                        memcpy(qs + (b * n + j) * dq, q + (b * T + i + j) * dq, (size_t)dq);
                        memcpy(ks + (b * n + j) * c->s.d_k, c->k + (b * T + i + j) * c->s.d_k, (size_t)c->s.d_k);
                        memcpy(vs + (b * n + j) * c->s.d_v, c->v + (b * T + i + j) * c->s.d_v, (size_t)c->s.d_v);
                    }
                st = mha_decode_q8(&c->s, &c->w, &c->p, &cache, B, n, qs, ks, vs, os, (unsigned char *)dws + 1, db);
                ok &= st == MHA_OK && len[0] == i + n;
                for (b = 0; b < B; ++b) memcpy(dec + (b * T + i) * po, os + b * n * po, (size_t)(n * po));
            }
        }
        ok &= memcmp(dec, fwd, (size_t)(B * T * po)) == 0;
        CHECK(ok, "int8 decoding (mode %d: chunk %d, window %d, keep_first %d) differs from mha_forward_q8", (int)mode,
              (int)chunk, (int)win, (int)kept);
        q8_decoded += ok;
        ok = 1;
    }
done:
    free(rows);
    free(q);
    free(fwd);
    free(dec);
    free(keep);
    free(fws);
    free(dws);
    free(store);
}

static void q8_run_cases(const int32_t *words, int prepare) {
    q8_case c;
    q8_w = words;
    while (q8_read(&c)) {
        size_t bytes = mha_q8_workspace_size(&c.s, c.batch, c.n, c.m), no = (size_t)(c.batch * c.n * c.s.p_o);
        void *ws = malloc(bytes + 8);
        int8_t *out = (int8_t *)malloc(no + 1);
        const int8_t *expect = Q8_SINGLE ? c.expect_single : c.expect_double;
        mha_status st;
        CHECK(bytes > 0, "q8 workspace size 0");
        memset(out, 0x5a, no + 1);
        /* at an odd address: the workspace may have any alignment */
        st = mha_forward_q8(&c.s, &c.w, &c.p, c.batch, c.n, c.m, c.q, c.k, c.v, c.has_mask ? &c.mask : NULL, out,
                            (unsigned char *)ws + 1, bytes);
        CHECK(st == MHA_OK, "mha_forward_q8: %s", mha_status_string(st));
        ++q8_cases;
        if (st == MHA_OK && memcmp(out, expect, no) == 0 && out[no] == 0x5a) {
            ++q8_exact;
        } else {
            size_t j, first = no;
            for (j = 0; j < no; ++j)
                if (out[j] != expect[j]) {
                    first = j;
                    break;
                }
            CHECK(0, "case %ld (h %d kv %d d %d/%d/%d p %d/%d/%d b %d n %d m %d): out[%u] %d, numpy %d", q8_cases,
                  (int)c.s.heads, (int)c.s.kv_heads, (int)c.s.d_q, (int)c.s.d_k, (int)c.s.d_v, (int)c.s.p_q,
                  (int)c.s.p_v, (int)c.s.p_o, (int)c.batch, (int)c.n, (int)c.m, (unsigned)first,
                  first < no ? out[first] : 0, first < no ? expect[first] : 0);
        }
        if (prepare && sizeof(double) == 8) q8_prepare_check(&c);
        q8_decode_check(&c);
        if (c.calibrated && st == MHA_OK) q8_against_fp32(&c, out);
        free(ws);
        free(out);
        q8_free(&c);
    }
}

/* The integer exp: every y in (-16 2^16, 0] against 2^(y/65536) in Q15,
   and the softmax it makes against the real one on random score rows. */
static void q8_exp_check(void) {
    int32_t y;
    double worst = 0.0, wp = 0.0, ws = 0.0;
    int t;
    for (y = 0; y > -16L * 65536; y -= Q8_EXP_STRIDE) {
        double want = ldexp(1.0, 15) * pow(2.0, (double)y / 65536.0), d = fabs((double)hook_q8_exp2(y) - want);
        if (d > worst) worst = d;
    }
    CHECK(worst <= 0.51, "integer exp: worst %.4f Q15 LSBs (rounding alone is 0.5)", worst);
    /* four at once (Helium's mha__q8_vexp2, where the object has it): the same integers for every input, past
       the ends too (without Helium, where it is the same function: every Q8_EXP_STRIDE-th) */
    {
        int32_t y4[4] = {0, -1, -2, -3};
        uint32_t e4[4];
        int vec = hook_q8_vexp2(y4, e4), alike = 1, l;
        for (y = 0; y > -17L * 65536; y -= vec ? 4 : Q8_EXP_STRIDE) {
            for (l = 0; l < 4; ++l) y4[l] = (int32_t)(y - l);
            vec = hook_q8_vexp2(y4, e4);
            for (l = 0; l < 4; ++l) alike &= e4[l] == hook_q8_exp2(y4[l]);
        }
        y4[0] = INT32_MIN, y4[1] = INT32_MIN + 1, y4[2] = (int32_t)(-16L * 65536), y4[3] = (int32_t)(-16L * 65536 + 1);
        hook_q8_vexp2(y4, e4);
        for (l = 0; l < 4; ++l) alike &= e4[l] == hook_q8_exp2(y4[l]);
        CHECK(alike, "integer exp four at once (%s) equals it one by one", vec ? "Helium" : "no Helium: one by one");
    }
    CHECK(hook_q8_exp2(0) == 32768u && hook_q8_exp2((int32_t)-16L * 65536) == 0u && hook_q8_exp2(INT32_MIN) == 0u,
          "integer exp at its ends");
    printf("q8: integer exp, worst error over %ld inputs (every %d-th): %.4f Q15 LSBs\n",
           16L * 65536L / Q8_EXP_STRIDE, Q8_EXP_STRIDE, worst);
    /* softmax of rows of m int32 scores, with a real factor f per unit */
    for (t = 0; t < 2000; ++t) {
        int32_t s[64], mx = INT32_MIN;
        uint32_t e[64];
        uint64_t sum = 0;
        uint32_t recip;
        int m = 1 + (int)(tu_next() % 64), j;
        double f = ldexp(1.0, -(int)(tu_next() % 12)) * (1.0 + tu_uniform(0, 1)), rmax, rsum = 0.0;
        mha_q8_rescale r;
        mha_q8_rescale_make(f * 1.4426950408889634 * 65536.0, &r);
        for (j = 0; j < m; ++j) {
            s[j] = (int32_t)(tu_next() % 20001u) - 10000;
            if (s[j] > mx) mx = s[j];
        }
        for (j = 0; j < m; ++j) sum += e[j] = hook_q8_exp2(mha_q8_rescale_apply(s[j] - mx, r));
        recip = (uint32_t)((((uint64_t)1 << 46) + sum / 2) / sum);
        rmax = (double)mx * f;
        for (j = 0; j < m; ++j) rsum += exp((double)s[j] * f - rmax);
        for (j = 0; j < m; ++j) {
            double p = (double)(((uint64_t)e[j] * recip + ((uint32_t)1 << 30)) >> 31) / 32768.0;
            double d = fabs(p - exp((double)s[j] * f - rmax) / rsum);
            if (d > wp) wp = d;
            ws += d;
        }
    }
    CHECK(wp < 3.0 / 32768.0, "integer softmax: worst %.3g against the real one", wp);
    printf("q8: integer softmax against the real one (2000 rows of 1-64 keys): worst %.3g (%.2f Q15 LSBs)\n", wp,
           wp * 32768.0);
    (void)ws;
}

/* Bad input: each status, and out untouched. */
static void q8_hostile(void) {
    mha_shape s = shape_of(2, 1, 4, 4, 4, 2, 2, 3, 0);
    int8_t wq[8 * 4], wk[4 * 4], wv[4 * 4], wo[3 * 4], q[2 * 4], k[3 * 4], v[3 * 4], out[2 * 3];
    mha_q8_rescale rq[4], rk[2], rv[2], ro[3];
    mha_q8_weights w = MHA_INIT;
    mha_q8_params p = MHA_INIT;
    mha_mask mask = MHA_INIT;
    unsigned char ws[512];
    int32_t vl[1] = {4};
    float bias[6] = {0};
    size_t bytes = mha_q8_workspace_size(&s, 1, 2, 3), i;
    mha_status st;
    int same = 1;
    memset(wq, 3, sizeof wq);
    memset(wk, 2, sizeof wk);
    memset(wv, 1, sizeof wv);
    memset(wo, 5, sizeof wo);
    memset(q, 7, sizeof q);
    memset(k, 9, sizeof k);
    memset(v, 11, sizeof v);
    for (i = 0; i < 4; ++i) mha_q8_rescale_make(0.01, &rq[i]);
    for (i = 0; i < 2; ++i) mha_q8_rescale_make(0.01, &rk[i]), mha_q8_rescale_make(0.01, &rv[i]);
    for (i = 0; i < 3; ++i) mha_q8_rescale_make(0.01, &ro[i]);
    mha_q8_rescale_make(100.0, &p.score);
    mha_q8_rescale_make(0.01, &p.head);
    w.w_q = wq; w.w_k = wk; w.w_v = wv; w.w_o = wo;
    w.r_q = rq; w.r_k = rk; w.r_v = rv; w.r_o = ro;
    CHECK(bytes > 0 && bytes < sizeof ws, "q8 workspace %u", (unsigned)bytes);
#define Q8_CALL(shape, wp, pp, b, n, m, qq, kk, vv, mk, o, wsp, by) \
    mha_forward_q8(shape, wp, pp, b, n, m, qq, kk, vv, mk, o, wsp, by)
#define Q8_EXPECT(want, call)                                                                           \
    do {                                                                                                \
        memset(out, 0x3c, sizeof out);                                                                  \
        st = call;                                                                                      \
        same = 1;                                                                                       \
        for (i = 0; i < sizeof out; ++i) same &= out[i] == 0x3c;                                        \
        CHECK(st == (want) && same, "line %d: %s (want %s), out %s", __LINE__, mha_status_string(st),  \
              mha_status_string(want), same ? "untouched" : "written");                                 \
    } while (0)
    st = Q8_CALL(&s, &w, &p, 1, 2, 3, q, k, v, NULL, out, ws, bytes);
    CHECK(st == MHA_OK, "q8 hostile base: %s", mha_status_string(st));
    Q8_EXPECT(MHA_ERR_NULL, Q8_CALL(NULL, &w, &p, 1, 2, 3, q, k, v, NULL, out, ws, bytes));
    Q8_EXPECT(MHA_ERR_NULL, Q8_CALL(&s, NULL, &p, 1, 2, 3, q, k, v, NULL, out, ws, bytes));
    Q8_EXPECT(MHA_ERR_NULL, Q8_CALL(&s, &w, NULL, 1, 2, 3, q, k, v, NULL, out, ws, bytes));
    Q8_EXPECT(MHA_ERR_NULL, Q8_CALL(&s, &w, &p, 1, 2, 3, NULL, k, v, NULL, out, ws, bytes));
    Q8_EXPECT(MHA_ERR_NULL, Q8_CALL(&s, &w, &p, 1, 2, 3, q, NULL, v, NULL, out, ws, bytes));
    w.r_k = NULL;
    Q8_EXPECT(MHA_ERR_NULL, Q8_CALL(&s, &w, &p, 1, 2, 3, q, k, v, NULL, out, ws, bytes));
    w.r_k = rk;
    Q8_EXPECT(MHA_ERR_WORKSPACE, Q8_CALL(&s, &w, &p, 1, 2, 3, q, k, v, NULL, out, ws, bytes - 1));
    Q8_EXPECT(MHA_ERR_WORKSPACE, Q8_CALL(&s, &w, &p, 1, 2, 3, q, k, v, NULL, out, NULL, bytes));
    Q8_EXPECT(MHA_ERR_SHAPE, Q8_CALL(&s, &w, &p, -1, 2, 3, q, k, v, NULL, out, ws, bytes));
    Q8_EXPECT(MHA_ERR_SHAPE, Q8_CALL(&s, &w, &p, 1, 2, ((int32_t)1 << 22) + 1, q, k, v, NULL, out, ws, bytes));
    p.zero_v = 128;
    Q8_EXPECT(MHA_ERR_SHAPE, Q8_CALL(&s, &w, &p, 1, 2, 3, q, k, v, NULL, out, ws, bytes));
    p.zero_v = 0;
    rv[1].multiplier = 5; /* below 2^30 and not 0 */
    Q8_EXPECT(MHA_ERR_SHAPE, Q8_CALL(&s, &w, &p, 1, 2, 3, q, k, v, NULL, out, ws, bytes));
    mha_q8_rescale_make(0.01, &rv[1]);
    p.head.shift = 31;
    Q8_EXPECT(MHA_ERR_SHAPE, Q8_CALL(&s, &w, &p, 1, 2, 3, q, k, v, NULL, out, ws, bytes));
    mha_q8_rescale_make(0.01, &p.head);
    { /* multiplier 0 with a shift outside [-31, 30]: refused too (it once reached shifts by a negative count) */
        static const int32_t shifts[4] = {100, -1000, INT32_MIN, 31};
        int k2;
        for (k2 = 0; k2 < 4; ++k2) {
            ro[1].multiplier = 0;
            ro[1].shift = shifts[k2];
            Q8_EXPECT(MHA_ERR_SHAPE, Q8_CALL(&s, &w, &p, 1, 2, 3, q, k, v, NULL, out, ws, bytes));
            mha_q8_rescale_make(0.01, &ro[1]);
            p.score.multiplier = 0;
            p.score.shift = shifts[k2];
            Q8_EXPECT(MHA_ERR_SHAPE, Q8_CALL(&s, &w, &p, 1, 2, 3, q, k, v, NULL, out, ws, bytes));
            mha_q8_rescale_make(100.0, &p.score);
        }
    }
    mask.bias = bias;
    Q8_EXPECT(MHA_ERR_SHAPE, Q8_CALL(&s, &w, &p, 1, 2, 3, q, k, v, &mask, out, ws, bytes));
    mask.bias = NULL;
    mask.valid_lens = vl;
    Q8_EXPECT(MHA_ERR_MASK, Q8_CALL(&s, &w, &p, 1, 2, 3, q, k, v, &mask, out, ws, bytes));
    vl[0] = 0; /* every key masked: zero heads, out = rescaled b_o = 0 + zero_out */
    st = Q8_CALL(&s, &w, &p, 1, 2, 3, q, k, v, &mask, out, ws, bytes);
    CHECK(st == MHA_OK && out[0] == 0 && out[5] == 0, "q8 fully masked: %s, %d %d", mha_status_string(st), out[0],
          out[5]);
    s.score = MHA_SCORE_ADDITIVE;
    s.p_a = 3;
    Q8_EXPECT(MHA_ERR_SHAPE, Q8_CALL(&s, &w, &p, 1, 2, 3, q, k, v, NULL, out, ws, bytes));
    s.score = MHA_SCORE_DOT;
    s.rope_dim = 2;
    Q8_EXPECT(MHA_ERR_SHAPE, Q8_CALL(&s, &w, &p, 1, 2, 3, q, k, v, NULL, out, ws, bytes));
    s.rope_dim = 0;
    s.alibi = 1;
    Q8_EXPECT(MHA_ERR_SHAPE, Q8_CALL(&s, &w, &p, 1, 2, 3, q, k, v, NULL, out, ws, bytes));
    s.alibi = 0;
    s.d_q = 65536;
    Q8_EXPECT(MHA_ERR_SHAPE, Q8_CALL(&s, &w, &p, 1, 2, 3, q, k, v, NULL, out, ws, bytes));
    CHECK(mha_q8_workspace_size(&s, 1, 2, 3) == 0 && mha_q8_rows(&s) == 0, "q8 sizes of a bad shape");
    s.d_q = 4;
    s.p_q = s.p_k = 16385;
    Q8_EXPECT(MHA_ERR_SHAPE, Q8_CALL(&s, &w, &p, 1, 2, 3, q, k, v, NULL, out, ws, bytes));
    s.p_q = s.p_k = 2;
    Q8_EXPECT(MHA_OK, Q8_CALL(&s, &w, &p, 0, 2, 3, q, k, v, NULL, out, ws, bytes)); /* nothing to do */
    s.d_q = 8; /* queries: (2^31 - 1)^2 8 bytes, past a 64-bit size_t (checked before the rescales are read) */
    Q8_EXPECT(MHA_ERR_OVERFLOW, Q8_CALL(&s, &w, &p, INT32_MAX, INT32_MAX, 3, q, k, v, NULL, out, ws, bytes));
    s.d_q = 4;
#if SIZE_MAX < 0x7fffffff /* 16-bit size_t (AVR): counts that fit int32_t but not size_t */
    CHECK(mha_q8_workspace_size(&s, 1, 2, 65537) == 0, "q8 workspace size of m = 65537 with a 16-bit size_t");
    Q8_EXPECT(MHA_ERR_OVERFLOW, Q8_CALL(&s, &w, &p, 1, 2, 65537, q, k, v, NULL, out, ws, bytes));
    Q8_EXPECT(MHA_ERR_OVERFLOW, Q8_CALL(&s, &w, &p, 65536, 2, 3, q, k, v, NULL, out, ws, bytes));
#endif
    /* int8 decoding's bad input: each status, out, the cache and its lengths untouched */
    {
        int8_t store[2 * 4 * 2], before[2 * 4 * 2];
        int32_t len[1] = {0}, len_before = 0;
        mha_cache cache;
        size_t db = mha_q8_decode_workspace_size(&s, 1, 1, 4);
        memset(&cache, 0, sizeof cache);
        memset(store, 0x11, sizeof store);
        memcpy(before, store, sizeof store);
        cache.k = store;
        cache.v = store + 8;
        cache.length = len;
        cache.capacity = 4;
        cache.type = MHA_I8;
        CHECK(db > 0 && db <= sizeof ws && mha_q8_decode_workspace_size(&s, 1, 1, 0) == 0 &&
                  mha_cache_bytes_typed(&s, 1, 4, MHA_I8) == sizeof store,
              "q8 decode sizes: %u", (unsigned)db);
#define Q8_DEC(want, ...)                                                                                   \
    do {                                                                                                    \
        memset(out, 0x3c, sizeof out);                                                                      \
        st = mha_decode_q8(__VA_ARGS__);                                                                    \
        same = memcmp(store, before, sizeof store) == 0 && len[0] == len_before;                            \
        for (i = 0; i < sizeof out; ++i) same &= out[i] == 0x3c;                                            \
        CHECK(st == (want) && same, "line %d: %s (want %s), %s", __LINE__, mha_status_string(st),         \
              mha_status_string(want), same ? "nothing written" : "written");                                \
    } while (0)
        Q8_DEC(MHA_ERR_NULL, &s, &w, &p, NULL, 1, 1, q, k, v, out, ws, db);
        Q8_DEC(MHA_ERR_NULL, &s, &w, &p, &cache, 1, 1, NULL, k, v, out, ws, db);
        Q8_DEC(MHA_ERR_NULL, &s, &w, &p, &cache, 1, 1, q, k, NULL, out, ws, db);
        Q8_DEC(MHA_ERR_WORKSPACE, &s, &w, &p, &cache, 1, 1, q, k, v, out, ws, db - 1);
        Q8_DEC(MHA_ERR_SHAPE, &s, &w, &p, &cache, -1, 1, q, k, v, out, ws, db);
        cache.type = MHA_F32;
        Q8_DEC(MHA_ERR_SHAPE, &s, &w, &p, &cache, 1, 1, q, k, v, out, ws, db);
        cache.type = MHA_I8;
        cache.value_type = MHA_Q8; /* int8 keys take no values of another type */
        Q8_DEC(MHA_ERR_SHAPE, &s, &w, &p, &cache, 1, 1, q, k, v, out, ws, db);
        cache.value_type = MHA_I8; /* (the same as 0) */
        Q8_DEC(MHA_ERR_WORKSPACE, &s, &w, &p, &cache, 1, 1, q, k, v, out, ws, db - 1);
        cache.value_type = 0;
        cache.capacity = 0;
        Q8_DEC(MHA_ERR_SHAPE, &s, &w, &p, &cache, 1, 1, q, k, v, out, ws, db);
        cache.capacity = 4;
        cache.window = 4; /* a chunk of 2 needs capacity >= 4 + 2 - 1 */
        Q8_DEC(MHA_ERR_SHAPE, &s, &w, &p, &cache, 1, 2, q, k, v, out, ws, db);
        cache.window = 3;
        cache.keep_first = 3; /* kept first slots: fewer than the window */
        Q8_DEC(MHA_ERR_SHAPE, &s, &w, &p, &cache, 1, 1, q, k, v, out, ws, db);
        cache.keep_first = 1; /* 1 + 3 + 1 - 1 = 4 slots: room; 1 + 3 + 2 - 1 > 4 for a chunk of 2 */
        Q8_DEC(MHA_ERR_SHAPE, &s, &w, &p, &cache, 1, 2, q, k, v, out, ws, db);
        cache.keep_first = -1;
        Q8_DEC(MHA_ERR_SHAPE, &s, &w, &p, &cache, 1, 1, q, k, v, out, ws, db);
        cache.keep_first = 0;
        cache.window = 0;
        len[0] = len_before = -1;
        Q8_DEC(MHA_ERR_MASK, &s, &w, &p, &cache, 1, 1, q, k, v, out, ws, db);
        len[0] = 4; /* full, no window */
        st = mha_decode_q8(&s, &w, &p, &cache, 1, 1, q, k, v, out, ws, db);
        CHECK(st == MHA_ERR_CAPACITY && len[0] == 4 && memcmp(store, before, sizeof store) == 0,
              "q8 decode into a full cache: %s", mha_status_string(st));
        st = mha_decode_q8(&s, &w, &p, &cache, 1, 1, q, NULL, NULL, out, ws, db); /* cross-attention reads it */
        CHECK(st == MHA_OK && len[0] == 4, "q8 cross-attention over a full cache: %s", mha_status_string(st));
        len[0] = len_before = 0;
        p.zero_k = -129;
        Q8_DEC(MHA_ERR_SHAPE, &s, &w, &p, &cache, 1, 1, q, k, v, out, ws, db);
        p.zero_k = 0;
        CHECK(mha_cache_append_q8(&s, &w, &p, &cache, 1, 1, NULL, NULL, ws, db) == MHA_ERR_NULL && len[0] == 0,
              "q8 append without keys");
        st = mha_decode_q8(&s, &w, &p, &cache, 1, 1, q, k, v, out, ws, db);
        CHECK(st == MHA_OK && len[0] == 1 && memcmp(store, before, sizeof store) != 0, "q8 decode: %s",
              mha_status_string(st));
#undef Q8_DEC
    }
    /* the rescale helpers */
    {
        mha_q8_rescale r;
        CHECK(mha_q8_rescale_make(-1.0, &r) == MHA_ERR_SHAPE && mha_q8_rescale_make(1.0 / 0.0, &r) == MHA_ERR_SHAPE &&
                  mha_q8_rescale_make(0.0 / 0.0, &r) == MHA_ERR_SHAPE &&
                  mha_q8_rescale_make(ldexp(1.0, 30), &r) == MHA_ERR_SHAPE &&
                  mha_q8_rescale_make(1.0, NULL) == MHA_ERR_NULL,
              "mha_q8_rescale_make's bad input");
        CHECK(mha_q8_rescale_make(ldexp(1.0, -40), &r) == MHA_OK && r.multiplier == 0 && r.shift == 0,
              "a factor below 2^-32 is 0");
        CHECK(mha_q8_rescale_make(0.0, &r) == MHA_OK && r.multiplier == 0 && r.shift == 0 &&
                  mha_q8_rescale_apply(INT32_MAX, r) == 0,
              "the factor 0");
        /* a fraction that rounds up to 1: 2^30 and one more in the shift */
        CHECK(mha_q8_rescale_make(1.0 - ldexp(1.0, -40), &r) == MHA_OK && r.multiplier == ((int32_t)1 << 30) &&
                  r.shift == 1 && mha_q8_rescale_apply(1000, r) == 1000,
              "1 - 2^-40 as a rescale: %ld %ld", (long)r.multiplier, (long)r.shift);
        CHECK(mha_q8_rescale_make(0.5, &r) == MHA_OK && r.multiplier == ((int32_t)1 << 30) && r.shift == 0 &&
                  mha_q8_rescale_apply(3, r) == 2 && mha_q8_rescale_apply(INT32_MAX, r) == ((int32_t)1 << 30),
              "0.5 as a rescale: %ld %ld", (long)r.multiplier, (long)r.shift);
        CHECK(mha_q8_rescale_make(ldexp(1.0, 29) * 1.5, &r) == MHA_OK &&
                  mha_q8_rescale_apply(INT32_MAX, r) == INT32_MAX &&
                  mha_q8_rescale_apply(INT32_MIN, r) == INT32_MIN,
              "a large rescale saturates");
    }
    /* mha_q8_rescale_apply over every shift it accepts, edge values of x (also where x 2^shift leaves int32,
       the edge of the library's 32-bit form) and of the multiplier, and random ones: exactly this model, by
       int64 division (no shifts): the default, TFLite's two roundings, hi = floor((x m + 2^(30 - left)) /
       2^(31 - left)) saturated (left = max(shift, 0)), then hi / 2^(-shift) rounded half away from zero;
       with MHA_Q8_SINGLE_ROUNDING the exact x m 2^(shift - 31) rounded to nearest, ties up, saturated. No
       undefined behaviour (make sanitize runs this under -fsanitize=undefined -fno-sanitize-recover); a
       rescale the calls refuse gives 0 */
    {
        static const int32_t xs[] = {INT32_MIN, INT32_MIN + 1, -65536, -1000, -2, -1, 0, 1, 2, 3, 1000, 65535,
                                     INT32_MAX - 1, INT32_MAX};
        static const int32_t ms[] = {0, (int32_t)1 << 30, ((int32_t)1 << 30) + 1, 1518500250, INT32_MAX - 1,
                                     INT32_MAX};
        mha_q8_rescale r;
        int32_t sh, x;
        size_t xi, mi;
        int exact = 1, bad = 1;
        unsigned long tried = 0;
        uint32_t rnd = 12345u;
        for (sh = -31; sh <= 30; ++sh)
            for (mi = 0; mi < sizeof ms / sizeof ms[0] + 8; ++mi)
                for (xi = 0; xi < sizeof xs / sizeof xs[0] + 6 + 16; ++xi) {
                    const int left = sh > 0 ? sh : 0, right = sh > 0 ? 0 : -sh;
                    const int64_t edge = (int64_t)1 << (31 - left); /* x 2^left fits int32 for -edge <= x < edge */
                    static const int32_t near[6] = {-1, 0, 1, -1, 0, 1};
                    int64_t prod, den, qt, rm, want;
                    int e;
                    int32_t got;
                    rnd = rnd * 1664525u + 1013904223u;
                    x = xi < sizeof xs / sizeof xs[0] ? xs[xi]
                        : xi < sizeof xs / sizeof xs[0] + 6
                            ? (int32_t)((xi - sizeof xs / sizeof xs[0] < 3 ? edge : -edge) +
                                        near[xi - sizeof xs / sizeof xs[0]])
                            : (int32_t)(rnd >> (1 + rnd % 31)) * (rnd & 1 ? 1 : -1);
                    if (x == INT32_MIN + 0 && xi >= sizeof xs / sizeof xs[0]) x = INT32_MIN; /* edge 2^31 clipped */
                    r.multiplier = mi < sizeof ms / sizeof ms[0] ? ms[mi]
                                                                : (int32_t)(((int32_t)1 << 30) | (rnd * 2654435761u >> 2));
                    r.shift = sh;
                    prod = (int64_t)x * (int64_t)r.multiplier;
                    if (Q8_SINGLE) { /* x m / 2^(31 - sh), 1 <= 31 - sh <= 62 */
                        e = 31 - sh;
                        den = (int64_t)1 << e;
                        qt = prod / den, rm = prod % den;
                        if (rm < 0) qt -= 1, rm += den;              /* floor */
                        if (rm > den / 2 || (rm == den / 2 && den > 1)) ++qt; /* nearest, ties up */
                        want = qt > INT32_MAX ? INT32_MAX : qt < INT32_MIN ? INT32_MIN : qt;
                    } else {
                        den = (int64_t)1 << (31 - left);
                        qt = prod + den / 2; /* |x m| < 2^62: no overflow */
                        rm = qt % den;
                        qt = qt / den - (rm < 0 ? 1 : 0); /* floor */
                        qt = qt > INT32_MAX ? INT32_MAX : qt < INT32_MIN ? INT32_MIN : qt;
                        den = (int64_t)1 << right;
                        want = qt >= 0 ? (qt + den / 2) / den : -((-qt + den / 2) / den); /* half away from 0 */
                    }
                    got = mha_q8_rescale_apply(x, r);
                    if ((int64_t)got != want && exact) {
                        printf("  rescale x %ld m %ld shift %ld: %ld, model %ld\n", (long)x, (long)r.multiplier,
                               (long)sh, (long)got, (long)want);
                        exact = 0;
                    }
                    ++tried;
                }
        CHECK(exact, "mha_q8_rescale_apply exactly the model of its rounding, %lu cases", tried);
        /* Helium's four rescales at once (mha__q8_vrescale, where the object has it) equal these one by one:
           every shift, lanes mixing shifts and x where x 2^shift leaves int32 (the lanes' own path), ties */
        {
            int32_t xv[4], yv[4];
            mha_q8_rescale r4[4];
            int lanes = 0, alike = 1, l;
            unsigned long groups = 0;
            for (sh = -31; sh <= 30; ++sh)
                for (xi = 0; xi < 64; ++xi) {
                    for (l = 0; l < 4; ++l) {
                        rnd = rnd * 1664525u + 1013904223u;
                        r4[l].shift = l == 0 || (rnd & 3) ? sh : (int32_t)(rnd >> 8) % 31 - 15;
                        r4[l].multiplier = (rnd & 12) == 0 ? 0 : (int32_t)(((int32_t)1 << 30) | (rnd * 2654435761u >> 2));
                        xv[l] = xi < 14 ? xs[(xi + (size_t)l) % 14]
                                : xi < 20 ? (int32_t)(((int64_t)1 << (31 - (r4[l].shift > 0 ? r4[l].shift : 0))) -
                                                      ((int64_t)xi - 17))
                                : xi < 40 ? (int32_t)((rnd >> 4) & 0xffffu) * (rnd & 1 ? 1 : -1) *
                                                (int32_t)(1u << (rnd >> 28)) /* ties more often: few low bits set */
                                          : (int32_t)(rnd >> (1 + rnd % 31)) * (rnd & 2 ? 1 : -1);
                    }
                    lanes = hook_q8_vrescale(xv, r4, yv);
                    for (l = 0; l < 4; ++l)
                        if (yv[l] != mha_q8_rescale_apply(xv[l], r4[l]) && alike) {
                            printf("  four at once: x %ld m %ld shift %ld: %ld, one by one %ld\n", (long)xv[l],
                                   (long)r4[l].multiplier, (long)r4[l].shift, (long)yv[l],
                                   (long)mha_q8_rescale_apply(xv[l], r4[l]));
                            alike = 0;
                        }
                    ++groups;
                }
            CHECK(alike, "the rescales four at once (%s) equal mha_q8_rescale_apply, %lu groups", lanes ? "Helium" :
                  "no Helium in this build: one by one", groups);
        }
        r.multiplier = 0;
        for (sh = 0; sh < 4; ++sh) {
            static const int32_t out_of_range[4] = {100, -1000, INT32_MIN, 31};
            r.shift = out_of_range[sh];
            bad &= mha_q8_rescale_apply(INT32_MIN, r) == 0 && mha_q8_rescale_apply(12345, r) == 0;
        }
        r.multiplier = 5;
        r.shift = 0;
        bad &= mha_q8_rescale_apply(INT32_MAX, r) == 0;
        r.multiplier = -((int32_t)1 << 30);
        bad &= mha_q8_rescale_apply(INT32_MAX, r) == 0;
        CHECK(bad, "mha_q8_rescale_apply of a rescale the calls refuse (shift out of range, multiplier below 2^30 "
                   "or negative): 0");
    }
    /* mha_q8_prepare's bad input */
    {
        mha_shape s2 = shape_of(2, 1, 4, 4, 4, 2, 2, 3, 0);
        float one[8] = {0.1f, 0.1f, 0.1f, 0.1f, 0.1f, 0.1f, 0.1f, 0.1f};
        mha_q8_scales sc;
        mha_q8_rescale rows[16];
        mha_q8_weights w2 = MHA_INIT;
        mha_q8_params p2 = MHA_INIT;
        sc.in_q = sc.in_k = sc.in_v = sc.q = sc.k = sc.v = sc.heads = sc.out = 0.05f;
        sc.w_q = sc.w_k = sc.w_v = sc.w_o = one;
        CHECK(mha_q8_rows(&s2) == 4 + 2 + 2 + 3, "mha_q8_rows %u", (unsigned)mha_q8_rows(&s2));
        CHECK(mha_q8_prepare(&s2, &sc, &w2, &p2, rows, 10) == MHA_ERR_WORKSPACE && !w2.r_q,
              "mha_q8_prepare with too few rows");
        CHECK(mha_q8_prepare(&s2, NULL, &w2, &p2, rows, 16) == MHA_ERR_NULL, "mha_q8_prepare NULL");
        one[1] = 0.0f;
        CHECK(mha_q8_prepare(&s2, &sc, &w2, &p2, rows, 16) == MHA_ERR_SHAPE && !w2.r_q,
              "mha_q8_prepare with a zero weight scale");
        one[1] = 0.1f;
        sc.out = -1.0f;
        CHECK(mha_q8_prepare(&s2, &sc, &w2, &p2, rows, 16) == MHA_ERR_SHAPE, "mha_q8_prepare with a negative scale");
        sc.out = 0.05f;
        sc.q = sc.k = 1e6f; /* the scores' factor s_q s_k scale log2(e) 2^16 is past 2^30 */
        CHECK(mha_q8_prepare(&s2, &sc, &w2, &p2, rows, 16) == MHA_ERR_SHAPE, "mha_q8_prepare with a huge factor");
        sc.q = sc.k = 0.05f;
        s2.p_o = 0;
        CHECK(mha_q8_prepare(&s2, &sc, &w2, &p2, rows, 16) == MHA_ERR_SHAPE && mha_q8_rows(&s2) == 0 &&
                  mha_q8_rows(NULL) == 0,
              "mha_q8_prepare with p_o 0");
        s2.p_o = 3;
        CHECK(mha_q8_prepare(&s2, &sc, &w2, &p2, rows, 16) == MHA_OK && w2.r_o == rows + 8, "mha_q8_prepare");
    }
#undef Q8_EXPECT
#undef Q8_CALL
}

#ifndef __AVR__ /* no files there */
static int32_t *q8_load(const char *path) {
    FILE *f = fopen(path, "rb");
    long size;
    int32_t *words;
    unsigned char *bytes;
    long i;
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    size = ftell(f);
    fseek(f, 0, SEEK_SET);
    bytes = (unsigned char *)malloc((size_t)size + 4);
    words = (int32_t *)malloc((size_t)size + 4);
    if (fread(bytes, 1, (size_t)size, f) != (size_t)size) size = 0;
    fclose(f);
    for (i = 0; i + 3 < size; i += 4) /* little-endian words, on any host */
        words[i / 4] = (int32_t)((uint32_t)bytes[i] | (uint32_t)bytes[i + 1] << 8 | (uint32_t)bytes[i + 2] << 16 |
                                 (uint32_t)bytes[i + 3] << 24);
    words[size / 4] = 0;
    free(bytes);
    return words;
}
#endif

#ifdef __AVR__ /* output through USART0 (simavr prints it); a sleep with interrupts off ends the run */
#include <avr/interrupt.h>
#include <avr/io.h>
#include <avr/sleep.h>
static int q8_uart_put(char ch, FILE *f) {
    (void)f;
    while (!(UCSR0A & (1 << UDRE0))) {}
    UDR0 = (uint8_t)ch;
    return 0;
}
static FILE q8_uart = FDEV_SETUP_STREAM(q8_uart_put, NULL, _FDEV_SETUP_WRITE);
#endif

int main(int argc, char **argv) {
#ifdef __AVR__
    UCSR0B = (1 << TXEN0);
    stdout = &q8_uart;
#endif
    q8_exp_check();
    q8_hostile();
    q8_run_cases(q8_cases_small, 1);
#ifndef __AVR__
    if (argc > 1) {
        int32_t *words = q8_load(argv[1]);
        CHECK(words != NULL, "cannot read %s (make test writes it with tests/q8_ref.py)", argv[1]);
        if (words) q8_run_cases(words, 1);
        free(words);
    }
#else
    (void)argc;
    (void)argv;
#endif
    printf("q8: %ld of %ld cases equal the numpy reference bit for bit (%s rounding)\n", q8_exact, q8_cases,
           Q8_SINGLE ? "single" : "double");
    printf("q8: %ld decodings (10 per case with keys) equal mha_forward_q8 bit for bit\n", q8_decoded);
    if (q8_calibrated) {
        long total = q8_lsb[0] + q8_lsb[1] + q8_lsb[2] + q8_lsb[3];
        printf("q8: against fp32 on %ld calibrated cases, %ld outputs: |error| 0 LSB %.2f %%, 1 LSB %.2f %%, "
               "2 LSB %.2f %%, 3+ LSB %.2f %%\n",
               q8_calibrated, total, 100.0 * q8_lsb[0] / total, 100.0 * q8_lsb[1] / total, 100.0 * q8_lsb[2] / total,
               100.0 * q8_lsb[3] / total);
        CHECK(q8_lsb[0] + q8_lsb[1] >= 0.95 * total, "q8: %.2f %% within 1 LSB of fp32 (measured 95.6-95.9 %%)",
              100.0 * (q8_lsb[0] + q8_lsb[1]) / total);
    }
#ifdef __AVR__
    tu_summary();
    cli();
    sleep_mode();
    return 0;
#else
    return tu_summary();
#endif
}
