/* The 16x8 path (mha_forward_q16):
   - bit for bit against tests/q16_ref.py, the same arithmetic written in
     numpy: every case of the file given as argv[1] (make test writes
     1000), and the 12 of tests/ref_q16_small.h (Cortex-M: those alone; AVR:
     the 3 tiny ones of tests/ref_q16_tiny.h);
   - mha_q16_prepare from the cases' float scales gives their rescales
     (where double has 53 bits: not on AVR);
   - against mha_forward_reference (fp32) on the dequantised weights and
     inputs of the calibrated cases: the output error in LSBs of int16, its
     distribution printed; on the file's cases at least 80 % within 1 LSB
     and none 256 or more apart (an int8 LSB);
   - a workspace at every alignment gives the same bits;
   - 16x8 decoding (mha_decode_q16, mha_cache_append_q16) against
     mha_forward_q16 bit for bit on every case: token by token, in chunks,
     with a window as a ring (and kept first positions), and as
     cross-attention;
   - bad input: each status, nothing written. */
#include "test_util.h"
#ifdef __AVR__ /* the built-in cases stay in flash (__flash: GNU C), not copied to the 8 KiB of RAM */
#define Q16_FLASH __flash
#else
#define Q16_FLASH
#endif
#ifdef Q16_HEADER /* AVR: tests/ref_q16_tiny.h */
#include Q16_HEADER
#else
#include "ref_q16_small.h"
#endif
#ifdef __AVR__
#define Q16_WS 1024 /* the hostile checks' workspace */
#else
#define Q16_WS 4096
#endif

#define Q16_MAGIC 0x3631384D48LL

/* a cursor over the file's int64 words */
static const Q16_FLASH int64_t *q16_w;
static int64_t q16_take(void) { return *q16_w++; }
static float q16_float(void) {
    int32_t b = (int32_t)q16_take();
    float f;
    memcpy(&f, &b, sizeof f);
    return f;
}
static void *q16_alloc(size_t count, size_t size) { return malloc(count ? count * size : 1); }

/* one case, as q16_ref.py's case_words writes it */
typedef struct q16_case {
    mha_shape s;
    int32_t batch, n, m, calibrated, has_bias;
    mha_mask mask;
    int has_mask;
    mha_q8_params p;
    float sc[8]; /* in_q, in_k, in_v, q, k, v, heads, out */
    mha_q16_weights w;
    int8_t *wt[4];
    float *sw[4];
    int64_t *bias[4];
    mha_q8_rescale *r[4];
    int16_t *q, *k, *v, *expect;
    int32_t *vl;
    uint8_t *keep;
} q16_case;

static void q16_free(q16_case *c) {
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
    free(c->expect);
    free(c->vl);
    free(c->keep);
}

static void q16_dims(const q16_case *c, size_t rows[4], size_t cols[4]) {
    rows[0] = (size_t)(c->s.heads * c->s.p_q);
    rows[1] = (size_t)(c->s.kv_heads * c->s.p_k);
    rows[2] = (size_t)(c->s.kv_heads * c->s.p_v);
    rows[3] = (size_t)c->s.p_o;
    cols[0] = (size_t)c->s.d_q;
    cols[1] = (size_t)c->s.d_k;
    cols[2] = (size_t)c->s.d_v;
    cols[3] = (size_t)(c->s.heads * c->s.p_v);
}

static int16_t *q16_shorts(size_t count) {
    int16_t *p = (int16_t *)q16_alloc(count, sizeof *p);
    size_t i;
    for (i = 0; i < count; ++i) p[i] = (int16_t)q16_take();
    return p;
}

/* Reads the case at q16_w; 0 at the list's end. */
static int q16_read(q16_case *c) {
    int64_t vlq, keep;
    size_t rows[4], cols[4], j, nq, nk, nv, no;
    int i;
    if (q16_take() != Q16_MAGIC) return 0;
    memset(c, 0, sizeof *c);
    c->s.heads = (int32_t)q16_take();
    c->s.kv_heads = (int32_t)q16_take();
    c->s.d_q = (int32_t)q16_take();
    c->s.d_k = (int32_t)q16_take();
    c->s.d_v = (int32_t)q16_take();
    c->s.p_q = c->s.p_k = (int32_t)q16_take();
    c->s.p_v = (int32_t)q16_take();
    c->s.p_o = (int32_t)q16_take();
    c->batch = (int32_t)q16_take();
    c->n = (int32_t)q16_take();
    c->m = (int32_t)q16_take();
    c->s.scale = q16_float();
    c->mask.causal = (int32_t)q16_take();
    c->mask.causal_offset = (int32_t)q16_take();
    vlq = q16_take();
    keep = q16_take();
    c->has_bias = (int32_t)q16_take();
    c->calibrated = (int32_t)q16_take();
    for (i = 0; i < 8; ++i) c->sc[i] = q16_float();
    c->p.score.multiplier = (int32_t)q16_take();
    c->p.score.shift = (int32_t)q16_take();
    c->p.head.multiplier = (int32_t)q16_take();
    c->p.head.shift = (int32_t)q16_take();
    q16_dims(c, rows, cols);
    for (i = 0; i < 4; ++i) {
        c->wt[i] = (int8_t *)q16_alloc(rows[i] * cols[i], 1);
        for (j = 0; j < rows[i] * cols[i]; ++j) c->wt[i][j] = (int8_t)q16_take();
        c->sw[i] = (float *)q16_alloc(rows[i], sizeof(float));
        for (j = 0; j < rows[i]; ++j) c->sw[i][j] = q16_float();
        c->bias[i] = (int64_t *)q16_alloc(rows[i], sizeof(int64_t));
        for (j = 0; j < rows[i]; ++j) c->bias[i][j] = q16_take();
        c->r[i] = (mha_q8_rescale *)q16_alloc(rows[i], sizeof(mha_q8_rescale));
        for (j = 0; j < rows[i]; ++j) c->r[i][j].multiplier = (int32_t)q16_take();
        for (j = 0; j < rows[i]; ++j) c->r[i][j].shift = (int32_t)q16_take();
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
    c->q = q16_shorts(nq);
    c->k = q16_shorts(nk);
    c->v = q16_shorts(nv);
    if (vlq >= 0) {
        size_t count = (size_t)(c->batch * (vlq ? c->n : 1));
        c->mask.valid_lens_per_query = (int32_t)vlq;
        c->vl = (int32_t *)q16_alloc(count, sizeof(int32_t));
        for (j = 0; j < count; ++j) c->vl[j] = (int32_t)q16_take();
        c->mask.valid_lens = c->vl;
    }
    if (keep) {
        size_t count = (size_t)(c->batch * c->n * c->m);
        c->keep = (uint8_t *)q16_alloc(count, 1);
        for (j = 0; j < count; ++j) c->keep[j] = (uint8_t)q16_take();
        c->mask.keep = c->keep;
    }
    c->has_mask = c->mask.causal || vlq >= 0 || keep;
    c->expect = q16_shorts(no);
    return 1;
}

/* The error histogram against fp32, in output LSBs: 0, 1, 2, 3+ */
static long q16_lsb[4], q16_calibrated, q16_worst;

/* fp32 forward on the dequantised case, its output quantised as out is
   (scale s_out, zero point 0, rounded half away from zero, clamped) */
static void q16_against_fp32(const q16_case *c, const int16_t *got) {
    const float in_sc[4] = {c->sc[0], c->sc[1], c->sc[2], c->sc[6]};
    size_t rows[4], cols[4], i, j, nq, nk, nv, no;
    float *wf[4], *bf[4], *qf, *kf, *vf, *of;
    mha_weights w = MHA_INIT;
    size_t bytes = mha_reference_workspace_size(&c->s, c->batch, c->n, c->m);
    void *ws = malloc(bytes);
    mha_status st;
    q16_dims(c, rows, cols);
    for (i = 0; i < 4; ++i) {
        wf[i] = (float *)q16_alloc(rows[i] * cols[i], sizeof(float));
        bf[i] = (float *)q16_alloc(rows[i], sizeof(float));
        for (j = 0; j < rows[i] * cols[i]; ++j) wf[i][j] = (float)c->wt[i][j] * c->sw[i][j / cols[i]];
        for (j = 0; j < rows[i]; ++j)
            bf[i][j] = c->has_bias ? (float)((double)c->bias[i][j] * (double)in_sc[i] * (double)c->sw[i][j]) : 0.0f;
    }
    nq = (size_t)(c->batch * c->n * c->s.d_q);
    nk = (size_t)(c->batch * c->m * c->s.d_k);
    nv = (size_t)(c->batch * c->m * c->s.d_v);
    no = (size_t)(c->batch * c->n * c->s.p_o);
    qf = (float *)q16_alloc(nq, sizeof(float));
    kf = (float *)q16_alloc(nk, sizeof(float));
    vf = (float *)q16_alloc(nv, sizeof(float));
    of = (float *)q16_alloc(no, sizeof(float));
    for (j = 0; j < nq; ++j) qf[j] = (float)c->q[j] * c->sc[0];
    for (j = 0; j < nk; ++j) kf[j] = (float)c->k[j] * c->sc[1];
    for (j = 0; j < nv; ++j) vf[j] = (float)c->v[j] * c->sc[2];
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
    CHECK(st == MHA_OK, "fp32 forward of a q16 case: %s", mha_status_string(st));
    for (j = 0; st == MHA_OK && j < no; ++j) {
        double x = (double)of[j] / (double)c->sc[7];
        long d;
        x = x < 0 ? -floor(-x + 0.5) : floor(x + 0.5);
        d = labs((long)got[j] - (long)(x < -32768 ? -32768 : x > 32767 ? 32767 : x));
        q16_worst = d > q16_worst ? d : q16_worst;
        ++q16_lsb[d > 3 ? 3 : d];
    }
    ++q16_calibrated;
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

/* mha_q16_prepare from the case's float scales gives its rescales, and zero points of 0 */
static void q16_prepare_check(const q16_case *c) {
    mha_q8_scales sc;
    mha_q16_weights w = MHA_INIT;
    mha_q8_params p;
    size_t count = mha_q8_rows(&c->s), i, j, rows[4], cols[4];
    mha_q8_rescale *r = (mha_q8_rescale *)q16_alloc(count, sizeof *r);
    const mha_q8_rescale *got[4];
    mha_status st;
    int same = 1;
    memset(&p, 0x55, sizeof p);
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
    st = mha_q16_prepare(&c->s, &sc, &w, &p, r, count);
    CHECK(st == MHA_OK, "mha_q16_prepare: %s", mha_status_string(st));
    if (st == MHA_OK) {
        q16_dims(c, rows, cols);
        got[0] = w.r_q;
        got[1] = w.r_k;
        got[2] = w.r_v;
        got[3] = w.r_o;
        for (i = 0; i < 4; ++i)
            for (j = 0; j < rows[i]; ++j)
                same &= got[i][j].multiplier == c->r[i][j].multiplier && got[i][j].shift == c->r[i][j].shift;
        same &= p.score.multiplier == c->p.score.multiplier && p.score.shift == c->p.score.shift &&
                p.head.multiplier == c->p.head.multiplier && p.head.shift == c->p.head.shift;
        same &= !p.zero_in_q && !p.zero_in_k && !p.zero_in_v && !p.zero_q && !p.zero_k && !p.zero_v &&
                !p.zero_heads && !p.zero_out;
        CHECK(same, "mha_q16_prepare's rescales differ from q16_ref.py's (score %d %d / %d %d)",
              (int)p.score.multiplier, (int)p.score.shift, (int)c->p.score.multiplier, (int)c->p.score.shift);
    }
    free(r);
}

static long q16_cases, q16_exact;
static long q16_decoded;

/* Decoding in 16x8 against mha_forward_q16, bit for bit, with the case's
   weights and T = m tokens per sequence (its keys and values, and queries
   made here): as tests/test_q8.c checks int8 decoding (token by token, in
   chunks of 2 and 3, windows as rings with and without kept first
   positions, cross-attention over every key and over a ring). */
static void q16_decode_check(const q16_case *c) {
    const int32_t B = c->batch, T = c->m, dq = c->s.d_q, po = c->s.p_o, dk = c->s.d_k, dv = c->s.d_v;
    const int32_t kvh = c->s.kv_heads ? c->s.kv_heads : c->s.heads;
    const size_t E = sizeof(int16_t);
    int16_t *q = (int16_t *)q16_alloc((size_t)(B * T * dq), E), *fwd = (int16_t *)q16_alloc((size_t)(B * T * po), E);
    int16_t *dec = (int16_t *)q16_alloc((size_t)(B * T * po), E);
    uint8_t *keep = (uint8_t *)q16_alloc((size_t)(B * T * T), 1);
    int32_t len[4], i, j, b, mode, ok = 1;
    size_t fb = mha_q16_workspace_size(&c->s, B, T, T), cap_max = (size_t)T + 8;
    unsigned char *fws = (unsigned char *)malloc(fb + 1);
    unsigned char *dws = (unsigned char *)malloc(mha_q16_decode_workspace_size(&c->s, B, 3, (int32_t)cap_max) + 2);
    int16_t *store = (int16_t *)malloc(mha_cache_bytes_typed(&c->s, B, (int32_t)cap_max, MHA_I16) + 1);
    int16_t *rows = (int16_t *)q16_alloc((size_t)(B * 3 * (dq + dk + dv + po)), E); /* a chunk's */
    mha_mask mask = MHA_INIT;
    if (T == 0 || B > 4) goto done;
    for (i = 0; i < B * T * dq; ++i) q[i] = (int16_t)((int32_t)(tu_next() % 65536u) - 32768);
    for (mode = 0; mode < 10; ++mode) { /* as q8_decode_check's modes */
        const int32_t chunk = mode < 3 ? mode + 1 : mode == 3 || mode == 7 ? 1 : mode == 4 || mode == 8 ? 2 : T;
        const int32_t win = mode == 3 || mode == 4 || mode == 7 ? 2 : mode == 8 ? 3 : mode >= 6 ? (T + 1) / 2 : 0;
        const int32_t kept = mode == 7 ? 1 : mode == 8 ? 2 : mode == 9 && win > 1 ? 1 : 0;
        const int cross = mode == 5 || mode == 6 || mode == 9;
        mha_cache cache;
        mha_status st;
        int32_t cap = mode == 6 ? win : mode == 9 ? kept + win : win ? kept + win + chunk - 1 : T;
        memset(&mask, 0, sizeof mask);
        if (mode == 6 || mode == 9) { /* the ring holds positions T - (cap - kept) .. T - 1, and < kept */
            for (i = 0; i < B * T * T; ++i) keep[i] = (uint8_t)(i % T >= T - (cap - kept) || i % T < kept);
            mask.keep = keep;
        } else if (win) {
            for (b = 0; b < B; ++b)
                for (i = 0; i < T; ++i)
                    for (j = 0; j < T; ++j) keep[(b * T + i) * T + j] = (uint8_t)(j <= i && (j > i - win || j < kept));
            mask.keep = keep;
        } else if (mode != 5) {
            mask.causal = 1;
        }
        st = mha_forward_q16(&c->s, &c->w, &c->p, B, T, T, q, c->k, c->v, mode == 5 ? NULL : &mask, fwd, fws, fb);
        ok &= st == MHA_OK;
        memset(&cache, 0, sizeof cache);
        cache.k = store;
        cache.v = store + (size_t)(B * kvh * cap * c->s.p_k);
        cache.length = len;
        cache.capacity = cap;
        cache.window = win;
        cache.keep_first = kept;
        cache.type = MHA_I16;
        for (b = 0; b < B; ++b) len[b] = 0;
        if (cross) { /* every key appended (one at a time into the ring), then all T queries at once */
            size_t db = mha_q16_decode_workspace_size(&c->s, B, T, cap);
            int16_t *ks = rows, *vs = rows + B * dk;
            if (mode == 5) st = mha_cache_append_q16(&c->s, &c->w, &c->p, &cache, B, T, c->k, c->v, dws, db);
            for (i = 0; mode != 5 && i < T; ++i) {
                for (b = 0; b < B; ++b) {
                    memcpy(ks + b * dk, c->k + (b * T + i) * dk, (size_t)dk * E);
                    memcpy(vs + b * dv, c->v + (b * T + i) * dv, (size_t)dv * E);
                }
                st = mha_cache_append_q16(&c->s, &c->w, &c->p, &cache, B, 1, ks, vs, dws, db);
                ok &= st == MHA_OK;
            }
            ok &= st == MHA_OK && len[0] == T;
            st = mha_decode_q16(&c->s, &c->w, &c->p, &cache, B, T, q, NULL, NULL, dec, dws, db);
            ok &= st == MHA_OK && len[0] == T;
        } else {
            for (i = 0; i < T; i += chunk) { /* the inputs' rows i .. i + n - 1 of every sequence */
                const int32_t n = T - i < chunk ? T - i : chunk;
                int16_t *qs = rows, *ks = qs + B * n * dq, *vs = ks + B * n * dk, *os = vs + B * n * dv;
                size_t db = mha_q16_decode_workspace_size(&c->s, B, n, cap);
                for (b = 0; b < B; ++b)
                    for (j = 0; j < n; ++j) {
                        memcpy(qs + (b * n + j) * dq, q + (b * T + i + j) * dq, (size_t)dq * E);
                        memcpy(ks + (b * n + j) * dk, c->k + (b * T + i + j) * dk, (size_t)dk * E);
                        memcpy(vs + (b * n + j) * dv, c->v + (b * T + i + j) * dv, (size_t)dv * E);
                    }
                st = mha_decode_q16(&c->s, &c->w, &c->p, &cache, B, n, qs, ks, vs, os, dws + 1, db);
                ok &= st == MHA_OK && len[0] == i + n;
                for (b = 0; b < B; ++b) memcpy(dec + (b * T + i) * po, os + b * n * po, (size_t)(n * po) * E);
            }
        }
        ok &= memcmp(dec, fwd, (size_t)(B * T * po) * E) == 0;
        CHECK(ok, "16x8 decoding (mode %d: chunk %d, window %d, keep_first %d) differs from mha_forward_q16", (int)mode,
              (int)chunk, (int)win, (int)kept);
        q16_decoded += ok;
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


static void q16_run_cases(const Q16_FLASH int64_t *words) {
    q16_case c;
    q16_w = words;
    while (q16_read(&c)) {
        const size_t no = (size_t)(c.batch * c.n * c.s.p_o);
        const size_t bytes = mha_q16_workspace_size(&c.s, c.batch, c.n, c.m);
        unsigned char *ws = (unsigned char *)malloc(bytes + 8);
        int16_t *out = (int16_t *)q16_alloc(no, sizeof(int16_t));
        mha_status st;
        size_t j, off;
        int same = 1;
        ++q16_cases;
        CHECK(bytes > 0, "q16 case %ld: workspace size 0", q16_cases);
        for (off = 0; off < 8; off += (q16_cases % 50 == 0 ? 1 : 8)) { /* every alignment, now and then */
            for (j = 0; j < no; ++j) out[j] = (int16_t)0x5555;
            st = mha_forward_q16(&c.s, &c.w, &c.p, c.batch, c.n, c.m, c.q, c.k, c.v, c.has_mask ? &c.mask : NULL,
                                 out, ws + off, bytes);
            CHECK(st == MHA_OK, "q16 case %ld: %s", q16_cases, mha_status_string(st));
            for (j = 0; j < no; ++j)
                if (out[j] != c.expect[j]) {
                    if (same)
                        CHECK(0, "q16 case %ld (offset %u): out[%u] = %d, numpy %d", q16_cases, (unsigned)off,
                              (unsigned)j, out[j], c.expect[j]);
                    same = 0;
                }
        }
        q16_exact += same;
        if (sizeof(double) == 8) q16_prepare_check(&c); /* (AVR's double is a float) */
        q16_decode_check(&c);
        if (c.calibrated && c.n > 0) q16_against_fp32(&c, out);
        free(out);
        free(ws);
        q16_free(&c);
    }
}

/* Bad input: each status, out untouched. */
static void q16_hostile(void) {
    mha_shape s = shape_of(4, 2, 8, 8, 8, 4, 4, 6, 0);
    int8_t w8[128]; /* the largest: W_q [16][8] */
    int64_t b64[16];
    mha_q8_rescale r[64], good = {(int32_t)1 << 30, -3};
    mha_q16_weights w = MHA_INIT;
    mha_q8_params p;
    int16_t q[2 * 3 * 8], kv[2 * 5 * 8], out[2 * 3 * 6];
    static unsigned char ws[Q16_WS];
    const size_t bytes = mha_q16_workspace_size(&s, 2, 3, 5);
    mha_mask mask = MHA_INIT;
    int32_t vl[2] = {5, 6};
    float bias[1] = {0.0f};
    size_t i;
    memset(&p, 0, sizeof p);
    for (i = 0; i < 128; ++i) w8[i] = (int8_t)(i * 7 % 255 - 127);
    for (i = 0; i < 64; ++i) r[i] = good;
    for (i = 0; i < 16; ++i) b64[i] = (int64_t)i * 1000 - 8000;
    for (i = 0; i < sizeof q / sizeof q[0]; ++i) q[i] = (int16_t)(i * 997 % 65536 - 32768);
    for (i = 0; i < sizeof kv / sizeof kv[0]; ++i) kv[i] = (int16_t)(i * 1231 % 65536 - 32768);
    w.w_q = w.w_k = w.w_v = w.w_o = w8;
    w.b_q = w.b_k = w.b_v = w.b_o = b64;
    w.r_q = w.r_k = w.r_v = w.r_o = r;
    p.score = p.head = good;
    CHECK(bytes > 0 && bytes <= sizeof ws, "mha_q16_workspace_size %u", (unsigned)bytes);
#define Q16_EXPECT(want, what)                                                                                      \
    do {                                                                                                            \
        mha_status st_;                                                                                             \
        for (i = 0; i < sizeof out / sizeof out[0]; ++i) out[i] = 0x1234;                                          \
        st_ = mha_forward_q16(&s, &w, &p, 2, 3, 5, q, kv, kv, &mask, out, ws, bytes);                               \
        for (i = 0; i < sizeof out / sizeof out[0] && out[i] == 0x1234; ++i) {}                                     \
        CHECK(st_ == (want) && (want == MHA_OK || i == sizeof out / sizeof out[0]), "q16 %s: %s, out %s", what,     \
              mha_status_string(st_), i == sizeof out / sizeof out[0] ? "untouched" : "written");                   \
    } while (0)
    Q16_EXPECT(MHA_OK, "the good call");
    p.zero_out = 1;
    Q16_EXPECT(MHA_ERR_SHAPE, "a zero point of 1");
    p.zero_out = 0;
    p.zero_in_k = -1;
    Q16_EXPECT(MHA_ERR_SHAPE, "a zero point of -1");
    p.zero_in_k = 0;
    p.head.shift = 8;
    Q16_EXPECT(MHA_ERR_SHAPE, "a head rescale with shift 8");
    p.head.shift = 7;
    Q16_EXPECT(MHA_OK, "a head rescale with shift 7");
    p.head = good;
    r[5].multiplier = 12345;
    Q16_EXPECT(MHA_ERR_SHAPE, "a row's multiplier below 2^30");
    r[5] = good;
    w.r_v = NULL;
    Q16_EXPECT(MHA_ERR_NULL, "r_v NULL");
    w.r_v = r;
    s.p_k = 5;
    Q16_EXPECT(MHA_ERR_SHAPE, "p_k != p_q");
    s.p_k = 4;
    s.rope_dim = 2;
    Q16_EXPECT(MHA_ERR_SHAPE, "RoPE");
    s.rope_dim = 0;
    mask.valid_lens = vl;
    Q16_EXPECT(MHA_ERR_MASK, "a valid length past m");
    vl[1] = 2;
    Q16_EXPECT(MHA_OK, "valid lengths");
    mask.valid_lens = NULL;
    mask.bias = bias;
    Q16_EXPECT(MHA_ERR_SHAPE, "a float bias mask");
    mask.bias = NULL;
    {
        mha_status st;
        for (i = 0; i < sizeof out / sizeof out[0]; ++i) out[i] = 0x1234;
        st = mha_forward_q16(&s, &w, &p, 2, 3, 5, q, kv, kv, NULL, out, ws, bytes - 1);
        CHECK(st == MHA_ERR_WORKSPACE && out[0] == 0x1234, "q16 a short workspace: %s", mha_status_string(st));
        st = mha_forward_q16(&s, &w, &p, 2, 3, 65536, q, kv, kv, NULL, out, ws, bytes);
        CHECK(st == MHA_ERR_SHAPE && out[0] == 0x1234, "q16 m = 65536: %s", mha_status_string(st));
        CHECK(mha_q16_workspace_size(&s, 1, 1, 65536) == 0 &&
                  (SIZE_MAX / 16 < 65535 || mha_q16_workspace_size(&s, 1, 1, 65535) > 0), /* (16-bit size_t) */
              "mha_q16_workspace_size's limit of m");
        st = mha_forward_q16(&s, NULL, &p, 2, 3, 5, q, kv, kv, NULL, out, ws, bytes);
        CHECK(st == MHA_ERR_NULL, "q16 w NULL: %s", mha_status_string(st));
        st = mha_forward_q16(&s, &w, &p, 2, 3, 5, q, kv, kv, NULL, NULL, ws, bytes);
        CHECK(st == MHA_ERR_NULL, "q16 out NULL: %s", mha_status_string(st));
        st = mha_forward_q16(&s, &w, &p, 0, 3, 5, q, kv, kv, NULL, out, ws, bytes);
        CHECK(st == MHA_OK && out[0] == 0x1234, "q16 batch 0: %s", mha_status_string(st));
    }
    { /* decoding's statuses: nothing written, the cache and its lengths included */
        int16_t store[2 * 2 * 8 * 4 + 2 * 2 * 8 * 4], before[sizeof store / sizeof store[0]];
        int32_t len[2] = {3, 1}, len0[2] = {3, 1};
        mha_cache cache;
        const size_t db = mha_q16_decode_workspace_size(&s, 2, 1, 8);
        mha_status st;
#define Q16_DEC(want, what, call)                                                                                  \
    do {                                                                                                           \
        for (i = 0; i < sizeof store / sizeof store[0]; ++i) store[i] = before[i] = (int16_t)(i * 37);            \
        for (i = 0; i < sizeof out / sizeof out[0]; ++i) out[i] = 0x1234;                                         \
        len[0] = len0[0];                                                                                          \
        len[1] = len0[1];                                                                                          \
        st = call;                                                                                                 \
        CHECK(st == (want) && (want == MHA_OK || (!memcmp(store, before, sizeof store) && out[0] == 0x1234 &&     \
                                                  len[0] == len0[0] && len[1] == len0[1])),                        \
              "q16 decoding, %s: %s", what, mha_status_string(st));                                                \
    } while (0)
        memset(&cache, 0, sizeof cache);
        cache.k = store;
        cache.v = store + 2 * 2 * 8 * 4;
        cache.length = len;
        cache.capacity = 8;
        cache.type = MHA_I16;
        CHECK(db > 0 && db <= sizeof ws && mha_q16_decode_workspace_size(&s, 2, 1, 65536) == 0 &&
                  mha_cache_bytes_typed(&s, 2, 8, MHA_I16) == sizeof store,
              "mha_q16_decode_workspace_size %u, mha_cache_bytes_typed", (unsigned)db);
        Q16_DEC(MHA_OK, "a step", mha_decode_q16(&s, &w, &p, &cache, 2, 1, q, kv, kv, out, ws, db));
        CHECK(len[0] == 4 && len[1] == 2, "q16 decoding: the lengths grew");
        Q16_DEC(MHA_OK, "an append", mha_cache_append_q16(&s, &w, &p, &cache, 2, 1, kv, kv, ws, db));
        cache.type = MHA_I8;
        Q16_DEC(MHA_ERR_SHAPE, "an int8 cache", mha_decode_q16(&s, &w, &p, &cache, 2, 1, q, kv, kv, out, ws, db));
        cache.type = MHA_I16;
        cache.value_type = MHA_F32 + 1;
        Q16_DEC(MHA_ERR_SHAPE, "f16 values", mha_decode_q16(&s, &w, &p, &cache, 2, 1, q, kv, kv, out, ws, db));
        cache.value_type = 0;
        Q16_DEC(MHA_ERR_WORKSPACE, "a short workspace",
                mha_decode_q16(&s, &w, &p, &cache, 2, 1, q, kv, kv, out, ws, db - 1));
        p.zero_v = 2;
        Q16_DEC(MHA_ERR_SHAPE, "a zero point", mha_decode_q16(&s, &w, &p, &cache, 2, 1, q, kv, kv, out, ws, db));
        p.zero_v = 0;
        len0[1] = 9;
        Q16_DEC(MHA_ERR_MASK, "a length past the capacity",
                mha_decode_q16(&s, &w, &p, &cache, 2, 1, q, kv, kv, out, ws, db));
        len0[1] = 8;
        Q16_DEC(MHA_ERR_CAPACITY, "a full cache", mha_decode_q16(&s, &w, &p, &cache, 2, 1, q, kv, kv, out, ws, db));
        len0[1] = 1;
        Q16_DEC(MHA_ERR_NULL, "keys without values",
                mha_decode_q16(&s, &w, &p, &cache, 2, 1, q, kv, NULL, out, ws, db));
        Q16_DEC(MHA_ERR_NULL, "an append without keys",
                mha_cache_append_q16(&s, &w, &p, &cache, 2, 1, NULL, NULL, ws, db));
        cache.capacity = 65536;
        Q16_DEC(MHA_ERR_SHAPE, "a capacity of 65536",
                mha_decode_q16(&s, &w, &p, &cache, 2, 1, q, kv, kv, out, ws, db));
        cache.capacity = 8;
        cache.window = 4;
        cache.keep_first = 4;
        Q16_DEC(MHA_ERR_SHAPE, "keep_first = window", mha_decode_q16(&s, &w, &p, &cache, 2, 1, q, kv, kv, out, ws, db));
        cache.keep_first = 1;
        Q16_DEC(MHA_OK, "a window with a kept position",
                mha_decode_q16(&s, &w, &p, &cache, 2, 1, q, kv, kv, out, ws, db));
#undef Q16_DEC
    }
    { /* saturation: the largest inputs, weights and biases stay defined and clamped */
        mha_status st;
        for (i = 0; i < sizeof q / sizeof q[0]; ++i) q[i] = i % 2 ? 32767 : -32768;
        for (i = 0; i < 128; ++i) w8[i] = i % 3 ? 127 : -128;
        for (i = 0; i < 16; ++i) b64[i] = i % 2 ? INT64_MAX : INT64_MIN;
        for (i = 0; i < 64; ++i) r[i].shift = 7;
        st = mha_forward_q16(&s, &w, &p, 2, 3, 5, q, kv, kv, NULL, out, ws, bytes);
        CHECK(st == MHA_OK, "q16 extremes: %s", mha_status_string(st));
    }
    { /* mha_q16_prepare's statuses */
        mha_q8_scales sc;
        float one[16];
        mha_q16_weights w2 = MHA_INIT;
        mha_q8_params p2;
        for (i = 0; i < 16; ++i) one[i] = 0.01f;
        sc.in_q = sc.in_k = sc.in_v = sc.q = sc.k = sc.v = sc.heads = sc.out = 0.001f;
        sc.w_q = sc.w_k = sc.w_v = sc.w_o = one;
        CHECK(mha_q16_prepare(&s, &sc, &w2, &p2, r, 64) == MHA_OK && w2.r_q == r, "mha_q16_prepare");
        CHECK(mha_q16_prepare(&s, &sc, &w2, &p2, r, 10) == MHA_ERR_WORKSPACE, "mha_q16_prepare with too few rows");
        sc.out = 1e-9f; /* the output's factor 0.001 * 0.01 / 1e-9 = 10^4 >= 2^7 */
        w2.r_q = NULL;
        CHECK(mha_q16_prepare(&s, &sc, &w2, &p2, r, 64) == MHA_ERR_SHAPE && !w2.r_q,
              "mha_q16_prepare with a factor past 2^7");
    }
#undef Q16_EXPECT
}

#ifndef __AVR__ /* no files there */
static int64_t *q16_load(const char *path) {
    FILE *f = fopen(path, "rb");
    long size, i;
    int64_t *words;
    unsigned char *bytes;
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    size = ftell(f);
    fseek(f, 0, SEEK_SET);
    bytes = (unsigned char *)malloc((size_t)size + 8);
    words = (int64_t *)malloc((size_t)size + 8);
    if (fread(bytes, 1, (size_t)size, f) != (size_t)size) size = 0;
    fclose(f);
    for (i = 0; i + 7 < size; i += 8) { /* little-endian words, on any host */
        uint64_t u = 0;
        int k;
        for (k = 7; k >= 0; --k) u = u << 8 | bytes[i + k];
        words[i / 8] = (int64_t)u;
    }
    words[size / 8] = 0;
    free(bytes);
    return words;
}
#endif

#ifdef __AVR__ /* output through USART0 (simavr prints it); a sleep with interrupts off ends the run */
#include <avr/interrupt.h>
#include <avr/io.h>
#include <avr/sleep.h>
static int q16_uart_put(char ch, FILE *f) {
    (void)f;
    while (!(UCSR0A & (1 << UDRE0))) {}
    UDR0 = (uint8_t)ch;
    return 0;
}
static FILE q16_uart = FDEV_SETUP_STREAM(q16_uart_put, NULL, _FDEV_SETUP_WRITE);
#endif

int main(int argc, char **argv) {
    int file = 0;
#ifdef __AVR__
    UCSR0B = (1 << TXEN0);
    stdout = &q16_uart;
#endif
    q16_hostile();
    q16_run_cases(q16_cases_small);
    CHECK(q16_cases == Q16_BUILTIN, "q16: %ld cases built in, not %d", q16_cases, Q16_BUILTIN);
#ifndef __AVR__
    if (argc > 1) {
        int64_t *words = q16_load(argv[1]);
        CHECK(words != NULL, "cannot read %s (make test writes it with tests/q16_ref.py)", argv[1]);
        if (words) q16_run_cases(words);
        free(words);
        CHECK(q16_cases >= 1000 + Q16_BUILTIN, "q16: only %ld cases in %s", q16_cases - Q16_BUILTIN, argv[1]);
        file = 1;
    }
#else
    (void)argc;
    (void)argv;
#endif
    printf("q16: %ld of %ld cases equal the numpy reference bit for bit\n", q16_exact, q16_cases);
    printf("q16: %ld decodings (10 per case with keys) equal mha_forward_q16 bit for bit\n", q16_decoded);
    if (q16_calibrated) {
        long total = q16_lsb[0] + q16_lsb[1] + q16_lsb[2] + q16_lsb[3];
        printf("q16: against fp32 on %ld calibrated cases, %ld outputs: |error| 0 LSB %.2f %%, 1 LSB %.2f %%, "
               "2 LSB %.2f %%, 3+ LSB %.2f %% (worst %ld)\n",
               q16_calibrated, total, 100.0 * q16_lsb[0] / total, 100.0 * q16_lsb[1] / total,
               100.0 * q16_lsb[2] / total, 100.0 * q16_lsb[3] / total, q16_worst);
        /* the goal was 99 %: int16 tensors alone leave 97 % (tests/q16_ref.py --breakdown), TFLite's
           softmax (its tables, Q15 probabilities) about 83 %; every output within an int8 LSB (256) */
        CHECK(!file || (q16_lsb[0] + q16_lsb[1] >= 0.80 * total && q16_worst < 256), /* (the file's cases) */
              "q16: %.2f %% within 1 LSB of fp32 (measured 82.9 %%), worst %ld (measured 142)",
              100.0 * (q16_lsb[0] + q16_lsb[1]) / total, q16_worst);
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
