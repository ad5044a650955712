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
   arrays: at most about 0.6 KiB on 32-bit microcontrollers (README, "Size and
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

/* MHA__NOINLINE keeps a kernel step out of line: inlining the steps into one
   function costs code size and stack on small cores (register spills). */
#if defined(__GNUC__) || defined(__clang__)
#define MHA__PRIVATE static __attribute__((unused))
#define MHA__NOINLINE __attribute__((noinline))
#else
#define MHA__PRIVATE static
#define MHA__NOINLINE
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---- math without libm (MHA_NO_LIBM) ---------------------------------------- */
#if MHA_NO_LIBM

/* Copies the 4 bytes of a float or uint32_t: bit casts without type punning
   or libc (GCC and clang turn the builtin into a register move). */
#if defined(__GNUC__) || defined(__clang__)
#define MHA__COPY4(dst, src) __builtin_memcpy(dst, src, 4)
#else
MHA__PRIVATE void mha__copy4(void *dst, const void *src) {
    unsigned char *d = (unsigned char *)dst;
    const unsigned char *s = (const unsigned char *)src;
    int i;
    for (i = 0; i < 4; ++i) d[i] = s[i];
}
#define MHA__COPY4(dst, src) mha__copy4(dst, src)
#endif
MHA__PRIVATE uint32_t mha__bits(float f) {
    uint32_t u = 0;
    MHA__COPY4(&u, &f);
    return u;
}
MHA__PRIVATE float mha__from_bits(uint32_t u) {
    float f = 0.0f;
    MHA__COPY4(&f, &u);
    return f;
}

/* e^x. x = k ln2 + r with |r| <= ln2/2 (ln2 split in two for an exact k ln2),
   e^r = 1 + r + r^2 q(r) with q the Taylor series of (e^r - 1 - r) / r^2 to
   r^5, then times 2^k (for k = 128, times 2 and then 2^127, so that the scale
   stays a normal float). Below ln(FLT_MIN) it returns exactly 0 (no subnormal results);
   above ln(FLT_MAX) it returns +inf; NaN stays NaN.
   Measured error: see tests/test_mathf.c. */
MHA__PRIVATE float mha__expf(float x) {
    static const float c[6] = {1.9841270e-4f, 1.3888889e-3f, 8.3333338e-3f, 4.1666668e-2f, 1.6666667e-1f, 0.5f};
    float kf, r, q = 0.0f;
    int32_t k, i;
    if (!(x >= -87.33654475f)) return x != x ? x : 0.0f;
    if (x > 88.8f) return FLT_MAX * 2.0f;
    kf = x * 1.44269504f;
    k = (int32_t)(kf < 0.0f ? kf - 0.5f : kf + 0.5f);
    r = x - (float)k * 0.693145751953125f - (float)k * 1.428606765330187e-06f;
    for (i = 0; i < 6; ++i) q = q * r + c[i];
    q = 1.0f + (r + r * r * q);
    if (k > 127) { /* only 128 */
        q += q;
        k = 127;
    }
    return q * mha__from_bits((uint32_t)(k + 127) << 23);
}

/* tanh x: an odd Taylor polynomial to x^19 for |x| < 0.55, 1 - 2/(e^2|x| + 1)
   above, and +-1 beyond 9 (where tanh rounds to 1 in fp32). */
MHA__PRIVATE float mha__tanhf(float x) {
    static const float c[9] = {-2.3912911e-4f, 5.9002744e-4f, -1.4558344e-3f, 3.5921280e-3f, -8.8632355e-3f,
                               2.1869490e-2f, -5.3968254e-2f, 1.3333334e-1f, -3.3333334e-1f};
    float ax = x < 0.0f ? -x : x, t = 0.0f, z = x * x;
    int i;
    if (x != x) return x;
    if (ax > 9.0f) return x < 0.0f ? -1.0f : 1.0f;
    if (ax < 0.55f) {
        for (i = 0; i < 9; ++i) t = t * z + c[i];
        return x + x * z * t;
    }
    t = 1.0f - 2.0f / (mha__expf(2.0f * ax) + 1.0f);
    return x < 0.0f ? -t : t;
}

/* sqrt x by Newton's iteration y <- (y + x/y) / 2 from a start above the root
   (x itself, or 1 for x < 1), which then falls monotonically; it stops when
   a step no longer falls. Slow (up to ~70 steps), but the library needs a
   square root only once a call, for the default scale. x < 0 or NaN gives
   NaN; +-0 and +inf are returned as they are. */
MHA__PRIVATE float mha__sqrtf(float x) {
    float y = x > 1.0f ? x : 1.0f, z;
    if (x != x || x < 0.0f) return (x - x) / (x - x); /* NaN */
    if (x == 0.0f || x > FLT_MAX) return x;
    do {
        z = y;
        y = 0.5f * (y + x / y);
    } while (y < z);
    return z;
}
#endif /* MHA_NO_LIBM */

/* ---- sizes ---------------------------------------------------------------- */

/* Saturating size arithmetic: a result that does not fit is SIZE_MAX, and
   stays SIZE_MAX through later products (SIZE_MAX * 0 is 0, as the true
   product is) and sums. A byte count is a multiple of 4, so its low bit is
   set only when it saturated. */
MHA__PRIVATE size_t mha__mul(size_t a, size_t b) { return a != 0 && b > SIZE_MAX / a ? SIZE_MAX : a * b; }
MHA__PRIVATE size_t mha__add(size_t a, size_t b) { return b > SIZE_MAX - a ? SIZE_MAX : a + b; }

/* One call: its validated sizes (as size_t, so that products such as
   h * p_q cannot overflow an int), its arguments, and the workspace parts.
   The sizes come first: mha__layout reads them by their offsets. */
typedef struct mha__ctx {
    size_t one, h, kv, grp;           /* 1; heads; kv heads; grp = h / kv query heads per kv head */
    size_t dq, dk, dv, pq, pk, pv, po, pa; /* pa = 0: dot scoring */
    size_t batch, n, m;
    size_t attn_h, masked;            /* h if attn is wanted, else 0; 1 if a [batch][n][m] mask is given */
    float scale;
    int32_t head;                     /* -1: mha_forward; else mha_head's head, batch = n = 1, out = h_head */
    const mha_weights *w;
    const mha_mask *mask;             /* NULL: none */
    const float *queries, *keys, *values;
    float *out, *attn;
    float *ws;                        /* the workspace from its aligned start */
    size_t part[7];                   /* offsets in floats of its parts, see mha__table */
} mha__ctx;

/* Workspace part k (0 kp, 1 vp, 2 ak, 3 qp, 4 aq, 5 sc, 6 cat: see mha__table). */
#define MHA__PART(c, k) ((c)->ws + (c)->part[k])

#if MHA_NO_ADDITIVE
#define MHA__ADDITIVE(c) 0
#else
#define MHA__ADDITIVE(c) ((c)->pa != 0)
#endif

/* Checks a shape and fills the sizes of *c; MHA_OK, MHA_ERR_NULL (shape or w)
   or MHA_ERR_SHAPE. */
MHA__PRIVATE mha_status mha__setup(mha__ctx *c, const mha_shape *s, const mha_weights *w) {
    int32_t kv;
    if (!s || !w) return MHA_ERR_NULL;
    kv = s->kv_heads == 0 ? s->heads : s->kv_heads;
    if (s->heads < 1 || kv < 1 || s->d_q < 1 || s->d_k < 1 || s->d_v < 1 || s->p_q < 1 || s->p_k < 1 ||
        s->p_v < 1 || s->p_o < 1 || s->heads % kv != 0)
        return MHA_ERR_SHAPE;
    c->one = 1;
    c->h = (size_t)s->heads;
    c->kv = (size_t)kv;
    c->grp = (size_t)(s->heads / kv);
    c->dq = (size_t)s->d_q; c->dk = (size_t)s->d_k; c->dv = (size_t)s->d_v;
    c->pq = (size_t)s->p_q; c->pk = (size_t)s->p_k; c->pv = (size_t)s->p_v; c->po = (size_t)s->p_o;
    c->pa = 0;
    c->batch = c->n = c->m = c->attn_h = c->masked = 0;
    c->w = w;
    c->scale = s->scale;
    if (s->score == MHA_SCORE_DOT) {
        if (s->p_q != s->p_k || !(s->scale >= -FLT_MAX && s->scale <= FLT_MAX)) return MHA_ERR_SHAPE;
        if (s->scale == 0.0f) c->scale = 1.0f / MHA_SQRTF((float)s->p_k);
        return MHA_OK;
    }
#if !MHA_NO_ADDITIVE
    if (s->score == MHA_SCORE_ADDITIVE && s->p_a >= 1) {
        c->pa = (size_t)s->p_a;
        return MHA_OK;
    }
#endif
    return MHA_ERR_SHAPE;
}

#define MHA__F(x) ((unsigned char)offsetof(mha__ctx, x))
#define MHA__ROWS_WEIGHTS 6 /* rows 0-5: the weights */
#define MHA__ROWS_ARRAYS 12 /* rows 0-11: every array of a call; then the workspace parts */
#define MHA__ROWS 19
/* The element count of every array of a call as a product of four sizes of
   mha__ctx: the weights (rows 0-5), queries, keys, values, out, attn and masks
   (6-11), then the workspace parts (12-18). */
static const unsigned char mha__table[MHA__ROWS][4] = {
    {MHA__F(h), MHA__F(pq), MHA__F(dq), MHA__F(one)},        /* w_q [h*p_q][d_q] */
    {MHA__F(kv), MHA__F(pk), MHA__F(dk), MHA__F(one)},       /* w_k */
    {MHA__F(kv), MHA__F(pv), MHA__F(dv), MHA__F(one)},       /* w_v */
    {MHA__F(h), MHA__F(pv), MHA__F(po), MHA__F(one)},        /* w_o */
    {MHA__F(h), MHA__F(pa), MHA__F(pq), MHA__F(one)},        /* a_q */
    {MHA__F(h), MHA__F(pa), MHA__F(pk), MHA__F(one)},        /* a_k */
    {MHA__F(batch), MHA__F(n), MHA__F(dq), MHA__F(one)},     /* queries */
    {MHA__F(batch), MHA__F(m), MHA__F(dk), MHA__F(one)},     /* keys */
    {MHA__F(batch), MHA__F(m), MHA__F(dv), MHA__F(one)},     /* values */
    {MHA__F(batch), MHA__F(n), MHA__F(po), MHA__F(one)},     /* out */
    {MHA__F(batch), MHA__F(n), MHA__F(m), MHA__F(attn_h)},   /* attn [batch][h][n][m] */
    {MHA__F(batch), MHA__F(n), MHA__F(m), MHA__F(masked)},   /* keep or bias [batch][n][m] */
    {MHA__F(kv), MHA__F(m), MHA__F(pk), MHA__F(one)},        /* part 0: kp [kv][m][p_k] projected keys */
    {MHA__F(kv), MHA__F(m), MHA__F(pv), MHA__F(one)},        /* part 1: vp [kv][m][p_v] projected values */
    {MHA__F(h), MHA__F(m), MHA__F(pa), MHA__F(one)},         /* part 2: ak [h][m][p_a] A_k^(i) k_ij */
    {MHA__F(h), MHA__F(pq), MHA__F(one), MHA__F(one)},       /* part 3: qp [h*p_q] projected query */
    {MHA__F(pa), MHA__F(one), MHA__F(one), MHA__F(one)},     /* part 4: aq [p_a] A_q^(i) q_i */
    {MHA__F(m), MHA__F(one), MHA__F(one), MHA__F(one)},      /* part 5: sc [m] scores */
    {MHA__F(h), MHA__F(pv), MHA__F(one), MHA__F(one)},       /* part 6: cat [h*p_v] head outputs */
};

/* Byte count of the workspace (with the alignment slack) from the first
   `rows` rows of mha__table, and the parts' offsets in floats into c->part
   (when rows > MHA__ROWS_ARRAYS); SIZE_MAX when that or any array of those rows overflows
   size_t. mha_workspace_size and every call that uses a workspace go through
   here. */
MHA__PRIVATE size_t mha__layout(mha__ctx *c, int rows) {
    size_t t = 0, any = 0, p;
    int k, f;
    for (k = 0; k < rows; ++k) {
        p = 1;
        for (f = 0; f < 4; ++f)
            p = mha__mul(p, *(const size_t *)(const void *)((const unsigned char *)c + mha__table[k][f]));
        if (k < MHA__ROWS_ARRAYS) {
            any |= mha__mul(p, sizeof(float));
        } else {
            c->part[k - MHA__ROWS_ARRAYS] = t;
            t = mha__add(t, p);
        }
    }
    t = mha__add(mha__mul(t, sizeof(float)), MHA_WORKSPACE_ALIGN);
    return (t | any) & 1u ? SIZE_MAX : t;
}

/* The workspace's first MHA_WORKSPACE_ALIGN-byte boundary, as floats. */
MHA__PRIVATE float *mha__align(void *workspace) {
    uintptr_t a = (uintptr_t)workspace;
    size_t skip = (size_t)((MHA_WORKSPACE_ALIGN - a % MHA_WORKSPACE_ALIGN) % MHA_WORKSPACE_ALIGN);
    return (float *)(void *)((unsigned char *)workspace + skip);
}

/* Stands in for the weights where only sizes are asked for. */
static const mha_weights mha__no_weights = {NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL};

/* ---- reference kernels ---------------------------------------------------- */

/* x . y over n elements, fp32 accumulation in index order. */
MHA__PRIVATE float mha__dot(const float *x, const float *y, size_t n) {
    float s = 0.0f;
    size_t i;
    for (i = 0; i < n; ++i) s += x[i] * y[i];
    return s;
}

/* y[r][o] = sum_i W[o0+o][i] x[r][i] + b[o0+o] for o < out: x is [rows][in],
   W is [..][in], b is [..] or NULL (zero), y is [rows][out]. */
MHA__PRIVATE MHA__NOINLINE void mha__linear(const float *x, size_t rows, size_t in, const float *W, const float *b,
                                            size_t o0, size_t out, float *y) {
    size_t r, o;
    for (r = 0; r < rows; ++r, x += in)
        for (o = o0; o < o0 + out; ++o) *y++ = mha__dot(W + o * in, x, in) + (b ? b[o] : 0.0f);
}

/* Query t of batch entry b, head i, with its projection in part 3: the
   attention weights go to attn (or part 5) and h_i to part 6 (or out, for
   mha_head). Keys j are visible when j < valid length, j <= t + causal_offset
   (if causal) and keep[j] != 0. Softmax: exp(s - max) / sum, the max starting
   from -inf (where a masked score sits). Masked keys get weight 0, and a row
   with every key masked is all 0. A +inf max takes the limit: the +inf keys
   share the weight. A NaN score makes the row NaN. Keys of weight exactly 0
   are skipped, so a masked key's values never reach the output. */
MHA__PRIVATE MHA__NOINLINE void mha__attend(const mha__ctx *c, size_t b, size_t t, size_t i) {
    const float ninf = -(FLT_MAX * 2.0f);
    const mha_mask *mask = c->mask;
    size_t m = c->m, row = b * c->n + t, g = i / c->grp, j, a, hi = m;
    const float *q = MHA__PART(c, 3) + i * c->pq, *k = MHA__PART(c, 0) + g * m * c->pk;
    const float *v = MHA__PART(c, 1) + g * m * c->pv;
    const uint8_t *keep = NULL;
    const float *bias = NULL;
    float *sc = c->attn ? c->attn + ((b * c->h + i) * c->n + t) * m : MHA__PART(c, 5);
    float *ho = c->head < 0 ? MHA__PART(c, 6) + i * c->pv : c->out;
    float mx = ninf, sum = 0.0f;
    if (mask) {
        if (mask->keep) keep = mask->keep + row * m;
        if (mask->bias) bias = mask->bias + row * m;
        if (mask->valid_lens) hi = (size_t)mask->valid_lens[mask->valid_lens_per_query ? row : b];
        if (mask->causal) { /* j <= t + offset; exact for any offset, with no overflow */
            int32_t off = mask->causal_offset, mt = (int32_t)m - (int32_t)t;
            size_t lim = off >= mt ? m : off < -(int32_t)t ? 0 : (size_t)((int32_t)t + off + 1);
            if (lim < hi) hi = lim;
        }
    }
#if !MHA_NO_ADDITIVE
    if (MHA__ADDITIVE(c)) mha__linear(q, 1, c->pq, c->w->a_q + i * c->pa * c->pq, NULL, 0, c->pa, MHA__PART(c, 4));
#endif
    for (j = 0; j < m; ++j) {
        float s = ninf;
        if (j < hi && (!keep || keep[j])) {
#if !MHA_NO_ADDITIVE
            if (MHA__ADDITIVE(c)) {
                const float *akj = MHA__PART(c, 2) + (i * m + j) * c->pa, *wa = c->w->a_v + i * c->pa;
                s = 0.0f;
                for (a = 0; a < c->pa; ++a) s += wa[a] * MHA_TANHF(MHA__PART(c, 4)[a] + akj[a]);
            } else
#endif
                s = c->scale * mha__dot(q, k + j * c->pk, c->pk);
            if (bias) s += bias[j];
        }
        sc[j] = s;
    }
    /* the max in a pass of its own, over the stored scores: with x87 excess
       precision a score still in a register can differ from its stored copy */
    for (j = 0; j < m; ++j)
        if (sc[j] > mx || sc[j] != sc[j]) mx = sc[j]; /* once NaN, mx stays NaN */
    for (j = 0; j < m; ++j) {
        sc[j] = sc[j] == ninf ? 0.0f : sc[j] == mx ? 1.0f : MHA_EXPF(sc[j] - mx);
        sum += sc[j];
    }
    if (sum == 0.0f) sum = 1.0f; /* every key masked */
    for (a = 0; a < c->pv; ++a) ho[a] = 0.0f;
    for (j = 0; j < m; ++j, v += c->pv) {
        sc[j] /= sum;
        if (sc[j] != 0.0f)
            for (a = 0; a < c->pv; ++a) ho[a] += sc[j] * v[a];
    }
}

/* mha_forward and mha_head once the shape is checked: the remaining checks,
   in the order of the error table, then the computation. */
MHA__PRIVATE MHA__NOINLINE mha_status mha__run(mha__ctx *c, void *workspace, size_t workspace_bytes) {
    const mha_weights *w = c->w;
    const mha_mask *mask = c->mask;
    size_t bytes, m = c->m, b, t, i, g, h0, h1;
    if (!w->w_q || !w->w_k || !w->w_v || (c->head < 0 && !w->w_o) || !c->queries || !c->keys || !c->values ||
        !c->out || (MHA__ADDITIVE(c) && (!w->a_q || !w->a_k || !w->a_v)))
        return MHA_ERR_NULL;
    c->attn_h = c->attn ? c->h : 0;
    c->masked = mask && (mask->keep || mask->bias);
    bytes = mha__layout(c, MHA__ROWS);
    if (bytes == SIZE_MAX) return MHA_ERR_OVERFLOW;
    if (!workspace || workspace_bytes < bytes) return MHA_ERR_WORKSPACE;
    if (mask && mask->valid_lens)
        for (t = 0; t < c->batch * (mask->valid_lens_per_query ? c->n : 1); ++t)
            if (mask->valid_lens[t] < 0 || (size_t)mask->valid_lens[t] > m) return MHA_ERR_MASK;
    if (c->n == 0) return MHA_OK; /* no query: nothing to compute */

    c->ws = mha__align(workspace);
    h0 = c->head < 0 ? 0 : (size_t)c->head;
    h1 = c->head < 0 ? c->h : h0 + 1;
    for (b = 0; b < c->batch; ++b) {
        /* K and V of the kv heads that heads [h0, h1) use; for additive also A_k K */
        for (i = h0; i < h1; ++i) {
            g = i / c->grp;
            if (i == h0 || i % c->grp == 0) {
                mha__linear(c->keys + b * m * c->dk, m, c->dk, w->w_k, w->b_k, g * c->pk, c->pk,
                            MHA__PART(c, 0) + g * m * c->pk);
                mha__linear(c->values + b * m * c->dv, m, c->dv, w->w_v, w->b_v, g * c->pv, c->pv,
                            MHA__PART(c, 1) + g * m * c->pv);
            }
#if !MHA_NO_ADDITIVE
            if (MHA__ADDITIVE(c))
                mha__linear(MHA__PART(c, 0) + g * m * c->pk, m, c->pk, w->a_k + i * c->pa * c->pk, NULL, 0, c->pa,
                            MHA__PART(c, 2) + i * m * c->pa);
#endif
        }
        for (t = 0; t < c->n; ++t) {
            size_t row = b * c->n + t; /* the query's row in [batch][n] */
            mha__linear(c->queries + row * c->dq, 1, c->dq, w->w_q, w->b_q, h0 * c->pq, (h1 - h0) * c->pq,
                        MHA__PART(c, 3) + h0 * c->pq);
            for (i = h0; i < h1; ++i) mha__attend(c, b, t, i);
            if (c->head < 0)
                mha__linear(MHA__PART(c, 6), 1, c->h * c->pv, w->w_o, w->b_o, 0, c->po, c->out + row * c->po);
        }
    }
    return MHA_OK;
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
    mha__ctx c;
    mha_status st;
    if (!counts) return MHA_ERR_NULL;
    if ((st = mha__setup(&c, shape, &mha__no_weights)) != MHA_OK) return st;
    if (mha__layout(&c, MHA__ROWS_WEIGHTS) == SIZE_MAX) return MHA_ERR_OVERFLOW;
    counts->b_q = c.h * c.pq;
    counts->b_k = c.kv * c.pk;
    counts->b_v = c.kv * c.pv;
    counts->b_o = c.po;
    counts->w_q = counts->b_q * c.dq;
    counts->w_k = counts->b_k * c.dk;
    counts->w_v = counts->b_v * c.dv;
    counts->w_o = c.po * c.h * c.pv;
    counts->a_q = c.h * c.pa * c.pq;
    counts->a_k = c.h * c.pa * c.pk;
    counts->a_v = c.h * c.pa;
    return MHA_OK;
}

MHADEF size_t mha_workspace_size(const mha_shape *shape, int32_t batch, int32_t n, int32_t m) {
    mha__ctx c;
    size_t bytes;
    if (batch < 0 || n < 0 || m < 0 || mha__setup(&c, shape, &mha__no_weights) != MHA_OK) return 0;
    c.batch = (size_t)batch;
    c.n = (size_t)n;
    c.m = (size_t)m;
    bytes = mha__layout(&c, MHA__ROWS);
    return bytes == SIZE_MAX ? 0 : bytes;
}

MHADEF mha_status mha_forward(const mha_shape *shape, const mha_weights *w, int32_t batch, int32_t n,
                              int32_t m, const float *queries, const float *keys, const float *values,
                              const mha_mask *mask, float *out, float *attn, void *workspace,
                              size_t workspace_bytes) {
    mha__ctx c;
    mha_status st = mha__setup(&c, shape, w);
    if (st != MHA_OK) return st;
    if (batch < 0 || n < 0 || m < 0) return MHA_ERR_SHAPE;
    c.head = -1;
    c.batch = (size_t)batch;
    c.n = (size_t)n;
    c.m = (size_t)m;
    c.queries = queries;
    c.keys = keys;
    c.values = values;
    c.mask = mask;
    c.out = out;
    c.attn = attn;
    return mha__run(&c, workspace, workspace_bytes);
}

MHADEF mha_status mha_head(const mha_shape *shape, const mha_weights *w, int32_t head, const float *query,
                           const float *keys, const float *values, int32_t m, int32_t valid_len,
                           float *head_out, void *workspace, size_t workspace_bytes) {
    mha__ctx c;
    mha_mask mask = {0, 0, NULL, 0, NULL, NULL};
    mha_status st = mha__setup(&c, shape, w);
    if (st != MHA_OK) return st;
    if (head < 0 || (size_t)head >= c.h || m < 0) return MHA_ERR_SHAPE;
    mask.valid_lens = &valid_len;
    c.head = head;
    c.batch = c.n = 1;
    c.m = (size_t)m;
    c.queries = query;
    c.keys = keys;
    c.values = values;
    c.mask = &mask;
    c.out = head_out;
    c.attn = NULL;
    return mha__run(&c, workspace, workspace_bytes);
}

MHADEF mha_status mha_concat(int32_t heads, int32_t p_v, const float *const *head_outs, float *concat) {
    size_t i, a, nh, pv;
    if (!head_outs || !concat) return MHA_ERR_NULL;
    if (heads < 1 || p_v < 1) return MHA_ERR_SHAPE;
    nh = (size_t)heads;
    pv = (size_t)p_v;
    if (mha__mul(mha__mul(nh, pv), sizeof(float)) == SIZE_MAX) return MHA_ERR_OVERFLOW;
    for (i = 0; i < nh; ++i)
        if (!head_outs[i]) return MHA_ERR_NULL;
    for (i = 0; i < nh; ++i)
        for (a = 0; a < pv; ++a) *concat++ = head_outs[i][a];
    return MHA_OK;
}

MHADEF mha_status mha_output(const mha_shape *shape, const mha_weights *w, const float *concat, float *out) {
    mha__ctx c;
    mha_status st = mha__setup(&c, shape, w);
    if (st != MHA_OK) return st;
    if (!w->w_o || !concat || !out) return MHA_ERR_NULL;
    if (mha__layout(&c, MHA__ROWS_WEIGHTS) == SIZE_MAX) return MHA_ERR_OVERFLOW;
    mha__linear(concat, 1, c.h * c.pv, w->w_o, w->b_o, 0, c.po, out);
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
