/* libFuzzer harness for mha_forward. Everything comes from the fuzz input:
   shape and score kind, batch/n/m, masks, which pointer (if any) is NULL, the
   workspace size and offset, and the data. For each input it checks that
     1. the status equals fuzz_expected_status(), an independent predicate
        written from the docs' error table (exact byte counts);
     2. with finite data, an MHA_OK result is finite;
     3. mha_forward agrees with naive_forward (tests/naive_ref.h, double);
     3b. on the fast path (MHA_FAST 1), with NaN and inf values too (not with
        +-1e30, whose sums cancel differently in another order): mha_forward
        agrees with mha_forward_reference, the rules' oracle (the same NaN and
        inf outputs, finite outputs within the tolerance; where W_o holds an
        inf, an output that is not finite on both paths may be inf on one and
        NaN on the other: the sign of a head output near 0, a matter of
        rounding, decides);
     4. nothing is read or written outside the buffers (ASan, exact-size
        allocations) and no UB happens (UBSan).
   When the input goes on after a runnable case, its next bytes may drive a
   decoding call with the same shape and weights (fz_decode): a KV cache of
   any capacity, window, kept first slots, element type and lengths, self- or cross-attention,
   NULLs, a short or missing workspace; the status must equal
   fz_decode_status(), an independent predicate written from the docs'
   decoding rules; on an error the cache and lengths are unchanged; on the
   fast path mha_decode agrees with mha_decode_reference.
   After that, the input's next bytes may drive mha_backward on the same
   case (fz_backward): d_out from the input (NaN and inf too), each input
   gradient wanted or not, the workspace exact, short or missing, lse NULL or
   saved by mha_forward_lse (its out bit for bit mha_forward's, its lse the
   double forward's) with one value perhaps replaced by -inf, NaN or +inf;
   the status must be MHA_OK or MHA_ERR_WORKSPACE as predicted (the forward
   took the rest), nothing is written on an error, finite data gives finite
   gradients, the gradients with lse are those without it, and d_values is
   checked exactly where the loss sum(d_out out) is linear: along a direction
   delta of the values, the double forward's loss changes by <d_values, delta>.
   On the fast path, with a d_out that is not finite, each gradient is finite
   exactly where mha_backward_reference's is (a NaN never crosses a mask).
   Last, the input's next bytes may drive mha_forward_q8 on the same sizes
   and mask (fz_q8): int8 data, and rescale rows and zero points drawn raw
   (any multiplier and shift) or valid; the status must be MHA_ERR_SHAPE
   exactly when one is out of the docs' ranges (a shift outside [-31, 30]
   whatever the multiplier, a multiplier neither 0 nor in [2^30, 2^31), a
   zero point outside int8), MHA_OK otherwise, with out untouched on an
   error and no undefined behaviour on the way (UBSan). Where it does not
   (its choice byte even), the byte may drive mha_forward_q16 instead (fz_q16):
   int16 data, int8 weights, int64 biases (their extremes too), the same
   rescales and zero points of 0 or not; MHA_ERR_SHAPE exactly when a zero
   point is not 0 or a rescale is out of the int8 ranges or has a shift
   above 7, MHA_OK otherwise, out untouched on an error; then, where the
   next byte is odd, its decoding (fz_q16_decode): the keys appended to an
   int16 cache and the queries decoded, with one fault or none, the status
   predicted, out and the cache untouched on an error, and without one the
   outputs equal to mha_forward_q16's with the causal mask, bit for bit.
   A failed check aborts, which libFuzzer reports with the input.
   Build: make fuzz (clang -fsanitize=fuzzer,address,undefined). tests/fuzz/replay.c
   runs the committed corpus through the same function without libFuzzer. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../mha.h"
#include "../naive_ref.h"
#include "predicate.h" /* fuzz_expected_status, fz_decode_status */

/* How many inputs reached each final check; read by tests/fuzz/replay.c. */
unsigned long fuzz_count_error_path, fuzz_count_ok_compared, fuzz_count_fast_compared, fuzz_count_decode,
    fuzz_count_backward, fuzz_count_q8, fuzz_count_q16, fuzz_count_q16_decode, fuzz_count_q16_same;

typedef struct fuzz_reader {
    const uint8_t *p;
    size_t left;
} fuzz_reader;

static uint8_t fz_byte(fuzz_reader *r) {
    if (!r->left) return 0;
    --r->left;
    return *r->p++;
}

/* A size: mostly small, sometimes 0, negative or huge, sometimes 1..300 from
   two more bytes, which crosses the fast path's key blocks (128 keys), query
   tiles (24 or 48 rows) and K/V tasks (32 to 96 rows). */
static int32_t fz_size(fuzz_reader *r) {
    uint8_t b = fz_byte(r);
    switch (b) {
    case 255: return INT32_MAX;
    case 254: return INT32_MIN;
    case 253: return 1 << 20;
    case 252: return 65536;
    default:
        if (b >= 236) {
            uint32_t x = (uint32_t)fz_byte(r) << 8;
            return 1 + (int32_t)((x | fz_byte(r)) % 300u);
        }
        return (int32_t)(b % 10) - 1; /* -1 .. 8 */
    }
}

static int32_t fz_offset(fuzz_reader *r) {
    uint8_t b = fz_byte(r);
    switch (b) {
    case 255: return INT32_MAX;
    case 254: return INT32_MIN;
    case 253: return INT32_MAX - 3;
    case 252: return INT32_MIN + 2;
    default: return (int32_t)(b % 21) - 10;
    }
}

/* Set when an input holds +-1e30: sums of such terms cancel differently in
   another order, so the two paths need not agree (finite or not). */
static int fz_huge;

/* A value: mostly in [-4, 4); specials (NaN, inf, 1e30, subnormal) only if allowed. */
static float fz_value(fuzz_reader *r, int specials, int *finite) {
    uint8_t b = fz_byte(r);
    if (specials && b >= 250) {
        static const float sp[6] = {0.0f, 1e30f, -1e30f, 1e-40f, 0.0f, 0.0f};
        if (b == 250) { *finite = 0; return NAN; }
        if (b == 251) { *finite = 0; return INFINITY; }
        if (b == 252) { *finite = 0; return -INFINITY; }
        if (b == 253 || b == 254) { *finite = 0; fz_huge = 1; return sp[b - 252]; } /* 1e30 can overflow a score */
        return sp[3];                                                    /* subnormal: stays finite */
    }
    return ((float)b - 128.0f) / 32.0f;
}

#define FZ_FAIL(...)                                  \
    do {                                              \
        fprintf(stderr, "fuzz check failed: ");       \
        fprintf(stderr, __VA_ARGS__);                 \
        fprintf(stderr, "\n");                        \
        abort();                                      \
    } while (0)

static float *fz_alloc(size_t count) { return (float *)malloc((count ? count : 1) * sizeof(float)); }

/* mha_forward_lse on the case (nl = batch heads n values; NULL under
   MHA_NO_EXTRAS, which refuses it): out bit for bit mha_forward's, lse the
   double forward's where the data are finite; then value fz_byte % nl
   replaced by -inf, NaN or +inf (replace 1, 2, 3; 0: none). */
static float *fz_lse(fuzz_reader *r, const mha_shape *s, const mha_weights *w, int32_t batch, int32_t n, int32_t m,
                     const float *q, const float *k, const float *v, const mha_mask *mask, int replace, int finite) {
    const size_t nl = (size_t)batch * (size_t)s->heads * (size_t)n, no = (size_t)batch * (size_t)n * (size_t)s->p_o;
    const size_t fb = mha_workspace_size(s, batch, n, m);
    float *lse = fz_alloc(nl), *o1 = fz_alloc(no), *o2 = fz_alloc(no);
    void *ws = malloc(fb ? fb : 1);
    mha_status st = mha_forward_lse(s, w, batch, n, m, q, k, v, mask, o1, lse, ws, fb);
#if defined(MHA_NO_EXTRAS) && MHA_NO_EXTRAS
    if (st != MHA_ERR_SHAPE) FZ_FAIL("forward_lse under MHA_NO_EXTRAS: status %d", (int)st);
    free(lse);
    lse = NULL;
    (void)r;
    (void)replace;
    (void)finite;
#else
    size_t j;
    if (st != MHA_OK || mha_forward(s, w, batch, n, m, q, k, v, mask, o2, NULL, ws, fb) != MHA_OK)
        FZ_FAIL("forward_lse: status %d", (int)st);
    if (memcmp(o1, o2, no * sizeof(float)) != 0) FZ_FAIL("forward_lse: out differs from mha_forward's");
    if (finite && !fz_huge) {
        double *ref = (double *)malloc((nl ? nl : 1) * sizeof(double)), *ro = (double *)malloc((no ? no : 1) * sizeof(double));
        naive_lse = ref;
        naive_forward(s, w, batch, n, m, q, k, v, mask, ro, NULL);
        naive_lse = NULL;
        for (j = 0; j < nl; ++j) { /* within 1e-4 (1 + |lse|), and a float's rounding of ALiBi's shift of the
                                      row (docs, "Saved statistics": the value has it taken out) */
            const int64_t P = (int64_t)(j % (size_t)n) + (mask ? (int64_t)mask->causal_offset : 0);
            const int64_t dref = P < 0 ? P : P >= (int64_t)m ? P - (int64_t)(m ? m - 1 : 0) : 0;
            const double shift = s->alibi ? naive_slope(s->heads, (int32_t)(j / (size_t)n % (size_t)s->heads)) *
                                                 fabs((double)dref) : 0.0;
            if (isinf(ref[j]) ? lse[j] != (float)ref[j]
                              : !(fabs((double)lse[j] - ref[j]) <= 1e-4 * (1.0 + fabs(ref[j])) + 1e-6 * shift))
                FZ_FAIL("lse[%lu] = %.9g, naive %.9g", (unsigned long)j, (double)lse[j], ref[j]);
        }
        free(ref);
        free(ro);
    }
    if (replace && nl) /* (tcc's INFINITY and NAN are not constant expressions: no table) */
        lse[fz_byte(r) % nl] = replace == 1 ? -INFINITY : replace == 2 ? NAN : INFINITY;
#endif
    free(o1);
    free(o2);
    free(ws);
    return lse;
}

/* The case again after an MHA_OK backward that had lse or a d_out that is
   not finite (dq, dk may be NULL, dv not): with lse NULL (close: the
   gradients with lse are those without it, where the data are finite) and,
   on the fast path, on the reference path (each gradient finite exactly
   where the reference's is). */
static void fz_backward_again(const mha_shape *s, const mha_weights *w, int32_t batch, int32_t n, int32_t m,
                              const float *q, const float *k, const float *v, const mha_mask *mask, const float *lse,
                              const float *dout, const float *dq, const float *dk, const float *dv, int finite) {
    const size_t nq = (size_t)batch * (size_t)n * (size_t)s->d_q, nk = (size_t)batch * (size_t)m * (size_t)s->d_k;
    const size_t nv = (size_t)batch * (size_t)m * (size_t)s->d_v;
    const size_t nx[3] = {nq, nk, nv};
    const float *got[3];
    float *again[3];
    size_t bytes = mha_backward_workspace_size(s, batch, n, m), j;
    int which, pass;
    void *ws;
    got[0] = dq;
    got[1] = dk;
    got[2] = dv;
    for (pass = 0; pass < 2; ++pass) {
        if (pass == 0 && !(lse && finite)) continue;
#if !(defined(MHA_FAST) && MHA_FAST)
        if (pass == 1) continue;
#endif
        if (pass == 1) {
            if (finite) continue;
            bytes = mha_backward_reference_workspace_size(s, batch, n, m);
        }
        ws = malloc(bytes ? bytes : 1);
        for (which = 0; which < 3; ++which) again[which] = got[which] ? fz_alloc(nx[which]) : NULL;
        if ((pass == 0 ? mha_backward(s, w, batch, n, m, q, k, v, mask, NULL, dout, again[0], again[1], again[2], NULL,
                                      ws, bytes)
                       : mha_backward_reference(s, w, batch, n, m, q, k, v, mask, lse, dout, again[0], again[1],
                                                again[2], NULL, ws, bytes)) != MHA_OK)
            FZ_FAIL("backward again (%s): not MHA_OK", pass ? "reference" : "lse NULL");
        for (which = 0; which < 3; ++which) {
            double mx = 0.0;
            for (j = 0; again[which] && j < nx[which]; ++j)
                mx = fabs((double)again[which][j]) > mx ? fabs((double)again[which][j]) : mx;
            for (j = 0; again[which] && j < nx[which]; ++j) {
                const double a = (double)got[which][j], b = (double)again[which][j];
                if (pass == 0 && !(fabs(a - b) <= 1e-4 * (1.0 + mx)))
                    FZ_FAIL("backward with lse: gradient %d [%lu] = %.9g, with lse NULL %.9g", which,
                            (unsigned long)j, a, b);
                if (pass == 1 && isfinite(a) != isfinite(b))
                    FZ_FAIL("backward, d_out not finite: gradient %d [%lu] = %.9g, reference %.9g", which,
                            (unsigned long)j, a, b);
            }
            free(again[which]);
        }
        free(ws);
    }
}

/* mha_backward_parallel (one thread) on the case of an MHA_OK mha_backward (dq, dk may be NULL, dv
   not): MHA_OK; every gradient finite exactly where mha_backward's is and, where the data are
   finite, within the tolerance of it; one byte short of its workspace: MHA_ERR_WORKSPACE and
   nothing written. */
static void fz_backward_parallel(const mha_shape *s, const mha_weights *w, int32_t batch, int32_t n, int32_t m,
                                 const float *q, const float *k, const float *v, const mha_mask *mask,
                                 const float *lse, const float *dout, const float *dq, const float *dk,
                                 const float *dv, int finite) {
    const size_t nx[3] = {(size_t)batch * (size_t)n * (size_t)s->d_q, (size_t)batch * (size_t)m * (size_t)s->d_k,
                          (size_t)batch * (size_t)m * (size_t)s->d_v};
    const float *got[3];
    float *again[3];
    const size_t bytes = mha_backward_parallel_workspace_size(s, batch, n, m);
    size_t j;
    int which;
    void *ws = malloc(bytes ? bytes : 1);
    got[0] = dq;
    got[1] = dk;
    got[2] = dv;
    for (which = 0; which < 3; ++which) {
        again[which] = got[which] ? fz_alloc(nx[which]) : NULL;
        for (j = 0; again[which] && j < nx[which]; ++j) again[which][j] = 7.0f;
    }
    if (bytes == 0) FZ_FAIL("backward parallel: no workspace size for a case mha_backward ran");
    if (mha_backward_parallel(s, w, batch, n, m, q, k, v, mask, lse, dout, again[0], again[1], again[2], NULL, ws,
                              bytes - 1, NULL, NULL) != MHA_ERR_WORKSPACE)
        FZ_FAIL("backward parallel: a workspace one byte short is not MHA_ERR_WORKSPACE");
    for (which = 0; which < 3; ++which)
        for (j = 0; again[which] && j < nx[which]; ++j)
            if (again[which][j] != 7.0f) FZ_FAIL("backward parallel: an error wrote a gradient");
    if (mha_backward_parallel(s, w, batch, n, m, q, k, v, mask, lse, dout, again[0], again[1], again[2], NULL, ws,
                              bytes, NULL, NULL) != MHA_OK)
        FZ_FAIL("backward parallel: not MHA_OK where mha_backward was");
    for (which = 0; which < 3; ++which) {
        double mx = 0.0;
        for (j = 0; again[which] && j < nx[which]; ++j)
            mx = isfinite(got[which][j]) && fabs((double)got[which][j]) > mx ? fabs((double)got[which][j]) : mx;
        for (j = 0; again[which] && j < nx[which]; ++j) {
            const double a = (double)got[which][j], b = (double)again[which][j];
            if (isfinite(a) != isfinite(b) || (finite && !(fabs(a - b) <= 1e-4 * (1.0 + mx))))
                FZ_FAIL("backward parallel: gradient %d [%lu] = %.9g, mha_backward's %.9g", which, (unsigned long)j,
                        b, a);
        }
        free(again[which]);
    }
    free(ws);
}

/* A rescale from the input: mostly a valid one (mha_q8_rescale_make of a
   factor in [2^-20, 2^10)), else any multiplier and shift; *ok cleared when
   it is out of the docs' ranges. */
static mha_q8_rescale fz_rescale(fuzz_reader *r, int *ok) {
    mha_q8_rescale x;
    uint8_t b = fz_byte(r);
    if (b < 224) {
        if (mha_q8_rescale_make(ldexp(1.0 + (double)(b % 16) / 16.0, (int)(b / 16) - 20), &x) != MHA_OK)
            FZ_FAIL("mha_q8_rescale_make refused a valid factor");
        return x;
    }
    x.multiplier = (int32_t)((uint32_t)fz_byte(r) << 24 | (uint32_t)fz_byte(r) << 16 | (uint32_t)fz_byte(r) << 8 |
                             fz_byte(r));
    if (b & 1) x.multiplier = (b & 2) ? 0 : x.multiplier | (int32_t)0x40000000; /* 0, or in [2^30, 2^31) or < 0 */
    x.shift = (b & 4) ? (int32_t)((uint32_t)fz_byte(r) << 24 | (uint32_t)fz_byte(r) << 16 | (uint32_t)fz_byte(r) << 8 |
                                  fz_byte(r))
                      : (int32_t)(fz_byte(r) % 80) - 40;
    if (!(x.shift >= -31 && x.shift <= 30 && (x.multiplier == 0 || x.multiplier >= 0x40000000))) *ok = 0;
    return x;
}

static void fz_q16(fuzz_reader *r, const mha_shape *s, int32_t batch, int32_t n, int32_t m, const mha_mask *mask);
static void fz_q16_decode(fuzz_reader *r, const mha_shape *s, const mha_q16_weights *w, const mha_q8_params *p,
                          int32_t batch, int32_t n, int32_t m, const int16_t *const x[4], int ok);

/* mha_forward_q8 on the sizes and mask of a case that mha_forward took (see
   the top). */
static void fz_q8(fuzz_reader *r, const mha_shape *s, int32_t batch, int32_t n, int32_t m, const mha_mask *mask) {
    const int32_t H = s->heads, KV = s->kv_heads ? s->kv_heads : s->heads;
    const size_t nr[4] = {(size_t)H * (size_t)s->p_q, (size_t)KV * (size_t)s->p_k, (size_t)KV * (size_t)s->p_v,
                          (size_t)s->p_o};
    const size_t nw[4] = {nr[0] * (size_t)s->d_q, nr[1] * (size_t)s->d_k, nr[2] * (size_t)s->d_v,
                          nr[3] * (size_t)H * (size_t)s->p_v};
    const size_t nx[4] = {(size_t)batch * (size_t)n * (size_t)s->d_q, (size_t)batch * (size_t)m * (size_t)s->d_k,
                          (size_t)batch * (size_t)m * (size_t)s->d_v, (size_t)batch * (size_t)n * (size_t)s->p_o};
    int8_t *wt[4], *x[4];
    mha_q8_rescale *rs[4];
    mha_q8_weights w;
    mha_q8_params p;
    int32_t *zero = &p.zero_in_q;
    size_t bytes, j, t;
    void *ws;
    int ok = 1, untouched = 1;
    mha_status want, got;
    const uint8_t choice = fz_byte(r);
    if (s->score != MHA_SCORE_DOT || s->rope_dim || s->alibi || s->softcap != 0.0f || (mask && mask->bias)) return;
    if (choice % 4 == 2) fz_q16(r, s, batch, n, m, mask);
    if (choice % 2 == 0) return; /* no int8 call this time */
    for (t = 0; t < 4; ++t) {
        wt[t] = (int8_t *)malloc(nw[t] ? nw[t] : 1);
        x[t] = (int8_t *)malloc(nx[t] ? nx[t] : 1);
        rs[t] = (mha_q8_rescale *)malloc((nr[t] ? nr[t] : 1) * sizeof(mha_q8_rescale));
        for (j = 0; j < nw[t]; ++j) wt[t][j] = (int8_t)fz_byte(r);
        for (j = 0; j < nx[t]; ++j) x[t][j] = (int8_t)(t == 3 ? 0x5a : fz_byte(r)); /* out: a canary */
        for (j = 0; j < nr[t]; ++j) rs[t][j] = fz_rescale(r, &ok);
    }
    for (j = 0; j < 8; ++j) { /* zero_in_q .. zero_out: int8, sometimes just outside */
        const uint8_t b = fz_byte(r);
        zero[j] = b == 255 ? 128 : b == 254 ? -129 : (int32_t)(int8_t)b;
        if (b >= 254) ok = 0;
    }
    p.score = fz_rescale(r, &ok);
    p.head = fz_rescale(r, &ok);
    memset(&w, 0, sizeof w);
    w.w_q = wt[0]; w.w_k = wt[1]; w.w_v = wt[2]; w.w_o = wt[3];
    w.r_q = rs[0]; w.r_k = rs[1]; w.r_v = rs[2]; w.r_o = rs[3];
    bytes = mha_q8_workspace_size(s, batch, n, m);
    ws = malloc(bytes ? bytes : 1);
    want = ok ? MHA_OK : MHA_ERR_SHAPE;
    got = mha_forward_q8(s, &w, &p, batch, n, m, x[0], x[1], x[2], mask, x[3], ws, bytes);
    if (got != want) FZ_FAIL("int8: status %d, predicted %d", (int)got, (int)want);
    for (j = 0; got != MHA_OK && j < nx[3]; ++j) untouched &= x[3][j] == 0x5a;
    if (!untouched) FZ_FAIL("int8: an error wrote out");
    ++fuzz_count_q8;
    for (t = 0; t < 4; ++t) {
        free(wt[t]);
        free(x[t]);
        free(rs[t]);
    }
    free(ws);
}

/* mha_forward_q16 on the sizes and mask of a case that mha_forward took (see
   the top). */
static void fz_q16(fuzz_reader *r, const mha_shape *s, int32_t batch, int32_t n, int32_t m, const mha_mask *mask) {
    const int32_t H = s->heads, KV = s->kv_heads ? s->kv_heads : s->heads;
    const size_t nr[4] = {(size_t)H * (size_t)s->p_q, (size_t)KV * (size_t)s->p_k, (size_t)KV * (size_t)s->p_v,
                          (size_t)s->p_o};
    const size_t nw[4] = {nr[0] * (size_t)s->d_q, nr[1] * (size_t)s->d_k, nr[2] * (size_t)s->d_v,
                          nr[3] * (size_t)H * (size_t)s->p_v};
    const size_t nx[4] = {(size_t)batch * (size_t)n * (size_t)s->d_q, (size_t)batch * (size_t)m * (size_t)s->d_k,
                          (size_t)batch * (size_t)m * (size_t)s->d_v, (size_t)batch * (size_t)n * (size_t)s->p_o};
    int8_t *wt[4];
    int16_t *x[4];
    int64_t *bs[4];
    mha_q8_rescale *rs[4];
    mha_q16_weights w;
    mha_q8_params p;
    int32_t *zero = &p.zero_in_q;
    size_t bytes, j, t;
    void *ws;
    int ok = 1, untouched = 1;
    mha_status want, got;
    for (t = 0; t < 4; ++t) {
        wt[t] = (int8_t *)malloc(nw[t] ? nw[t] : 1);
        x[t] = (int16_t *)malloc((nx[t] ? nx[t] : 1) * sizeof(int16_t));
        bs[t] = (int64_t *)malloc((nr[t] ? nr[t] : 1) * sizeof(int64_t));
        rs[t] = (mha_q8_rescale *)malloc((nr[t] ? nr[t] : 1) * sizeof(mha_q8_rescale));
        for (j = 0; j < nw[t]; ++j) wt[t][j] = (int8_t)fz_byte(r);
        for (j = 0; j < nx[t]; ++j) /* out: a canary */
            x[t][j] = (int16_t)(t == 3 ? 0x5a5a : (int32_t)((uint32_t)fz_byte(r) << 8 | fz_byte(r)) - 32768);
        for (j = 0; j < nr[t]; ++j) { /* small, or an extreme of int64 */
            const uint8_t b = fz_byte(r);
            bs[t][j] = b == 255 ? INT64_MAX : b == 254 ? INT64_MIN : ((int64_t)b - 128) * 4099;
        }
        for (j = 0; j < nr[t]; ++j) {
            rs[t][j] = fz_rescale(r, &ok);
            if (rs[t][j].shift > 7) ok = 0;
        }
    }
    for (j = 0; j < 8; ++j) { /* zero_in_q .. zero_out: 0, sometimes not */
        const uint8_t b = fz_byte(r);
        zero[j] = b >= 250 ? (int32_t)b - 252 : 0;
        if (zero[j]) ok = 0;
    }
    p.score = fz_rescale(r, &ok);
    p.head = fz_rescale(r, &ok);
    if (p.score.shift > 7 || p.head.shift > 7) ok = 0;
    memset(&w, 0, sizeof w);
    w.w_q = wt[0]; w.w_k = wt[1]; w.w_v = wt[2]; w.w_o = wt[3];
    w.r_q = rs[0]; w.r_k = rs[1]; w.r_v = rs[2]; w.r_o = rs[3];
    if (fz_byte(r) % 2) {
        w.b_q = bs[0]; w.b_k = bs[1]; w.b_v = bs[2]; w.b_o = bs[3];
    }
    bytes = mha_q16_workspace_size(s, batch, n, m);
    ws = malloc(bytes ? bytes : 1);
    want = ok ? MHA_OK : MHA_ERR_SHAPE;
    got = mha_forward_q16(s, &w, &p, batch, n, m, x[0], x[1], x[2], mask, x[3], ws, bytes);
    if (got != want) FZ_FAIL("16x8: status %d, predicted %d", (int)got, (int)want);
    for (j = 0; got != MHA_OK && j < nx[3]; ++j) untouched &= x[3][j] == 0x5a5a;
    if (!untouched) FZ_FAIL("16x8: an error wrote out");
    ++fuzz_count_q16;
    fz_q16_decode(r, s, &w, &p, batch, n, m, (const int16_t *const *)x, ok);
    for (t = 0; t < 4; ++t) {
        free(wt[t]);
        free(x[t]);
        free(bs[t]);
        free(rs[t]);
    }
    free(ws);
}

/* dst [nb][m + n][d]: each batch entry's m rows of a [nb][m][d], then its n
   rows of b [nb][n][d] (int16). */
static void fz_join16(int16_t *dst, const int16_t *a, const int16_t *b, size_t nb, size_t m, size_t n, size_t d) {
    size_t e;
    for (e = 0; e < nb; ++e) {
        memcpy(dst + e * (m + n) * d, a + e * m * d, m * d * sizeof(int16_t));
        memcpy(dst + (e * (m + n) + m) * d, b + e * n * d, n * d * sizeof(int16_t));
    }
}

/* 16x8 decoding after fz_q16's forward, with its weights and parameters
   (ok: they are valid), where the next byte is odd: the m keys appended to an
   MHA_I16 cache of capacity m + n, then the n queries decoded with n new
   keys and values; or one fault in the decoding call, drawn from the byte:
   the cache's type MHA_I8 (MHA_ERR_SHAPE), the workspace a byte short
   (MHA_ERR_WORKSPACE), a length of -1 (MHA_ERR_MASK), a capacity one short
   (MHA_ERR_CAPACITY), each predicted in the error table's order. On an
   error neither out nor the cache is written; without one, out equals
   mha_forward_q16 over the m + n keys with the causal mask of offset m, bit
   for bit. */
static void fz_q16_decode(fuzz_reader *r, const mha_shape *s, const mha_q16_weights *w, const mha_q8_params *p,
                          int32_t batch, int32_t n, int32_t m, const int16_t *const x[4], int ok) {
    const int32_t dk = s->d_k, dv = s->d_v;
    const uint8_t v = fz_byte(r);
    const int kind = (v / 2) % 5 != 0 && batch >= 1 && n >= 1 ? (v / 2) % 5 : 0;
    const int32_t cap = m + n - (kind == 4);
    const size_t nb = (size_t)batch, nout = nb * (size_t)n * (size_t)s->p_o;
    const size_t kb = mha_cache_array_bytes(s, batch, cap, MHA_I16, 0), vb = mha_cache_array_bytes(s, batch, cap, MHA_I16, 1);
    int16_t *kn, *vn, *kall, *vall, *out, *ref;
    int32_t *len;
    unsigned char *ck, *cv, *snap;
    mha_cache cache;
    mha_mask causal;
    size_t bytes, j;
    void *ws;
    mha_status want, got;
    int untouched = 1;
    if (v % 2 == 0 || cap < 1 || m + n > 4096 || kb == 0 || vb == 0) return;
    kn = (int16_t *)malloc((nb * (size_t)n * (size_t)dk + 1) * sizeof(int16_t));
    vn = (int16_t *)malloc((nb * (size_t)n * (size_t)dv + 1) * sizeof(int16_t));
    kall = (int16_t *)malloc((nb * (size_t)(m + n) * (size_t)dk + 1) * sizeof(int16_t));
    vall = (int16_t *)malloc((nb * (size_t)(m + n) * (size_t)dv + 1) * sizeof(int16_t));
    out = (int16_t *)malloc((nout + 1) * sizeof(int16_t));
    ref = (int16_t *)malloc((nout + 1) * sizeof(int16_t));
    len = (int32_t *)calloc(nb + 1, sizeof(int32_t));
    ck = (unsigned char *)calloc(kb, 1);
    cv = (unsigned char *)calloc(vb, 1);
    snap = (unsigned char *)malloc(kb + vb);
    for (j = 0; j < nb * (size_t)n * (size_t)dk; ++j) kn[j] = (int16_t)((int32_t)(j * 2654435761u >> 16) - 32768);
    for (j = 0; j < nb * (size_t)n * (size_t)dv; ++j) vn[j] = (int16_t)((int32_t)(j * 40503u % 65536u) - 32768);
    fz_join16(kall, x[1], kn, nb, (size_t)m, (size_t)n, (size_t)dk);
    fz_join16(vall, x[2], vn, nb, (size_t)m, (size_t)n, (size_t)dv);
    for (j = 0; j < nout; ++j) out[j] = 0x5a5a;
    memset(&cache, 0, sizeof cache);
    cache.k = ck;
    cache.v = cv;
    cache.length = len;
    cache.capacity = cap;
    cache.type = MHA_I16;
    bytes = mha_q16_decode_workspace_size(s, batch, m > n ? m : n, cap);
    ws = malloc(bytes + 1);
    got = mha_cache_append_q16(s, w, p, &cache, batch, m, x[1], x[2], ws, bytes);
    if (got != (ok ? MHA_OK : MHA_ERR_SHAPE)) FZ_FAIL("16x8 append: status %d, ok %d", (int)got, ok);
    if (kind == 1) cache.type = MHA_I8;
    if (kind == 3) len[0] = -1;
    want = kind == 1 || !ok ? MHA_ERR_SHAPE : kind == 2 ? MHA_ERR_WORKSPACE : kind == 3 ? MHA_ERR_MASK
                            : kind == 4 ? MHA_ERR_CAPACITY : MHA_OK;
    memcpy(snap, ck, kb);
    memcpy(snap + kb, cv, vb);
    got = mha_decode_q16(s, w, p, &cache, batch, n, x[0], kn, vn, out, ws, bytes - (kind == 2));
    if (got != want) FZ_FAIL("16x8 decode: status %d, predicted %d (fault %d)", (int)got, (int)want, kind);
    ++fuzz_count_q16_decode;
    if (got != MHA_OK) {
        for (j = 0; j < nout; ++j) untouched &= out[j] == 0x5a5a;
        untouched &= memcmp(snap, ck, kb) == 0 && memcmp(snap + kb, cv, vb) == 0;
        if (!untouched) FZ_FAIL("16x8 decode: an error wrote out or the cache");
    } else { /* m + n <= 4096: within the forward's 65535 */
        memset(&causal, 0, sizeof causal);
        causal.causal = 1;
        causal.causal_offset = m;
        free(ws);
        bytes = mha_q16_workspace_size(s, batch, n, m + n);
        ws = malloc(bytes + 1);
        got = mha_forward_q16(s, w, p, batch, n, m + n, x[0], kall, vall, &causal, ref, ws, bytes);
        if (got != MHA_OK) FZ_FAIL("16x8: the causal forward's status %d", (int)got);
        if (memcmp(out, ref, nout * sizeof(int16_t)) != 0) FZ_FAIL("16x8: decoding differs from the causal forward");
        ++fuzz_count_q16_same;
    }
    free(kn); free(vn); free(kall); free(vall); free(out); free(ref); free(len); free(ck); free(cv); free(snap);
    free(ws);
}

/* mha_backward driven by the rest of the input (see the top): the case of
   the forward just run (q, k, v of finite values unless finite is 0). */
static void fz_backward(fuzz_reader *r, const mha_shape *s, const mha_weights *w, int32_t batch, int32_t n, int32_t m,
                        const float *q, const float *k, const float *v, const mha_mask *mask, int finite) {
    const size_t nq = (size_t)batch * (size_t)n * (size_t)s->d_q, nk = (size_t)batch * (size_t)m * (size_t)s->d_k;
    const size_t nv = (size_t)batch * (size_t)m * (size_t)s->d_v, no = (size_t)batch * (size_t)n * (size_t)s->p_o;
    const size_t exact = mha_backward_workspace_size(s, batch, n, m);
    float *dout, *dq, *dk, *dv, *v2, *lse = NULL;
    uint8_t mode, want_in, *ws_block;
    size_t bytes, off, j;
    void *ws;
    mha_status want, got;
    int ok = 1, dout_finite = 1;
    if (fz_byte(r) % 2 == 0 || exact == 0) return; /* no backward this time */
    mode = fz_byte(r);
    want_in = fz_byte(r); /* bit 0 d_queries, 1 d_keys, 2 d_out NaN/inf allowed, 3 lse, 4-5 one lse value replaced */
    dout = fz_alloc(no);
    for (j = 0; j < no; ++j) dout[j] = fz_value(r, (want_in & 4) != 0, &dout_finite);
    if (want_in & 8) lse = fz_lse(r, s, w, batch, n, m, q, k, v, mask, want_in >> 4 & 3, finite);
    dq = (want_in & 1) ? fz_alloc(nq) : NULL;
    dk = (want_in & 2) ? fz_alloc(nk) : NULL;
    dv = fz_alloc(nv);
    for (j = 0; dq && j < nq; ++j) dq[j] = 7.0f; /* a canary: an error must leave it */
    for (j = 0; dk && j < nk; ++j) dk[j] = 7.0f;
    for (j = 0; j < nv; ++j) dv[j] = 7.0f;
    bytes = (mode & 3) == 1 ? exact - 1 - (size_t)(mode >> 5) : exact;
    off = (size_t)(mode >> 2) % 64u;
    ws_block = (uint8_t *)malloc(off + bytes + 1);
    ws = (mode & 3) == 2 && mode > 200 ? NULL : ws_block + off;
    want = (mode & 3) == 1 || !ws ? MHA_ERR_WORKSPACE : MHA_OK;
    got = mha_backward(s, w, batch, n, m, q, k, v, mask, lse, dout, dq, dk, dv, NULL, ws, bytes);
    if (got != want) FZ_FAIL("backward: status %d, predicted %d", (int)got, (int)want);
    if (got == MHA_OK && (lse || !dout_finite)) fz_backward_again(s, w, batch, n, m, q, k, v, mask, lse, dout, dq, dk,
                                                                    dv, finite && dout_finite && !fz_huge);
    if (got == MHA_OK && !fz_huge)
        fz_backward_parallel(s, w, batch, n, m, q, k, v, mask, lse, dout, dq, dk, dv, finite && dout_finite);
    free(lse);
    if (got != MHA_OK) {
        for (j = 0; dq && j < nq; ++j) ok &= dq[j] == 7.0f;
        for (j = 0; dk && j < nk; ++j) ok &= dk[j] == 7.0f;
        for (j = 0; j < nv; ++j) ok &= dv[j] == 7.0f;
        if (!ok) FZ_FAIL("backward: an error wrote a gradient");
    } else if (finite && dout_finite && !fz_huge) {
        double *o1 = (double *)malloc((no ? no : 1) * sizeof(double)), *o2 = (double *)malloc((no ? no : 1) * sizeof(double));
        double change = 0.0, dot = 0.0, size = 0.0;
        for (j = 0; dq && j < nq; ++j) ok &= isfinite(dq[j]);
        for (j = 0; dk && j < nk; ++j) ok &= isfinite(dk[j]);
        for (j = 0; j < nv; ++j) ok &= isfinite(dv[j]);
        if (!ok) FZ_FAIL("backward: finite data gave a gradient that is not finite");
        v2 = (float *)calloc(nv ? nv : 1, sizeof(float)); /* the values moved along delta (delta: the exact
                                                             difference of the floats); calloc: gcc 12 -O2 saw
                                                             it as maybe unset */
        for (j = 0; j < nv; ++j) v2[j] = v[j] + fz_value(r, 0, &ok) / 64.0f;
        naive_forward(s, w, batch, n, m, q, k, v, mask, o1, NULL);
        naive_forward(s, w, batch, n, m, q, k, v2, mask, o2, NULL);
        for (j = 0; j < no; ++j) change += (double)dout[j] * (o2[j] - o1[j]);
        for (j = 0; j < nv; ++j) {
            dot += (double)dv[j] * ((double)v2[j] - (double)v[j]);
            size += fabs((double)dv[j] * ((double)v2[j] - (double)v[j]));
        }
        if (fabs(change - dot) > 1e-4 * (1.0 + size))
            FZ_FAIL("backward: <d_values, delta> = %.9g, the loss changed by %.9g", dot, change);
        free(v2);
        free(o1);
        free(o2);
    }
    ++fuzz_count_backward;
    free(dout);
    free(dq);
    free(dk);
    free(dv);
    free(ws_block);
}

/* Bytes of a cache row of p elements of type, by the docs' layout. */
static size_t fz_row_bytes(int32_t type, size_t p) {
    if (type == MHA_Q8 || type == MHA_Q4) return (p + 31) / 32 * (type == MHA_Q8 ? 34u : 18u);
    return p * (type == MHA_F16 || type == MHA_BF16 ? 2u : 4u);
}

/* rows rows of p elements of type at dst from the input: floats, 16-bit
   elements, or blocks (an f16 scale from an input value, the integers from
   input bytes); a scale that is not finite clears *finite. */
static void fz_fill_cache(fuzz_reader *r, void *dst, int32_t type, size_t rows, size_t p, int specials, int *finite) {
    size_t i, j, n = rows * p;
    if (type == MHA_Q8 || type == MHA_Q4) {
        const size_t bb = type == MHA_Q8 ? 34u : 18u, blocks = rows * ((p + 31) / 32);
        for (i = 0; i < blocks; ++i) {
            unsigned char *blk = (unsigned char *)dst + i * bb;
            uint16_t h = mha_f16_from_f32(fz_value(r, specials, finite) * 0.01f);
            if (!isfinite(mha_f32_from_f16(h))) *finite = 0;
            memcpy(blk, &h, 2);
            for (j = 2; j < bb; ++j) blk[j] = fz_byte(r);
        }
        return;
    }
    for (j = 0; j < n; ++j) {
        float x = fz_value(r, specials, finite);
        if (type == MHA_F16 || type == MHA_BF16)
            ((uint16_t *)dst)[j] = type == MHA_F16 ? mha_f16_from_f32(x) : mha_bf16_from_f32(x);
        else
            ((float *)dst)[j] = x;
    }
}

/* A decoding call driven by the rest of the input (see the top). */
static void fz_decode(fuzz_reader *r, const mha_shape *s, const mha_weights *w, int32_t batch) {
    int32_t kvh = s->kv_heads == 0 ? s->heads : s->kv_heads, t, cap, window, kept, type, vtype, *lens, *lens2, *tree, b;
    int kv, null_which, as_tree, specials = 0, finite = 1;
    size_t nq, nk, nv, no, kbytes, cbytes, bytes, exact, j;
    float *q, *k, *v, *out, *store, *store2;
    uint8_t ws_mode, sel, *ws_block;
    void *ws;
    mha_cache c, c2;
    mha_status want, got;
    if (fz_byte(r) % 2 == 0) return; /* no decoding this time */
    t = fz_size(r);
    cap = fz_size(r);
    sel = fz_byte(r); /* (the window's byte also picks keep_first, and null_which's a tree: no byte more) */
    window = sel % 3 == 0 ? fz_size(r) : 0;
    kept = window ? (int32_t)(sel / 3 % 8) - 1 : 0; /* keep_first: -1 .. 6 */
    type = fz_byte(r) % 16; /* 15: an unknown type; 14: f16; 13: bf16; 12: q8; 11: q4; 10: q8 keys, q4 values;
                               9: an unknown value type; else float */
    vtype = type == 10 ? MHA_Q4 : type == 9 ? 3 + (int32_t)(fz_byte(r) % 2) * 3 : 0;
    type = type == 15 ? 3 + (int32_t)(fz_byte(r) % 2) * -4 : type == 14 ? MHA_F16 : type == 13 ? MHA_BF16
         : type == 12 || type == 10 ? MHA_Q8 : type == 11 ? MHA_Q4 : MHA_F32;
    kv = fz_byte(r) % 8;
    kv = kv < 2 ? 1 : kv == 2 ? 0 : kv == 7 ? 2 + (fz_byte(r) & 1) : 1;
    null_which = fz_byte(r) % 24;
    as_tree = null_which >= 20; /* mha_decode_tree, its parents from the input */
    if (null_which > 5) null_which = 0;
    ws_mode = fz_byte(r);
    if (t < 0 || t > 40 || cap < 1 || cap > 96 || batch > 8 || (uint64_t)batch * (uint64_t)kvh * (uint64_t)cap *
        ((uint64_t)s->p_k + (uint64_t)s->p_v) > 65536u) {
        /* too large (or invalid) to run here: small dummy buffers, which an error must never touch */
        static float dummy[4];
        static int32_t dlens[64];
        static unsigned char dws[256];
        for (b = 0; b < batch && b < 64; ++b) dlens[b] = (int32_t)(fz_byte(r) % 4);
        memset(&c, 0, sizeof c);
        c.k = null_which == 2 ? NULL : dummy;
        c.v = dummy;
        c.length = null_which == 3 ? NULL : dlens;
        c.capacity = cap;
        c.window = window;
        c.keep_first = kept;
        c.type = type;
        c.value_type = vtype;
        want = fz_decode_status(s, batch, t, cap, window, kept, type, vtype, dlens, kv, null_which, NULL, dws,
                                sizeof dws);
        if (want == MHA_OK) return; /* valid: too large to run here */
        got = mha_decode(s, w, null_which == 1 ? NULL : &c, batch, t, null_which == 4 ? NULL : dummy,
                         kv == 1 || kv == 2 ? dummy : NULL, kv == 1 || kv == 3 ? dummy : NULL,
                         null_which == 5 ? NULL : dummy, dws, sizeof dws);
        if (got != want) FZ_FAIL("decode (error path): status %d, predicted %d", (int)got, (int)want);
        ++fuzz_count_decode;
        return;
    }
    tree = as_tree ? (int32_t *)malloc(((size_t)batch * (size_t)t + 1) * sizeof(int32_t)) : NULL;
    lens = (int32_t *)malloc(((size_t)batch + 1) * sizeof(int32_t));
    lens2 = (int32_t *)malloc(((size_t)batch + 1) * sizeof(int32_t));
    for (b = 0; b < batch; ++b) {
        uint8_t x = fz_byte(r);
        lens[b] = x == 255 ? INT32_MAX : x == 254 ? -1 : x == 253 ? INT32_MAX - 2 : (int32_t)(x % (uint8_t)(cap + 2));
    }
    nq = (size_t)batch * (size_t)t * (size_t)s->d_q;
    nk = (size_t)batch * (size_t)t * (size_t)s->d_k;
    nv = (size_t)batch * (size_t)t * (size_t)s->d_v;
    no = (size_t)batch * (size_t)t * (size_t)s->p_o;
    /* the arrays' bytes by the docs' layout (an unknown type: as float) */
    kbytes = (size_t)batch * (size_t)kvh * (size_t)cap * fz_row_bytes(type, (size_t)s->p_k);
    cbytes = kbytes + (size_t)batch * (size_t)kvh * (size_t)cap * fz_row_bytes(vtype ? vtype : type, (size_t)s->p_v);
    q = fz_alloc(nq); k = fz_alloc(nk); v = fz_alloc(nv); out = fz_alloc(no);
    store = fz_alloc(cbytes / 4 + 1); store2 = fz_alloc(cbytes / 4 + 1); /* cbytes or more */
    for (j = 0; j < nq; ++j) q[j] = fz_value(r, specials, &finite);
    for (j = 0; j < nk; ++j) k[j] = fz_value(r, specials, &finite);
    for (j = 0; j < nv; ++j) v[j] = fz_value(r, specials, &finite);
    memset(store, 0, cbytes); /* a 16-bit cache fills half: the rest defined */
    fz_fill_cache(r, store, type, (size_t)batch * (size_t)kvh * (size_t)cap, (size_t)s->p_k, specials, &finite);
    fz_fill_cache(r, (unsigned char *)store + kbytes, vtype ? vtype : type, (size_t)batch * (size_t)kvh * (size_t)cap,
                  (size_t)s->p_v, specials, &finite);
    memcpy(store2, store, cbytes);
    memcpy(lens2, lens, ((size_t)batch + 1) * sizeof(int32_t));
    memset(&c, 0, sizeof c);
    c.k = null_which == 2 ? NULL : store;
    c.v = (unsigned char *)store + kbytes;
    c.length = null_which == 3 ? NULL : lens;
    c.capacity = cap;
    c.window = window;
    c.keep_first = kept;
    c.type = type;
    c.value_type = vtype;
    exact = mha_decode_workspace_size(s, batch, t, cap);
    bytes = (ws_mode & 3) == 1 && exact > 0 ? exact - 1 : exact;
    ws_block = (uint8_t *)malloc(bytes + 64);
    ws = (ws_mode & 3) == 2 && ws_mode > 200 ? NULL : ws_block + (ws_mode >> 2) % 64u;
    if (tree) /* mha_decode_tree: each parent from the input, -2 .. i (-2 and i out of range) */
        for (j = 0; j < (size_t)batch * (size_t)t; ++j)
            tree[j] = (int32_t)(fz_byte(r) % (uint8_t)(j % (size_t)t + 3u)) - 2;
    want = fz_decode_status(s, batch, t, cap, window, kept, type, vtype, lens, kv, null_which, tree, ws, bytes);
    if (tree)
        got = mha_decode_tree(s, w, null_which == 1 ? NULL : &c, batch, t, tree, null_which == 4 ? NULL : q,
                              kv == 1 || kv == 2 ? k : NULL, kv == 1 || kv == 3 ? v : NULL,
                              null_which == 5 ? NULL : out, ws, bytes);
    else
        got = mha_decode(s, w, null_which == 1 ? NULL : &c, batch, t, null_which == 4 ? NULL : q,
                         kv == 1 || kv == 2 ? k : NULL, kv == 1 || kv == 3 ? v : NULL, null_which == 5 ? NULL : out,
                         ws, bytes);
    if (got != want) FZ_FAIL("decode: status %d, predicted %d", (int)got, (int)want);
    if (got != MHA_OK) {
        if (memcmp(store, store2, cbytes) != 0 ||
            memcmp(lens, lens2, (size_t)batch * sizeof(int32_t)) != 0)
            FZ_FAIL("decode: an error wrote the cache or its lengths");
    } else {
        for (j = 0; j < no; ++j)
            if (!isfinite(out[j])) FZ_FAIL("decode: finite inputs gave out[%lu] = %g", (unsigned long)j, (double)out[j]);
        if (tree && memcmp(lens, lens2, (size_t)batch * sizeof(int32_t)) != 0)
            FZ_FAIL("decode: a tree changed the lengths");
#if defined(MHA_FAST) && MHA_FAST
        /* (a tree: tests/test_decode.c checks each draft against its path; new keys and values in a
           block cache: the two paths' projections may round to neighbouring integers) */
        if (!tree && !(kv && (type >= MHA_Q8 || vtype >= MHA_Q8))) { /* the reference path on the same cache as it was: the same results */
            size_t rb = mha_decode_reference_workspace_size(s, batch, t, cap);
            float *ro = fz_alloc(no), mx = 0.0f;
            void *rw = malloc(rb);
            c2 = c;
            c2.k = store2;
            c2.v = (unsigned char *)store2 + ((unsigned char *)c.v - (unsigned char *)store);
            c2.length = lens2;
            if (mha_decode_reference(s, w, &c2, batch, t, q, kv ? k : NULL, kv ? v : NULL, ro, rw, rb) != MHA_OK)
                FZ_FAIL("decode: the reference path is not MHA_OK");
            for (j = 0; j < no; ++j) mx = fabsf(ro[j]) > mx ? fabsf(ro[j]) : mx;
            for (j = 0; j < no; ++j)
                if (!(fabsf(out[j] - ro[j]) <= 1e-4f * (1.0f + mx)))
                    FZ_FAIL("decode: fast out[%lu] = %.9g, reference %.9g", (unsigned long)j, (double)out[j],
                            (double)ro[j]);
            if (memcmp(lens, lens2, (size_t)batch * sizeof(int32_t)) != 0) FZ_FAIL("decode: lengths differ");
            free(ro);
            free(rw);
        }
#else
        (void)c2;
#endif
    }
    ++fuzz_count_decode;
    free(q); free(k); free(v); free(out); free(store); free(store2); free(lens); free(lens2); free(ws_block);
    free(tree);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz_reader r;
    mha_shape s;
    mha_weights w;
    mha_mask mask;
    mha_weight_counts c;
    mha_status want, got;
    int32_t batch, n, m, *lens = NULL;
    int null_which, specials, finite = 1, use_mask, want_attn, i;
    size_t ws_bytes, exact, off, n_q, n_k, n_v, n_out, n_attn, n_nm, n_lens = 0, j;
    float *arr[20], *q, *k, *v, *out, *attn = NULL, *bias = NULL;
    uint8_t *keep = NULL, ws_mode, *ws_block = NULL;
    void *ws;
    int n_arr = 0, knobs;
    const float *wp[11];

    r.p = data;
    r.left = size;
    fz_huge = 0;
    memset(&s, 0, sizeof s);
    memset(&w, 0, sizeof w);
    memset(&mask, 0, sizeof mask);
    s.heads = fz_size(&r);
    s.kv_heads = fz_byte(&r) % 4 == 0 ? 0 : fz_size(&r);
    s.d_q = fz_size(&r); s.d_k = fz_size(&r); s.d_v = fz_size(&r);
    s.p_q = fz_size(&r); s.p_v = fz_size(&r); s.p_o = fz_size(&r);
    i = fz_byte(&r);
    s.score = (mha_score)(i % 8 == 7 ? 2 + i : i % 2); /* sometimes an unknown kind */
    s.p_k = (fz_byte(&r) % 8 == 0 || s.score == MHA_SCORE_ADDITIVE) ? fz_size(&r) : s.p_q;
    s.p_a = fz_size(&r);
    i = fz_byte(&r);
    s.scale = i < 200 ? 0.0f : i < 250 ? (float)(i - 225) / 8.0f : i == 250 ? NAN : INFINITY;
    batch = fz_size(&r); n = fz_size(&r); m = fz_size(&r);
    null_which = fz_byte(&r) % 32; /* 1..14 choose a pointer to set NULL; else none; 31: knobs follow */
    knobs = null_which == 31 ? fz_byte(&r) : 0;
    if (null_which > 14) null_which = 0;
    if (knobs & 3) { /* the decoder knobs: bits 0-1 RoPE (off, the largest valid, odd, too large), 2 its
                        pairing, 7 theta 500 (-1 with bits 0-1 both set); 3 ALiBi; 4-5 soft-cap (off, 2.5,
                        -1, NaN); 6 sinks */
        int32_t lim = s.p_q < s.p_k ? s.p_q : s.p_k;
        s.rope_dim = (knobs & 3) == 1 ? (lim > 0 && lim < 1000 ? lim / 2 * 2 : 2)
                   : (knobs & 3) == 2 ? 3 : lim < INT32_MAX - 2 ? lim + 2 : -2; /* -2: also refused */
        s.rope_pairs = (knobs >> 2) & 1;
        s.rope_theta = knobs & 128 ? ((knobs & 3) == 3 ? -1.0f : 500.0f) : 0.0f;
    }
    s.alibi = (knobs >> 3) & 1;
    s.softcap = (knobs & 48) == 16 ? 2.5f : (knobs & 48) == 32 ? -1.0f : (knobs & 48) == 48 ? NAN : 0.0f;
    specials = fz_byte(&r) % 4 == 0;
    use_mask = fz_byte(&r);
    want_attn = fz_byte(&r) & 1;
    ws_mode = fz_byte(&r);

    /* Sizes that are invalid, overflow, or are too big to allocate here take
       the error path: small dummy buffers, which must never be touched because
       the predicted status is an error. */
    want = fuzz_expected_status(&s, batch, n, m, 0, NULL, 0, &r, SIZE_MAX);
    if (want != MHA_OK || mha_weight_counts_get(&s, &c) != MHA_OK || c.w_q + c.w_k + c.w_v + c.w_o + c.a_q + c.a_k > 4096u ||
        mha_workspace_size(&s, batch, n, m) > (1u << 20) || batch > 64 ||
        (uint64_t)batch * (uint64_t)n * (uint64_t)m > 16384u || (uint64_t)batch * ((uint64_t)n + (uint64_t)m) > 640u) {
        static float dummy[4];
        static unsigned char dws[256];
        const float *dp[14];
        mha_weights dw;
        for (i = 0; i < 14; ++i) dp[i] = i == null_which ? NULL : dummy;
        memset(&dw, 0, sizeof dw);
        dw.w_q = dp[3]; dw.w_k = dp[4]; dw.w_v = dp[5]; dw.w_o = dp[6];
        dw.a_q = dp[11]; dw.a_k = dp[12]; dw.a_v = dp[13];
        want = fuzz_expected_status(&s, batch, n, m, null_which, NULL, 0, dws, sizeof dws);
        if (want == MHA_OK) return 0; /* valid: too large to run here */
        got = mha_forward(null_which == 1 ? NULL : &s, null_which == 2 ? NULL : &dw, batch, n, m, dp[7], dp[8],
                          dp[9], NULL, null_which == 10 ? NULL : dummy, NULL, dws, sizeof dws);
        if (got != want) FZ_FAIL("error path: status %d, predicted %d", (int)got, (int)want);
        if (mha_workspace_size(&s, batch, n, m) != 0 && (want == MHA_ERR_SHAPE || want == MHA_ERR_OVERFLOW))
            FZ_FAIL("mha_workspace_size is not 0 for status %d", (int)want);
        ++fuzz_count_error_path;
        return 0;
    }

    /* A runnable case: exact-size buffers. */
    n_q = (size_t)batch * (size_t)n * (size_t)s.d_q;
    n_k = (size_t)batch * (size_t)m * (size_t)s.d_k;
    n_v = (size_t)batch * (size_t)m * (size_t)s.d_v;
    n_out = (size_t)batch * (size_t)n * (size_t)s.p_o;
    n_attn = (size_t)batch * (size_t)s.heads * (size_t)n * (size_t)m;
    n_nm = (size_t)batch * (size_t)n * (size_t)m;
    {
        size_t counts[11];
        counts[0] = c.w_q; counts[1] = c.b_q; counts[2] = c.w_k; counts[3] = c.b_k; counts[4] = c.w_v;
        counts[5] = c.b_v; counts[6] = c.w_o; counts[7] = c.b_o; counts[8] = c.a_q; counts[9] = c.a_k;
        counts[10] = c.a_v;
        for (i = 0; i < 11; ++i) {
            float *p = fz_alloc(counts[i]);
            for (j = 0; j < counts[i]; ++j) p[j] = fz_value(&r, specials, &finite) / 4.0f;
            arr[n_arr++] = p;
            wp[i] = (i % 2 == 1 && i < 8 && (fz_byte(&r) & 1)) || counts[i] == 0 ? NULL : p; /* biases optional */
        }
    }
    w.w_q = wp[0]; w.b_q = wp[1]; w.w_k = wp[2]; w.b_k = wp[3]; w.w_v = wp[4]; w.b_v = wp[5];
    w.w_o = wp[6]; w.b_o = wp[7]; w.a_q = wp[8]; w.a_k = wp[9]; w.a_v = wp[10];
    if (knobs & 64) { /* sinks: one logit per head */
        float *sk = arr[n_arr++] = fz_alloc((size_t)s.heads);
        for (j = 0; j < (size_t)s.heads; ++j) sk[j] = fz_value(&r, specials, &finite);
        w.sinks = sk;
    }
    q = arr[n_arr++] = fz_alloc(n_q);
    k = arr[n_arr++] = fz_alloc(n_k);
    v = arr[n_arr++] = fz_alloc(n_v);
    out = arr[n_arr++] = fz_alloc(n_out);
    for (j = 0; j < n_q; ++j) q[j] = fz_value(&r, specials, &finite);
    for (j = 0; j < n_k; ++j) k[j] = fz_value(&r, specials, &finite);
    for (j = 0; j < n_v; ++j) v[j] = fz_value(&r, specials, &finite);
    if (want_attn) attn = arr[n_arr++] = fz_alloc(n_attn);
    if (use_mask & 1) {
        mask.causal = 1;
        mask.causal_offset = fz_offset(&r);
    }
    if (use_mask & 4) {
        mask.valid_lens_per_query = use_mask & 2;
        n_lens = (size_t)batch * (size_t)(mask.valid_lens_per_query ? n : 1);
        lens = (int32_t *)malloc((n_lens ? n_lens : 1) * sizeof(int32_t));
        for (j = 0; j < n_lens; ++j) {
            uint8_t b = fz_byte(&r);
            lens[j] = b == 255 ? INT32_MAX : b == 254 ? INT32_MIN : (int32_t)((int64_t)b * (m + 2) / 253) - 1; /* -1..m+1 */
        }
        mask.valid_lens = lens;
    }
    if (use_mask & 8) {
        keep = (uint8_t *)malloc(n_nm ? n_nm : 1);
        for (j = 0; j < n_nm; ++j) keep[j] = (uint8_t)(fz_byte(&r) % 3); /* 2 of 3 keep */
        mask.keep = keep;
    }
    if (use_mask & 16) {
        bias = arr[n_arr++] = fz_alloc(n_nm);
        for (j = 0; j < n_nm; ++j) bias[j] = fz_value(&r, specials, &finite);
        mask.bias = bias;
    }
    exact = mha_workspace_size(&s, batch, n, m);
    ws_bytes = (ws_mode & 3) == 1 ? exact - 1 - (size_t)(ws_mode >> 5) : exact; /* sometimes short */
    off = (size_t)(ws_mode >> 2) % 64u;
    ws_block = (uint8_t *)malloc(off + ws_bytes + 1);
    ws = (ws_mode & 3) == 2 && ws_mode > 200 ? NULL : ws_block + off;
    switch (null_which) { /* the pointer chosen to be NULL */
    case 3: w.w_q = NULL; break;
    case 4: w.w_k = NULL; break;
    case 5: w.w_v = NULL; break;
    case 6: w.w_o = NULL; break;
    case 7: q = NULL; break;
    case 8: k = NULL; break;
    case 9: v = NULL; break;
    case 10: out = NULL; break;
    case 11: w.a_q = NULL; break;
    case 12: w.a_k = NULL; break;
    case 13: w.a_v = NULL; break;
    default: break;
    }
    want = fuzz_expected_status(&s, batch, n, m, null_which, use_mask ? &mask : NULL, want_attn, ws, ws_bytes);
    got = mha_forward(null_which == 1 ? NULL : &s, null_which == 2 ? NULL : &w, batch, n, m, q, k, v,
                      use_mask ? &mask : NULL, out, attn, ws, ws_bytes);
    if (got != want) FZ_FAIL("status %d, predicted %d", (int)got, (int)want);
#if defined(MHA_FAST) && MHA_FAST
    if (got == MHA_OK && !fz_huge) { /* the same rules as the reference path, NaN and inf included */
        size_t rb = mha_reference_workspace_size(&s, batch, n, m);
        float *ro = fz_alloc(n_out), *ra = want_attn ? fz_alloc(n_attn) : NULL, mx = 0.0f;
        void *rw = malloc(rb);
        if (mha_forward_reference(&s, &w, batch, n, m, q, k, v, use_mask ? &mask : NULL, ro, ra, rw, rb) != MHA_OK)
            FZ_FAIL("reference path: not MHA_OK");
        for (j = 0; j < n_out; ++j) mx = isfinite(ro[j]) && fabsf(ro[j]) > mx ? fabsf(ro[j]) : mx;
        int wo_finite = 1; /* an inf in W_o multiplies the heads' outputs, which the two paths round
                              differently: where one is near 0 its sign (or 0 itself) decides inf, -inf or
                              NaN, so there the two need only both be non-finite */
        for (j = 0; j < c.w_o; ++j) wo_finite &= isfinite(arr[6][j]) != 0;
        for (j = 0; j < n_out; ++j) {
            int same = isnan(out[j]) ? isnan(ro[j]) : isinf(out[j]) ? out[j] == ro[j]
                     : isfinite(ro[j]) && fabsf(out[j] - ro[j]) <= 1e-4f * (1.0f + mx);
            if (!wo_finite && !isfinite(out[j]) && !isfinite(ro[j])) same = 1;
            if (!same) FZ_FAIL("fast out[%lu] = %.9g, reference %.9g", (unsigned long)j, (double)out[j], (double)ro[j]);
        }
        for (j = 0; ra && j < n_attn; ++j) {
            int same = isnan(attn[j]) ? isnan(ra[j]) : fabsf(attn[j] - ra[j]) <= 1e-4f;
            if (!same) FZ_FAIL("fast attn[%lu] = %.9g, reference %.9g", (unsigned long)j, (double)attn[j], (double)ra[j]);
        }
        free(ro);
        free(ra);
        free(rw);
        ++fuzz_count_fast_compared;
    }
#endif
    if (got == MHA_OK && finite) {
        double *ref = (double *)malloc((n_out ? n_out : 1) * sizeof(double));
        double *ref_attn = (double *)malloc((n_attn ? n_attn : 1) * sizeof(double));
        double mx = 0.0;
        for (j = 0; j < n_out; ++j)
            if (!isfinite(out[j])) FZ_FAIL("finite inputs gave out[%lu] = %g", (unsigned long)j, (double)out[j]);
        naive_forward(&s, &w, batch, n, m, q, k, v, use_mask ? &mask : NULL, ref, ref_attn);
        for (j = 0; j < n_out; ++j) mx = fabs(ref[j]) > mx ? fabs(ref[j]) : mx;
        for (j = 0; j < n_out; ++j)
            if (fabs((double)out[j] - ref[j]) > 1e-4 * (1.0 + mx))
                FZ_FAIL("out[%lu] = %.9g, naive %.9g", (unsigned long)j, (double)out[j], ref[j]);
        for (j = 0; attn && j < n_attn; ++j)
            if (fabs((double)attn[j] - ref_attn[j]) > 1e-4)
                FZ_FAIL("attn[%lu] = %.9g, naive %.9g", (unsigned long)j, (double)attn[j], ref_attn[j]);
        free(ref);
        free(ref_attn);
        ++fuzz_count_ok_compared;
        if (!fz_huge && null_which == 0) {
            fz_decode(&r, &s, &w, batch);
            fz_backward(&r, &s, &w, batch, n, m, q, k, v, use_mask ? &mask : NULL, finite);
            fz_q8(&r, &s, batch, n, m, use_mask ? &mask : NULL);
        }
    }
    for (i = 0; i < n_arr; ++i) free(arr[i]);
    free(lens);
    free(keep);
    free(ws_block);
    return 0;
}
