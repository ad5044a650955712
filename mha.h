/* mha.h - v0.1.0 - general-form multi-head attention (fp32) in one C header.
   licence: see end of file.

   Do this:
       #define MHA_IMPLEMENTATION
   before you include this file in *one* C or C++ file to create the
   implementation. Every other file includes it plainly.

   Example (self-attention, 2 heads, d = 8, sizes of your choosing):

       #define MHA_IMPLEMENTATION
       #include "mha.h"
       mha_shape s = {0};                     // zero means default
       s.heads = 2; s.d_q = s.d_k = s.d_v = 8;
       s.p_q = s.p_k = s.p_v = 4; s.p_o = 8;  // score = MHA_SCORE_DOT
       mha_weights w = {0};                   // w.w_q, w.w_k, w.w_v, w.w_o = your arrays
       size_t bytes = mha_workspace_size(&s, batch, n, m);   // 0: bad shape
       mha_status st = mha_forward(&s, &w, batch, n, m, q, k, v, NULL,
                                   out, NULL, workspace, bytes);
       if (st != MHA_OK) puts(mha_status_string(st));

   What it computes, for each query q (d_q), keys k_j (d_k), values v_j (d_v):
       q_i  = W_q^(i) q + b_q^(i)                      (p_q)   head i = 0..h-1
       k_ij = W_k^(g) k_j + b_k^(g), v_ij likewise    (p_k, p_v), g = i / (h / kv_heads)
       h_i  = sum_j softmax_j(a(q_i, k_ij)) v_ij       (p_v)
       out  = W_o [h_0; ...; h_{h-1}] + b_o            (p_o)
   with a = scale * q_i . k_ij (MHA_SCORE_DOT) or
        a = w_a^(i) . tanh(A_q^(i) q_i + A_k^(i) k_ij) (MHA_SCORE_ADDITIVE).

   Configuration (define before including; "impl" = only where
   MHA_IMPLEMENTATION is defined, "all" = in every file that includes mha.h):
       MHA_CONFIG_FILE        "file.h"  included first, may set all below   (all)
       MHA_STATIC             0/1  private static copy of the library        (all)
       MHA_NO_STATUS_STRINGS  0/1  mha_status_string() returns ""           (impl)
       MHA_NO_LIBM            0/1  own exp, tanh, sqrt instead of libm's    (impl)
       MHA_NO_ADDITIVE        0/1  compile out additive scoring             (impl)
       MHA_EXPF(x) MHA_TANHF(x) MHA_SQRTF(x)   math functions to use        (impl)
   No option changes a struct or prototype. The implementation calls no libc
   function; with MHA_NO_LIBM it needs no libm and builds -ffreestanding.

   Memory: the library never allocates; the caller passes a workspace of
   mha_workspace_size() bytes (any alignment), or MHA_WORKSPACE_BYTES() for a
   static buffer. Stack use is fixed, with no recursion and no variable-length
   arrays: at most about 0.5 KiB on 32-bit microcontrollers (README, "Size and
   stack").
   Threads: there is no mutable static state; calls are reentrant and may run
   concurrently when each has its own workspace and output.
*/
#ifdef MHA_CONFIG_FILE
#include MHA_CONFIG_FILE
#endif

#ifndef MHA_H_INCLUDED
#define MHA_H_INCLUDED

#include <stddef.h>
#include <stdint.h>

#define MHA_VERSION_MAJOR 0
#define MHA_VERSION_MINOR 1
#define MHA_VERSION_PATCH 0
#define MHA_VERSION_STRING "0.1.0"

#ifndef MHA_STATIC
#define MHA_STATIC 0
#endif
#if MHA_STATIC != 0 && MHA_STATIC != 1
#error "MHA_STATIC must be 0 or 1"
#endif
#ifndef MHADEF
#if MHA_STATIC && (defined(__GNUC__) || defined(__clang__))
#define MHADEF static __attribute__((unused)) /* a user need not call every function */
#elif MHA_STATIC
#define MHADEF static
#else
#define MHADEF extern
#endif
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Every call returns one of these. Values are fixed and never renumbered. */
typedef enum mha_status {
    MHA_OK = 0,
    MHA_ERR_NULL = -1,      /* a required pointer is NULL */
    MHA_ERR_SHAPE = -2,     /* a size is out of range or sizes disagree */
    MHA_ERR_OVERFLOW = -3,  /* a byte count does not fit in size_t */
    MHA_ERR_WORKSPACE = -4, /* workspace NULL or smaller than mha_workspace_size() */
    MHA_ERR_MASK = -5       /* a valid length is < 0 or > m */
} mha_status;

typedef enum mha_score {
    MHA_SCORE_DOT = 0,     /* scale * q_i . k_ij; needs p_q == p_k */
    MHA_SCORE_ADDITIVE = 1 /* w_a . tanh(A_q q_i + A_k k_ij); hidden size p_a */
} mha_score;

/* Sizes of one attention layer. Zero means default where noted, so
   `mha_shape s = {0};` plus the sizes you need is a complete set-up. */
typedef struct mha_shape {
    int32_t heads, kv_heads;      /* h >= 1; key/value heads, 0 means heads; heads % kv_heads == 0 */
    int32_t d_q, d_k, d_v;        /* sizes of one query, key, value vector (>= 1) */
    int32_t p_q, p_k, p_v, p_o;   /* per-head projected sizes and the output size (>= 1) */
    mha_score score;              /* MHA_SCORE_DOT or MHA_SCORE_ADDITIVE */
    int32_t p_a;                  /* additive only: hidden size (>= 1); ignored for dot */
    float scale;                  /* dot only: score multiplier; 0 means 1/sqrt(p_k); must be finite */
} mha_shape;

/* Weights, row-major in the Linear convention (out_features x in_features),
   so PyTorch's tensors can be passed as they are. Biases may be NULL (zero).
   Rows i*p_q .. i*p_q+p_q-1 of w_q are W_q^(i); likewise for k and v with the
   kv head index. Column block i*p_v .. of w_o multiplies h_i. */
typedef struct mha_weights {
    const float *w_q, *b_q;       /* [heads*p_q][d_q], [heads*p_q] */
    const float *w_k, *b_k;       /* [kv_heads*p_k][d_k], [kv_heads*p_k] */
    const float *w_v, *b_v;       /* [kv_heads*p_v][d_v], [kv_heads*p_v] */
    const float *w_o, *b_o;       /* [p_o][heads*p_v], [p_o] */
    const float *a_q, *a_k, *a_v; /* additive only: A_q [heads][p_a][p_q], A_k [heads][p_a][p_k],
                                     w_a [heads][p_a] */
} mha_weights;

/* Which keys a query may see. Every mask given is ANDed. A query row that
   sees no key at all gets a zero head output and zero attention weights, so
   its output is b_o (never NaN). */
typedef struct mha_mask {
    int32_t causal;               /* nonzero: query i sees key j only if j <= i + causal_offset */
    int32_t causal_offset;        /* 0: top-left (PyTorch is_causal); m - n: bottom-right; any value */
    const int32_t *valid_lens;    /* NULL, [batch] or [batch][n]: keys j >= len are masked; 0 <= len <= m */
    int32_t valid_lens_per_query; /* 0: valid_lens is [batch]; nonzero: [batch][n] */
    const uint8_t *keep;          /* NULL or [batch][n][m]: nonzero = may attend (PyTorch's bool mask is the opposite) */
    const float *bias;            /* NULL or [batch][n][m]: added to the scores before the softmax */
} mha_mask;

/* Element counts of each weight array for a shape (0 for arrays the score kind does not use). */
typedef struct mha_weight_counts {
    size_t w_q, b_q, w_k, b_k, w_v, b_v, w_o, b_o, a_q, a_k, a_v;
} mha_weight_counts;

/* A string for people; never NULL, also for unknown codes ("" under MHA_NO_STATUS_STRINGS). */
MHADEF const char *mha_status_string(mha_status status);

/* Bytes of workspace that mha_forward(shape, ., batch, n, m, ...) needs, at any
   alignment; mha_workspace_size(shape, 1, 1, m) is what mha_head needs.
   Returns 0 when the shape or a count is invalid, or when the byte count of
   the workspace, a weight, queries, keys, values or out overflows size_t
   (mha_forward then tells which; an overflow of attn or of a [batch][n][m]
   mask only mha_forward can see). Equal to MHA_WORKSPACE_BYTES() below. */
MHADEF size_t mha_workspace_size(const mha_shape *shape, int32_t batch, int32_t n, int32_t m);

/* The same number as a constant expression, for static buffers. Pass the real
   kv_heads (not 0), and p_a = 0 for dot scoring. Evaluated in size_t: the
   caller makes sure it does not overflow. */
#define MHA_WORKSPACE_BYTES(heads, kv_heads, p_q, p_k, p_v, p_a, m)                           \
    (((size_t)(kv_heads) * (size_t)(m) * ((size_t)(p_k) + (size_t)(p_v)) +                    \
      (size_t)(heads) * (size_t)(m) * (size_t)(p_a) + (size_t)(heads) * (size_t)(p_q) +        \
      (size_t)(p_a) + (size_t)(m) + (size_t)(heads) * (size_t)(p_v)) * sizeof(float) +         \
     MHA_WORKSPACE_ALIGN)
#define MHA_WORKSPACE_ALIGN 64 /* the workspace is used from its first 64-byte boundary */

/* Fills *counts with the element count of every weight array.
   Returns MHA_ERR_NULL, MHA_ERR_SHAPE, MHA_ERR_OVERFLOW or MHA_OK. */
MHADEF mha_status mha_weight_counts_get(const mha_shape *shape, mha_weight_counts *counts);

/* Multi-head attention for a batch of query sequences.
     shape      in   sizes, see mha_shape
     w          in   weights; w_q, w_k, w_v, w_o required (and a_q, a_k, a_v for additive)
     batch,n,m  in   sequences, queries per sequence, keys per sequence (each >= 0;
                     batch or n == 0: nothing to compute; m == 0: every row is fully masked)
     queries    in   [batch][n][d_q]
     keys       in   [batch][m][d_k]
     values     in   [batch][m][d_v]
     mask       in   NULL (every query sees every key) or see mha_mask
     out        out  [batch][n][p_o]
     attn       out  NULL or [batch][heads][n][m]: the attention weights
     workspace  tmp  mha_workspace_size(shape, batch, n, m) bytes, any alignment
   Returns, checking in this order: MHA_ERR_NULL (shape or w), MHA_ERR_SHAPE,
   MHA_ERR_NULL (any other required pointer), MHA_ERR_OVERFLOW, MHA_ERR_WORKSPACE,
   MHA_ERR_MASK, else MHA_OK. On an error nothing is written.
   Reentrant. out and attn must not overlap any input or the workspace. */
MHADEF mha_status mha_forward(const mha_shape *shape, const mha_weights *w, int32_t batch, int32_t n,
                              int32_t m, const float *queries, const float *keys, const float *values,
                              const mha_mask *mask, float *out, float *attn, void *workspace,
                              size_t workspace_bytes);

/* Head `head` (0-based) for one query: head_out = h_i of the formula above.
     query [d_q], keys [m][d_k], values [m][d_v], in; head_out [p_v], out.
     valid_len: keys j >= valid_len are masked (pass m for none); 0 <= valid_len <= m.
     workspace: mha_workspace_size(shape, 1, 1, m) bytes.
   Needs w_q, w_k, w_v (and a_q, a_k, a_v for additive); w_o is not used.
   Returns as mha_forward; a head outside [0, heads) is MHA_ERR_SHAPE. */
MHADEF mha_status mha_head(const mha_shape *shape, const mha_weights *w, int32_t head, const float *query,
                           const float *keys, const float *values, int32_t m, int32_t valid_len,
                           float *head_out, void *workspace, size_t workspace_bytes);

/* concat[heads*p_v] = [head_outs[0]; ...; head_outs[heads-1]], each [p_v].
   Returns, in this order: MHA_ERR_NULL (head_outs or concat), MHA_ERR_SHAPE (heads or
   p_v < 1), MHA_ERR_OVERFLOW, MHA_ERR_NULL (any head_outs[i]), else MHA_OK. */
MHADEF mha_status mha_concat(int32_t heads, int32_t p_v, const float *const *head_outs, float *concat);

/* out[p_o] = W_o concat + b_o, concat [heads*p_v]. Needs only w_o (b_o optional). */
MHADEF mha_status mha_output(const mha_shape *shape, const mha_weights *w, const float *concat, float *out);

#ifdef __cplusplus
}
#endif
#endif /* MHA_H_INCLUDED */

/* ======================================================================== */
/*  Stop reading here if you only want the API.                             */
/* ======================================================================== */

#ifdef MHA_IMPLEMENTATION
#ifndef MHA_IMPLEMENTATION_INCLUDED
#define MHA_IMPLEMENTATION_INCLUDED

#ifndef MHA_NO_STATUS_STRINGS
#define MHA_NO_STATUS_STRINGS 0
#endif
#if MHA_NO_STATUS_STRINGS != 0 && MHA_NO_STATUS_STRINGS != 1
#error "MHA_NO_STATUS_STRINGS must be 0 or 1"
#endif

#ifndef MHA_NO_LIBM
#define MHA_NO_LIBM 0
#endif
#if MHA_NO_LIBM != 0 && MHA_NO_LIBM != 1
#error "MHA_NO_LIBM must be 0 or 1"
#endif
#ifndef MHA_NO_ADDITIVE
#define MHA_NO_ADDITIVE 0
#endif
#if MHA_NO_ADDITIVE != 0 && MHA_NO_ADDITIVE != 1
#error "MHA_NO_ADDITIVE must be 0 or 1"
#endif

#include <float.h>

#if MHA_NO_LIBM
#ifndef MHA_EXPF
#define MHA_EXPF(x) mha__expf(x)
#endif
#ifndef MHA_TANHF
#define MHA_TANHF(x) mha__tanhf(x)
#endif
#ifndef MHA_SQRTF
#define MHA_SQRTF(x) mha__sqrtf(x)
#endif
#else
#if !defined(MHA_EXPF) || !defined(MHA_TANHF) || !defined(MHA_SQRTF)
#include <math.h>
#endif
#ifndef MHA_EXPF
#define MHA_EXPF(x) expf(x)
#endif
#ifndef MHA_TANHF
#define MHA_TANHF(x) tanhf(x)
#endif
#ifndef MHA_SQRTF
#define MHA_SQRTF(x) sqrtf(x)
#endif
#endif

#if defined(__GNUC__) || defined(__clang__)
#define MHA__PRIVATE static __attribute__((unused))
#else
#define MHA__PRIVATE static
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---- math without libm (MHA_NO_LIBM) ---------------------------------------- */
#if MHA_NO_LIBM

/* Copies the 4 bytes of a float or uint32_t: bit casts without type punning or libc. */
MHA__PRIVATE void mha__copy4(void *dst, const void *src) {
    unsigned char *d = (unsigned char *)dst;
    const unsigned char *s = (const unsigned char *)src;
    int i;
    for (i = 0; i < 4; ++i) d[i] = s[i];
}
MHA__PRIVATE uint32_t mha__bits(float f) {
    uint32_t u = 0;
    mha__copy4(&u, &f);
    return u;
}
MHA__PRIVATE float mha__from_bits(uint32_t u) {
    float f = 0.0f;
    mha__copy4(&f, &u);
    return f;
}

/* e^x. x = k ln2 + r with |r| <= ln2/2 (ln2 split in two for an exact k ln2),
   e^r by its Taylor series to r^7, and 2^k applied in two halves so that no
   step leaves the normal range. Below ln(FLT_MIN) it returns exactly 0 (no
   subnormal results); above ln(FLT_MAX) it returns +inf; NaN stays NaN.
   Measured error: see tests/test_mathf.c. */
MHA__PRIVATE float mha__expf(float x) {
    float kf, r, q, p;
    int32_t k, k1;
    if (x != x) return x;
    if (x > 88.8f) return FLT_MAX * 2.0f;
    if (x < -87.33654475f) return 0.0f;
    kf = x * 1.44269504f;
    k = (int32_t)(kf < 0.0f ? kf - 0.5f : kf + 0.5f);
    r = x - (float)k * 0.693145751953125f - (float)k * 1.428606765330187e-06f;
    q = 0.5f + r * (1.6666667e-1f + r * (4.1666668e-2f + r * (8.3333338e-3f + r * (1.3888889e-3f + r * 1.9841270e-4f))));
    p = 1.0f + (r + r * r * q);
    k1 = k / 2;
    return p * mha__from_bits((uint32_t)(k1 + 127) << 23) * mha__from_bits((uint32_t)(k - k1 + 127) << 23);
}

/* tanh x: an odd Taylor polynomial to x^19 for |x| < 0.55, 1 - 2/(e^2|x| + 1)
   above, and +-1 beyond 9 (where tanh rounds to 1 in fp32). */
MHA__PRIVATE float mha__tanhf(float x) {
    float ax = x < 0.0f ? -x : x, t, z;
    if (x != x) return x;
    if (ax > 9.0f) return x < 0.0f ? -1.0f : 1.0f;
    if (ax < 0.55f) {
        z = x * x;
        return x + x * z * (-3.3333334e-1f + z * (1.3333334e-1f + z * (-5.3968254e-2f + z * (2.1869490e-2f +
                   z * (-8.8632355e-3f + z * (3.5921280e-3f + z * (-1.4558344e-3f + z * (5.9002744e-4f +
                   z * -2.3912911e-4f))))))));
    }
    t = 1.0f - 2.0f / (mha__expf(2.0f * ax) + 1.0f);
    return x < 0.0f ? -t : t;
}

/* sqrt x: an initial guess from the exponent bits, then three Newton steps.
   Subnormals are scaled by 2^48 first; x < 0 or NaN gives NaN, +-0 and +inf
   are returned as they are. */
MHA__PRIVATE float mha__sqrtf(float x) {
    float y, z, scale = 1.0f;
    int i;
    if (x != x || x < 0.0f) {
        z = x - x; /* NaN, or 0 for x < 0 */
        return z != z ? z : z / z;
    }
    if (x == 0.0f || x > FLT_MAX) return x;
    if (x < FLT_MIN) {
        x *= 281474976710656.0f; /* 2^48 */
        scale = 5.9604645e-8f;   /* 2^-24 */
    }
    y = mha__from_bits(0x1fbd1df5u + (mha__bits(x) >> 1));
    for (i = 0; i < 3; ++i) y = 0.5f * (y + x / y);
    return y * scale;
}
#endif /* MHA_NO_LIBM */

/* ---- sizes ---------------------------------------------------------------- */

/* Checked size arithmetic: *r = a * b or a + b; returns 0 on overflow. */
MHA__PRIVATE int mha__mul(size_t a, size_t b, size_t *r) {
    if (a != 0 && b > SIZE_MAX / a) return 0;
    *r = a * b;
    return 1;
}
MHA__PRIVATE int mha__add(size_t a, size_t b, size_t *r) {
    if (b > SIZE_MAX - a) return 0;
    *r = a + b;
    return 1;
}
/* 1 if a * b * c floats have a byte count that fits in size_t. */
MHA__PRIVATE int mha__fits3(size_t a, size_t b, size_t c) {
    size_t t;
    return mha__mul(a, b, &t) && mha__mul(t, c, &t) && mha__mul(t, sizeof(float), &t);
}

/* A validated shape with the defaults filled in; sizes as size_t so that
   products such as heads * p_q cannot overflow an int. */
typedef struct mha__plan {
    size_t heads, kv, group;                        /* group = heads / kv: query heads per kv head */
    size_t d_q, d_k, d_v, p_q, p_k, p_v, p_o, p_a;  /* p_a = 0 for dot scoring */
    int additive;
    float scale;
} mha__plan;

/* Checks the sizes of a shape; MHA_OK or MHA_ERR_SHAPE. */
MHA__PRIVATE mha_status mha__plan_make(const mha_shape *s, mha__plan *p) {
    int32_t kv = s->kv_heads == 0 ? s->heads : s->kv_heads;
    if (s->heads < 1 || kv < 1 || s->d_q < 1 || s->d_k < 1 || s->d_v < 1 || s->p_q < 1 || s->p_k < 1 ||
        s->p_v < 1 || s->p_o < 1 || s->heads % kv != 0)
        return MHA_ERR_SHAPE;
    p->heads = (size_t)s->heads;
    p->kv = (size_t)kv;
    p->group = (size_t)(s->heads / kv);
    p->d_q = (size_t)s->d_q; p->d_k = (size_t)s->d_k; p->d_v = (size_t)s->d_v;
    p->p_q = (size_t)s->p_q; p->p_k = (size_t)s->p_k; p->p_v = (size_t)s->p_v; p->p_o = (size_t)s->p_o;
    p->scale = 0.0f;
    if (s->score == MHA_SCORE_DOT) {
        if (s->p_q != s->p_k) return MHA_ERR_SHAPE;
        if (!(s->scale >= -FLT_MAX && s->scale <= FLT_MAX)) return MHA_ERR_SHAPE; /* NaN or inf */
        p->additive = 0;
        p->p_a = 0;
        p->scale = s->scale != 0.0f ? s->scale : 1.0f / MHA_SQRTF((float)s->p_k);
    } else if (s->score == MHA_SCORE_ADDITIVE && !MHA_NO_ADDITIVE) {
        if (s->p_a < 1) return MHA_ERR_SHAPE;
        p->additive = 1;
        p->p_a = (size_t)s->p_a;
    } else {
        return MHA_ERR_SHAPE;
    }
    return MHA_OK;
}

/* 1 if the byte count of every weight array fits in size_t. */
MHA__PRIVATE int mha__weights_fit(const mha__plan *p) {
    return mha__fits3(p->heads, p->p_q, p->d_q) && mha__fits3(p->kv, p->p_k, p->d_k) &&
           mha__fits3(p->kv, p->p_v, p->d_v) && mha__fits3(p->heads, p->p_v, p->p_o) &&
           mha__fits3(p->heads, p->p_a, p->p_q) && mha__fits3(p->heads, p->p_a, p->p_k);
}
/* Element counts of the weight arrays; returns 0 if a byte count overflows. */
MHA__PRIVATE int mha__weight_counts(const mha__plan *p, mha_weight_counts *c) {
    if (!mha__weights_fit(p)) return 0;
    c->b_q = p->heads * p->p_q;
    c->b_k = p->kv * p->p_k;
    c->b_v = p->kv * p->p_v;
    c->b_o = p->p_o;
    c->w_q = c->b_q * p->d_q;
    c->w_k = c->b_k * p->d_k;
    c->w_v = c->b_v * p->d_v;
    c->w_o = p->p_o * p->heads * p->p_v;
    c->a_q = p->heads * p->p_a * p->p_q;
    c->a_k = p->heads * p->p_a * p->p_k;
    c->a_v = p->heads * p->p_a;
    return 1;
}

/* Workspace layout, in floats from the aligned base. mha_workspace_size and
   every call that uses a workspace go through this one function. */
typedef struct mha__layout {
    size_t kp, vp, ak, qp, aq, sc, cat; /* [kv][m][p_k], [kv][m][p_v], [heads][m][p_a], [heads*p_q],
                                           [p_a], [m], [heads*p_v] */
    size_t bytes;                       /* total, with the alignment slack */
} mha__layout;

/* Returns 0 if the layout's byte count overflows size_t. Also checks that the
   weight arrays' byte counts fit, so every later product is safe. */
MHA__PRIVATE int mha__layout_make(const mha__plan *p, size_t m, mha__layout *l) {
    size_t t, off;
    if (!mha__weights_fit(p)) return 0;
    if (!mha__mul(m, p->p_k + p->p_v, &t) || !mha__mul(t, p->kv, &off)) return 0; /* kp, vp */
    l->kp = 0;
    l->vp = m * p->kv * p->p_k;
    l->ak = off;
    if (!mha__mul(m, p->p_a, &t) || !mha__mul(t, p->heads, &t) || !mha__add(off, t, &off)) return 0;
    l->qp = off;
    if (!mha__add(off, p->heads * p->p_q, &off)) return 0;
    l->aq = off;
    if (!mha__add(off, p->p_a, &off)) return 0;
    l->sc = off;
    if (!mha__add(off, m, &off)) return 0;
    l->cat = off;
    if (!mha__add(off, p->heads * p->p_v, &off)) return 0;
    return mha__mul(off, sizeof(float), &t) && mha__add(t, MHA_WORKSPACE_ALIGN, &l->bytes);
}

/* The workspace's first MHA_WORKSPACE_ALIGN-byte boundary, as floats. */
MHA__PRIVATE float *mha__align(void *workspace) {
    uintptr_t a = (uintptr_t)workspace;
    size_t skip = (size_t)((MHA_WORKSPACE_ALIGN - a % MHA_WORKSPACE_ALIGN) % MHA_WORKSPACE_ALIGN);
    return (float *)(void *)((unsigned char *)workspace + skip);
}

/* ---- reference kernels ---------------------------------------------------- */

/* -inf, the mark of a masked score (float.h has no INFINITY). */
MHA__PRIVATE float mha__neg_inf(void) { return -(FLT_MAX * 2.0f); }

/* x . y over n elements, fp32 accumulation in index order. */
MHA__PRIVATE float mha__dot(const float *x, const float *y, size_t n) {
    float s = 0.0f;
    size_t i;
    for (i = 0; i < n; ++i) s += x[i] * y[i];
    return s;
}

/* y[r][o] = sum_i W[o][i] x[r][i] + b[o]: x is [rows][in], W is [out][in], b is [out] or NULL. */
MHA__PRIVATE void mha__linear(const float *x, size_t rows, size_t in, const float *W, const float *b,
                              size_t out, float *y) {
    size_t r, o;
    for (r = 0; r < rows; ++r)
        for (o = 0; o < out; ++o) y[r * out + o] = mha__dot(W + o * in, x + r * in, in) + (b ? b[o] : 0.0f);
}

/* In place: s[j] = exp(s[j] - max) / sum over the row. -inf entries are masked
   and become 0; a row with every entry masked becomes all zeros. If the max is
   +inf, the +inf entries share the weight equally (the softmax's limit). A NaN
   anywhere makes the whole row NaN. The max starts from the first unmasked entry. */
MHA__PRIVATE void mha__softmax_row(float *s, size_t m) {
    const float ninf = mha__neg_inf();
    float mx, sum = 0.0f;
    size_t j, first = 0;
    while (first < m && s[first] == ninf) ++first;
    if (first == m) {
        for (j = 0; j < m; ++j) s[j] = 0.0f;
        return;
    }
    mx = s[first];
    for (j = first + 1; j < m; ++j)
        if (s[j] > mx || s[j] != s[j]) mx = s[j]; /* once NaN, mx stays NaN */
    for (j = 0; j < m; ++j) {
        if (mx > FLT_MAX) s[j] = s[j] > FLT_MAX ? 1.0f : 0.0f;   /* +inf max: the limit */
        else s[j] = s[j] == ninf ? 0.0f : MHA_EXPF(s[j] - mx);
        sum += s[j]; /* >= 1: the max contributes exp(0) = 1 */
    }
    for (j = 0; j < m; ++j) s[j] /= sum;
}

/* Keys j < result pass causality and the valid length; exact for any
   causal_offset, with no overflow (i, m >= 0, so m - i and -i fit in int32). */
MHA__PRIVATE size_t mha__visible(int32_t m, int32_t i, const mha_mask *mask, int32_t valid_len) {
    int32_t hi = valid_len;
    if (mask && mask->causal) {
        int32_t c, off = mask->causal_offset;
        if (off >= m - i) c = m;     /* i + off + 1 >= m + 1 */
        else if (off < -i) c = 0;    /* i + off < 0 */
        else c = i + off + 1;
        if (c < hi) hi = c;
    }
    return (size_t)hi;
}

/* What one head needs to attend for one query. */
typedef struct mha__row {
    const float *qp;     /* [p_q] projected query of this head */
    const float *kp;     /* [m][p_k] projected keys of its kv head */
    const float *vp;     /* [m][p_v] projected values of its kv head */
    const float *ak;     /* additive: [m][p_a], A_k^(i) k_ij */
    const float *a_q;    /* additive: A_q^(i), [p_a][p_q] */
    const float *w_a;    /* additive: w_a^(i), [p_a] */
    float *aq;           /* additive scratch: [p_a] */
    const uint8_t *keep; /* NULL or [m] */
    const float *bias;   /* NULL or [m] */
    size_t m, hi;        /* keys; keys j >= hi are masked */
} mha__row;

/* out[p_v] = sum_j softmax_j(a(q, k_j)) v_j for one head and one query; the
   weights are left in sc[m]. Keys of weight exactly 0 are skipped, so a masked
   key's values never reach the output. */
MHA__PRIVATE void mha__attend(const mha__plan *p, const mha__row *r, float *sc, float *out) {
    const float ninf = mha__neg_inf();
    size_t j, a;
    if (p->additive) mha__linear(r->qp, 1, p->p_q, r->a_q, NULL, p->p_a, r->aq);
    for (j = 0; j < r->m; ++j) {
        float s = 0.0f;
        if (j >= r->hi || (r->keep && !r->keep[j])) {
            sc[j] = ninf;
            continue;
        }
#if !MHA_NO_ADDITIVE
        if (p->additive) {
            const float *akj = r->ak + j * p->p_a;
            for (a = 0; a < p->p_a; ++a) s += r->w_a[a] * MHA_TANHF(r->aq[a] + akj[a]);
        } else
#endif
        {
            s = p->scale * mha__dot(r->qp, r->kp + j * p->p_k, p->p_k);
        }
        sc[j] = r->bias ? s + r->bias[j] : s;
    }
    mha__softmax_row(sc, r->m);
    for (a = 0; a < p->p_v; ++a) out[a] = 0.0f;
    for (j = 0; j < r->m; ++j) {
        const float *vj = r->vp + j * p->p_v;
        if (sc[j] == 0.0f) continue;
        for (a = 0; a < p->p_v; ++a) out[a] += sc[j] * vj[a];
    }
}

/* Projects keys [m][d_k] and values [m][d_v] with kv head g's weights into
   kp [m][p_k] and vp [m][p_v]; for additive scoring also ak[i - h0] [m][p_a]
   = A_k^(i) k_ij for query heads i in [h0, h1). */
MHA__PRIVATE void mha__project_kv(const mha__plan *p, const mha_weights *w, size_t g, size_t h0, size_t h1,
                                  const float *keys, const float *values, size_t m, float *kp, float *vp,
                                  float *ak) {
    size_t i;
    mha__linear(keys, m, p->d_k, w->w_k + g * p->p_k * p->d_k, w->b_k ? w->b_k + g * p->p_k : NULL, p->p_k, kp);
    mha__linear(values, m, p->d_v, w->w_v + g * p->p_v * p->d_v, w->b_v ? w->b_v + g * p->p_v : NULL, p->p_v,
                vp);
    for (i = h0; p->additive && i < h1; ++i)
        mha__linear(kp, m, p->p_k, w->a_k + i * p->p_a * p->p_k, NULL, p->p_a, ak + (i - h0) * m * p->p_a);
}

/* Points r at the additive weights of query head i. */
MHA__PRIVATE void mha__row_weights(const mha__plan *p, const mha_weights *w, size_t i, mha__row *r) {
    r->a_q = p->additive ? w->a_q + i * p->p_a * p->p_q : NULL;
    r->w_a = p->additive ? w->a_v + i * p->p_a : NULL;
}

/* ---- public functions ----------------------------------------------------- */

MHADEF const char *mha_status_string(mha_status status) {
#if MHA_NO_STATUS_STRINGS
    (void)status;
    return "";
#else
    switch (status) {
    case MHA_OK: return "ok";
    case MHA_ERR_NULL: return "a required pointer is NULL";
    case MHA_ERR_SHAPE: return "a size is out of range or sizes disagree";
    case MHA_ERR_OVERFLOW: return "a byte count overflows size_t";
    case MHA_ERR_WORKSPACE: return "workspace is NULL or too small";
    case MHA_ERR_MASK: return "a valid length is outside [0, m]";
    default: return "unknown mha_status";
    }
#endif
}

MHADEF mha_status mha_weight_counts_get(const mha_shape *shape, mha_weight_counts *counts) {
    mha__plan p;
    mha_status st;
    if (!shape || !counts) return MHA_ERR_NULL;
    if ((st = mha__plan_make(shape, &p)) != MHA_OK) return st;
    return mha__weight_counts(&p, counts) ? MHA_OK : MHA_ERR_OVERFLOW;
}

/* 1 if every byte count of a forward call fits in size_t: weights, workspace
   (into *l), inputs, out, and attn and the [batch][n][m] masks when given. */
MHA__PRIVATE int mha__sizes_fit(const mha__plan *p, size_t batch, size_t n, size_t m, int attn, int nm_mask,
                                mha__layout *l) {
    return mha__layout_make(p, m, l) && mha__fits3(batch, n, p->d_q) && mha__fits3(batch, m, p->d_k) &&
           mha__fits3(batch, m, p->d_v) && mha__fits3(batch, n, p->p_o) &&
           (!attn || (mha__fits3(batch, n, m) && mha__fits3(batch * n, m, p->heads))) &&
           (!nm_mask || mha__fits3(batch, n, m));
}

/* The checks of mha_forward that follow the NULL checks: byte counts, workspace, mask. */
MHA__PRIVATE mha_status mha__check_forward(const mha__plan *p, size_t batch, size_t n, size_t m,
                                           const mha_mask *mask, const float *attn, const void *workspace,
                                           size_t workspace_bytes, mha__layout *l) {
    size_t b, t, per;
    if (!mha__sizes_fit(p, batch, n, m, attn != NULL, mask && (mask->keep || mask->bias), l))
        return MHA_ERR_OVERFLOW;
    if (!workspace || workspace_bytes < l->bytes) return MHA_ERR_WORKSPACE;
    if (mask && mask->valid_lens) {
        per = mask->valid_lens_per_query ? n : 1;
        for (b = 0; b < batch; ++b)
            for (t = 0; t < per; ++t) {
                int32_t len = mask->valid_lens[b * per + t];
                if (len < 0 || (size_t)len > m) return MHA_ERR_MASK;
            }
    }
    return MHA_OK;
}

MHADEF size_t mha_workspace_size(const mha_shape *shape, int32_t batch, int32_t n, int32_t m) {
    mha__plan p;
    mha__layout l;
    if (!shape || batch < 0 || n < 0 || m < 0 || mha__plan_make(shape, &p) != MHA_OK) return 0;
    return mha__sizes_fit(&p, (size_t)batch, (size_t)n, (size_t)m, 0, 0, &l) ? l.bytes : 0;
}

MHADEF mha_status mha_forward(const mha_shape *shape, const mha_weights *w, int32_t batch, int32_t n,
                              int32_t m, const float *queries, const float *keys, const float *values,
                              const mha_mask *mask, float *out, float *attn, void *workspace,
                              size_t workspace_bytes) {
    mha__plan p;
    mha__layout l;
    mha__row r;
    mha_status st;
    float *ws, *kp, *vp, *ak, *qp, *sc, *cat;
    size_t b, t, i, j, g, nb, nn, mm;
    if (!shape || !w) return MHA_ERR_NULL;
    if ((st = mha__plan_make(shape, &p)) != MHA_OK) return st;
    if (batch < 0 || n < 0 || m < 0) return MHA_ERR_SHAPE;
    if (!w->w_q || !w->w_k || !w->w_v || !w->w_o || !queries || !keys || !values || !out ||
        (p.additive && (!w->a_q || !w->a_k || !w->a_v)))
        return MHA_ERR_NULL;
    nb = (size_t)batch; nn = (size_t)n; mm = (size_t)m;
    st = mha__check_forward(&p, nb, nn, mm, mask, attn, workspace, workspace_bytes, &l);
    if (st != MHA_OK) return st;

    if (nn == 0) return MHA_OK; /* no query: nothing to compute */
    ws = mha__align(workspace);
    kp = ws + l.kp; vp = ws + l.vp; ak = ws + l.ak; qp = ws + l.qp; sc = ws + l.sc; cat = ws + l.cat;
    r.aq = ws + l.aq;
    r.m = mm;
    for (b = 0; b < nb; ++b) {
        for (g = 0; g < p.kv; ++g)
            mha__project_kv(&p, w, g, g * p.group, (g + 1) * p.group, keys + b * mm * p.d_k,
                            values + b * mm * p.d_v, mm, kp + g * mm * p.p_k, vp + g * mm * p.p_v,
                            ak + g * p.group * mm * p.p_a);
        for (t = 0; t < nn; ++t) {
            size_t row = b * nn + t; /* the query's row in [batch][n] */
            int32_t valid = m;
            if (mask && mask->valid_lens) valid = mask->valid_lens[mask->valid_lens_per_query ? row : b];
            r.hi = mha__visible(m, (int32_t)t, mask, valid);
            r.keep = mask && mask->keep ? mask->keep + row * mm : NULL;
            r.bias = mask && mask->bias ? mask->bias + row * mm : NULL;
            mha__linear(queries + row * p.d_q, 1, p.d_q, w->w_q, w->b_q, p.heads * p.p_q, qp);
            for (i = 0; i < p.heads; ++i) {
                g = i / p.group;
                r.qp = qp + i * p.p_q;
                r.kp = kp + g * mm * p.p_k;
                r.vp = vp + g * mm * p.p_v;
                r.ak = ak + i * mm * p.p_a;
                mha__row_weights(&p, w, i, &r);
                mha__attend(&p, &r, sc, cat + i * p.p_v);
                if (attn)
                    for (j = 0; j < mm; ++j) attn[((b * p.heads + i) * nn + t) * mm + j] = sc[j];
            }
            mha__linear(cat, 1, p.heads * p.p_v, w->w_o, w->b_o, p.p_o, out + row * p.p_o);
        }
    }
    return MHA_OK;
}

MHADEF mha_status mha_head(const mha_shape *shape, const mha_weights *w, int32_t head, const float *query,
                           const float *keys, const float *values, int32_t m, int32_t valid_len,
                           float *head_out, void *workspace, size_t workspace_bytes) {
    mha__plan p;
    mha__layout l;
    mha__row r;
    mha_status st;
    float *ws;
    size_t i, mm;
    if (!shape || !w) return MHA_ERR_NULL;
    if ((st = mha__plan_make(shape, &p)) != MHA_OK) return st;
    if (head < 0 || (size_t)head >= p.heads || m < 0) return MHA_ERR_SHAPE;
    if (!w->w_q || !w->w_k || !w->w_v || !query || !keys || !values || !head_out ||
        (p.additive && (!w->a_q || !w->a_k || !w->a_v)))
        return MHA_ERR_NULL;
    i = (size_t)head;
    mm = (size_t)m;
    if (!mha__layout_make(&p, mm, &l) || !mha__fits3(1, mm, p.d_k) || !mha__fits3(1, mm, p.d_v))
        return MHA_ERR_OVERFLOW;
    if (!workspace || workspace_bytes < l.bytes) return MHA_ERR_WORKSPACE;
    if (valid_len < 0 || valid_len > m) return MHA_ERR_MASK;

    /* Only kv head i / group and query head i are needed; they go where
       mha_forward keeps kv head 0 and query head 0. */
    ws = mha__align(workspace);
    mha__project_kv(&p, w, i / p.group, i, i + 1, keys, values, mm, ws + l.kp, ws + l.vp, ws + l.ak);
    mha__linear(query, 1, p.d_q, w->w_q + i * p.p_q * p.d_q, w->b_q ? w->b_q + i * p.p_q : NULL, p.p_q,
                ws + l.qp);
    r.qp = ws + l.qp;
    r.kp = ws + l.kp;
    r.vp = ws + l.vp;
    r.ak = ws + l.ak;
    r.aq = ws + l.aq;
    mha__row_weights(&p, w, i, &r);
    r.keep = NULL;
    r.bias = NULL;
    r.m = mm;
    r.hi = (size_t)valid_len;
    mha__attend(&p, &r, ws + l.sc, head_out);
    return MHA_OK;
}

MHADEF mha_status mha_concat(int32_t heads, int32_t p_v, const float *const *head_outs, float *concat) {
    size_t i, a, nh, pv;
    if (!head_outs || !concat) return MHA_ERR_NULL;
    if (heads < 1 || p_v < 1) return MHA_ERR_SHAPE;
    nh = (size_t)heads;
    pv = (size_t)p_v;
    if (!mha__fits3(1, nh, pv)) return MHA_ERR_OVERFLOW;
    for (i = 0; i < nh; ++i)
        if (!head_outs[i]) return MHA_ERR_NULL;
    for (i = 0; i < nh; ++i)
        for (a = 0; a < pv; ++a) concat[i * pv + a] = head_outs[i][a];
    return MHA_OK;
}

MHADEF mha_status mha_output(const mha_shape *shape, const mha_weights *w, const float *concat, float *out) {
    mha__plan p;
    mha_status st;
    if (!shape || !w) return MHA_ERR_NULL;
    if ((st = mha__plan_make(shape, &p)) != MHA_OK) return st;
    if (!w->w_o || !concat || !out) return MHA_ERR_NULL;
    if (!mha__weights_fit(&p)) return MHA_ERR_OVERFLOW;
    mha__linear(concat, 1, p.heads * p.p_v, w->w_o, w->b_o, p.p_o, out);
    return MHA_OK;
}

#ifdef __cplusplus
}
#endif
#endif /* MHA_IMPLEMENTATION_INCLUDED */
#endif /* MHA_IMPLEMENTATION */

/*
   Revision history:
       0.1.0  first release: forward pass, per-head steps, dot and additive
              scoring, grouped-query attention, masks, reference vectors,
              MHA_NO_LIBM and MHA_NO_ADDITIVE.

   ------------------------------------------------------------------------------
   This software is available under 2 licences -- choose whichever you prefer.
   ------------------------------------------------------------------------------
   ALTERNATIVE A - MIT License
   Copyright (c) 2026 the mha.h authors
   Permission is hereby granted, free of charge, to any person obtaining a copy of
   this software and associated documentation files (the "Software"), to deal in
   the Software without restriction, including without limitation the rights to
   use, copy, modify, merge, publish, distribute, sublicense, and/or sell copies
   of the Software, and to permit persons to whom the Software is furnished to do
   so, subject to the following conditions:
   The above copyright notice and this permission notice shall be included in all
   copies or substantial portions of the Software.
   THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR
   IMPLIED, INCLUDING BUT NOT LIMITED TO THE WARRANTIES OF MERCHANTABILITY,
   FITNESS FOR A PARTICULAR PURPOSE AND NONINFRINGEMENT. IN NO EVENT SHALL THE
   AUTHORS OR COPYRIGHT HOLDERS BE LIABLE FOR ANY CLAIM, DAMAGES OR OTHER
   LIABILITY, WHETHER IN AN ACTION OF CONTRACT, TORT OR OTHERWISE, ARISING FROM,
   OUT OF OR IN CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER DEALINGS IN THE
   SOFTWARE.
   ------------------------------------------------------------------------------
   ALTERNATIVE B - Public Domain (www.unlicense.org)
   This is free and unencumbered software released into the public domain.
   Anyone is free to copy, modify, publish, use, compile, sell, or distribute this
   software, either in source code form or as a compiled binary, for any purpose,
   commercial or non-commercial, and by any means.
   In jurisdictions that recognize copyright laws, the author or authors of this
   software dedicate any and all copyright interest in the software to the public
   domain. We make this dedication in perpetuity for the benefit of the public at
   large and to the detriment of our heirs and successors. We intend this
   dedication to be an overt act of relinquishment in perpetuity of all present
   and future rights to the software under copyright law.
   ------------------------------------------------------------------------------
*/
