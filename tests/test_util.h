/* Small helpers shared by the tests: a counter of checks, a deterministic
   random generator, and random attention problems. */
#ifndef TEST_UTIL_H
#define TEST_UTIL_H
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../mha.h"

#if defined(__GNUC__) || defined(__clang__)
#define TU_UNUSED __attribute__((unused))
#else
#define TU_UNUSED
#endif

static int tu_passed, tu_failed;

/* Counts one check; prints it when it fails. */
#define CHECK(cond, ...)                                             \
    do {                                                             \
        if (cond) {                                                  \
            ++tu_passed;                                             \
        } else {                                                     \
            ++tu_failed;                                             \
            printf("FAIL %s:%d: ", __FILE__, __LINE__);              \
            printf(__VA_ARGS__);                                     \
            printf("\n");                                            \
        }                                                            \
    } while (0)

TU_UNUSED static int tu_summary(void) {
    printf("%d passed, %d failed\n", tu_passed, tu_failed);
    return tu_failed ? 1 : 0;
}

TU_UNUSED static uint32_t tu_rng = 12345u;
TU_UNUSED static void tu_seed(uint32_t s) { tu_rng = s ? s : 1u; }
TU_UNUSED static uint32_t tu_next(void) {
    tu_rng ^= tu_rng << 13;
    tu_rng ^= tu_rng >> 17;
    tu_rng ^= tu_rng << 5;
    return tu_rng;
}
/* uniform in [lo, hi) */
TU_UNUSED static float tu_uniform(float lo, float hi) {
    return lo + (hi - lo) * (float)(tu_next() >> 8) * (1.0f / 16777216.0f);
}

TU_UNUSED static float *tu_floats(size_t count, float scale) {
    float *p = (float *)malloc((count ? count : 1) * sizeof(float));
    size_t i;
    if (!p) { /* a small target out of heap: a failure, not writes through NULL */
        printf("FAIL tu_floats: no memory for %lu floats\n", (unsigned long)count);
        exit(1);
    }
    for (i = 0; i < count; ++i) p[i] = tu_uniform(-scale, scale);
    return p;
}

/* A shape of these sizes (kv_heads kv; additive: p_k = p_q + 1, p_a 5). */
TU_UNUSED static mha_shape shape_of(int32_t heads, int32_t kv, int32_t d_q, int32_t d_k, int32_t d_v, int32_t p_qk,
                          int32_t p_v, int32_t p_o, int additive) {
    mha_shape s;
    memset(&s, 0, sizeof s);
    s.heads = heads; s.kv_heads = kv; s.d_q = d_q; s.d_k = d_k; s.d_v = d_v;
    s.p_q = p_qk; s.p_k = additive ? p_qk + 1 : p_qk; s.p_v = p_v; s.p_o = p_o;
    s.score = additive ? MHA_SCORE_ADDITIVE : MHA_SCORE_DOT;
    s.p_a = additive ? 5 : 0;
    return s;
}

/* A random problem of a given shape: weights, inputs and room for results. */
typedef struct tu_problem {
    mha_shape s;
    mha_weights w;
    int32_t batch, n, m;
    float *q, *k, *v, *out, *attn;
    float *owned[20];
    int n_owned;
    void *ws;
    size_t ws_bytes;
} tu_problem;

TU_UNUSED static float *tu_own(tu_problem *p, float *f) {
    p->owned[p->n_owned++] = f;
    return f;
}

TU_UNUSED static void tu_problem_make(tu_problem *p, const mha_shape *s, int32_t batch, int32_t n, int32_t m, int bias) {
    mha_weight_counts c;
    memset(p, 0, sizeof *p);
    p->s = *s;
    p->batch = batch; p->n = n; p->m = m;
    if (mha_weight_counts_get(s, &c) != MHA_OK) {
        printf("tu_problem_make: bad shape\n");
        exit(2);
    }
    p->w.w_q = tu_own(p, tu_floats(c.w_q, 1.0f / sqrtf((float)s->d_q)));
    p->w.w_k = tu_own(p, tu_floats(c.w_k, 1.0f / sqrtf((float)s->d_k)));
    p->w.w_v = tu_own(p, tu_floats(c.w_v, 1.0f / sqrtf((float)s->d_v)));
    p->w.w_o = tu_own(p, tu_floats(c.w_o, 1.0f / sqrtf((float)(s->heads * s->p_v))));
    if (bias) {
        p->w.b_q = tu_own(p, tu_floats(c.b_q, 0.5f));
        p->w.b_k = tu_own(p, tu_floats(c.b_k, 0.5f));
        p->w.b_v = tu_own(p, tu_floats(c.b_v, 0.5f));
        p->w.b_o = tu_own(p, tu_floats(c.b_o, 0.5f));
    }
    if (s->score == MHA_SCORE_ADDITIVE) {
        p->w.a_q = tu_own(p, tu_floats(c.a_q, 1.0f / sqrtf((float)s->p_q)));
        p->w.a_k = tu_own(p, tu_floats(c.a_k, 1.0f / sqrtf((float)s->p_k)));
        p->w.a_v = tu_own(p, tu_floats(c.a_v, 1.0f));
    }
    p->q = tu_own(p, tu_floats((size_t)batch * (size_t)n * (size_t)s->d_q, 1.0f));
    p->k = tu_own(p, tu_floats((size_t)batch * (size_t)m * (size_t)s->d_k, 1.0f));
    p->v = tu_own(p, tu_floats((size_t)batch * (size_t)m * (size_t)s->d_v, 1.0f));
    p->out = tu_own(p, tu_floats((size_t)batch * (size_t)n * (size_t)s->p_o, 0.0f));
    p->attn = tu_own(p, tu_floats((size_t)batch * (size_t)s->heads * (size_t)n * (size_t)m, 0.0f));
    p->ws_bytes = mha_workspace_size(s, batch, n, m);
    p->ws = malloc(p->ws_bytes ? p->ws_bytes : 1);
}

/* A random mix of the decoder knobs on shape s (its sizes set): bit 0 RoPE
   (random dimension, pairing and base), 1 ALiBi, 2 soft-cap, 3 sinks (the
   caller adds them to the weights: tu_sinks). Returns the bits turned on. */
TU_UNUSED static int tu_extras(mha_shape *s) {
    int32_t lim = s->p_q < s->p_k ? s->p_q : s->p_k;
    int on = (int)(tu_next() % 16u);
    if ((on & 1) && lim >= 2) {
        s->rope_dim = 2 * (1 + (int32_t)(tu_next() % (uint32_t)(lim / 2)));
        s->rope_pairs = (int32_t)(tu_next() % 2u);
        s->rope_theta = tu_next() % 2u ? 0.0f : tu_uniform(2.0f, 1e6f);
    } else {
        on &= ~1;
    }
    if (on & 2) s->alibi = 1;
    if (on & 4) s->softcap = tu_uniform(0.3f, 20.0f);
    return on;
}
/* Random sinks in p's weights when bit 3 of on is set. */
TU_UNUSED static void tu_sinks(tu_problem *p, int on) {
    if (on & 8) p->w.sinks = tu_own(p, tu_floats((size_t)p->s.heads, 3.0f));
}

/* 16-bit copies (type MHA_F16 or MHA_BF16, rounded RNE) of the four weight
   matrices of w, and float arrays of the same values: w16 and w32 are w with
   them in place (16-bit tests compare the two). */
typedef struct tu_w16 {
    uint16_t *h[4];
    float *f[4];
    mha_weights w16, w32;
} tu_w16;

TU_UNUSED static void tu_w16_make(tu_w16 *b, const mha_shape *s, const mha_weights *w, int32_t type) {
    mha_weight_counts wc;
    const void *src[4];
    size_t counts[4], k, i;
    mha_weight_counts_get(s, &wc);
    counts[0] = wc.w_q; counts[1] = wc.w_k; counts[2] = wc.w_v; counts[3] = wc.w_o;
    src[0] = w->w_q; src[1] = w->w_k; src[2] = w->w_v; src[3] = w->w_o;
    for (k = 0; k < 4; ++k) {
        b->h[k] = (uint16_t *)malloc((counts[k] ? counts[k] : 1) * sizeof(uint16_t));
        b->f[k] = (float *)malloc((counts[k] ? counts[k] : 1) * sizeof(float));
        for (i = 0; i < counts[k]; ++i) {
            const float x = ((const float *)src[k])[i];
            b->h[k][i] = type == MHA_F16 ? mha_f16_from_f32(x) : mha_bf16_from_f32(x);
            b->f[k][i] = type == MHA_F16 ? mha_f32_from_f16(b->h[k][i]) : mha_f32_from_bf16(b->h[k][i]);
        }
    }
    b->w16 = b->w32 = *w;
    b->w16.w_q = b->h[0]; b->w16.w_k = b->h[1]; b->w16.w_v = b->h[2]; b->w16.w_o = b->h[3];
    b->w16.type = type;
    b->w32.w_q = b->f[0]; b->w32.w_k = b->f[1]; b->w32.w_v = b->f[2]; b->w32.w_o = b->f[3];
}

TU_UNUSED static void tu_w16_free(tu_w16 *b) {
    int k;
    for (k = 0; k < 4; ++k) {
        free(b->h[k]);
        free(b->f[k]);
    }
}

TU_UNUSED static void tu_problem_free(tu_problem *p) {
    int i;
    for (i = 0; i < p->n_owned; ++i) free(p->owned[i]);
    free(p->ws);
    p->n_owned = 0;
}

TU_UNUSED static mha_status tu_forward(tu_problem *p, const mha_mask *mask, float *attn) {
    return mha_forward(&p->s, &p->w, p->batch, p->n, p->m, p->q, p->k, p->v, mask, p->out, attn, p->ws,
                       p->ws_bytes);
}

TU_UNUSED static float tu_max_abs(const float *a, size_t count) {
    float mx = 0.0f;
    size_t i;
    for (i = 0; i < count; ++i)
        if (fabsf(a[i]) > mx || a[i] != a[i]) mx = a[i] != a[i] ? a[i] : fabsf(a[i]);
    return mx;
}
/* max |a - b|; NaN if either has a NaN where the other does not */
TU_UNUSED static float tu_max_diff(const float *a, const float *b, size_t count) {
    float mx = 0.0f;
    size_t i;
    for (i = 0; i < count; ++i) {
        float d = fabsf(a[i] - b[i]);
        if (d != d) return d;
        if (d > mx) mx = d;
    }
    return mx;
}
/* |got - want| in units of the fp32 ulp at want (the spacing of floats there;
   2^-149 among the subnormals); 1e30 for a nonzero result where want is 0. */
TU_UNUSED static double tu_ulp_err(float got, double want) {
    int e;
    double spacing;
    if (want == 0.0) return got == 0.0f ? 0.0 : 1e30;
    frexp(want, &e); /* want = m 2^e, 0.5 <= |m| < 1 */
    spacing = ldexp(1.0, e - 24);
    if (fabs(want) < 1.1754943508222875e-38) spacing = ldexp(1.0, -149);
    return fabs((double)got - want) / spacing;
}
TU_UNUSED static int tu_all_finite(const float *a, size_t count) {
    size_t i;
    for (i = 0; i < count; ++i)
        if (!(a[i] >= -3.402823466e38f && a[i] <= 3.402823466e38f)) return 0;
    return 1;
}
#endif
