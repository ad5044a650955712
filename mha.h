/* mha.h - v0.2.0 - general-form multi-head attention (fp32) in one C header.
   licence: see end of file.

   Do this:
       #define MHA_IMPLEMENTATION
   before you include this file in *one* C or C++ file to create the
   implementation. Every other file includes it plainly.

   Example (self-attention, 2 heads, d = 8, sizes of your choosing):

       #define MHA_IMPLEMENTATION
       #include "mha.h"
       mha_shape s = MHA_INIT;                // zero means default
       s.heads = 2; s.d_q = s.d_k = s.d_v = 8;
       s.p_q = s.p_k = s.p_v = 4; s.p_o = 8;  // score = MHA_SCORE_DOT
       mha_weights w = MHA_INIT;
       mha_weights_f32(&w, wq, wk, wv, wo);   // your float arrays
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
       MHA_NO_EXTRAS          0/1  compile out RoPE, ALiBi, soft-cap, sinks (impl)
       MHA_FAST               0/1  mha_forward takes the fast path; default (impl)
                                   1 on hosted x86-64 and aarch64, else 0
       MHA_NO_SIMD            0/1  the fast path's portable code only       (impl)
       MHA_BF16_DOT           0/1  bf16 weights times bf16 activations on   (impl)
                                   AVX512-BF16 (and AMX tiles where granted)
       MHA_NO_AMX             0/1  MHA_BF16_DOT never uses AMX tiles        (impl)
       MHA_EXPF(x) MHA_TANHF(x) MHA_SQRTF(x)   math functions to use        (impl)
   No option changes a struct or prototype. The implementation calls no libc
   function; with MHA_NO_LIBM it needs no libm and builds -ffreestanding.

   Fast path (MHA_FAST 1, the default on hosted x86-64 and aarch64): packed
   GEMMs and a fused attention that never holds the n x m scores, for the
   vector unit the compiler targets (AVX-512F, AVX2+FMA, NEON, else portable
   C): build with -march=native (-mcpu=native on aarch64) to use yours; see
   docs/performance.md. The plain reference path stays compiled: mha_forward_reference,
   mha_head. mha_build_info() tells what was compiled.

   Memory: the library never allocates; the caller passes a workspace of
   mha_workspace_size() bytes (any alignment), or MHA_WORKSPACE_BYTES() for a
   static buffer; the reference path keeps its call state there too. Stack use
   is fixed, with no recursion and no variable-length arrays: at most 272
   bytes per call on a Cortex-M4F at -Os, 256 with MHA_NO_EXTRAS (docs/firmware.md,
   "Size and stack").
   Threads: there is no mutable static state; calls are reentrant and may run
   concurrently when each has its own workspace and output.

   Stages and decoding: mha_attend is the attend stage alone (on inputs you
   projected), mha_output_rows the output stage; mha_decode runs a model's
   attention token by token over a KV cache that you own (mha_cache: a
   sliding window as a ring buffer, its first positions kept if you like,
   cross-attention after mha_cache_append); mha_decode_tree checks a tree
   of draft tokens in one call (speculative decoding); mha_cache_row finds
   a position's cached row.

   Today's decoder layers: RoPE (both pairings, partial, any base), ALiBi,
   a logit soft-cap (mha_shape's last fields) and attention sinks
   (mha_weights.sinks), on every path; MHA_NO_EXTRAS compiles them out.

   int8: mha_forward_q8 and mha_decode_q8 run the layer in 8-bit integers
   with TFLite's quantisation arithmetic and no float operation (cores
   without an FPU); mha_q8_prepare makes their rescales from float scales.
   mha_forward_q16 is the layer in TFLite's 16x8 mode (int16 activations,
   int8 weights), mha_q16_prepare its rescales.
*/
#ifdef MHA_CONFIG_FILE
#include MHA_CONFIG_FILE
#endif

#ifndef MHA_H_INCLUDED
#define MHA_H_INCLUDED

#include <stddef.h>
#include <stdint.h>

#define MHA_VERSION_MAJOR 0
#define MHA_VERSION_MINOR 2
#define MHA_VERSION_PATCH 0
#define MHA_VERSION_STRING "0.2.0"

/* An option defined with no value (`#define MHA_FAST`, the stb habit) means
   1: (0 - X - 1) is 1 only when X is empty. */
#if defined(MHA_STATIC) && (0 - MHA_STATIC - 1) == 1
#undef MHA_STATIC
#define MHA_STATIC 1
#endif
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

/* The all-zero initialiser of any mha.h struct (every zero means its
   default): `mha_shape s = MHA_INIT;`. It is {0} in C and {} in C++, so that
   it compiles cleanly under -Wall -Wextra -Werror in both (C++ compilers warn
   about the missing fields of {0}). */
#ifdef __cplusplus
#define MHA_INIT {}
#else
#define MHA_INIT {0}
#endif

/* Every call returns one of these. Values are fixed and never renumbered. */
typedef enum mha_status {
    MHA_OK = 0,
    MHA_ERR_NULL = -1,      /* a required pointer is NULL */
    MHA_ERR_SHAPE = -2,     /* a size is out of range or sizes disagree */
    MHA_ERR_OVERFLOW = -3,  /* a byte count does not fit in size_t */
    MHA_ERR_WORKSPACE = -4, /* workspace NULL or smaller than mha_workspace_size() */
    MHA_ERR_MASK = -5,      /* a valid length is < 0 or > m (a cache length < 0 or > capacity) */
    MHA_ERR_CAPACITY = -6   /* a KV cache without a window has no room for the tokens appended */
} mha_status;

typedef enum mha_score {
    MHA_SCORE_DOT = 0,     /* scale * q_i . k_ij; needs p_q == p_k */
    MHA_SCORE_ADDITIVE = 1 /* w_a . tanh(A_q q_i + A_k k_ij); hidden size p_a */
} mha_score;

/* Sizes of one attention layer. Zero means default where noted, so
   `mha_shape s = MHA_INIT;` plus the sizes you need is a complete set-up. */
typedef struct mha_shape {
    int32_t heads, kv_heads;      /* h >= 1; key/value heads, 0 means heads; heads % kv_heads == 0 */
    int32_t d_q, d_k, d_v;        /* sizes of one query, key, value vector (>= 1) */
    int32_t p_q, p_k, p_v, p_o;   /* per-head projected sizes and the output size (>= 1) */
    mha_score score;              /* MHA_SCORE_DOT or MHA_SCORE_ADDITIVE */
    int32_t p_a;                  /* additive only: hidden size (>= 1); ignored for dot */
    float scale;                  /* dot only: score multiplier; 0 means 1/sqrt(p_k); must be finite */
    /* Knobs of today's decoder layers (docs/positions.md); each 0 = off. Positions: key j of mha_forward and mha_attend
       is at position j, query row t at t + mask->causal_offset (t without a
       mask); mha_decode uses the cache's positions. */
    int32_t rope_dim;             /* RoPE on the first rope_dim entries of every projected q and k:
                                     even, <= p_q and <= p_k */
    int32_t rope_pairs;           /* MHA_ROPE_HALF (0) or MHA_ROPE_ADJACENT: which entries rotate together */
    float rope_theta;             /* RoPE's base; 0 means 10000; else finite and > 0 */
    int32_t alibi;                /* nonzero: ALiBi, scores += -slope_i (P_query - P_key), slopes of the
                                     published formula for any head count */
    float softcap;                /* > 0 (finite): scores s <- softcap tanh(s / softcap), before ALiBi and
                                     the masks (Gemma 2's order) */
} mha_shape;

/* RoPE's pairings: which two entries of a head's vector of r = rope_dim
   rotate together by the angle P theta^(-2a/r) of pair a < r/2. */
enum {
    MHA_ROPE_HALF = 0,    /* (x_a, x_{a+r/2}): GPT-NeoX, Hugging Face Llama, ONNX Runtime's default */
    MHA_ROPE_ADJACENT = 1 /* (x_{2a}, x_{2a+1}): GPT-J, the original LLaMA, llama2.c */
};

/* Element types of the weight matrices (mha_weights.type) and of a KV cache
   (mha_cache.type): 32-bit float, or 16-bit floats held as their bits in
   uint16_t (IEEE binary16, bfloat16). The arithmetic is fp32 for every type:
   16-bit elements are converted exactly on reading, and values written to a
   16-bit cache are rounded to nearest, ties to even (docs/16bit.md). A
   float cache's keys and values may also be blocks of 32 quantized values
   with one f16 scale each (MHA_Q8, MHA_Q4: docs/quantized.md); they too
   are read exactly, as scale times integer. */
enum {
    MHA_F32 = 0,
    MHA_F16 = 1, /* IEEE binary16: 5 exponent bits, 10 fraction bits */
    MHA_BF16 = 2, /* bfloat16: float's 8 exponent bits, 7 fraction bits */
    MHA_I8 = 3,   /* int8: the caches of mha_decode_q8 and mha_cache_append_q8 only */
    MHA_Q8 = 4,   /* caches only: blocks of 32 values as int8 times an f16 scale, 34 bytes */
    MHA_Q4 = 5,   /* caches only: blocks of 32 values as 4-bit integers times an f16 scale, 18 bytes */
    MHA_I16 = 6   /* int16: the caches of mha_decode_q16 and mha_cache_append_q16 only */
};

/* Weights, row-major in the Linear convention (out_features x in_features),
   so PyTorch's tensors can be passed as they are. Biases may be NULL (zero).
   Rows i*p_q .. i*p_q+p_q-1 of w_q are W_q^(i); likewise for k and v with the
   kv head index. Column block i*p_v .. of w_o multiplies h_i. The four
   matrices are floats, or 16-bit elements (uint16_t) when type says so;
   biases, sinks and the additive weights are always floats. */
typedef struct mha_weights {
    const void *w_q;              /* [heads*p_q][d_q] */
    const float *b_q;             /* [heads*p_q] */
    const void *w_k;              /* [kv_heads*p_k][d_k] */
    const float *b_k;             /* [kv_heads*p_k] */
    const void *w_v;              /* [kv_heads*p_v][d_v] */
    const float *b_v;             /* [kv_heads*p_v] */
    const void *w_o;              /* [p_o][heads*p_v] */
    const float *b_o;             /* [p_o] */
    const float *a_q, *a_k, *a_v; /* additive only: A_q [heads][p_a][p_q], A_k [heads][p_a][p_k],
                                     w_a [heads][p_a] */
    const void *packed;           /* NULL, or a buffer that mha_pack_weights() filled from these
                                     weights: the fast path then skips packing them each call */
    const float *sinks;           /* NULL, or [heads]: attention sinks, one logit per head that joins
                                     the softmax's denominator only (no value) */
    int32_t type;                 /* element type of w_q, w_k, w_v, w_o: MHA_F32 (0), MHA_F16, MHA_BF16 */
} mha_weights;

/* The four matrices with their element type checked by the compiler: w_q ... w_o are
   const void * (they may hold 16-bit elements), so "w.w_q = my_doubles;" compiles silently and
   is read as floats. These set w_q, w_k, w_v, w_o and type, and leave the rest of *w as it is;
   an array of the wrong type (a double * for mha_weights_f32, a float * for the 16-bit ones) is
   a warning in C (-Wincompatible-pointer-types, on by default in gcc and clang) and an error in
   C++. Defined here, inline: they cost nothing where they are not called. */
#if defined(__GNUC__) || defined(__clang__)
#define MHA__SETTER static __inline__ __attribute__((unused))
#elif defined(_MSC_VER)
#define MHA__SETTER static __inline
#else
#define MHA__SETTER static inline
#endif
MHA__SETTER void mha_weights_f32(mha_weights *w, const float *w_q, const float *w_k, const float *w_v,
                                 const float *w_o) {
    w->w_q = w_q; w->w_k = w_k; w->w_v = w_v; w->w_o = w_o; w->type = MHA_F32;
}
MHA__SETTER void mha_weights_f16(mha_weights *w, const uint16_t *w_q, const uint16_t *w_k, const uint16_t *w_v,
                                 const uint16_t *w_o) {
    w->w_q = w_q; w->w_k = w_k; w->w_v = w_v; w->w_o = w_o; w->type = MHA_F16;
}
MHA__SETTER void mha_weights_bf16(mha_weights *w, const uint16_t *w_q, const uint16_t *w_k, const uint16_t *w_v,
                                  const uint16_t *w_o) {
    w->w_q = w_q; w->w_k = w_k; w->w_v = w_v; w->w_o = w_o; w->type = MHA_BF16;
}

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

/* Which check a shape and its weights fail, in words: the status that mha_forward returns for
   them (its other arguments valid), and a one-line message with the values in msg (msg_bytes
   bytes, cut to fit and always ended by '\0'; msg may be NULL), e.g. "p_q 64 != p_k 32: dot
   scoring needs p_q = p_k" or "w_o is NULL"; "ok" when they pass. The same checks as the calls
   run (one list); no state is kept. */
MHADEF mha_status mha_explain(const mha_shape *shape, const mha_weights *w, char *msg, size_t msg_bytes);

/* What the implementation was compiled with (mha_build_info()). */
typedef struct mha_build {
    const char *version; /* MHA_VERSION_STRING of the implementation */
    int32_t fast;        /* MHA_FAST: 1 when mha_forward takes the fast path */
    const char *vector;  /* the fast path's vector code: "avx512f", "avx2+fma", "neon",
                            "portable"; "none" when MHA_FAST is 0 */
    int32_t no_libm, no_additive, no_status_strings, no_simd; /* the options, 0 or 1 */
    int32_t no_extras;                                        /* MHA_NO_EXTRAS, 0 or 1 */
} mha_build;
MHADEF mha_build mha_build_info(void);

/* Bytes of workspace that mha_forward(shape, ., batch, n, m, ...) needs, at any
   alignment. Returns 0 when the shape or a count is invalid, or when the byte
   count of the workspace, a weight, queries, keys, values or out overflows
   size_t (mha_forward then tells which; an overflow of attn or of a
   [batch][n][m] mask only mha_forward can see). Under MHA_FAST 0 it equals
   mha_reference_workspace_size() and MHA_WORKSPACE_BYTES() below; under
   MHA_FAST 1 it is the fast path's need, which has no n x m term. */
MHADEF size_t mha_workspace_size(const mha_shape *shape, int32_t batch, int32_t n, int32_t m);

/* The reference path's number as a constant expression, for static buffers:
   the workspace of mha_forward_reference on every target, and of
   mha_forward under MHA_FAST 0 (the default but on hosted x86-64 and
   aarch64, where mha_forward needs mha_workspace_size()). Pass the real
   kv_heads (not 0), and p_a = 0 for dot scoring. Evaluated in size_t: the
   caller makes sure it does not overflow. */
#define MHA_WORKSPACE_BYTES(heads, kv_heads, p_q, p_k, p_v, p_a, m)                           \
    (((size_t)(kv_heads) * (size_t)(m) * ((size_t)(p_k) + (size_t)(p_v)) +                    \
      (size_t)(heads) * (size_t)(m) * (size_t)(p_a) + (size_t)(heads) * (size_t)(p_q) +        \
      (size_t)(p_a) + (size_t)(m) + (size_t)(heads) * (size_t)(p_v)) * sizeof(float) +         \
     MHA_WORKSPACE_ALIGN + MHA_WORKSPACE_STATE)
#define MHA_WORKSPACE_ALIGN 64 /* the workspace is used from its first 64-byte boundary */
/* the reference path keeps its call state there, not on the stack */
#define MHA_WORKSPACE_STATE (62 * sizeof(void *))

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

/* The reference path, always compiled: mha_forward's contract, computed by the
   plain loops that serve as the oracle for the fast path. Its workspace is
   mha_reference_workspace_size() bytes (= MHA_WORKSPACE_BYTES(); independent
   of batch and n). Under MHA_FAST 0 mha_forward is this function. */
MHADEF mha_status mha_forward_reference(const mha_shape *shape, const mha_weights *w, int32_t batch, int32_t n,
                                        int32_t m, const float *queries, const float *keys, const float *values,
                                        const mha_mask *mask, float *out, float *attn, void *workspace,
                                        size_t workspace_bytes);
MHADEF size_t mha_reference_workspace_size(const mha_shape *shape, int32_t batch, int32_t n, int32_t m);

/* mha_forward (fast or reference, as it runs), also writing the statistics
   that training keeps: lse [batch][heads][n], each row's log-sum-exp
   ln(sum_j e^(s_j) + e^(sink)) over its visible scores s_j (after the
   scale, masks, bias and knobs). A row that sees no key saves -inf without
   sinks and the sink's logit with one (ln e^(sink)). mha_backward
   takes them (docs/training.md). Same workspace as mha_forward; lse NULL
   is mha_forward. Returns as mha_forward; under MHA_NO_EXTRAS, which leaves
   the statistics out, MHA_ERR_SHAPE for a non-NULL lse (nothing written). */
MHADEF mha_status mha_forward_lse(const mha_shape *shape, const mha_weights *w, int32_t batch, int32_t n, int32_t m,
                                  const float *queries, const float *keys, const float *values, const mha_mask *mask,
                                  float *out, float *lse, void *workspace, size_t workspace_bytes);

/* An optional parallel-for supplied by the caller: it must call task(arg, i)
   once for every i in [0, count), on any threads and in any order, and return
   when all have returned. The library starts no threads itself. */
typedef void (*mha_task)(void *arg, int32_t index);
typedef void (*mha_parallel_for)(void *user, mha_task task, void *arg, int32_t count);

/* mha_forward, with its independent pieces of work handed to parallel_for
   (with `user` as its first argument). parallel_for NULL: one thread. The
   result is the same, bit for bit, for any parallel_for. It is called three
   times per batch entry and kv head (project, attend, output; once more
   with additive scoring and with bf16 products, and once a call for RoPE's
   angles), so it should be cheap to call: a pool that keeps its threads. A
   call whose passes (one batch entry and kv head) have fewer than 2^18
   multiply-adds runs on the calling thread and never calls it: a hand-off
   costs more than such a step's work. Under MHA_FAST 0 the reference path
   runs on the calling thread and parallel_for is unused. */
MHADEF mha_status mha_forward_parallel(const mha_shape *shape, const mha_weights *w, int32_t batch, int32_t n,
                                       int32_t m, const float *queries, const float *keys, const float *values,
                                       const mha_mask *mask, float *out, float *attn, void *workspace,
                                       size_t workspace_bytes, mha_parallel_for parallel_for, void *user);

/* Packed weights for the fast path (MHA_FAST 1): W_q, W_k, W_v and W_o laid
   out as its GEMMs read them, made once and reused by every call (set
   w.packed to the buffer). mha_packed_weights_size() gives the bytes (any
   alignment; 0 for a bad shape, and 0 under MHA_FAST 0, where there is
   nothing to pack). mha_pack_weights() returns MHA_ERR_NULL, MHA_ERR_SHAPE,
   MHA_ERR_OVERFLOW, MHA_ERR_WORKSPACE (buffer NULL or too small) or MHA_OK.
   The buffer belongs to one shape and one build (vector width): a call whose
   shape differs returns MHA_ERR_SHAPE. If the weights change, pack again. */
MHADEF size_t mha_packed_weights_size(const mha_shape *shape);
MHADEF mha_status mha_pack_weights(const mha_shape *shape, const mha_weights *w, void *buffer, size_t bytes);

/* Head `head` (0-based) for one query: head_out = h_i of the formula above.
     query [d_q], keys [m][d_k], values [m][d_v], in; head_out [p_v], out.
     valid_len: keys j >= valid_len are masked (pass m for none); 0 <= valid_len <= m.
     workspace: mha_reference_workspace_size(shape, 1, 1, m) bytes (what
                mha_workspace_size(shape, 1, 1, m) gives under MHA_FAST 0).
   Needs w_q, w_k, w_v (and a_q, a_k, a_v for additive); w_o is not used.
   Returns as mha_forward; a head outside [0, heads) is MHA_ERR_SHAPE. */
MHADEF mha_status mha_head(const mha_shape *shape, const mha_weights *w, int32_t head, const float *query,
                           const float *keys, const float *values, int32_t m, int32_t valid_len,
                           float *head_out, void *workspace, size_t workspace_bytes);

/* ---- stages and decoding --------------------------------------------------
   mha_forward is three stages: project (W_q, W_k, W_v), attend (scores,
   masks, softmax, weighted sum of values) and output (W_o). mha_attend is
   the attend stage alone, mha_output_rows the output stage; mha_decode runs
   all three over a KV cache. */

/* The attention core on inputs you projected yourself (your own GEMMs, or
   another library's), in the layout a projection writes them:
     q          in   [batch][n][heads*p_q]     row r, head i at q + r*heads*p_q + i*p_q
     k          in   [batch][m][kv_heads*p_k]
     v          in   [batch][m][kv_heads*p_v]
     heads_out  out  [batch][n][heads*p_v]     the heads' outputs side by side, before W_o
   mask, attn, the scores and the rules are mha_forward's; w is read only for
   additive scoring (a_q, a_k, a_v; NULL everywhere else is fine), and d_q,
   d_k, d_v, p_o of the shape are not used (any value >= 1). workspace:
   mha_attend_workspace_size() bytes, any alignment. Returns as mha_forward.
   Under MHA_FAST 1 the fast path's attend stage runs it (one thread), else
   the reference path's. */
MHADEF mha_status mha_attend(const mha_shape *shape, const mha_weights *w, int32_t batch, int32_t n, int32_t m,
                             const float *q, const float *k, const float *v, const mha_mask *mask,
                             float *heads_out, float *attn, void *workspace, size_t workspace_bytes);
MHADEF size_t mha_attend_workspace_size(const mha_shape *shape, int32_t batch, int32_t n, int32_t m);

/* A KV cache for token-by-token decoding, owned by the caller: the library
   never allocates it, and only mha_cache_append and mha_decode write it.
   Position P of sequence b (0, 1, ... in the order its tokens were
   appended) lives in slot P (window 0), or in slot P mod capacity (window
   >= 1: the slots are reused as a ring). Start with every length 0. */
typedef struct mha_cache {
    void *k;          /* [batch][kv_heads][capacity][p_k]  projected keys, W_k k + b_k */
    void *v;          /* [batch][kv_heads][capacity][p_v]  projected values */
    int32_t *length;  /* [batch]: tokens appended so far = the position of the next token */
    int32_t capacity; /* slots per sequence and kv head, >= 1 */
    int32_t window;   /* 0: a query at position P sees every position <= P, and appending past
                         capacity is MHA_ERR_CAPACITY; w >= 1: it sees P-w+1 .. P, and the
                         slots are a ring (capacity >= w + t - 1 for a chunk of t tokens) */
    int32_t type;     /* element type of k (and of v, unless value_type says otherwise):
                         MHA_F32 (0: float), MHA_F16 or MHA_BF16 (uint16_t), MHA_Q8 or MHA_Q4
                         (blocks; the 16-bit and block types with dot scoring only); MHA_I8
                         (int8_t) for mha_decode_q8 and mha_cache_append_q8, which take it
                         alone; MHA_I16 (int16_t) so for mha_decode_q16 and
                         mha_cache_append_q16; any other value is MHA_ERR_SHAPE */
    int32_t keep_first; /* 0, or with a window: s in 1 .. window-1, the first s positions kept in
                         slots 0 .. s-1 for good (attention sinks, StreamingLLM) and seen by
                         every query besides its window; the ring is then the slots s ..
                         capacity-1 (capacity >= s + window + t - 1). Compiled out with
                         MHA_NO_EXTRAS */
    int32_t value_type; /* 0: v's elements are of `type` too; else v's own element type, MHA_F16,
                         MHA_BF16, MHA_Q8 or MHA_Q4 (e.g. MHA_Q8 keys, MHA_Q4 values; float values
                         beside other keys cannot be asked for). With MHA_I8 or MHA_I16 keys
                         only 0 */
} mha_cache;

/* Bytes of cache->k plus cache->v for this shape, batch and capacity (0 for
   a bad shape or an overflow): with float elements, and with elements of
   `type` (MHA_I8: one byte; MHA_I16: two; MHA_Q8 and MHA_Q4: 34 and 18 bytes a block of
   32, a row of p in ceil(p / 32) blocks; 0 also for an unknown type).
   mha_cache_array_bytes: the bytes of one of them, cache->k (which 0) or
   cache->v (1), with elements of `type` (for keys and values of two types). */
MHADEF size_t mha_cache_bytes(const mha_shape *shape, int32_t batch, int32_t capacity);
MHADEF size_t mha_cache_bytes_typed(const mha_shape *shape, int32_t batch, int32_t capacity, int32_t type);
MHADEF size_t mha_cache_array_bytes(const mha_shape *shape, int32_t batch, int32_t capacity, int32_t type,
                                    int32_t which);
/* The address of the cached key (which 0) or value (1) of position
   `position` of sequence b (of the cache's batch), kv head kv_head: p_k
   (p_v) elements of the array's type (float, uint16_t, int8_t or blocks), found by
   the slot rule (a window's ring, keep_first), so that no caller indexes
   the void * arrays by hand. NULL for a bad shape or cache (as
   mha_cache_append checks them), b outside 0 .. batch-1, kv_head outside
   0 .. kv_heads-1, position < 0, which not 0 or 1, or a position the cache
   does not hold (>= length[b], past the capacity, or overwritten in a
   ring). */
MHADEF void *mha_cache_row(const mha_shape *shape, const mha_cache *cache, int32_t batch, int32_t b,
                           int32_t kv_head, int32_t position, int32_t which);

/* Projects t keys and values per sequence and appends them to the cache at
   each sequence's own length[b], which then grows by t:
     keys [batch][t][d_k], values [batch][t][d_v], in.
   For a cross-attention cache (an encoder's output), or a prompt whose
   queries you do not need. Needs w_k and w_v (biases optional). Returns, in
   this order: MHA_ERR_NULL (shape or w), MHA_ERR_SHAPE (the shape; batch or
   t < 0; capacity < 1; window < 0; an unknown type or value_type, or
   either not float with additive scoring; keep_first < 0, or > 0 without a window, >= window or
   >= capacity; a window and capacity < keep_first + window + t - 1), MHA_ERR_NULL
   (cache, its arrays, keys, values, w_k, w_v), MHA_ERR_OVERFLOW, MHA_ERR_WORKSPACE (mha_decode_workspace_size() bytes),
   MHA_ERR_MASK (a length < 0, or > capacity without a window),
   MHA_ERR_CAPACITY (without a window length + t > capacity; with one
   length + t > INT32_MAX, or > SIZE_MAX where size_t has 16 bits). On an
   error nothing is written, the cache and its lengths included. Keys and
   values are computed in fp32 (projection, bias, RoPE) and then stored in
   the cache's types: rounded (16-bit) or quantized block by block (MHA_Q8,
   MHA_Q4: docs/quantized.md; a block with a value that is not finite reads
   as NaN). A cache of a block type needs k and v aligned for uint16_t. */
MHADEF mha_status mha_cache_append(const mha_shape *shape, const mha_weights *w, mha_cache *cache, int32_t batch,
                                   int32_t t, const float *keys, const float *values, void *workspace,
                                   size_t workspace_bytes);

/* Decodes t new tokens per sequence against the cache.
     queries  in   [batch][t][d_q]
     keys, values  in  [batch][t][d_k], [batch][t][d_v]: self-attention. The
              t tokens are appended at length[b] (which grows by t), and new
              query i, at position P = old length + i, attends to every
              position <= P (and > P - window, or < keep_first). t = 1 is one decoding step,
              t > 1 a chunked prefill. Sequences may have different lengths.
              Both NULL: cross-attention. Nothing is appended; every query
              attends to every position the cache holds (the last
              min(length, capacity)); lengths do not change.
     out      out  [batch][t][p_o]
   The scores, rules and output of mha_forward (no mask, no attn): decoding
   a sequence token by token gives mha_forward's output with a causal mask.
   workspace: mha_decode_workspace_size(shape, batch, t, capacity) bytes.
   Returns as mha_cache_append (one of keys and values NULL: MHA_ERR_NULL).
   Under MHA_FAST 1 the fast path (mha_decode_parallel: with a parallel-for). */
MHADEF mha_status mha_decode(const mha_shape *shape, const mha_weights *w, mha_cache *cache, int32_t batch,
                             int32_t t, const float *queries, const float *keys, const float *values, float *out,
                             void *workspace, size_t workspace_bytes);
MHADEF mha_status mha_decode_parallel(const mha_shape *shape, const mha_weights *w, mha_cache *cache,
                                      int32_t batch, int32_t t, const float *queries, const float *keys,
                                      const float *values, float *out, void *workspace, size_t workspace_bytes,
                                      mha_parallel_for parallel_for, void *user);
/* Speculative decoding: t draft tokens per sequence decoded as a tree in
   one call. parents [batch][t] gives each draft's parent among the t
   (-1: the cached prefix; else an earlier draft, -1 <= parents[i] < i).
   Draft i sits at position length[b] + depth(i) (depth 0 for a child of
   the prefix, one more than its parent's for the rest): its key is rotated
   and ALiBi counts distances there, and its query sees the cached positions
   a query at that position sees (window, keep_first) plus its ancestors
   among the drafts and itself, not its siblings; no mask is built. Its
   output equals decoding the prefix and then its path (its ancestors and
   itself) token by token. The drafts' keys and values are written to the
   slots of positions length[b] .. length[b]+t-1 as an append would write
   them, but the lengths do not change: those slots are scratch, which the
   next call overwrites (decode the accepted drafts again to keep them).
   Needs keys and values. Returns as mha_decode, and MHA_ERR_NULL for
   parents NULL, MHA_ERR_MASK (after the lengths' check) for a parent out
   of range, MHA_ERR_SHAPE under MHA_NO_EXTRAS. The fast path under
   MHA_FAST 1, on one thread; the workspace is mha_decode_workspace_size's. */
MHADEF mha_status mha_decode_tree(const mha_shape *shape, const mha_weights *w, mha_cache *cache, int32_t batch,
                                  int32_t t, const int32_t *parents, const float *queries, const float *keys,
                                  const float *values, float *out, void *workspace, size_t workspace_bytes);
/* The reference path of mha_decode, always compiled (the oracle). */
MHADEF mha_status mha_decode_reference(const mha_shape *shape, const mha_weights *w, mha_cache *cache,
                                       int32_t batch, int32_t t, const float *queries, const float *keys,
                                       const float *values, float *out, void *workspace, size_t workspace_bytes);
/* Workspace bytes of mha_decode, mha_decode_parallel and mha_cache_append for
   t tokens (0 for a bad shape or an overflow), at any alignment; and of
   mha_decode_reference. Neither depends on the cache's contents. */
MHADEF size_t mha_decode_workspace_size(const mha_shape *shape, int32_t batch, int32_t t, int32_t capacity);
MHADEF size_t mha_decode_reference_workspace_size(const mha_shape *shape, int32_t batch, int32_t t,
                                                  int32_t capacity);

/* concat[heads*p_v] = [head_outs[0]; ...; head_outs[heads-1]], each [p_v].
   Returns, in this order: MHA_ERR_NULL (head_outs or concat), MHA_ERR_SHAPE (heads or
   p_v < 1), MHA_ERR_OVERFLOW, MHA_ERR_NULL (any head_outs[i]), else MHA_OK. */
MHADEF mha_status mha_concat(int32_t heads, int32_t p_v, const float *const *head_outs, float *concat);

/* out[p_o] = W_o concat + b_o, concat [heads*p_v]. Needs only w_o (b_o optional). */
MHADEF mha_status mha_output(const mha_shape *shape, const mha_weights *w, const float *concat, float *out);
/* The output stage for many rows: out[r] = W_o concat[r] + b_o for r < rows,
   concat [rows][heads*p_v], out [rows][p_o] (mha_attend's heads_out with
   rows = batch n). Returns as mha_output, and MHA_ERR_SHAPE for rows < 0. */
MHADEF mha_status mha_output_rows(const mha_shape *shape, const mha_weights *w, int32_t rows, const float *concat,
                                  float *out);

/* Training: the gradients of a forward pass (docs/training.md; the fast
   path under MHA_FAST 1 for dot scoring without the soft-cap, else the
   reference path). For mha_forward's inputs and the gradient of a loss with
   respect to its output, d_out [batch][n][p_o]:
     lse      NULL, or the statistics mha_forward_lse saved for these inputs
              (they spare a pass where the keys are many; NULL: recomputed).
              A finite value is taken as the row's (the caller's contract);
              where a kv head's group has one that is not finite (-inf for a
              row that sees no key, NaN, +inf) that group's statistics are
              recomputed, as with lse NULL (the same bits)
     d_queries, d_keys, d_values  out (=), or NULL: the inputs' gradients
              [batch][n][d_q], [batch][m][d_k], [batch][m][d_v]; they must not
              overlap any input
     grads    NULL, or the weights' gradients, each NULL (not wanted) or ADDED
              to (+=, so that a caller sums a batch in parts), laid out as the
              weights they belong to
   The probabilities are recomputed block by block from the inputs (nothing
   of size n x m is kept). Dot and additive scoring, every mask, GQA, RoPE,
   ALiBi, the soft-cap, sinks and 16-bit weights (whose gradients are float).
   On an error nothing is written. */
typedef struct mha_grads {
    float *w_q, *b_q, *w_k, *b_k, *w_v, *b_v, *w_o, *b_o; /* as mha_weights' */
    float *a_q, *a_k, *a_v;                               /* additive only */
    float *sinks;                                         /* [heads], with sinks */
} mha_grads;
MHADEF mha_status mha_backward(const mha_shape *shape, const mha_weights *w, int32_t batch, int32_t n, int32_t m,
                               const float *queries, const float *keys, const float *values, const mha_mask *mask,
                               const float *lse, const float *d_out, float *d_queries, float *d_keys,
                               float *d_values, const mha_grads *grads, void *workspace, size_t workspace_bytes);
/* Workspace bytes of mha_backward (0 for a bad shape or an overflow), at
   any alignment: no n x m term. */
MHADEF size_t mha_backward_workspace_size(const mha_shape *shape, int32_t batch, int32_t n, int32_t m);
/* mha_backward with its work handed to parallel_for (with `user`; NULL:
   one thread) as min(kv_heads, 8) tasks, each taking kv heads t, t + 8, ...;
   a task other than the first sums the inputs' gradients in arrays of its
   own (in the workspace), added at the end in task order. The result is the
   same, bit for bit, for any parallel_for (NULL included), and equals
   mha_backward's within rounding (its sums of dQ, dK, dV run in another
   order). Where the fast path does not run the call (additive scoring, the
   soft-cap, MHA_FAST 0), the reference path runs it on the calling thread.
   workspace: mha_backward_parallel_workspace_size() bytes (with several
   tasks, each holds the fast path's parts and, but for the first, a dQ, dK
   and dV of its own). Returns as mha_backward. */
MHADEF mha_status mha_backward_parallel(const mha_shape *shape, const mha_weights *w, int32_t batch, int32_t n,
                                        int32_t m, const float *queries, const float *keys, const float *values,
                                        const mha_mask *mask, const float *lse, const float *d_out, float *d_queries,
                                        float *d_keys, float *d_values, const mha_grads *grads, void *workspace,
                                        size_t workspace_bytes, mha_parallel_for parallel_for, void *user);
MHADEF size_t mha_backward_parallel_workspace_size(const mha_shape *shape, int32_t batch, int32_t n, int32_t m);
/* The reference path, always compiled: mha_backward's contract, computed a
   query row at a time by plain loops (the oracle of the fast path), with
   its own workspace size. Under MHA_FAST 0 mha_backward runs it too. */
MHADEF mha_status mha_backward_reference(const mha_shape *shape, const mha_weights *w, int32_t batch, int32_t n,
                                         int32_t m, const float *queries, const float *keys, const float *values,
                                         const mha_mask *mask, const float *lse, const float *d_out,
                                         float *d_queries, float *d_keys, float *d_values, const mha_grads *grads,
                                         void *workspace, size_t workspace_bytes);
MHADEF size_t mha_backward_reference_workspace_size(const mha_shape *shape, int32_t batch, int32_t n, int32_t m);

/* 16-bit floats: IEEE binary16 (f16) and bfloat16 (bf16), as their bits in a
   uint16_t, to and from float, bit for bit the same on every target (no FPU
   or compiler conversion is used): float -> 16 bits rounds to nearest, ties
   to even, overflows to inf and keeps subnormals; 16 bits -> float is
   exact. A NaN stays a NaN, made quiet, with the top bits of its payload. */
MHADEF uint16_t mha_f16_from_f32(float x);
MHADEF float mha_f32_from_f16(uint16_t h);
MHADEF uint16_t mha_bf16_from_f32(float x);
MHADEF float mha_f32_from_bf16(uint16_t h);

/* ---- int8 attention ---------------------------------------------------------
   mha_forward in 8-bit integers with TFLite's quantisation scheme, for cores
   without an FPU: no float operation at all on the way (docs/int8.md).
   A tensor's real value is scale (q - zero); int8 activations have a scale
   and a zero point per tensor, weights a scale per row and zero point 0,
   biases are int32 with scale s_in s_w[row] and zero point 0. Every
   intermediate has its own quantisation: the projected q, k and v (int8),
   the scores (int32, scale s_q s_k scale), the probabilities (unsigned
   Q0.15: 0 .. 32768 stands for 0 .. 1), the heads side by side (int8) and
   out (int8). Each change of scale is a mha_q8_rescale. Dot scoring; every
   mask except bias; GQA; a row that sees no key gets a zero head (its
   heads' zero point). Not (MHA_ERR_SHAPE): additive scoring, RoPE, ALiBi,
   the soft-cap, a bias mask. */

/* x -> x multiplier 2^(shift - 31), rounded as TFLite's
   MultiplyByQuantizedMultiplier: by default its two roundings (a rounding
   doubling high multiply, ties up, then a rounding right shift, ties away
   from zero);
   with MHA_Q8_SINGLE_ROUNDING 1 one rounding of the exact product, ties up
   (TFLITE_SINGLE_ROUNDING). Valid: shift in [-31, 30] and multiplier 0 (the
   value 0) or in [2^30, 2^31); the int8 calls refuse any other rescale
   (MHA_ERR_SHAPE), also a multiplier 0 with its shift out of range. A
   result out of int32's range saturates. */
typedef struct mha_q8_rescale {
    int32_t multiplier, shift;
} mha_q8_rescale;
/* The rescale of a real factor >= 0 (TFLite's QuantizeMultiplier: the
   fraction rounded to 31 bits, half away from zero; a factor below 2^-32
   becomes 0). MHA_ERR_NULL, MHA_ERR_SHAPE (not finite, < 0, or >= 2^30),
   else MHA_OK. Exact where double has 53 bits (not on AVR, whose double is
   a float). */
MHADEF mha_status mha_q8_rescale_make(double real, mha_q8_rescale *r);
/* x rescaled by r, as above, for any x; 0 for an r that is not valid. */
MHADEF int32_t mha_q8_rescale_apply(int32_t x, mha_q8_rescale r);

/* int8 weights, row-major as mha_weights', with per-row rescales: r_q[row]
   takes sum_c W_q[row][c] (q_c - zero_in_q) + b_q[row] to the projected
   q's scale (s_in_q s_wq[row] / s_q); likewise r_k, r_v; r_o from the heads
   to out. Biases may be NULL (0). mha_q8_prepare fills the rescales. */
typedef struct mha_q8_weights {
    const int8_t *w_q;         /* [heads*p_q][d_q] */
    const int32_t *b_q;        /* [heads*p_q] */
    const mha_q8_rescale *r_q; /* [heads*p_q] */
    const int8_t *w_k;         /* [kv_heads*p_k][d_k] */
    const int32_t *b_k;
    const mha_q8_rescale *r_k;
    const int8_t *w_v;         /* [kv_heads*p_v][d_v] */
    const int32_t *b_v;
    const mha_q8_rescale *r_v;
    const int8_t *w_o;         /* [p_o][heads*p_v] */
    const int32_t *b_o;
    const mha_q8_rescale *r_o; /* [p_o] */
} mha_q8_weights;

/* The tensors' zero points (each -128 .. 127) and the two rescales of the
   attend stage: score takes a difference of scores to a base-2 exponent in
   Q16 (factor s_q s_k scale log2(e) 2^16), head takes sum_j p_j (v_j - zero_v)
   to the heads' scale (factor s_v 2^-15 / s_heads). */
typedef struct mha_q8_params {
    int32_t zero_in_q, zero_in_k, zero_in_v; /* the queries, keys and values given */
    int32_t zero_q, zero_k, zero_v;          /* the projected q, k, v */
    int32_t zero_heads, zero_out;            /* the heads side by side; out */
    mha_q8_rescale score, head;
} mha_q8_params;

/* The real scales, from which mha_q8_prepare makes every rescale: the
   tensors' (each > 0) and the weights' per row (each > 0). */
typedef struct mha_q8_scales {
    float in_q, in_k, in_v;               /* the queries, keys and values given */
    float q, k, v, heads, out;            /* the projected q, k, v; the heads; out */
    const float *w_q, *w_k, *w_v, *w_o;   /* [heads*p_q], [kv_heads*p_k], [kv_heads*p_v], [p_o] */
} mha_q8_scales;
/* The rescales of a shape: rows (mha_q8_rows(shape) of them: 0 for a bad
   shape) get r_q, r_k, r_v, r_o in that order, w->r_q .. r_o point into
   rows, and p->score, p->head are set (the zero points are yours to set).
   Computed in double, each step rounded to double (a cast removes x87's
   excess precision). Returns MHA_ERR_NULL, MHA_ERR_SHAPE (the shape; a
   scale not > 0 and finite; a factor too large), MHA_ERR_WORKSPACE
   (count < mha_q8_rows(shape)), else MHA_OK; nothing written on an error. */
MHADEF size_t mha_q8_rows(const mha_shape *shape);
MHADEF mha_status mha_q8_prepare(const mha_shape *shape, const mha_q8_scales *scales, mha_q8_weights *w,
                                 mha_q8_params *p, mha_q8_rescale *rows, size_t count);

/* mha_forward in int8: queries [batch][n][d_q], keys [batch][m][d_k],
   values [batch][m][d_v], out [batch][n][p_o], all int8; the workspace
   mha_q8_workspace_size(shape, batch, n, m) bytes, any alignment (it does
   not depend on batch or n). Limits of the int32 sums (MHA_ERR_SHAPE past
   them): d_q, d_k, d_v and heads p_v <= 65535, p_q <= 16384, m <= 2^22.
   Returns as mha_forward; also MHA_ERR_NULL for p or a rescale array, and
   MHA_ERR_SHAPE for a zero point or rescale out of range (checked once the
   arrays' byte counts are known to fit size_t). On an error nothing is
   written. */
MHADEF size_t mha_q8_workspace_size(const mha_shape *shape, int32_t batch, int32_t n, int32_t m);
/* int8 decoding over a KV cache of type MHA_I8: cache->k [batch][kv_heads]
   [capacity][p_k] and cache->v hold the projected keys and values as int8
   (the projected k's and v's quantisation: zero_k, zero_v). The contract of
   mha_decode and mha_cache_append (positions, windows as rings, cross-
   attention with keys and values NULL, the statuses, nothing written on an
   error), on int8 inputs and out, with mha_forward_q8's arithmetic: decoding
   a sequence token by token gives mha_forward_q8's output with a causal
   mask, bit for bit (with keep_first, a forward whose keep mask is the
   window and the first columns). The workspace:
   mha_q8_decode_workspace_size(shape, batch, t, capacity) bytes, for
   both. */
MHADEF mha_status mha_decode_q8(const mha_shape *shape, const mha_q8_weights *w, const mha_q8_params *p,
                                mha_cache *cache, int32_t batch, int32_t t, const int8_t *queries,
                                const int8_t *keys, const int8_t *values, int8_t *out, void *workspace,
                                size_t workspace_bytes);
MHADEF mha_status mha_cache_append_q8(const mha_shape *shape, const mha_q8_weights *w, const mha_q8_params *p,
                                      mha_cache *cache, int32_t batch, int32_t t, const int8_t *keys,
                                      const int8_t *values, void *workspace, size_t workspace_bytes);
MHADEF size_t mha_q8_decode_workspace_size(const mha_shape *shape, int32_t batch, int32_t t, int32_t capacity);
MHADEF mha_status mha_forward_q8(const mha_shape *shape, const mha_q8_weights *w, const mha_q8_params *p,
                                 int32_t batch, int32_t n, int32_t m, const int8_t *queries, const int8_t *keys,
                                 const int8_t *values, const mha_mask *mask, int8_t *out, void *workspace,
                                 size_t workspace_bytes);
/* 16x8: the layer with int16 activations and int8 weights, TFLite's 16x8
   quantisation (docs/int8.md, "16x8"): every activation (the queries, keys
   and values given, the projected q, k, v, the heads, out) int16 with one
   scale and zero point 0; weights int8 per row as for int8; biases int64
   (scale s_in s_w[row]); the sums int64; the softmax TFLite's int16 one
   (its exp and 1/(1 + x) tables). The weights as mha_q8_weights' but for
   the biases' type; mha_q16_prepare fills r_q .. r_o. */
typedef struct mha_q16_weights {
    const int8_t *w_q;         /* [heads*p_q][d_q] */
    const int64_t *b_q;        /* [heads*p_q] */
    const mha_q8_rescale *r_q; /* [heads*p_q] */
    const int8_t *w_k;         /* [kv_heads*p_k][d_k] */
    const int64_t *b_k;
    const mha_q8_rescale *r_k;
    const int8_t *w_v;         /* [kv_heads*p_v][d_v] */
    const int64_t *b_v;
    const mha_q8_rescale *r_v;
    const int8_t *w_o;         /* [p_o][heads*p_v] */
    const int64_t *b_o;
    const mha_q8_rescale *r_o; /* [p_o] */
} mha_q16_weights;
/* The rescales of a shape, as mha_q8_prepare (rows: mha_q8_rows(shape)),
   with the attend stage's score factor s_q s_k scale 65535 / 10 (a score
   difference to the exp table's input) and every zero point of p set to 0.
   Each rescale's shift must be at most 7 (a factor below 128), else
   MHA_ERR_SHAPE. */
MHADEF mha_status mha_q16_prepare(const mha_shape *shape, const mha_q8_scales *scales, mha_q16_weights *w,
                                  mha_q8_params *p, mha_q8_rescale *rows, size_t count);
/* mha_forward in 16x8: queries [batch][n][d_q], keys [batch][m][d_k],
   values [batch][m][d_v], out [batch][n][p_o], all int16; the workspace
   mha_q16_workspace_size(shape, batch, n, m) bytes, any alignment. As
   mha_forward_q8 (masks, GQA, statuses, nothing written on an error), with
   m <= 65535 (the softmax's int32 sum); also MHA_ERR_SHAPE for a zero
   point of p that is not 0 or a rescale with a shift above 7. */
MHADEF size_t mha_q16_workspace_size(const mha_shape *shape, int32_t batch, int32_t n, int32_t m);
MHADEF mha_status mha_forward_q16(const mha_shape *shape, const mha_q16_weights *w, const mha_q8_params *p,
                                  int32_t batch, int32_t n, int32_t m, const int16_t *queries, const int16_t *keys,
                                  const int16_t *values, const mha_mask *mask, int16_t *out, void *workspace,
                                  size_t workspace_bytes);
/* 16x8 decoding over a KV cache of type MHA_I16 (cache->k [batch][kv_heads]
   [capacity][p_k] and cache->v: the projected keys and values as int16,
   in the projected k's and v's scales): mha_decode_q8 and
   mha_cache_append_q8's contract with mha_forward_q16's arithmetic
   (decoding token by token equals mha_forward_q16 with a causal mask, bit
   for bit), capacity <= 65535. The workspace:
   mha_q16_decode_workspace_size(shape, batch, t, capacity) bytes, for
   both. */
MHADEF mha_status mha_decode_q16(const mha_shape *shape, const mha_q16_weights *w, const mha_q8_params *p,
                                 mha_cache *cache, int32_t batch, int32_t t, const int16_t *queries,
                                 const int16_t *keys, const int16_t *values, int16_t *out, void *workspace,
                                 size_t workspace_bytes);
MHADEF mha_status mha_cache_append_q16(const mha_shape *shape, const mha_q16_weights *w, const mha_q8_params *p,
                                       mha_cache *cache, int32_t batch, int32_t t, const int16_t *keys,
                                       const int16_t *values, void *workspace, size_t workspace_bytes);
MHADEF size_t mha_q16_decode_workspace_size(const mha_shape *shape, int32_t batch, int32_t t, int32_t capacity);

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

/* ---- contents ----------------------------------------------------------------
   The implementation's sections, in this order (search for "---- " and the
   name); docs/internals.md tells where to add a scoring function, an element
   type or an ISA.
     options                the configuration macros checked, includes, inline/noinline
     bits of a float        float <-> bits, 16-bit conversions
     element types          rows and elements of f32/f16/bf16/q8/q4: load, store, quantize
     math without libm      exp, tanh, ln (MHA_NO_LIBM)
     the call               mha__ctx (one call's sizes and arguments), the checks as one list
                            (MHA__CHECKS_*, expanded by mha__check_shape / mha__check_weights,
                            read by mha_explain), mha__setup, the workspace's layout
     reference kernels      dot products (compensated), the softmax weight
     positions ...          RoPE, ALiBi, the soft-cap, sinks; their stand-ins when compiled out
     reference stages       mha__project, the rules (mha__visible, mha__decode_sees), mha__pool,
                            the attention kernel mha__scores (one row over a key range through a
                            position map), its set-ups mha__attend and mha__attend_cache
     fast path              one block per vector unit (mha__v and its operations), the GEMM and
                            its micro-kernels, packing, the forward's stages (mha__fast_project,
                            mha__fast_attend: query tiles against key blocks, online softmax,
                            mha__fast_output)
     fast decoding          split-KV items over the cache (mha__dec_item; its leaves by element
                            type mha__dec_keys, mha__dec_vals), their merge
     the door               mha__check, mha__enter / mha__enter_cache (the validation pass),
                            the reference stages' passes, the dispatcher mha__stages,
                            mha__compute / mha__compute_cache
     public functions       the API's definitions, each a call of the door
     training               the backward pass, reference (mha__bwd_row) and fast (mha__bwf_*)
     int8 attention         mha_forward_q8 and int8 decoding: the requantising linear stage,
                            the integer softmax, DSP/Helium products
   ---------------------------------------------------------------------------- */

/* ---- options ---------------------------------------------------------------- */

#if defined(MHA_NO_STATUS_STRINGS) && (0 - MHA_NO_STATUS_STRINGS - 1) == 1 /* defined empty: 1 */
#undef MHA_NO_STATUS_STRINGS
#define MHA_NO_STATUS_STRINGS 1
#endif
#ifndef MHA_NO_STATUS_STRINGS
#define MHA_NO_STATUS_STRINGS 0
#endif
#if MHA_NO_STATUS_STRINGS != 0 && MHA_NO_STATUS_STRINGS != 1
#error "MHA_NO_STATUS_STRINGS must be 0 or 1"
#endif

#if defined(MHA_NO_LIBM) && (0 - MHA_NO_LIBM - 1) == 1 /* defined empty: 1 */
#undef MHA_NO_LIBM
#define MHA_NO_LIBM 1
#endif
#ifndef MHA_NO_LIBM
#define MHA_NO_LIBM 0
#endif
#if MHA_NO_LIBM != 0 && MHA_NO_LIBM != 1
#error "MHA_NO_LIBM must be 0 or 1"
#endif
#if defined(MHA_NO_ADDITIVE) && (0 - MHA_NO_ADDITIVE - 1) == 1 /* defined empty: 1 */
#undef MHA_NO_ADDITIVE
#define MHA_NO_ADDITIVE 1
#endif
#ifndef MHA_NO_ADDITIVE
#define MHA_NO_ADDITIVE 0
#endif
#if MHA_NO_ADDITIVE != 0 && MHA_NO_ADDITIVE != 1
#error "MHA_NO_ADDITIVE must be 0 or 1"
#endif
#if defined(MHA_NO_EXTRAS) && (0 - MHA_NO_EXTRAS - 1) == 1 /* defined empty: 1 */
#undef MHA_NO_EXTRAS
#define MHA_NO_EXTRAS 1
#endif
#ifndef MHA_NO_EXTRAS
#define MHA_NO_EXTRAS 0
#endif
#if MHA_NO_EXTRAS != 0 && MHA_NO_EXTRAS != 1
#error "MHA_NO_EXTRAS must be 0 or 1"
#endif

#if defined(MHA_FAST) && (0 - MHA_FAST - 1) == 1 /* defined empty: 1 */
#undef MHA_FAST
#define MHA_FAST 1
#endif
/* The default: the fast path on hosted 64-bit targets with a vector unit
   (x86-64 has SSE2 at least, aarch64 NEON), the reference path elsewhere
   (microcontrollers, 32-bit targets, freestanding builds). */
#ifndef MHA_FAST
#if (defined(__x86_64__) || defined(_M_X64) || defined(__aarch64__) || defined(_M_ARM64)) && \
    defined(__STDC_HOSTED__) && __STDC_HOSTED__ == 1
#define MHA_FAST 1
#else
#define MHA_FAST 0
#endif
#endif
#if MHA_FAST != 0 && MHA_FAST != 1
#error "MHA_FAST must be 0 or 1"
#endif
#if defined(MHA_NO_SIMD) && (0 - MHA_NO_SIMD - 1) == 1 /* defined empty: 1 */
#undef MHA_NO_SIMD
#define MHA_NO_SIMD 1
#endif
#ifndef MHA_NO_SIMD
#define MHA_NO_SIMD 0
#endif
#if MHA_NO_SIMD != 0 && MHA_NO_SIMD != 1
#error "MHA_NO_SIMD must be 0 or 1"
#endif

/* MHA_BF16_DOT 1 (opt-in): the fast path multiplies bf16 weights by bf16
   activations on AVX512-BF16 (vdpbf16ps), where the compiler targets it;
   ignored elsewhere (docs/16bit.md, "bf16 products"). */
#if defined(MHA_BF16_DOT) && (0 - MHA_BF16_DOT - 1) == 1 /* defined empty: 1 */
#undef MHA_BF16_DOT
#define MHA_BF16_DOT 1
#endif
#ifndef MHA_BF16_DOT
#define MHA_BF16_DOT 0
#endif
#if MHA_BF16_DOT != 0 && MHA_BF16_DOT != 1
#error "MHA_BF16_DOT must be 0 or 1"
#endif

/* MHA_NO_AMX 1: MHA_BF16_DOT's GEMMs never use AMX tiles, even where the CPU
   and the OS allow them (default 0: used where they are). */
#if defined(MHA_NO_AMX) && (0 - MHA_NO_AMX - 1) == 1 /* defined empty: 1 */
#undef MHA_NO_AMX
#define MHA_NO_AMX 1
#endif
#ifndef MHA_NO_AMX
#define MHA_NO_AMX 0
#endif
#if MHA_NO_AMX != 0 && MHA_NO_AMX != 1
#error "MHA_NO_AMX must be 0 or 1"
#endif

/* MHA_Q8_NO_DSP 1: the int8 path's plain C products also where the Cortex-M
   DSP extension or Helium (MVE) is (the tests' oracle build); default 0. */
#if defined(MHA_Q8_NO_DSP) && (0 - MHA_Q8_NO_DSP - 1) == 1 /* defined empty: 1 */
#undef MHA_Q8_NO_DSP
#define MHA_Q8_NO_DSP 1
#endif
#ifndef MHA_Q8_NO_DSP
#define MHA_Q8_NO_DSP 0
#endif
#if MHA_Q8_NO_DSP != 0 && MHA_Q8_NO_DSP != 1
#error "MHA_Q8_NO_DSP must be 0 or 1"
#endif
/* the int8 products (mha__q8_dot) by Helium's VMLADAVA, eight at a time
   (MHA__Q8_MVE), else by SXTB16 and SMLAD (MHA__Q8_DSP), else plain C */
#if !MHA_Q8_NO_DSP && defined(__ARM_FEATURE_MVE) && (__ARM_FEATURE_MVE & 1) && \
    (defined(__GNUC__) || defined(__clang__))
#define MHA__Q8_MVE 1
#define MHA__Q8_DSP 0
#include <arm_mve.h>
#elif !MHA_Q8_NO_DSP && defined(__ARM_FEATURE_DSP) && defined(__ARM_FEATURE_SIMD32) && \
    (defined(__GNUC__) || defined(__clang__))
#define MHA__Q8_MVE 0
#define MHA__Q8_DSP 1
#include <arm_acle.h>
typedef uint32_t __attribute__((may_alias, aligned(1))) mha__u32a; /* a 32-bit load at any address */
#else
#define MHA__Q8_MVE 0
#define MHA__Q8_DSP 0
#endif

/* MHA_Q8_SINGLE_ROUNDING 1: the int8 path's rescales round once
   (docs/int8.md); default 0, TFLite's two roundings. */
#if defined(MHA_Q8_SINGLE_ROUNDING) && (0 - MHA_Q8_SINGLE_ROUNDING - 1) == 1 /* defined empty: 1 */
#undef MHA_Q8_SINGLE_ROUNDING
#define MHA_Q8_SINGLE_ROUNDING 1
#endif
#ifndef MHA_Q8_SINGLE_ROUNDING
#define MHA_Q8_SINGLE_ROUNDING 0
#endif
#if MHA_Q8_SINGLE_ROUNDING != 0 && MHA_Q8_SINGLE_ROUNDING != 1
#error "MHA_Q8_SINGLE_ROUNDING must be 0 or 1"
#endif

#include <float.h>
/* the fast path's vector intrinsics (outside extern "C", as C++ needs) */
#if MHA_FAST && !MHA_NO_SIMD && (defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__)))
#if defined(__cplusplus) && defined(__GNUC__) && !defined(__clang__)
/* g++ 12 reports the AVX-512 headers' own self-initialised placeholders */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop
#else
#include <immintrin.h>
#endif
#elif MHA_FAST && !MHA_NO_SIMD && defined(__aarch64__) && defined(__ARM_NEON)
#include <arm_neon.h>
#elif MHA_FAST && !MHA_NO_SIMD && defined(__ARM_FEATURE_MVE) && (__ARM_FEATURE_MVE & 2)
#include <arm_mve.h>
#endif

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
   function costs code size and stack on small cores (register spills), and
   mha__enter's frame, which holds the call state, must end before
   mha__compute runs. */
/* MHA__INLINE folds a small helper into its callers (their frames then hold
   its registers, and no frame of its own nests below them) where the
   compiler optimises; at -O0 it is one function (a build for a debugger
   compiles in a quarter of the time and steps through each helper once,
   and coverage counts a helper's branches once, not in each caller's
   copy). */
#if defined(__GNUC__) || defined(__clang__)
#define MHA__PRIVATE static __attribute__((unused))
#define MHA__NOINLINE __attribute__((noinline))
#if defined(__OPTIMIZE__)
#define MHA__INLINE __inline__ __attribute__((always_inline))
#else
#define MHA__INLINE
#endif
#elif defined(_MSC_VER)
#define MHA__PRIVATE static
#define MHA__NOINLINE __declspec(noinline)
#define MHA__INLINE __forceinline
#else
#define MHA__PRIVATE static
#define MHA__NOINLINE
#define MHA__INLINE
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---- bits of a float ------------------------------------------------------- */
/* The float whose bits are u, without type punning or libc (GCC and clang
   turn the builtin into a register move). */
MHA__PRIVATE float mha__from_bits(uint32_t u) {
    float f = 0.0f;
#if defined(__GNUC__) || defined(__clang__)
    __builtin_memcpy(&f, &u, 4);
#else
    unsigned char *d = (unsigned char *)&f;
    const unsigned char *s = (const unsigned char *)&u;
    int i;
    for (i = 0; i < 4; ++i) d[i] = s[i];
#endif
    return f;
}
/* The bits of f (as mha__from_bits). */
MHA__PRIVATE uint32_t mha__bits(float f) {
    uint32_t u = 0;
#if defined(__GNUC__) || defined(__clang__)
    __builtin_memcpy(&u, &f, 4);
#else
    const unsigned char *s = (const unsigned char *)&f;
    unsigned char *d = (unsigned char *)&u;
    int i;
    for (i = 0; i < 4; ++i) d[i] = s[i];
#endif
    return u;
}

/* ln x (0: -inf; +inf: +inf; NaN or below 0: NaN), for the saved
   statistics of mha_forward_lse, the same on every target: x = 2^e m with
   m in [sqrt(1/2), sqrt(2)), ln m = 2 atanh z = 2 (z + z^3/3 + ... + z^11/11)
   for z = (m - 1) / (m + 1), |z| < 0.172, and e ln 2 with ln 2 split in two
   (e ln2_hi exact). */
#if !MHA_NO_EXTRAS
MHA__PRIVATE float mha__logf(float x) {
    float m, z, z2, p;
    uint32_t u = mha__bits(x);
    int32_t e = 0;
    if (x != x || x < 0.0f) return (x - x) / (x - x); /* NaN */
    if (x == 0.0f) return -(FLT_MAX * 2.0f);
    if (x > FLT_MAX) return x;
    if (u < 0x00800000u) { /* subnormal: scaled by 2^24 first */
        u = mha__bits(x * 16777216.0f);
        e = -24;
    }
    e += (int32_t)(u >> 23) - 127;
    m = mha__from_bits((u & 0x007fffffu) | 0x3f800000u); /* [1, 2) */
    if (m > 1.41421356f) {
        m *= 0.5f;
        ++e;
    }
    z = (m - 1.0f) / (m + 1.0f);
    z2 = z * z;
    p = z2 * (0.333333333f + z2 * (0.2f + z2 * (0.142857143f + z2 * (0.111111111f + z2 * 0.0909090909f))));
    return (float)e * 0.693145751953125f + ((float)e * 1.428606765330187e-06f + (z + z + (z + z) * p));
}

/* A row's log-sum-exp from its max and sum st (0: -inf), less ALiBi's shift
   of the row: mha_forward_lse's statistic. */
MHA__PRIVATE void mha__lse_put(float *lse, const float *st, float shift) {
    *lse = (st[1] == 0.0f ? -(FLT_MAX * 2.0f) : st[0] + mha__logf(st[1])) - shift;
}
#endif

/* ---- element types (MHA_F32, MHA_F16, MHA_BF16, MHA_Q8, MHA_Q4) -------------
   The weight matrices and the cache's keys and values have an element type;
   everything else is float. These are the leaves where the types enter: the
   address of a row and of element idx, the value of element idx of a row,
   and the rounding of floats into a row. Under MHA_NO_EXTRAS every type is
   MHA_F32 (the others are refused). The block types (caches only): a row of
   p values is ceil(p / 32) blocks of 32, each an f16 scale d (uint16_t, the
   machine's byte order) and then 32 int8 (MHA_Q8: 34 bytes) or 16 bytes of
   two 4-bit fields (MHA_Q4: 18 bytes; byte i holds values i (low 4 bits)
   and i + 16 (high), each stored as q + 8); a value is d q, exactly in
   float. A short last block is padded with q = 0. */
#if MHA_NO_EXTRAS
#define MHA__WTYPE(c) 0
#define MHA__KTYPE(c) 0
#define MHA__VTYPE(c) 0
#else
#define MHA__WTYPE(c) ((int)(c)->w->type)     /* of W_q, W_k, W_v, W_o */
#define MHA__KTYPE(c) ((int)(c)->cache->type) /* of the cache's k */
#define MHA__VTYPE(c) ((c)->cache->value_type ? (int)(c)->cache->value_type : MHA__KTYPE(c)) /* of its v */
#endif
#define MHA__QB ((size_t)32)                               /* values a block */
#define MHA__BLOCKS(p) ((p) / MHA__QB + ((p) % MHA__QB != 0)) /* blocks a row of p */
#define MHA__BLOCK_BYTES(type) ((type) == MHA_Q8 ? 34u : 18u)
MHA__PRIVATE const void *mha__elt(const void *p, int type, size_t idx) {
    return (const unsigned char *)p + idx * (type ? 2u : 4u);
}
/* Row `row` of an array of rows of p elements of type (a cache's). */
MHA__PRIVATE MHA__INLINE const void *mha__row(const void *base, int type, size_t p, size_t row) {
    if (type >= MHA_Q8) return (const unsigned char *)base + row * MHA__BLOCKS(p) * MHA__BLOCK_BYTES(type);
    return mha__elt(base, type, row * p);
}
/* Element idx of a flat array of f32, f16 or bf16 (the weights' types; the
   16-bit caches' rows). mha__elt_q: element idx of a row of a block type;
   mha__elt_v: of a row of any cache type. (Two functions, so that the
   weights' loops, which inline mha__elt_f32, are the same code as before
   the block types, and keep the same bits where floats are evaluated
   wider.) */
MHA__PRIVATE float mha__elt_f32(const void *p, int type, size_t idx) {
    if (!type) return ((const float *)p)[idx];
    return type == MHA_F16 ? mha_f32_from_f16(((const uint16_t *)p)[idx]) : mha_f32_from_bf16(((const uint16_t *)p)[idx]);
}
MHA__PRIVATE float mha__elt_q(const void *p, int type, size_t idx) {
    const unsigned char *blk = (const unsigned char *)p + idx / MHA__QB * MHA__BLOCK_BYTES(type);
    const size_t j = idx % MHA__QB;
    const int q = type == MHA_Q8 ? ((const int8_t *)(blk + 2))[j] : (int)(blk[2 + j % 16] >> (j / 16 * 4) & 15u) - 8;
    return mha_f32_from_f16(*(const uint16_t *)(const void *)blk) * (float)q;
}
#define mha__elt_v(p, type, idx) ((type) >= MHA_Q8 ? mha__elt_q(p, type, idx) : mha__elt_f32(p, type, idx))
/* The integer nearest to y (ties to even) within [lo, hi]; y a float (not
   a wider register: the callers pass a stored quotient), NaN gives lo. */
MHA__PRIVATE int mha__nearest(float y, int lo, int hi) {
    int q;
    float f;
    if (!(y > (float)lo)) return lo;
    if (!(y < (float)hi)) return hi;
    q = (int)y; /* toward 0; y - q is exact */
    f = y - (float)q;
    if (f > 0.5f || (f == 0.5f && (q & 1))) ++q;
    if (f < -0.5f || (f == -0.5f && (q & 1))) --q;
    return q;
}
/* r <= 32 values x into one block of type (docs/quantized.md): the scale
   d is the f16 nearest to max|x| / 127 (MHA_Q8), or to m / -8 where m is
   the first value of the largest magnitude (MHA_Q4, whose integers are -8
   .. 7), an infinite one replaced by the largest finite f16 of its sign;
   each q the integer nearest to the float x / d, ties to even, clamped to
   the type's range (0 where d is 0). A block with a value that is not
   finite gets d = NaN and every q 0: all its values read as NaN. */
MHA__PRIVATE MHA__NOINLINE void mha__quantize(unsigned char *blk, int type, const float *x, size_t r) {
    const int q8 = type == MHA_Q8, top = q8 ? 127 : 7;
    float big = 0.0f, mag = 0.0f, d;
    uint16_t h;
    size_t i;
    int bad = 0, q;
    for (i = 0; i < r; ++i) {
        const float a = x[i] < 0.0f ? -x[i] : x[i];
        bad |= !(x[i] - x[i] == 0.0f);
        if (a > mag) {
            mag = a;
            big = x[i];
        }
    }
    h = mha_f16_from_f32(q8 ? mag / 127.0f : big / -8.0f);
    if ((h & 0x7FFFu) == 0x7C00u) h = (uint16_t)(h - 1u); /* inf: the largest finite f16 of its sign */
    if (bad) h = 0x7E00u;
    *(uint16_t *)(void *)blk = h;
    d = mha_f32_from_f16(h);
    for (i = 0; i < MHA__QB; ++i) {
        unsigned char *t = blk + 2 + (q8 ? i : i % 16);
        q = i < r && !bad && d != 0.0f ? mha__nearest(x[i] / d, -top - !q8, top) : 0;
        *t = (unsigned char)(q8 ? q & 255 : i < 16 ? q + 8 : *t | (q + 8) << 4);
    }
}
/* rows rows of p floats x into the rows of type at y: a 16-bit type rounded
   to nearest, ties to even; a block type block by block. */
MHA__PRIVATE void mha__elt_store(void *y, int type, const float *x, size_t p, size_t rows) {
    size_t i, b;
    if (type >= MHA_Q8) {
        for (i = 0; i < rows; ++i)
            for (b = 0; b < MHA__BLOCKS(p); ++b)
                mha__quantize((unsigned char *)(void *)mha__row(y, type, p, i) + b * MHA__BLOCK_BYTES(type), type,
                              x + i * p + b * MHA__QB, p - b * MHA__QB < MHA__QB ? p - b * MHA__QB : MHA__QB);
        return;
    }
    for (i = 0; i < p * rows; ++i)
        ((uint16_t *)y)[i] = type == MHA_F16 ? mha_f16_from_f32(x[i]) : mha_bf16_from_f32(x[i]);
}

/* ---- math without libm (MHA_NO_LIBM) ---------------------------------------- */
#if MHA_NO_LIBM
/* e^x. x = k ln2 + r + rl with |r| <= ln2/2: r = x - k ln2_hi is exact (ln2
   split in two so that k ln2_hi is exact), rl = -k ln2_lo is tiny. Then
   e^(r + rl) = 1 + r + (rl + f^2 q(f)), f = r + rl, with q the Taylor series
   of (e^f - 1 - f) / f^2 to f^5; 1 + r is formed as an exact sum hi + lo, so
   that the result is rounded once at the end, then times 2^k (for k = 128,
   times 2 and then 2^127, so that the scale stays a normal float). Below
   ln(FLT_MIN) it returns exactly 0 (no subnormal results); above ln(FLT_MAX)
   it returns +inf; NaN stays NaN. Measured error: tests/test_mathf.c. */
MHA__PRIVATE float mha__expf(float x) {
    static const float c[6] = {1.9841270e-4f, 1.3888889e-3f, 8.3333338e-3f, 4.1666668e-2f, 1.6666667e-1f, 0.5f};
    float kf, r, rl, f, hi, q = 0.0f;
    int32_t k, i;
    if (!(x >= -87.33654475f)) return x != x ? x : 0.0f;
    if (x > 88.8f) return FLT_MAX * 2.0f;
    kf = x * 1.44269504f;
    k = (int32_t)(kf < 0.0f ? kf - 0.5f : kf + 0.5f);
    r = x - (float)k * 0.693145751953125f;
    rl = (float)k * -1.428606765330187e-06f;
    f = r + rl;
    for (i = 0; i < 6; ++i) q = q * f + c[i];
    hi = 1.0f + r;
    q = hi + (((1.0f - hi) + r) + (f * f * q + rl)); /* (1 - hi) + r: what hi lost */
    if (k > 127) { /* only 128 */
        q += q;
        k = 127;
    }
    return q * mha__from_bits((uint32_t)(k + 127) << 23);
}

/* tanh x: an odd Taylor polynomial to x^19 for |x| < 0.55, above it
   1 - 2/d with d = e^2|x| + 1 kept as the exact sum d + dl (the rounding of
   d alone would cost half an ulp): 2/(d + dl) = q - q^2 dl / 2 to first
   order, q = 2/d. +-1 beyond 9 (where tanh rounds to 1 in fp32). */
MHA__PRIVATE float mha__tanhf(float x) {
    static const float c[9] = {-2.3912911e-4f, 5.9002744e-4f, -1.4558344e-3f, 3.5921280e-3f, -8.8632355e-3f,
                               2.1869490e-2f, -5.3968254e-2f, 1.3333334e-1f, -3.3333334e-1f};
    float ax = x < 0.0f ? -x : x, t = 0.0f, z = x * x, e, d;
    int i;
    if (x != x) return x;
    if (ax > 9.0f) return x < 0.0f ? -1.0f : 1.0f;
    if (ax < 0.55f) {
        for (i = 0; i < 9; ++i) t = t * z + c[i];
        return x + x * z * t;
    }
    e = mha__expf(2.0f * ax);
    d = e + 1.0f;
    t = 2.0f / d;
    t = 1.0f - (t - t * t * ((e - d) + 1.0f) * 0.5f); /* (e - d) + 1: what d lost */
    return x < 0.0f ? -t : t;
}

/* sqrt x by Newton's iteration y <- (y + x/y) / 2 from a start above the root
   (x itself, or 1 for x < 1), which then falls monotonically; it stops when
   a step no longer falls. Slow (up to ~70 steps), but the library needs a
   square root only once a call, for the default scale. x < 0 or NaN gives
   NaN; +-0 and +inf are returned as they are. */
MHA__PRIVATE float mha__sqrtf(float x) {
#if defined(__arm__) && defined(__ARM_FP) && (__ARM_FP & 4) && (defined(__GNUC__) || defined(__clang__))
    /* an FPU with single precision (Cortex-M4F, M7, M33, ...): its correctly rounded VSQRT */
    float r;
    __asm__("vsqrt.f32 %0, %1" : "=t"(r) : "t"(x));
    return r;
#else
    float y = x > 1.0f ? x : 1.0f, z;
    if (x != x || x < 0.0f) return (x - x) / (x - x); /* NaN */
    if (x == 0.0f || x > FLT_MAX) return x;
    do {
        z = y;
        y = 0.5f * (y + x / y);
    } while (y < z);
    return z;
#endif
}
#endif /* MHA_NO_LIBM */

/* ---- the call: its state, its checks (one list), its workspace ------------- */

/* An int32_t count (>= 0) as a size_t. Where size_t is narrower than 31 bits
   (16-bit targets: AVR, MSP430) a count that does not fit becomes SIZE_MAX,
   so that every product with it overflows into MHA_ERR_OVERFLOW instead of
   wrapping; and a sequence there holds at most SIZE_MAX positions. */
#if SIZE_MAX < 0x7fffffff
#define MHA__SZ(v) ((uint32_t)(v) > (uint32_t)SIZE_MAX ? SIZE_MAX : (size_t)(v))
#define MHA__POS_MAX ((int64_t)SIZE_MAX)
#else
#define MHA__SZ(v) ((size_t)(v))
#define MHA__POS_MAX ((int64_t)INT32_MAX)
#endif

/* Saturating size arithmetic: a result that does not fit is SIZE_MAX, and
   stays SIZE_MAX through later products (SIZE_MAX * 0 is 0, as the true
   product is) and sums. A byte count is even, so its low bit is set only
   when it saturated. */
#define MHA__UP(x, k) (((x) + (k) - 1) / (k) * (k)) /* x rounded up to a multiple of k */
MHA__PRIVATE size_t mha__mul(size_t a, size_t b) { return a != 0 && b > SIZE_MAX / a ? SIZE_MAX : a * b; }
MHA__PRIVATE size_t mha__add(size_t a, size_t b) { return b > SIZE_MAX - a ? SIZE_MAX : a + b; }
/* Bytes of n rows of p elements of type (an even count, or SIZE_MAX). */
MHA__PRIVATE size_t mha__rows_bytes(size_t n, int type, size_t p) {
    return mha__mul(n, type == MHA_Q8 || type == MHA_Q4 ? mha__mul(MHA__BLOCKS(p), MHA__BLOCK_BYTES(type))
                                      : mha__mul(p, type == MHA_I8 ? 1u : type ? 2u : (unsigned)sizeof(float)));
}

/* One call: its validated sizes (as size_t, so that products such as
   h * p_q cannot overflow an int), its arguments, and where its keys and
   values come from. The sizes come first, h .. po in mha_shape's order
   (mha__setup fills them in one loop; mha__count reads sizes by their
   offsets). On the reference path the whole struct is copied to the
   workspace's start before the work begins (see mha__layout), so that no call
   keeps it on the stack; the parts' offsets follow it, and the parts start
   MHA_WORKSPACE_STATE bytes in.
   The stages of a call: project (W_q, W_k, W_v), attend (scores, rules,
   pooling) and output (W_o). The source of the keys and values:
     mp = m    mha_forward, mha_head, mha_attend: projected into the
               workspace (KP, VP); for mha_attend (head MHA__CORE) the
               projections are the identity, and its q, k, v, out rows are
               d_q = h p_q, d_k = kv p_k, d_v = kv p_v, p_o = h p_v long;
     cache     mha_decode, mha_cache_append (mp = 0): the cache's slots; n
               is the t new queries (0 for an append), m the t new keys (0
               without), ms the capacity. */
typedef struct mha__ctx {
    float scale;                      /* first: offset 0 in mha__table means a factor of 1 */
    size_t h, kv, dq, dk, dv, pq, pk, pv, po; /* heads, kv heads, d_q .. p_o */
    size_t pa, grp;                   /* pa = 0: dot scoring; grp = h / kv query heads per kv head */
    size_t batch, n, m;
    size_t mp, ms;                    /* rows of keys projected into the workspace (m or 0); scores
                                         per query (m, or the cache's capacity) */
    int32_t head, len;                /* head -1: every head; MHA__CORE: mha_attend; else mha_head's
                                         head and valid length, with batch = n = 1 and out = h_head */
    const mha_weights *w;
    const mha_mask *mask;             /* NULL: none */
    const float *queries, *keys, *values;
    float *out, *attn;
    mha_cache *cache;                 /* NULL: none */
#if !MHA_NO_EXTRAS
    const mha_shape *knobs;           /* the call's shape: RoPE, ALiBi, soft-cap (checked by mha__setup) */
    uint32_t rope_b[2];               /* RoPE's ratio of frequencies theta^(-2/r) = (rope_b[0] 2^32 + */
    int16_t rope_be;                  /* rope_b[1]) 2^(rope_be - 62), set by mha__rope_base before the work
                                         (|rope_be| < 300; 16 bits: the state still fits on AVR) */
    float *lse;                       /* NULL, or mha_forward_lse's [batch][heads][n] */
    void (*lse_put)(float *lse, const float *st, float shift); /* mha__lse_put, set where lse is: so
                                         that only a program saving statistics links ln */
    const int32_t *parents;           /* NULL, or mha_decode_tree's [batch][n] */
#endif
#if MHA_FAST
    int fast;                         /* mha_forward(_parallel): the fast path */
    mha_parallel_for pfor;            /* NULL: one thread */
    void *user;
#endif
} mha__ctx;

/* The nine sizes heads .. p_o lie in the same order in mha_shape (int32_t)
   and in mha__ctx (size_t), and the call state (with the 7 parts' offsets,
   and mha_attend's weights at its end) fits in MHA_WORKSPACE_STATE. */
#define MHA__SIZES 9
typedef char mha__layout_holds[offsetof(mha_shape, heads) == 0 &&
                                       offsetof(mha_shape, p_o) == (MHA__SIZES - 1) * sizeof(int32_t) &&
                                       offsetof(mha__ctx, po) - offsetof(mha__ctx, h) ==
                                           (MHA__SIZES - 1) * sizeof(size_t) &&
                                       sizeof(mha__ctx) + 7 * sizeof(size_t) + sizeof(mha_weights) <=
                                           MHA_WORKSPACE_STATE
                                   ? 1
                                   : -1];

/* The workspace's parts, in mha__table's order (shapes there), and part k
   of the call whose state c is at the workspace's start. */
enum { MHA__KP, MHA__VP, MHA__AK, MHA__QP, MHA__AQ, MHA__SC, MHA__CAT, MHA__PARTS };
#define MHA__PART(c, k)                                                                                  \
    ((float *)(void *)((unsigned char *)(c) + MHA_WORKSPACE_STATE) + ((const size_t *)(const void *)((c) + 1))[k])

#if MHA_NO_ADDITIVE
#define MHA__ADDITIVE(c) 0
#else
#define MHA__ADDITIVE(c) ((c)->pa != 0)
#endif

/* The checks of a shape and its weights, one a line, in the order of the
   error table: X(name, status, the failing condition, the message, its
   values). A checker never computes: mha__check_shape and
   mha__check_weights return the status of the first that fails and note
   its name and values in *why, which mha_explain reads; mha__say writes its
   message (%d: the values, in order). */
#define MHA__KV_HEADS(s) ((s)->kv_heads ? (s)->kv_heads : (s)->heads)
#define MHA__CHECKS_SHAPE(X)                                                                                           \
    X(MHA__C_SHAPE, MHA_ERR_NULL, !s, "shape is NULL", 0, 0)                                                           \
    X(MHA__C_W, MHA_ERR_NULL, !w, "w (the weights) is NULL", 0, 0)                                                     \
    X(MHA__C_HEADS, MHA_ERR_SHAPE, s->heads < 1, "heads is %d: must be >= 1", s->heads, 0)                             \
    X(MHA__C_KV_HEADS, MHA_ERR_SHAPE, s->kv_heads < 0, "kv_heads is %d: must be >= 1 (0: heads)", s->kv_heads, 0)      \
    X(MHA__C_D_Q, MHA_ERR_SHAPE, s->d_q < 1, "d_q is %d: must be >= 1", s->d_q, 0)                                     \
    X(MHA__C_D_K, MHA_ERR_SHAPE, s->d_k < 1, "d_k is %d: must be >= 1", s->d_k, 0)                                     \
    X(MHA__C_D_V, MHA_ERR_SHAPE, s->d_v < 1, "d_v is %d: must be >= 1", s->d_v, 0)                                     \
    X(MHA__C_P_Q, MHA_ERR_SHAPE, s->p_q < 1, "p_q is %d: must be >= 1", s->p_q, 0)                                     \
    X(MHA__C_P_K, MHA_ERR_SHAPE, s->p_k < 1, "p_k is %d: must be >= 1", s->p_k, 0)                                     \
    X(MHA__C_P_V, MHA_ERR_SHAPE, s->p_v < 1, "p_v is %d: must be >= 1", s->p_v, 0)                                     \
    X(MHA__C_P_O, MHA_ERR_SHAPE, s->p_o < 1, "p_o is %d: must be >= 1", s->p_o, 0)                                     \
    X(MHA__C_GROUPS, MHA_ERR_SHAPE, s->heads % MHA__KV_HEADS(s) != 0, "heads %d is not a multiple of kv_heads %d",     \
      s->heads, MHA__KV_HEADS(s))                                                                                      \
    MHA__CHECKS_KNOBS(X)                                                                                               \
    X(MHA__C_DOT_P, MHA_ERR_SHAPE, s->score == MHA_SCORE_DOT && s->p_q != s->p_k,                                      \
      "p_q %d != p_k %d: dot scoring needs p_q = p_k", s->p_q, s->p_k)                                                 \
    X(MHA__C_SCALE, MHA_ERR_SHAPE, s->score == MHA_SCORE_DOT && !(s->scale >= -FLT_MAX && s->scale <= FLT_MAX),        \
      "scale is not finite", 0, 0)                                                                                     \
    MHA__CHECKS_SCORE(X)
#if MHA_NO_EXTRAS
#define MHA__CHECKS_KNOBS(X)                                                                                           \
    X(MHA__C_EXTRAS, MHA_ERR_SHAPE, s->rope_dim || s->alibi || s->softcap != 0.0f || w->sinks || w->type,              \
      "RoPE, ALiBi, soft-cap, sinks and 16-bit weights are compiled out (MHA_NO_EXTRAS)", 0, 0)
#else
#define MHA__CHECKS_KNOBS(X)                                                                                           \
    X(MHA__C_TYPE, MHA_ERR_SHAPE, (uint32_t)w->type > (uint32_t)MHA_BF16,                                              \
      "w->type is %d: MHA_F32, MHA_F16 or MHA_BF16", w->type, 0)                                                       \
    X(MHA__C_ROPE_DIM, MHA_ERR_SHAPE, s->rope_dim < 0 || s->rope_dim % 2, "rope_dim is %d: must be even and >= 0",     \
      s->rope_dim, 0)                                                                                                  \
    X(MHA__C_ROPE_P_Q, MHA_ERR_SHAPE, s->rope_dim > s->p_q, "rope_dim %d > p_q %d", s->rope_dim, s->p_q)               \
    X(MHA__C_ROPE_P_K, MHA_ERR_SHAPE, s->rope_dim > s->p_k, "rope_dim %d > p_k %d", s->rope_dim, s->p_k)               \
    X(MHA__C_ROPE_PAIRS, MHA_ERR_SHAPE, (uint32_t)s->rope_pairs > 1u, "rope_pairs is %d: must be 0 or 1",              \
      s->rope_pairs, 0)                                                                                                \
    X(MHA__C_ROPE_THETA, MHA_ERR_SHAPE, !(s->rope_theta >= 0.0f && s->rope_theta <= FLT_MAX),                          \
      "rope_theta is not finite and >= 0", 0, 0)                                                                       \
    X(MHA__C_SOFTCAP, MHA_ERR_SHAPE, !(s->softcap >= 0.0f && s->softcap <= FLT_MAX), "softcap is not finite and >= 0", \
      0, 0)
#endif
#if MHA_NO_ADDITIVE
#define MHA__CHECKS_SCORE(X)                                                                                           \
    X(MHA__C_SCORE, MHA_ERR_SHAPE, s->score != MHA_SCORE_DOT,                                                          \
      "score is %d: MHA_SCORE_DOT (additive scoring is compiled out: MHA_NO_ADDITIVE)", (int32_t)s->score, 0)
#else
#define MHA__CHECKS_SCORE(X)                                                                                           \
    X(MHA__C_SCORE, MHA_ERR_SHAPE, s->score != MHA_SCORE_DOT && s->score != MHA_SCORE_ADDITIVE,                        \
      "score is %d: MHA_SCORE_DOT or MHA_SCORE_ADDITIVE", (int32_t)s->score, 0)                                        \
    X(MHA__C_P_A, MHA_ERR_SHAPE, s->score == MHA_SCORE_ADDITIVE && s->p_a < 1,                                         \
      "p_a is %d: additive scoring needs p_a >= 1", s->p_a, 0)
#endif
/* The weights mha_forward reads (need_o: W_o, which mha_head does not). */
#define MHA__CHECKS_WEIGHTS(X)                                                                                         \
    X(MHA__C_W_Q, MHA_ERR_NULL, !w->w_q, "w_q is NULL", 0, 0)                                                          \
    X(MHA__C_W_K, MHA_ERR_NULL, !w->w_k, "w_k is NULL", 0, 0)                                                          \
    X(MHA__C_W_V, MHA_ERR_NULL, !w->w_v, "w_v is NULL", 0, 0)                                                          \
    X(MHA__C_W_O, MHA_ERR_NULL, need_o && !w->w_o, "w_o is NULL", 0, 0)                                                \
    X(MHA__C_A_Q, MHA_ERR_NULL, MHA__ADDITIVE_SHAPE(s) && !w->a_q, "w->a_q is NULL (additive scoring)", 0, 0)          \
    X(MHA__C_A_K, MHA_ERR_NULL, MHA__ADDITIVE_SHAPE(s) && !w->a_k, "w->a_k is NULL (additive scoring)", 0, 0)          \
    X(MHA__C_A_V, MHA_ERR_NULL, MHA__ADDITIVE_SHAPE(s) && !w->a_v, "w->a_v is NULL (additive scoring)", 0, 0)
#if MHA_NO_ADDITIVE
#define MHA__ADDITIVE_SHAPE(s) 0
#else
#define MHA__ADDITIVE_SHAPE(s) ((s)->score == MHA_SCORE_ADDITIVE)
#endif
#define MHA__CHECK_NAME(name, status, bad, message, a, b) name,
enum { MHA__CHECKS_SHAPE(MHA__CHECK_NAME) MHA__CHECKS_WEIGHTS(MHA__CHECK_NAME) MHA__CHECK_OK };
/* What mha_explain reports: the check that failed (MHA__CHECK_OK: none)
   and its values. The calls pass one of their own that nobody reads. */
typedef struct mha__why {
    int name;
    int32_t v[2];
} mha__why;
#if MHA_NO_STATUS_STRINGS
#define MHA__FAIL_IF(name, status, bad, message, a, b) \
    if (bad) return status;
#define MHA__CHECKER MHA__INLINE /* in the call's set-up, as one list */
#else
#define MHA__CHECKER MHA__NOINLINE /* once, for the calls and mha_explain */
/* A failed check's code for mha__note: its status (-1 or -2) less 8 times one more than its name. */
#define MHA__CODE(name, status) ((int)(status) - 8 * ((int)(name) + 1))
MHA__PRIVATE mha_status mha__note(mha__why *why, int code, int32_t a, int32_t b) {
    why->name = -code / 8 - 1;
    why->v[0] = a;
    why->v[1] = b;
    return (mha_status) - (-code % 8);
}
#define MHA__FAIL_IF(name, status, bad, message, a, b) \
    if (bad) return mha__note(why, MHA__CODE(name, status), a, b);
#endif
/* MHA_OK when the shape passes its checks, else the status of the first that fails. */
MHA__PRIVATE MHA__CHECKER mha_status mha__check_shape(const mha_shape *s, const mha_weights *w, mha__why *why) {
    (void)why;
    MHA__CHECKS_SHAPE(MHA__FAIL_IF)
    return MHA_OK;
}
/* The same for the weights (after the shape's checks and the call's counts). */
MHA__PRIVATE mha_status mha__check_weights(const mha_shape *s, const mha_weights *w, int need_o, mha__why *why) {
    (void)s, (void)why; /* s: additive scoring's */
    MHA__CHECKS_WEIGHTS(MHA__FAIL_IF)
    return MHA_OK;
}

/* Checks a shape (MHA__CHECKS_SHAPE) and fills the sizes of *c; MHA_OK,
   MHA_ERR_NULL (shape or w) or MHA_ERR_SHAPE. The counts of the call are
   the caller's to set (mha__counts), and every pointer of the call is NULL
   until it sets it. */
MHA__PRIVATE mha_status mha__setup(mha__ctx *c, const mha_shape *s, const mha_weights *w) {
    size_t k;
    mha__why why; /* not read */
    mha_status st = mha__check_shape(s, w, &why);
    if (st != MHA_OK) return st;
    for (k = 0; k < MHA__SIZES; ++k) /* heads .. p_o, in the same order in both (mha__layout_holds) */
        *(size_t *)(void *)((unsigned char *)&c->h + k * sizeof(size_t)) =
            MHA__SZ(*(const int32_t *)(const void *)((const unsigned char *)s + k * sizeof(int32_t)));
    if (!c->kv) c->kv = c->h;
    c->grp = c->h / c->kv;
    c->pa = MHA__ADDITIVE_SHAPE(s) ? MHA__SZ(s->p_a) : 0;
    c->head = -1;
    c->w = w;
    c->mask = NULL;
    c->attn = NULL;
    c->cache = NULL;
#if !MHA_NO_EXTRAS
    c->lse = NULL;
    c->lse_put = NULL;
    c->parents = NULL;
    c->knobs = s;
#endif
    c->scale = s->scale;
    if (s->score == MHA_SCORE_DOT && s->scale == 0.0f) c->scale = 1.0f / MHA_SQRTF((float)s->p_k);
#if MHA_FAST
    c->fast = 0;
#endif
    return MHA_OK;
}

/* The counts of a call: batch, n, m >= 0 (else MHA_ERR_SHAPE); the keys are
   projected into the workspace (mp = m) and scored m at a time (ms = m)
   unless the caller changes that. */
MHA__PRIVATE mha_status mha__counts(mha__ctx *c, int32_t batch, int32_t n, int32_t m) {
    if (batch < 0 || n < 0 || m < 0) return MHA_ERR_SHAPE;
    c->batch = MHA__SZ(batch);
    c->n = MHA__SZ(n);
    c->m = c->mp = c->ms = MHA__SZ(m);
    return MHA_OK;
}

#define MHA__F(x) ((unsigned char)offsetof(mha__ctx, x))
/* mha__ctx's head for mha_attend (the caller projected: identity projections). */
#define MHA__CORE (-2)
/* The size of mha__ctx at byte offset off (an MHA__F value). */
#define MHA__SIZE(c, off) (*(const size_t *)(const void *)((const unsigned char *)(c) + (off)))
#define MHA__ROW_ATTN 10    /* rows 10-13 count only where the array is given */
#define MHA__ROWS_ARRAYS 14 /* rows 0-13: every array of a call; then the workspace parts */
#define MHA__ROWS (MHA__ROWS_ARRAYS + MHA__PARTS)
/* The element count of every array of a call as a product of up to four
   sizes of mha__ctx (offset 0, where scale lies, stands for a factor of 1):
   the weights (rows 0-5), queries, keys, values, out, attn, the bias mask
   and the cache (6-13), then the workspace parts (MHA__KP ..). */
#define MHA__1 0
static const unsigned char mha__table[MHA__ROWS][4] = {
    {MHA__F(h), MHA__F(pq), MHA__F(dq), MHA__1},            /* w_q [h*p_q][d_q] */
    {MHA__F(kv), MHA__F(pk), MHA__F(dk), MHA__1},           /* w_k */
    {MHA__F(kv), MHA__F(pv), MHA__F(dv), MHA__1},           /* w_v */
    {MHA__F(h), MHA__F(pv), MHA__F(po), MHA__1},            /* w_o */
    {MHA__F(h), MHA__F(pa), MHA__F(pq), MHA__1},            /* a_q */
    {MHA__F(h), MHA__F(pa), MHA__F(pk), MHA__1},            /* a_k */
    {MHA__F(batch), MHA__F(n), MHA__F(dq), MHA__1},         /* queries */
    {MHA__F(batch), MHA__F(m), MHA__F(dk), MHA__1},         /* keys */
    {MHA__F(batch), MHA__F(m), MHA__F(dv), MHA__1},         /* values */
    {MHA__F(batch), MHA__F(n), MHA__F(po), MHA__1},         /* out */
    {MHA__F(batch), MHA__F(n), MHA__F(m), MHA__F(h)},       /* attn [batch][h][n][m] */
    {MHA__F(batch), MHA__F(n), MHA__F(m), MHA__1},          /* bias [batch][n][m] (keep: mha__check) */
    {MHA__F(batch), MHA__F(kv), MHA__F(ms), MHA__F(pk)},    /* cache k [batch][kv][capacity][p_k] */
    {MHA__F(batch), MHA__F(kv), MHA__F(ms), MHA__F(pv)},    /* cache v */
    {MHA__F(kv), MHA__F(mp), MHA__F(pk), MHA__1},           /* MHA__KP: kp [kv][m][p_k] projected keys */
    {MHA__F(kv), MHA__F(mp), MHA__F(pv), MHA__1},           /* MHA__VP: vp [kv][m][p_v] projected values */
    {MHA__F(h), MHA__F(ms), MHA__F(pa), MHA__1},            /* MHA__AK: ak [h][ms][p_a] A_k^(i) k_j */
    {MHA__F(h), MHA__F(pq), MHA__1, MHA__1},                /* MHA__QP: qp [h*p_q] projected query */
    {MHA__F(pa), MHA__1, MHA__1, MHA__1},                   /* MHA__AQ: aq [p_a] A_q^(i) q_i */
    {MHA__F(ms), MHA__1, MHA__1, MHA__1},                   /* MHA__SC: sc [ms] scores */
    {MHA__F(h), MHA__F(pv), MHA__1, MHA__1},                /* MHA__CAT: cat [h*p_v] head outputs */
};

/* The element count of row k of mha__table (SIZE_MAX when it overflows). */
MHA__PRIVATE MHA__NOINLINE size_t mha__count(const mha__ctx *c, int k) {
    size_t p = 1;
    int f;
    for (f = 0; f < 4; ++f)
        if (mha__table[k][f] != MHA__1) p = mha__mul(p, MHA__SIZE(c, mha__table[k][f]));
    return p;
}

/* Byte count of the reference workspace (the parts, the alignment slack and
   the call state); SIZE_MAX when it or the byte count of any array of the
   call (rows 0-13 of mha__table, those the call has) overflows size_t.
   With part given (the workspace's aligned start + sizeof *c, once every
   check has passed), it also keeps the call state there for mha__compute:
   the parts' offsets in floats at part, and *c just before them, copied
   byte by byte through a volatile pointer, so that no compiler turns the
   copy into a call of memcpy (the library calls no libc function). */
MHA__PRIVATE size_t mha__layout(const mha__ctx *c, size_t *part) {
    /* bit k: row k is not an array of this call (mha_attend has no W_q .. W_o;
       attn, the bias mask and the cache are optional) */
    unsigned absent = (c->head == MHA__CORE ? 0xfu : 0u) | (c->attn ? 0u : 1u << MHA__ROW_ATTN) |
                      (c->mask && c->mask->bias ? 0u : 2u << MHA__ROW_ATTN) | (c->cache ? 0u : 12u << MHA__ROW_ATTN);
    size_t t = 0, any = 0;
    int k;
    for (k = 0; k < MHA__ROWS_ARRAYS; ++k) /* the weight matrices and the cache in bytes of their type */
        if (!((absent >> k) & 1u))
            any |= k >= 12 && (MHA__KTYPE(c) || MHA__VTYPE(c))
                       ? mha__rows_bytes(mha__mul(mha__mul(c->batch, c->kv), c->ms), k == 12 ? MHA__KTYPE(c) : MHA__VTYPE(c),
                                         k == 12 ? c->pk : c->pv)
                       : mha__mul(mha__count(c, k), k < 4 && MHA__WTYPE(c) ? 2 : sizeof(float));
    for (; k < MHA__ROWS; ++k) {
        if (part) part[k - MHA__ROWS_ARRAYS] = t;
        t = mha__add(t, mha__count(c, k));
    }
    for (k = 0; part && k < (int)sizeof *c; ++k)
        ((volatile unsigned char *)(void *)part - sizeof *c)[k] = ((const unsigned char *)c)[k];
    t = mha__add(mha__mul(t, sizeof(float)), MHA_WORKSPACE_ALIGN + MHA_WORKSPACE_STATE);
    return (t | any) & 1u ? SIZE_MAX : t;
}

/* The workspace's first MHA_WORKSPACE_ALIGN-byte boundary, as floats. */
MHA__PRIVATE float *mha__align(void *workspace) {
    uintptr_t a = (uintptr_t)workspace;
    size_t skip = (size_t)((MHA_WORKSPACE_ALIGN - a % MHA_WORKSPACE_ALIGN) % MHA_WORKSPACE_ALIGN);
    return (float *)(void *)((unsigned char *)workspace + skip);
}

/* Stands in for the weights where only sizes are asked for. */
static const mha_weights mha__no_weights = {NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 0};

/* ---- reference kernels ---------------------------------------------------- */

/* The dot products' blocks: products are summed from zero in index order
   within a block of MHA__BLOCK, and the block sums are added up with
   compensation, so that the error of a long sum stays that of one block. */
#ifndef MHA__BLOCK
#define MHA__BLOCK 32
#endif
/* The smallest e^d that is not 0 (ln(FLT_MIN)): below it a weight is 0. */
#define MHA__EXP_LO (-87.33654475f)

/* s + b, compensated: *comp holds what the earlier additions lost (Kahan's
   summation) and gets what this one loses. The compensation is dropped where
   it is not finite, so that an inf or NaN term gives the plain sum's inf or
   NaN. Both paths add their blocks with it. */
MHA__PRIVATE MHA__INLINE float mha__add_comp(float s, float b, float *comp) {
    float y = b - *comp, t = s + y;
    *comp = (t - s) - y; /* what t lost of y */
    if (!(*comp - *comp == 0.0f)) *comp = 0.0f;
    return t;
}

/* sum_i x[i] y[i ys] for i < n (ys = 0: a constant y), in blocks (see
   MHA__BLOCK) added with mha__add_comp; with skip0 the terms whose x is
   exactly 0 are left out. mha__dot_t: y of an element type (a 16-bit y
   gives the float result of its values, summed in the same order). */
#define MHA__DOT(Y)                                                                                      \
    float s = 0.0f, comp = 0.0f, b;                                                                      \
    size_t i = 0, e;                                                                                     \
    while (i < n) {                                                                                      \
        e = n - i < MHA__BLOCK ? n : i + MHA__BLOCK;                                                     \
        for (b = 0.0f; i < e; ++i)                                                                       \
            if (!skip0 || x[i] != 0.0f) b += x[i] * (Y);                                                 \
        s = mha__add_comp(s, b, &comp);                                                                  \
    }                                                                                                    \
    return s;
MHA__PRIVATE float mha__dot(const float *x, const float *y, size_t ys, size_t n, int skip0) { MHA__DOT(y[i * ys]) }
#if MHA_NO_EXTRAS
#define mha__dot_t(x, y, type, ys, n, skip0) mha__dot(x, (const float *)(y), ys, n, skip0)
#define mha__dot_col(x, v, type, p, a, n, skip0) 0.0f /* no block types */
#else
MHA__PRIVATE MHA__NOINLINE float mha__dot16(const float *x, const void *y, int type, size_t ys, size_t n, int skip0) {
    MHA__DOT(mha__elt_f32(y, type, i * ys))
}
/* A block type: sum_i x[i] y[i] over a row y (ys 1: a key), and sum_i
   x[i] v_i[a] over rows v_i of p elements (a column of a cache's values),
   in mha__dot's order. */
MHA__PRIVATE MHA__NOINLINE float mha__dot_blk(const float *x, const void *y, int type, size_t n, int skip0) {
    MHA__DOT(mha__elt_q(y, type, i))
}
MHA__PRIVATE MHA__NOINLINE float mha__dot_col(const float *x, const void *v, int type, size_t p, size_t a, size_t n,
                                            int skip0) {
    MHA__DOT(mha__elt_q(mha__row(v, type, p, i), type, a))
}
#define mha__dot_t(x, y, type, ys, n, skip0)                                                                       \
    ((type) >= MHA_Q8 ? mha__dot_blk(x, y, type, n, skip0)                                                         \
     : (type)         ? mha__dot16(x, y, type, ys, n, skip0)                                                       \
                      : mha__dot(x, (const float *)(y), ys, n, skip0))
#endif

/* The attention rules' weight of a score s in a row whose max is mx: 0 for
   a masked key (-inf), 1 for s == mx (also +inf), e^(s - mx) else, and
   exactly 0 where s - mx < ln(FLT_MIN), whatever MHA_EXPF gives there (no
   subnormal weights, on either path); NaN in, NaN out. */
MHA__PRIVATE MHA__NOINLINE float mha__weight(float s, float mx) {
    const float ninf = -(FLT_MAX * 2.0f); /* a float: where float math runs in double, only the
                                              conversion makes this -inf */
    float d = s - mx;
    return s == ninf ? 0.0f : s == mx ? 1.0f : d < MHA__EXP_LO ? 0.0f : MHA_EXPF(d);
}

/* The position of query row t of mha_forward and mha_attend. */
#define MHA__QPOS(c, t) ((int64_t)(t) + ((c)->mask ? (int64_t)(c)->mask->causal_offset : 0))
/* ALiBi's distances in a row of mha_forward or mha_attend are taken from
   the key nearest the query's position, dref = P - clamp(P, 0, m - 1) (0
   unless a causal offset puts P outside the keys, and always 0 when
   decoding): each key's logit is then the true one plus slope dref, a
   constant of the row that the softmax does not see, and the sink gets it
   too. A query far from every key keeps the precision of its scores, where
   -slope (P - j) alone would round them away in fp32. */
#define MHA__DREF(c, qpos) \
    ((qpos) < 0 ? (qpos) : (qpos) >= (int64_t)(c)->m ? (qpos) - (int64_t)((c)->m ? (c)->m - 1 : 0) : 0)
/* What the rows' logits are shifted by (above) in query row t of
   mha_forward: the saved statistics (mha_forward_lse) are without it. */
#define MHA__LSE_SHIFT(c, slope, t) ((slope) * (float)MHA__DREF(c, MHA__QPOS(c, t)))

#if !MHA_NO_EXTRAS
/* ---- positions, soft-cap and sinks (unless MHA_NO_EXTRAS) -------------------
   RoPE's angle for pair a of position P is P f_a with f_a = theta^(-2a/r).
   No double and no libm: the frequency is found in 64-bit fixed point
   (log2 theta by repeated squaring, 2^x by its series, f_a = b^a with
   b = theta^(-2/r), all to about 2^-50), and kept as F_a = f_a / (2 pi) in
   turns per position, a 64-bit binary fraction. The angle in turns is then
   the exact integer product P F_a modulo 2^64, whatever P is, so that no
   reduction by 2 pi loses anything: what remains within a quarter turn
   becomes a float in [-pi/4, pi/4] (an error of at most 4.7e-8 rad, about
   one float rounding; 1e-11 rad from F_a at P = 32768) and cos and sin come
   from their series in float. ALiBi's slopes use the same 2^x. The numbers
   are the same on every target. */
#define MHA__ROPE(c) ((size_t)(c)->knobs->rope_dim) /* the knobs, from the shape mha__setup checked */
#define MHA__CAP(c) ((c)->knobs->softcap)
#define MHA__Q62 ((uint64_t)1 << 62)
#define MHA__LN2_Q62 ((uint64_t)0x2c5c85fdf473de6bu)   /* ln 2, 2^62 times */
#define MHA__INV2PI_Q64 ((uint64_t)0x28be60db9391054au) /* 1 / (2 pi), 2^64 times */

/* The 128-bit product of a and b: its high half, and its low half in *lo. */
MHA__PRIVATE MHA__INLINE uint64_t mha__mul64(uint64_t a, uint64_t b, uint64_t *lo) {
    uint64_t a0 = (uint32_t)a, a1 = a >> 32, b0 = (uint32_t)b, b1 = b >> 32;
    uint64_t p00 = a0 * b0, p01 = a0 * b1, p10 = a1 * b0, mid = (p00 >> 32) + (uint32_t)p01 + (uint32_t)p10;
    *lo = (mid << 32) | (uint32_t)p00;
    return a1 * b1 + (p01 >> 32) + (p10 >> 32) + (mid >> 32);
}
/* a b of two numbers with 62 fraction bits (the product below 4). */
MHA__PRIVATE MHA__INLINE uint64_t mha__mulq(uint64_t a, uint64_t b) {
    uint64_t lo, hi = mha__mul64(a, b, &lo);
    return hi << 2 | lo >> 62;
}

/* 2^(x / 2^52) as m 2^(*e - 62), m in [2^62, 2^63), for -512 < x / 2^52 < 512. */
MHA__PRIVATE uint64_t mha__pow2(int64_t x, int32_t *e) {
    const uint64_t u = (uint64_t)x + ((uint64_t)512 << 52), z = mha__mulq((u & (((uint64_t)1 << 52) - 1)) << 10,
                                                                           MHA__LN2_Q62);
    uint64_t sum = MHA__Q62, term = MHA__Q62;
    uint32_t k;
    for (k = 1; k <= 20; ++k) { /* e^z for 0 <= z < ln 2 */
        term = mha__mulq(term, z) / k;
        sum += term;
    }
    *e = (int32_t)(u >> 52) - 512;
    return sum;
}

/* RoPE's frequencies, pair after pair: f_a = b^a, b = theta^(-2/r) =
   2^(-2 log2(theta) / r), as m 2^(e - 62) with m in [2^62, 2^63). */
typedef struct mha__freqs {
    uint64_t f, b;
    int32_t fe, be;
} mha__freqs;
MHA__PRIVATE void mha__freqs_start(const mha__ctx *c, mha__freqs *q) {
    q->b = (uint64_t)c->rope_b[0] << 32 | c->rope_b[1];
    q->be = c->rope_be;
    q->f = MHA__Q62;
    q->fe = 0;
}
/* theta^(-2/r) into the call state, once per call before the work (called
   where the call state is a frame's own, so that its chain of callees adds
   little to the deepest stack). */
MHA__PRIVATE MHA__NOINLINE void mha__rope_base(mha__ctx *c) {
    float x = c->knobs->rope_theta == 0.0f ? 10000.0f : c->knobs->rope_theta;
    int32_t e = 0;
    uint64_t y, l2 = 0, b;
    int64_t L;
    int k;
    if (!MHA__ROPE(c)) return;
    for (; x >= 2.0f; ++e) x *= 0.5f; /* theta = x 2^e, 1 <= x < 2: exact */
    for (; x < 1.0f; --e) x *= 2.0f;
    y = (uint64_t)(uint32_t)(x * 8388608.0f) << 39; /* x with 62 fraction bits (exact, via 32 bits) */
    for (k = 1; k <= 52; ++k) {           /* log2 x, a bit at a time: x <- x^2, halved when >= 2 */
        y = mha__mulq(y, y);
        l2 <<= 1;
        if (y >> 63) {
            y >>= 1;
            l2 |= 1u;
        }
    }
    L = (int64_t)e * ((int64_t)1 << 52) + (int64_t)l2; /* log2 theta, 52 fraction bits */
    L = L < 0 ? -(-L * 2 / c->knobs->rope_dim) : L * 2 / c->knobs->rope_dim;
    b = mha__pow2(-L, &e);
    c->rope_be = (int16_t)e;
    c->rope_b[0] = (uint32_t)(b >> 32);
    c->rope_b[1] = (uint32_t)b;
}
/* The next pair's frequency in turns per position, f_a / (2 pi) in units of
   2^-64 modulo 2^64 (its whole turns dropped: P is an integer). */
MHA__PRIVATE MHA__NOINLINE uint64_t mha__freqs_next(mha__freqs *q) {
    uint64_t lo, hi = mha__mul64(q->f, MHA__INV2PI_Q64, &lo); /* f_a / (2 pi) = hi 2^(fe - 62), lo below */
    int32_t s = q->fe + 2;
    uint64_t F = s >= 64 ? (s < 128 ? lo << (s - 64) : 0u) : s > 0 ? hi << s | lo >> (64 - s) : s > -64 ? hi >> -s : 0u;
    q->f = mha__mulq(q->f, q->b); /* f_{a+1} = f_a b */
    q->fe += q->be;
    if (q->f >> 63) {
        q->f >>= 1;
        ++q->fe;
    }
    return F;
}

/* cs[0] = cos, cs[1] = sin of the angle of F turns per position at
   position pos: the turns P F modulo 2^64 (exact), less the nearest
   quarter turn q, as r in [-pi/4, pi/4], then rotated by q. */
MHA__PRIVATE MHA__NOINLINE void mha__rope_angle(uint64_t F, int64_t pos, float *cs) {
    const uint64_t t = (uint64_t)pos * F, q = (t + ((uint64_t)1 << 61)) >> 62, d = t - (q << 62);
    const int neg = (int)(d >> 63);
    const uint64_t ad = neg ? 0u - d : d, h = (ad + ((uint64_t)1 << 36)) >> 37; /* |r| in 2^-64 turns, < 2^61 */
    const uint64_t l = ad - (h << 37); /* ad = h 2^37 + l, |l| <= 2^36: h exact in a float, l nearly */
    const float hi = (float)(uint32_t)h * (3.4061215800865545e-19f * 137438953472.0f); /* 2 pi / 2^64 */
    const float lo = (l >> 63 ? -(float)(0u - l) : (float)l) * 3.4061215800865545e-19f;
    const float r = neg ? -hi : hi, rl = neg ? -lo : lo;
    const float z = r * r;
    const float c0 = 1.0f + z * (-0.5f + z * (4.16666679e-2f + z * (-1.38888892e-3f + z * (2.48015876e-5f +
                                                                                         z * -2.75573188e-7f))));
    const float s0 = r + r * z * (-1.66666672e-1f + z * (8.33333377e-3f + z * (-1.98412701e-4f + z * 2.75573188e-6f)));
    const float co = c0 - rl * s0, si = s0 + rl * c0; /* the angle r + rl */
    const unsigned k = (unsigned)(q & 3u);
    cs[0] = k == 0 ? co : k == 1 ? -si : k == 2 ? -co : si;
    cs[1] = k == 0 ? si : k == 1 ? co : k == 2 ? -si : -co;
}

/* RoPE on count vectors x, x + stride, ...: pair a of each rotated by the
   angle of position pos, whose cos and sin are table[2a], table[2a + 1]
   (the fast path's table), or computed here (table NULL). */
MHA__PRIVATE void mha__rope(const mha__ctx *c, float *x, size_t count, size_t stride, int64_t pos,
                            const float *table) {
    const size_t r = MHA__ROPE(c), half = r / 2;
    float cs[2], x0, x1, *y;
    size_t a, k, i0, i1;
    mha__freqs q;
    if (!table && r) mha__freqs_start(c, &q);
    for (a = 0; a < half; ++a) {
        if (table) {
            cs[0] = table[2 * a];
            cs[1] = table[2 * a + 1];
        } else {
            mha__rope_angle(mha__freqs_next(&q), pos, cs);
        }
        i0 = c->knobs->rope_pairs ? 2 * a : a;
        i1 = c->knobs->rope_pairs ? 2 * a + 1 : a + half;
        for (k = 0; k < count; ++k) {
            y = x + k * stride;
            x0 = y[i0];
            x1 = y[i1];
            y[i0] = x0 * cs[0] - x1 * cs[1];
            y[i1] = x1 * cs[0] + x0 * cs[1];
        }
    }
}

/* The ALiBi slope of head i of h: with p the largest power of two <= h,
   2^(-8 (i+1) / p) for i < p, and the odd ones of the 2p-head series,
   2^(-4 (2 (i-p) + 1) / p), after them (the published formula). */
MHA__PRIVATE float mha__alibi_slope(size_t h, size_t i) {
    size_t p = 1;
    int32_t e;
    float s;
    while (p <= h / 2) p *= 2;
    s = (float)mha__pow2(-(int64_t)(((uint64_t)(i < p ? 8 * (i + 1) : 4 * (2 * (i - p) + 1)) << 52) / p), &e);
    for (e -= 62; e < 0; ++e) s *= 0.5f; /* exact */
    return s;
}

/* A score s after the soft-cap and ALiBi (slope, query position less key
   position dist, less the row's reference distance below); the masks' bias
   comes after. */
MHA__PRIVATE float mha__extras(const mha__ctx *c, float s, float slope, int64_t dist) {
    if (MHA__CAP(c) != 0.0f) s = MHA__CAP(c) * MHA_TANHF(s / MHA__CAP(c));
    return s - slope * (float)dist;
}
#define MHA__SLOPE(c, i) ((c)->knobs->alibi ? mha__alibi_slope((c)->h, i) : 0.0f)
/* Whether the scores need mha__extras (soft-cap or ALiBi on). */
#define MHA__EXTRAS(c) (MHA__CAP(c) != 0.0f || (c)->knobs->alibi)
/* The sink of head i for a row at position qpos whose logits are shifted
   by slope dref (slope 0: unshifted, as when decoding); -inf (no sink)
   without sinks. */
MHA__PRIVATE MHA__NOINLINE float mha__row_sink(const mha__ctx *c, size_t i, float slope, int64_t qpos) {
    return c->w->sinks ? c->w->sinks[i] + slope * (float)MHA__DREF(c, qpos) : -(FLT_MAX * 2.0f);
}
#define MHA__ALIBI(c) ((c)->knobs->alibi)
#define MHA__LSE(c) ((c)->lse)
#define MHA__LSE_PUT(c, lse, st, shift) (c)->lse_put(lse, st, shift)
#else /* compiled out: each knob reads as off, each hook does nothing, and the code behind them folds away */
#define MHA__ROPE(c) ((size_t)0)
#define MHA__CAP(c) 0.0f
#define MHA__ALIBI(c) 0
#define MHA__SLOPE(c, i) 0.0f
#define MHA__EXTRAS(c) 0
#define MHA__LSE(c) ((float *)NULL)
#define MHA__LSE_PUT(c, lse, st, shift) ((void)(st), (void)(shift))
#define mha__rope(c, x, count, stride, pos, table) ((void)(x), (void)(pos), (void)(table))
#define mha__rope_base(c) ((void)0)
#define mha__extras(c, s, slope, dist) ((void)(slope), (void)(dist), (s))
#define mha__row_sink(c, i, slope, qpos) ((void)(i), (void)(slope), (void)(qpos), -(FLT_MAX * 2.0f))
#define mha__lse_put(lse, st, shift) ((void)(st), (void)(shift))
#endif

/* ---- reference stages: project, the rules, the attention kernel, pool ------ */

/* The projections of a call: for each, the offsets of its weight and bias
   (0: none) in mha_weights, and of its input and output sizes in mha__ctx. */
#define MHA__W(x) ((unsigned char)offsetof(mha_weights, x))
enum { MHA__PROJ_Q, MHA__PROJ_K, MHA__PROJ_V, MHA__PROJ_O, MHA__PROJ_AQ, MHA__PROJ_AK };
static const unsigned char mha__proj[6][4] = {
    {MHA__W(w_q), MHA__W(b_q), MHA__F(dq), MHA__F(pq)}, /* q_i = W_q^(i) q + b_q^(i) */
    {MHA__W(w_k), MHA__W(b_k), MHA__F(dk), MHA__F(pk)}, /* k_gj */
    {MHA__W(w_v), MHA__W(b_v), MHA__F(dv), MHA__F(pv)}, /* v_gj */
    {MHA__W(w_o), MHA__W(b_o), MHA__F(pv), MHA__F(po)}, /* out = W_o concat + b_o (in: h p_v) */
    {MHA__W(a_q), 0, MHA__F(pq), MHA__F(pa)},           /* A_q^(i) q_i: rows i*p_a.. of a_q */
    {MHA__W(a_k), 0, MHA__F(pk), MHA__F(pa)},           /* A_k^(i) k_gj */
};

/* y[r][o] = sum_i W[o0+o][i] x[r][i] + b[o0+o] for o < out, r < rows, with
   W, b, in and out those of projection `which` (mha__proj): x is
   [rows][in], y is [rows][out]. Each dot product in blocks (mha__dot), the
   bias added at the end. A NULL W is the identity, y[r][o] = x[r][o0+o]
   (mha_attend: the caller projected). */
MHA__PRIVATE MHA__NOINLINE void mha__project(const mha__ctx *c, int which, const float *x, size_t rows, size_t o0,
                                             float *y) {
    const unsigned char *f = mha__proj[which];
    const void *W = *(const void *const *)(const void *)((const unsigned char *)c->w + f[0]);
    const float *b = f[1] ? *(const float *const *)(const void *)((const unsigned char *)c->w + f[1]) : NULL;
    const int type = which <= MHA__PROJ_O ? MHA__WTYPE(c) : 0; /* A_q, A_k: floats */
    size_t in = MHA__SIZE(c, f[2]) * (which == MHA__PROJ_O ? c->h : 1), out = MHA__SIZE(c, f[3]), r, o;
    for (r = 0; r < rows; ++r, x += in)
        for (o = o0; o < o0 + out; ++o)
            *y++ = W ? mha__dot_t(x, mha__elt(W, type, o * in), type, 1, in, 0) + (b ? b[o] : 0.0f) : x[o];
}

#if !MHA_NO_ADDITIVE
/* The additive score of head i for one key: w_a^(i) . tanh(A_q^(i) q_i + A_k^(i) k_j),
   A_q^(i) q_i at aq, A_k^(i) k_j at akj (kept out of line: tanh's frame
   would otherwise sit in mha__scores's). */
MHA__PRIVATE MHA__NOINLINE float mha__additive(const mha__ctx *c, size_t i, const float *aq, const float *akj) {
    const float *wa = c->w->a_v + i * c->pa;
    float s = 0.0f;
    size_t a;
    for (a = 0; a < c->pa; ++a) s += wa[a] * MHA_TANHF(aq[a] + akj[a]);
    return s;
}
#else /* compiled out: MHA__ADDITIVE(c) is 0, and the calls behind it fold away */
#define mha__additive(c, i, aq, akj) ((void)(i), (void)(aq), (void)(akj), 0.0f)
#endif

/* The attention rules, one home for both paths.
   Visibility: key j is visible to query t of batch entry b (row b n + t)
   when j < the bound mha__visible returns (its valid length; with a causal
   mask j <= t + causal_offset, exact for any offset, with no overflow) and
   keep[j] != 0. A masked key's score is -inf. */
MHA__PRIVATE size_t mha__visible(const mha_mask *mask, size_t b, size_t row, size_t t, size_t m) {
    size_t hi = m;
    if (mask && mask->valid_lens) hi = (size_t)mask->valid_lens[mask->valid_lens_per_query ? row : b];
    if (mask && mask->causal) {
        int32_t off = mask->causal_offset, mt = (int32_t)m - (int32_t)t;
        size_t lim = off >= mt ? m : off < -(int32_t)t ? 0 : (size_t)((int32_t)t + off + 1);
        if (lim < hi) hi = lim;
    }
    return hi;
}

/* Decoding: position P of a sequence lives in cache slot P, or with a
   window (a ring) in slot mha__pos_slot(P, s, cap): the one rule on every
   path, the int8 one included (P < cap without a window, where it is P).
   The first s = keep_first positions stay in slots 0 .. s-1 (s = 0: none;
   int8 and MHA_NO_EXTRAS: always 0), the later ones go round the ring of
   slots s .. cap-1. With e positions appended so far, slot j holds
   position j while e <= cap, else j < s, or the latest position p < e in
   slot j (mha__ring's position map). A query at position P sees positions
   <= P, and with a window w >= 1 only those > P - w and those < s
   (cross-attention: every position held). */
MHA__PRIVATE MHA__INLINE size_t mha__pos_slot(size_t P, size_t s, size_t cap) {
    return P < s ? P : s + (P - s) % (cap - s);
}
#if MHA_NO_EXTRAS
#define MHA__KEPT(cache) ((size_t)0)
#else
#define MHA__KEPT(cache) ((size_t)(cache)->keep_first)
#endif
/* The positions [*lo, *hi) that new query t of a decoding call sees, with e
   positions appended (its own included) and n new queries: its position
   P = e - n + t and those before it, with a window w >= 1 only the last w;
   cross-attention (keys NULL: nothing appended): every position held. */
MHA__PRIVATE void mha__decode_sees(size_t e, size_t n, size_t t, size_t w, int cross, size_t *lo, size_t *hi) {
    *lo = 0;
    *hi = cross ? e : e - n + t + 1;
    if (!cross && w && *hi > w) *lo = *hi - w;
}
/* mha_decode_tree: draft d's depth in the tree par (parents[i] < i, -1 the
   prefix), and whether draft a is d or one of its ancestors. New token t
   of a decoding call sits MHA__DRAFT(c, b, t) positions after the old
   length: t, or in a tree its depth. */
MHA__PRIVATE size_t mha__depth(const int32_t *par, size_t d) {
    size_t k = 0;
    for (; par[d] >= 0; ++k) d = (size_t)par[d];
    return k;
}
MHA__PRIVATE int mha__ancestor(const int32_t *par, size_t a, size_t d) {
    while (d > a && par[d] >= 0) d = (size_t)par[d];
    return d == a;
}
#if MHA_NO_EXTRAS
#define MHA__TREE(c) 0
#define MHA__PARENTS(c, b) ((const int32_t *)NULL)
#define MHA__SET_TREE(c, par) ((void)(par))
#else
#define MHA__TREE(c) ((c)->parents != NULL)
#define MHA__PARENTS(c, b) (MHA__TREE(c) ? (c)->parents + (b) * (c)->n : NULL)
#define MHA__SET_TREE(c, par) ((c)->parents = (par))
#endif
#define MHA__DRAFT(c, b, t) (MHA__TREE(c) ? mha__depth(MHA__PARENTS(c, b), t) : (t))

/* Pooling: the scores sc[0..m) become the weights and ho[0..pv) = sum_j
   w_j v_j, with value row j at v + j vst. The max in a pass of its own over
   the stored scores (with x87 excess precision a score still in a register
   can differ from its stored copy), starting from -inf (where a masked score
   sits); NaN once any score is NaN. Each weight by mha__weight (0 for a
   masked key, 1 for the max, also +inf: the +inf keys share the weight),
   divided by their compensated sum; a row with every key masked is all 0.
   Keys of weight exactly 0 are skipped, so a masked key's values never reach
   the output. A sink (-inf: none) counts in the max and, last, in the sum,
   and has no value. The values have element type vtype (a cache's). */
MHA__PRIVATE MHA__NOINLINE void mha__pool(float *sc, size_t m, const void *v, int vtype, size_t vst, size_t pv,
                                          float *ho, float *st /* NULL, or [2]: the row's max and sum
                                                                  (mha_forward_lse) */, float sink) {
    static const float one = 1.0f; /* the sum is a dot product with ones (stride 0) */
    float mx = -(FLT_MAX * 2.0f), sum;
    size_t j, a;
    if (!MHA_NO_EXTRAS) mx = sink; /* -inf: none */
    for (j = 0; j < m; ++j)
        if (sc[j] > mx || sc[j] != sc[j]) mx = sc[j]; /* once NaN, mx stays NaN */
    for (j = 0; j < m; ++j) sc[j] = mha__weight(sc[j], mx);
    sum = mha__dot(sc, &one, 0, m, 0);
    if (!MHA_NO_EXTRAS && sink != -(FLT_MAX * 2.0f)) sum += mha__weight(sink, mx); /* with a sink */
    if (!MHA_NO_EXTRAS && st) { /* the row's statistics: its max and sum */
        st[0] = mx;
        st[1] = sum;
    }
    if (sum == 0.0f) sum = 1.0f; /* every key masked */
    for (j = 0; j < m; ++j) sc[j] /= sum;
    for (a = 0; a < pv; ++a)
        ho[a] = !MHA_NO_EXTRAS && vtype >= MHA_Q8 ? mha__dot_col(sc, v, vtype, vst, a, m, 1)
                                                  : mha__dot_t(sc, mha__elt(v, vtype, a), vtype, vst, m, 1);
}

/* The reference path's attention kernel, the one place where it applies
   the rules to a row: one query row of head i against a range of key slots,
   into r->sc, which it returns. It is inlined into its set-ups, whose
   callers then pool the scores (mha__pool): mha__attend (the forward's
   keys), mha__attend_cache (a cache's slots: the reference decode, and the
   fast decode's rows computed again) and mha__bwd_row (the backward's
   recomputation of a row); the set-up's and the pool's frames are siblings
   on the stack, not nested. Slot j holds position j below slot kept, else
   base + j, or base + cap + j below slot s0: the forward's key j (kept =
   base = s0 = 0), or a cache's slot (mha__ring). A slot is masked (-inf)
   outside the positions the row sees ([lo, hi), and those < kept below hi)
   or where keep is 0; else its score (q . k times scale, or additive),
   soft-cap and ALiBi at the distance from qpos, then the bias. A tree's
   drafts (par given: slots of positions tree0 + d) are seen only by their
   descendants (the row is draft `row`), at position tree0 + depth(d). */
typedef struct mha__keys {
    const void *k;          /* slot j's key: element j p_k, of element type ktype */
    const float *q;         /* the query row [p_q] */
    const float *aq, *ak;   /* additive scoring: A_q^(i) q [p_a], and A_k^(i) k of slot j at j p_a */
    const uint8_t *keep;    /* NULL, or the row's keep [slots] */
    const float *bias;      /* NULL, or the row's bias [slots] */
    float *sc;              /* the row's scores [slots] */
    float *raw;             /* NULL, or the scores before the soft-cap, ALiBi and the bias [slots] (the
                               backward: the soft-cap's derivative; visible slots only) */
    size_t slots, cap;      /* the slots; the ring's slots (the forward: m) */
    size_t base, s0, kept;  /* the position map */
    const int32_t *par;     /* NULL, or a tree's parents (mha_decode_tree) */
    size_t tree0, row;      /* the tree: its drafts' first position, the row's draft */
    size_t lo, hi;          /* the positions the row sees */
    int ktype;
    int64_t qpos; /* ALiBi: the query's position, less the row's reference distance */
} mha__keys;
/* cap slots, the first kept of them for good, the rest a ring holding the
   last positions before e: the position map of mha__keys (mha__pos_slot
   inverted, without a division a slot). */
MHA__PRIVATE void mha__ring(mha__keys *r, size_t e, size_t cap, size_t kept) {
    const size_t ring = cap - kept, first = e > cap ? e - cap : 0; /* the ring's oldest: kept + first */
    r->cap = ring;
    r->kept = kept;
    r->s0 = kept + first % ring; /* its slot */
    r->base = first - first % ring;
}
/* Whether the row sees slot j (the positions [lo, hi), and those of the
   kept slots below hi; a tree's draft only from its descendants), and its
   position in *pos: the map above (MHA__INLINE: the kernel's frame
   where the compiler optimises). */
MHA__PRIVATE MHA__INLINE int mha__key_seen(const mha__keys *r, size_t j, size_t *pos) {
    const int kept = j < r->kept; /* a kept slot: its own position */
    size_t p = kept ? j : r->base + j + (j < r->s0 ? r->cap : 0);
    if (!MHA_NO_EXTRAS && r->par && p >= r->tree0) /* a draft: at its depth, or not seen (hi) */
        p = mha__ancestor(r->par, p - r->tree0, r->row) ? r->tree0 + mha__depth(r->par, p - r->tree0) : r->hi;
    *pos = p;
    return (kept || p >= r->lo) && p < r->hi;
}
MHA__PRIVATE MHA__INLINE float *mha__scores(const mha__ctx *c, size_t i, const mha__keys *r, float slope) {
    size_t j, pos;
    for (j = 0; j < r->slots; ++j) {
        float s = -(FLT_MAX * 2.0f);
        if (mha__key_seen(r, j, &pos) && (!r->keep || r->keep[j])) {
            if (MHA__ADDITIVE(c))
                s = mha__additive(c, i, r->aq, r->ak + j * c->pa);
            else
                s = c->scale * mha__dot_t(r->q, mha__row(r->k, r->ktype, c->pk, j), r->ktype, 1, c->pk, 0);
            if (MHA__EXTRAS(c) && r->raw) r->raw[j] = s;
            if (MHA__EXTRAS(c)) s = mha__extras(c, s, slope, r->qpos - (int64_t)pos);
            if (r->bias) s += r->bias[j];
        }
        r->sc[j] = s;
    }
    return r->sc;
}

/* The scores of query t of batch entry b, head i, against the call's keys
   (key j at position j) by mha__scores; returns them. */
MHA__PRIVATE MHA__NOINLINE float *mha__attend(const mha__ctx *c, size_t b, size_t t, size_t i, float slope) {
    const mha_mask *mask = c->mask;
    const size_t m = c->m, row = b * c->n + t;
    mha__keys r;
    r.k = MHA__PART(c, MHA__KP) + i / c->grp * m * c->pk;
    r.q = MHA__PART(c, MHA__QP) + i * c->pq;
    r.aq = MHA__PART(c, MHA__AQ);
    r.ak = MHA__PART(c, MHA__AK) + i * m * c->pa;
    r.raw = NULL;
    r.keep = mask && mask->keep ? mask->keep + row * m : NULL;
    r.bias = mask && mask->bias ? mask->bias + row * m : NULL;
    r.sc = c->attn ? c->attn + ((b * c->h + i) * c->n + t) * m : MHA__PART(c, MHA__SC);
    r.slots = r.cap = m;
    r.base = r.s0 = r.lo = r.kept = r.tree0 = r.row = 0;
    r.par = NULL;
    r.hi = c->head < 0 ? mha__visible(mask, b, row, t, m) : (size_t)c->len;
    r.ktype = MHA_F32;
    r.qpos = MHA__QPOS(c, t) - MHA__DREF(c, MHA__QPOS(c, t));
    return mha__scores(c, i, &r, slope);
}
/* The scores sc [slots] of new query t (q [p_q]) of batch entry b, head i,
   of a decoding call against the cache's slots in use (kv head i / grp), e
   positions appended (the new ones included), by mha__scores; returns them.
   Additive scoring (the reference decode only): A_q^(i) q in MHA__AQ,
   A_k^(i) K in MHA__AK. */
MHA__PRIVATE MHA__NOINLINE float *mha__attend_cache(const mha__ctx *c, size_t b, size_t t, size_t i, size_t e,
                                                    float slope, const float *q, float *sc) {
    mha__keys r;
    r.k = mha__row(c->cache->k, MHA__KTYPE(c), c->pk, (b * c->kv + i / c->grp) * c->ms);
    r.q = q;
    r.aq = MHA__ADDITIVE(c) ? MHA__PART(c, MHA__AQ) : NULL;
    r.ak = MHA__ADDITIVE(c) ? MHA__PART(c, MHA__AK) + i * c->ms * c->pa : NULL;
    r.raw = NULL;
    r.keep = NULL;
    r.bias = NULL;
    r.sc = sc;
    r.slots = e < c->ms ? e : c->ms;
    mha__ring(&r, e, c->ms, MHA__KEPT(c->cache));
    r.par = MHA__PARENTS(c, b);
    r.tree0 = e - c->n;
    r.row = t;
    t = MHA__DRAFT(c, b, t); /* the row's position less the old length */
    mha__decode_sees(e, c->n, t, (size_t)c->cache->window, !c->keys, &r.lo, &r.hi);
    r.ktype = MHA__KTYPE(c);
    r.qpos = (int64_t)(e - c->n + t); /* P */
    return mha__scores(c, i, &r, slope);
}

/* ---- fast path (MHA_FAST) --------------------------------------------------
   The same contract as the reference path, computed by packed, register-
   blocked GEMMs (BLIS style: weights packed into panels of NR columns, a
   micro-kernel of MR x NR accumulators, K blocked by MHA__KC) and a fused
   attention in the FlashAttention-2 manner: per tile of query rows, key
   blocks of MHA__KB keys with a running max and sum, the accumulator
   rescaled only when the max grows and divided once at the end, so no n x m
   score matrix exists (unless attn is asked for: then attn itself holds it).
   The reference's three stages, one kv head at a time (see mha__fast_project):
   its K, V and its query heads' queries are projected, the heads attend, and
   each head's output is added into out through its block of W_o.
   Vector width at compile time: AVX-512F, AVX2+FMA, NEON (aarch64), Helium
   (Arm M-profile MVE with floats, where MHA_FAST is asked for), or the
   portable code (MHA_NO_SIMD 1, and every other target): GNU C vectors where
   the target has vector registers, else plain loops. */
#if MHA_FAST

#if !MHA_NO_SIMD && defined(__AVX512F__)
#define MHA__SIMD_NAME "avx512f"
#define MHA__CLEAN() _mm256_zeroupper() /* leave no dirty upper state to SSE code (libm) */
#define MHA__VL 16
#define MHA__MR 12
#define MHA__KVB ((size_t)96) /* key rows per task of the K, V step: a multiple of MR and NR */
#define MHA__EACH_ROW MHA__ROWS12
typedef __m512 mha__v;
#define mha__vload(p) _mm512_loadu_ps(p)
#define mha__vstore(p, x) _mm512_storeu_ps(p, x)
#define mha__vset(x) _mm512_set1_ps(x)
#define mha__vfma(a, b, c) _mm512_fmadd_ps(a, b, c)
#define mha__vmul(a, b) _mm512_mul_ps(a, b)
#define mha__vadd(a, b) _mm512_add_ps(a, b)
#define mha__vsub(a, b) _mm512_sub_ps(a, b)
#define mha__vmax(a, b) _mm512_max_ps(a, b)
#define mha__vmin(a, b) _mm512_min_ps(a, b)
#define mha__vdiv(a, b) _mm512_div_ps(a, b)
/* t where a < b, else f */
#define mha__vselect_lt(a, b, t, f) _mm512_mask_blend_ps(_mm512_cmp_ps_mask(a, b, _CMP_LT_OQ), f, t)
/* 2^k for integral k in [-126, 127] */
#define mha__vpow2(k)                                                                                    \
    _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(k), _mm512_set1_epi32(127)), 23))
#define mha__vround(x) _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)
/* q 2^k for integral k, one instruction (the same value as q mha__vpow2(k) for k in range) */
#define MHA__VSCALE2(q, k) _mm512_scalef_ps(q, k)
/* y where !(x < lo), else 0 */
#define mha__vzero_below(y, x, lo) _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(x, lo, _CMP_NLT_UQ), y)
/* nonzero when a lane of x is NaN or > FLT_MAX */
#define mha__vbad(x) (_mm512_cmp_ps_mask(x, _mm512_set1_ps(FLT_MAX), _CMP_NLE_UQ) != 0)
/* the sum and the max of the lanes (no NaN among them for the max) */
#define mha__vhsum(x) _mm512_reduce_add_ps(x)
#define mha__vhmax(x) _mm512_reduce_max_ps(x)
/* 16-bit and block elements (see mha__vload16) */
#define MHA__VHSUM4_HW 1
MHA__PRIVATE void mha__vhsum4(mha__v a, mha__v b, mha__v c, mha__v d, float *out) {
#define MHA__HALF(x) _mm256_add_ps(_mm512_castps512_ps256(x), \
                                   _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(x), 1)))
    __m256 a8 = MHA__HALF(a), b8 = MHA__HALF(b), c8 = MHA__HALF(c), d8 = MHA__HALF(d);
#undef MHA__HALF
    __m256 t = _mm256_hadd_ps(_mm256_hadd_ps(a8, b8), _mm256_hadd_ps(c8, d8));
    _mm_storeu_ps(out, _mm_add_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps(t, 1)));
}
#define MHA__VF16_HW 1
#define MHA__VBF16_HW 1
#define MHA__VSETH_HW 1
#define MHA__VQ_HW 1
#define MHA__V16(p) _mm256_loadu_si256((const __m256i *)(const void *)(p))
#define mha__vf16(p) _mm512_cvtph_ps(MHA__V16(p))
#define mha__vbf16(p) _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(MHA__V16(p)), 16))
#define mha__vseth(h) _mm512_cvtph_ps(_mm256_set1_epi16((short)(h)))
#define MHA__VB(q) _mm_loadu_si128((const __m128i *)(const void *)(q))
#define mha__vq8(q) _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(MHA__VB(q)))
MHA__PRIVATE MHA__INLINE mha__v mha__vq4(const unsigned char *q, int hi) {
    const __m512i n = _mm512_cvtepu8_epi32(MHA__VB(q));
    return _mm512_cvtepi32_ps(_mm512_and_si512(hi ? _mm512_srli_epi32(n, 4) : n, _mm512_set1_epi32(15)));
}
#elif !MHA_NO_SIMD && defined(__AVX2__) && defined(__FMA__)
#define MHA__SIMD_NAME "avx2+fma"
#define MHA__CLEAN() _mm256_zeroupper()
#define MHA__VL 8
#define MHA__MR 6
#define MHA__KVB ((size_t)48) /* key rows per task of the K, V step: a multiple of MR and NR */
#define MHA__EACH_ROW MHA__ROWS6
typedef __m256 mha__v;
#define mha__vload(p) _mm256_loadu_ps(p)
#define mha__vstore(p, x) _mm256_storeu_ps(p, x)
#define mha__vset(x) _mm256_set1_ps(x)
#define mha__vfma(a, b, c) _mm256_fmadd_ps(a, b, c)
#define mha__vmul(a, b) _mm256_mul_ps(a, b)
#define mha__vadd(a, b) _mm256_add_ps(a, b)
#define mha__vsub(a, b) _mm256_sub_ps(a, b)
#define mha__vmax(a, b) _mm256_max_ps(a, b)
#define mha__vmin(a, b) _mm256_min_ps(a, b)
#define mha__vdiv(a, b) _mm256_div_ps(a, b)
#define mha__vselect_lt(a, b, t, f) _mm256_blendv_ps(f, t, _mm256_cmp_ps(a, b, _CMP_LT_OQ))
#define mha__vpow2(k)                                                                                    \
    _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(k), _mm256_set1_epi32(127)), 23))
#define mha__vround(x) _mm256_round_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)
#define mha__vzero_below(y, x, lo) _mm256_and_ps(y, _mm256_cmp_ps(x, lo, _CMP_NLT_UQ))
#define mha__vbad(x) (_mm256_movemask_ps(_mm256_cmp_ps(x, _mm256_set1_ps(FLT_MAX), _CMP_NLE_UQ)) != 0)
MHA__PRIVATE float mha__vhsum(__m256 x) {
    __m128 h = _mm_add_ps(_mm256_castps256_ps128(x), _mm256_extractf128_ps(x, 1));
    h = _mm_add_ps(h, _mm_movehl_ps(h, h));
    return _mm_cvtss_f32(_mm_add_ss(h, _mm_shuffle_ps(h, h, 1)));
}
MHA__PRIVATE float mha__vhmax(__m256 x) {
    __m128 h = _mm_max_ps(_mm256_castps256_ps128(x), _mm256_extractf128_ps(x, 1));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    return _mm_cvtss_f32(_mm_max_ss(h, _mm_shuffle_ps(h, h, 1)));
}
/* 16-bit and block elements (see mha__vload16; f16 by F16C where the target has it) */
#define MHA__VHSUM4_HW 1
MHA__PRIVATE void mha__vhsum4(mha__v a, mha__v b, mha__v c, mha__v d, float *out) {
    __m256 t = _mm256_hadd_ps(_mm256_hadd_ps(a, b), _mm256_hadd_ps(c, d));
    _mm_storeu_ps(out, _mm_add_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps(t, 1)));
}
#define MHA__V16(p) _mm_loadu_si128((const __m128i *)(const void *)(p))
#ifdef __F16C__
#define MHA__VF16_HW 1
#define MHA__VSETH_HW 1
#define mha__vf16(p) _mm256_cvtph_ps(MHA__V16(p))
#define mha__vseth(h) _mm256_cvtph_ps(_mm_set1_epi16((short)(h)))
#endif
#define MHA__VBF16_HW 1
#define MHA__VQ_HW 1
#define mha__vbf16(p) _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(MHA__V16(p)), 16))
#define MHA__VB(q) _mm_loadl_epi64((const __m128i *)(const void *)(q))
#define mha__vq8(q) _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(MHA__VB(q)))
MHA__PRIVATE MHA__INLINE mha__v mha__vq4(const unsigned char *q, int hi) {
    const __m256i n = _mm256_cvtepu8_epi32(MHA__VB(q));
    return _mm256_cvtepi32_ps(_mm256_and_si256(hi ? _mm256_srli_epi32(n, 4) : n, _mm256_set1_epi32(15)));
}
#elif !MHA_NO_SIMD && defined(__aarch64__) && defined(__ARM_NEON)
#define MHA__SIMD_NAME "neon"
#define MHA__CLEAN() ((void)0)
#define MHA__VL 4
#define MHA__MR 8
#define MHA__KVB ((size_t)32) /* key rows per task of the K, V step: a multiple of MR and NR */
#define MHA__EACH_ROW MHA__ROWS8
typedef float32x4_t mha__v;
#define mha__vload(p) vld1q_f32(p)
#define mha__vstore(p, x) vst1q_f32(p, x)
#define mha__vset(x) vdupq_n_f32(x)
#define mha__vfma(a, b, c) vfmaq_f32(c, a, b)
#define mha__vmul(a, b) vmulq_f32(a, b)
#define mha__vadd(a, b) vaddq_f32(a, b)
#define mha__vsub(a, b) vsubq_f32(a, b)
#define mha__vmax(a, b) vmaxq_f32(a, b)
#define mha__vmin(a, b) vminq_f32(a, b)
#define mha__vdiv(a, b) vdivq_f32(a, b)
#define mha__vselect_lt(a, b, t, f) vbslq_f32(vcltq_f32(a, b), t, f)
#define mha__vpow2(k) vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(vcvtq_s32_f32(k), vdupq_n_s32(127)), 23))
#define mha__vround(x) vrndnq_f32(x)
#define mha__vzero_below(y, x, lo) vreinterpretq_f32_u32(vbicq_u32(vreinterpretq_u32_f32(y), vcltq_f32(x, lo)))
#define mha__vbad(x) (vminvq_u32(vcleq_f32(x, vdupq_n_f32(FLT_MAX))) == 0)
#define mha__vhsum(x) vaddvq_f32(x)
#define mha__vhmax(x) vmaxvq_f32(x)
/* 16-bit and block elements (see mha__vload16) */
#define MHA__VHSUM4_HW 1
MHA__PRIVATE void mha__vhsum4(mha__v a, mha__v b, mha__v c, mha__v d, float *out) {
    vst1q_f32(out, vpaddq_f32(vpaddq_f32(a, b), vpaddq_f32(c, d)));
}
#define MHA__VF16_HW 1
#define MHA__VBF16_HW 1
#define MHA__VQ_HW 1
#define mha__vf16(p) vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p)))
#define mha__vbf16(p) vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(p), 16))
MHA__PRIVATE MHA__INLINE uint8x8_t mha__vb(const unsigned char *q) { /* q's four bytes, twice */
    uint32_t w4;
    __builtin_memcpy(&w4, q, 4);
    return vreinterpret_u8_u32(vdup_n_u32(w4));
}
#define mha__vq8(q) vcvtq_f32_s32(vmovl_s16(vget_low_s16(vmovl_s8(vreinterpret_s8_u8(mha__vb(q))))))
MHA__PRIVATE MHA__INLINE mha__v mha__vq4(const unsigned char *q, int hi) {
    const uint32x4_t n = vmovl_u16(vget_low_u16(vmovl_u8(mha__vb(q))));
    return vcvtq_f32_u32(vandq_u32(hi ? vshrq_n_u32(n, 4) : n, vdupq_n_u32(15)));
}
#elif !MHA_NO_SIMD && defined(__ARM_FEATURE_MVE) && (__ARM_FEATURE_MVE & 2)
/* Helium (Cortex-M55, M85): eight 128-bit registers, so a micro-kernel of
   two rows (four accumulators, two B vectors, one broadcast A); no vector
   divide (lane by lane) and no sum across float lanes; and four scratch
   slots, for a microcontroller's RAM. */
#define MHA__SIMD_NAME "helium"
#define MHA__CLEAN() ((void)0)
#define MHA__VL 4
#define MHA__MR 2
#define MHA__KVB ((size_t)32) /* key rows per task of the K, V step: a multiple of MR and NR */
#define MHA__EACH_ROW MHA__ROWS2
#define MHA__SLOTS ((size_t)4)
typedef float32x4_t mha__v;
#define mha__vload(p) vld1q_f32(p)
#define mha__vstore(p, x) vst1q_f32(p, x)
#define mha__vset(x) vdupq_n_f32(x)
#define mha__vfma(a, b, c) vfmaq_f32(c, a, b)
#define mha__vmul(a, b) vmulq_f32(a, b)
#define mha__vadd(a, b) vaddq_f32(a, b)
#define mha__vsub(a, b) vsubq_f32(a, b)
/* Comparisons as GT and GE only: Helium's LT and LE hold for unordered
   operands (the Arm condition codes), so a < b is written b > a, false for
   NaN. max: the second operand where the first is NaN, as on x86. */
#define mha__vmax(a, b) vpselq_f32(a, b, vcmpgtq_f32(a, b))
#define mha__vmin(a, b) vpselq_f32(a, b, vcmpgtq_f32(b, a))
MHA__PRIVATE mha__v mha__vdiv(mha__v a, mha__v b) {
    float x[4], y[4];
    int l;
    vst1q_f32(x, a);
    vst1q_f32(y, b);
    for (l = 0; l < 4; ++l) x[l] /= y[l];
    return vld1q_f32(x);
}
#define mha__vselect_lt(a, b, t, f) vpselq_f32(t, f, vcmpgtq_f32(b, a))
#define mha__vpow2(k) vreinterpretq_f32_s32(vshlq_n_s32(vaddq_n_s32(vcvtq_s32_f32(k), 127), 23))
#define mha__vround(x) vrndnq_f32(x)
#define mha__vzero_below(y, x, lo) vpselq_f32(vdupq_n_f32(0.0f), y, vcmpgtq_f32(lo, x))
#define mha__vbad(x) (vcmpgeq_f32(vdupq_n_f32(FLT_MAX), x) != 0xFFFF) /* a lane not <= FLT_MAX (NaN too) */
#define mha__vhsum(x) ((vgetq_lane_f32(x, 0) + vgetq_lane_f32(x, 1)) + (vgetq_lane_f32(x, 2) + vgetq_lane_f32(x, 3)))
#define mha__vhmax(x) vmaxnmvq_f32(vgetq_lane_f32(x, 0), x)
/* block elements (see mha__vload16; 16-bit ones lane by lane) */
#define MHA__VQ_HW 1
#define mha__vq8(q) vcvtq_f32_s32(vldrbq_s32((const int8_t *)(q)))
MHA__PRIVATE MHA__INLINE mha__v mha__vq4(const unsigned char *q, int hi) {
    const uint32x4_t n = vldrbq_u32(q);
    return vcvtq_f32_u32(vandq_u32(hi ? vshrq_n_u32(n, 4) : n, vdupq_n_u32(15)));
}
#elif (defined(__GNUC__) || defined(__clang__)) && (defined(__SSE2__) || defined(__ARM_NEON) || defined(__AVX__))
/* Portable, GNU C on a target with vector registers: the compilers' generic
   vector extension (8 floats with AVX, else 4), which gcc and clang lower to
   the target's SIMD at any -O level, with no autovectoriser in the way (gcc
   -O3 vectorises the plain-loop form badly, several times slower). */
#define MHA__SIMD_NAME "portable"
#define MHA__CLEAN() ((void)0)
#ifdef __AVX__
#define MHA__VL 8
#define MHA__MR 4
#define MHA__KVB ((size_t)32) /* key rows per task of the K, V step: a multiple of MR and NR */
#define MHA__EACH_ROW MHA__ROWS4
#else
#define MHA__VL 4
#define MHA__MR 6
#define MHA__KVB ((size_t)48)
#define MHA__EACH_ROW MHA__ROWS6
#endif
typedef float mha__v __attribute__((vector_size(MHA__VL * 4)));
typedef int32_t mha__vi __attribute__((vector_size(MHA__VL * 4)));
MHA__PRIVATE mha__v mha__vload(const float *p) {
    mha__v v;
    __builtin_memcpy(&v, p, sizeof v);
    return v;
}
MHA__PRIVATE void mha__vstore(float *p, mha__v x) { __builtin_memcpy(p, &x, sizeof x); }
MHA__PRIVATE mha__v mha__vset(float x) { /* an initialiser, which both compilers make one broadcast */
#if MHA__VL == 8
    mha__v v = {x, x, x, x, x, x, x, x};
#else
    mha__v v = {x, x, x, x};
#endif
    return v;
}
#define mha__vfma(a, b, c) ((a) * (b) + (c))
#define mha__vmul(a, b) ((a) * (b))
#define mha__vadd(a, b) ((a) + (b))
#define mha__vsub(a, b) ((a) - (b))
#define mha__vdiv(a, b) ((a) / (b))
/* t where the lane mask m is all ones, else f */
MHA__PRIVATE mha__v mha__vblend(mha__vi m, mha__v t, mha__v f) {
    return (mha__v)(((mha__vi)t & m) | ((mha__vi)f & ~m));
}
/* the second operand where the first is NaN, as on x86 */
#define mha__vmax(a, b) mha__vblend((a) > (b), a, b)
#define mha__vmin(a, b) mha__vblend((a) < (b), a, b)
#define mha__vselect_lt(a, b, t, f) mha__vblend((a) < (b), t, f)
MHA__PRIVATE mha__v mha__vround(mha__v x) { /* to the nearest integer, halves away from 0; NaN and huge: 0 */
    mha__vi ok = (x > mha__vset(-8388608.0f)) & (x < mha__vset(8388608.0f));
    mha__v h = mha__vblend(x < mha__vset(0.0f), mha__vset(-0.5f), mha__vset(0.5f));
    return mha__vblend(ok, __builtin_convertvector(__builtin_convertvector(mha__vblend(ok, x + h, mha__vset(0.0f)), mha__vi), mha__v), mha__vset(0.0f));
}
MHA__PRIVATE mha__v mha__vpow2(mha__v k) { /* 2^k for integral k in [-126, 127] */
    return (mha__v)((__builtin_convertvector(k, mha__vi) + 127) << 23);
}
MHA__PRIVATE mha__v mha__vzero_below(mha__v y, mha__v x, mha__v lo) { return mha__vblend(x < lo, mha__vset(0.0f), y); }
MHA__PRIVATE int mha__vbad(mha__v x) {
    mha__vi ok = x <= mha__vset(FLT_MAX); /* false for NaN */
    int l, bad = 0;
    for (l = 0; l < MHA__VL; ++l) bad |= ok[l] == 0;
    return bad;
}
MHA__PRIVATE float mha__vhsum(mha__v x) {
    float t = x[0];
    int l;
    for (l = 1; l < MHA__VL; ++l) t += x[l];
    return t;
}
MHA__PRIVATE float mha__vhmax(mha__v x) {
    float t = x[0];
    int l;
    for (l = 1; l < MHA__VL; ++l) t = x[l] > t ? x[l] : t;
    return t;
}
#else
/* Portable, other compilers and targets: a vector is 8 floats in a struct,
   each operation a loop of 8. */
#define MHA__SIMD_NAME "portable"
#define MHA__CLEAN() ((void)0)
#define MHA__VL 8
#define MHA__MR 4
#define MHA__KVB ((size_t)32) /* key rows per task of the K, V step: a multiple of MR and NR */
#define MHA__EACH_ROW MHA__ROWS4
typedef struct mha__v { float f[MHA__VL]; } mha__v;
/* NOLINTNEXTLINE(bugprone-macro-parentheses): body is a statement */
#define MHA__VOP(body) mha__v r; int l; for (l = 0; l < MHA__VL; ++l) body; return r
MHA__PRIVATE mha__v mha__vload(const float *p) { MHA__VOP(r.f[l] = p[l]); }
MHA__PRIVATE void mha__vstore(float *p, mha__v x) { int l; for (l = 0; l < MHA__VL; ++l) p[l] = x.f[l]; }
MHA__PRIVATE mha__v mha__vset(float x) { MHA__VOP(r.f[l] = x); }
MHA__PRIVATE mha__v mha__vfma(mha__v a, mha__v b, mha__v c) { MHA__VOP(r.f[l] = a.f[l] * b.f[l] + c.f[l]); }
MHA__PRIVATE mha__v mha__vmul(mha__v a, mha__v b) { MHA__VOP(r.f[l] = a.f[l] * b.f[l]); }
MHA__PRIVATE mha__v mha__vadd(mha__v a, mha__v b) { MHA__VOP(r.f[l] = a.f[l] + b.f[l]); }
MHA__PRIVATE mha__v mha__vsub(mha__v a, mha__v b) { MHA__VOP(r.f[l] = a.f[l] - b.f[l]); }
MHA__PRIVATE mha__v mha__vmax(mha__v a, mha__v b) { MHA__VOP(r.f[l] = a.f[l] > b.f[l] ? a.f[l] : b.f[l]); }
MHA__PRIVATE mha__v mha__vmin(mha__v a, mha__v b) { MHA__VOP(r.f[l] = a.f[l] < b.f[l] ? a.f[l] : b.f[l]); }
MHA__PRIVATE mha__v mha__vdiv(mha__v a, mha__v b) { MHA__VOP(r.f[l] = a.f[l] / b.f[l]); }
MHA__PRIVATE mha__v mha__vselect_lt(mha__v a, mha__v b, mha__v t, mha__v f) {
    MHA__VOP(r.f[l] = a.f[l] < b.f[l] ? t.f[l] : f.f[l]);
}
MHA__PRIVATE mha__v mha__vround(mha__v x) { /* to the nearest integer, halves away from 0 */
    MHA__VOP(r.f[l] = x.f[l] > -8388608.0f && x.f[l] < 8388608.0f /* NaN and huge: 0 */
                          ? (float)(int32_t)(x.f[l] + (x.f[l] < 0.0f ? -0.5f : 0.5f))
                          : 0.0f);
}
MHA__PRIVATE mha__v mha__vpow2(mha__v k) {
    MHA__VOP(r.f[l] = mha__from_bits((uint32_t)((int32_t)k.f[l] + 127) << 23));
}
MHA__PRIVATE mha__v mha__vzero_below(mha__v y, mha__v x, mha__v lo) {
    MHA__VOP(r.f[l] = x.f[l] < lo.f[l] ? 0.0f : y.f[l]);
}
MHA__PRIVATE int mha__vbad(mha__v x) {
    int l, bad = 0;
    for (l = 0; l < MHA__VL; ++l) bad |= !(x.f[l] <= FLT_MAX);
    return bad;
}
MHA__PRIVATE float mha__vhsum(mha__v x) {
    float t = x.f[0];
    int l;
    for (l = 1; l < MHA__VL; ++l) t += x.f[l];
    return t;
}
MHA__PRIVATE float mha__vhmax(mha__v x) {
    float t = x.f[0];
    int l;
    for (l = 1; l < MHA__VL; ++l) t = x.f[l] > t ? x.f[l] : t;
    return t;
}
#undef MHA__VOP
#endif

#define MHA__NR ((size_t)2 * MHA__VL) /* micro-kernel columns: two vectors */
#define MHA__KC ((size_t)128)  /* K block of the GEMMs: a 64-wide head's B panels and A tile stay in L1 */
#define MHA__KB ((size_t)128)  /* keys per block of the fused attention */
#define MHA__QR ((size_t)4 * MHA__MR) /* query rows per tile of the fused attention */
#ifndef MHA__SLOTS
#define MHA__SLOTS ((size_t)32)  /* tiles' scratch slots: tasks of the attention step at most */
#endif

/* e^x on vectors: the scheme of mha__expf (x = k ln2 + r + rl, the same
   polynomial, 1 + r as an exact sum, one rounding at the end), for x <= 88;
   0 below ln(FLT_MIN) and for -inf, NaN stays NaN.
   Measured error: tests/test_fast.c. */
MHA__PRIVATE MHA__INLINE mha__v mha__vexp(mha__v x) {
    const mha__v lo = mha__vset(-87.33654475f), one = mha__vset(1.0f);
    mha__v xc = mha__vmax(lo, x); /* NaN stays NaN: max(lo, NaN) is NaN on each target */
    mha__v k = mha__vround(mha__vmul(xc, mha__vset(1.44269504f)));
    mha__v r = mha__vfma(k, mha__vset(-0.693145751953125f), xc); /* exact */
    mha__v rl = mha__vmul(k, mha__vset(-1.428606765330187e-06f));
    mha__v f = mha__vadd(r, rl), hi = mha__vadd(one, r), q = mha__vset(1.9841270e-4f);
    q = mha__vfma(q, f, mha__vset(1.3888889e-3f));
    q = mha__vfma(q, f, mha__vset(8.3333338e-3f));
    q = mha__vfma(q, f, mha__vset(4.1666668e-2f));
    q = mha__vfma(q, f, mha__vset(1.6666667e-1f));
    q = mha__vfma(q, f, mha__vset(0.5f));
    q = mha__vfma(mha__vmul(f, f), q, rl);
    q = mha__vadd(hi, mha__vadd(mha__vadd(mha__vsub(one, hi), r), q));
#ifdef MHA__VSCALE2
    return mha__vzero_below(MHA__VSCALE2(q, k), x, lo);
#else
    return mha__vzero_below(mha__vmul(q, mha__vpow2(k)), x, lo);
#endif
}

/* tanh x on vectors: the scheme of mha__tanhf, without branches. The odd
   Taylor polynomial where x^2 < 0.3025 (|x| < 0.55), else the sign of x times
   1 - 2 / (e^2|x| + 1) with |x| clamped to 9.5 (beyond, tanh is +-1 in
   fp32) and the rounding of the denominator corrected; NaN stays NaN.
   Measured error: tests/test_fast.c. */
MHA__PRIVATE MHA__INLINE mha__v mha__vtanh(mha__v x) {
    const mha__v one = mha__vset(1.0f);
    mha__v z = mha__vmul(x, x), t = mha__vset(-2.3912911e-4f), e, d, q;
    t = mha__vfma(t, z, mha__vset(5.9002744e-4f));
    t = mha__vfma(t, z, mha__vset(-1.4558344e-3f));
    t = mha__vfma(t, z, mha__vset(3.5921280e-3f));
    t = mha__vfma(t, z, mha__vset(-8.8632355e-3f));
    t = mha__vfma(t, z, mha__vset(2.1869490e-2f));
    t = mha__vfma(t, z, mha__vset(-5.3968254e-2f));
    t = mha__vfma(t, z, mha__vset(1.3333334e-1f));
    t = mha__vfma(t, z, mha__vset(-3.3333334e-1f));
    t = mha__vfma(mha__vmul(x, z), t, x);
    e = mha__vmax(x, mha__vsub(mha__vset(0.0f), x));  /* |x|; NaN stays NaN */
    e = mha__vmin(mha__vset(9.5f), e);                   /* likewise */
    e = mha__vexp(mha__vadd(e, e));
    d = mha__vadd(e, one);
    q = mha__vdiv(mha__vset(2.0f), d);
    /* q - q^2 dl / 2, dl = (e - d) + 1 what d lost */
    q = mha__vsub(q, mha__vmul(mha__vmul(q, q), mha__vmul(mha__vadd(mha__vsub(e, d), one), mha__vset(0.5f))));
    e = mha__vsub(one, q);
    e = mha__vselect_lt(x, mha__vset(0.0f), mha__vsub(mha__vset(0.0f), e), e);
    return mha__vselect_lt(z, mha__vset(0.3025f), t, e);
}

/* 16-bit and block elements, composed from a vector unit's operations
   (its block defines those it has in hardware and says so, MHA__V*_HW; the
   others are these, lane by lane). mha__vhsum4: the sums of the lanes of
   a, b, c and d into out[0..3] (decoding's dot products, four rows at a
   time). mha__vload16: a vector from VL 16-bit elements of type (MHA_F16,
   MHA_BF16), exactly (callers inline it with a constant type, so each type
   gets its own loop); mha__vf16 / mha__vbf16 the two, mha__vseth an f16 in
   every lane. mha__vq8 / mha__vq4: VL int8, or VL nibbles (the high ones
   where hi), as floats. */
#ifndef MHA__VHSUM4_HW
MHA__PRIVATE void mha__vhsum4(mha__v a, mha__v b, mha__v c, mha__v d, float *out) {
    out[0] = mha__vhsum(a);
    out[1] = mha__vhsum(b);
    out[2] = mha__vhsum(c);
    out[3] = mha__vhsum(d);
}
#endif
#if !defined(MHA__VF16_HW) || !defined(MHA__VBF16_HW)
MHA__PRIVATE MHA__INLINE mha__v mha__vlanes16(const uint16_t *p, int type) {
    float b[MHA__VL];
    int l;
    for (l = 0; l < MHA__VL; ++l) b[l] = mha__elt_f32(p, type, (size_t)l);
    return mha__vload(b);
}
#endif
#ifndef MHA__VF16_HW
#define mha__vf16(p) mha__vlanes16(p, MHA_F16)
#endif
#ifndef MHA__VBF16_HW
#define mha__vbf16(p) mha__vlanes16(p, MHA_BF16)
#endif
#ifndef MHA__VSETH_HW
#define mha__vseth(h) mha__vset(mha_f32_from_f16(h))
#endif
#ifndef MHA__VQ_HW
MHA__PRIVATE MHA__INLINE mha__v mha__vq8(const unsigned char *q) {
    float v[MHA__VL];
    int l;
    for (l = 0; l < MHA__VL; ++l) v[l] = (float)((const int8_t *)q)[l];
    return mha__vload(v);
}
MHA__PRIVATE MHA__INLINE mha__v mha__vq4(const unsigned char *q, int hi) {
    float v[MHA__VL];
    int l;
    for (l = 0; l < MHA__VL; ++l) v[l] = (float)(q[l] >> (hi ? 4 : 0) & 15u);
    return mha__vload(v);
}
#endif
MHA__PRIVATE MHA__INLINE mha__v mha__vload16(const uint16_t *p, int type) {
    return type == MHA_F16 ? mha__vf16(p) : mha__vbf16(p);
}
/* Block b of a row of a block type (MHA_Q8, MHA_Q4), ready to give vectors:
   its integers q, its scale d in every lane and, for MHA_Q4, o = -8 d (so
   that a value (n - 8) d is one FMA, n d + o, exact as d q is). */
typedef struct mha__blk {
    const unsigned char *q;
    mha__v d, o;
} mha__blk;
MHA__PRIVATE MHA__INLINE mha__blk mha__blk_at(const void *row, int type, size_t b) {
    const unsigned char *p = (const unsigned char *)row + b * MHA__BLOCK_BYTES(type);
    mha__blk k;
    k.q = p + 2;
    k.d = mha__vseth(*(const uint16_t *)(const void *)p);
    k.o = mha__vmul(k.d, mha__vset(-8.0f));
    return k;
}
/* Values j .. j+VL-1 of the block (j a multiple of VL, VL divides 16): the
   integers widened and converted, times d (and + o). */
MHA__PRIVATE MHA__INLINE mha__v mha__blk_v(const mha__blk *k, int type, size_t j) {
    if (type == MHA_Q8) return mha__vmul(mha__vq8(k->q + j), k->d);
    return mha__vfma(mha__vq4(k->q + j % 16, j >= 16), k->d, k->o);
}
/* A vector from elements idx .. idx+VL-1 of a row of blocks (idx a
   multiple of VL): the loops that keep a block for its vectors call
   mha__blk_at and mha__blk_v themselves. */
MHA__PRIVATE MHA__INLINE mha__v mha__vload_q(const void *row, int type, size_t idx) {
    const mha__blk k = mha__blk_at(row, type, idx / MHA__QB);
    return mha__blk_v(&k, type, idx % MHA__QB);
}
/* A vector from element idx of an array of any type (callers inline it with a
   constant type, so each type gets its own loop). */
MHA__PRIVATE MHA__INLINE mha__v mha__vload_t(const void *p, int type, size_t idx) {
    if (type >= MHA_Q8) return mha__vload_q(p, type, idx);
    return type ? mha__vload16((const uint16_t *)p + idx, type) : mha__vload((const float *)p + idx);
}
/* The kernels' loops over a row of type ct in segments: a block type's
   blocks of 32 (each block's scale and address computed once, by
   mha__blk_get at the segment's start pb), any other type's whole row.
   MHA__KV: the vector at element pp of row k, from its block kb. */
#define MHA__SEG(ct, p) ((ct) >= MHA_Q8 ? MHA__QB : (p))
MHA__PRIVATE MHA__INLINE mha__blk mha__blk_get(const void *row, int type, size_t pb) {
    mha__blk k;
    if (type >= MHA_Q8) return mha__blk_at(row, type, pb / MHA__QB);
    k.q = NULL;
    k.d = k.o = mha__vset(0.0f);
    return k;
}
#define MHA__KV(k, kb, ct, pp, pb) ((ct) >= MHA_Q8 ? mha__blk_v(&(kb), ct, (pp) - (pb)) : mha__vload_t(k, ct, pp))

/* The micro-kernel: c[MR][NR] (row stride ldc) = ((acc ? c : 0) + a b) + bias,
   with a [MR][k] (row stride lda), b one packed panel [k][NR] and bias NULL
   (none) or [NR] for every row. a b is summed from zero, so that a long dot
   product is a sum of blocks of at most MHA__KC terms (the accuracy of
   blocked summation) and the bias comes last. Written out row by row
   (MHA__EACH_ROW) so that the 2 MR accumulators stay in registers. */
#define MHA__ROWS2(X) X(0) X(1)
#define MHA__ROWS4(X) MHA__ROWS2(X) X(2) X(3)
#define MHA__ROWS6(X) MHA__ROWS4(X) X(4) X(5)
#define MHA__ROWS8(X) MHA__ROWS6(X) X(6) X(7)
#define MHA__ROWS12(X) MHA__ROWS8(X) X(8) X(9) X(10) X(11)
#define MHA__K_INIT(r) mha__v c0_##r = z, c1_##r = z;
#define MHA__K_FMA(r)                                                                                    \
    ar = mha__vset(a[(r) * lda + p]);                                                                    \
    c0_##r = mha__vfma(ar, b0, c0_##r);                                                                  \
    c1_##r = mha__vfma(ar, b1, c1_##r);
#define MHA__K_STORE(r)                                                                                  \
    if (acc) {                                                                                           \
        c0_##r = mha__vadd(mha__vload(c + (r) * ldc), c0_##r);                                          \
        c1_##r = mha__vadd(mha__vload(c + (r) * ldc + MHA__VL), c1_##r);                                \
    }                                                                                                    \
    mha__vstore(c + (r) * ldc, mha__vadd(c0_##r, i0));                                                   \
    mha__vstore(c + (r) * ldc + MHA__VL, mha__vadd(c1_##r, i1));
#define MHA__KERNEL_BODY(EACH)                                                                           \
    {                                                                                                    \
        mha__v b0, b1, ar, z = mha__vset(0.0f), i0 = bias ? mha__vload(bias) : z;                        \
        mha__v i1 = bias ? mha__vload(bias + MHA__VL) : z;                                               \
        size_t p;                                                                                        \
        EACH(MHA__K_INIT)                                                                                \
        if (ldb == MHA__NR) /* packed panels: a constant stride, which the loop's addressing folds in */ \
            for (p = 0; p < k; ++p, b += MHA__NR) {                                                      \
                b0 = mha__vload(b);                                                                      \
                b1 = mha__vload(b + MHA__VL);                                                            \
                EACH(MHA__K_FMA)                                                                         \
            }                                                                                            \
        else                                                                                             \
            for (p = 0; p < k; ++p, b += ldb) {                                                          \
                b0 = mha__vload(b);                                                                      \
                b1 = mha__vload(b + MHA__VL);                                                            \
                EACH(MHA__K_FMA)                                                                         \
            }                                                                                            \
        EACH(MHA__K_STORE)                                                                               \
    }
MHA__PRIVATE MHA__NOINLINE void mha__kernel(size_t k, const float *a, size_t lda, const float *b, size_t ldb, float *c,
                                            size_t ldc, int acc, const float *bias) MHA__KERNEL_BODY(MHA__EACH_ROW)

/* The same for a panel whose columns past VL are padding: one vector wide. */
#define MHA__K1_INIT(r) mha__v c0_##r = z;
#define MHA__K1_FMA(r) c0_##r = mha__vfma(mha__vset(a[(r) * lda + p]), b0, c0_##r);
#define MHA__K1_STORE(r)                                                                                 \
    if (acc) c0_##r = mha__vadd(mha__vload(c + (r) * ldc), c0_##r);                                      \
    mha__vstore(c + (r) * ldc, mha__vadd(c0_##r, i0));
#define MHA__KERNEL1_BODY(EACH)                                                                          \
    {                                                                                                    \
        mha__v b0, z = mha__vset(0.0f), i0 = bias ? mha__vload(bias) : z;                               \
        size_t p;                                                                                        \
        EACH(MHA__K1_INIT)                                                                               \
        if (ldb == MHA__NR)                                                                              \
            for (p = 0; p < k; ++p, b += MHA__NR) {                                                      \
                b0 = mha__vload(b);                                                                      \
                EACH(MHA__K1_FMA)                                                                        \
            }                                                                                            \
        else                                                                                             \
            for (p = 0; p < k; ++p, b += ldb) {                                                          \
                b0 = mha__vload(b);                                                                      \
                EACH(MHA__K1_FMA)                                                                        \
            }                                                                                            \
        EACH(MHA__K1_STORE)                                                                              \
    }
MHA__PRIVATE MHA__NOINLINE void mha__kernel1(size_t k, const float *a, size_t lda, const float *b, size_t ldb, float *c,
                                             size_t ldc, int acc, const float *bias) MHA__KERNEL1_BODY(MHA__EACH_ROW)

/* Where MR is 8 or 12: both kernels for 4 rows (and for 8 where MR is 12),
   for a GEMM's last rows when they are that few (a tile of few query rows),
   in place of MR rows with padding; each row's sums are those of the MR-row
   kernel. With its operands in L1 the 4-row kernel runs at about 70 % of
   the 12-row one's rate, so it only takes 4 rows or fewer. */
#define MHA__KERNELS_FOR(kern, kern1, EACH)                                                              \
    MHA__PRIVATE MHA__NOINLINE void kern(size_t k, const float *a, size_t lda, const float *b, size_t ldb,   \
                                         float *c, size_t ldc, int acc, const float *bias)                  \
        MHA__KERNEL_BODY(EACH)                                                                           \
    MHA__PRIVATE MHA__NOINLINE void kern1(size_t k, const float *a, size_t lda, const float *b, size_t ldb,  \
                                          float *c, size_t ldc, int acc, const float *bias)                 \
        MHA__KERNEL1_BODY(EACH)
#if MHA__MR == 8 || MHA__MR == 12
#define MHA__MR4 4
MHA__KERNELS_FOR(mha__kernel_4, mha__kernel1_4, MHA__ROWS4)
#else
#define MHA__MR4 MHA__MR /* no smaller kernel */
#endif
#if MHA__MR == 12
#define MHA__MR8 8
MHA__KERNELS_FOR(mha__kernel_8, mha__kernel1_8, MHA__ROWS8)
#else
#define MHA__MR8 MHA__MR
#endif

/* One row: c[0..cw) = ((acc ? c : 0) + a b) + bias, the same sums in the
   same order as one row of mha__kernel (so a row's result does not depend
   on the path), for a [k], b one packed panel [k][NR], cw <= NR. */
MHA__PRIVATE MHA__NOINLINE void mha__kernel_row(size_t k, const float *a, const float *b, size_t ldb, float *c, size_t cw,
                                                int acc, const float *bias) {
    mha__v c0 = mha__vset(0.0f), c1 = c0, ar;
    float t[MHA__NR];
    size_t p, j;
    for (p = 0; p < k; ++p, b += ldb) {
        ar = mha__vset(a[p]);
        c0 = mha__vfma(ar, mha__vload(b), c0);
        c1 = mha__vfma(ar, mha__vload(b + MHA__VL), c1);
    }
    mha__vstore(t, c0);
    mha__vstore(t + MHA__VL, c1);
    for (j = 0; j < cw; ++j) c[j] = ((acc ? c[j] : 0.0f) + t[j]) + (bias ? bias[j] : 0.0f);
}

/* bf16 products (MHA_BF16_DOT 1, AVX512-BF16, bf16 weights: MHA__BF(c)).
   A GEMM whose B panels hold bf16 pairs: a panel [ceil(k/2)][NR] of 32-bit
   words, word (i, l) = column l's elements 2i (low half) and 2i+1 (high),
   in the first half of the space a float panel [k][NR] would take (so every
   offset and panel stride stays that of the float panels, but for a start
   along k, which the caller halves). Each block of A is rounded into the same
   pairs ([MR][ceil(kl/2)], RNE, zero past the end) and vdpbf16ps adds both
   products of a pair to a float accumulator. The hardware treats subnormal
   bf16 inputs as 0 and flushes subnormal results. */
#if MHA_BF16_DOT && !MHA_NO_SIMD && !MHA_NO_EXTRAS && defined(__AVX512F__) && defined(__AVX512BF16__)
#define MHA__BFDP 1
#define MHA__BF(c) (MHA__WTYPE(c) == MHA_BF16 && mha__bf_pick())
#define MHA__K_DPBF(r)                                                                                   \
    ar = _mm512_set1_epi32(((const int32_t *)(const void *)a)[(r) * lda + p]);                          \
    c0_##r = _mm512_dpbf16_ps(c0_##r, (__m512bh)ar, (__m512bh)b0);                                      \
    c1_##r = _mm512_dpbf16_ps(c1_##r, (__m512bh)ar, (__m512bh)b1);
#define MHA__K1_DPBF(r)                                                                                  \
    c0_##r = _mm512_dpbf16_ps(c0_##r, (__m512bh)_mm512_set1_epi32(((const int32_t *)(const void *)a)[(r) * lda + p]), \
                              (__m512bh)b0);
/* mha__kernel and mha__kernel1 with k pairs: a [MR][k] pairs, b [k][NR] pairs */
MHA__PRIVATE MHA__NOINLINE void mha__kernel_bf(size_t k, const float *a, size_t lda, const float *b, size_t ldb,
                                               float *c, size_t ldc, int acc, const float *bias) {
    mha__v z = mha__vset(0.0f), i0 = bias ? mha__vload(bias) : z, i1 = bias ? mha__vload(bias + MHA__VL) : z;
    __m512i b0, b1, ar;
    size_t p;
    MHA__EACH_ROW(MHA__K_INIT)
    for (p = 0; p < k; ++p, b += ldb) {
        b0 = _mm512_loadu_si512((const void *)b);
        b1 = _mm512_loadu_si512((const void *)(b + MHA__VL));
        MHA__EACH_ROW(MHA__K_DPBF)
    }
    MHA__EACH_ROW(MHA__K_STORE)
}
MHA__PRIVATE MHA__NOINLINE void mha__kernel_bf1(size_t k, const float *a, size_t lda, const float *b, size_t ldb,
                                                float *c, size_t ldc, int acc, const float *bias) {
    mha__v z = mha__vset(0.0f), i0 = bias ? mha__vload(bias) : z;
    __m512i b0;
    size_t p;
    MHA__EACH_ROW(MHA__K1_INIT)
    for (p = 0; p < k; ++p, b += ldb) {
        b0 = _mm512_loadu_si512((const void *)b);
        MHA__EACH_ROW(MHA__K1_DPBF)
    }
    MHA__EACH_ROW(MHA__K1_STORE)
}

/* ap [rows][k2] = rows r < rh of a (row stride lda), kl columns, rounded
   into bf16 pairs (RNE), 0 past column kl (pairs up to k2 >= ceil(kl/2))
   and in rows rh .. rows-1. */
MHA__PRIVATE void mha__bf_rows(uint32_t *ap, const float *a, size_t lda, size_t rh, size_t kl, size_t rows,
                               size_t k2) {
    size_t r, p, n;
    for (r = 0; r < rows; ++r) {
        const float *x = a + r * lda;
        uint32_t *o = ap + r * k2;
        for (p = (kl + 1) / 2; p < k2; ++p) o[p] = 0;
        if (r >= rh) { /* a padding row */
            for (p = 0; p < k2; ++p) o[p] = 0;
            continue;
        }
        for (p = 0; p + 2 * MHA__VL <= kl; p += 2 * MHA__VL) /* 32 columns (16 pairs) at a time */
            _mm512_storeu_si512((void *)(o + p / 2),
                                (__m512i)_mm512_cvtne2ps_pbh(_mm512_loadu_ps(x + p + MHA__VL), _mm512_loadu_ps(x + p)));
        if (p < kl) { /* the last 1 .. 31 columns, masked (plain loads: a masked one is not forwarded a store) */
            float t[2 * MHA__VL];
            for (n = 0; n < 2 * MHA__VL; ++n) t[n] = p + n < kl ? x[p + n] : 0.0f;
            n = (kl + 1) / 2 - p / 2;
            _mm512_mask_storeu_epi32(o + p / 2, (__mmask16)(n >= MHA__VL ? 0xffffu : (1u << n) - 1u),
                                     (__m512i)_mm512_cvtne2ps_pbh(_mm512_loadu_ps(t + MHA__VL), _mm512_loadu_ps(t)));
        }
    }
}
/* o[l] for l < VL = the bf16 pair (a[l] low, b[l] high), each rounded (RNE): two rows of keys as
   the pairs that vdpbf16ps takes. */
MHA__PRIVATE MHA__INLINE void mha__vbf_pair(uint32_t *o, const float *a, const float *b) {
    __m512i e = _mm512_cvtepu16_epi32((__m256i)_mm512_cvtneps_pbh(mha__vload(a)));
    __m512i d = _mm512_cvtepu16_epi32((__m256i)_mm512_cvtneps_pbh(mha__vload(b)));
    _mm512_storeu_si512((void *)o, _mm512_or_si512(e, _mm512_slli_epi32(d, 16)));
}
/* Asks for the cache line at p ahead of its use. */
#define mha__prefetch(p) _mm_prefetch((const char *)(const void *)(p), _MM_HINT_T0)

/* AMX tiles for the same GEMMs (x86-64 Linux, GNU C; MHA_NO_AMX 1: never).
   Where the CPU has AMX-TILE and AMX-BF16, the OS keeps the tiles' state
   (XCR0) and grants this process the tile data (arch_prctl
   ARCH_REQ_XCOMP_PERM), a bf16 GEMM goes to mha__gemm_tiles (blocks of 32
   x 32, mha__kernel_tiles) instead of mha__kernel_bf's blocks; asked once
   per process (mha__amx): the same pairs of A and B, summed in another
   order. A GEMM loads the tile configuration (mha__tiles_begin) and
   releases the tiles at its end. The tile operations are instructions, or
   a plain-C model of them (mha__tm_*: rows of 64 bytes, TDPBF16PS's
   products of a pair added one after the other to the float, rounded to
   nearest even, subnormals flushed) that the tests run on any CPU with
   AVX512-BF16 through the same kernel, and compare with the instructions
   where the CPU has them. */
#if !MHA_NO_AMX && defined(__x86_64__) && defined(__linux__) && defined(__GNUC__)
#define MHA__AMX 1
/* -1: as the CPU allows (the default); 0: never (vdpbf16ps); 1: the model; 2: the tiles; 3: no bf16
   products at all (mha__bf_pick; the tests set it) */
static int mha__amx_use = -1;
static int mha__amx_cpu; /* 0: not asked yet; 1: usable; -1: not */
MHA__PRIVATE int mha__amx_ask(void) {
    unsigned r[4], lo, hi;
    long ret;
    __asm__ volatile("cpuid" : "=a"(r[0]), "=b"(r[1]), "=c"(r[2]), "=d"(r[3]) : "a"(0u), "c"(0u));
    if (r[0] < 7) return -1;
    __asm__ volatile("cpuid" : "=a"(r[0]), "=b"(r[1]), "=c"(r[2]), "=d"(r[3]) : "a"(1u), "c"(0u));
    if (!(r[2] >> 27 & 1)) return -1; /* no OSXSAVE: no XGETBV */
    __asm__ volatile("cpuid" : "=a"(r[0]), "=b"(r[1]), "=c"(r[2]), "=d"(r[3]) : "a"(7u), "c"(0u));
    if (!(r[3] >> 24 & 1) || !(r[3] >> 22 & 1)) return -1; /* AMX-TILE, AMX-BF16 */
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0u));
    (void)hi;
    if ((lo >> 17 & 3) != 3) return -1; /* XTILECFG, XTILEDATA */
    /* arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA): 0 once granted */
    __asm__ volatile("syscall" : "=a"(ret) : "a"(158L), "D"(0x1023L), "S"(18L) : "rcx", "r11", "memory");
    return ret == 0 ? 1 : -1;
}
/* 0: mha__kernel_bf; 1: the model; 2: the tiles */
MHA__PRIVATE int mha__amx(void) {
    if (mha__amx_use >= 0) return mha__amx_use == 2 && mha__amx_ask() != 1 ? 0 : mha__amx_use % 3;
    int cpu = __atomic_load_n(&mha__amx_cpu, __ATOMIC_RELAXED); /* threads may ask at once: each gets the answer */
    if (!cpu) {
        cpu = mha__amx_ask();
        __atomic_store_n(&mha__amx_cpu, cpu, __ATOMIC_RELAXED);
    }
    return cpu == 1 ? 2 : 0;
}
/* The configuration: palette 1, eight tiles of 16 rows of 64 bytes (bytes a row from byte 16, rows
   from byte 48): tmm0 .. tmm3 a block of C (32 rows x 32 floats: rows 0-15 and 16-31 by columns 0-15
   and 16-31), tmm4, tmm5 a step of A (rows 0-15 and 16-31, 16 pairs each), tmm6, tmm7 the step's
   halves of B (16 rows of pairs, 16 columns each). */
MHA__PRIVATE void mha__tiles_config(unsigned char *cfg) {
    size_t t;
    for (t = 0; t < 64; ++t) cfg[t] = 0;
    cfg[0] = 1;
    for (t = 0; t < 8; ++t) {
        cfg[16 + 2 * t] = 64;
        cfg[48 + t] = 16;
    }
}
/* The model's tiles, one set a thread. */
static __thread unsigned char mha__tm[8][16][64];
MHA__PRIVATE void mha__tm_load(int t, const void *p, size_t stride) {
    size_t r, j;
    for (r = 0; r < 16; ++r)
        for (j = 0; j < 64; ++j) mha__tm[t][r][j] = ((const unsigned char *)p)[r * stride + j];
}
MHA__PRIVATE void mha__tm_zero(int t) {
    size_t r, j;
    for (r = 0; r < 16; ++r)
        for (j = 0; j < 64; ++j) mha__tm[t][r][j] = 0;
}
MHA__PRIVATE void mha__tm_store(int t, void *p, size_t stride) {
    size_t r, j;
    for (r = 0; r < 16; ++r)
        for (j = 0; j < 64; ++j) ((unsigned char *)p)[r * stride + j] = mha__tm[t][r][j];
}
MHA__PRIVATE __m512 mha__tm_ftz16(__m512i u) { /* 16 floats, subnormals to zeros of their signs */
    return _mm512_castsi512_ps(_mm512_mask_mov_epi32(_mm512_and_si512(u, _mm512_set1_epi32((int)0x80000000u)),
                                                     _mm512_test_epi32_mask(u, _mm512_set1_epi32(0x7f800000)), u));
}
/* tmm c += tmm a . tmm b: for each row m, pair k, column n, the products of the pair's even and then
   its odd halves each added to the float (fused: one rounding each), subnormal inputs and sums flushed */
MHA__PRIVATE void mha__tm_dp(int c, int a, int b) {
    /* rows of a and b as floats, read once: [row][half h][pair k] = the row's bf16 2k + h */
    float fa[16][2][16], fb[16][2][16];
    const __m512i high = _mm512_set1_epi32((int)0xffff0000u);
    size_t m, k, h;
    for (m = 0; m < 16; ++m) { /* (the tiles' bytes in x86's order: a word's low half first) */
        const __m512i wa = _mm512_loadu_si512(mha__tm[a][m]), wb = _mm512_loadu_si512(mha__tm[b][m]);
        _mm512_storeu_ps(fa[m][0], mha__tm_ftz16(_mm512_slli_epi32(wa, 16)));
        _mm512_storeu_ps(fa[m][1], mha__tm_ftz16(_mm512_and_si512(wa, high)));
        _mm512_storeu_ps(fb[m][0], mha__tm_ftz16(_mm512_slli_epi32(wb, 16)));
        _mm512_storeu_ps(fb[m][1], mha__tm_ftz16(_mm512_and_si512(wb, high)));
    }
    for (m = 0; m < 16; ++m) { /* row m of c: its 16 columns side by side, each by the rule above */
        __m512 v = mha__tm_ftz16(_mm512_loadu_si512(mha__tm[c][m]));
        for (k = 0; k < 16; ++k)
            for (h = 0; h < 2; ++h)
                v = mha__tm_ftz16(_mm512_castps_si512(
                    _mm512_fmadd_ps(_mm512_set1_ps(fa[m][h][k]), _mm512_loadu_ps(fb[k][h]), v)));
        _mm512_storeu_si512(mha__tm[c][m], _mm512_castps_si512(v));
    }
}
/* the operations: the model (tm) or the instructions, tile numbers constant */
#define MHA__T_LOAD(tm, t, p, stride)                                                                            \
    if (tm)                                                                                                      \
        mha__tm_load(t, p, stride);                                                                              \
    else                                                                                                         \
        __asm__ volatile("{tileloadd\t(%0,%1,1), %%tmm" #t "|tileloadd\t%%tmm" #t ", [%0+%1*1]}"                \
                         : : "r"((const void *)(p)), "r"((long)(stride)) : "memory")
#define MHA__T_STORE(tm, t, p, stride)                                                                           \
    if (tm)                                                                                                      \
        mha__tm_store(t, p, stride);                                                                             \
    else                                                                                                         \
        __asm__ volatile("{tilestored\t%%tmm" #t ", (%0,%1,1)|tilestored\t[%0+%1*1], %%tmm" #t "}"              \
                         : : "r"((void *)(p)), "r"((long)(stride)) : "memory")
#define MHA__T_DP(tm, c, a, b)                                                                                   \
    if (tm)                                                                                                      \
        mha__tm_dp(c, a, b);                                                                                     \
    else                                                                                                         \
        __asm__ volatile("{tdpbf16ps\t%%tmm" #b ", %%tmm" #a ", %%tmm" #c "|tdpbf16ps\t%%tmm" #c ", %%tmm" #a   \
                         ", %%tmm" #b "}" ::)
#define MHA__T_ZERO(tm, t)                                                                                       \
    if (tm)                                                                                                      \
        mha__tm_zero(t);                                                                                         \
    else                                                                                                         \
        __asm__ volatile("tilezero\t%%tmm" #t ::)
/* Before a GEMM's blocks: the configuration loaded (the tiles) */
MHA__PRIVATE void mha__tiles_begin(int tiles) {
    unsigned char cfg[64];
    mha__tiles_config(cfg);
    if (tiles == 2) __asm__ volatile("ldtilecfg\t%0" : : "m"(*(const unsigned char(*)[64])cfg) : "memory");
}
#define mha__tiles_end(tiles)                                                                                    \
    if ((tiles) == 2) __asm__ volatile("tilerelease" ::: "memory")
/* A bf16 GEMM by tiles: C in blocks of TR = 32 rows by NR = 32 columns, each
   held in tmm0 .. tmm3 over a K block of up to KT pairs, in steps of 16
   pairs (A's 32 rows in tmm4, tmm5, B's halves in tmm6, tmm7: four tile
   products a step). A's rows are rounded into pairs in a thread's buffer,
   padded with 0 to the block's steps and to 32 rows; B's last partial step
   is copied to bt with rows of 0 after it. Edge blocks go through a full
   block t; the bias is added after the last K block. */
#define MHA__TR ((size_t)32)
#define MHA__KT ((size_t)128)
static __thread uint32_t mha__tile_a[MHA__TR * MHA__KT];
MHA__PRIVATE MHA__INLINE void mha__kernel_tiles(int tm, int two, size_t steps, const uint32_t *a, size_t lda,
                                                const float *b, size_t ldb, const uint32_t *bt, float *c, size_t ldc,
                                                int acc) { /* two: 32 rows, else 16 (tmm0, tmm1, tmm4) */
    size_t p;
    if (acc) {
        MHA__T_LOAD(tm, 0, c, ldc * 4);
        MHA__T_LOAD(tm, 1, c + MHA__VL, ldc * 4);
        if (two) {
            MHA__T_LOAD(tm, 2, c + 16 * ldc, ldc * 4);
            MHA__T_LOAD(tm, 3, c + 16 * ldc + MHA__VL, ldc * 4);
        }
    } else {
        MHA__T_ZERO(tm, 0);
        MHA__T_ZERO(tm, 1);
        MHA__T_ZERO(tm, 2);
        MHA__T_ZERO(tm, 3);
    }
    for (p = 0; p < steps; ++p) {
        const void *bp = bt && p + 1 == steps ? (const void *)bt : (const void *)(b + p * 16 * ldb);
        const size_t bs = (bt && p + 1 == steps ? MHA__NR : ldb) * 4;
        MHA__T_LOAD(tm, 4, a + p * 16, lda * 4);
        MHA__T_LOAD(tm, 6, bp, bs);
        MHA__T_LOAD(tm, 7, (const uint32_t *)bp + MHA__VL, bs);
        MHA__T_DP(tm, 0, 4, 6);
        MHA__T_DP(tm, 1, 4, 7);
        if (two) {
            MHA__T_LOAD(tm, 5, a + 16 * lda + p * 16, lda * 4);
            MHA__T_DP(tm, 2, 5, 6);
            MHA__T_DP(tm, 3, 5, 7);
        }
    }
    MHA__T_STORE(tm, 0, c, ldc * 4);
    MHA__T_STORE(tm, 1, c + MHA__VL, ldc * 4);
    if (two) {
        MHA__T_STORE(tm, 2, c + 16 * ldc, ldc * 4);
        MHA__T_STORE(tm, 3, c + 16 * ldc + MHA__VL, ldc * 4);
    }
}
MHA__PRIVATE MHA__NOINLINE void mha__kernel_tt(int two, size_t steps, const uint32_t *a, size_t lda, const float *b,
                                               size_t ldb, const uint32_t *bt, float *c, size_t ldc, int acc) {
    mha__kernel_tiles(0, two, steps, a, lda, b, ldb, bt, c, ldc, acc);
}
MHA__PRIVATE MHA__NOINLINE void mha__kernel_tm(int two, size_t steps, const uint32_t *a, size_t lda, const float *b,
                                               size_t ldb, const uint32_t *bt, float *c, size_t ldc, int acc) {
    mha__kernel_tiles(1, two, steps, a, lda, b, ldb, bt, c, ldc, acc);
}
#else
#define mha__amx() 0
#define MHA__AMX 0
#endif
/* Whether bf16 weights take bf16 products (MHA__BF): by the AMX tiles where the process has them; else by
   vdpbf16ps, but not on an Intel core (CPUID's vendor), where it ran at 0.46-0.50x the FMA peak and the
   float path was faster (0.59 to 0.69x on M, B, L; an AMD EPYC's ran at 1.83 to 1.90x): there the
   weights are widened to float, as without MHA_BF16_DOT. Asked once (relaxed atomics: threads may ask
   at once). mha__amx_use (the tests) 0 to 2: bf16 products; 3: the float path. */
static int mha__bf_vendor; /* 0: not asked yet; 1: Intel; -1: another */
MHA__PRIVATE int mha__bf_pick(void) {
    int v;
#if MHA__AMX
    if (mha__amx_use >= 0) return mha__amx_use != 3;
    if (mha__amx() == 2) return 1;
#endif
    v = __atomic_load_n(&mha__bf_vendor, __ATOMIC_RELAXED);
    if (!v) {
        unsigned r[4];
        __asm__ volatile("cpuid" : "=a"(r[0]), "=b"(r[1]), "=c"(r[2]), "=d"(r[3]) : "a"(0u), "c"(0u));
        v = r[1] == 0x756e6547u && r[3] == 0x49656e69u && r[2] == 0x6c65746eu ? 1 : -1; /* "GenuineIntel" */
        __atomic_store_n(&mha__bf_vendor, v, __ATOMIC_RELAXED);
    }
    return v != 1;
}
#else
#define MHA__BFDP 0
#define MHA__BF(c) 0
#define MHA__AMX 0
#endif

/* Packs rows o < p of the row-major W (row stride ldw) for use as B = W^T:
   panel q holds rows q*NR .. q*NR+NR-1 as [d][NR], zero past row p. Reads
   NR rows side by side, so that the writes are sequential. mha__pack_t: W
   of an element type (converted: the panels are floats). */
MHA__PRIVATE void mha__pack_t(const void *w, int type, size_t ldw, size_t p, size_t d, float *bp) {
    size_t q, l, i, nl;
    for (q = 0; q * MHA__NR < p; ++q, bp += d * MHA__NR) {
        const size_t wq = q * MHA__NR * ldw;
        nl = p - q * MHA__NR < MHA__NR ? p - q * MHA__NR : MHA__NR;
        for (i = 0; i < d; ++i) {
            for (l = 0; l < nl; ++l) bp[i * MHA__NR + l] = mha__elt_f32(w, type, wq + l * ldw + i);
            for (; l < MHA__NR; ++l) bp[i * MHA__NR + l] = 0.0f;
        }
    }
}
#define mha__pack(w, ldw, p, d, bp) mha__pack_t(w, MHA_F32, ldw, p, d, bp)

#if MHA__BFDP
/* The same panels as bf16 pairs (see mha__kernel_bf), from W of type
   MHA_BF16 (its bits) or MHA_F32 (rounded, RNE). */
MHA__PRIVATE void mha__pack_bf(const void *w, int type, size_t ldw, size_t p, size_t d, float *bp) {
    uint32_t *o;
    size_t q, l, i, nl;
    for (q = 0; q * MHA__NR < p; ++q, bp += d * MHA__NR) {
        const size_t wq = q * MHA__NR * ldw;
        nl = p - q * MHA__NR < MHA__NR ? p - q * MHA__NR : MHA__NR;
        o = (uint32_t *)(void *)bp;
        for (i = 0; i < d; i += 2, o += MHA__NR)
            for (l = 0; l < MHA__NR; ++l) {
                uint32_t lo = 0, hi = 0;
                if (l < nl) {
                    const size_t e = wq + l * ldw + i;
                    lo = type == MHA_BF16 ? ((const uint16_t *)w)[e] : mha_bf16_from_f32(((const float *)w)[e]);
                    if (i + 1 < d)
                        hi = type == MHA_BF16 ? ((const uint16_t *)w)[e + 1] : mha_bf16_from_f32(((const float *)w)[e + 1]);
                }
                o[l] = lo | hi << 16;
            }
    }
}
#endif

#if defined(__cplusplus)
#define MHA__RESTRICT __restrict
#else
#define MHA__RESTRICT restrict
#endif
/* d[0..n) = s[0..n); they do not overlap. */
MHA__PRIVATE void mha__copy(float *MHA__RESTRICT d, const float *MHA__RESTRICT s, size_t n) {
    size_t i;
    for (i = 0; i < n; ++i) d[i] = s[i];
}

/* x[0..n) *= k, n a multiple of VL */
MHA__PRIVATE void mha__vscale(float *x, size_t n, float k) {
    size_t j;
    for (j = 0; j < n; j += MHA__VL) mha__vstore(x + j, mha__vmul(mha__vload(x + j), mha__vset(k)));
}

/* One GEMM of the fast path. C (=, or += when acc) A B, + bias on columns
   at the end, over rows x cols, with
     A  [rows][k], row stride lda; when rows is not a multiple of MR, the
        last rows are read through tail ([MR][KC] floats) when it is not
        NULL, or taken one at a time with rows1, else A must have readable
        rows up to the next multiple of MR;
     B  packed panels of NR columns, panel q at b + q*bps, [k][NR] from there
        with row stride ldb = NR; or a row-major B (bps = NR, ldb its row
        stride) whose panels are all full (cols a multiple of NR: the
        kernels read NR columns);
     C  element (r, j) at c[r*ldc + (j/NR)*cps + j%NR]: row-major with cps = NR,
        or itself packed panels. */
typedef struct mha__gemm_args {
    size_t rows, cols, k, lda, bps, ldc, cps;
    const float *a, *b, *bias;
    float *c, *tail;
    int acc;
    int rows1; /* the last rows, when fewer than MR, one at a time (no tail, A read only where it is) */
    int bf;    /* B holds bf16 pairs (mha__kernel_bf; b points at the pair row of its first k) */
    size_t ldb; /* B's row stride in a panel: NR (packed), or a row-major B's (bps NR: panel q at column q NR) */
} mha__gemm_args;

/* The common case: B panels of k rows (bps = k NR), C row-major (cps = NR),
   no bias, C overwritten, A readable up to a multiple of MR rows; callers
   set what differs. */
MHA__PRIVATE mha__gemm_args mha__mm(size_t rows, size_t cols, size_t k, const float *a, size_t lda, const float *b,
                                    float *c, size_t ldc) {
    mha__gemm_args g;
    g.rows = rows;
    g.cols = cols;
    g.k = k;
    g.lda = lda;
    g.bps = k * MHA__NR;
    g.ldb = MHA__NR;
    g.ldc = ldc;
    g.cps = MHA__NR;
    g.a = a;
    g.b = b;
    g.bias = NULL;
    g.c = c;
    g.tail = NULL;
    g.acc = 0;
    g.rows1 = 0;
    g.bf = 0;
    return g;
}

typedef void (*mha__kern)(size_t k, const float *a, size_t lda, const float *b, size_t ldb, float *c, size_t ldc,
                          int acc, const float *bias);

/* An edge tile of the GEMM: rh rows and cw columns of C [.][ldc] (rh < the kernel's rows or
   cw < NR), computed by the kernel (kern, or kern1 for cw <= VL) into a full tile t and copied
   out: the bias and C read only where they exist. */
MHA__PRIVATE MHA__NOINLINE void mha__gemm_edge(mha__kern kern, mha__kern kern1, size_t kk, const float *a, size_t lda,
                                               const float *bq, size_t ldb, float *c, size_t ldc, size_t rh,
                                               size_t cw, int acc, const float *bias) {
    float t[MHA__MR * MHA__NR], tb[MHA__NR];
    size_t r, j;
    if (bias && cw < MHA__NR) {
        for (j = 0; j < MHA__NR; ++j) tb[j] = j < cw ? bias[j] : 0.0f;
        bias = tb;
    }
    if (acc) {
        for (j = 0; j < MHA__MR * MHA__NR; ++j) t[j] = 0.0f;
        for (r = 0; r < rh; ++r)
            for (j = 0; j < cw; ++j) t[r * MHA__NR + j] = c[r * ldc + j];
    }
    if (cw <= MHA__VL)
        kern1(kk, a, lda, bq, ldb, t, MHA__NR, acc, bias);
    else
        kern(kk, a, lda, bq, ldb, t, MHA__NR, acc, bias);
    for (r = 0; r < rh; ++r)
        for (j = 0; j < cw; ++j) c[r * ldc + j] = t[r * MHA__NR + j];
}

/* The GEMM's last rh rows from r0 one at a time (decoding: a row or a few), for a K block of kl
   (A's rows a, stride lda; B's from its row bo; the bias with the last block). */
MHA__PRIVATE MHA__INLINE void mha__gemm_rows1(const mha__gemm_args *g, const float *a, size_t lda, size_t r0,
                                              size_t rh, size_t kl, size_t bo, int acc, int last) {
    size_t r, q, cw;
    for (r = 0; r < rh; ++r)
        for (q = 0; q * MHA__NR < g->cols; ++q) {
            cw = g->cols - q * MHA__NR < MHA__NR ? g->cols - q * MHA__NR : MHA__NR;
            mha__kernel_row(kl, a + r * lda, g->b + q * g->bps + bo, g->ldb, g->c + (r0 + r) * g->ldc + q * g->cps, cw,
                            acc, last && g->bias ? g->bias + q * MHA__NR : NULL);
        }
}

#if MHA__AMX
typedef void (*mha__kern_t)(int two, size_t steps, const uint32_t *a, size_t lda, const float *b, size_t ldb,
                            const uint32_t *bt, float *c, size_t ldc, int acc);
/* The GEMM (a bf one) by tiles (tiles 2) or their model (1). */
MHA__PRIVATE MHA__NOINLINE void mha__gemm_tiles(const mha__gemm_args *g, int tiles) {
    const mha__kern_t kern = tiles == 2 ? mha__kernel_tt : mha__kernel_tm;
    uint32_t *ap = mha__tile_a, bt[16 * MHA__NR]; /* A's block [TR][lda]; B's last partial step */
    float t[MHA__TR * MHA__NR];                   /* an edge block */
    size_t k0, kl, kk, steps, bo, r0, rh, q, cw, r, j;
    mha__tiles_begin(tiles);
    for (k0 = 0; k0 < g->k || k0 == 0; k0 += 2 * MHA__KT) {
        const int acc = g->acc || k0 != 0, last = g->k - k0 <= 2 * MHA__KT; /* the bias with the last K block */
        kl = g->k - k0 < 2 * MHA__KT ? g->k - k0 : 2 * MHA__KT;
        kk = (kl + 1) / 2; /* pairs */
        steps = (kk + 15) / 16;
        bo = k0 / 2 * g->ldb;
        for (r0 = 0; r0 < g->rows; r0 += MHA__TR) {
            rh = g->rows - r0 < MHA__TR ? g->rows - r0 : MHA__TR;
            mha__bf_rows(ap, g->a + r0 * g->lda + k0, g->lda, rh, kl, MHA__TR, steps * 16);
            for (q = 0; q * MHA__NR < g->cols; ++q) {
                const float *bq = g->b + q * g->bps + bo;
                const float *bias = last && g->bias ? g->bias + q * MHA__NR : NULL;
                float *c = g->c + r0 * g->ldc + q * g->cps;
                const int full = (rh == MHA__TR || rh == 16) && g->cols - q * MHA__NR >= MHA__NR, two = rh > 16;
                const uint32_t *tail = NULL;
                cw = g->cols - q * MHA__NR < MHA__NR ? g->cols - q * MHA__NR : MHA__NR;
                if (kk % 16) { /* B's last kk % 16 rows of pairs, then rows of 0 */
                    const uint32_t *src = (const uint32_t *)(const void *)(bq + (steps - 1) * 16 * g->ldb);
                    for (r = 0; r < 16; ++r)
                        for (j = 0; j < MHA__NR; ++j) bt[r * MHA__NR + j] = r < kk % 16 ? src[r * g->ldb + j] : 0u;
                    tail = bt;
                }
                if (full) {
                    kern(two, steps, ap, steps * 16, bq, g->ldb, tail, c, g->ldc, acc);
                } else { /* through t: C read and written only where it exists (rows of two vectors) */
                    for (r = 0; acc && r < MHA__TR; ++r)
                        if (r >= rh || cw == MHA__NR) {
                            mha__vstore(t + r * MHA__NR, r < rh ? mha__vload(c + r * g->ldc) : mha__vset(0.0f));
                            mha__vstore(t + r * MHA__NR + MHA__VL,
                                        r < rh ? mha__vload(c + r * g->ldc + MHA__VL) : mha__vset(0.0f));
                        } else {
                            for (j = 0; j < MHA__NR; ++j) t[r * MHA__NR + j] = r < rh && j < cw ? c[r * g->ldc + j] : 0.0f;
                        }
                    kern(two, steps, ap, steps * 16, bq, g->ldb, tail, t, MHA__NR, acc);
                    for (r = 0; r < rh; ++r)
                        if (cw == MHA__NR) {
                            mha__vstore(c + r * g->ldc, mha__vload(t + r * MHA__NR));
                            mha__vstore(c + r * g->ldc + MHA__VL, mha__vload(t + r * MHA__NR + MHA__VL));
                        } else {
                            for (j = 0; j < cw; ++j) c[r * g->ldc + j] = t[r * MHA__NR + j];
                        }
                }
                for (r = 0; bias && r < rh; ++r) {
                    if (cw == MHA__NR) { /* two vectors */
                        mha__vstore(c + r * g->ldc, mha__vadd(mha__vload(c + r * g->ldc), mha__vload(bias)));
                        mha__vstore(c + r * g->ldc + MHA__VL,
                                    mha__vadd(mha__vload(c + r * g->ldc + MHA__VL), mha__vload(bias + MHA__VL)));
                    } else {
                        for (j = 0; j < cw; ++j) c[r * g->ldc + j] += bias[j];
                    }
                }
            }
        }
        if (g->k == 0) break;
    }
    mha__tiles_end(tiles);
}
#else
#define mha__gemm_tiles(g, tiles) ((void)(g), (void)(tiles))
#endif

MHA__PRIVATE void mha__gemm(const mha__gemm_args *g) {
    mha__kern kern = mha__kernel, kern1 = mha__kernel1;
    size_t k0, kl, kk, bo, q, r0, rh, kr, cw, r, j;
#if MHA__BFDP
    uint32_t ap[MHA__MR * MHA__KC / 2]; /* a block of A in bf16 pairs */
    const int tiles = g->bf ? mha__amx() : 0; /* AMX: the blocks by tiles (2), or their model (1) */
    if (tiles) {
        mha__gemm_tiles(g, tiles);
        return;
    }
    if (g->bf) {
        kern = mha__kernel_bf;
        kern1 = mha__kernel_bf1;
    }
#endif
    for (k0 = 0; k0 < g->k || k0 == 0; k0 += MHA__KC) {
        int acc = g->acc || k0 != 0, last = g->k - k0 <= MHA__KC; /* the bias with the last K block */
        kl = g->k - k0 < MHA__KC ? g->k - k0 : MHA__KC;
        kk = g->bf ? (kl + 1) / 2 : kl;              /* the kernels' k: pairs, or elements */
        bo = (g->bf ? k0 / 2 : k0) * g->ldb;          /* the block's first row of B */
        for (r0 = 0; r0 < g->rows; r0 += kr) {
            const float *a = g->a + r0 * g->lda + k0;
            size_t lda = g->lda;
            mha__kern kr_kern = kern, kr_kern1 = kern1;
            rh = g->rows - r0 < MHA__MR ? g->rows - r0 : MHA__MR;
            kr = MHA__MR; /* the kernel's rows */
#if MHA__MR4 < MHA__MR /* the last rows, 4 or fewer (8 or fewer), with the smaller kernels */
            if (rh < MHA__MR && !g->bf && !g->rows1) {
                if (rh <= MHA__MR4) {
                    kr = MHA__MR4;
                    kr_kern = mha__kernel_4;
                    kr_kern1 = mha__kernel1_4;
                }
#if MHA__MR8 < MHA__MR
                else if (rh <= MHA__MR8) {
                    kr = MHA__MR8;
                    kr_kern = mha__kernel_8;
                    kr_kern1 = mha__kernel1_8;
                }
#endif
            }
#endif
#if MHA__BFDP
            if (g->bf) { /* the block's rows rounded into pairs, padded to MR; the next block's asked for */
                mha__bf_rows(ap, a, lda, rh, kl, MHA__MR, kk);
                for (r = r0 + MHA__MR; r < g->rows && r < r0 + 2 * MHA__MR; ++r)
                    for (j = 0; j < kl; j += MHA__VL) mha__prefetch(g->a + r * g->lda + k0 + j);
                a = (const float *)(const void *)ap;
                lda = kk;
            }
#endif
            if (rh < MHA__MR && g->rows1 && !g->bf) { /* the last rows (decoding: a row or a few), one at a time */
                mha__gemm_rows1(g, a, lda, r0, rh, kl, bo, acc, last);
                continue;
            }
            if (rh < kr && g->tail && !g->bf) {
                for (r = 0; r < rh; ++r) mha__copy(g->tail + r * kl, a + r * lda, kl);
                for (j = rh * kl; j < kr * kl; ++j) g->tail[j] = 0.0f;
                a = g->tail;
                lda = kl;
            }
            for (q = 0; q * MHA__NR < g->cols; ++q) {
                const float *bq = g->b + q * g->bps + bo;
                const float *bias = last && g->bias ? g->bias + q * MHA__NR : NULL;
                float *c = g->c + r0 * g->ldc + q * g->cps;
                cw = g->cols - q * MHA__NR < MHA__NR ? g->cols - q * MHA__NR : MHA__NR;
                if (rh == kr && cw == MHA__NR) {
                    kr_kern(kk, a, lda, bq, g->ldb, c, g->ldc, acc, bias);
                    continue;
                }
                if (rh == kr && cw == MHA__VL) {
                    kr_kern1(kk, a, lda, bq, g->ldb, c, g->ldc, acc, bias);
                    continue;
                }
                mha__gemm_edge(kr_kern, kr_kern1, kk, a, lda, bq, g->ldb, c, g->ldc, rh, cw, acc, bias);
            }
        }
        if (g->k == 0) break;
    }
}


/* Packed weights (mha_pack_weights): a header of the sizes they were made
   for, then for each kv head g W_k^(g) and W_v^(g), then for each head i
   W_q^(i) and W_o's block i, packed as mha__pack packs them. */
typedef struct mha__pack_head {
    size_t magic, nr, h, kv, dq, dk, dv, pq, pk, pv, po;
} mha__pack_head;
#define MHA__PACK_MAGIC 0x6d686170u
#define MHA__PACK_MAGIC_BF 0x6d686162u /* bf16 pairs (MHA__BF) */
#define MHA__MAGIC(c) (MHA__BF(c) ? MHA__PACK_MAGIC_BF : MHA__PACK_MAGIC)
#define MHA__PACK_SKIP 32 /* floats before the panels: the header, 128 bytes */

/* Floats of the panels of one kv head (*per_g) and of one head (*per_i);
   the whole buffer's bytes, SIZE_MAX on overflow. */
MHA__PRIVATE size_t mha__packed_bytes(const mha__ctx *c, size_t *per_g, size_t *per_i) {
    size_t t;
    *per_g = mha__add(mha__mul(MHA__UP(c->pk, MHA__NR), c->dk), mha__mul(MHA__UP(c->pv, MHA__NR), c->dv));
    *per_i = mha__add(mha__mul(MHA__UP(c->pq, MHA__NR), c->dq), mha__mul(MHA__UP(c->po, MHA__NR), c->pv));
    t = mha__add(mha__mul(c->kv, *per_g), mha__mul(c->h, *per_i));
    t = mha__add(mha__mul(mha__add(t, MHA__PACK_SKIP), sizeof(float)), MHA_WORKSPACE_ALIGN);
    return t & 1u ? SIZE_MAX : t;
}

/* The panels of w->packed when it was made for this call's sizes, else NULL. */
MHA__PRIVATE const float *mha__packed(const mha__ctx *c) {
    const unsigned char *p = (const unsigned char *)c->w->packed;
    const mha__pack_head *hd;
    if (!p) return NULL;
    p += (MHA_WORKSPACE_ALIGN - (uintptr_t)p % MHA_WORKSPACE_ALIGN) % MHA_WORKSPACE_ALIGN;
    hd = (const mha__pack_head *)(const void *)p;
    if (hd->magic != MHA__MAGIC(c) || hd->nr != MHA__NR || hd->h != c->h || hd->kv != c->kv || hd->dq != c->dq ||
        hd->dk != c->dk || hd->dv != c->dv || hd->pq != c->pq || hd->pk != c->pk || hd->pv != c->pv ||
        hd->po != c->po)
        return NULL;
    return (const float *)(const void *)p + MHA__PACK_SKIP;
}

/* W_k^(g) and W_v^(g) (per_g floats), and W_q^(i) and W_o's block i (per_i
   floats), packed at dst as mha_pack_weights lays them out. */
#if MHA__BFDP /* bf16 products: bf16 weights packed as pairs */
#define MHA__PACK_W(c, w, t, ldw, p, d, dst) \
    (MHA__BF(c) ? mha__pack_bf(w, t, ldw, p, d, dst) : mha__pack_t(w, t, ldw, p, d, dst))
#else
#define MHA__PACK_W(c, w, t, ldw, p, d, dst) mha__pack_t(w, t, ldw, p, d, dst)
#endif
MHA__PRIVATE void mha__pack_kv(const mha__ctx *c, size_t g, float *dst) {
    const int t = MHA__WTYPE(c);
    MHA__PACK_W(c, mha__elt(c->w->w_k, t, g * c->pk * c->dk), t, c->dk, c->pk, c->dk, dst);
    MHA__PACK_W(c, mha__elt(c->w->w_v, t, g * c->pv * c->dv), t, c->dv, c->pv, c->dv,
                dst + MHA__UP(c->pk, MHA__NR) * c->dk);
}
MHA__PRIVATE void mha__pack_qo(const mha__ctx *c, size_t i, float *dst) {
    const int t = MHA__WTYPE(c);
    MHA__PACK_W(c, mha__elt(c->w->w_q, t, i * c->pq * c->dq), t, c->dq, c->pq, c->dq, dst);
    MHA__PACK_W(c, mha__elt(c->w->w_o, t, i * c->pv), t, c->h * c->pv, c->po, c->pv,
                dst + MHA__UP(c->pq, MHA__NR) * c->dq);
}

/* The fast path's stages (mha_forward, mha_forward_parallel, mha_attend):
   the same three as the reference's, with the same signature; a pass is
   batch entry b and kv head g with its group of query heads, every query
   row at once, each step through the parallel-for:
     1. project  the pass's weights packed (unless the caller packed them);
                 K^T and V as packed panels [mr][p] and the group's queries
                 Q [n][grp p_q] (one parallel-for: key blocks' K, their V,
                 tiles' Q); V's largest |v| and finiteness; for additive
                 scoring A_k^(i) K^T and A_q^(i) packed;
     2. attend   per (head, tile of query rows): the fused attention, into
                 the group's outputs [n][grp p_v];
     3. output   per tile of rows: out (+)= h_i W_o^(i)^T head by head (the
                 first head of the call sets out, the last adds b_o).
   One kv head at a time keeps the workspace small (no n x m term, no copy
   of every head's keys). mha_attend has no weights: its q, k, v are the
   caller's (step 1 only packs K and V), and step 2 writes its heads_out.
   What a step leaves for the next lies in the workspace's parts, past the
   call state. */
typedef struct mha__fast {
    const mha__ctx *c;
    size_t pqr, pkr, pvr, mr;  /* p_q, p_k, p_v rounded up to NR; m to NR */
    size_t qr, tiles, items;   /* query rows of a tile (QR, or fewer for a small n); tiles of a batch entry;
                                  items of the attend step, grp x tiles */
    size_t tasks, slot_floats; /* tasks of the attend step (a scratch slot each), a slot's floats */
    size_t per_g, per_i;       /* floats of a kv head's packed W_k, W_v; of a head's W_q, W_o block */
    const float *packed;       /* w->packed's panels made for this shape, else NULL */
    const float *wk, *wq;      /* the pass's packed W_k^(g) (W_v^(g) after it) and its first head's W_q
                                  (W_o's block after it, then the next head's): w->packed's panels, or
                                  packed into pw (mha_attend: NULL) */
    float *pw;                 /* [per_g + grp per_i]: the pass's weights when w->packed is NULL */
    float *qp, *cat;           /* [n][grp p_q] projected queries, [n][grp p_v] the group's outputs */
    float *kp;                 /* [m][p_k] projected keys before packing */
    float *kt, *vt;            /* [mr p_k] K^T, [mr pvr] V: packed panels */
    float *akt, *paq;          /* additive: [grp][p_a][mr] A_k^(i) K^T, [grp][up(p_a) p_q] packed A_q^(i) */
    float *slot;               /* [tasks][slot_floats] */
    float *tail;               /* [3][MR][KC]: A's last rows (fewer than MR) of K, V and Q's last tasks;
                                  steps 2 and 3 use the first */
    float *vb;                 /* bf16 products in the attention (MHA__BF, dot scoring): [mr / 2 pvr] V's
                                  panels as pairs of keys in kp's room (written after step 1's keys are
                                  packed), else NULL; K^T's panels (kt) hold pairs too */
    float *rcs;                /* RoPE: [m + n][rope]: cos and sin of each pair's angle at the positions of
                                  keys 0 .. m-1, then of query rows 0 .. n-1 */
    size_t b, g;               /* the pass: batch entry, kv head */
    float vscale;              /* the pass's V is held times 1 / vscale (1, or 2^64 for huge values);
                                  0: V has a value that is not finite */
} mha__fast;

/* Bytes of a fast-path workspace of `count` parts of sz[k] floats each
   (SIZE_MAX on overflow), every part a multiple of 16 floats so that each
   starts 64-byte aligned; with ws (the aligned workspace) given, *ptr[k]
   is set to part k. */
MHA__PRIVATE size_t mha__parts_at(float *ws, const size_t *sz, float **const *ptr, size_t count) {
    size_t t = 0, k, r;
    for (k = 0; k < count; ++k) {
        if (ws) *ptr[k] = ws + t;
        r = mha__add(sz[k], 15);
        t = mha__add(t, r == SIZE_MAX ? r : r / 16 * 16);
    }
    t = mha__add(mha__mul(t, sizeof(float)), MHA_WORKSPACE_ALIGN);
    return t & 1u ? SIZE_MAX : t;
}

/* Bytes of the fast path's parts (SIZE_MAX on overflow); with ws (64-byte
   aligned) given, also the parts. mha_attend (head MHA__CORE) has no
   weights, projections or concatenation of its own. */
MHA__PRIVATE size_t mha__fast_layout(mha__fast *f, const mha__ctx *c, float *ws) {
    const int core = c->head == MHA__CORE;
    const float *packed = f->packed = core ? NULL : mha__packed(c);
    size_t sz[11], t;
    float **ptr[11];
    f->c = c;
    f->pqr = MHA__UP(c->pq, MHA__NR);
    f->pkr = MHA__UP(c->pk, MHA__NR);
    f->pvr = MHA__UP(c->pv, MHA__NR);
    f->mr = MHA__UP(c->m, MHA__NR);
    /* as many tiles as QR rows take, made even (but 1), of equal rows (a multiple of 4, or of MR:
       MHA__MR4), so that tasks balance on two threads; n = 0: no tile, qr > 0 */
    f->tiles = c->n ? 1 + (c->n - 1) / MHA__QR : 1;
    f->tiles += f->tiles > 1 && f->tiles % 2;
    f->qr = MHA__UP((c->n + f->tiles - 1) / f->tiles + (c->n == 0), MHA__MR4);
    f->tiles = (c->n + f->qr - 1) / f->qr;
    f->items = mha__mul(c->grp, f->tiles);
    f->tasks = f->items < MHA__SLOTS ? f->items : MHA__SLOTS;
    f->slot_floats = mha__mul(f->qr, mha__add(mha__add(mha__add(c->pq, mha__mul(3, f->pvr)), c->pa), MHA__KB + 3));
    mha__packed_bytes(c, &f->per_g, &f->per_i);
    sz[0] = core || packed ? 0 : mha__add(f->per_g, mha__mul(c->grp, f->per_i));
    sz[1] = core ? 0 : mha__mul(c->n, mha__mul(c->grp, c->pq));
    sz[2] = core ? 0 : mha__mul(c->n, mha__mul(c->grp, c->pv));
    sz[3] = core && !MHA__ROPE(c) ? 0 : mha__mul(c->m, c->pk); /* mha_attend with RoPE: rotated keys */
    if (MHA__BFDP && !core && !MHA__ADDITIVE(c) && mha__mul(f->mr / 2, f->pvr) > sz[3]) /* also V's pairs: */
        sz[3] = mha__mul(f->mr / 2, f->pvr); /* sized by the shape alone */
    sz[4] = mha__mul(f->mr, c->pk);
    sz[5] = mha__mul(f->mr, f->pvr);
    sz[6] = mha__mul(c->grp, mha__mul(c->pa, f->mr));
    sz[7] = mha__mul(c->grp, mha__mul(MHA__UP(c->pa, MHA__NR), c->pq));
    sz[8] = mha__mul(f->tasks, f->slot_floats);
    sz[9] = (size_t)3 * MHA__MR * MHA__KC;
    sz[10] = mha__mul(mha__add(c->m, c->n), MHA__ROPE(c));
    ptr[0] = &f->pw; ptr[1] = &f->qp; ptr[2] = &f->cat; ptr[3] = &f->kp; ptr[4] = &f->kt;
    ptr[5] = &f->vt; ptr[6] = &f->akt; ptr[7] = &f->paq; ptr[8] = &f->slot; ptr[9] = &f->tail; ptr[10] = &f->rcs;
    t = mha__parts_at(ws, sz, ptr, 11);
    f->vb = !core && MHA__BF(c) && !MHA__ADDITIVE(c) ? f->kp : NULL; /* kp is free once K is packed */
    return t;
}

/* The fast path's state of a call (struct mha__fast) lies in the workspace
   just past the call state c, its parts after it; the first pass's project
   step lays them out, and each pass's sets its batch entry, kv head and
   packed weights. */
#define MHA__FAST_SELF MHA__UP(sizeof(mha__fast), MHA_WORKSPACE_ALIGN)
MHA__PRIVATE mha__fast *mha__fast_state(const mha__ctx *c) {
    return (mha__fast *)(void *)((unsigned char *)(c) + MHA_WORKSPACE_STATE);
}

#if !MHA_NO_EXTRAS
/* Task `block` of the first pass's step 1 with RoPE: rows block KVB ..
   of the angles' table rcs (keys at 0 .. m-1, then the query rows), each
   as mha__rope computes it. */
MHA__PRIVATE void mha__fast_angles(void *arg, int32_t block) {
    const mha__fast *f = (const mha__fast *)arg;
    const mha__ctx *c = f->c;
    const size_t r = MHA__ROPE(c), j0 = (size_t)block * MHA__KVB, all = c->m + c->n;
    const size_t end = all - j0 < MHA__KVB ? all : j0 + MHA__KVB;
    mha__freqs q;
    uint64_t F;
    size_t a, j;
    int64_t pos;
    mha__freqs_start(c, &q);
    for (a = 0; a < r / 2; ++a) {
        F = mha__freqs_next(&q);
        for (j = j0; j < end; ++j) {
            pos = j < c->m ? (int64_t)j : MHA__QPOS(c, j - c->m);
            if (j < c->m || pos < 0 || pos >= (int64_t)c->m) /* (a query at a key's position uses its row) */
                mha__rope_angle(F, pos, f->rcs + j * r + 2 * a);
        }
    }
}
#else
#define mha__fast_angles NULL
#endif

/* The angles' row of query row t: that of the key at its position, if
   there is one (self-attention: every row), else its own. */
MHA__PRIVATE const float *mha__fast_qangles(const mha__fast *f, size_t t) {
    const int64_t pos = MHA__QPOS(f->c, t);
    return f->rcs + (pos >= 0 && pos < (int64_t)f->c->m ? (size_t)pos : f->c->m + t) * MHA__ROPE(f->c);
}

/* Task `task` of step 1's first part: key rows j0 .. j0+KVB-1 of the pass
   (block task / 2), K (even tasks) projected into kp and packed into K^T's
   panels, or V (odd) projected straight into its panels (mha_attend: the
   caller's rows packed as they are). Each of K, V and Q has its own tail. */
MHA__PRIVATE void mha__fast_kv(const mha__fast *f, size_t task) {
    const mha__ctx *c = f->c;
    const mha_weights *w = c->w;
    const size_t j0 = task / 2 * MHA__KVB, rows = c->m - j0 < MHA__KVB ? c->m - j0 : MHA__KVB;
    const float *keys = c->keys + (f->b * c->m + j0) * c->dk, *values = c->values + (f->b * c->m + j0) * c->dv;
    const size_t g = f->g;
    float *kt = f->kt + j0 * c->pk, *vt = f->vt + j0 * MHA__NR;
    size_t q, j, a;
    mha__gemm_args ga;
    if (task % 2) { /* V */
        for (q = 0; q < f->pvr / MHA__NR; ++q) /* padding columns stay 0 */
            for (j = 0; j < rows * MHA__NR; ++j) vt[q * f->mr * MHA__NR + j] = 0.0f;
        if (c->head == MHA__CORE) {
            for (j = 0; j < rows; ++j)
                for (a = 0; a < c->pv; ++a)
                    vt[(a / MHA__NR) * f->mr * MHA__NR + j * MHA__NR + a % MHA__NR] = values[j * c->dv + g * c->pv + a];
            return;
        }
        ga = mha__mm(rows, c->pv, c->dv, values, c->dv, f->wk + f->pkr * c->dk, vt, MHA__NR);
        ga.cps = f->mr * MHA__NR; /* straight into the packed panels */
        ga.bias = w->b_v ? w->b_v + g * c->pv : NULL;
        ga.tail = f->tail + MHA__MR * MHA__KC; /* the last block's */
        ga.bf = MHA__BF(c);
        mha__gemm(&ga);
        return;
    }
    if (c->head == MHA__CORE) {
        const float *kr = keys + g * c->pk; /* the rows to pack, stride kst */
        size_t kst = c->dk;
        if (MHA__ROPE(c)) { /* the rows rotated in kp first */
            for (j = 0; j < rows; ++j) {
                mha__copy(f->kp + (j0 + j) * c->pk, keys + j * c->dk + g * c->pk, c->pk);
                mha__rope(c, f->kp + (j0 + j) * c->pk, 1, 0, 0, f->rcs + (j0 + j) * MHA__ROPE(c));
            }
            kr = f->kp + j0 * c->pk;
            kst = c->pk;
        }
        mha__pack(kr, kst, rows, c->pk, kt);
        return;
    }
    ga = mha__mm(rows, c->pk, c->dk, keys, c->dk, f->wk, f->kp + j0 * c->pk, c->pk);
    ga.bias = w->b_k ? w->b_k + g * c->pk : NULL;
    ga.tail = f->tail; /* the last block's */
    ga.bf = MHA__BF(c);
    mha__gemm(&ga);
    for (j = 0; j < rows && MHA__ROPE(c); ++j) mha__rope(c, f->kp + (j0 + j) * c->pk, 1, 0, 0, f->rcs + (j0 + j) * MHA__ROPE(c));
#if MHA__BFDP
    if (f->vb) /* bf16 products in the attention: K^T's panels as pairs */
        mha__pack_bf(f->kp + j0 * c->pk, MHA_F32, c->pk, rows, c->pk, kt);
    else
#endif
        mha__pack(f->kp + j0 * c->pk, c->pk, rows, c->pk, kt);
}

#if MHA__BFDP
/* Task `block` of step 1 with bf16 products in the attention: keys block
   KVB .. of V's panels (vt, final: scaled) rounded into pairs of keys (vb). */
MHA__PRIVATE void mha__fast_vbf(void *arg, int32_t block) {
    const mha__fast *f = (const mha__fast *)arg;
    const size_t j0 = (size_t)block * MHA__KVB, end = f->mr - j0 < MHA__KVB ? f->mr : j0 + MHA__KVB;
    size_t q, j, l;
    for (q = 0; q < f->pvr / MHA__NR; ++q) {
        const float *v = f->vt + q * f->mr * MHA__NR;
        uint32_t *o = (uint32_t *)(void *)(f->vb + q * (f->mr / 2) * MHA__NR);
        for (j = j0; j < end; j += 2) /* keys j, j+1 (mr is even) */
            for (l = 0; l < MHA__NR; l += MHA__VL)
                mha__vbf_pair(o + j / 2 * MHA__NR + l, v + j * MHA__NR + l, v + (j + 1) * MHA__NR + l);
    }
}
#endif

/* Task l of step 1, additive scoring, head i = g grp + l of the pass:
   A_k^(i) K^T [p_a][mr] (0 for the padding keys) and A_q^(i) packed. */
MHA__PRIVATE void mha__fast_akt(void *arg, int32_t l) {
    const mha__fast *f = (const mha__fast *)arg;
    const mha__ctx *c = f->c;
    const size_t i = f->g * c->grp + (size_t)l;
    float *akt = f->akt + (size_t)l * c->pa * f->mr;
    size_t a, j;
    mha__gemm_args ga = mha__mm(c->pa, c->m, c->pk, c->w->a_k + i * c->pa * c->pk, c->pk, f->kt, akt, f->mr);
    ga.rows1 = 1;
    mha__gemm(&ga);
    for (a = 0; a < c->pa; ++a)
        for (j = c->m; j < f->mr; ++j) akt[a * f->mr + j] = 0.0f;
    mha__pack(c->w->a_q + i * c->pa * c->pq, c->pq, c->pa, c->pq,
              f->paq + (size_t)l * MHA__UP(c->pa, MHA__NR) * c->pq);
}

/* Task `tile` of step 1's first part, after the K and V tasks: that tile's
   queries for each head of the pass. */
MHA__PRIVATE void mha__fast_q(const mha__fast *f, size_t tile) {
    const mha__ctx *c = f->c;
    const size_t t0 = tile * f->qr, rows = c->n - t0 < f->qr ? c->n - t0 : f->qr, gq = c->grp * c->pq;
    size_t l, i;
    for (l = 0; l < c->grp; ++l) {
        mha__gemm_args ga = mha__mm(rows, c->pq, c->dq, c->queries + (f->b * c->n + t0) * c->dq, c->dq,
                                    f->wq + l * f->per_i, f->qp + t0 * gq + l * c->pq, gq);
        i = f->g * c->grp + l;
        ga.bias = c->w->b_q ? c->w->b_q + i * c->pq : NULL;
        ga.tail = f->tail + (size_t)2 * MHA__MR * MHA__KC; /* the last tile's */
        ga.bf = MHA__BF(c);
        mha__gemm(&ga);
    }
    for (l = 0; l < rows && MHA__ROPE(c); ++l) /* every head of the row at its position */
        mha__rope(c, f->qp + (t0 + l) * gq, c->grp, c->pq, 0, mha__fast_qangles(f, t0 + l));
}

/* Step 1's first part, one parallel-for: tasks 0 .. MHA__KV_TASKS(c) - 1
   the keys' and values' (mha__fast_kv), then a task per tile of query rows
   (mha__fast_q; none for mha_attend). */
#define MHA__KV_TASKS(c) (2 * (((c)->m + MHA__KVB - 1) / MHA__KVB)) /* K and V of each block of KVB keys */
MHA__PRIVATE void mha__fast_kvq(void *arg, int32_t task) {
    const mha__fast *f = (const mha__fast *)arg;
    const size_t kvt = MHA__KV_TASKS(f->c);
    if ((size_t)task < kvt)
        mha__fast_kv(f, (size_t)task);
    else
        mha__fast_q(f, (size_t)task - kvt);
}

/* The max of x[0..len) and mx as the reference path takes it: NaN once any
   element is NaN. */
MHA__PRIVATE float mha__max(const float *x, size_t len, float mx) {
    size_t j;
    for (j = 0; j < len; ++j)
        if (x[j] > mx || x[j] != x[j]) mx = x[j];
    return mx;
}

/* x[j] = exp(x[j] - mx) in place for j < len (a multiple of VL), with the
   rules of mha__weight: a masked score (-inf) gives 0, a score equal to mx 1
   (also for mx = +inf), 0 below ln(FLT_MIN), and a NaN max makes every
   weight NaN. Returns the sum. The vector code runs when mx is finite; exp(0)
   is exactly 1 there and the vector exp is 0 below ln(FLT_MIN) too. */
MHA__PRIVATE float mha__softmax(float *x, size_t len, float mx) {
    const float ninf = -(FLT_MAX * 2.0f);
    float sum = 0.0f;
    size_t j;
    if (mx > ninf && mx <= FLT_MAX) {
        mha__v vm = mha__vset(mx), vs = mha__vset(0.0f), p;
        for (j = 0; j < len; j += MHA__VL) {
            p = mha__vexp(mha__vsub(mha__vload(x + j), vm));
            mha__vstore(x + j, p);
            vs = mha__vadd(vs, p);
        }
        return mha__vhsum(vs);
    }
    for (j = 0; j < len; ++j) {
        x[j] = mha__weight(x[j], mx);
        sum += x[j];
    }
    return sum;
}

/* The max of x[0..len) and mx as the reference path takes it (NaN once any
   is NaN), for len a multiple of VL: vector code unless a value is NaN or
   +inf. */
MHA__PRIVATE float mha__rowmax(const float *x, size_t len, float mx) {
    mha__v vm = mha__vset(-(FLT_MAX * 2.0f)), v;
    float top;
    size_t j;
    int bad = !(mx <= FLT_MAX); /* +inf or NaN */
    for (j = 0; j < len && !bad; j += MHA__VL) {
        v = mha__vload(x + j);
        bad = mha__vbad(v);
        vm = mha__vmax(vm, v);
    }
    if (bad) return mha__max(x, len, mx);
    top = mha__vhmax(vm); /* no NaN here, and mx is -inf or finite */
    return top > mx ? top : mx;
}

#if !MHA_NO_EXTRAS
/* x[j] for j < len: times scale, soft-capped (the vector tanh), then less
   slope (d0 - j) (ALiBi, d0 the query's position less x[0]'s key's; the
   distances are exact below 2^24, as the reference's), a vector at a time
   (the last one through a copy). */
MHA__PRIVATE void mha__fast_extras(const mha__ctx *c, float *x, size_t len, float scale, float slope, int64_t d0) {
    float buf[MHA__VL], iota[MHA__VL];
    const mha__v cap = mha__vset(MHA__CAP(c)), vs = mha__vset(scale), vl = mha__vset(slope);
    size_t j, l;
    for (l = 0; l < MHA__VL; ++l) iota[l] = (float)l;
    for (j = 0; j < len; j += MHA__VL) {
        float *y = len - j < MHA__VL ? buf : x + j;
        mha__v v;
        if (y == buf)
            for (l = 0; l < MHA__VL; ++l) buf[l] = j + l < len ? x[j + l] : 0.0f;
        v = mha__vmul(mha__vload(y), vs);
        if (MHA__CAP(c) != 0.0f) v = mha__vmul(cap, mha__vtanh(mha__vdiv(v, cap)));
        if (c->knobs->alibi) v = mha__vsub(v, mha__vmul(vl, mha__vsub(mha__vset((float)(d0 - (int64_t)j)), mha__vload(iota))));
        mha__vstore(y, v);
        if (y == buf)
            for (l = 0; j + l < len; ++l) x[j + l] = buf[l];
    }
}
#else
#define mha__fast_extras(c, x, len, scale, slope, d0) ((void)(c), (void)(x), (void)(slope), (void)(d0))
#endif

/* The fast path's one place for the rules on a row: its block of scores
   x[0..cp), of which the first vis are in the row's visible range: times
   scale (1: already), then (soft-cap and ALiBi, d0 as mha__fast_extras
   takes it,) keep's masked keys -inf and bias added; -inf past vis. keep
   and bias: the row's, at the block's first key, or NULL. The forward's
   tiles (mha__fast_scores), the backward's (mha__bwf_probs) and decoding's
   chunks (mha__fast_ring_rules) call it. */
MHA__PRIVATE void mha__fast_rules(const mha__ctx *c, float *x, size_t vis, size_t cp, const uint8_t *keep,
                                  const float *bias, float scale, float slope, int64_t d0) {
    const float ninf = -(FLT_MAX * 2.0f);
    size_t j = 0;
    if (MHA__EXTRAS(c)) {
        mha__fast_extras(c, x, vis, scale, slope, d0);
        for (; j < vis && (keep || bias); ++j) x[j] = keep && !keep[j] ? ninf : x[j] + (bias ? bias[j] : 0.0f);
        j = vis;
    }
    if (!keep && !bias && scale == 1.0f) j = vis; /* nothing to do */
    if (!keep && !bias)
        for (; j + MHA__VL <= vis; j += MHA__VL) mha__vstore(x + j, mha__vmul(mha__vload(x + j), mha__vset(scale)));
    for (; j < vis; ++j) x[j] = keep && !keep[j] ? ninf : scale * x[j] + (bias ? bias[j] : 0.0f);
    for (; j < cp; ++j) x[j] = ninf;
}

/* Decoding's position map on the fast path: the rules (mha__fast_rules) on
   a row's scores x[0..UP(cl, VL)) of cache slots j0 .. j0+cl-1 (already
   times scale), e positions appended, the row seeing positions [lo, hi)
   and those below the kept slots' count s (ALiBi at its position qpos).
   Slots below s hold their own position; the ring's slots from s0 on (its
   oldest position) hold positions base + j, those from s to s0 base + ring
   + j (mha__ring's map): a chunk is at most three runs of slots whose
   positions rise one by one, each run's visible slots one range. */
MHA__PRIVATE void mha__fast_ring_rules(const mha__ctx *c, float *x, size_t j0, size_t cl, size_t e, size_t lo,
                                       size_t hi, int64_t qpos, float slope) {
    const size_t end = j0 + cl;
    size_t s, ring, s0, base, part, a, b, len, off, v0, v1, j;
    mha__keys map; /* the position map alone */
    mha__ring(&map, e, c->ms, MHA__KEPT(c->cache));
    s = map.kept;
    ring = map.cap;
    s0 = map.s0;
    base = map.base;
    for (part = 0; part < 3; ++part) {
        /* the run's slots [a, b) within [j0, end), and the position of slot 0 */
        a = part == 0 ? 0 : part == 1 ? s : s0;
        b = part == 0 ? s : part == 1 ? s0 : c->ms;
        a = a < j0 ? j0 : a > end ? end : a;
        b = b < a ? a : b > end ? end : b;
        len = b - a;
        off = part == 0 ? 0 : part == 1 ? base + ring : base;
        v0 = part == 0 || lo <= off + a ? 0 : lo - off - a; /* its visible slots: a + v0 .. a + v1 - 1 */
        v1 = hi > off + a ? hi - off - a : 0;
        v0 = v0 < len ? v0 : len;
        v1 = v1 < v0 ? v0 : v1 < len ? v1 : len;
        for (j = 0; j < v0; ++j) x[a - j0 + j] = -(FLT_MAX * 2.0f);
        mha__fast_rules(c, x + a - j0 + v0, v1 - v0, len - v0, NULL, NULL, 1.0f, slope,
                        qpos - (int64_t)(off + a + v0));
    }
    for (j = cl; j < MHA__UP(cl, MHA__VL); ++j) x[j] = -(FLT_MAX * 2.0f);
}

/* mha_decode_tree on the fast path, after mha__fast_ring_rules saw the
   old length's positions alone: the scores of cache slots j0 .. j0+cl-1
   (x, keys K of element type ct) that hold drafts from which the row's
   draft `row` descends, within its window (lo), computed again (q . k
   times scale, the soft-cap, ALiBi at the distance of their depths). */
MHA__PRIVATE void mha__dec_tree(const mha__ctx *c, float *x, const float *q, const void *K, int ct, size_t j0,
                                size_t cl, size_t b, size_t row, size_t lo, float slope) {
    const int32_t *par = MHA__PARENTS(c, b);
    const size_t len = (size_t)c->cache->length[b], depth = mha__depth(par, row), kept = MHA__KEPT(c->cache);
    size_t d, slot, pos;
    for (d = 0; d <= row; ++d) {
        slot = c->cache->window ? mha__pos_slot(len + d, kept, c->ms) : len + d;
        pos = len + mha__depth(par, d);
        if (slot < j0 || slot - j0 >= cl || !mha__ancestor(par, d, row) || (pos < lo && pos >= kept))
            continue;
        x[slot - j0] = mha__extras(c, c->scale * mha__dot_t(q, mha__row(K, ct, c->pk, slot), ct, 1, c->pk, 0), slope,
                                   (int64_t)(depth - mha__depth(par, d)));
    }
}

/* ot[QR][pvr] += st[QR][KB] V for keys j0 .. j0+cl-1 (weights in st): the
   block's product pt is summed from zero and added to ot with compensation
   oc (as the reference path adds its blocks), so that the error does not
   grow with m. When V has a value that is not finite, weights of exactly 0
   are skipped as the reference path skips them, so that a masked key's
   values never count, and the blocks are added plainly (an inf stays inf). */
MHA__PRIVATE void mha__fast_pv(const mha__fast *f, const float *st, size_t cl, size_t j0, float *ot, float *pt,
                               float *oc) {
    const mha__ctx *c = f->c;
    const float *vt = f->vt;
    mha__gemm_args ga;
    size_t r, j, a, n = f->qr * f->pvr;
    if (f->vscale == 0.0f) {
        for (j = 0; j < n; ++j) pt[j] = 0.0f;
        for (r = 0; r < f->qr; ++r)
            for (j = 0; j < cl; ++j)
                if (st[r * MHA__KB + j] != 0.0f)
                    for (a = 0; a < c->pv; ++a)
                        pt[r * f->pvr + a] +=
                            st[r * MHA__KB + j] * vt[(a / MHA__NR) * f->mr * MHA__NR + (j0 + j) * MHA__NR + a % MHA__NR];
        for (j = 0; j < n; j += MHA__VL) mha__vstore(ot + j, mha__vadd(mha__vload(ot + j), mha__vload(pt + j)));
        return;
    }
    ga = mha__mm(f->qr, c->pv, cl, st, MHA__KB, vt + j0 * MHA__NR, pt, f->pvr);
    ga.bps = f->mr * MHA__NR; /* V's panels hold every key */
    if (f->vb) { /* bf16 pairs of keys (j0 is even) */
        ga.b = f->vb + j0 / 2 * MHA__NR;
        ga.bps = f->mr / 2 * MHA__NR;
        ga.bf = 1;
    }
    mha__gemm(&ga);
    for (j = 0; j < n; j += MHA__VL) { /* Kahan: y = pt - oc, t = ot + y, oc = (t - ot) - y, ot = t */
        mha__v o = mha__vload(ot + j), y = mha__vsub(mha__vload(pt + j), mha__vload(oc + j)), t = mha__vadd(o, y);
        mha__vstore(oc + j, mha__vsub(mha__vsub(t, o), y));
        mha__vstore(ot + j, t);
    }
}

/* Additive scores of head g grp + l, rows r < rv, for keys j0 .. j0+cp-1
   into st: w_a . tanh(A_q q + A_k k_j), summed over a in the reference's
   order, one vector of keys at a time. */
MHA__PRIVATE void mha__fast_additive(const mha__fast *f, size_t l, const float *aq, size_t rv, size_t j0, size_t cp,
                                     float *st) {
    const mha__ctx *c = f->c;
    const float *wa = c->w->a_v + (f->g * c->grp + l) * c->pa, *akt = f->akt + l * c->pa * f->mr;
    size_t r, j, a;
    for (r = 0; r < rv; ++r)
        for (j = 0; j < cp; j += MHA__VL) {
            mha__v acc = mha__vset(0.0f), x;
            for (a = 0; a < c->pa; ++a) {
                x = mha__vadd(mha__vset(aq[r * c->pa + a]), mha__vload(akt + a * f->mr + j0 + j));
                acc = mha__vfma(mha__vset(wa[a]), mha__vtanh(x), acc);
            }
            mha__vstore(st + r * MHA__KB + j, acc);
        }
}

/* One tile of step 2 (mha__fast_tile): head g grp + gi, rows t0 ..
   t0+rv-1 of batch entry b (row0 the first's row in the batch), the keys
   each row may see (hi), the queries qt and, additive, aq. */
typedef struct mha__tile {
    size_t gi, t0, rv, row0;
    const size_t *hi;
    const float *qt, *aq;
    float scale, slope;
} mha__tile;

/* st [QR][KB] = the scores of keys j0 .. j0+cl-1 under the rules (cp: cl
   rounded up to VL; -inf past a row's visible keys, 0 on padding rows). */
MHA__PRIVATE void mha__fast_scores(const mha__fast *f, const mha__tile *t, size_t j0, size_t cl, float *st) {
    const mha__ctx *c = f->c;
    const mha_mask *mask = c->mask;
    const size_t KB = MHA__KB, m = c->m, cp = MHA__UP(cl, MHA__VL);
    int64_t d0 = 0;
    size_t r, j;
    mha__gemm_args ga;
    if (MHA__ADDITIVE(c)) {
        mha__fast_additive(f, t->gi, t->aq, t->rv, j0, cp, st);
    } else { /* st = q . k, keys j0.. */
        ga = mha__mm(f->qr, cl, c->pk, t->qt, c->pq, f->kt + j0 * c->pk, st, KB);
        ga.bf = f->vb != NULL;
        mha__gemm(&ga);
    }
    for (r = 0; r < f->qr; ++r) {
        float *x = st + r * KB;
        const size_t vis = t->hi[r] <= j0 ? 0 : t->hi[r] - j0 < cl ? t->hi[r] - j0 : cl;
        const uint8_t *keep = mask && mask->keep ? mask->keep + (t->row0 + r) * m + j0 : NULL;
        const float *bias = mask && mask->bias ? mask->bias + (t->row0 + r) * m + j0 : NULL;
        if (r >= t->rv) { /* a padding row: weight 0 */
            for (j = 0; j < cl; ++j) x[j] = 0.0f;
            continue;
        }
        if (MHA__EXTRAS(c)) {
            const int64_t qpos = MHA__QPOS(c, t->t0 + r);
            d0 = qpos - MHA__DREF(c, qpos) - (int64_t)j0;
        }
        mha__fast_rules(c, x, vis, cp, keep, bias, t->scale, t->slope, d0);
    }
}

/* A tile's queries qt [R][p_q] of head i (rows t0 .. t0+rv-1 from q, row stride qs; 0 past the
   last; mha_attend with RoPE: rotated here), and for additive scoring aq = A_q^(i) q_i. */
MHA__PRIVATE MHA__NOINLINE void mha__fast_tile_q(const mha__fast *f, const mha__tile *t, float *qt, float *aq,
                                                 const float *q, size_t qs) {
    const mha__ctx *c = f->c;
    const size_t R = f->qr;
    size_t r, j;
    mha__gemm_args ga;
    for (r = 0; r < t->rv; ++r) mha__copy(qt + r * c->pq, q + r * qs, c->pq);
    for (j = t->rv * c->pq; j < R * c->pq; ++j) qt[j] = 0.0f;
    for (r = 0; r < t->rv && c->head == MHA__CORE && MHA__ROPE(c); ++r)
        mha__rope(c, qt + r * c->pq, 1, 0, 0, mha__fast_qangles(f, t->t0 + r));
    if (MHA__ADDITIVE(c)) { /* aq = A_q^(i) q_i for each row */
        ga = mha__mm(R, c->pa, c->pq, qt, c->pq, f->paq + t->gi * MHA__UP(c->pa, MHA__NR) * c->pq, aq, c->pa);
        mha__gemm(&ga);
    }
}

/* After a tile of head i: attn, when asked for (e^(s - max) / sum for every key, from the
   rows' final statistics mx, l; scores in st), and mha_forward_lse's log-sum-exp of each row. */
MHA__PRIVATE MHA__NOINLINE void mha__fast_tile_stats(const mha__fast *f, const mha__tile *t, size_t i, float *st,
                                                     const float *mx, const float *l) {
    const mha__ctx *c = f->c;
    const size_t KB = MHA__KB, m = c->m, t0 = t->t0, rv = t->rv;
    float *attn = c->attn ? c->attn + ((f->b * c->h + i) * c->n + t0) * m : NULL;
    size_t j0, cl, cp, r, j;
    for (j0 = 0; attn && j0 < m; j0 += KB) {
        cl = m - j0 < KB ? m - j0 : KB;
        cp = MHA__UP(cl, MHA__VL);
        mha__fast_scores(f, t, j0, cl, st);
        for (r = 0; r < rv; ++r) {
            float *x = st + r * KB;
            mha__softmax(x, cp, mx[r]);
            mha__vscale(x, cp, l[r] == 0.0f ? 0.0f : 1.0f / l[r]); /* every key masked: 0 */
            for (j = 0; j < cl; ++j) attn[r * m + j0 + j] = x[j];
        }
    }
    for (r = 0; r < rv && MHA__LSE(c); ++r) { /* mha_forward_lse: each row's log-sum-exp */
        const float ls[2] = {mx[r], l[r]};
        mha__lse_put(c->lse + (f->b * c->h + i) * c->n + t0 + r, ls, MHA__LSE_SHIFT(c, t->slope, t0 + r));
    }
}

/* Item `item` of step 2: head i = g grp + gi with gi = item / tiles, tile
   item % tiles (rows t0 .. t0+QR-1 of batch entry b), in scratch slot s:
   the tile's queries qt [QR][p_q], a block of scores or weights st
   [QR][KB], the output accumulator ot [QR][pvr] with a block's product pt
   and the compensation oc (both [QR][pvr]), the running max mx, sum l and
   its compensation lc.
   Writes h_i of each row into the group's outputs (mha_attend: heads_out).
   When V has a value that is not finite, a first pass over the key blocks
   finds each row's max, so that the weights are e^(s - max) of the final
   max, as the reference computes them: a later block's larger max can then
   never rescale a NaN that a weight of 0 would have dropped.
   attn, when asked for, is a pass of its own after the output's, from the
   final statistics: the output does not change by a bit. */
MHA__PRIVATE void mha__fast_tile(const mha__fast *f, size_t item, float *s) {
    const float ninf = -(FLT_MAX * 2.0f);
    const mha__ctx *c = f->c;
    const int core = c->head == MHA__CORE;
    const size_t gi = item / f->tiles, i = f->g * c->grp + gi, R = f->qr, KB = MHA__KB, m = c->m, pvr = f->pvr;
    const size_t t0 = item % f->tiles * R, rv = c->n - t0 < R ? c->n - t0 : R, row0 = f->b * c->n + t0;
    const size_t qs = core ? c->dq : c->grp * c->pq, hs = core ? c->po : c->grp * c->pv; /* row strides */
    const float *q = core ? c->queries + row0 * qs + i * c->pq : f->qp + t0 * qs + gi * c->pq;
    float *ho = core ? c->out + row0 * hs + i * c->pv : f->cat + t0 * hs + gi * c->pv;
    float *qt = s, *st = qt + R * c->pq, *ot = st + R * KB, *pt = ot + R * pvr, *oc = pt + R * pvr;
    float *mx = oc + R * pvr, *l = mx + R, *lc = l + R, *aq = lc + R;
    const float vscale = f->vscale;
#define MHA__TILE_SINK(r) mha__row_sink(c, i, t.slope, MHA__QPOS(c, t0 + (r)))
    size_t hi[MHA__QR], jend = 0, j0, cl, cp, r, j;
    int pass;
    mha__tile t;
    t.gi = gi;
    t.t0 = t0;
    t.rv = rv;
    t.row0 = row0;
    t.hi = hi;
    t.qt = qt;
    t.aq = aq;
    t.scale = MHA__ADDITIVE(c) ? 1.0f : c->scale;
    t.slope = MHA__SLOPE(c, i);
    mha__fast_tile_q(f, &t, qt, aq, q, qs); /* qt, (aq) */

    for (r = 0; r < R; ++r) { /* keys j < hi[r] may be visible to row r; a sink starts the max and sum */
        hi[r] = r < rv ? mha__visible(c->mask, f->b, row0 + r, t0 + r, m) : 0;
        if (hi[r] > jend) jend = hi[r];
        mx[r] = MHA__TILE_SINK(r);
        lc[r] = 0.0f;
    }
    for (j = 0; j < R * pvr; ++j) ot[j] = oc[j] = 0.0f;

    /* pass 0 (only when V is not finite): the max of each row; pass 1: the
       weights and the product with V */
    for (pass = vscale == 0.0f ? 0 : 1; pass < 2; ++pass) {
        for (r = 0; r < R && pass == 1; ++r) /* the sink's share at the max so far (pass 0 found it) */
            l[r] = mha__weight(MHA__TILE_SINK(r), mx[r]);
        for (j0 = 0; j0 < jend; j0 += KB) {
            cl = jend - j0 < KB ? jend - j0 : KB;
            cp = MHA__UP(cl, MHA__VL);
            mha__fast_scores(f, &t, j0, cl, st);
            for (r = 0; r < rv; ++r) {
                float *x = st + r * KB, alpha, mnew;
                if (pass == 0) {
                    mx[r] = mha__max(x, cl, mx[r]);
                    continue;
                }
                mnew = mha__rowmax(x, cp, mx[r]);
                if (mnew == ninf) { /* nothing visible yet */
                    for (j = 0; j < cl; ++j) x[j] = 0.0f;
                    continue;
                }
                alpha = mha__weight(mx[r], mnew);
                if (alpha != 1.0f) { /* the max grew: rescale */
                    mha__vscale(ot + r * pvr, pvr, alpha);
                    mha__vscale(oc + r * pvr, pvr, alpha);
                    l[r] *= alpha;
                    lc[r] *= alpha;
                }
                l[r] = mha__add_comp(l[r], mha__softmax(x, cp, mnew), lc + r); /* l += the block's sum */
                mx[r] = mnew;
            }
            if (pass == 1) mha__fast_pv(f, st, cl, j0, ot, pt, oc);
        }
    }

    for (r = 0; r < rv; ++r) /* divide once (and undo V's scale); a row with every key masked is 0, and so
                                is one with no key at all (m = 0) whatever its sink, NaN included */
        mha__vscale(ot + r * pvr, pvr, l[r] == 0.0f || m == 0 ? 0.0f : (vscale > 1.0f ? vscale : 1.0f) / l[r]);
    for (r = 0; r < rv; ++r) mha__copy(ho + r * hs, ot + r * pvr, c->pv); /* h_i of each row */
    mha__fast_tile_stats(f, &t, i, st, mx, l); /* attn, lse */
}
#undef MHA__TILE_SINK

/* Task `task` of step 2: an equal share of the items, in order, in the
   task's own scratch slot. */
MHA__PRIVATE void mha__fast_items(void *arg, int32_t task) {
    const mha__fast *f = (const mha__fast *)arg;
    const size_t k = (size_t)task, share = f->items / f->tasks, extra = f->items % f->tasks;
    size_t e = k * share + (k < extra ? k : extra), end = e + share + (k < extra);
    for (; e < end; ++e) mha__fast_tile(f, e, f->slot + k * f->slot_floats);
}

/* Task `tile` of step 3: out (+)= h_i W_o^(i)^T for each head i of the
   pass in turn (head 0 sets out, the last head adds b_o), that tile's rows. */
MHA__PRIVATE void mha__fast_o(void *arg, int32_t tile) {
    const mha__fast *f = (const mha__fast *)arg;
    const mha__ctx *c = f->c;
    const size_t t0 = (size_t)tile * f->qr, rows = c->n - t0 < f->qr ? c->n - t0 : f->qr, gv = c->grp * c->pv;
    size_t l, i;
    for (l = 0; l < c->grp; ++l) {
        mha__gemm_args ga = mha__mm(rows, c->po, c->pv, f->cat + t0 * gv + l * c->pv, gv,
                                    f->wq + l * f->per_i + f->pqr * c->dq, c->out + (f->b * c->n + t0) * c->po, c->po);
        i = f->g * c->grp + l;
        ga.bias = i + 1 == c->h ? c->w->b_o : NULL;
        ga.acc = i != 0;
        ga.tail = f->tail; /* the last tile's */
        ga.bf = MHA__BF(c);
        mha__gemm(&ga);
    }
}

/* count tasks of the fast path (forward and decoding) through the caller's
   parallel-for, or here, in order. */
MHA__PRIVATE void mha__par(const mha__ctx *c, mha_task task, void *arg, size_t count) {
    size_t k;
    if (count == 0) return;
    if (c->pfor)
        c->pfor(c->user, task, arg, (int32_t)count);
    else
        for (k = 0; k < count; ++k) task(arg, (int32_t)k);
}

/* 1. project (fast), pass (b, g). */
MHA__PRIVATE void mha__fast_project(const mha__ctx *c, size_t b, size_t g) {
    mha__fast *f = mha__fast_state(c);
    size_t k, j;
    if (b == 0 && g == 0) {
        mha__fast_layout(f, c, (float *)(void *)((unsigned char *)f + MHA__FAST_SELF));
        if (MHA__ROPE(c)) mha__par(c, mha__fast_angles, f, (c->m + c->n + MHA__KVB - 1) / MHA__KVB);
    }
    f->b = b;
    f->g = g;
    f->wk = f->packed ? f->packed + g * f->per_g : f->pw;
    f->wq = f->packed ? f->packed + c->kv * f->per_g + g * c->grp * f->per_i : f->pw + f->per_g;
    if (c->head != MHA__CORE && !f->packed) { /* the pass's weights, as mha_pack_weights lays them out */
        mha__pack_kv(c, g, f->pw);
        for (k = 0; k < c->grp; ++k) mha__pack_qo(c, g * c->grp + k, f->pw + f->per_g + k * f->per_i);
    }
    for (k = 0; k < f->pvr / MHA__NR; ++k) /* V's padding rows m .. mr-1 */
        for (j = c->m * MHA__NR; j < f->mr * MHA__NR; ++j) f->vt[k * f->mr * MHA__NR + j] = 0.0f;
    mha__par(c, mha__fast_kvq, f, MHA__KV_TASKS(c) + (c->head != MHA__CORE ? f->tiles : 0));
    { /* inf * 0 and NaN * 0 are NaN: one test at the end; and the largest |v| */
        mha__v z = mha__vset(0.0f), acc = z, big = z, x;
        for (j = 0; j < f->mr * f->pvr; j += MHA__VL) {
            x = mha__vload(f->vt + j);
            acc = mha__vfma(x, z, acc);
            big = mha__vmax(big, mha__vmax(x, mha__vsub(z, x)));
        }
        /* sum_j e^(s_j - max) v_j, before the division by the sum, can reach m max |v|: with
           |v| >= 2^64 V is held times 2^-64 (exact but for values below 2^-62, whose share is
           below any tolerance), so that a finite result never overflows on the way */
        f->vscale = mha__vbad(acc) ? 0.0f : 1.0f;
        if (f->vscale != 0.0f && mha__vhmax(big) >= 18446744073709551616.0f) {
            f->vscale = 18446744073709551616.0f;
            mha__vscale(f->vt, f->mr * f->pvr, 1.0f / f->vscale);
        }
    }
#if MHA__BFDP
    if (f->vb) mha__par(c, mha__fast_vbf, f, (f->mr + MHA__KVB - 1) / MHA__KVB);
#endif
    if (MHA__ADDITIVE(c)) mha__par(c, mha__fast_akt, f, c->grp);
    MHA__CLEAN();
}

/* 2. attend (fast), pass (b, g): every (head, tile) item. */
MHA__PRIVATE void mha__fast_attend(const mha__ctx *c, size_t b, size_t g) {
    mha__fast *f = mha__fast_state(c);
    size_t e;
    (void)b;
    (void)g;
    if (c->pfor)
        mha__par(c, mha__fast_items, f, f->tasks);
    else /* one thread: every item in one slot, which stays in cache */
        for (e = 0; e < f->items; ++e) mha__fast_tile(f, e, f->slot);
    MHA__CLEAN();
}

/* 3. output (fast), pass (b, g): every tile of rows (mha_attend: none, its
   heads' outputs are its result). */
MHA__PRIVATE void mha__fast_output(const mha__ctx *c, size_t b, size_t g) {
    mha__fast *f = mha__fast_state(c);
    (void)b;
    (void)g;
    if (c->head == MHA__CORE) return;
    mha__par(c, mha__fast_o, f, f->tiles);
    MHA__CLEAN();
}

/* ---- fast decoding (MHA_FAST) ----------------------------------------------
   mha_decode on the fast path, dot scoring (additive scoring, and a batch so
   large that a task count passes INT32_MAX, decode on the reference path).
   A step reads every cached key and value once and every weight once, so
   it is bound by memory bandwidth: the new tokens'
   projections are GEMMs over the packed weights (one row at a time when
   t < MR), and the cache is read once per kv head for all of its query
   heads (GQA: the group's rows together). The slots in use are cut into
   chunks of MHA__DCH (split-KV): each (batch entry, kv head, chunk) is one
   item of work that leaves its rows' max, sum and unnormalised output,
   merged in chunk order afterwards, so the result is the same, bit for bit,
   for any parallel_for. A row whose result is not finite (a value that is
   not, or an overflow on the way) is computed again by the reference's
   rules (mha__pool), so it matches the reference path. */
#ifndef MHA__DCH /* slots per chunk of the split-KV step (the tests also build with fewer) */
#define MHA__DCH ((size_t)1024)
#endif
#define MHA__V4 ((size_t)4 * MHA__VL) /* the columns of mha__dec_values4 */
#define MHA__DRB ((size_t)4)   /* query rows per block of a chunk */

typedef struct mha__dec {
    const mha__ctx *c;
    const float *packed;      /* w->packed's panels, or NULL: each head is packed into pbuf in turn */
    float *pbuf;              /* [per_g + per_i] */
    int64_t in_pbuf[2];       /* the kv head (-1 - g; 0: none) and the head (-1: none) whose panels pbuf holds */
    size_t per_g, per_i, pkr, pqr;
    size_t rows;              /* query rows per kv head: grp t, row r = (i - g grp) t + token */
    size_t chunks, items;     /* chunks per (b, g) (of the capacity); items = batch kv chunks */
    size_t tasks, pvs;        /* tasks of the split-KV step (scratch slots); p_v + 2 floats a row's result */
    float *q;                 /* [batch][kv][rows][p_q]: projected queries */
    float *res;               /* [items][rows][p_v + 2]: a chunk's output, then its max and sum */
    float *cat;               /* [batch][t][h p_v]: the heads' outputs */
    float *scr;               /* [tasks][DRB][DCH]: a block's scores and weights (and then [capacity]:
                                 the scores of a row computed again) */
    float *mc;                /* [batch][kv][p_v]: the merge's compensation */
    float *stage;             /* [batch][kv][t][p_k + p_v]: a typed cache's new keys and values before
                                 they are rounded into it (t = max(n, m)) */
    int kt, vt;               /* the element types of the cache's keys and values */
    int gemv;                 /* 16-bit weights and few rows: the projections read W_q .. W_o as they
                                 are (mha__gemv16), not packed panels */
} mha__dec;

/* Bytes of the fast decode's workspace (SIZE_MAX on overflow), and with ws
   given its parts. */
MHA__PRIVATE size_t mha__fast_decode_layout(mha__dec *f, const mha__ctx *c, float *ws) {
    size_t sz[7];
    float **ptr[7];
    f->c = c;
    f->pkr = MHA__UP(c->pk, MHA__NR);
    f->pqr = MHA__UP(c->pq, MHA__NR);
    mha__packed_bytes(c, &f->per_g, &f->per_i);
    f->rows = mha__mul(c->grp, c->n);
    f->chunks = (c->ms + MHA__DCH - 1) / MHA__DCH;
    f->items = mha__mul(mha__mul(c->batch, c->kv), f->chunks);
    f->tasks = f->items < MHA__SLOTS ? f->items : MHA__SLOTS;
    f->pvs = c->pv + 2;
    sz[0] = mha__add(f->per_g, f->per_i);
    sz[1] = mha__mul(mha__mul(mha__mul(c->batch, c->kv), f->rows), c->pq);
    sz[2] = mha__mul(mha__mul(f->items, f->rows), f->pvs);
    sz[3] = mha__mul(mha__mul(c->batch, c->n), mha__mul(c->h, c->pv));
    sz[4] = mha__mul(f->tasks, MHA__DRB * MHA__DCH);
    if (sz[4] < c->ms) sz[4] = c->ms; /* also the scores of a row computed again */
    sz[5] = mha__mul(mha__mul(c->batch, c->kv), c->pv);
    sz[6] = mha__mul(mha__mul(mha__mul(c->batch, c->kv), c->n > c->m ? c->n : c->m), mha__add(c->pk, c->pv));
    /* (t rows: also without keys, so that every call of t tokens needs what
       mha_decode_workspace_size says, no less) */
    ptr[0] = &f->pbuf; ptr[1] = &f->q; ptr[2] = &f->res; ptr[3] = &f->cat; ptr[4] = &f->scr; ptr[5] = &f->mc;
    ptr[6] = &f->stage;
    return mha__parts_at(ws, sz, ptr, 7);
}

/* Whether the fast decode takes a call: dot scoring, and task counts that
   the parallel-for's int32_t index holds (else the reference path decodes). */
MHA__PRIVATE int mha__dec_fits(const mha__ctx *c) {
    size_t lim = (size_t)INT32_MAX, panels = (c->po + MHA__NR - 1) / MHA__NR;
    return !MHA__ADDITIVE(c) && mha__mul(c->batch, c->kv + c->h) <= lim && mha__mul(c->batch, panels) <= lim;
}

/* The packed panels of W_k^(g), W_v^(g) (head -1 - g) or W_q^(i), W_o's
   block i (head i): w->packed's, or packed into pbuf (unless it holds them
   already; without packed weights the steps run on one thread, in head
   order). */
MHA__PRIVATE const float *mha__dec_panels(mha__dec *f, int64_t head) {
    const mha__ctx *c = f->c;
    if (head < 0) {
        size_t g = (size_t)(-1 - head);
        if (f->packed) return f->packed + g * f->per_g;
        if (f->in_pbuf[0] != head) mha__pack_kv(c, g, f->pbuf);
        f->in_pbuf[0] = head;
        return f->pbuf;
    }
    if (f->packed) return f->packed + c->kv * f->per_g + (size_t)head * f->per_i;
    if (f->in_pbuf[1] != head) mha__pack_qo(c, (size_t)head, f->pbuf + f->per_g);
    f->in_pbuf[1] = head;
    return f->pbuf + f->per_g;
}

#define MHA__GEMV_ROWS 8 /* 16-bit weights, at most this many new tokens: mha__gemv16, else packed panels */
#if !MHA_NO_EXTRAS
/* y[r][o] = x[r] . W[o] + bias[o] (bias NULL: 0) for r < rows, o < cols,
   with x [rows][k] (row stride ldx) and W [cols][k] row-major, 16-bit
   elements of type: a decoding step's projections with 16-bit weights read
   each weight once, as it is. Four rows of W at a time, against each row of
   x in turn (the four stay in cache); k in blocks of KC as the GEMMs block
   it (each lane's block sum added to the lane's total, the lanes summed at
   the end, a k that is not a multiple of VL finished one at a time), the
   bias last. */
MHA__PRIVATE MHA__INLINE void mha__gemv16_t(size_t rows, size_t cols, size_t k, const float *x, size_t ldx,
                                            const uint16_t *W, int type, float *y, size_t ldy, const float *bias) {
    size_t o, r, p, pe, l, oc, kv = k / MHA__VL * MHA__VL;
    float t4[4];
    for (o = 0; o < cols; o += 4) {
        const uint16_t *w[4];
        oc = cols - o < 4 ? cols - o : 4;
        for (l = 0; l < 4; ++l) w[l] = W + (o + (l < oc ? l : oc - 1)) * k; /* past the last: it again */
        for (r = 0; r < rows; ++r) {
            const float *xr = x + r * ldx;
            mha__v s0 = mha__vset(0.0f), s1 = s0, s2 = s0, s3 = s0;
            for (p = 0; p < kv; p = pe) { /* blocks of KC */
                mha__v a0 = mha__vset(0.0f), a1 = a0, a2 = a0, a3 = a0, xv;
                for (pe = kv - p < MHA__KC ? kv : p + MHA__KC; p < pe; p += MHA__VL) {
                    xv = mha__vload(xr + p);
                    a0 = mha__vfma(xv, mha__vload16(w[0] + p, type), a0);
                    a1 = mha__vfma(xv, mha__vload16(w[1] + p, type), a1);
                    a2 = mha__vfma(xv, mha__vload16(w[2] + p, type), a2);
                    a3 = mha__vfma(xv, mha__vload16(w[3] + p, type), a3);
                }
                s0 = mha__vadd(s0, a0);
                s1 = mha__vadd(s1, a1);
                s2 = mha__vadd(s2, a2);
                s3 = mha__vadd(s3, a3);
            }
            mha__vhsum4(s0, s1, s2, s3, t4);
            for (p = kv; p < k; ++p)
                for (l = 0; l < 4; ++l) t4[l] += xr[p] * mha__elt_f32(w[l], type, p);
            for (l = 0; l < oc; ++l) y[r * ldy + o + l] = t4[l] + (bias ? bias[o + l] : 0.0f);
        }
    }
}
MHA__PRIVATE void mha__gemv16(size_t rows, size_t cols, size_t k, const float *x, size_t ldx, const void *W,
                              int type, float *y, size_t ldy, const float *bias) {
    if (type == MHA_F16)
        mha__gemv16_t(rows, cols, k, x, ldx, (const uint16_t *)W, MHA_F16, y, ldy, bias);
    else
        mha__gemv16_t(rows, cols, k, x, ldx, (const uint16_t *)W, MHA_BF16, y, ldy, bias);
}
#else
#define mha__gemv16(rows, cols, k, x, ldx, W, type, y, ldy, bias) ((void)(x), (void)(W), (void)(y), (void)(bias))
#endif

/* y [rows][p] (row stride ldy) = x [rows][d] W^T + bias, W the rows
   o0 .. o0+p-1 of the weight matrix `which` (MHA__PROJ_Q .. MHA__PROJ_O):
   by mha__gemv16 (f->gemv), else by a GEMM on its packed panels. */
MHA__PRIVATE void mha__dec_project(const mha__dec *f, int which, size_t o0, size_t p, size_t rows, const float *x,
                                   size_t ldx, const float *panels, float *y, size_t ldy) {
    const mha__ctx *c = f->c;
    const unsigned char *pr = mha__proj[which];
    const float *b = *(const float *const *)(const void *)((const unsigned char *)c->w + pr[1]);
    size_t d = MHA__SIZE(c, pr[2]) * (which == MHA__PROJ_O ? c->h : 1);
    mha__gemm_args g;
    if (!MHA_NO_EXTRAS && f->gemv) {
        const void *W = *(const void *const *)(const void *)((const unsigned char *)c->w + pr[0]);
        mha__gemv16(rows, p, d, x, ldx, mha__elt(W, MHA__WTYPE(c), o0 * d), MHA__WTYPE(c), y, ldy, b ? b + o0 : NULL);
        return;
    }
    g = mha__mm(rows, p, d, x, ldx, panels, y, ldy);
    g.bias = b ? b + o0 : NULL;
    g.rows1 = 1;
    g.bf = MHA__BF(c);
    mha__gemm(&g);
}

/* Task (g, b) of the append step: the t new keys and values of batch entry
   b, kv head g, projected straight into their slots (two runs where the
   ring wraps), or for a typed cache into the stage, then rounded into
   them. */
MHA__PRIVATE void mha__dec_kv(void *arg, int32_t task) {
    mha__dec *f = (mha__dec *)arg;
    const mha__ctx *c = f->c;
    mha_cache *cache = c->cache;
    size_t b = (size_t)task % c->batch, g = (size_t)task / c->batch, j = 0, slot, run, k;
    const float *wk = f->gemv ? NULL : mha__dec_panels(f, -1 - (int64_t)g), *wv = wk ? wk + f->pkr * c->dk : NULL;
    while (j < c->m) {
        float *kd, *vd;
        slot = (size_t)cache->length[b] + j;
        if (cache->window) slot = mha__pos_slot(slot, MHA__KEPT(cache), c->ms);
        run = c->ms - slot < c->m - j ? c->ms - slot : c->m - j;
        kd = (float *)cache->k + ((b * c->kv + g) * c->ms + slot) * c->pk;
        vd = (float *)cache->v + ((b * c->kv + g) * c->ms + slot) * c->pv;
        if (f->kt) kd = f->stage + ((b * c->kv + g) * c->m + j) * (c->pk + c->pv);
        if (f->vt) vd = f->stage + ((b * c->kv + g) * c->m + j) * (c->pk + c->pv) + run * c->pk;
        mha__dec_project(f, MHA__PROJ_K, g * c->pk, c->pk, run, c->keys + (b * c->m + j) * c->dk, c->dk, wk, kd, c->pk);
        mha__dec_project(f, MHA__PROJ_V, g * c->pv, c->pv, run, c->values + (b * c->m + j) * c->dv, c->dv, wv, vd,
                         c->pv);
        for (k = 0; k < run && MHA__ROPE(c); ++k) /* RoPE at the key's position */
            mha__rope(c, kd + k * c->pk, 1, 0, (int64_t)cache->length[b] + (int64_t)MHA__DRAFT(c, b, j + k), NULL);
        if (!MHA_NO_EXTRAS && f->kt)
            mha__elt_store((void *)mha__row(cache->k, f->kt, c->pk, (b * c->kv + g) * c->ms + slot), f->kt, kd, c->pk,
                           run);
        if (!MHA_NO_EXTRAS && f->vt)
            mha__elt_store((void *)mha__row(cache->v, f->vt, c->pv, (b * c->kv + g) * c->ms + slot), f->vt, vd, c->pv,
                           run);
        j += run;
    }
}

/* Task (i, b) of the query step: q_i of the t new queries of batch entry b. */
MHA__PRIVATE void mha__dec_q(void *arg, int32_t task) {
    mha__dec *f = (mha__dec *)arg;
    const mha__ctx *c = f->c;
    size_t b = (size_t)task % c->batch, i = (size_t)task / c->batch, g = i / c->grp;
    float *q = f->q + ((b * c->kv + g) * f->rows + (i - g * c->grp) * c->n) * c->pq;
    size_t t;
    mha__dec_project(f, MHA__PROJ_Q, i * c->pq, c->pq, c->n, c->queries + b * c->n * c->dq, c->dq,
                     f->gemv ? NULL : mha__dec_panels(f, (int64_t)i), q, c->pq);
    for (t = 0; t < c->n && MHA__ROPE(c); ++t) /* new query t at position length + t */
        mha__rope(c, q + t * c->pq, 1, 0, (int64_t)c->cache->length[b] + (int64_t)MHA__DRAFT(c, b, t), NULL);
}

/* Task k of the projection step with packed weights: the append step's
   tasks (when keys are given), then the query step's. */
MHA__PRIVATE void mha__dec_proj(void *arg, int32_t task) {
    const mha__dec *f = (const mha__dec *)arg;
    int32_t kv = f->c->keys ? (int32_t)(f->c->batch * f->c->kv) : 0;
    if (task < kv)
        mha__dec_kv(arg, task);
    else
        mha__dec_q(arg, task - kv);
}

/* x[j .. j+4) of one row q (mha__dec_scores with nr 1): four keys at a time, for
   16-bit and block keys of one whole block of KC (the float keys' loads are
   not the bottleneck there). */
MHA__PRIVATE MHA__INLINE void mha__dec_scores_1x4(const mha__ctx *c, const float *q, const void *K, int ct, size_t j,
                                                  float *x) {
    const void *k0 = mha__row(K, ct, c->pk, j), *k1 = mha__row(K, ct, c->pk, j + 1);
    const void *k2 = mha__row(K, ct, c->pk, j + 2), *k3 = mha__row(K, ct, c->pk, j + 3);
    mha__v a0 = mha__vset(0.0f), a1 = a0, a2 = a0, a3 = a0, qv;
    float u4[4];
    size_t pb, pp;
    for (pb = 0; pb < c->pk; pb += MHA__SEG(ct, c->pk)) {
        const mha__blk b0 = mha__blk_get(k0, ct, pb), b1 = mha__blk_get(k1, ct, pb);
        const mha__blk b2 = mha__blk_get(k2, ct, pb), b3 = mha__blk_get(k3, ct, pb);
        for (pp = pb; pp < c->pk && pp < pb + MHA__SEG(ct, c->pk); pp += MHA__VL) {
            qv = mha__vload(q + pp);
            a0 = mha__vfma(qv, MHA__KV(k0, b0, ct, pp, pb), a0);
            a1 = mha__vfma(qv, MHA__KV(k1, b1, ct, pp, pb), a1);
            a2 = mha__vfma(qv, MHA__KV(k2, b2, ct, pp, pb), a2);
            a3 = mha__vfma(qv, MHA__KV(k3, b3, ct, pp, pb), a3);
        }
    }
    mha__vhsum4(a0, a1, a2, a3, u4);
    for (pp = 0; pp < 4; ++pp) x[j + pp] = c->scale * (0.0f + u4[pp]);
}

/* The scores of nr (1 or 4, a constant where it is inlined) query rows
   q0..q3 (p_q floats each) against the keys of slots j0 .. j0+cl-1 (rows of
   p_k at K), times scale, into x[r][j] (row stride DCH): p_k summed in
   blocks of KC as the GEMMs sum, the dot products of a key with the rows at
   once (the key's vectors loaded once; keys of a 16-bit or block type two
   at a time, sharing the query rows' loads, or with one row four at a time,
   one reduction for the four; a float cache gains from neither: reading two
   or four float rows side by side slowed its step by a third), each sum
   reduced by mha__vhsum4 in the same order, so that a row gets the same
   bits whichever loop and nr computed it (where float arithmetic is not
   evaluated wider: FLT_EVAL_METHOD 0). A block type's scale and address
   once a block (MHA__SEG). The keys have element type ct (a constant where
   it is inlined). */
#define MHA__DEC_ROWS(nr, X) X(0) if ((nr) > 1) { X(1) X(2) X(3) }
MHA__PRIVATE MHA__INLINE void mha__dec_scores(const mha__ctx *c, const float *const *q, const void *K, int ct,
                                              size_t cl, float *x, int nr) {
    size_t j = 0, p, pe, pp, pb;
    float s4[4], t4[4], u4[4], w4[4];
    const int whole = c->pk % MHA__VL == 0 && c->pk <= MHA__KC; /* one block of KC, no tail */
    for (; nr == 1 && ct != MHA_F32 && whole && j + 3 < cl; j += 4) mha__dec_scores_1x4(c, q[0], K, ct, j, x);
    for (; nr > 1 && ct != MHA_F32 && whole && j + 1 < cl; j += 2) {
        const void *k = mha__row(K, ct, c->pk, j), *k1 = mha__row(K, ct, c->pk, j + 1);
        mha__v a0 = mha__vset(0.0f), a1 = a0, a2 = a0, a3 = a0, b0 = a0, b1 = a0, b2 = a0, b3 = a0, kv, kw, qv;
        for (pb = 0; pb < c->pk; pb += MHA__SEG(ct, c->pk)) {
            const mha__blk kb = mha__blk_get(k, ct, pb), kb1 = mha__blk_get(k1, ct, pb);
            for (pp = pb; pp < c->pk && pp < pb + MHA__SEG(ct, c->pk); pp += MHA__VL) {
                kv = MHA__KV(k, kb, ct, pp, pb);
                kw = MHA__KV(k1, kb1, ct, pp, pb);
#define MHA__DEC_FMA2(r)                                                                                             \
    qv = mha__vload(q[r] + pp);                                                                                      \
    a##r = mha__vfma(qv, kv, a##r);                                                                                  \
    b##r = mha__vfma(qv, kw, b##r);
                MHA__DEC_FMA2(0) MHA__DEC_FMA2(1) MHA__DEC_FMA2(2) MHA__DEC_FMA2(3)
#undef MHA__DEC_FMA2
            }
        }
        mha__vhsum4(a0, a1, a2, a3, u4);
        mha__vhsum4(b0, b1, b2, b3, w4);
        for (pp = 0; pp < 4; ++pp) { /* row pp's two scores (0 + s: the one-key loop's sum) */
            x[pp * MHA__DCH + j] = c->scale * (0.0f + u4[pp]);
            x[pp * MHA__DCH + j + 1] = c->scale * (0.0f + w4[pp]);
        }
    }
    for (; j < cl; ++j) {
        const void *k = mha__row(K, ct, c->pk, j);
        s4[0] = s4[1] = s4[2] = s4[3] = 0.0f;
        for (p = 0; p < c->pk; p = pe) { /* blocks of KC */
            mha__v a0 = mha__vset(0.0f), a1 = a0, a2 = a0, a3 = a0, kv;
            pe = c->pk - p < MHA__KC ? c->pk : p + MHA__KC;
            for (pb = p, pp = p; pp + MHA__VL <= pe; pb += MHA__SEG(ct, c->pk)) {
                const mha__blk kb = mha__blk_get(k, ct, pb);
                for (; pp + MHA__VL <= pe && pp < pb + MHA__SEG(ct, c->pk); pp += MHA__VL) {
                    kv = MHA__KV(k, kb, ct, pp, pb);
#define MHA__DEC_FMA1(r) a##r = mha__vfma(mha__vload(q[r] + pp), kv, a##r);
                    MHA__DEC_ROWS(nr, MHA__DEC_FMA1)
#undef MHA__DEC_FMA1
                }
            }
            mha__vhsum4(a0, a1, a2, a3, t4);
            for (; pp < pe; ++pp) { /* a p_k that is not a multiple of VL */
                const float kp = mha__elt_v(k, ct, pp);
                t4[0] += q[0][pp] * kp;
                t4[1] += q[1][pp] * kp;
                t4[2] += q[2][pp] * kp;
                t4[3] += q[3][pp] * kp;
            }
            s4[0] += t4[0];
            s4[1] += t4[1];
            s4[2] += t4[2];
            s4[3] += t4[3];
        }
        x[j] = c->scale * s4[0];
        if (nr == 1) continue;
        x[MHA__DCH + j] = c->scale * s4[1];
        x[2 * MHA__DCH + j] = c->scale * s4[2];
        x[3 * MHA__DCH + j] = c->scale * s4[3];
    }
}

/* o[r][a0 .. a0+4VL) for the nr rows r (1 or 4): sum_j x[r][j] v_j over
   slots 0 .. cl-1 (rows of p_v at V, a0 + 4 VL <= p_v), in blocks of 32
   slots summed from zero and added with compensation (as mha__add_comp,
   lane by lane), each slot's four vectors loaded once. o rows have stride
   os. */
#define MHA__DEC_A(X) X(0) X(1) X(2) X(3)
#define MHA__DEC_ZERO(a) b0##a = b1##a = b2##a = b3##a = mha__vset(0.0f);
#define MHA__DEC_FMA(a)                                                                                              \
    v = a0 % MHA__QB + (size_t)(a) * MHA__VL < MHA__QB ? MHA__KV(vj, bA, ct, a0 + (size_t)(a) * MHA__VL, pA)          \
                                                       : MHA__KV(vj, bB, ct, a0 + (size_t)(a) * MHA__VL, pA + MHA__QB); \
    b0##a = mha__vfma(w0, v, b0##a);                                                                                 \
    if (nr > 1) {                                                                                                    \
        b1##a = mha__vfma(w1, v, b1##a);                                                                             \
        b2##a = mha__vfma(w2, v, b2##a);                                                                             \
        b3##a = mha__vfma(w3, v, b3##a);                                                                             \
    }
#define MHA__DEC_ADD1(r, a)                                                                                          \
    y = mha__vsub(b##r##a, mha__vload(cp + (size_t)(r) * MHA__V4 + (size_t)(a) * MHA__VL));                          \
    t = mha__vadd(mha__vload(sp + (size_t)(r) * MHA__V4 + (size_t)(a) * MHA__VL), y);                                \
    mha__vstore(cp + (size_t)(r) * MHA__V4 + (size_t)(a) * MHA__VL,                                                  \
                mha__vsub(mha__vsub(t, mha__vload(sp + (size_t)(r) * MHA__V4 + (size_t)(a) * MHA__VL)), y));         \
    mha__vstore(sp + (size_t)(r) * MHA__V4 + (size_t)(a) * MHA__VL, t);
#define MHA__DEC_ADD(a)                                                                                              \
    MHA__DEC_ADD1(0, a) if (nr > 1) { MHA__DEC_ADD1(1, a) MHA__DEC_ADD1(2, a) MHA__DEC_ADD1(3, a) }
MHA__PRIVATE MHA__INLINE void mha__dec_values4(size_t pv, const float *x, const void *V, int ct, size_t cl, size_t a0,
                                               float *o, size_t os, int nr) {
    float sp[4 * MHA__V4], cp[4 * MHA__V4]; /* [row][4 VL]: the sums and their compensation */
    const size_t pA = a0 / MHA__QB * MHA__QB; /* the first block's start */
    size_t j, jb, r, l;
    mha__v b00, b01, b02, b03, b10, b11, b12, b13, b20, b21, b22, b23, b30, b31, b32, b33, v, y, t;
    for (l = 0; l < 4 * MHA__V4; ++l) sp[l] = cp[l] = 0.0f;
    for (j = 0; j < cl; j = jb) {
        jb = cl - j < 32 ? cl : j + 32;
        MHA__DEC_A(MHA__DEC_ZERO)
        for (; j < jb; ++j) {
            const void *vj = mha__row(V, ct, pv, j);
            /* a block type: the blocks of columns a0 .. a0+4VL-1 (two where 4 VL > 32) */
            const mha__blk bA = mha__blk_get(vj, ct, pA), bB = MHA__V4 > MHA__QB ? mha__blk_get(vj, ct, pA + MHA__QB) : bA;
            mha__v w0 = mha__vset(x[j]), w1 = w0, w2 = w0, w3 = w0;
            if (nr > 1) {
                w1 = mha__vset(x[MHA__DCH + j]);
                w2 = mha__vset(x[2 * MHA__DCH + j]);
                w3 = mha__vset(x[3 * MHA__DCH + j]);
            }
            MHA__DEC_A(MHA__DEC_FMA)
        }
        MHA__DEC_A(MHA__DEC_ADD)
    }
    for (r = 0; r < (size_t)nr; ++r)
        for (l = 0; l < MHA__V4; ++l) o[r * os + l] = sp[r * MHA__V4 + l];
}

/* The element-type leaves of a split-KV item, one copy a type (the type a
   constant in it): mha__dec_keys, the scores st[r * MHA__DCH + j] of the
   rows q[0 .. nr) against the chunk's cl keys K of type kt (mha__dec_scores;
   nr 1: one row, no GQA and one new token, its FMAs alone); mha__dec_vals,
   the weighted sums of the chunk's values V of type vt by st into rows 0 ..
   rb of res (rows of pvs): p_v in groups of 4 VL (mha__dec_values4), the
   columns past the last whole group one vector at a time, from a copy. */
MHA__PRIVATE MHA__INLINE void mha__dec_keys_t(const mha__ctx *c, const float *const *q, const void *K, int kt, size_t cl,
                                              float *st, size_t nr) {
    if (nr == 1)
        mha__dec_scores(c, q, K, kt, cl, st, 1);
    else
        mha__dec_scores(c, q, K, kt, cl, st, 4);
}
MHA__PRIVATE void mha__dec_keys(const mha__ctx *c, const float *const *q, const void *K, int kt, size_t cl, float *st,
                                size_t nr) {
    if (MHA_NO_EXTRAS || kt == MHA_F32)
        mha__dec_keys_t(c, q, K, MHA_F32, cl, st, nr);
    else if (kt == MHA_F16)
        mha__dec_keys_t(c, q, K, MHA_F16, cl, st, nr);
    else if (kt == MHA_BF16)
        mha__dec_keys_t(c, q, K, MHA_BF16, cl, st, nr);
    else if (kt == MHA_Q8)
        mha__dec_keys_t(c, q, K, MHA_Q8, cl, st, nr);
    else
        mha__dec_keys_t(c, q, K, MHA_Q4, cl, st, nr);
}
MHA__PRIVATE MHA__INLINE void mha__dec_vals_t(size_t pv, const float *st, const void *V, int vt, size_t cl, float *res,
                                              size_t pvs, size_t rb) {
    float out4[4 * MHA__V4];
    const size_t whole = pv / (MHA__V4) * (MHA__V4);
    size_t a, r, l, j, jb;
    for (a = 0; a < whole; a += MHA__V4) {
        if (rb == 1)
            mha__dec_values4(pv, st, V, vt, cl, a, out4, MHA__V4, 1);
        else
            mha__dec_values4(pv, st, V, vt, cl, a, out4, MHA__V4, 4);
        for (r = 0; r < rb; ++r)
            for (l = 0; l < MHA__V4; ++l) res[r * pvs + a + l] = out4[r * MHA__V4 + l];
    }
    for (a = whole; a < pv; a += MHA__VL) { /* the rest, a vector (or less) at a time */
        const size_t lanes = pv - a < MHA__VL ? pv - a : MHA__VL;
        for (r = 0; r < rb; ++r) {
            mha__v sum = mha__vset(0.0f), comp = sum, blk, y, t;
            float buf[MHA__VL];
            for (j = 0; j < cl; j = jb) {
                jb = cl - j < 32 ? cl : j + 32;
                for (blk = mha__vset(0.0f); j < jb; ++j) {
                    const void *vj = mha__row(V, vt, pv, j);
                    mha__v vv;
                    if (lanes < MHA__VL) { /* the row's last columns: no read past it */
                        for (l = 0; l < MHA__VL; ++l) buf[l] = l < lanes ? mha__elt_v(vj, vt, a + l) : 0.0f;
                        vv = mha__vload(buf);
                    } else {
                        vv = mha__vload_t(vj, vt, a);
                    }
                    blk = mha__vfma(mha__vset(st[r * MHA__DCH + j]), vv, blk);
                }
                y = mha__vsub(blk, comp);
                t = mha__vadd(sum, y);
                comp = mha__vsub(mha__vsub(t, sum), y);
                sum = t;
            }
            mha__vstore(buf, sum);
            for (l = 0; l < lanes; ++l) res[r * pvs + a + l] = buf[l];
        }
    }
}
MHA__PRIVATE void mha__dec_vals(size_t pv, const float *st, const void *V, int vt, size_t cl, float *res, size_t pvs,
                                size_t rb) {
    if (MHA_NO_EXTRAS || vt == MHA_F32)
        mha__dec_vals_t(pv, st, V, MHA_F32, cl, res, pvs, rb);
    else if (vt == MHA_F16)
        mha__dec_vals_t(pv, st, V, MHA_F16, cl, res, pvs, rb);
    else if (vt == MHA_BF16)
        mha__dec_vals_t(pv, st, V, MHA_BF16, cl, res, pvs, rb);
    else if (vt == MHA_Q8)
        mha__dec_vals_t(pv, st, V, MHA_Q8, cl, res, pvs, rb);
    else
        mha__dec_vals_t(pv, st, V, MHA_Q4, cl, res, pvs, rb);
}

/* Item `item` = (b, g, chunk) of the split-KV step, with the scratch st:
   for each row of kv head g, the chunk's max mx, sum l of e^(s - mx) and
   output o = sum e^(s - mx) v, into res. Rows four at a time (a block of
   fewer repeats its last row, whose results are not kept); scores by
   mha__dec_keys, weights by mha__softmax's rules, the weighted sums by
   mha__dec_vals. */
MHA__PRIVATE void mha__dec_item(const mha__dec *f, size_t item, float *st) {
    const float ninf = -(FLT_MAX * 2.0f);
    const mha__ctx *c = f->c;
    const int kt = f->kt, vt = f->vt;
    size_t b = item / (c->kv * f->chunks), g = item / f->chunks % c->kv, ch = item % f->chunks;
    size_t e = (size_t)c->cache->length[b] + c->m, used = e < c->ms ? e : c->ms, j0 = ch * MHA__DCH, cl, r0, rb;
    const void *K = mha__row(c->cache->k, kt, c->pk, (b * c->kv + g) * c->ms);
    const void *V = mha__row(c->cache->v, vt, c->pv, (b * c->kv + g) * c->ms);
    float *res = f->res + item * f->rows * f->pvs;
    size_t r, j, lo, hi;
    cl = j0 >= used ? 0 : used - j0 < MHA__DCH ? used - j0 : MHA__DCH;
    for (r0 = 0; r0 < f->rows; r0 += MHA__DRB) {
        const float *q[4];
        rb = f->rows - r0 < MHA__DRB ? f->rows - r0 : MHA__DRB;
        for (r = 0; r < 4; ++r) q[r] = f->q + ((b * c->kv + g) * f->rows + r0 + (r < rb ? r : rb - 1)) * c->pq;
        mha__dec_keys(c, q, mha__row(K, kt, c->pk, j0), kt, cl, st, rb);
        for (r = 0; r < rb; ++r) { /* the rule, the max and the weights of row r0 + r */
            float *x = st + r * MHA__DCH, *o = res + (r0 + r) * f->pvs, mx, sum;
            const float slope = MHA__SLOPE(c, g * c->grp + (r0 + r) / c->n);
            const size_t tr = (r0 + r) % c->n; /* the row's new token */
            mha__decode_sees(e, c->n, MHA__DRAFT(c, b, tr), (size_t)c->cache->window, !c->keys, &lo, &hi);
            /* (a tree: the old length's positions here, its drafts then) */
            mha__fast_ring_rules(c, x, j0, cl, e, lo, MHA__TREE(c) ? e - c->n : hi, (int64_t)hi - 1, slope);
            if (MHA__TREE(c)) mha__dec_tree(c, x, q[r], K, kt, j0, cl, b, tr, lo, slope);
            mx = mha__rowmax(x, MHA__UP(cl, MHA__VL), ninf);
            sum = mx == ninf ? 0.0f : mha__softmax(x, MHA__UP(cl, MHA__VL), mx);
            if (mx == ninf)
                for (j = 0; j < cl; ++j) x[j] = 0.0f;
            o[c->pv] = mx;
            o[c->pv + 1] = sum;
        }
        for (; r < 4; ++r) /* rows past the block: weight 0 */
            for (j = 0; j < cl; ++j) st[r * MHA__DCH + j] = 0.0f;
        mha__dec_vals(c->pv, st, mha__row(V, vt, c->pv, j0), vt, cl, res + r0 * f->pvs, f->pvs, rb);
    }
}

/* Task `slot` of the split-KV step: items slot, slot + tasks, ... */
MHA__PRIVATE void mha__dec_items(void *arg, int32_t slot) {
    const mha__dec *f = (const mha__dec *)arg;
    size_t it;
    for (it = (size_t)slot; it < f->items; it += f->tasks)
        mha__dec_item(f, it, f->scr + (size_t)slot * MHA__DRB * MHA__DCH);
}

/* Task (b, g) of the merge: each row's chunks merged in order (the
   largest max, each chunk's sum and output scaled to it, added with
   compensation) and divided by the sum, into cat (mha__dec_redo then takes
   the rows that are not finite). */
MHA__PRIVATE void mha__dec_merge(void *arg, int32_t task) {
    const mha__dec *f = (const mha__dec *)arg;
    const mha__ctx *c = f->c;
    const float ninf = -(FLT_MAX * 2.0f);
    size_t b = (size_t)task / c->kv, g = (size_t)task % c->kv, r, ch, a;
    const float *res = f->res + (b * c->kv + g) * f->chunks * f->rows * f->pvs;
    float *oc = f->mc + (b * c->kv + g) * c->pv;
    for (r = 0; r < f->rows; ++r) {
        size_t i = g * c->grp + r / c->n, tt = r % c->n;
        float *h = f->cat + ((b * c->n + tt) * c->h + i) * c->pv, mx = ninf, l = 0.0f, lc = 0.0f, sc;
        const float sink = !MHA_NO_EXTRAS && c->w->sinks ? c->w->sinks[i] : ninf; /* in the max, last in the sum */
        mx = sink;
        for (ch = 0; ch < f->chunks; ++ch) {
            float m = res[(ch * f->rows + r) * f->pvs + c->pv];
            if (m > mx || m != m) mx = m;
        }
        for (a = 0; a < c->pv; ++a) h[a] = oc[a] = 0.0f;
        if (mx == ninf) continue; /* nothing visible: 0 */
        for (ch = 0; ch < f->chunks; ++ch) {
            const float *o = res + (ch * f->rows + r) * f->pvs;
            sc = mha__weight(o[c->pv], mx);
            if (sc == 0.0f) continue;
            l = mha__add_comp(l, o[c->pv + 1] * sc, &lc);
            for (a = 0; a < c->pv; ++a) h[a] = mha__add_comp(h[a], o[a] * sc, oc + a);
        }
        if (!MHA_NO_EXTRAS) l = mha__add_comp(l, mha__weight(sink, mx), &lc);
        for (a = 0; a < c->pv; ++a) h[a] /= l;
    }
}

/* After the merge, on the calling thread: each row of batch entry b, kv
   head g whose result is not finite, computed again by the reference's
   kernel (mha__attend_cache's scores, then mha__pool: max, weights, sum,
   the skips). */
MHA__PRIVATE void mha__dec_redo(const mha__dec *f, size_t b, size_t g) {
    const mha__ctx *c = f->c;
    size_t e = (size_t)c->cache->length[b] + c->m, used = e < c->ms ? e : c->ms, r, a;
    for (r = 0; r < f->rows; ++r) {
        size_t i = g * c->grp + r / c->n, tt = r % c->n;
        float *h = f->cat + ((b * c->n + tt) * c->h + i) * c->pv;
        const float *q = f->q + ((b * c->kv + g) * f->rows + r) * c->pq;
        int bad = 0;
        for (a = 0; a < c->pv; ++a) bad |= !(h[a] - h[a] == 0.0f);
        if (!bad) continue;
        mha__pool(mha__attend_cache(c, b, tt, i, e, MHA__SLOPE(c, i), q, f->scr), used,
                  mha__row(c->cache->v, f->vt, c->pv, (b * c->kv + g) * c->ms), f->vt, c->pv, c->pv, h, NULL,
                  mha__row_sink(c, i, 0.0f, 0));
    }
}

/* out [t][p_o] of batch entry b, columns q0 .. q0+cols-1, += h_i W_o^(i)^T
   (= for head 0), + b_o with the last head. */
MHA__PRIVATE void mha__dec_out_head(mha__dec *f, size_t b, size_t i, size_t q0, size_t cols) {
    const mha__ctx *c = f->c;
    const float *wo = mha__dec_panels(f, (int64_t)i) + f->pqr * c->dq + q0 * c->pv;
    mha__gemm_args g = mha__mm(c->n, cols, c->pv, f->cat + b * c->n * c->h * c->pv + i * c->pv, c->h * c->pv, wo,
                               c->out + b * c->n * c->po + q0, c->po);
    g.bias = i + 1 == c->h && c->w->b_o ? c->w->b_o + q0 : NULL;
    g.acc = i != 0;
    g.rows1 = 1;
    g.bf = MHA__BF(c);
    mha__gemm(&g);
}

/* Task (b, q) of the output step with packed weights: out's columns of
   panel q (of NR) for batch entry b, summed over the heads in order. */
MHA__PRIVATE void mha__dec_out(void *arg, int32_t task) {
    mha__dec *f = (mha__dec *)arg;
    const mha__ctx *c = f->c;
    size_t panels = (c->po + MHA__NR - 1) / MHA__NR, b = (size_t)task / panels, q = (size_t)task % panels, i;
    if (f->gemv) { /* W_o's rows of the panel against every head's output at once */
        mha__dec_project(f, MHA__PROJ_O, q * MHA__NR, c->po - q * MHA__NR < MHA__NR ? c->po - q * MHA__NR : MHA__NR,
                         c->n, f->cat + b * c->n * c->h * c->pv, c->h * c->pv, NULL,
                         c->out + b * c->n * c->po + q * MHA__NR, c->po);
        return;
    }
    for (i = 0; i < c->h; ++i)
        mha__dec_out_head(f, b, i, q * MHA__NR, c->po - q * MHA__NR < MHA__NR ? c->po - q * MHA__NR : MHA__NR);
}

/* mha_decode on the fast path, once every check has passed: append,
   queries, split-KV attention, merge, output; then the lengths. Without
   packed weights the projections run here, head by head (one packing
   buffer), and only the attention goes to the parallel-for. */
MHA__PRIVATE void mha__fast_decode(mha__ctx *c, float *ws) {
    mha__dec f;
    size_t b, i, k, panels = (c->po + MHA__NR - 1) / MHA__NR;
    mha__rope_base(c);
    mha__fast_decode_layout(&f, c, ws);
    f.kt = MHA__KTYPE(c);
    f.vt = MHA__VTYPE(c);
    f.gemv = MHA__WTYPE(c) && (c->n > c->m ? c->n : c->m) <= MHA__GEMV_ROWS;
    f.packed = f.gemv ? NULL : mha__packed(c);
    f.in_pbuf[0] = 0; /* none: kv heads are -1 - g, heads i >= 0 */
    f.in_pbuf[1] = -1;
    if (f.packed || f.gemv) { /* 1, 2. the new keys and values into the cache, the new queries: one parallel-for */
        mha__par(c, mha__dec_proj, &f, (c->keys ? c->batch * c->kv : 0) + (c->n ? c->batch * c->h : 0));
    } else {
        for (k = 0; c->keys && k < c->batch * c->kv; ++k) mha__dec_kv(&f, (int32_t)k);
        for (k = 0; c->n && k < c->batch * c->h; ++k) mha__dec_q(&f, (int32_t)k);
    }
    if (c->n) {
        mha__par(c, mha__dec_items, &f, f.tasks);          /* 3. split-KV attention */
        mha__par(c, mha__dec_merge, &f, c->batch * c->kv); /* 4. the chunks merged */
        for (k = 0; k < c->batch * c->kv; ++k) mha__dec_redo(&f, k / c->kv, k % c->kv);
        if (f.packed || f.gemv) /* 5. W_o */
            mha__par(c, mha__dec_out, &f, c->batch * panels);
        else
            for (i = 0; i < c->h; ++i)
                for (b = 0; b < c->batch; ++b) mha__dec_out_head(&f, b, i, 0, c->po);
    }
    for (b = 0; b < c->batch && !MHA__TREE(c); ++b) c->cache->length[b] += (int32_t)c->m;
    MHA__CLEAN();
}

/* A checked decoding call kept in the workspace: when it takes the fast path, decoded here and 1
   returned; else 0, for the reference steps. The call state comes back to this frame first, so
   that the fast decode has the whole workspace for its parts. */
MHA__PRIVATE MHA__NOINLINE int mha__decode_fast(void *workspace) {
    mha__ctx c;
    if (!((const mha__ctx *)(const void *)mha__align(workspace))->fast) return 0;
    c = *(const mha__ctx *)(const void *)mha__align(workspace);
    mha__fast_decode(&c, mha__align(workspace));
    return 1;
}
#else
#define mha__decode_fast(workspace) 0
#endif /* MHA_FAST */

/* ---- the door: entries, the checks that need the call, the dispatcher ------ */

/* Workspace bytes of the call's path, SIZE_MAX on overflow. The fast path
   keeps the reference's overflow verdict too, so both paths answer a call
   alike. */
#if MHA_FAST
MHA__PRIVATE size_t mha__bytes(const mha__ctx *c) {
    size_t bytes = mha__layout(c, NULL);
    mha__fast f;
    if (!c->fast || bytes == SIZE_MAX) return bytes;
    if (c->cache) { /* (c->fast: mha__dec_fits, see mha__enter_cache) */
        mha__dec d;
        const size_t keep = MHA_WORKSPACE_ALIGN + sizeof(mha__ctx); /* MHA__KEEP's copy of the call state */
        bytes = mha__fast_decode_layout(&d, c, NULL);
        return bytes == SIZE_MAX || bytes >= keep ? bytes : keep;
    }
    /* the fast state and its parts follow the call state */
    return mha__add(mha__fast_layout(&f, c, NULL), MHA_WORKSPACE_STATE + MHA__FAST_SELF);
}
#else
#define mha__bytes(c) mha__layout(c, NULL)
#endif

/* The checks that every computing call shares, after its own (sizes, NULL
   pointers), in the order of the error table: MHA_ERR_OVERFLOW (bytes is
   SIZE_MAX: an array or the workspace; a keep mask), MHA_ERR_WORKSPACE,
   MHA_ERR_MASK (mha_head's valid length, valid_lens). MHA__RUN when the call
   is to compute, MHA_OK when there is nothing to compute (no query, and no
   cache to append to). The caller finds bytes (mha__bytes), so that the
   two frames are siblings on the stack. */
#define MHA__RUN 1
MHA__PRIVATE MHA__NOINLINE int mha__check(const mha__ctx *c, size_t bytes, size_t workspace_bytes,
                                          const void *workspace) {
    const mha_mask *mask = c->mask;
    size_t t;
    if (bytes == SIZE_MAX || (mask && mask->keep && mha__mul(mha__mul(c->batch, c->n), c->m) == SIZE_MAX))
        return MHA_ERR_OVERFLOW; /* keep has 1 byte per element */
    if (!workspace || workspace_bytes < bytes) return MHA_ERR_WORKSPACE;
    if (c->head >= 0 && (c->len < 0 || MHA__SZ(c->len) > c->m)) return MHA_ERR_MASK;
    if (mask && mask->valid_lens)
        for (t = 0; t < c->batch * (mask->valid_lens_per_query ? c->n : 1); ++t)
            if (mask->valid_lens[t] < 0 || MHA__SZ(mask->valid_lens[t]) > c->m) return MHA_ERR_MASK;
    return c->n == 0 && !c->cache ? MHA_OK : MHA__RUN;
}

/* The call state into the workspace for mha__compute (see mha__layout);
   returns MHA__RUN. */
#define MHA__KEEP_REF(c, workspace) \
    (mha__layout(c, (size_t *)(void *)((unsigned char *)mha__align(workspace) + sizeof *(c))), MHA__RUN)
#if MHA_FAST /* the fast stages keep their own parts: the state alone, copied as a struct */
#define MHA__KEEP(c, workspace) \
    ((c)->fast ? (*(mha__ctx *)(void *)mha__align(workspace) = *(c), MHA__RUN) : MHA__KEEP_REF(c, workspace))
#else
#define MHA__KEEP(c, workspace) MHA__KEEP_REF(c, workspace)
#endif

#if MHA_FAST
/* Multiply-adds of a forward pass (one batch entry and kv head) below which
   mha_forward_parallel keeps the whole call on the calling thread: each step
   of a pass is one call of the parallel-for, whose hand-off costs
   microseconds, more than such a step's work (measured with the pool of
   tests/two_threads.h, the best of 2000 calls: a pass of 163,840
   multiply-adds ran 4 % slower on two threads than on one, 757,760 1.13x
   faster, 1,310,720 1.6x faster). */
#ifndef MHA__PAR_MIN
#define MHA__PAR_MIN ((size_t)1 << 18)
#endif

/* A forward pass's multiply-adds, at most SIZE_MAX: the group's query and
   output projections, the kv head's key and value projections, the group's
   scores and weighted values. */
MHA__PRIVATE size_t mha__pass_work(const mha__ctx *c) {
    size_t q = mha__mul(c->n, mha__add(mha__mul(c->dq, c->pq), mha__mul(c->pv, c->po)));
    size_t kv = mha__mul(c->m, mha__add(mha__mul(c->dk, c->pk), mha__mul(c->dv, c->pv)));
    size_t att = mha__mul(mha__mul(c->n, c->m), mha__add(c->pq, c->pv));
    return mha__add(mha__mul(c->grp, mha__add(q, att)), kv);
}

/* The fast path's part of a call: the path, the parallel-for (none for a
   small forward call: MHA__PAR_MIN), and packed weights made for this shape
   (else MHA_ERR_SHAPE). */
MHA__PRIVATE mha_status mha__fast_call(mha__ctx *c, int fast, mha_parallel_for pfor, void *user) {
    c->fast = fast;
    c->pfor = c->cache || mha__pass_work(c) >= MHA__PAR_MIN ? pfor : NULL;
    c->user = user;
    return fast && c->w->packed && !mha__packed(c) ? MHA_ERR_SHAPE : MHA_OK;
}
#endif

/* The call's inputs and output into *c. */
MHA__PRIVATE void mha__io(mha__ctx *c, const float *queries, const float *keys, const float *values, float *out) {
    c->queries = queries;
    c->keys = keys;
    c->values = values;
    c->out = out;
}

/* mha_forward, its variants and mha_head up to the work: the sizes, then the
   checks in the order of the error table. head is -1 for mha_forward, else
   mha_head's head (INT32_MAX for a negative one) with its valid length len.
   The fast path runs here. For the reference path the call state goes to the
   workspace (MHA__KEEP) and MHA__RUN is returned: mha__compute then works
   from there, with no state left on the caller's stack. */
#if MHA_FAST
#define MHA__FAST_PARAMS , int fast, mha_parallel_for pfor, void *user
#define MHA__FAST_ARGS(fast, pfor, user) , fast, pfor, user
#else
#define MHA__FAST_PARAMS
#define MHA__FAST_ARGS(fast, pfor, user)
#endif
MHA__PRIVATE MHA__NOINLINE int mha__enter(const mha_shape *shape, const mha_weights *w, int32_t batch, int32_t n,
                                         int32_t m, const float *queries, const float *keys, const float *values,
                                         const mha_mask *mask, float *out, float *attn, void *workspace,
                                         size_t workspace_bytes, int32_t head, int32_t len MHA__FAST_PARAMS) {
    mha__ctx c;
    mha__why why; /* not read: the calls return the status alone */
    int st = mha__setup(&c, shape, w);
    if (st != MHA_OK) return st;
    if (batch < 0 || n < 0 || m < 0 || head >= (int32_t)c.h) return MHA_ERR_SHAPE;
    if (head >= 0 && (MHA__ROPE(&c) || MHA__ALIBI(&c))) return MHA_ERR_SHAPE; /* mha_head's query has no position */
    c.batch = MHA__SZ(batch);
    c.n = MHA__SZ(n);
    c.m = c.mp = c.ms = MHA__SZ(m);
    if ((st = mha__check_weights(shape, w, head < 0, &why)) != MHA_OK) return st;
    if (!queries || !keys || !values || !out) return MHA_ERR_NULL;
    c.head = head;
    c.len = len;
    c.mask = mask;
    mha__io(&c, queries, keys, values, out);
    c.attn = attn;
#if MHA_FAST
    if ((st = mha__fast_call(&c, fast, pfor, user)) != MHA_OK) return st;
#endif
    st = mha__check(&c, mha__bytes(&c), workspace_bytes, workspace);
    return st == MHA__RUN ? MHA__KEEP(&c, workspace) : st;
}

/* mha_attend up to the work: its inputs are rows of h p_q, kv p_k, kv p_v
   floats, its output rows h p_v, and only the additive weights are read. */
MHA__PRIVATE MHA__NOINLINE int mha__enter_core(const mha_shape *shape, const mha_weights *w, int32_t batch,
                                              int32_t n, int32_t m, const float *q, const float *k,
                                              const float *v, const mha_mask *mask, float *heads_out,
                                              float *attn, void *workspace, size_t workspace_bytes) {
    mha__ctx c;
    int st = mha__setup(&c, shape, w);
    if (st != MHA_OK || (st = mha__counts(&c, batch, n, m)) != MHA_OK) return st;
    if (!q || !k || !v || !heads_out || (MHA__ADDITIVE(&c) && (!w->a_q || !w->a_k || !w->a_v)))
        return MHA_ERR_NULL;
    c.dq = mha__mul(c.h, c.pq);
    c.dk = mha__mul(c.kv, c.pk);
    c.dv = mha__mul(c.kv, c.pv);
    c.po = mha__mul(c.h, c.pv);
    c.head = MHA__CORE;
    c.mask = mask;
    mha__io(&c, q, k, v, heads_out);
    c.attn = attn;
#if MHA_FAST
    c.fast = 1; /* one thread; the weights it reads have no packed form */
    c.pfor = NULL;
    c.user = NULL;
#endif
    st = mha__check(&c, mha__bytes(&c), workspace_bytes, workspace);
    if (st == MHA__RUN) { /* the weights it reads: identity projections (NULL), the additive ones */
        mha_weights *iw = (mha_weights *)(void *)((unsigned char *)mha__align(workspace) + MHA_WORKSPACE_STATE) - 1;
        iw->w_q = iw->w_k = iw->w_v = iw->w_o = NULL;
        iw->b_q = iw->b_k = iw->b_v = iw->b_o = NULL;
        iw->a_q = w->a_q;
        iw->a_k = w->a_k;
        iw->a_v = w->a_v;
        iw->packed = NULL;
        iw->sinks = w->sinks;
        iw->type = MHA_F32;
        c.w = iw;
        st = MHA__KEEP(&c, workspace);
    }
    return st;
}

/* Whether a cache's capacity, window and kept slots are bad for an append
   of m tokens: capacity < 1, window < 0; keep_first < 0, or > 0 without a
   window (or with MHA_NO_EXTRAS), >= window or >= capacity; a window and
   keep_first + window + m - 1 > capacity. The float and the int8 entries
   and mha_cache_row share it. */
MHA__PRIVATE MHA__INLINE int mha__ring_bad(const mha_cache *cache, size_t m) {
    const int32_t s = cache->keep_first, w = cache->window;
    const int32_t room = (int32_t)((uint32_t)cache->capacity - (uint32_t)s - (uint32_t)w); /* (read where
                                                                     0 <= s < capacity: then exact) */
    if (cache->capacity < 1 || w < 0) return 1;
    if (s && (MHA_NO_EXTRAS || s < 0 || s >= w || s >= cache->capacity)) return 1;
    return w && m && (room < 0 || m - 1 > (size_t)room);
}

/* Whether the cache's element types do not suit the entry: the float
   entries (q8 0) take keys of MHA_F32, MHA_F16, MHA_BF16, MHA_Q8 or MHA_Q4
   and value_type 0 or one of those but MHA_F32 (only float with additive
   scoring, f32only 1, or under MHA_NO_EXTRAS); the int8 ones (q8 1)
   MHA_I8 with value_type 0 or MHA_I8; the 16x8 ones (q8 2) MHA_I16 so. */
MHA__PRIVATE int mha__types_bad(const mha_cache *cache, int q8, int f32only) {
    const uint32_t k = (uint32_t)cache->type, v = (uint32_t)cache->value_type, t = q8 == 2 ? MHA_I16 : MHA_I8;
    if (q8) return k != t || (v && v != t);
    if (MHA_NO_EXTRAS || f32only) return k || v;
    return k > MHA_Q4 || k == MHA_I8 || v > MHA_Q4 || v == MHA_I8;
}

/* Whether a tree's parents [batch][t] hold one out of range (each draft's
   parent is -1 or an earlier draft). */
MHA__PRIVATE int mha__tree_bad(const int32_t *parents, size_t batch, size_t t) {
    size_t b, i;
    for (b = 0; b < batch; ++b)
        for (i = 0; i < t; ++i)
            if (parents[b * t + i] < -1 || parents[b * t + i] >= (int32_t)i) return 1;
    return 0;
}

/* mha_decode (decode 1), mha_decode_tree (2, with parents) and
   mha_cache_append (0) up to the work: the cache's sizes and lengths, then
   the checks every call shares. */
MHA__PRIVATE MHA__NOINLINE int mha__enter_cache(const mha_shape *shape, const mha_weights *w, mha_cache *cache,
                                               int32_t batch, int32_t t, const int32_t *parents,
                                               const float *queries, const float *keys, const float *values,
                                               float *out, void *workspace, size_t workspace_bytes,
                                               int decode MHA__FAST_PARAMS) {
    mha__ctx c;
    size_t b;
    int st = mha__setup(&c, shape, w);
    if (st != MHA_OK || (st = mha__counts(&c, batch, decode ? t : 0, keys || values ? t : 0)) != MHA_OK) return st;
    if (!cache) return MHA_ERR_NULL;
    if (mha__ring_bad(cache, c.m) || mha__types_bad(cache, 0, MHA__ADDITIVE(&c)) || (MHA_NO_EXTRAS && decode == 2))
        return MHA_ERR_SHAPE;
    if (decode && !keys && !values && (MHA__ROPE(&c) || MHA__ALIBI(&c)))
        return MHA_ERR_SHAPE; /* cross-attention: no query position */
    if (!cache->k || !cache->v || !cache->length || !keys != !values || (decode != 1 && !keys) ||
        (!MHA_NO_EXTRAS && decode == 2 && !parents) || (keys && (!w->w_k || !w->w_v)) ||
        (decode && (!queries || !out || !w->w_q || !w->w_o ||
                    (MHA__ADDITIVE(&c) && (!w->a_q || !w->a_k || !w->a_v)))))
        return MHA_ERR_NULL;
    c.ms = MHA__SZ(cache->capacity);
    c.mp = 0;
    c.head = -1;
    mha__io(&c, queries, keys, values, out);
    c.cache = cache;
#if MHA_FAST
    if ((st = mha__fast_call(&c, fast, pfor, user)) != MHA_OK) return st;
    c.fast = c.fast && mha__dec_fits(&c); /* the path, decided once: the fast decode or the reference steps */
#endif
    st = mha__check(&c, mha__bytes(&c), workspace_bytes, workspace);
    if (st != MHA__RUN) return st;
    for (b = 0; b < c.batch; ++b) /* every length first, a tree's parents, then the room */
        if (cache->length[b] < 0 || (!cache->window && cache->length[b] > cache->capacity)) return MHA_ERR_MASK;
    if (!MHA_NO_EXTRAS && decode == 2 && mha__tree_bad(parents, c.batch, c.n)) return MHA_ERR_MASK;
    for (b = 0; b < c.batch; ++b)
        if ((int64_t)cache->length[b] + (int64_t)c.m > (cache->window ? MHA__POS_MAX : cache->capacity))
            return MHA_ERR_CAPACITY;
    MHA__SET_TREE(&c, decode == 2 ? parents : NULL);
    return MHA__KEEP(&c, workspace);
}

/* The reference stages; a pass is query t of batch entry b with every head
   (mha_head: its head alone):
   1. project the keys and values of the kv heads that those heads use into
      the workspace (when t = 0; for additive scoring also A_k^(i) K), then
      the query, q_i for each head;
   2. attend: per head, the scores under the rules (mha__scores), pooled
      (mha__pool) into h_i;
   3. output: W_o times the heads' outputs (not for mha_head).
   mha_attend runs them with identity projections (mha__project). */
MHA__PRIVATE void mha__ref_project(const mha__ctx *c, size_t b, size_t t) {
    size_t m = c->m, i, g, j;
    for (i = 0; i < c->h; ++i) {
        if (c->head >= 0 && i != (size_t)c->head) continue; /* mha_head: its head alone */
        g = i / c->grp;
        if (t == 0 && (i % c->grp == 0 || i == (size_t)c->head)) { /* K [kv][m][p_k], V */
            mha__project(c, MHA__PROJ_K, c->keys + b * m * c->dk, m, g * c->pk, MHA__PART(c, MHA__KP) + g * m * c->pk);
            mha__project(c, MHA__PROJ_V, c->values + b * m * c->dv, m, g * c->pv,
                         MHA__PART(c, MHA__VP) + g * m * c->pv);
            for (j = 0; MHA__ROPE(c) && j < m; ++j) /* key j at position j */
                mha__rope(c, MHA__PART(c, MHA__KP) + (g * m + j) * c->pk, 1, 0, (int64_t)j, NULL);
        }
        if (t == 0 && MHA__ADDITIVE(c)) /* A_k^(i) K [m][p_a] */
            mha__project(c, MHA__PROJ_AK, MHA__PART(c, MHA__KP) + g * m * c->pk, m, i * c->pa,
                         MHA__PART(c, MHA__AK) + i * m * c->pa);
        /* q_i [p_q] */
        mha__project(c, MHA__PROJ_Q, c->queries + (b * c->n + t) * c->dq, 1, i * c->pq, MHA__PART(c, MHA__QP) + i * c->pq);
    }
    if (MHA__ROPE(c)) mha__rope(c, MHA__PART(c, MHA__QP), c->h, c->pq, MHA__QPOS(c, t), NULL); /* (not mha_head) */
}
MHA__PRIVATE void mha__ref_attend(const mha__ctx *c, size_t b, size_t t) {
    size_t i;
    for (i = 0; i < c->h; ++i) { /* (A_q^(i) q_i [p_a]), the scores [m], h_i [p_v] */
        if (c->head >= 0 && i != (size_t)c->head) continue;
        float slope, st[2];
        if (MHA__ADDITIVE(c))
            mha__project(c, MHA__PROJ_AQ, MHA__PART(c, MHA__QP) + i * c->pq, 1, i * c->pa, MHA__PART(c, MHA__AQ));
        slope = MHA__SLOPE(c, i);
        mha__pool(mha__attend(c, b, t, i, slope), c->m, MHA__PART(c, MHA__VP) + i / c->grp * c->m * c->pv, MHA_F32,
                  c->pv, c->pv, c->head < 0 ? MHA__PART(c, MHA__CAT) + i * c->pv : c->out, MHA__LSE(c) ? st : NULL,
                  mha__row_sink(c, i, slope, MHA__QPOS(c, t)));
        if (MHA__LSE(c)) MHA__LSE_PUT(c, MHA__LSE(c) + (b * c->h + i) * c->n + t, st, MHA__LSE_SHIFT(c, slope, t));
    }
}
MHA__PRIVATE void mha__ref_output(const mha__ctx *c, size_t b, size_t t) {
    if (c->head < 0) mha__project(c, MHA__PROJ_O, MHA__PART(c, MHA__CAT), 1, 0, c->out + (b * c->n + t) * c->po);
}

/* The dispatcher: the one place where a call's path (c->fast, set by its
   entry) chooses the fast or the reference stages, for one pass of batch
   entry b. A fast pass (MHA_FAST: mha_forward, mha_forward_parallel and
   mha_attend) is one kv head with every query row; a reference pass one
   query row with every head. */
#if MHA_FAST
#define MHA__PASSES(c) ((c)->fast ? (c)->kv : (c)->n)
#else
#define MHA__PASSES(c) ((c)->n)
#endif
MHA__PRIVATE MHA__INLINE void mha__stages(const mha__ctx *c, size_t b, size_t pass) {
#if MHA_FAST
    if (c->fast) {
        mha__fast_project(c, b, pass);
        mha__fast_attend(c, b, pass);
        mha__fast_output(c, b, pass);
        return;
    }
#endif
    mha__ref_project(c, b, pass);
    mha__ref_attend(c, b, pass);
    mha__ref_output(c, b, pass);
}

/* The computation of mha_forward (every variant), mha_head and mha_attend,
   for a call that an enter function answered with MHA__RUN (else its status
   is returned as it is): the three stages in turn, per batch entry and
   pass. */
MHA__PRIVATE MHA__NOINLINE mha_status mha__compute(int status, void *workspace) {
    const mha__ctx *c;
    size_t b, pass;
    if (status != MHA__RUN) return (mha_status)status;
    c = (const mha__ctx *)(void *)mha__align(workspace);
    mha__rope_base((mha__ctx *)(void *)mha__align(workspace));
    for (b = 0; b < c->batch; ++b)
        for (pass = 0; pass < MHA__PASSES(c); ++pass) mha__stages(c, b, pass);
    return MHA_OK;
}

/* mha_decode's computation, the stages of mha__compute over the cache: per
   batch entry, (1) A_k K of the slots in use for additive scoring, then per
   new query (2) per head: project, attend (mha__attend_cache), pool over the
   cache's values, and (3) W_o. */
MHA__PRIVATE MHA__NOINLINE mha_status mha__compute_cache(int status, void *workspace) {
    const mha__ctx *c;
    size_t b, t, i, e, slots, row;
    if (status != MHA__RUN) return (mha_status)status;
    c = (const mha__ctx *)(void *)mha__align(workspace);
    for (b = 0; b < c->batch && c->n; ++b) {
        e = (size_t)c->cache->length[b] + c->m;
        slots = e < c->ms ? e : c->ms;
        for (i = 0; i < c->h && MHA__ADDITIVE(c); ++i) /* 1. A_k^(i) K [slots][p_a] */
            mha__project(c, MHA__PROJ_AK, (const float *)c->cache->k + (b * c->kv + i / c->grp) * c->ms * c->pk, slots,
                         i * c->pa, MHA__PART(c, MHA__AK) + i * c->ms * c->pa);
        for (t = 0; t < c->n; ++t) {
            row = b * c->n + t;
            for (i = 0; i < c->h; ++i) { /* 2. */
                mha__project(c, MHA__PROJ_Q, c->queries + row * c->dq, 1, i * c->pq, MHA__PART(c, MHA__QP) + i * c->pq);
                mha__rope(c, MHA__PART(c, MHA__QP) + i * c->pq, 1, 0, (int64_t)(e - c->n + MHA__DRAFT(c, b, t)),
                          NULL);
                if (MHA__ADDITIVE(c))
                    mha__project(c, MHA__PROJ_AQ, MHA__PART(c, MHA__QP) + i * c->pq, 1, i * c->pa,
                                 MHA__PART(c, MHA__AQ));
                mha__pool(mha__attend_cache(c, b, t, i, e, MHA__SLOPE(c, i), MHA__PART(c, MHA__QP) + i * c->pq,
                                            MHA__PART(c, MHA__SC)),
                          slots,
                          mha__row(c->cache->v, MHA__VTYPE(c), c->pv, (b * c->kv + i / c->grp) * c->ms),
                          MHA__VTYPE(c), c->pv, c->pv, MHA__PART(c, MHA__CAT) + i * c->pv, NULL,
                          mha__row_sink(c, i, 0.0f, 0));
            }
            mha__project(c, MHA__PROJ_O, MHA__PART(c, MHA__CAT), 1, 0, c->out + row * c->po); /* 3. */
        }
    }
    return MHA_OK;
}

/* mha_decode and mha_cache_append after their checks, in two steps around
   mha__compute (siblings on the stack): the new keys and values into the
   cache (token at position P: slot P, or P mod capacity with a window;
   projected for every kv head), and after the computation the lengths. */
MHA__PRIVATE MHA__NOINLINE int mha__append(int status, void *workspace) {
    const mha__ctx *c = (const mha__ctx *)(void *)mha__align(workspace);
    size_t b, j, g, slot;
    mha_cache *cache;
    if (status != MHA__RUN) return status;
    cache = c->cache;
    mha__rope_base((mha__ctx *)(void *)mha__align(workspace)); /* for mha__compute_cache too */
    for (b = 0; b < c->batch; ++b)
        for (j = 0; j < c->m; ++j) {
            slot = (size_t)cache->length[b] + j;
            if (cache->window) slot = mha__pos_slot(slot, MHA__KEPT(cache), c->ms);
            for (g = 0; g < c->kv; ++g) { /* a typed cache: k [p_k] in QP, v [p_v] in CAT (free until the
                                             work, and p_q = p_k: dot scoring), then rounded into it */
                float *k = (float *)c->cache->k + ((b * c->kv + g) * c->ms + slot) * c->pk;
                float *v = (float *)c->cache->v + ((b * c->kv + g) * c->ms + slot) * c->pv;
                if (MHA__KTYPE(c)) k = MHA__PART(c, MHA__QP);
                if (MHA__VTYPE(c)) v = MHA__PART(c, MHA__CAT);
                mha__project(c, MHA__PROJ_K, c->keys + (b * c->m + j) * c->dk, 1, g * c->pk, k);
                mha__rope(c, k, 1, 0, (int64_t)cache->length[b] + (int64_t)MHA__DRAFT(c, b, j), NULL);
                mha__project(c, MHA__PROJ_V, c->values + (b * c->m + j) * c->dv, 1, g * c->pv, v);
                if (MHA__KTYPE(c))
                    mha__elt_store((void *)mha__row(cache->k, MHA__KTYPE(c), c->pk, (b * c->kv + g) * c->ms + slot),
                                   MHA__KTYPE(c), k, c->pk, 1);
                if (MHA__VTYPE(c))
                    mha__elt_store((void *)mha__row(cache->v, MHA__VTYPE(c), c->pv, (b * c->kv + g) * c->ms + slot),
                                   MHA__VTYPE(c), v, c->pv, 1);
            }
        }
    return MHA__RUN;
}
MHA__PRIVATE MHA__NOINLINE mha_status mha__appended(mha_status status, void *workspace) {
    const mha__ctx *c = (const mha__ctx *)(void *)mha__align(workspace);
    size_t b;
    if (status != MHA_OK || MHA__TREE(c)) return status; /* a tree's drafts: scratch */
    for (b = 0; b < c->batch; ++b) c->cache->length[b] += (int32_t)c->m;
    return MHA_OK;
}
/* A checked decoding call's steps (st: its entry's status, MHA__RUN to
   work): append, compute, the lengths; inlined into each entry so that
   the three are siblings on its stack. */
MHA__PRIVATE MHA__INLINE mha_status mha__decode_steps(int st, void *workspace) {
    if (st != MHA__RUN) return (mha_status)st;
    if (mha__decode_fast(workspace)) return MHA_OK; /* the fast path's decode, all steps */
    return mha__appended(mha__compute_cache(mha__append(st, workspace), workspace), workspace);
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
    case MHA_ERR_CAPACITY: return "the KV cache is full";
    default: return "unknown mha_status";
    }
#endif
}

/* msg (cap bytes) := the message of the check why names, each %d
   replaced by the next of its values in decimal; cut to fit. Without the
   status strings, "". */
MHA__PRIVATE void mha__say(char *msg, size_t cap, const mha__why *why) {
    size_t at = 0;
#if !MHA_NO_STATUS_STRINGS
#define MHA__MESSAGE(name, status, bad, message, a, b) message,
    static const char *const messages[MHA__CHECK_OK + 1] = {
        MHA__CHECKS_SHAPE(MHA__MESSAGE) MHA__CHECKS_WEIGHTS(MHA__MESSAGE) "ok"};
    const char *m = messages[why->name];
    int used = 0;
    for (; msg && *m && at + 1 < cap; ++m) {
        char digits[11], *d = digits + sizeof digits; /* a value's sign and digits, from the end */
        uint32_t x;
        if (*m != '%') {
            msg[at++] = *m;
            continue;
        }
        ++m; /* the d of %d */
        x = why->v[used] < 0 ? 0u - (uint32_t)why->v[used] : (uint32_t)why->v[used]; /* |INT32_MIN| too */
        do *--d = (char)('0' + x % 10u); while ((x /= 10u) != 0);
        if (why->v[used++] < 0) *--d = '-';
        while (d < digits + sizeof digits && at + 1 < cap) msg[at++] = *d++;
    }
#else
    (void)why;
#endif
    if (msg && cap) msg[at] = '\0';
}

MHADEF mha_status mha_explain(const mha_shape *shape, const mha_weights *w, char *msg, size_t msg_bytes) {
    mha__why why = {MHA__CHECK_OK, {0, 0}};
    mha_status st = mha__check_shape(shape, w, &why);
    if (st == MHA_OK) st = mha__check_weights(shape, w, 1, &why);
    mha__say(msg, msg_bytes, &why);
    return st;
}

MHADEF mha_build mha_build_info(void) {
    mha_build b;
    b.version = MHA_VERSION_STRING;
    b.fast = MHA_FAST;
#if MHA_FAST
    b.vector = MHA__SIMD_NAME;
#else
    b.vector = "none";
#endif
    b.no_libm = MHA_NO_LIBM;
    b.no_additive = MHA_NO_ADDITIVE;
    b.no_extras = MHA_NO_EXTRAS;
    b.no_status_strings = MHA_NO_STATUS_STRINGS;
    b.no_simd = MHA_NO_SIMD;
    return b;
}

MHADEF mha_status mha_weight_counts_get(const mha_shape *shape, mha_weight_counts *counts) {
    mha__ctx c;
    mha_status st;
    if (!counts) return MHA_ERR_NULL;
    if ((st = mha__setup(&c, shape, &mha__no_weights)) != MHA_OK || (st = mha__counts(&c, 0, 0, 0)) != MHA_OK)
        return st;
    if (mha__layout(&c, NULL) == SIZE_MAX) return MHA_ERR_OVERFLOW;
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

/* Workspace bytes of mha_forward's path (fast 1) or the reference path. */
MHA__PRIVATE size_t mha__workspace_size(const mha_shape *shape, int32_t batch, int32_t n, int32_t m, int fast) {
    mha__ctx c;
    size_t bytes;
    if (mha__setup(&c, shape, &mha__no_weights) != MHA_OK || mha__counts(&c, batch, n, m) != MHA_OK) return 0;
#if MHA_FAST
    c.fast = fast;
#else
    (void)fast;
#endif
    bytes = mha__bytes(&c);
    return bytes == SIZE_MAX ? 0 : bytes;
}

MHADEF size_t mha_workspace_size(const mha_shape *shape, int32_t batch, int32_t n, int32_t m) {
    return mha__workspace_size(shape, batch, n, m, 1);
}

MHADEF size_t mha_reference_workspace_size(const mha_shape *shape, int32_t batch, int32_t n, int32_t m) {
    return mha__workspace_size(shape, batch, n, m, 0);
}

MHADEF mha_status mha_forward(const mha_shape *shape, const mha_weights *w, int32_t batch, int32_t n,
                              int32_t m, const float *queries, const float *keys, const float *values,
                              const mha_mask *mask, float *out, float *attn, void *workspace,
                              size_t workspace_bytes) {
    return mha__compute(mha__enter(shape, w, batch, n, m, queries, keys, values, mask, out, attn, workspace,
                                   workspace_bytes, -1, 0 MHA__FAST_ARGS(1, NULL, NULL)),
                        workspace);
}

MHADEF mha_status mha_forward_lse(const mha_shape *shape, const mha_weights *w, int32_t batch, int32_t n, int32_t m,
                                  const float *queries, const float *keys, const float *values, const mha_mask *mask,
                                  float *out, float *lse, void *workspace, size_t workspace_bytes) {
    int st = mha__enter(shape, w, batch, n, m, queries, keys, values, mask, out, NULL, workspace, workspace_bytes, -1,
                        0 MHA__FAST_ARGS(1, NULL, NULL));
    if (MHA_NO_EXTRAS && lse && st == MHA__RUN) return MHA_ERR_SHAPE; /* no statistics in that build */
#if !MHA_NO_EXTRAS /* (the fields exist only there) */
    if (st == MHA__RUN) { /* into the call state */
        mha__ctx *c = (mha__ctx *)(void *)mha__align(workspace);
        c->lse = lse;
        c->lse_put = mha__lse_put;
    }
#endif
    return mha__compute(st, workspace);
}

MHADEF mha_status mha_forward_reference(const mha_shape *shape, const mha_weights *w, int32_t batch, int32_t n,
                                        int32_t m, const float *queries, const float *keys, const float *values,
                                        const mha_mask *mask, float *out, float *attn, void *workspace,
                                        size_t workspace_bytes) {
#if MHA_FAST
    return mha__compute(mha__enter(shape, w, batch, n, m, queries, keys, values, mask, out, attn, workspace,
                                   workspace_bytes, -1, 0, 0, NULL, NULL),
                        workspace);
#else
    return mha_forward(shape, w, batch, n, m, queries, keys, values, mask, out, attn, workspace, workspace_bytes);
#endif
}

MHADEF mha_status mha_forward_parallel(const mha_shape *shape, const mha_weights *w, int32_t batch, int32_t n,
                                       int32_t m, const float *queries, const float *keys, const float *values,
                                       const mha_mask *mask, float *out, float *attn, void *workspace,
                                       size_t workspace_bytes, mha_parallel_for parallel_for, void *user) {
#if MHA_FAST
    return mha__compute(mha__enter(shape, w, batch, n, m, queries, keys, values, mask, out, attn, workspace,
                                   workspace_bytes, -1, 0, 1, parallel_for, user),
                        workspace);
#else
    (void)parallel_for;
    (void)user;
    return mha_forward(shape, w, batch, n, m, queries, keys, values, mask, out, attn, workspace, workspace_bytes);
#endif
}

MHADEF size_t mha_packed_weights_size(const mha_shape *shape) {
#if MHA_FAST
    mha__ctx c;
    size_t per_g, per_i, bytes;
    if (mha__setup(&c, shape, &mha__no_weights) != MHA_OK || mha__counts(&c, 0, 0, 0) != MHA_OK) return 0;
    bytes = mha__packed_bytes(&c, &per_g, &per_i);
    return bytes == SIZE_MAX ? 0 : bytes;
#else
    (void)shape;
    return 0;
#endif
}

MHADEF mha_status mha_pack_weights(const mha_shape *shape, const mha_weights *w, void *buffer, size_t bytes) {
    mha__ctx c;
    mha_status st = mha__setup(&c, shape, w);
    if (st != MHA_OK || (st = mha__counts(&c, 0, 0, 0)) != MHA_OK) return st;
    if (!w->w_q || !w->w_k || !w->w_v || !w->w_o) return MHA_ERR_NULL;
#if MHA_FAST
    {
        size_t per_g, per_i, need = mha__packed_bytes(&c, &per_g, &per_i), i;
        mha__pack_head *hd;
        float *p;
        if (need == SIZE_MAX || mha__layout(&c, NULL) == SIZE_MAX) return MHA_ERR_OVERFLOW;
        if (!buffer || bytes < need) return MHA_ERR_WORKSPACE;
        p = mha__align(buffer);
        hd = (mha__pack_head *)(void *)p;
        hd->magic = MHA__MAGIC(&c);
        hd->nr = MHA__NR;
        hd->h = c.h; hd->kv = c.kv; hd->dq = c.dq; hd->dk = c.dk; hd->dv = c.dv;
        hd->pq = c.pq; hd->pk = c.pk; hd->pv = c.pv; hd->po = c.po;
        p += MHA__PACK_SKIP;
        for (i = 0; i < c.kv; ++i, p += per_g) mha__pack_kv(&c, i, p);
        for (i = 0; i < c.h; ++i, p += per_i) mha__pack_qo(&c, i, p);
        MHA__CLEAN();
    }
#else
    (void)buffer;
    (void)bytes;
#endif
    return MHA_OK;
}

MHADEF mha_status mha_head(const mha_shape *shape, const mha_weights *w, int32_t head, const float *query,
                           const float *keys, const float *values, int32_t m, int32_t valid_len,
                           float *head_out, void *workspace, size_t workspace_bytes) {
    return mha__compute(mha__enter(shape, w, 1, 1, m, query, keys, values, NULL, head_out, NULL, workspace,
                                   workspace_bytes, head < 0 ? INT32_MAX : head,
                                   valid_len MHA__FAST_ARGS(0, NULL, NULL)),
                        workspace);
}

MHADEF mha_status mha_concat(int32_t heads, int32_t p_v, const float *const *head_outs, float *concat) {
    size_t i, a, nh, pv;
    if (!head_outs || !concat) return MHA_ERR_NULL;
    if (heads < 1 || p_v < 1) return MHA_ERR_SHAPE;
    nh = MHA__SZ(heads);
    pv = MHA__SZ(p_v);
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
    if (st != MHA_OK || (st = mha__counts(&c, 0, 0, 0)) != MHA_OK) return st;
    if (!w->w_o || !concat || !out) return MHA_ERR_NULL;
    if (mha__layout(&c, NULL) == SIZE_MAX) return MHA_ERR_OVERFLOW;
    mha__project(&c, MHA__PROJ_O, concat, 1, 0, out);
    return MHA_OK;
}

MHADEF mha_status mha_output_rows(const mha_shape *shape, const mha_weights *w, int32_t rows, const float *concat,
                                  float *out) {
    mha__ctx c;
    mha_status st = mha__setup(&c, shape, w);
    if (st != MHA_OK || (st = mha__counts(&c, rows, 1, 0)) != MHA_OK) return st;
    if (!w->w_o || !concat || !out) return MHA_ERR_NULL;
    if (mha__layout(&c, NULL) == SIZE_MAX ||
        mha__mul(mha__mul(c.batch, mha__mul(c.h, c.pv)), sizeof(float)) == SIZE_MAX ||
        mha__mul(mha__mul(c.batch, c.po), sizeof(float)) == SIZE_MAX)
        return MHA_ERR_OVERFLOW;
    mha__project(&c, MHA__PROJ_O, concat, c.batch, 0, out);
    return MHA_OK;
}

/* 16-bit floats (see their declarations): bit operations only, so that every
   target rounds alike. */
MHADEF uint16_t mha_f16_from_f32(float x) {
    const uint32_t u = mha__bits(x), sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
    uint32_t e, m, sh, q, rest;
    if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u | ((a >> 13) & 0x3ffu)); /* NaN, quiet */
    if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* inf, or rounds up past 65504 */
    if (a >= 0x38800000u) /* normal: exponent rebiased by 112, 13 bits rounded off */
        return (uint16_t)(sign | ((a - 0x38000000u + 0xfffu + ((a >> 13) & 1u)) >> 13));
    e = a >> 23; /* a subnormal f16 (or 0): |x| / 2^-24 = m 2^(e - 126), rounded */
    m = (a & 0x7fffffu) | (e ? 0x800000u : 0u);
    sh = 126u - (e ? e : 1u);
    if (sh > 24u) return (uint16_t)sign;
    q = m >> sh;
    rest = m & ((1u << sh) - 1u);
    if (rest > (1u << (sh - 1u)) || (rest == (1u << (sh - 1u)) && (q & 1u))) ++q;
    return (uint16_t)(sign | q);
}
MHADEF float mha_f32_from_f16(uint16_t h) {
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu;
    uint32_t m = h & 0x3ffu, k = 0;
    if (e == 31u) return mha__from_bits(sign | 0x7f800000u | (m ? 0x400000u | (m << 13) : 0u));
    if (e) return mha__from_bits(sign | ((e + 112u) << 23) | (m << 13));
    if (!m) return mha__from_bits(sign);
    while (!(m & 0x400u)) { /* subnormal: normalise */
        m <<= 1;
        ++k;
    }
    return mha__from_bits(sign | ((113u - k) << 23) | ((m & 0x3ffu) << 13));
}
MHADEF uint16_t mha_bf16_from_f32(float x) {
    const uint32_t u = mha__bits(x);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u); /* NaN, quiet */
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
MHADEF float mha_f32_from_bf16(uint16_t h) {
    const uint32_t u = (uint32_t)h << 16;
    return mha__from_bits((u & 0x7fffffffu) > 0x7f800000u ? u | 0x400000u : u);
}

MHADEF mha_status mha_attend(const mha_shape *shape, const mha_weights *w, int32_t batch, int32_t n, int32_t m,
                             const float *q, const float *k, const float *v, const mha_mask *mask,
                             float *heads_out, float *attn, void *workspace, size_t workspace_bytes) {
    return mha__compute(
        mha__enter_core(shape, w, batch, n, m, q, k, v, mask, heads_out, attn, workspace, workspace_bytes), workspace);
}

MHADEF size_t mha_attend_workspace_size(const mha_shape *shape, int32_t batch, int32_t n, int32_t m) {
    mha__ctx c;
    size_t bytes;
    if (mha__setup(&c, shape, &mha__no_weights) != MHA_OK || mha__counts(&c, batch, n, m) != MHA_OK) return 0;
    c.dq = mha__mul(c.h, c.pq);
    c.dk = mha__mul(c.kv, c.pk);
    c.dv = mha__mul(c.kv, c.pv);
    c.po = mha__mul(c.h, c.pv);
    c.head = MHA__CORE;
#if MHA_FAST
    c.fast = 1;
#endif
    bytes = mha__bytes(&c);
    return bytes == SIZE_MAX ? 0 : bytes;
}

/* ---- training: the backward pass (reference) -------------------------------
   mha_backward recomputes the forward a query row at a time by the
   reference's kernel (mha__scores, mha__pool: the same rules), and sends the
   gradient back through it. For batch entry b and kv head g:
     1. K_g [m][p_k] and V_g [m][p_v] projected; their gradients dK_g, dV_g
        from 0;
     2. per head i of the group and query row t: q [p_q] (additive: A_q q
        [p_a]; A_k k_j [m][p_a] once per head), the scores and probabilities
        P [m] with the sink's share, h = sum_j P_j v_j [p_v], and back:
        dh = W_o^(i)^T dout_t, D = dh . h, dS_j = P_j (dh . v_j - D) (the
        soft-cap's derivative folded in), dV_j += P_j dh, and dq, dK_j
        through the score; then through W_q^(i) (grads and d_queries);
     3. dK_g and dV_g through W_k^(g), W_v^(g) (grads and d_keys, d_values).
   The workspace (floats): K_g, V_g, dK_g, dV_g; P and the raw scores [m]
   each; q, dq [p_q]; h, dh [p_v]; additive: A_k k [m][p_a], A_q q and its
   gradient [p_a]. */
MHA__PRIVATE size_t mha__bwd_floats(const mha__ctx *c) {
    size_t t = mha__mul(2, mha__mul(c->m, mha__add(c->pk, c->pv)));
    t = mha__add(t, mha__mul(2, c->m));
    t = mha__add(t, mha__mul(2, mha__add(c->pq, c->pv)));
    return mha__add(t, mha__mul(c->pa, mha__add(c->m, 2)));
}

/* The arrays of a backward call. */
typedef struct mha__bwd {
    const float *q, *k, *v, *dout, *lse; /* lse: NULL, or the forward's statistics */
    float *dq, *dk, *dv;
    const mha_grads *g;
    size_t tasks; /* the fast path's tasks (mha_backward: 1; mha_backward_parallel: mha__bwf_tasks) */
    float *kp, *vp, *dkp, *dvp, *pr, *raw, *qp, *dqp, *ho, *dh, *ak, *aq, *daq; /* the workspace's parts */
} mha__bwd;

/* The call state in the workspace (from its aligned start): the call's
   mha__ctx, then its arrays (mha__bwd), each rounded up to the alignment;
   the floats after them. Nothing of it lies on the stack while the work runs. */
#define MHA__BWD_CTX MHA__UP(sizeof(mha__ctx), MHA_WORKSPACE_ALIGN)
#define MHA__BWD_SELF (MHA__BWD_CTX + MHA__UP(sizeof(mha__bwd), MHA_WORKSPACE_ALIGN))

MHA__PRIVATE void mha__zero(float *x, size_t n) {
    size_t i;
    for (i = 0; i < n; ++i) x[i] = 0.0f;
}

/* Additive scoring's gradients from key j's score gradient ds in head i: into A_q^(i) q_i's
   (daq), A_k^(i)'s and w_a^(i)'s (grads) and key j's projection's (dkp). */
MHA__PRIVATE MHA__INLINE void mha__bwd_additive(const mha__ctx *c, const mha__bwd *B, size_t i, size_t j, float ds) {
    const mha_grads *g = B->g;
    const size_t pa = c->pa, pk = c->pk;
    size_t a, e;
    for (a = 0; a < pa; ++a) {
        const float z = MHA_TANHF(B->aq[a] + B->ak[j * pa + a]), du = ds * c->w->a_v[i * pa + a] * (1.0f - z * z);
        const float *ak = c->w->a_k + (i * pa + a) * pk;
        if (g && g->a_v) g->a_v[i * pa + a] += ds * z;
        B->daq[a] += du;
        for (e = 0; e < pk; ++e) {
            if (g && g->a_k) g->a_k[(i * pa + a) * pk + e] += du * B->kp[j * pk + e];
            B->dkp[j * pk + e] += ak[e] * du;
        }
    }
}

/* From q_i's gradient (dqp [p_q]) of query row `row` (its input qt): W_q^(i)'s and b_q^(i)'s
   gradients, and the query's (+= into dq). */
MHA__PRIVATE MHA__INLINE void mha__bwd_wq(const mha__ctx *c, const mha__bwd *B, size_t i, size_t row, const float *qt) {
    const mha_grads *g = B->g;
    const size_t pq = c->pq;
    const int type = MHA__WTYPE(c);
    size_t a, e;
    for (a = 0; a < pq; ++a) {
        if (g && g->b_q) g->b_q[i * pq + a] += B->dqp[a];
        for (e = 0; e < c->dq; ++e) {
            if (g && g->w_q) g->w_q[(i * pq + a) * c->dq + e] += B->dqp[a] * qt[e];
            if (B->dq) B->dq[row * c->dq + e] += mha__elt_f32(c->w->w_q, type, (i * pq + a) * c->dq + e) * B->dqp[a];
        }
    }
}

/* Step 2 for query row t of batch entry b, head i. */
MHA__PRIVATE MHA__NOINLINE void mha__bwd_row(const mha__ctx *c, const mha__bwd *B, size_t b, size_t t, size_t i) {
    const mha_weights *w = c->w;
    const mha_grads *g = B->g;
    const mha_mask *mask = c->mask;
    const int type = MHA__WTYPE(c);
    const size_t m = c->m, pq = c->pq, pk = c->pk, pv = c->pv, pa = c->pa, hp = c->h * c->pv, row = b * c->n + t;
    const float *qt = B->q + row * c->dq, *dot = B->dout + row * c->po;
    const float slope = MHA__SLOPE(c, i), cap = MHA__CAP(c);
    const int64_t qpos = MHA__QPOS(c, t);
    const float sink = mha__row_sink(c, i, slope, qpos); /* -inf: none */
    float st[2] = {0.0f, 0.0f}, sw, D, ds, s;
    size_t j, a, e, o;
    mha__keys r;
    /* the row forward: q (rotated at the row's position), the scores by the reference's kernel (raw:
       before the soft-cap), then P (normalised in place) and h by its pool, with the sink's share sw */
    mha__project(c, MHA__PROJ_Q, qt, 1, i * pq, B->qp);
    if (MHA__ROPE(c)) mha__rope(c, B->qp, 1, 0, qpos, NULL);
    if (MHA__ADDITIVE(c)) mha__project(c, MHA__PROJ_AQ, B->qp, 1, i * pa, B->aq);
    r.k = B->kp;
    r.q = B->qp;
    r.aq = B->aq;
    r.ak = B->ak;
    r.keep = mask && mask->keep ? mask->keep + row * m : NULL;
    r.bias = mask && mask->bias ? mask->bias + row * m : NULL;
    r.sc = B->pr;
    r.raw = B->raw;
    r.slots = r.cap = m;
    r.base = r.s0 = r.lo = r.kept = r.tree0 = r.row = 0;
    r.par = NULL;
    r.hi = mha__visible(mask, b, row, t, m);
    r.ktype = MHA_F32;
    r.qpos = qpos - MHA__DREF(c, qpos);
    mha__pool(mha__scores(c, i, &r, slope), m, B->vp, MHA_F32, pv, pv, B->ho, st, sink);
    sw = mha__weight(sink, st[0]) / (st[1] == 0.0f ? 1.0f : st[1]); /* (st: not written without extras, no sink) */
    for (a = 0; a < pv; ++a) B->dh[a] = mha__dot_t(dot, mha__elt(w->w_o, type, i * pv + a), type, hp, c->po, 0);
    /* the output projection's gradients */
    for (o = 0; g && g->w_o && o < c->po; ++o)
        for (a = 0; a < pv; ++a) g->w_o[o * hp + i * pv + a] += dot[o] * B->ho[a];
    for (o = 0; g && g->b_o && i == 0 && o < c->po; ++o) g->b_o[o] += dot[o];
    /* back through the softmax and the scores */
    D = mha__dot(B->dh, B->ho, 1, pv, 0);
    mha__zero(B->dqp, pq);
    mha__zero(B->daq, pa);
    for (j = 0; j < m; ++j) {
        if (B->pr[j] == 0.0f) continue; /* masked, or no share: no gradient */
        ds = B->pr[j] * (mha__dot(B->dh, B->vp + j * pv, 1, pv, 0) - D);
        if (cap != 0.0f) {
            s = MHA_TANHF(B->raw[j] / cap);
            ds *= 1.0f - s * s;
        }
        for (a = 0; a < pv; ++a) B->dvp[j * pv + a] += B->pr[j] * B->dh[a];
        if (MHA__ADDITIVE(c)) {
            mha__bwd_additive(c, B, i, j, ds);
            continue;
        }
        for (a = 0; a < pk; ++a) {
            B->dqp[a] += c->scale * ds * B->kp[j * pk + a];
            B->dkp[j * pk + a] += c->scale * ds * B->qp[a];
        }
    }
    if (!MHA_NO_EXTRAS && g && g->sinks && w->sinks) g->sinks[i] -= sw * D; /* the sink's dP is 0 */
    for (a = 0; MHA__ADDITIVE(c) && a < pa; ++a) /* through A_q^(i) */
        for (e = 0; e < pq; ++e) {
            if (g && g->a_q) g->a_q[(i * pa + a) * pq + e] += B->daq[a] * B->qp[e];
            B->dqp[e] += w->a_q[(i * pa + a) * pq + e] * B->daq[a];
        }
    if (MHA__ROPE(c)) mha__rope(c, B->dqp, 1, 0, -qpos, NULL); /* back through the rotation: its inverse */
    mha__bwd_wq(c, B, i, row, qt); /* through W_q^(i) */
}

/* Step 3: x's gradient ([m][p] at dx, rows of the projection's weight
   starting at o0) through W (rows [..][d]) into the weight's and bias's
   gradients and the inputs' (din, [m][d], NULL: not wanted). */
MHA__PRIVATE MHA__NOINLINE void mha__bwd_proj(size_t m, size_t p, size_t d, const float *x, const float *dx, const void *W,
                                int type, size_t o0, float *gw, float *gb, float *din) {
    size_t j, a, e;
    for (j = 0; j < m; ++j)
        for (a = 0; a < p; ++a) {
            const float gr = dx[j * p + a];
            if (gb) gb[o0 + a] += gr;
            for (e = 0; e < d; ++e) {
                if (gw) gw[(o0 + a) * d + e] += gr * x[j * d + e];
                if (din) din[j * d + e] += mha__elt_f32(W, type, (o0 + a) * d + e) * gr;
            }
        }
}

/* RoPE on the m rows of p_k at x, row j at position sign j (-1: the inverse rotation). */
MHA__PRIVATE void mha__bwd_rope(const mha__ctx *c, float *x, int sign) {
    size_t j;
    int64_t pos;
    for (j = 0; j < c->m && MHA__ROPE(c); ++j) {
        pos = (int64_t)j;
        mha__rope(c, x + j * c->pk, 1, 0, sign < 0 ? -pos : pos, NULL);
    }
}

MHA__PRIVATE MHA__NOINLINE void mha__bwd_run(const mha__ctx *c, mha__bwd *B, float *ws) {
    const size_t m = c->m, pk = c->pk, pv = c->pv;
    const mha_grads *g = B->g;
    size_t b, gi, l, t;
    B->kp = ws;
    B->vp = B->kp + m * pk;
    B->dkp = B->vp + m * pv;
    B->dvp = B->dkp + m * pk;
    B->pr = B->dvp + m * pv;
    B->raw = B->pr + m;
    B->qp = B->raw + m;
    B->dqp = B->qp + c->pq;
    B->ho = B->dqp + c->pq;
    B->dh = B->ho + pv;
    B->ak = B->dh + pv;
    B->aq = B->ak + m * c->pa;
    B->daq = B->aq + c->pa;
    for (b = 0; b < c->batch; ++b) {
        const float *kb = B->k + b * m * c->dk, *vb = B->v + b * m * c->dv;
        if (B->dq) mha__zero(B->dq + b * c->n * c->dq, c->n * c->dq);
        if (B->dk) mha__zero(B->dk + b * m * c->dk, m * c->dk);
        if (B->dv) mha__zero(B->dv + b * m * c->dv, m * c->dv);
        for (gi = 0; gi < c->kv; ++gi) {
            mha__project(c, MHA__PROJ_K, kb, m, gi * pk, B->kp); /* 1. */
            mha__project(c, MHA__PROJ_V, vb, m, gi * pv, B->vp);
            mha__bwd_rope(c, B->kp, 1); /* RoPE at each key's position */
            mha__zero(B->dkp, m * pk);
            mha__zero(B->dvp, m * pv);
            for (l = 0; l < c->grp; ++l) { /* 2. */
                if (MHA__ADDITIVE(c)) mha__project(c, MHA__PROJ_AK, B->kp, m, (gi * c->grp + l) * c->pa, B->ak);
                for (t = 0; t < c->n; ++t) mha__bwd_row(c, B, b, t, gi * c->grp + l);
            }
            mha__bwd_rope(c, B->dkp, -1); /* 3. back through the rotation: its inverse */
            mha__bwd_proj(m, pk, c->dk, kb, B->dkp, c->w->w_k, MHA__WTYPE(c), gi * pk, g ? g->w_k : NULL,
                          g ? g->b_k : NULL, B->dk ? B->dk + b * m * c->dk : NULL);
            mha__bwd_proj(m, pv, c->dv, vb, B->dvp, c->w->w_v, MHA__WTYPE(c), gi * pv, g ? g->w_v : NULL,
                          g ? g->b_v : NULL, B->dv ? B->dv + b * m * c->dv : NULL);
        }
    }
}

#if MHA_FAST
/* ---- training: the backward pass (fast) -----------------------------------
   The reference's gradients from GEMMs on blocks (dot scoring; additive
   scoring and the soft-cap take the reference path). For batch entry b and
   kv head g the keys go in chunks of mc (all m keys when m <= MHA__BWC):
     1. K_c [mc][p_k] (rotated), V_c [mc][p_v] projected and packed as B
        panels four ways (K_c^T, K_c, V_c^T, V_c); dK_c^T, dV_c^T from 0;
     2. per head i of the group and block of rv <= br query rows:
          Q [rv][p_q] = X_q W_q^(i)^T + b_q (rotated), dH [rv][p_v] = dOut W_o^(i),
          S [rv][mc] = scale Q K_c^T under the rules (mha__fast_rules),
          P = softmax(S) (one chunk), or e^(S - max) / sum with the row's
              statistics (several chunks: from passes 1 and 2),
          dP = dH V_c^T, D = rowsum(P o dP) (one chunk; else pass 2's),
          gW_o^(i)^T += (P V_c)^T dOut, dS = scale P o (dP - D),
          dV_c^T += dH^T P, dK_c^T += Q^T dS (the narrow factor transposed:
          P and dS are read in place), dQ = dS K_c, and dQ back through the
          rotation and W_q^(i) (d_queries, gW_q, gb_q);
     3. dK_c (back through the rotation) and dV_c through W_k^(g), W_v^(g).
   With several chunks, pass 1 finds each row's max and sum over the chunks
   (online; skipped when the forward's lse is given, which then stands for
   the max) and pass 2 its D (and with lse the sum); pass 3 is steps 1-3.
   The workspace has no term in n x m, none in m x p beyond a chunk, and n
   only in those statistics. */
#define MHA__BR ((size_t)8 * MHA__MR) /* query rows per block */
#define MHA__BWC ((size_t)1024)       /* keys up to this many: one chunk */
#define MHA__BWCS ((size_t)256)       /* else chunks of this many keys */
#define MHA__CB ((size_t)4 * MHA__NR) /* columns of B packed at a time */
/* Whether the fast path runs a backward call: dot scoring without the
   soft-cap, and something to compute (n, m >= 1). */
#define mha__bwf_runs(c) (!MHA__ADDITIVE(c) && MHA__CAP(c) == 0.0f && (c)->n > 0 && (c)->m > 0)

typedef struct mha__bwf {
    const mha__ctx *c;
    const mha__bwd *B;
    size_t br;                     /* query rows per block: BR, or n rounded up to MR */
    size_t mc, mcp, b, g, j0, cl;  /* keys per chunk; the row stride of s, ds, dkc, dvc: mc rounded up to VL,
                                      and a vector more (no stride of 4 KiB: L1 sets); the batch entry,
                                      kv head, chunk */
    int pass;                      /* 0: one chunk; several: 1 statistics, 2 D, 3 the gradients */
    int given;                     /* several chunks: the forward's lse stands for the max (every row's finite) */
    float *kt, *kn, *vt, *vn;      /* K_c^T [p_k][mc], K_c [mc][p_k], V_c^T, V_c: B panels */
    float *kc, *vc, *dkc, *dvc;    /* K_c [mc][p_k], V_c [mc][p_v]; dK_c^T [p_k][mc], dV_c^T [p_v][mc] */
    float *gwo;                    /* [p_v][p_o]: gW_o^(i)^T of the chunk's blocks */
    float *wq;                     /* W_q^(i)^T [d_q][p_q] as B panels (W_q and W_o as B: read in place) */
    float *s, *ds;                 /* [br][mcp]: S, then P; dP, then dS */
    float *qp, *dh, *ho, *dqp;     /* [br][p]: Q, dH, P V_c, dQ */
    float *pa, *pb, *tail;         /* A transposed (p rows); B packed CB columns at a time; [MR][KC] */
    float *mx, *l, *dd;            /* several chunks: [grp][n] each row's max, sum and D */
} mha__bwf;

/* The call state: mha__bwd's, then mha__bwf, then the floats. */
#define MHA__BWF_SELF (MHA__BWD_SELF + MHA__UP(sizeof(mha__bwf), MHA_WORKSPACE_ALIGN))

/* Bytes of the fast backward's parts (SIZE_MAX on overflow); with ws (64-byte
   aligned) given, also the parts. */
MHA__PRIVATE size_t mha__bwf_layout(mha__bwf *f, const mha__ctx *c, float *ws) {
    const size_t mc = c->m <= MHA__BWC ? c->m : MHA__BWCS, mcn = MHA__UP(mc, MHA__NR);
    const size_t BR = c->n < MHA__BR ? MHA__UP(c->n, MHA__MR) : MHA__BR; /* rows of a block (n >= 1) */
    const size_t pw = c->pq > c->pv ? c->pq : c->pv;                     /* (p_k = p_q) */
    size_t sz[19], k, t, kmax, cmax, parts = 0;
    float **ptr[19];
    f->c = c;
    f->mc = mc;
    f->mcp = MHA__UP(mc, MHA__VL) + MHA__VL;
    f->br = BR;
    kmax = BR > mc ? BR : mc; /* the most rows (k) and columns a packed B has */
    cmax = mc;
    for (k = 0; k < 9; ++k) { /* d_q .. p_o */
        t = (&c->dq)[k];
        if (t > kmax) kmax = t;
        if (t > cmax) cmax = t;
    }
#define MHA__BWF_PART(name, floats) (ptr[parts] = &f->name, sz[parts++] = (floats))
    MHA__BWF_PART(kt, mha__mul(mcn, c->pk));
    MHA__BWF_PART(kn, mha__mul(MHA__UP(c->pk, MHA__NR), mc));
    MHA__BWF_PART(vt, mha__mul(mcn, c->pv));
    MHA__BWF_PART(vn, mha__mul(MHA__UP(c->pv, MHA__NR), mc));
    MHA__BWF_PART(kc, mha__mul(mc, c->pk));
    MHA__BWF_PART(vc, mha__mul(mc, c->pv));
    MHA__BWF_PART(dkc, mha__mul(c->pk, f->mcp));
    MHA__BWF_PART(dvc, mha__mul(c->pv, f->mcp));
    MHA__BWF_PART(wq, mha__mul(MHA__UP(c->pq, MHA__NR), c->dq));
    MHA__BWF_PART(s, mha__mul(BR, f->mcp));
    MHA__BWF_PART(ds, mha__mul(BR, f->mcp));
    MHA__BWF_PART(qp, BR * c->pq);
    MHA__BWF_PART(dh, BR * c->pv);
    MHA__BWF_PART(ho, BR * c->pv);
    MHA__BWF_PART(dqp, BR * c->pq);
    MHA__BWF_PART(pa, mha__mul(MHA__UP(pw, MHA__MR), BR));
    MHA__BWF_PART(pb, mha__mul(MHA__UP(cmax < MHA__CB ? cmax : MHA__CB, MHA__NR), kmax));
    MHA__BWF_PART(tail, MHA__MR * (kmax < MHA__KC ? kmax : MHA__KC));
    MHA__BWF_PART(gwo, mha__mul(c->pv, c->po));
#undef MHA__BWF_PART
    t = mha__parts_at(ws, sz, ptr, parts);
    if (ws) { /* several chunks: the rows' statistics, [grp][n] each, past the parts */
        f->mx = ws + (t - MHA_WORKSPACE_ALIGN) / sizeof(float);
        f->l = f->mx + c->grp * c->n;
        f->dd = f->l + c->grp * c->n;
    }
    return mha__add(t, c->m <= MHA__BWC ? 0 : mha__mul(mha__mul(3, sizeof(float)), mha__mul(c->grp, c->n)));
}

/* Packs B = W [k][cols] (row-major, row stride ldw, of element type `type`)
   as panels of NR columns, panel q [k][NR] at bp + q k NR, 0 past cols. */
MHA__PRIVATE void mha__pack_n(const void *w, int type, size_t ldw, size_t k, size_t cols, float *bp) {
    size_t q, i, l, nl;
    for (q = 0; q * MHA__NR < cols; ++q, bp += k * MHA__NR) {
        nl = cols - q * MHA__NR < MHA__NR ? cols - q * MHA__NR : MHA__NR;
        for (i = 0; i < k; ++i) {
            float *o = bp + i * MHA__NR;
            const float *x = type == MHA_F32 ? (const float *)w + i * ldw + q * MHA__NR : NULL;
            if (type == MHA_F32 && nl == MHA__NR) { /* (no library call for a panel's row) */
                mha__vstore(o, mha__vload(x));
                mha__vstore(o + MHA__VL, mha__vload(x + MHA__VL));
                continue;
            }
            if (type == MHA_F32)
                for (l = 0; l < nl; ++l) o[l] = x[l];
            else
                for (l = 0; l < nl; ++l) o[l] = mha__elt_f32(w, type, i * ldw + q * MHA__NR + l);
            for (l = nl; l < MHA__NR; ++l) o[l] = 0.0f;
        }
    }
}

/* C [rows][cols] (=, or += with acc) A B (+ bias on columns), with A
   [rows][k] row-major (lda), or given as A^T [k][rows] (ta: copied into pa,
   padded to MR rows); B from b at element bo, of type bt: [k][cols]
   (row stride ldb), or given as B^T [cols][k] (tb). A float B [k][cols] is
   read in place for its whole panels of NR columns; the rest is packed
   into pb, CB columns at a time. */
MHA__PRIVATE void mha__bwf_mm(const mha__bwf *f, size_t rows, size_t cols, size_t k, const float *a, size_t lda,
                              int ta, const void *b, int bt, size_t bo, size_t ldb, int tb, float *c, size_t ldc,
                              int acc, const float *bias) {
    mha__gemm_args ga;
    size_t c0 = 0, cw, r, e;
    if (rows == 0 || cols == 0) return;
    if (ta) {
        for (e = 0; e < k; ++e)
            for (r = 0; r < rows; ++r) f->pa[r * k + e] = a[e * lda + r];
        for (r = rows * k; r < MHA__UP(rows, MHA__MR) * k; ++r) f->pa[r] = 0.0f;
        a = f->pa;
        lda = k;
    }
    if (!tb && bt == MHA_F32 && cols >= MHA__NR) { /* whole panels in place */
        c0 = cols / MHA__NR * MHA__NR;
        ga = mha__mm(rows, c0, k, a, lda, (const float *)b + bo, c, ldc);
        ga.bps = MHA__NR;
        ga.ldb = ldb;
        ga.acc = acc;
        ga.tail = f->tail;
        ga.bias = bias;
        mha__gemm(&ga);
    }
    for (; c0 < cols; c0 += MHA__CB) {
        cw = cols - c0 < MHA__CB ? cols - c0 : MHA__CB;
        if (tb)
            mha__pack_t(mha__elt(b, bt, bo + c0 * ldb), bt, ldb, cw, k, f->pb);
        else
            mha__pack_n(mha__elt(b, bt, bo + c0), bt, ldb, k, cw, f->pb);
        ga = mha__mm(rows, cw, k, a, lda, f->pb, c + c0, ldc);
        ga.acc = acc;
        ga.tail = f->tail;
        ga.bias = bias ? bias + c0 : NULL;
        mha__gemm(&ga);
    }
}

/* g[0..cols) += the column sums of x [rows][cols] (a bias's gradient). */
MHA__PRIVATE void mha__colsum(float *g, const float *x, size_t rows, size_t cols, size_t ldx) {
    size_t r, j;
    for (r = 0; g && r < rows; ++r)
        for (j = 0; j < cols; ++j) g[j] += x[r * ldx + j];
}

/* sum_j x[j] y[j], j < len */
MHA__PRIVATE float mha__vdot(const float *x, const float *y, size_t len) {
    mha__v acc = mha__vset(0.0f);
    float s;
    size_t j = 0;
    for (; j + MHA__VL <= len; j += MHA__VL) acc = mha__vfma(mha__vload(x + j), mha__vload(y + j), acc);
    s = mha__vhsum(acc);
    for (; j < len; ++j) s += x[j] * y[j];
    return s;
}

/* Step 2 for head l of the group, query rows t0 .. t0+rv-1 of the chunk. */
/* Step 2's probabilities: S [rv][cl] of head l's rows t0 .. (in f->s) under the rules, then by
   the pass: 1, each row's running max and sum (f->mx, f->l) only; 2, e^(s - mx) (with the
   forward's statistics also their sum); 0 and 3, P, and each row's sink share (share [rv]). */
MHA__PRIVATE MHA__NOINLINE void mha__bwf_probs(const mha__bwf *f, size_t l, size_t t0, size_t rv, float slope,
                                             float *share) {
    const float ninf = -(FLT_MAX * 2.0f);
    const mha__ctx *c = f->c;
    const mha_mask *mask = c->mask;
    const size_t i = f->g * c->grp + l, m = c->m, mcp = f->mcp, cl = f->cl, j0 = f->j0;
    const size_t row0 = f->b * c->n + t0, cp = MHA__UP(cl, MHA__VL), at = l * c->n + t0;
    size_t r;
    for (r = 0; r < rv; ++r) {
        float *x = f->s + r * mcp, sink = ninf, mx, sum;
        const size_t hi = mha__visible(mask, f->b, row0 + r, t0 + r, m);
        const size_t vis = hi <= j0 ? 0 : hi - j0 < cl ? hi - j0 : cl;
        const int64_t qpos = MHA__QPOS(c, t0 + r), d0 = qpos - MHA__DREF(c, qpos) - (int64_t)j0;
        sink = mha__row_sink(c, i, slope, qpos);
        mha__fast_rules(c, x, vis, cp, mask && mask->keep ? mask->keep + (row0 + r) * m + j0 : NULL,
                        mask && mask->bias ? mask->bias + (row0 + r) * m + j0 : NULL, c->scale, slope, d0);
        if (f->pass == 1) { /* the max and sum so far, online */
            float *pm = f->mx + at + r, *ps = f->l + at + r, mnew = mha__rowmax(x, cp, *pm);
            if (mnew == ninf) continue;
            *ps = *ps * mha__weight(*pm, mnew) + mha__softmax(x, cp, mnew);
            *pm = mnew;
            continue;
        }
        if (f->pass == 0) {
            mx = mha__rowmax(x, cp, sink);
            sum = mha__softmax(x, cp, mx) + mha__weight(sink, mx);
        } else if (f->pass == 2) { /* e^(s - mx), unnormalised; with the forward's statistics also their sum */
            sum = mha__softmax(x, cp, f->mx[at + r]);
            if (f->given) f->l[at + r] += sum;
            continue;
        } else {
            mx = f->mx[at + r];
            sum = f->l[at + r];
            mha__softmax(x, cp, mx);
        }
        if (sum == 0.0f) sum = 1.0f; /* every key masked: P is 0 */
        mha__vscale(x, cp, 1.0f / sum);
        share[r] = mha__weight(sink, mx) / sum; /* the sink's share of the row, for its gradient */
    }
}

/* Step 2's end for head i's rows t0 .. t0+rv-1 (inputs xq): dQ = dS K_c [rv][p_q], back through
   RoPE, then through W_q^(i): d_queries, gW_q, gb_q. */
MHA__PRIVATE MHA__NOINLINE void mha__bwf_dq(const mha__bwf *f, size_t i, size_t t0, size_t rv, const float *xq) {
    const mha__ctx *c = f->c;
    const mha__bwd *B = f->B;
    const mha_grads *g = B->g;
    const size_t pq = c->pq, mcp = f->mcp, cl = f->cl, row0 = f->b * c->n + t0;
    size_t r;
    mha__gemm_args ga = mha__mm(rv, pq, cl, f->ds, mcp, f->kn, f->dqp, pq);
    ga.tail = f->tail;
    mha__gemm(&ga);
    for (r = 0; r < rv && MHA__ROPE(c); ++r) mha__rope(c, f->dqp + r * pq, 1, 0, -MHA__QPOS(c, t0 + r), NULL);
    if (B->dq)
        mha__bwf_mm(f, rv, c->dq, pq, f->dqp, pq, 0, c->w->w_q, MHA__WTYPE(c), i * pq * c->dq, c->dq, 0,
                    B->dq + row0 * c->dq, c->dq, 1, NULL);
    if (g && g->w_q)
        mha__bwf_mm(f, pq, c->dq, rv, f->dqp, pq, 1, xq, MHA_F32, 0, c->dq, 0, g->w_q + i * pq * c->dq, c->dq, 1,
                    NULL);
    if (g) mha__colsum(g->b_q ? g->b_q + i * pq : NULL, f->dqp, rv, pq, pq);
}

MHA__PRIVATE void mha__bwf_block(const mha__bwf *f, size_t l, size_t t0, size_t rv) {
    const mha__ctx *c = f->c;
    const mha__bwd *B = f->B;
    const mha_grads *g = B->g;
    const size_t i = f->g * c->grp + l, pq = c->pq, pv = c->pv, mcp = f->mcp, cl = f->cl, j0 = f->j0;
    const size_t row0 = f->b * c->n + t0, at = l * c->n + t0;
    const float *xq = B->q + row0 * c->dq, *dout = B->dout + row0 * c->po;
    float slope = 0.0f, sw = 0.0f, D[MHA__BR], share[MHA__BR];
    size_t r, j;
    mha__gemm_args ga;

    /* Q [rv][p_q], rotated; dH [rv][p_v] (not in pass 1) */
    ga = mha__mm(rv, pq, c->dq, xq, c->dq, f->wq, f->qp, pq);
    ga.bias = c->w->b_q ? c->w->b_q + i * pq : NULL;
    ga.tail = f->tail;
    mha__gemm(&ga);
    slope = MHA__SLOPE(c, i);
    for (r = 0; r < rv && MHA__ROPE(c); ++r) mha__rope(c, f->qp + r * pq, 1, 0, MHA__QPOS(c, t0 + r), NULL);
    if (f->pass != 1) {
        mha__bwf_mm(f, rv, pv, c->po, dout, c->po, 0, c->w->w_o, MHA__WTYPE(c), i * pv, c->h * pv, 0, f->dh, pv, 0,
                    NULL);
    }

    /* S [rv][cl] under the rules, then P (pass 1: the statistics only) */
    ga = mha__mm(rv, cl, c->pk, f->qp, pq, f->kt, f->s, mcp);
    ga.tail = f->tail;
    mha__gemm(&ga);
    mha__bwf_probs(f, l, t0, rv, slope, share);
    if (f->pass == 1) return;

    /* dP = dH V_c^T [rv][cl]; D (pass 2: added up and kept) */
    ga = mha__mm(rv, cl, pv, f->dh, pv, f->vt, f->ds, mcp);
    ga.tail = f->tail;
    mha__gemm(&ga);
    for (r = 0; r < rv; ++r) {
        const float d = mha__vdot(f->s + r * mcp, f->ds + r * mcp, cl);
        if (f->pass == 2) {
            f->dd[at + r] += d;
            continue;
        }
        D[r] = f->pass == 0 ? d : f->dd[at + r];
        if (j0 == 0) sw += share[r] * D[r];
    }
    if (f->pass == 2) return;
    if (!MHA_NO_EXTRAS && g && g->sinks && c->w->sinks) g->sinks[i] -= sw; /* the sink's dP is 0 */

    /* the output projection's gradients: gW_o^(i)^T += (P V_c)^T dOut (in gwo), gb_o once */
    if (g && g->w_o) {
        ga = mha__mm(rv, pv, cl, f->s, mcp, f->vn, f->ho, pv);
        ga.tail = f->tail;
        mha__gemm(&ga);
        mha__bwf_mm(f, pv, c->po, rv, f->ho, pv, 1, dout, MHA_F32, 0, c->po, 0, f->gwo, c->po, 1, NULL);
    }
    if (g && i == 0 && j0 == 0) mha__colsum(g->b_o, dout, rv, c->po, c->po);

    /* dS = scale P o (dP - D) in place of dP */
    for (r = 0; r < rv; ++r) {
        const float *p = f->s + r * mcp;
        float *x = f->ds + r * mcp;
        for (j = 0; j < cl; ++j) x[j] = p[j] == 0.0f ? 0.0f : c->scale * p[j] * (x[j] - D[r]);
    }
    /* dV_c^T += dH^T P, dK_c^T += Q^T dS (the narrow factors transposed), dQ = dS K_c. A row whose dH
       is not finite adds its share of dV_c^T over the keys it sees (P != 0) itself and leaves the product,
       where 0 x NaN would reach the keys it cannot see (dS is 0 there already) */
    for (r = 0; r < rv; ++r) {
        float *dh = f->dh + r * pv;
        const float *p = f->s + r * mcp;
        size_t a;
        for (a = 0; a < pv && (mha__bits(dh[a]) & 0x7f800000u) != 0x7f800000u; ++a) {}
        if (a == pv) continue;
        for (j = 0; j < cl; ++j)
            for (a = 0; p[j] != 0.0f && a < pv; ++a) f->dvc[a * mcp + j] += dh[a] * p[j];
        mha__zero(dh, pv);
    }
    mha__bwf_mm(f, pv, cl, rv, f->dh, pv, 1, f->s, MHA_F32, 0, mcp, 0, f->dvc, mcp, 1, NULL);
    mha__bwf_mm(f, c->pk, cl, rv, f->qp, pq, 1, f->ds, MHA_F32, 0, mcp, 0, f->dkc, mcp, 1, NULL);
    mha__bwf_dq(f, i, t0, rv, xq);
}

/* Step 1 for keys j0 .. j0+cl-1 of the pass's batch entry and kv head: K_c
   (rotated) as K_c^T panels; but in pass 1, V_c as V_c^T panels; in passes
   0 and 3 also K_c and V_c as panels (dQ, P V) and dK_c, dV_c from 0. */
MHA__PRIVATE void mha__bwf_keys(mha__bwf *f) {
    const mha__ctx *c = f->c;
    const mha__bwd *B = f->B;
    const int type = MHA__WTYPE(c);
    const size_t cl = f->cl, pk = c->pk, pv = c->pv, at = f->b * c->m + f->j0;
    size_t j;
    mha__bwf_mm(f, cl, pk, c->dk, B->k + at * c->dk, c->dk, 0, c->w->w_k, type, f->g * pk * c->dk, c->dk, 1, f->kc,
                pk, 0, c->w->b_k ? c->w->b_k + f->g * pk : NULL);
    for (j = 0; j < cl && MHA__ROPE(c); ++j) mha__rope(c, f->kc + j * pk, 1, 0, (int64_t)(f->j0 + j), NULL);
    mha__pack_t(f->kc, MHA_F32, pk, cl, pk, f->kt);
    if (f->pass == 1) return;
    mha__bwf_mm(f, cl, pv, c->dv, B->v + at * c->dv, c->dv, 0, c->w->w_v, type, f->g * pv * c->dv, c->dv, 1, f->vc,
                pv, 0, c->w->b_v ? c->w->b_v + f->g * pv : NULL);
    mha__pack_t(f->vc, MHA_F32, pv, cl, pv, f->vt);
    if (f->pass == 2) return; /* (D needs K^T and V^T alone) */
    mha__pack_n(f->kc, MHA_F32, pk, cl, pk, f->kn);
    mha__pack_n(f->vc, MHA_F32, pv, cl, pv, f->vn);
    mha__zero(f->dkc, pk * f->mcp);
    mha__zero(f->dvc, pv * f->mcp);
}

/* Step 3 for one of K (which 0) and V (1): dX_c^T [p][mc] (dK_c^T back
   through the rotation) through W^(g) into d_keys or d_values and the
   weight's and bias's gradients. */
MHA__PRIVATE void mha__bwf_back(mha__bwf *f, int which) {
    const mha__ctx *c = f->c;
    const mha__bwd *B = f->B;
    const mha_grads *g = B->g;
    const int type = MHA__WTYPE(c);
    const size_t cl = f->cl, mc = f->mcp, p = which ? c->pv : c->pk, d = which ? c->dv : c->dk;
    const size_t at = f->b * c->m + f->j0, o0 = f->g * p;
    const void *W = which ? c->w->w_v : c->w->w_k;
    const float *x = (which ? B->v : B->k) + at * d;
    float *dt = which ? f->dvc : f->dkc, *dx = which ? B->dv : B->dk, *dr = which ? f->vc : f->kc; /* dr: [cl][p] */
    float *gw = g ? (which ? g->w_v : g->w_k) : NULL, *gb = g ? (which ? g->b_v : g->b_k) : NULL;
    size_t j, a;
    for (j = 0; j < cl; ++j) /* dX_c [cl][p] in the room of X_c, which is packed */
        for (a = 0; a < p; ++a) dr[j * p + a] = dt[a * mc + j];
    if (!which && MHA__ROPE(c)) {
        for (j = 0; j < cl; ++j) mha__rope(c, dr + j * p, 1, 0, -(int64_t)(f->j0 + j), NULL);
        for (j = 0; j < cl; ++j)
            for (a = 0; a < p; ++a) dt[a * mc + j] = dr[j * p + a];
    }
    if (dx) mha__bwf_mm(f, cl, d, p, dr, p, 0, W, type, o0 * d, d, 0, dx + at * d, d, 1, NULL);
    if (gw) mha__bwf_mm(f, p, d, cl, dt, mc, 0, x, MHA_F32, 0, d, 0, gw + o0 * d, d, 1, NULL);
    mha__colsum(gb ? gb + o0 : NULL, dr, cl, p, p);
}

/* One pass over the chunks of the pass's batch entry and kv head. */
MHA__PRIVATE void mha__bwf_pass(mha__bwf *f, int pass) {
    const mha__ctx *c = f->c;
    const int type = MHA__WTYPE(c);
    size_t l, t0, i, a, o, o0;
    f->pass = pass;
    for (f->j0 = 0; f->j0 < c->m; f->j0 += f->mc) {
        f->cl = c->m - f->j0 < f->mc ? c->m - f->j0 : f->mc;
        mha__bwf_keys(f);
        for (l = 0; l < c->grp; ++l) {
            i = f->g * c->grp + l; /* head i's weights as panels */
            mha__pack_t(mha__elt(c->w->w_q, type, i * c->pq * c->dq), type, c->dq, c->pq, c->dq, f->wq);
            if (f->B->g && f->B->g->w_o && (pass == 0 || pass == 3)) mha__zero(f->gwo, c->pv * c->po);
            for (t0 = 0; t0 < c->n; t0 += f->br)
                mha__bwf_block(f, l, t0, c->n - t0 < f->br ? c->n - t0 : f->br);
            if (f->B->g && f->B->g->w_o && (pass == 0 || pass == 3)) /* gW_o^(i) += gwo^T, 16 rows at a time */
                for (o0 = 0; o0 < c->po; o0 += 16)
                    for (a = 0; a < c->pv; ++a)
                        for (o = o0; o < c->po && o < o0 + 16; ++o)
                            f->B->g->w_o[o * c->h * c->pv + i * c->pv + a] += f->gwo[a * c->po + o];
        }
        if (pass == 0 || pass == 3) {
            mha__bwf_back(f, 0);
            mha__bwf_back(f, 1);
        }
    }
}

/* Kv head g of batch entry b: one pass, or with several chunks passes 1
   (unless the forward's lse is given), 2 and 3. */
MHA__PRIVATE void mha__bwf_group(mha__bwf *f, size_t b, size_t g) {
    const mha__ctx *c = f->c;
    const mha__bwd *B = f->B;
    size_t l, t, at;
    float sink;
    f->b = b;
    f->g = g;
    if (c->m <= MHA__BWC) {
        mha__bwf_pass(f, 0);
        return;
    }
    f->given = B->lse != NULL; /* a value that is not finite: this group's statistics as without lse */
    for (l = 0; l < c->grp && f->given; ++l)
        for (t = 0; t < c->n; ++t)
            f->given &= (mha__bits(B->lse[(b * c->h + g * c->grp + l) * c->n + t]) & 0x7f800000u) != 0x7f800000u;
    for (l = 0; l < c->grp; ++l) /* each row's max (or the forward's log-sum-exp), sum and D start */
        for (t = 0; t < c->n; ++t) {
            at = l * c->n + t;
            sink = mha__row_sink(c, g * c->grp + l, MHA__SLOPE(c, g * c->grp + l), MHA__QPOS(c, t));
            f->mx[at] = sink;
            if (f->given) {
                f->mx[at] = B->lse[(b * c->h + g * c->grp + l) * c->n + t];
                f->mx[at] += MHA__LSE_SHIFT(c, MHA__SLOPE(c, g * c->grp + l), t);
            }
            f->l[at] = mha__weight(sink, f->mx[at]); /* the sink's term */
            f->dd[at] = 0.0f;
        }
    if (!f->given) mha__bwf_pass(f, 1); /* the max and sum */
    mha__bwf_pass(f, 2);              /* D, from e^(s - max) (and with lse the sum) */
    for (at = 0; at < c->grp * c->n; ++at) f->dd[at] = f->l[at] == 0.0f ? 0.0f : f->dd[at] / f->l[at];
    mha__bwf_pass(f, 3);
}

/* The tasks of a fast backward call: mha_backward has one; mha_backward_parallel
   min(kv_heads, MHA__BWT), whatever parallel_for does, so that its result is the
   same, bit for bit, for any parallel_for. Task t takes kv heads t, t + T, ... of
   every batch entry (each weight's gradient rows belong to one task); all but task
   0 sum dQ, dK, dV in arrays of their own, added to task 0's in task order at the end. */
#define MHA__BWT ((size_t)8)
#define mha__bwf_tasks(c) ((c)->kv < MHA__BWT ? (c)->kv : MHA__BWT)
typedef struct mha__bwp {
    const mha__ctx *c;
    const mha__bwd *B;
    unsigned char *at;     /* task 0's part of the workspace: its mha__bwf, floats, own dQ, dK, dV */
    size_t stride, floats; /* bytes a task; offset of the own arrays in floats from the task's floats */
} mha__bwp;
/* The per-task bytes of T > 1 tasks: mha__bwf, its parts, its own dQ, dK, dV. */
MHA__PRIVATE size_t mha__bwf_stride(const mha__ctx *c, size_t parts, size_t *floats) {
    const size_t own = mha__add(mha__mul(mha__mul(c->batch, c->n), c->dq),
                                mha__mul(mha__mul(c->batch, c->m), mha__add(c->dk, c->dv)));
    *floats = MHA__UP(parts, MHA_WORKSPACE_ALIGN) / sizeof(float);
    return mha__add(mha__add(MHA__UP(sizeof(mha__bwf), MHA_WORKSPACE_ALIGN), MHA__UP(parts, MHA_WORKSPACE_ALIGN)),
                    MHA__UP(mha__mul(own, sizeof(float)), MHA_WORKSPACE_ALIGN));
}
MHA__PRIVATE void mha__bwf_task(void *arg, int32_t task) {
    const mha__bwp *p = (const mha__bwp *)arg;
    const mha__ctx *c = p->c;
    const size_t t = (size_t)task, T = p->B->tasks;
    mha__bwf *f = (mha__bwf *)(void *)(p->at + t * p->stride);
    float *ws = (float *)(void *)((unsigned char *)f + MHA__UP(sizeof(mha__bwf), MHA_WORKSPACE_ALIGN));
    mha__bwd B = *p->B; /* task t > 0: its own dQ [batch][n][d_q], dK [batch][m][d_k], dV [batch][m][d_v] */
    size_t b, g;
    mha__bwf_layout(f, c, ws);
    if (t) {
        float *own = ws + p->floats;
        B.dq = B.dq ? own : NULL;
        B.dk = B.dk ? own + c->batch * c->n * c->dq : NULL;
        B.dv = B.dv ? own + c->batch * (c->n * c->dq + c->m * c->dk) : NULL;
        mha__zero(own, c->batch * (c->n * c->dq + c->m * (c->dk + c->dv)));
    }
    f->B = &B;
    for (b = 0; b < c->batch; ++b)
        for (g = t; g < c->kv; g += T) mha__bwf_group(f, b, g);
    MHA__CLEAN();
}
/* The fast backward over the workspace's call state at ws (its tasks' parts from ws + MHA__BWD_SELF). */
MHA__PRIVATE MHA__NOINLINE void mha__bwf_run(const mha__ctx *c, mha__bwd *B, unsigned char *ws) {
    mha__bwp p;
    mha__bwf f;
    size_t t, k;
    const size_t nq = c->batch * c->n * c->dq, nk = c->batch * c->m * c->dk, nv = c->batch * c->m * c->dv;
    if (B->dq) mha__zero(B->dq, nq);
    if (B->dk) mha__zero(B->dk, nk);
    if (B->dv) mha__zero(B->dv, nv);
    p.c = c;
    p.B = B;
    p.at = ws + MHA__BWD_SELF;
    p.floats = 0;
    p.stride = B->tasks > 1 ? mha__bwf_stride(c, mha__bwf_layout(&f, c, NULL), &p.floats) : 0;
    mha__par(c, mha__bwf_task, &p, B->tasks);
    for (t = 1; t < B->tasks; ++t) { /* the tasks' own dQ, dK, dV added in task order */
        const float *own = (const float *)(const void *)(p.at + t * p.stride + MHA__UP(sizeof(mha__bwf), MHA_WORKSPACE_ALIGN)) +
                           p.floats;
        for (k = 0; B->dq && k < nq; ++k) B->dq[k] += own[k];
        for (k = 0; B->dk && k < nk; ++k) B->dk[k] += own[nq + k];
        for (k = 0; B->dv && k < nv; ++k) B->dv[k] += own[nq + nk + k];
    }
}
#endif /* MHA_FAST */

/* The sizes of a backward call and its workspace bytes (*bytes SIZE_MAX on
   an overflow, of the workspace or of any array of the call): the fast
   path's where it runs the call (mha__bwf_runs), else the reference's. */
MHA__PRIVATE int mha__bwd_setup(mha__ctx *c, const mha_shape *shape, const mha_weights *w, int32_t batch, int32_t n,
                                int32_t m, int fast, size_t *bytes) {
    int st = mha__setup(c, shape, w);
    if (st != MHA_OK || (st = mha__counts(c, batch, n, m)) != MHA_OK) return st;
    *bytes = mha__add(mha__mul(mha__bwd_floats(c), sizeof(float)), MHA_WORKSPACE_ALIGN + MHA__BWD_SELF);
#if MHA_FAST
    if (fast && mha__bwf_runs(c)) { /* fast 2: mha_backward_parallel's tasks, each with its own parts */
        mha__bwf f;
        size_t floats, parts = mha__bwf_layout(&f, c, NULL);
        *bytes = fast == 2 && mha__bwf_tasks(c) > 1
                     ? mha__add(mha__mul(mha__bwf_tasks(c), mha__bwf_stride(c, parts, &floats)),
                                MHA_WORKSPACE_ALIGN + MHA__BWD_SELF)
                     : mha__add(parts, MHA__BWF_SELF);
    }
#else
    (void)fast;
#endif
    if ((*bytes & 1u) || mha__layout(c, NULL) == SIZE_MAX) *bytes = SIZE_MAX;
    return MHA_OK;
}

MHA__PRIVATE size_t mha__bwd_size(const mha_shape *shape, int32_t batch, int32_t n, int32_t m, int fast) {
    mha__ctx c;
    size_t bytes;
    if (mha__bwd_setup(&c, shape, &mha__no_weights, batch, n, m, fast, &bytes) != MHA_OK) return 0;
    return bytes == SIZE_MAX ? 0 : bytes;
}
MHADEF size_t mha_backward_workspace_size(const mha_shape *shape, int32_t batch, int32_t n, int32_t m) {
    return mha__bwd_size(shape, batch, n, m, 1);
}
MHADEF size_t mha_backward_reference_workspace_size(const mha_shape *shape, int32_t batch, int32_t n, int32_t m) {
    return mha__bwd_size(shape, batch, n, m, 0);
}
MHADEF size_t mha_backward_parallel_workspace_size(const mha_shape *shape, int32_t batch, int32_t n, int32_t m) {
    return mha__bwd_size(shape, batch, n, m, 2);
}

/* mha_backward up to the work: the sizes and checks in the order of the
   error table, then the call state into the workspace; MHA__RUN (also for
   n = 0: the inputs' gradients are then 0) or the error; fast: the fast
   path's workspace where it runs the call. Kept out of line,
   so that its frame (the mha__ctx it checks) is gone when the work runs. */
MHA__PRIVATE MHA__NOINLINE int mha__bwd_enter(const mha_shape *shape, const mha_weights *w, int32_t batch, int32_t n,
                                             int32_t m, const float *queries, const float *keys, const float *values,
                                             const mha_mask *mask, const float *lse, const float *d_out,
                                             float *d_queries, float *d_keys, float *d_values,
                                             const mha_grads *grads, void *workspace, size_t workspace_bytes,
                                             int fast) {
    mha__ctx c;
    mha__why why; /* not read */
    mha__bwd *B;
    unsigned char *ws;
    size_t bytes, k;
    int st = mha__bwd_setup(&c, shape, w, batch, n, m, fast, &bytes);
    if (st != MHA_OK) return st;
    if (mha__check_weights(shape, w, 1, &why) != MHA_OK || !queries || !keys || !values || !d_out) return MHA_ERR_NULL;
    c.mask = mask;
    if (mask && mask->bias && mha__layout(&c, NULL) == SIZE_MAX) bytes = SIZE_MAX; /* the bias array's bytes */
    st = mha__check(&c, bytes, workspace_bytes, workspace);
    if (st != MHA__RUN && st != MHA_OK) return st;
    ws = (unsigned char *)mha__align(workspace);
    for (k = 0; k < sizeof c; ++k) /* byte by byte (no memcpy call), as mha__layout keeps it */
        ((volatile unsigned char *)ws)[k] = ((const unsigned char *)&c)[k];
    B = (mha__bwd *)(void *)(ws + MHA__BWD_CTX);
    B->q = queries;
    B->k = keys;
    B->v = values;
    B->dout = d_out;
    B->lse = lse;
    B->dq = d_queries;
    B->dk = d_keys;
    B->dv = d_values;
    B->g = grads;
#if MHA_FAST
    B->tasks = fast == 2 ? mha__bwf_tasks(&c) : 1;
    ((mha__ctx *)(void *)ws)->pfor = NULL; /* mha_backward_parallel sets its own */
    ((mha__ctx *)(void *)ws)->user = NULL;
#else
    B->tasks = 1;
#endif
    return MHA__RUN;
}

/* Runs a backward call that mha__bwd_enter set up in the workspace ws
   (aligned): on the fast path when fast and it can, else the reference. */
MHA__PRIVATE MHA__NOINLINE void mha__bwd_go(unsigned char *ws, int fast) {
    mha__ctx *c = (mha__ctx *)(void *)ws;
    if (MHA__ROPE(c)) mha__rope_base(c);
#if MHA_FAST
    if (fast && mha__bwf_runs(c)) {
        mha__bwf_run(c, (mha__bwd *)(void *)(ws + MHA__BWD_CTX), ws);
        return;
    }
#else
    (void)fast;
#endif
    mha__bwd_run(c, (mha__bwd *)(void *)(ws + MHA__BWD_CTX), (float *)(void *)(ws + MHA__BWD_SELF));
}

MHADEF mha_status mha_backward(const mha_shape *shape, const mha_weights *w, int32_t batch, int32_t n, int32_t m,
                               const float *queries, const float *keys, const float *values, const mha_mask *mask,
                               const float *lse, const float *d_out, float *d_queries, float *d_keys,
                               float *d_values, const mha_grads *grads, void *workspace, size_t workspace_bytes) {
    int st = mha__bwd_enter(shape, w, batch, n, m, queries, keys, values, mask, lse, d_out, d_queries, d_keys,
                            d_values, grads, workspace, workspace_bytes, 1);
    if (st != MHA__RUN) return (mha_status)st;
    mha__bwd_go((unsigned char *)mha__align(workspace), 1);
    return MHA_OK;
}

MHADEF mha_status mha_backward_parallel(const mha_shape *shape, const mha_weights *w, int32_t batch, int32_t n,
                                        int32_t m, const float *queries, const float *keys, const float *values,
                                        const mha_mask *mask, const float *lse, const float *d_out, float *d_queries,
                                        float *d_keys, float *d_values, const mha_grads *grads, void *workspace,
                                        size_t workspace_bytes, mha_parallel_for parallel_for, void *user) {
    int st = mha__bwd_enter(shape, w, batch, n, m, queries, keys, values, mask, lse, d_out, d_queries, d_keys,
                            d_values, grads, workspace, workspace_bytes, 2);
    unsigned char *ws;
    if (st != MHA__RUN) return (mha_status)st;
    ws = (unsigned char *)mha__align(workspace);
#if MHA_FAST
    ((mha__ctx *)(void *)ws)->pfor = parallel_for;
    ((mha__ctx *)(void *)ws)->user = user;
#else
    (void)parallel_for;
    (void)user;
#endif
    mha__bwd_go(ws, 2);
    return MHA_OK;
}

MHADEF mha_status mha_backward_reference(const mha_shape *shape, const mha_weights *w, int32_t batch, int32_t n,
                                         int32_t m, const float *queries, const float *keys, const float *values,
                                         const mha_mask *mask, const float *lse, const float *d_out,
                                         float *d_queries, float *d_keys, float *d_values, const mha_grads *grads,
                                         void *workspace, size_t workspace_bytes) {
    int st = mha__bwd_enter(shape, w, batch, n, m, queries, keys, values, mask, lse, d_out, d_queries, d_keys,
                            d_values, grads, workspace, workspace_bytes, 0);
    if (st != MHA__RUN) return (mha_status)st;
    mha__bwd_go((unsigned char *)mha__align(workspace), 0);
    return MHA_OK;
}

MHADEF size_t mha_cache_array_bytes(const mha_shape *shape, int32_t batch, int32_t capacity, int32_t type,
                                    int32_t which) {
    mha__ctx c;
    size_t bytes;
    if (mha__setup(&c, shape, &mha__no_weights) != MHA_OK || mha__counts(&c, batch, 0, capacity) != MHA_OK ||
        capacity < 1 || (uint32_t)which > 1u || (uint32_t)type > (uint32_t)MHA_I16 ||
        (MHA_NO_EXTRAS && type != MHA_F32 && type != MHA_I8 && type != MHA_I16))
        return 0;
    bytes = mha__rows_bytes(mha__mul(mha__mul(c.batch, c.kv), c.m), type, which ? c.pv : c.pk);
    return bytes == SIZE_MAX ? 0 : bytes;
}
MHADEF size_t mha_cache_bytes_typed(const mha_shape *shape, int32_t batch, int32_t capacity, int32_t type) {
    const size_t k = mha_cache_array_bytes(shape, batch, capacity, type, 0),
                 v = mha_cache_array_bytes(shape, batch, capacity, type, 1);
    return k && v && mha__add(k, v) != SIZE_MAX ? k + v : 0;
}
MHADEF size_t mha_cache_bytes(const mha_shape *shape, int32_t batch, int32_t capacity) {
    return mha_cache_bytes_typed(shape, batch, capacity, MHA_F32);
}
MHADEF void *mha_cache_row(const mha_shape *shape, const mha_cache *cache, int32_t batch, int32_t b,
                           int32_t kv_head, int32_t position, int32_t which) {
    mha__ctx c;
    size_t slot, cap, kept;
    int32_t len, type;
    if (!cache || !cache->k || !cache->v || !cache->length || b < 0 || b >= batch || kv_head < 0 || position < 0 ||
        (uint32_t)which > 1u || mha__setup(&c, shape, &mha__no_weights) != MHA_OK || (size_t)kv_head >= c.kv ||
        mha__ring_bad(cache, 0) ||
        (mha__types_bad(cache, 0, 0) && mha__types_bad(cache, 1, 0) && mha__types_bad(cache, 2, 0)))
        return NULL;
    type = which && cache->value_type ? cache->value_type : cache->type;
    /* the bytes of the batch's array fit size_t, so the row's byte offset does */
    if (mha__rows_bytes(mha__mul(mha__mul(MHA__SZ(batch), c.kv), (size_t)cache->capacity), (int)type,
                        which ? c.pv : c.pk) == SIZE_MAX)
        return NULL;
    len = cache->length[b];
    cap = (size_t)cache->capacity;
    kept = MHA__KEPT(cache);
    if (position >= len || (!cache->window && (size_t)position >= cap) ||
        (cache->window && (size_t)position >= kept && (size_t)(len - position) > cap - kept))
        return NULL; /* not held */
    slot = cache->window ? mha__pos_slot((size_t)position, kept, cap) : (size_t)position;
    return (unsigned char *)(which ? cache->v : cache->k) +
           mha__rows_bytes(((size_t)b * c.kv + (size_t)kv_head) * cap + slot, (int)type, which ? c.pv : c.pk);
}

/* Workspace bytes of a decode (fast 1: mha_decode's path) or an append. */
MHA__PRIVATE size_t mha__decode_bytes(const mha_shape *shape, int32_t batch, int32_t t, int32_t capacity, int fast) {
    mha__ctx c;
    mha_cache dummy; /* only its address: the cache arrays count in the sizes */
    size_t bytes;
    if (mha__setup(&c, shape, &mha__no_weights) != MHA_OK || mha__counts(&c, batch, t, t) != MHA_OK || capacity < 1)
        return 0;
#if MHA_FAST
    c.fast = fast && mha__dec_fits(&c); /* as mha__enter_cache decides */
#else
    (void)fast;
#endif
    c.ms = MHA__SZ(capacity);
    c.mp = 0;
    dummy.type = dummy.value_type = MHA_F32; /* the cache's bytes checked as floats (the size does not depend
                                                 on them) */
    c.cache = &dummy;
    bytes = mha__bytes(&c);
    return bytes == SIZE_MAX ? 0 : bytes;
}

MHADEF size_t mha_decode_workspace_size(const mha_shape *shape, int32_t batch, int32_t t, int32_t capacity) {
    return mha__decode_bytes(shape, batch, t, capacity, 1);
}

MHADEF size_t mha_decode_reference_workspace_size(const mha_shape *shape, int32_t batch, int32_t t,
                                                  int32_t capacity) {
    return mha__decode_bytes(shape, batch, t, capacity, 0);
}

MHADEF mha_status mha_cache_append(const mha_shape *shape, const mha_weights *w, mha_cache *cache, int32_t batch,
                                   int32_t t, const float *keys, const float *values, void *workspace,
                                   size_t workspace_bytes) {
    int st = mha__enter_cache(shape, w, cache, batch, t, NULL, NULL, keys, values, NULL, workspace,
                              workspace_bytes, 0 MHA__FAST_ARGS(1, NULL, NULL));
    return mha__decode_steps(st, workspace);
}

MHADEF mha_status mha_decode(const mha_shape *shape, const mha_weights *w, mha_cache *cache, int32_t batch,
                             int32_t t, const float *queries, const float *keys, const float *values, float *out,
                             void *workspace, size_t workspace_bytes) {
    int st = mha__enter_cache(shape, w, cache, batch, t, NULL, queries, keys, values, out, workspace,
                              workspace_bytes, 1 MHA__FAST_ARGS(1, NULL, NULL));
    return mha__decode_steps(st, workspace);
}

MHADEF mha_status mha_decode_parallel(const mha_shape *shape, const mha_weights *w, mha_cache *cache,
                                      int32_t batch, int32_t t, const float *queries, const float *keys,
                                      const float *values, float *out, void *workspace, size_t workspace_bytes,
                                      mha_parallel_for parallel_for, void *user) {
#if MHA_FAST
    int st = mha__enter_cache(shape, w, cache, batch, t, NULL, queries, keys, values, out, workspace,
                              workspace_bytes, 1, 1, parallel_for, user);
    return mha__decode_steps(st, workspace);
#else
    (void)parallel_for;
    (void)user;
    return mha_decode(shape, w, cache, batch, t, queries, keys, values, out, workspace, workspace_bytes);
#endif
}

MHADEF mha_status mha_decode_tree(const mha_shape *shape, const mha_weights *w, mha_cache *cache, int32_t batch,
                                  int32_t t, const int32_t *parents, const float *queries, const float *keys,
                                  const float *values, float *out, void *workspace, size_t workspace_bytes) {
    int st = mha__enter_cache(shape, w, cache, batch, t, parents, queries, keys, values, out, workspace,
                              workspace_bytes, 2 MHA__FAST_ARGS(1, NULL, NULL));
    return mha__decode_steps(st, workspace);
}

MHADEF mha_status mha_decode_reference(const mha_shape *shape, const mha_weights *w, mha_cache *cache,
                                       int32_t batch, int32_t t, const float *queries, const float *keys,
                                       const float *values, float *out, void *workspace, size_t workspace_bytes) {
#if MHA_FAST
    int st = mha__enter_cache(shape, w, cache, batch, t, NULL, queries, keys, values, out, workspace,
                              workspace_bytes, 1, 0, NULL, NULL);
    return mha__decode_steps(st, workspace);
#else
    return mha_decode(shape, w, cache, batch, t, queries, keys, values, out, workspace, workspace_bytes);
#endif
}

/* ---- int8 attention (mha_forward_q8) ----------------------------------------
   The same three stages in integers: project (mha__q8_linear on each row of
   queries, keys and values), attend (mha__q8_attend: scores, the shared
   visibility rules, an integer softmax, pooling) and output (mha__q8_linear
   on the heads). No float operation; int64 only for the rescales, the
   softmax's sum and its reciprocal. */

/* int64 -> int32, saturating; floor(x / 2^s) without shifting a negative
   number (implementation-defined in C). */
MHA__PRIVATE int32_t mha__q8_sat(int64_t x) {
    return x > INT32_MAX ? INT32_MAX : x < INT32_MIN ? INT32_MIN : (int32_t)x;
}
MHA__PRIVATE int64_t mha__q8_asr(int64_t x, int32_t s) { return x < 0 ? ~(~x >> s) : x >> s; }

/* x rescaled by r, for an r that mha__q8_rescale_ok accepts, the exact
   way: int64 products and shifts by 0 .. 62 bits (no undefined behaviour
   for any x). mha__q8_rescale below takes it only where x 2^shift
   overflows int32; it is the definition the fast form must equal. */
MHA__PRIVATE int32_t mha__q8_rescale_wide(int32_t x, mha_q8_rescale r) {
#if MHA_Q8_SINGLE_ROUNDING
    const int32_t total = 31 - r.shift; /* 1 .. 62 */
    return mha__q8_sat(mha__q8_asr((int64_t)x * r.multiplier + ((int64_t)1 << (total - 1)), total));
#else
    const int32_t left = r.shift > 0 ? r.shift : 0, right = r.shift > 0 ? 0 : -r.shift;
    /* 1. x multiplier 2^left / 2^31 rounded to nearest, ties up: TFLite's
          rounding doubling high multiply of x 2^left and the multiplier;
          where x 2^left overflows int32 (TFLite: undefined), the exact
          value, saturated */
    const int32_t hi = mha__q8_sat(mha__q8_asr((int64_t)x * r.multiplier + ((int64_t)1 << (30 - left)), 31 - left));
    /* 2. divided by 2^right, rounded half away from zero */
    const int64_t mask = ((int64_t)1 << right) - 1, rem = (int64_t)hi & mask;
    return (int32_t)(mha__q8_asr(hi, right) + (rem > (mask >> 1) + (hi < 0) ? 1 : 0));
#endif
}

/* floor(x / 2^s) for 0 <= s <= 31, without shifting a negative number. */
MHA__PRIVATE MHA__INLINE int32_t mha__q8_asr32(int32_t x, int32_t s) { return x < 0 ? ~(~x >> s) : x >> s; }

/* The same rescale with one 32 x 32 -> 64 product and shifts by constants
   (no 64-bit shift by a variable, which a 32-bit core makes a call):
   a = x 2^left fits int32 (else mha__q8_rescale_wide), P = a multiplier,
   |P| < 2^62. Both roundings are then, exactly:
     shift >= 0: floor((P + 2^30) / 2^31), which fits int32 (|a| <= 2^31,
                 multiplier < 2^31): the single rounding of x m / 2^(31 -
                 shift), and TFLite's doubling high multiply with nothing
                 left to divide;
     shift < 0, single: floor((P + 2^(30 + s)) / 2^(31 + s)), s = -shift,
                 = floor((f + 2^(s-1)) / 2^s) for f = floor(P / 2^31) (floors
                 nest) = floor(f / 2^s) + bit s - 1 of f;
     shift < 0, double: h = floor((P + 2^30) / 2^31), then divided by 2^s
                 rounded half away from zero as above.
   The tests compare both with an independent model on every shift and the
   edges of x 2^left (the -Os build, AVR's, runs the exact form alone). */
#ifdef __OPTIMIZE_SIZE__ /* -Os: the exact form alone, called (the int8 size budget) */
#define mha__q8_rescale mha__q8_rescale_wide
#else /* inline in the per-element loops: about 25 000 rescales a keyword-spotting layer */
MHA__PRIVATE MHA__INLINE int32_t mha__q8_rescale(int32_t x, mha_q8_rescale r) {
    const int32_t left = r.shift > 0 ? r.shift : 0, s = r.shift > 0 ? 0 : -r.shift;
    const int32_t lim = (int32_t)((uint32_t)1 << (31 - left) >> 1); /* 2^(30 - left) */
    int64_t p;
    int32_t h;
    if (left && (x >= 2 * lim || x < -2 * lim)) return mha__q8_rescale_wide(x, r);
    p = (int64_t)(x * ((int32_t)1 << left)) * r.multiplier;
#if MHA_Q8_SINGLE_ROUNDING
    if (s) {
        h = (int32_t)mha__q8_asr(p, 31);
        return mha__q8_asr32(h, s) + (int32_t)((uint32_t)h >> (s - 1) & 1u);
    }
#endif
    h = (int32_t)mha__q8_asr(p + ((int64_t)1 << 30), 31);
    {
        const uint32_t mask = ((uint32_t)1 << s) - 1u;
        return mha__q8_asr32(h, s) + (((uint32_t)h & mask) > (mask >> 1) + (uint32_t)(h < 0) ? 1 : 0);
    }
}
#endif

#if MHA__Q8_MVE
#ifdef __OPTIMIZE_SIZE__ /* Helium's helpers: called at -Os (each its own frame), inline otherwise */
#define MHA__Q8_VINLINE MHA__NOINLINE
#define MHA__Q8_VCALL MHA__NOINLINE
#else
#define MHA__Q8_VINLINE MHA__INLINE
#define MHA__Q8_VCALL
#endif
/* Helium: four rescales at once (TFLite's two roundings, as above): x
   2^left by VSHL (where a lane overflows, each lane by mha__q8_rescale
   instead), the doubling high multiply by VQRDMULH (its one saturating
   case, both operands INT32_MIN, cannot occur: multiplier >= 0), then the
   division by 2^s rounded half away from zero as VRSHL's round half up
   of h - 1 where h < 0 and s > 0 (VQADD: h = INT32_MIN stays, with the
   same result). r: four rescales in a row. */
MHA__PRIVATE MHA__Q8_VINLINE int32x4_t mha__q8_vrescale(int32x4_t x, const mha_q8_rescale *r) {
#if MHA_Q8_SINGLE_ROUNDING /* one by one */
    int32_t v[4];
    int k;
    vst1q_s32(v, x);
    for (k = 0; k < 4; ++k) v[k] = mha__q8_rescale(v[k], r[k]);
    return vld1q_s32(v);
#else
    const int32x4x2_t ms = vld2q_s32(&r->multiplier); /* val[0] multipliers, val[1] shifts */
    const int32x4_t left = vmaxq_s32(ms.val[1], vdupq_n_s32(0)), right = vminq_s32(ms.val[1], vdupq_n_s32(0));
    const int32x4_t a = vshlq_s32(x, left);
    int32x4_t h;
    if (vcmpneq_s32(a, vqshlq_s32(x, left))) { /* some x 2^left past int32 */
        int32_t v[4];
        int k;
        vst1q_s32(v, x);
        for (k = 0; k < 4; ++k) v[k] = mha__q8_rescale(v[k], r[k]);
        return vld1q_s32(v);
    }
    h = vqrdmulhq_s32(a, ms.val[0]);
    h = vqaddq_s32(h, vandq_s32(vshrq_n_s32(h, 31), vshrq_n_s32(right, 31)));
    return vrshlq_s32(h, right);
#endif
}
#endif

/* A rescale the int8 calls accept: shift in [-31, 30], multiplier 0 or in
   [2^30, 2^31). */
MHA__PRIVATE int mha__q8_rescale_ok(const mha_q8_rescale *r) {
    return r->shift >= -31 && r->shift <= 30 && (r->multiplier == 0 || r->multiplier >= (int32_t)1 << 30);
}

MHADEF int32_t mha_q8_rescale_apply(int32_t x, mha_q8_rescale r) {
    return mha__q8_rescale_ok(&r) ? mha__q8_rescale(x, r) : 0;
}

MHADEF mha_status mha_q8_rescale_make(double real, mha_q8_rescale *r) {
    int32_t e = 0;
    int64_t q;
    if (!r) return MHA_ERR_NULL;
    if (!(real >= 0.0 && real <= DBL_MAX)) return MHA_ERR_SHAPE;
    if (real == 0.0) {
        r->multiplier = r->shift = 0;
        return MHA_OK;
    }
    while (real >= 1.0) { /* real = f 2^e, f in [0.5, 1): exact, by powers of 2 */
        real *= 0.5;
        ++e;
    }
    while (real < 0.5) {
        real *= 2.0;
        --e;
    }
    q = (int64_t)(real * 2147483648.0); /* f 2^31 (exact) rounded half away from zero */
    if (real * 2147483648.0 - (double)q >= 0.5) ++q;
    if (q == (int64_t)1 << 31) {
        q >>= 1;
        ++e;
    }
    if (e > 30) return MHA_ERR_SHAPE;
    if (e < -31) q = e = 0; /* below 2^-32: 0, as TFLite */
    r->multiplier = (int32_t)q;
    r->shift = e;
    return MHA_OK;
}

MHA__PRIVATE int mha__q8_zero_ok(int32_t z) { return z >= -128 && z <= 127; }

/* One call of the int8 path: its sizes (h .. p_o in mha_shape's order, as
   mha__ctx), its arrays, and the workspace's parts (two more in
   MHA__Q8_SC, MHA__Q8_X16). */
typedef struct mha__q8 {
    size_t h, kv, dq, dk, dv, pq, pk, pv, po; /* mha_shape's order, as mha__ctx */
    size_t grp, batch, n, m;
    size_t mp;      /* key rows projected into kp, vp: m (mha_forward_q8) or 1 (decoding) */
    size_t tn;      /* decoding: the new tokens per sequence (n = tn, or 0 for an append) */
    const mha_q8_weights *w;
    const mha_q8_params *p;
    const mha_mask *mask;
    mha_cache *cache; /* NULL: mha_forward_q8 */
    const int8_t *queries, *keys, *values;
    int8_t *out;
    int8_t *kp;     /* [mp][kv*p_k]: the projected keys, all kv heads of key j side by side */
    int8_t *vp;     /* [mp][kv*p_v] */
    int8_t *qp;     /* [h*p_q]: one query row projected */
    int8_t *cat;    /* [h*p_v]: its heads */
    int16_t *q16;   /* [h*p_q]: the projected query row minus zero_q */
} mha__q8;
/* What the attend stage reads for one row and head, set in the workspace
   (after the call state: MHA__Q8_ROW) by the loop that calls it: position
   P's key at ka + (P mod ring) kst, its value at va + (P mod ring) vst; the
   row sees positions lo .. hi-1 (hi - lo <= m) where keep (by position;
   NULL: all) is nonzero. Not in mha__q8, so that the checks' frame, which
   holds one, stays small. */
typedef struct mha__q8_row {
    const int8_t *ka, *va;
    size_t kst, vst, ring, lo, hi;
    const uint8_t *keep;
} mha__q8_row;
#define MHA__Q8_ROW(c) ((mha__q8_row *)(void *)((unsigned char *)(c) + MHA__UP(sizeof(mha__q8), 8)))
/* The first two parts, at the state's end in the workspace (where c lies):
   sc [m], a row's scores, then its probabilities (m: the keys, or the
   cache's capacity); x16 [max(d_q, d_k, d_v, h*p_v)], a linear stage's
   input minus its zero point. */
#define MHA__Q8_SC(c) ((int32_t *)(void *)((unsigned char *)(c) + MHA__Q8_STATE))
#define MHA__Q8_X16(c) ((int16_t *)(void *)(MHA__Q8_SC(c) + (c)->m))

/* The shape's checks (MHA_ERR_NULL, MHA_ERR_SHAPE or MHA_OK): mha__setup's,
   then what the int8 path leaves out and its sums' limits. */
MHA__PRIVATE MHA__NOINLINE mha_status mha__q8_shape(const mha_shape *s) {
    size_t k;
    if (!s) return MHA_ERR_NULL;
    for (k = 0; k < MHA__SIZES; ++k) /* each >= 1; kv_heads 0 means heads */
        if (*(const int32_t *)(const void *)((const unsigned char *)s + k * sizeof(int32_t)) < (k == 1 ? 0 : 1))
            return MHA_ERR_SHAPE;
    if (s->heads % (s->kv_heads ? s->kv_heads : s->heads) != 0 || s->score != MHA_SCORE_DOT || s->p_q != s->p_k ||
        s->rope_dim || s->alibi || (mha__bits(s->softcap) & 0x7fffffffu) != 0 || /* as bits: no float */
        (mha__bits(s->scale) & 0x7f800000u) == 0x7f800000u)                    /* (nor soft float) here */
        return MHA_ERR_SHAPE;
    if (s->d_q > 65535 || s->d_k > 65535 || s->d_v > 65535 || s->p_q > 16384 || s->p_v > 65535 / s->heads)
        return MHA_ERR_SHAPE;
    return MHA_OK;
}

/* The shape's sizes into *c, once mha__q8_shape has passed it. */
MHA__PRIVATE void mha__q8_sizes(mha__q8 *c, const mha_shape *s) {
    size_t k;
    for (k = 0; k < MHA__SIZES; ++k) {
        int32_t v = *(const int32_t *)(const void *)((const unsigned char *)s + k * sizeof(int32_t));
        *(size_t *)(void *)((unsigned char *)&c->h + k * sizeof(size_t)) = MHA__SZ(k == 1 && v == 0 ? s->heads : v);
    }
    c->grp = c->h / c->kv;
}

/* The workspace: the call state at its first 8-byte boundary (mha__q8,
   then mha__q8_row), then the int32 scores, x16 and q16 (int16), then the
   int8 parts kp, vp, qp, cat.
   Its bytes (SIZE_MAX on overflow: saturating, also where size_t has 16
   bits), and where the state goes. */
#define MHA__Q8_STATE (MHA__UP(sizeof(mha__q8), 8) + MHA__UP(sizeof(mha__q8_row), sizeof(int32_t)))
MHA__PRIVATE size_t mha__q8_x16(const mha__q8 *c) { /* x16's length, even: q16 stays 4-byte aligned */
    size_t d = c->dq > c->dk ? c->dq : c->dk, hv = mha__mul(c->h, c->pv);
    d = d > c->dv ? d : c->dv;
    d = d > hv ? d : hv;
    return mha__add(d, d % 2);
}
MHA__PRIVATE size_t mha__q8_bytes(const mha__q8 *c) {
    /* sc [m] int32, and after cat a keep row [m] (decoding's mha__q8_kept) */
    size_t t = mha__add(mha__mul(c->m, sizeof(int32_t) + 1), mha__mul(c->mp, mha__mul(c->kv, mha__add(c->pk, c->pv))));
    t = mha__add(t, mha__mul(3, mha__mul(c->h, c->pq))); /* qp, q16 */
    t = mha__add(t, mha__add(mha__mul(c->h, c->pv), mha__mul(2, mha__q8_x16(c))));
    return mha__add(t, 7 + MHA__Q8_STATE);
}
MHA__PRIVATE mha__q8 *mha__q8_state(void *workspace) {
    return (mha__q8 *)(void *)((unsigned char *)workspace + (8 - (uintptr_t)workspace % 8) % 8);
}

MHADEF size_t mha_q8_workspace_size(const mha_shape *shape, int32_t batch, int32_t n, int32_t m) {
    mha__q8 c;
    size_t t;
    if (mha__q8_shape(shape) != MHA_OK || batch < 0 || n < 0 || m < 0 || m > ((int32_t)1 << 22)) return 0;
    mha__q8_sizes(&c, shape);
    c.m = c.mp = MHA__SZ(m);
    t = mha__q8_bytes(&c);
    return t == SIZE_MAX ? 0 : t;
}

/* The rows' ends of r_q, r_k, r_v, r_o in the rescales' list (ends[3]: all
   of them); MHA_ERR_NULL, MHA_ERR_SHAPE (also for a count past size_t) or
   MHA_OK. */
MHA__PRIVATE mha_status mha__q8_ends(const mha_shape *shape, size_t ends[4]) {
    mha_status st = mha__q8_shape(shape);
    size_t h, kv;
    if (st != MHA_OK) return st;
    h = MHA__SZ(shape->heads);
    kv = shape->kv_heads ? MHA__SZ(shape->kv_heads) : h;
    ends[0] = mha__mul(h, MHA__SZ(shape->p_q));
    ends[1] = mha__add(ends[0], mha__mul(kv, MHA__SZ(shape->p_k)));
    ends[2] = mha__add(ends[1], mha__mul(kv, MHA__SZ(shape->p_v)));
    ends[3] = mha__add(ends[2], MHA__SZ(shape->p_o));
    return ends[3] == SIZE_MAX ? MHA_ERR_SHAPE : MHA_OK;
}

MHADEF size_t mha_q8_rows(const mha_shape *shape) {
    size_t ends[4];
    return mha__q8_ends(shape, ends) == MHA_OK ? ends[3] : 0;
}

/* The eight tensor scales lie in mha_q8_scales' order from in_q, and the
   eight zero points first in mha_q8_params. */
typedef char mha__q8_zeros_holds[offsetof(mha_q8_params, zero_out) == 7 * sizeof(int32_t) ? 1 : -1];
typedef char mha__q8_scales_holds[offsetof(mha_q8_scales, out) - offsetof(mha_q8_scales, in_q) == 7 * sizeof(float)
                                      ? 1
                                      : -1];

/* mha_q8_prepare's and mha_q16_prepare's work before they write w and p:
   the checks, then the attend stage's two rescales into sh (score's factor
   s_q s_k scale log2(e) 2^16, or for 16x8 (wide) s_q s_k scale 65535 / 10)
   and each row's into rows once all are made; every shift at most 7 where
   wide. */
MHA__PRIVATE mha_status mha__q8_prep(const mha_shape *shape, const mha_q8_scales *scales, const void *w, const void *p,
                                     mha_q8_rescale *rows, size_t count, int wide, mha_q8_rescale sh[2],
                                     size_t ends[4]) {
    static const double log2e = 1.4426950408889634;
    const int32_t lim = wide ? 7 : 30;
    size_t r;
    mha_status st = mha__q8_ends(shape, ends);
    volatile float root, scale;
    double fs;
    if (st != MHA_OK) return st;
    if (!scales || !w || !p || !rows || !scales->w_q || !scales->w_k || !scales->w_v || !scales->w_o)
        return MHA_ERR_NULL;
    if (count < ends[3]) return MHA_ERR_WORKSPACE;
    for (r = 0; r < 8; ++r) {
        const float t = *(const float *)(const void *)((const unsigned char *)&scales->in_q + r * sizeof(float));
        if (!(t > 0.0f && t <= FLT_MAX)) return MHA_ERR_SHAPE;
    }
    root = MHA_SQRTF((float)shape->p_k); /* through a volatile float: rounded to float also on x87 */
    scale = shape->scale != 0.0f ? shape->scale : 1.0f / root;
    /* 1. the attend stage's two (a negative scale is not a rescale) */
    fs = (double)((double)((double)scales->q * (double)scales->k) * (double)scale);
    fs = wide ? fs / (10.0 / 65535.0) : fs * log2e * 65536.0;
    if (!(scale > 0.0f) || mha_q8_rescale_make(fs, &sh[0]) != MHA_OK ||
        mha_q8_rescale_make((double)((double)scales->v / 32768.0) / (double)scales->heads, &sh[1]) != MHA_OK ||
        sh[0].shift > lim || sh[1].shift > lim)
        return MHA_ERR_SHAPE;
    /* 2. a row's: s_in s_w[row] / s_out, checked before any is written */
    for (r = 0; r < 2 * ends[3]; ++r) {
        const size_t k = r % ends[3], part = k < ends[0] ? 0 : k < ends[1] ? 1 : k < ends[2] ? 2 : 3;
        const float *sw = part == 0 ? scales->w_q : part == 1 ? scales->w_k : part == 2 ? scales->w_v : scales->w_o;
        const float in = part == 0 ? scales->in_q : part == 1 ? scales->in_k : part == 2 ? scales->in_v : scales->heads;
        const float to = part == 0 ? scales->q : part == 1 ? scales->k : part == 2 ? scales->v : scales->out;
        const float s = sw[k - (part ? ends[part - 1] : 0)];
        mha_q8_rescale one;
        if (!(s > 0.0f && s <= FLT_MAX) ||
            mha_q8_rescale_make((double)((double)in * (double)s) / (double)to, &one) != MHA_OK || one.shift > lim)
            return MHA_ERR_SHAPE;
        if (r >= ends[3]) rows[k] = one; /* the second round writes */
    }
    return MHA_OK;
}

MHADEF mha_status mha_q8_prepare(const mha_shape *shape, const mha_q8_scales *scales, mha_q8_weights *w,
                                 mha_q8_params *p, mha_q8_rescale *rows, size_t count) {
    mha_q8_rescale sh[2];
    size_t ends[4];
    mha_status st = mha__q8_prep(shape, scales, w, p, rows, count, 0, sh, ends);
    if (st != MHA_OK) return st;
    w->r_q = rows;
    w->r_k = rows + ends[0];
    w->r_v = rows + ends[1];
    w->r_o = rows + ends[2];
    p->score = sh[0];
    p->head = sh[1];
    return MHA_OK;
}

/* The int8 products' kernel: x16 = x - zx as int16 (|x - zx| <= 255), laid
   out for mha__q8_dot, which gives sum_c w[c] x16[c] for int8 w (exact in
   int32: the callers' sums are bounded). With the Cortex-M DSP extension
   (MHA__Q8_DSP) four products take one 32-bit load of w, two SXTB16 and
   two SMLAD (two 16 x 16 multiply-adds each), with x16 held as (x0, x2),
   (x1, x3) per group of four; with Helium (MHA__Q8_MVE) eight products take
   a widening load of w (VLDRB.S16), a load of x16 (in order) and one
   VMLADAVA; elsewhere one product at a time, in order. Integer sums: the
   same result either way. */
MHA__PRIVATE void mha__q8_offset(const int8_t *x, int32_t zx, size_t d, int16_t *x16) {
    size_t i = 0;
#if MHA__Q8_DSP
    for (; i + 4 <= d; i += 4) {
        x16[i] = (int16_t)(x[i] - zx);
        x16[i + 1] = (int16_t)(x[i + 2] - zx);
        x16[i + 2] = (int16_t)(x[i + 1] - zx);
        x16[i + 3] = (int16_t)(x[i + 3] - zx);
    }
#endif
    for (; i < d; ++i) x16[i] = (int16_t)(x[i] - zx);
}
#if MHA__Q8_DSP
#define MHA__Q8_LOAD(p) ((int32_t) * (const mha__u32a *)(const void *)(p))
#define MHA__Q8_ROR8(u) ((int32_t)((uint32_t)(u) >> 8 | (uint32_t)(u) << 24))
#endif
MHA__PRIVATE int32_t mha__q8_dot(const int8_t *w, const int16_t *x16, size_t d) {
    const int8_t *end = w + d;
    int32_t acc = 0;
#if MHA__Q8_MVE
    for (; end - w >= 8; w += 8, x16 += 8) acc = vmladavaq_s16(acc, vldrbq_s16(w), vldrhq_s16(x16));
#elif MHA__Q8_DSP
    for (; end - w >= 4; w += 4, x16 += 4) { /* loads at any alignment (mha__u32a) */
        const int32_t u = MHA__Q8_LOAD(w);
        acc = __smlad(__sxtb16(u), MHA__Q8_LOAD(x16), acc);
        acc = __smlad(__sxtb16(MHA__Q8_ROR8(u)), MHA__Q8_LOAD(x16 + 2), acc);
    }
#endif
    for (; w < end; ++w, ++x16) acc += (int32_t)*w * *x16;
    return acc;
}
/* Two rows at once, w0 and w1 (each x16 load serves both): the sums into
   *a0 and *a1 (inlined into int8's and 16x8's linear stages). */
MHA__PRIVATE MHA__INLINE void mha__q8_dot2(const int8_t *w0, const int8_t *w1, const int16_t *x16, size_t d,
                                          int32_t *a0, int32_t *a1) {
    const int8_t *end = w0 + d;
    int32_t s0 = 0, s1 = 0;
#if MHA__Q8_MVE
    for (; end - w0 >= 8; w0 += 8, w1 += 8, x16 += 8) {
        const int16x8_t xv = vldrhq_s16(x16);
        s0 = vmladavaq_s16(s0, vldrbq_s16(w0), xv);
        s1 = vmladavaq_s16(s1, vldrbq_s16(w1), xv);
    }
#elif MHA__Q8_DSP
    for (; end - w0 >= 4; w0 += 4, w1 += 4, x16 += 4) {
        const int32_t u = MHA__Q8_LOAD(w0), v = MHA__Q8_LOAD(w1), xa = MHA__Q8_LOAD(x16), xb = MHA__Q8_LOAD(x16 + 2);
        s0 = __smlad(__sxtb16(u), xa, s0);
        s1 = __smlad(__sxtb16(v), xa, s1);
        s0 = __smlad(__sxtb16(MHA__Q8_ROR8(u)), xb, s0);
        s1 = __smlad(__sxtb16(MHA__Q8_ROR8(v)), xb, s1);
    }
#endif
    for (; w0 < end; ++w0, ++w1, ++x16) {
        s0 += (int32_t)*w0 * *x16;
        s1 += (int32_t)*w1 * *x16;
    }
    *a0 = s0;
    *a1 = s1;
}

#if MHA__Q8_MVE
/* Helium: four rows' sums sum_c W_rc (x_c - zx) at once (rows w0, w0 + d,
   ...), from int8 x as sum_c W_rc x_c - zx sum_c W_rc: sixteen products a
   VMLADAVA.S8, the row sums by VADDVA.S8 only where zx != 0; the same
   integers as mha__q8_dot
   (each part within int32: |W x| <= 2^14 a term, d <= 65535; the
   difference is the sum itself, taken modulo 2^32). */
MHA__PRIVATE MHA__Q8_VCALL void mha__q8_dot4(const int8_t *w0, size_t d, const int8_t *x, int32_t zx, int32_t acc[4]) {
    const int8_t *w1 = w0 + d, *w2 = w1 + d, *w3 = w2 + d;
    int32_t s0 = 0, s1 = 0, s2 = 0, s3 = 0, t0 = 0, t1 = 0, t2 = 0, t3 = 0;
    size_t c = 0;
    if (zx == 0) /* the common case: no row sums */
        for (; c + 16 <= d; c += 16) {
            const int8x16_t xv = vldrbq_s8(x + c);
            s0 = vmladavaq_s8(s0, vldrbq_s8(w0 + c), xv);
            s1 = vmladavaq_s8(s1, vldrbq_s8(w1 + c), xv);
            s2 = vmladavaq_s8(s2, vldrbq_s8(w2 + c), xv);
            s3 = vmladavaq_s8(s3, vldrbq_s8(w3 + c), xv);
        }
    for (; c + 16 <= d; c += 16) {
        const int8x16_t xv = vldrbq_s8(x + c), a = vldrbq_s8(w0 + c), b = vldrbq_s8(w1 + c),
                        e = vldrbq_s8(w2 + c), f = vldrbq_s8(w3 + c);
        s0 = vmladavaq_s8(s0, a, xv), t0 = vaddvaq_s8(t0, a);
        s1 = vmladavaq_s8(s1, b, xv), t1 = vaddvaq_s8(t1, b);
        s2 = vmladavaq_s8(s2, e, xv), t2 = vaddvaq_s8(t2, e);
        s3 = vmladavaq_s8(s3, f, xv), t3 = vaddvaq_s8(t3, f);
    }
    for (; c < d; ++c) {
        s0 += w0[c] * x[c], t0 += w0[c];
        s1 += w1[c] * x[c], t1 += w1[c];
        s2 += w2[c] * x[c], t2 += w2[c];
        s3 += w3[c] * x[c], t3 += w3[c];
    }
    acc[0] = (int32_t)((uint32_t)s0 - (uint32_t)zx * (uint32_t)t0);
    acc[1] = (int32_t)((uint32_t)s1 - (uint32_t)zx * (uint32_t)t1);
    acc[2] = (int32_t)((uint32_t)s2 - (uint32_t)zx * (uint32_t)t2);
    acc[3] = (int32_t)((uint32_t)s3 - (uint32_t)zx * (uint32_t)t3);
}
/* One row's (or key's) sum_c k_c (q_c - zq) from int8 k and q (pq of them)
   as sum k q - zq sum k: sixteen products a VMLADAVA.S8, the tail
   predicated (VCTP); the same integers. */
MHA__PRIVATE int32_t mha__q8_kdot(const int8_t *k, const int8_t *q, int32_t zq, size_t pq) {
    int32_t s = 0, t = 0;
    size_t a;
    for (a = 0; a < pq; a += 16) {
        const mve_pred16_t pr = vctp8q((uint32_t)(pq - a));
        const int8x16_t kv = vldrbq_z_s8(k + a, pr);
        s = vmladavaq_s8(s, kv, vldrbq_z_s8(q + a, pr));
        t = vaddvaq_s8(t, kv);
    }
    return (int32_t)((uint32_t)s - (uint32_t)zq * (uint32_t)t);
}
#endif

#if MHA__Q8_DSP && !defined(__OPTIMIZE_SIZE__)
/* DSP cores (not at -Os, for the size budget): four rows' sums at once
   from x16 as mha__q8_dot2 holds it, each load of x16 serving four rows;
   SXTB16 with its rotation by 8 in the instruction (GCC's intrinsic has
   none). */
MHA__PRIVATE MHA__INLINE int32_t mha__q8_sxtb16_ror8(int32_t u) {
    int32_t r;
    __asm__("sxtb16 %0, %1, ror #8" : "=r"(r) : "r"(u));
    return r;
}
#define MHA__Q8_DOT4 1
MHA__PRIVATE MHA__INLINE void mha__q8_dot4(const int8_t *w0, size_t d, const int16_t *x16, int32_t acc[4]) {
    const int8_t *end = w0 + d, *w1 = w0 + d, *w2 = w1 + d, *w3 = w2 + d;
    int32_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    for (; end - w0 >= 4; w0 += 4, w1 += 4, w2 += 4, w3 += 4, x16 += 4) {
        const int32_t xa = MHA__Q8_LOAD(x16), xb = MHA__Q8_LOAD(x16 + 2);
        const int32_t u0 = MHA__Q8_LOAD(w0), u1 = MHA__Q8_LOAD(w1), u2 = MHA__Q8_LOAD(w2), u3 = MHA__Q8_LOAD(w3);
        s0 = __smlad(__sxtb16(u0), xa, s0);
        s1 = __smlad(__sxtb16(u1), xa, s1);
        s2 = __smlad(__sxtb16(u2), xa, s2);
        s3 = __smlad(__sxtb16(u3), xa, s3);
        s0 = __smlad(mha__q8_sxtb16_ror8(u0), xb, s0);
        s1 = __smlad(mha__q8_sxtb16_ror8(u1), xb, s1);
        s2 = __smlad(mha__q8_sxtb16_ror8(u2), xb, s2);
        s3 = __smlad(mha__q8_sxtb16_ror8(u3), xb, s3);
    }
    for (; w0 < end; ++w0, ++w1, ++w2, ++w3, ++x16) {
        s0 += (int32_t)*w0 * *x16;
        s1 += (int32_t)*w1 * *x16;
        s2 += (int32_t)*w2 * *x16;
        s3 += (int32_t)*w3 * *x16;
    }
    acc[0] = s0, acc[1] = s1, acc[2] = s2, acc[3] = s3;
}
#else
#define MHA__Q8_DOT4 0
#endif

/* The linear stages for one row, y = W x for W = W_q (which 0), W_k (1),
   W_v (2) or W_o (3): y[r] = zy + rescale_r(b[r] + sum_c W[r][c] (x[c] -
   zx)), clamped to int8, with each matrix's rows, input size, rescales and
   zero points. The sum fits int32 (d <= 65535 terms of at most 255 128);
   the bias is added in int64 and the total saturated. Rows two at a time,
   x - zx in x16. */
/* zero + v as int8, saturated (without overflow: |zero| <= 128). */
MHA__PRIVATE MHA__INLINE int8_t mha__q8_clamp(int32_t v, int32_t zero) {
    return (int8_t)(v > 127 - zero ? 127 : v < -128 - zero ? -128 : v + zero);
}

/* Row r's output from its sum: zy + rescale_r(acc + b[r]), clamped. */
MHA__PRIVATE MHA__INLINE int8_t mha__q8_row_out(int32_t acc, const int32_t *bias, const mha_q8_rescale *rs, size_t r,
                                                int32_t zy) {
    return mha__q8_clamp(mha__q8_rescale(mha__q8_sat((int64_t)acc + (bias ? bias[r] : 0)), rs[r]), zy);
}

MHA__PRIVATE MHA__NOINLINE void mha__q8_linear(const mha__q8 *c, int which, const int8_t *x, int8_t *y) {
    const mha_q8_weights *w = c->w;
    const mha_q8_params *p = c->p;
    const int8_t *wt = which == 0 ? w->w_q : which == 1 ? w->w_k : which == 2 ? w->w_v : w->w_o;
    const int32_t *bias = which == 0 ? w->b_q : which == 1 ? w->b_k : which == 2 ? w->b_v : w->b_o;
    const mha_q8_rescale *rs = which == 0 ? w->r_q : which == 1 ? w->r_k : which == 2 ? w->r_v : w->r_o;
    const size_t rows = which == 0 ? c->h * c->pq : which == 1 ? c->kv * c->pk : which == 2 ? c->kv * c->pv : c->po;
    const size_t d = which == 0 ? c->dq : which == 1 ? c->dk : which == 2 ? c->dv : c->h * c->pv;
    const int32_t zy = which == 0 ? p->zero_q : which == 1 ? p->zero_k : which == 2 ? p->zero_v : p->zero_out;
    const int32_t zx = which == 0 ? p->zero_in_q : which == 1 ? p->zero_in_k : which == 2 ? p->zero_in_v : p->zero_heads;
    int16_t *x16 = MHA__Q8_X16(c);
    size_t r = 0;
    int32_t acc[MHA__Q8_MVE || MHA__Q8_DOT4 ? 4 : 2];
#if MHA__Q8_MVE
    for (; r + 4 <= rows; r += 4) { /* four rows a pass; saturated + bias, rescaled, + zy clamped: four at once */
        int32x4_t v;
        mha__q8_dot4(wt + r * d, d, x, zx, acc);
        v = vqaddq_s32(vld1q_s32(acc), bias ? vld1q_s32(bias + r) : vdupq_n_s32(0));
        v = vqaddq_s32(mha__q8_vrescale(v, rs + r), vdupq_n_s32(zy));
        vstrbq_s32(y + r, vmaxq_s32(vminq_s32(v, vdupq_n_s32(127)), vdupq_n_s32(-128)));
    }
    for (; r < rows; ++r) y[r] = mha__q8_row_out(mha__q8_kdot(wt + r * d, x, zx, d), bias, rs, r, zy);
#endif
    if (r < rows) mha__q8_offset(x, zx, d, x16);
#if MHA__Q8_DOT4
    for (; r + 4 <= rows; r += 4) {
        size_t k;
        mha__q8_dot4(wt + r * d, d, x16, acc);
        for (k = 0; k < 4; ++k) y[r + k] = mha__q8_row_out(acc[k], bias, rs, r + k, zy);
    }
#endif
    for (; r < rows; ++r) {
        if (r % 2 == 0 && r + 1 < rows)
            mha__q8_dot2(wt + r * d, wt + (r + 1) * d, x16, d, &acc[0], &acc[1]);
        else if (r % 2 == 0)
            acc[0] = mha__q8_dot(wt + r * d, x16, d);
        y[r] = mha__q8_row_out(acc[r % 2], bias, rs, r, zy);
    }
}

/* A head's element from its sum (acc) where the row sees a key (seen):
   zero_heads + rescale_head(acc), clamped to int8; else zero_heads. */
MHA__PRIVATE MHA__INLINE int8_t mha__q8_head(const mha_q8_params *p, int32_t acc, int seen) {
    return mha__q8_clamp(seen ? mha__q8_rescale(acc, p->head) : 0, p->zero_heads);
}
#if MHA__Q8_MVE
/* Four of them at once (a key seen): into ho where pr says. */
MHA__PRIVATE MHA__Q8_VINLINE void mha__q8_head4(const mha_q8_params *p, int32x4_t acc, const mha_q8_rescale *h4, int8_t *ho,
                                            mve_pred16_t pr) {
    const int32x4_t v = vqaddq_s32(mha__q8_vrescale(acc, h4), vdupq_n_s32(p->zero_heads));
    vstrbq_p_s32(ho, vmaxq_s32(vminq_s32(v, vdupq_n_s32(127)), vdupq_n_s32(-128)), pr);
}
#endif

/* 2^(y / 65536) for y <= 0, in Q15 (0 .. 32768): y = -(16 k + i + r / 4096)
   / 16 in 16ths; 2^(-i/16) from a table (Q31), 2^(-r/65536) = e^(-z),
   z = r ln2 / 65536 < 0.0434, by 1 - z + z^2/2 - z^3/6 (error < 1.6e-7),
   then the product shifted right by k, rounded. Every step in integers. */
MHA__PRIVATE uint32_t mha__q8_exp2(int32_t y) {
    static const uint32_t pow2[16] = { /* round(2^(31 - i/16)) */
        2147483648u, 2056437387u, 1969251188u, 1885761398u, 1805811301u, 1729250827u, 1655936265u, 1585730000u,
        1518500250u, 1454120821u, 1392470869u, 1333434672u, 1276901417u, 1222764986u, 1170923762u, 1121280436u};
    const uint32_t u = 0u - (uint32_t)y, k = u >> 16, r = u & 4095u;
    uint32_t z, z2, z3, poly, t;
    if (k > 15) return 0;
    z = (uint32_t)(((uint64_t)r * 1488522236u + 32768u) >> 16); /* Q31; 1488522236 = round(ln2 2^31) */
    z2 = (uint32_t)(((uint64_t)z * z + ((uint32_t)1 << 30)) >> 31);
    z3 = (uint32_t)(((uint64_t)z2 * z + ((uint32_t)1 << 30)) >> 31);
    poly = 2147483648u - z + (z2 >> 1) - (z3 + 3u) / 6u;
    t = (uint32_t)(((uint64_t)pow2[(u >> 12) & 15u] * poly + ((uint32_t)1 << 30)) >> 31);
    return (t + ((uint32_t)1 << (k + 15))) >> (k + 16);
}

/* The attend stage for one query row and head i (its projection in c->q16,
   its keys and values as c->ka .. c->keep say): heads' block i of c->cat.
     1. scores S_j = sum (q - zero_q)(k_j - zero_k) of the visible keys, as
        sum k_j (q - zero_q) - zero_k sum (q - zero_q), and their max; a
        masked key's is INT32_MIN, which no score reaches (|S_j| <= 255^2
        p_q < 2^30)
     2. e_j = 2^(rescale_score(S_j - max) / 65536) in Q15 (the max's is
        32768; a masked key's 0), their sum (int64)
     3. p_j = e_j R / 2^31 rounded, R = 2^46 / sum rounded: Q15
        probabilities
     4. head_c = zero_heads + rescale_head(sum_j p_j (v_jc - zero_v)), the
        sum as sum_j p_j v_jc - zero_v sum_j p_j (a key of p_j = 0 adds
        nothing); every key masked: zero_heads */
#if MHA__Q8_MVE
/* Helium's parts of the attend stage below (and mha__q8_kdot above). */
/* step 1: the scores of keys lo .. hi - 1 into sc, their max returned; a
   query of at most 16 values held in one vector for every key. */
MHA__PRIVATE MHA__Q8_VCALL int32_t mha__q8_scores(const mha__q8 *c, size_t i, int32_t qsum, size_t first, int32_t *sc) {
    const mha__q8_row *r = MHA__Q8_ROW(c);
    const int8_t *q = c->qp + i * c->pq;
    const int32_t zq = c->p->zero_q, zk = c->p->zero_k;
    const mve_pred16_t pr = vctp8q((uint32_t)c->pq);
    const int8x16_t qv = vldrbq_z_s8(q, pr);
    int32_t mx = INT32_MIN;
    size_t j, n = r->hi - r->lo, slot;
    if (!r->keep && c->pq <= 16) { /* the common case, without a test a key */
        const int32_t off = zk * qsum;
        for (j = 0, slot = first; j < n; ++j, slot = slot + 1 == r->ring ? 0 : slot + 1) {
            const int8x16_t kv = vldrbq_z_s8(r->ka + slot * r->kst, pr);
            sc[j] = (int32_t)((uint32_t)vmladavq_s8(kv, qv) - (uint32_t)zq * (uint32_t)vaddvq_s8(kv)) - off;
            mx = sc[j] > mx ? sc[j] : mx;
        }
        return mx;
    }
    for (j = 0, slot = first; j < n; ++j, slot = slot + 1 == r->ring ? 0 : slot + 1) {
        const int8_t *k = r->ka + slot * r->kst;
        if (r->keep && !r->keep[r->lo + j]) {
            sc[j] = INT32_MIN;
            continue;
        }
        if (c->pq <= 16) {
            const int8x16_t kv = vldrbq_z_s8(k, pr);
            sc[j] = (int32_t)((uint32_t)vmladavq_s8(kv, qv) - (uint32_t)zq * (uint32_t)vaddvq_s8(kv)) - zk * qsum;
        } else
            sc[j] = mha__q8_kdot(k, q, zq, c->pq) - zk * qsum;
        if (sc[j] > mx) mx = sc[j];
    }
    return mx;
}
/* mha__q8_exp2 of four at once, the same integers: z = round(r c / 2^16)
   by VQRDMULH of r 2^15 and c, z^2 and z^3 by VQRDMULH (z >= 0, so
   (2ab + 2^31) >> 32 is (ab + 2^30) >> 31), z^3 / 6 by VMULH.U32 with
   0xAAAAAAAB and a shift of 2 (exact for every uint32), the table's value
   times poly by VRMULH.U32 of twice it (below 2^32 but for 2^31, whose
   product is poly itself), the last rounding shift by VRSHL (k > 15: 0). */
MHA__PRIVATE MHA__Q8_VINLINE uint32x4_t mha__q8_vexp2(int32x4_t y) {
    static const uint32_t pow2[16] = { /* round(2^(31 - i/16)) */
        2147483648u, 2056437387u, 1969251188u, 1885761398u, 1805811301u, 1729250827u, 1655936265u, 1585730000u,
        1518500250u, 1454120821u, 1392470869u, 1333434672u, 1276901417u, 1222764986u, 1170923762u, 1121280436u};
    const uint32x4_t u = vsubq_u32(vdupq_n_u32(0), vreinterpretq_u32_s32(y)), k = vshrq_n_u32(u, 16);
    const uint32x4_t idx = vandq_u32(vshrq_n_u32(u, 12), vdupq_n_u32(15));
    const int32x4_t r = vreinterpretq_s32_u32(vandq_u32(u, vdupq_n_u32(4095)));
    const int32x4_t z = vqrdmulhq_s32(vshlq_n_s32(r, 15), vdupq_n_s32(1488522236));
    const int32x4_t z2 = vqrdmulhq_s32(z, z), z3 = vqrdmulhq_s32(z2, z);
    const uint32x4_t sixth = vshrq_n_u32(vmulhq_u32(vaddq_u32(vreinterpretq_u32_s32(z3), vdupq_n_u32(3)),
                                                    vdupq_n_u32(0xAAAAAAABu)), 2);
    const uint32x4_t poly = vsubq_u32(vaddq_u32(vsubq_u32(vdupq_n_u32(2147483648u), vreinterpretq_u32_s32(z)),
                                                vshrq_n_u32(vreinterpretq_u32_s32(z2), 1)), sixth);
    const uint32x4_t p2 = vldrwq_gather_shifted_offset_u32(pow2, idx);
    const uint32x4_t t = vpselq_u32(poly, vrmulhq_u32(vshlq_n_u32(p2, 1), poly), vcmpeqq_n_u32(idx, 0));
    const int32x4_t sh = vnegq_s32(vreinterpretq_s32_u32(vaddq_u32(vminq_u32(k, vdupq_n_u32(16)), vdupq_n_u32(16))));
    return vpselq_u32(vdupq_n_u32(0), vrshlq_u32(t, sh), vcmphiq_n_u32(k, 15));
}
/* step 2 four scores at once: their rescales by mha__q8_vrescale (the
   score's rescale four times), a masked key's (INT32_MIN) made INT32_MIN,
   whose 2^(y/65536) is 0; their exps by mha__q8_vexp2. The sum of the e_j. */
MHA__PRIVATE MHA__Q8_VCALL uint64_t mha__q8_exps(int32_t *sc, size_t n, int32_t mx, const mha_q8_params *p) {
    const mha_q8_rescale r4[4] = {p->score, p->score, p->score, p->score};
    uint64_t sum = 0;
    size_t j, l;
    for (j = 0; j < n; j += 4) {
        const mve_pred16_t pr = vctp32q((uint32_t)(n - j));
        const int32x4_t x = vldrwq_z_s32(sc + j, pr), min = vdupq_n_s32(INT32_MIN);
        uint32_t e[4];
        vst1q_u32(e, mha__q8_vexp2(vpselq_s32(min, mha__q8_vrescale(vsubq_s32(x, vdupq_n_s32(mx)), r4),
                                              vcmpeqq_s32(x, min))));
        for (l = 0; l < 4 && j + l < n; ++l) sum += (uint32_t)(sc[j + l] = (int32_t)e[l]);
    }
    return sum;
}
/* step 4 sixteen columns a pass: sum_j p_j v_jc into four vectors
   (VLDRB.S32, VMLA), then head_c four at once; where no key is seen, the
   heads' zero point. */
MHA__PRIVATE MHA__Q8_VCALL void mha__q8_pv16(const mha__q8 *c, const int32_t *sc, size_t n, size_t first, int32_t base, size_t a,
                               int8_t *ho) {
    const mha__q8_row *r = MHA__Q8_ROW(c);
    const mha_q8_rescale h4[4] = {c->p->head, c->p->head, c->p->head, c->p->head};
    const uint32_t rem = (uint32_t)(c->pv - a);
    const mve_pred16_t p0 = vctp32q(rem), p1 = vctp32q(rem > 4 ? rem - 4 : 0), p2 = vctp32q(rem > 8 ? rem - 8 : 0),
                       p3 = vctp32q(rem > 12 ? rem - 12 : 0);
    int32x4_t a0 = vdupq_n_s32(base), a1 = a0, a2 = a0, a3 = a0;
    size_t j, slot;
    for (j = 0, slot = first; rem >= 16 && j < n; ++j, slot = slot + 1 == r->ring ? 0 : slot + 1) { /* unpredicated */
        const int8_t *v = r->va + slot * r->vst + a;
        a0 = vmlaq_n_s32(a0, vldrbq_s32(v), sc[j]);
        a1 = vmlaq_n_s32(a1, vldrbq_s32(v + 4), sc[j]);
        a2 = vmlaq_n_s32(a2, vldrbq_s32(v + 8), sc[j]);
        a3 = vmlaq_n_s32(a3, vldrbq_s32(v + 12), sc[j]);
    }
    for (j = rem >= 16 ? n : 0, slot = first; j < n; ++j, slot = slot + 1 == r->ring ? 0 : slot + 1) {
        const int8_t *v = r->va + slot * r->vst + a;
        a0 = vmlaq_n_s32(a0, vldrbq_z_s32(v, p0), sc[j]);
        a1 = vmlaq_n_s32(a1, vldrbq_z_s32(v + 4, p1), sc[j]);
        a2 = vmlaq_n_s32(a2, vldrbq_z_s32(v + 8, p2), sc[j]);
        a3 = vmlaq_n_s32(a3, vldrbq_z_s32(v + 12, p3), sc[j]);
    }
    mha__q8_head4(c->p, a0, h4, ho + a, p0);
    mha__q8_head4(c->p, a1, h4, ho + a + 4, p1);
    mha__q8_head4(c->p, a2, h4, ho + a + 8, p2);
    mha__q8_head4(c->p, a3, h4, ho + a + 12, p3);
}
/* step 3 four at once: p_j = (e_j R + 2^30) >> 31 as VRMULH.U32 of 2 e_j
   (<= 2^16) and R: (2 e_j R + 2^31) >> 32, the same. Their sum. */
MHA__PRIVATE MHA__Q8_VCALL int32_t mha__q8_probs(int32_t *sc, size_t n, uint32_t recip) {
    uint32_t psum = 0;
    size_t j;
    for (j = 0; j < n; j += 4) {
        const mve_pred16_t pr = vctp32q((uint32_t)(n - j));
        const uint32x4_t p = vrmulhq_u32(vshlq_n_u32(vldrwq_z_u32((const uint32_t *)sc + j, pr), 1), vdupq_n_u32(recip));
        vstrwq_p_u32((uint32_t *)sc + j, p, pr);
        psum = vaddvaq_p_u32(psum, p, pr);
    }
    return (int32_t)psum;
}
MHA__PRIVATE void mha__q8_pv(const mha__q8 *c, const int32_t *sc, size_t n, size_t first, int32_t base, int seen,
                             int8_t *ho) {
    size_t a;
    for (a = 0; a < c->pv; a += 16)
        if (seen) mha__q8_pv16(c, sc, n, first, base, a, ho);
    for (a = 0; !seen && a < c->pv; ++a) ho[a] = mha__q8_head(c->p, 0, 0);
}
#else
/* The same parts in plain C (SMLAD products with the DSP extension). */
MHA__PRIVATE MHA__INLINE int32_t mha__q8_scores(const mha__q8 *c, size_t i, int32_t qsum, size_t first, int32_t *sc) {
    const mha__q8_row *r = MHA__Q8_ROW(c);
    const int16_t *q16 = c->q16 + i * c->pq;
    int32_t mx = INT32_MIN;
    size_t j, n = r->hi - r->lo, slot;
    for (j = 0, slot = first; j < n; ++j, slot = slot + 1 == r->ring ? 0 : slot + 1) {
        sc[j] = r->keep && !r->keep[r->lo + j] ? INT32_MIN
                                              : mha__q8_dot(r->ka + slot * r->kst, q16, c->pq) - c->p->zero_k * qsum;
        if (sc[j] > mx) mx = sc[j];
    }
    return mx;
}
MHA__PRIVATE MHA__INLINE uint64_t mha__q8_exps(int32_t *sc, size_t n, int32_t mx, const mha_q8_params *p) {
    uint64_t sum = 0;
    size_t j;
    for (j = 0; j < n; ++j) {
        sc[j] = sc[j] == INT32_MIN ? 0 : (int32_t)mha__q8_exp2(mha__q8_rescale(sc[j] - mx, p->score));
        sum += (uint32_t)sc[j];
    }
    return sum;
}
MHA__PRIVATE MHA__INLINE int32_t mha__q8_probs(int32_t *sc, size_t n, uint32_t recip) {
    int32_t psum = 0;
    size_t j;
    for (j = 0; j < n; ++j) {
        sc[j] = (int32_t)(((uint64_t)(uint32_t)sc[j] * recip + ((uint32_t)1 << 30)) >> 31);
        psum += sc[j];
    }
    return psum;
}
MHA__PRIVATE MHA__INLINE void mha__q8_pv(const mha__q8 *c, const int32_t *sc, size_t n, size_t first, int32_t base,
                                          int seen, int8_t *ho) {
    const mha__q8_row *r = MHA__Q8_ROW(c);
    size_t j, slot, a;
    for (a = 0; a < c->pv; ++a) {
        int32_t acc = base;
        for (j = 0, slot = first; j < n; ++j, slot = slot + 1 == r->ring ? 0 : slot + 1)
            acc += sc[j] * r->va[slot * r->vst + a];
        ho[a] = mha__q8_head(c->p, acc, seen);
    }
}
#endif

MHA__PRIVATE MHA__NOINLINE void mha__q8_attend(const mha__q8 *c, size_t i) {
    const mha_q8_params *p = c->p;
    const mha__q8_row *r = MHA__Q8_ROW(c);
    const size_t n = r->hi - r->lo, first = r->lo % r->ring;
    const int16_t *q16 = c->q16 + i * c->pq;
    int8_t *ho = c->cat + i * c->pv;
    int32_t *sc = MHA__Q8_SC(c), mx, qsum = 0, psum;
    uint64_t sum;
    uint32_t recip;
    size_t a;
    for (a = 0; a < c->pq; ++a) qsum += q16[a];
    /* 1. */
    mx = mha__q8_scores(c, i, qsum, first, sc);
    /* 2. */
    sum = mha__q8_exps(sc, n, mx, p);
    /* 3. sum >= 32768 where a key is seen, so R <= 2^31 */
    recip = sum ? (uint32_t)((((uint64_t)1 << 46) + sum / 2) / sum) : 0;
    psum = mha__q8_probs(sc, n, recip);
    /* 4. sum_j p_j <= 2^15 + m/2, so the sums fit int32 for m <= 2^22 */
    mha__q8_pv(c, sc, n, first, -p->zero_v * psum, sum != 0, ho);
}

/* The project stage for query row `row`: into qp, and q16 (less zero_q)
   per head. */
MHA__PRIVATE void mha__q8_project_q(const mha__q8 *c, size_t row) {
    size_t i;
    mha__q8_linear(c, 0, c->queries + row * c->dq, c->qp);
    for (i = 0; i < c->h; ++i) mha__q8_offset(c->qp + i * c->pq, c->p->zero_q, c->pq, c->q16 + i * c->pq);
}

/* mha_forward_q8's stages over batch entry b: keys and values projected
   (every kv head), then each query row projected, attended by every head
   (the masks' visible range and keep row), and its output. c lies in the
   workspace: the loop sets the attend stage's fields there. */
MHA__PRIVATE MHA__NOINLINE void mha__q8_compute(const mha__q8 *c) {
    mha__q8_row *r = MHA__Q8_ROW(c);
    size_t b, j, t, i;
    r->kst = c->kv * c->pk; /* the projected keys' rows hold every kv head */
    r->vst = c->kv * c->pv;
    r->ring = c->m ? c->m : 1;
    r->lo = 0;
    for (b = 0; b < c->batch; ++b) {
        for (j = 0; j < c->m; ++j) { /* K, V of every kv head */
            mha__q8_linear(c, 1, c->keys + (b * c->m + j) * c->dk, c->kp + j * c->kv * c->pk);
            mha__q8_linear(c, 2, c->values + (b * c->m + j) * c->dv, c->vp + j * c->kv * c->pv);
        }
        for (t = 0; t < c->n; ++t) {
            const size_t row = b * c->n + t;
            mha__q8_project_q(c, row);
            r->hi = mha__visible(c->mask, b, row, t, c->m);
            r->keep = c->mask && c->mask->keep ? c->mask->keep + row * c->m : NULL;
            for (i = 0; i < c->h; ++i) {
                r->ka = c->kp + i / c->grp * c->pk;
                r->va = c->vp + i / c->grp * c->pv;
                mha__q8_attend(c, i);
            }
            mha__q8_linear(c, 3, c->cat, c->out + row * c->po);
        }
    }
}

/* A row of a cache with kept first positions (s > 0): the attend stage
   walks every slot held, 0 .. min(e, capacity)-1, with a keep row by slot
   (the row's positions [0, s) and [lo, hi) marked through the slot rule;
   cross-attention: every slot held). The integer sums do not depend on the
   order of the keys, so this gives the bits of a walk by position. */
MHA__PRIVATE MHA__NOINLINE void mha__q8_kept(const mha__q8 *c, size_t e, size_t s) {
    mha__q8_row *r = MHA__Q8_ROW(c);
    uint8_t *keep = (uint8_t *)(c->cat + c->h * c->pv);
    const size_t held = e < c->m ? e : c->m;
    size_t p;
    for (p = 0; p < held; ++p) keep[p] = 0;
    for (p = 0; c->keys && p < r->hi; p = p + 1 == s && r->lo > s ? r->lo : p + 1) /* [0, s), [lo, hi) */
        keep[mha__pos_slot(p, s, c->m)] = 1;
    r->keep = c->keys ? keep : NULL;
    r->lo = 0;
    r->hi = held;
}

/* Decoding's stages over batch entry b: the t new keys and values projected
   into the cache's slots (kp, vp hold one row), then each new query
   projected, attended over the positions it sees (mha__decode_sees; the
   last capacity of them, through the slot rule; with kept first positions
   by mha__q8_kept), and its output; the
   length grows by t where keys were given. */
MHA__PRIVATE MHA__NOINLINE void mha__q8_decode(const mha__q8 *c) {
    mha__q8_row *r = MHA__Q8_ROW(c);
    mha_cache *cache = c->cache;
    const size_t cap = c->m, t = c->tn, kept = MHA__KEPT(cache); /* (0 without a window: checked) */
    size_t b, j, g, a, e, i;
    for (b = 0; b < c->batch; ++b) {
        e = (size_t)cache->length[b];
        for (j = 0; c->keys && j < t; ++j, ++e) { /* projected into kp, vp, then into position e's slot */
            int8_t *ck = (int8_t *)cache->k + (b * c->kv * cap + mha__pos_slot(e, kept, cap)) * c->pk;
            int8_t *cv = (int8_t *)cache->v + (b * c->kv * cap + mha__pos_slot(e, kept, cap)) * c->pv;
            mha__q8_linear(c, 1, c->keys + (b * t + j) * c->dk, c->kp);
            mha__q8_linear(c, 2, c->values + (b * t + j) * c->dv, c->vp);
            for (g = 0; g < c->kv; ++g) {
                for (a = 0; a < c->pk; ++a) ck[g * cap * c->pk + a] = c->kp[g * c->pk + a];
                for (a = 0; a < c->pv; ++a) cv[g * cap * c->pv + a] = c->vp[g * c->pv + a];
            }
        }
        for (j = 0; j < c->n; ++j) {
            mha__q8_project_q(c, b * c->n + j);
            mha__decode_sees(e, c->n, j, (size_t)cache->window, !c->keys, &r->lo, &r->hi);
            if (r->hi - r->lo > cap) r->lo = r->hi - cap; /* cross-attention: the last capacity held */
            r->kst = c->pk;
            r->vst = c->pv;
            r->ring = cap;
            r->keep = NULL;
            if (kept) mha__q8_kept(c, e, kept);
            for (i = 0; i < c->h; ++i) {
                r->ka = (const int8_t *)cache->k + (b * c->kv + i / c->grp) * cap * c->pk;
                r->va = (const int8_t *)cache->v + (b * c->kv + i / c->grp) * cap * c->pv;
                mha__q8_attend(c, i);
            }
            mha__q8_linear(c, 3, c->cat, c->out + (b * c->n + j) * c->po);
        }
        cache->length[b] = (int32_t)e;
    }
}

/* Whether the element count (= bytes) of every array of the call fits
   size_t: inputs, out, the keep mask (when given) and the weights, each a
   product of three sizes of mha__q8 (by their offsets). */
#define MHA__Q8_F(x) ((unsigned char)offsetof(mha__q8, x))
static const unsigned char mha__q8_arrays[9][3] = {
    {MHA__Q8_F(batch), MHA__Q8_F(n), MHA__Q8_F(dq)}, /* queries */
    {MHA__Q8_F(batch), MHA__Q8_F(m), MHA__Q8_F(dk)}, /* keys */
    {MHA__Q8_F(batch), MHA__Q8_F(m), MHA__Q8_F(dv)}, /* values */
    {MHA__Q8_F(batch), MHA__Q8_F(n), MHA__Q8_F(po)}, /* out */
    {MHA__Q8_F(h), MHA__Q8_F(pq), MHA__Q8_F(dq)},    /* w_q */
    {MHA__Q8_F(kv), MHA__Q8_F(pk), MHA__Q8_F(dk)},   /* w_k */
    {MHA__Q8_F(kv), MHA__Q8_F(pv), MHA__Q8_F(dv)},   /* w_v */
    {MHA__Q8_F(po), MHA__Q8_F(h), MHA__Q8_F(pv)},    /* w_o */
    {MHA__Q8_F(batch), MHA__Q8_F(n), MHA__Q8_F(m)},  /* keep, last */
};
MHA__PRIVATE MHA__NOINLINE int mha__q8_fits(const mha__q8 *c, int keep) {
    size_t k, f, p;
    for (k = 0; k < 8u + (keep ? 1u : 0u); ++k) {
        for (p = 1, f = 0; f < 3; ++f) p = mha__mul(p, MHA__SIZE(c, mha__q8_arrays[k][f]));
        if (p == SIZE_MAX) return 0;
    }
    return 1;
}

/* The parameters' checks: zero points in range, rescales valid. */
MHA__PRIVATE MHA__NOINLINE int mha__q8_params_ok(const mha__q8 *c) {
    const mha_q8_params *p = c->p;
    const mha_q8_weights *w = c->w;
    size_t k, j;
    for (k = 0; k < 8; ++k) /* zero_in_q .. zero_out */
        if (!mha__q8_zero_ok(*(const int32_t *)(const void *)((const unsigned char *)p + k * sizeof(int32_t))))
            return 0;
    if (!mha__q8_rescale_ok(&p->score) || !mha__q8_rescale_ok(&p->head)) return 0;
    for (k = 0; k < 4; ++k) { /* r_q [h p_q], r_k [kv p_k], r_v [kv p_v], r_o [p_o] */
        const mha_q8_rescale *r = k == 0 ? w->r_q : k == 1 ? w->r_k : k == 2 ? w->r_v : w->r_o;
        const size_t rows = k == 0 ? c->h * c->pq : k == 1 ? c->kv * c->pk : k == 2 ? c->kv * c->pv : c->po;
        for (j = 0; r && j < rows; ++j) /* NULL: not used by this call */
            if (!mha__q8_rescale_ok(&r[j])) return 0;
    }
    return 1;
}

/* A checked call's start: the parts' places in the workspace
   (mha__q8_bytes' order) into *c, and *c copied to the
   workspace's start byte by byte through a volatile pointer (no memcpy), so
   that the work runs with none of it on the caller's stack. MHA__RUN. */
MHA__PRIVATE int mha__q8_start(mha__q8 *c, void *workspace) {
    unsigned char *parts = (unsigned char *)mha__q8_state(workspace) + MHA__Q8_STATE;
    size_t k;
    c->q16 = (int16_t *)(void *)(parts + c->m * sizeof(int32_t)) + mha__q8_x16(c); /* x16 4-byte aligned, even */
    c->kp = (int8_t *)(c->q16 + c->h * c->pq);
    c->vp = c->kp + c->mp * c->kv * c->pk;
    c->qp = c->vp + c->mp * c->kv * c->pv;
    c->cat = c->qp + c->h * c->pq;
    for (k = 0; k < sizeof *c; ++k)
        ((volatile unsigned char *)(void *)mha__q8_state(workspace))[k] = ((const unsigned char *)c)[k];
    return MHA__RUN;
}

/* mha_forward_q8 up to the work: the checks in the order of the error
   table, then the call state into the workspace (mha__q8_start).
   MHA__RUN, or a status. */
MHA__PRIVATE MHA__NOINLINE int mha__q8_enter(const mha_shape *shape, const mha_q8_weights *w, const mha_q8_params *p,
                                            int32_t batch, int32_t n, int32_t m, const int8_t *queries,
                                            const int8_t *keys, const int8_t *values, const mha_mask *mask,
                                            int8_t *out, void *workspace, size_t workspace_bytes) {
    mha__q8 c;
    mha_status st;
    size_t bytes, t;
    if (!w || !p) return MHA_ERR_NULL;
    if ((st = mha__q8_shape(shape)) != MHA_OK) return st;
    mha__q8_sizes(&c, shape);
    if (batch < 0 || n < 0 || m < 0 || m > ((int32_t)1 << 22) || (mask && mask->bias)) return MHA_ERR_SHAPE;
    c.batch = MHA__SZ(batch);
    c.n = MHA__SZ(n);
    c.m = c.mp = MHA__SZ(m);
    c.w = w;
    c.p = p;
    c.mask = mask;
    c.cache = NULL;
    if (!w->w_q || !w->w_k || !w->w_v || !w->w_o || !w->r_q || !w->r_k || !w->r_v || !w->r_o || !queries ||
        !keys || !values || !out)
        return MHA_ERR_NULL;
    /* every array's bytes must fit size_t, as mha_forward's: before the rescales are read, whose
       counts are rows of the weights */
    bytes = mha__q8_bytes(&c);
    if (bytes == SIZE_MAX || !mha__q8_fits(&c, mask && mask->keep)) return MHA_ERR_OVERFLOW;
    if (!mha__q8_params_ok(&c)) return MHA_ERR_SHAPE;
    if (!workspace || workspace_bytes < bytes) return MHA_ERR_WORKSPACE;
    if (mask && mask->valid_lens)
        for (t = 0; t < c.batch * (mask->valid_lens_per_query ? c.n : 1); ++t)
            if (mask->valid_lens[t] < 0 || MHA__SZ(mask->valid_lens[t]) > c.m) return MHA_ERR_MASK;
    if (c.batch == 0 || c.n == 0) return MHA_OK;
    c.queries = queries;
    c.keys = keys;
    c.values = values;
    c.out = out;
    return mha__q8_start(&c, workspace);
}

/* Decoding (queries given) or appending in int8 up to the work: the checks
   in mha__enter_cache's order, then the call state into the workspace.
   MHA__RUN, or a status. */
MHA__PRIVATE MHA__NOINLINE int mha__q8_enter_cache(const mha_shape *shape, const mha_q8_weights *w,
                                                  const mha_q8_params *p, mha_cache *cache, int32_t batch, int32_t t,
                                                  const int8_t *queries, const int8_t *keys, const int8_t *values,
                                                  int8_t *out, void *workspace, size_t workspace_bytes, int decode) {
    mha__q8 c;
    mha_status st;
    size_t b, bytes;
    if (!w || !p) return MHA_ERR_NULL;
    if ((st = mha__q8_shape(shape)) != MHA_OK) return st;
    mha__q8_sizes(&c, shape);
    if (batch < 0 || t < 0) return MHA_ERR_SHAPE;
    if (!cache) return MHA_ERR_NULL;
    if (mha__ring_bad(cache, keys ? MHA__SZ(t) : 0) || cache->capacity > ((int32_t)1 << 22) ||
        mha__types_bad(cache, 1, 0))
        return MHA_ERR_SHAPE;
    if (!cache->k || !cache->v || !cache->length || !keys != !values || (!decode && !keys) ||
        (keys && (!w->w_k || !w->w_v || !w->r_k || !w->r_v)) ||
        (decode && (!queries || !out || !w->w_q || !w->w_o || !w->r_q || !w->r_o)))
        return MHA_ERR_NULL;
    c.batch = MHA__SZ(batch);
    c.n = decode ? MHA__SZ(t) : 0;
    c.tn = MHA__SZ(t);
    c.m = c.tn; /* the keys given (for their byte counts), then the capacity */
    c.w = w;
    c.p = p;
    c.mask = NULL;
    c.cache = cache;
    if (!mha__q8_fits(&c, 0) || mha__mul(mha__mul(mha__mul(c.batch, c.kv), MHA__SZ(cache->capacity)),
                                         mha__add(c.pk, c.pv)) == SIZE_MAX)
        return MHA_ERR_OVERFLOW;
    c.m = MHA__SZ(cache->capacity);
    c.mp = 1;
    if ((bytes = mha__q8_bytes(&c)) == SIZE_MAX) return MHA_ERR_OVERFLOW;
    if (!mha__q8_params_ok(&c)) return MHA_ERR_SHAPE;
    if (!workspace || workspace_bytes < bytes) return MHA_ERR_WORKSPACE;
    for (b = 0; b < c.batch; ++b) /* every length first, then the room */
        if (cache->length[b] < 0 || (!cache->window && cache->length[b] > cache->capacity)) return MHA_ERR_MASK;
    for (b = 0; keys && b < c.batch; ++b)
        if ((int64_t)cache->length[b] + (int64_t)t > (cache->window ? MHA__POS_MAX : cache->capacity))
            return MHA_ERR_CAPACITY;
    if (c.batch == 0 || c.tn == 0) return MHA_OK;
    c.queries = queries;
    c.keys = keys;
    c.values = values;
    c.out = out;
    return mha__q8_start(&c, workspace);
}

MHADEF mha_status mha_decode_q8(const mha_shape *shape, const mha_q8_weights *w, const mha_q8_params *p,
                                mha_cache *cache, int32_t batch, int32_t t, const int8_t *queries,
                                const int8_t *keys, const int8_t *values, int8_t *out, void *workspace,
                                size_t workspace_bytes) {
    int st =
        mha__q8_enter_cache(shape, w, p, cache, batch, t, queries, keys, values, out, workspace, workspace_bytes, 1);
    if (st != MHA__RUN) return (mha_status)st;
    mha__q8_decode(mha__q8_state(workspace));
    return MHA_OK;
}

MHADEF mha_status mha_cache_append_q8(const mha_shape *shape, const mha_q8_weights *w, const mha_q8_params *p,
                                      mha_cache *cache, int32_t batch, int32_t t, const int8_t *keys,
                                      const int8_t *values, void *workspace, size_t workspace_bytes) {
    int st = mha__q8_enter_cache(shape, w, p, cache, batch, t, NULL, keys, values, NULL, workspace, workspace_bytes, 0);
    if (st != MHA__RUN) return (mha_status)st;
    mha__q8_decode(mha__q8_state(workspace));
    return MHA_OK;
}

MHADEF size_t mha_q8_decode_workspace_size(const mha_shape *shape, int32_t batch, int32_t t, int32_t capacity) {
    mha__q8 c;
    size_t bytes;
    if (mha__q8_shape(shape) != MHA_OK || batch < 0 || t < 0 || capacity < 1 || capacity > ((int32_t)1 << 22))
        return 0;
    mha__q8_sizes(&c, shape);
    c.m = MHA__SZ(capacity);
    c.mp = 1;
    bytes = mha__q8_bytes(&c);
    return bytes == SIZE_MAX ? 0 : bytes;
}

MHADEF mha_status mha_forward_q8(const mha_shape *shape, const mha_q8_weights *w, const mha_q8_params *p,
                                 int32_t batch, int32_t n, int32_t m, const int8_t *queries, const int8_t *keys,
                                 const int8_t *values, const mha_mask *mask, int8_t *out, void *workspace,
                                 size_t workspace_bytes) {
    int st = mha__q8_enter(shape, w, p, batch, n, m, queries, keys, values, mask, out, workspace, workspace_bytes);
    if (st != MHA__RUN) return (mha_status)st;
    mha__q8_compute(mha__q8_state(workspace));
    return MHA_OK;
}

/* ---- 16x8 ------------------------------------------------------------------
   mha_forward_q16: int16 activations, int8 weights (docs/int8.md, "16x8").
   The int8 path's checks of the shape and the arrays' sizes, the masks' rules
   (mha__visible), and its own leaves: the int64 rescale, the linear stage and
   the attend stage with TFLite's int16 softmax. */

/* TFLite's tables for its int16 softmax (tests/q16_ref.py --tables): e^x
   for x in [-10, 0] and 1 / (1 + x) for x in [0, 1], 512 steps, in Q15. */
static const int16_t mha__q16_exp[513] = {
    2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3,
    3, 3, 3, 3, 3, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 6, 6, 6, 6, 6, 6, 6, 6, 7, 7, 7,
    7, 7, 7, 7, 7, 8, 8, 8, 8, 8, 8, 9, 9, 9, 9, 9, 9, 10, 10, 10, 10, 10, 11, 11, 11, 11, 11, 12, 12, 12, 12, 13, 13,
    13, 13, 14, 14, 14, 14, 15, 15, 15, 16, 16, 16, 17, 17, 17, 18, 18, 18, 19, 19, 19, 20, 20, 21, 21, 21, 22, 22, 23,
    23, 24, 24, 25, 25, 26, 26, 27, 27, 28, 28, 29, 29, 30, 30, 31, 32, 32, 33, 34, 34, 35, 36, 36, 37, 37, 38, 39, 40,
    40, 42, 42, 43, 44, 45, 45, 46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 59, 60, 60, 62, 63, 65, 65, 67, 68, 69,
    71, 73, 74, 75, 77, 78, 80, 81, 83, 85, 86, 88, 90, 92, 93, 95, 97, 99, 101, 103, 105, 107, 109, 112, 114, 116, 118,
    121, 123, 126, 128, 131, 133, 135, 139, 141, 144, 147, 149, 152, 155, 158, 162, 165, 168, 171, 174, 178, 181, 185,
    189, 192, 196, 200, 204, 208, 212, 217, 221, 225, 230, 234, 239, 243, 248, 253, 258, 263, 268, 273, 279, 284, 290,
    296, 302, 308, 314, 320, 327, 333, 340, 346, 353, 360, 366, 374, 381, 389, 397, 404, 413, 421, 429, 437, 446, 455,
    464, 473, 482, 492, 501, 511, 522, 532, 543, 553, 564, 575, 586, 598, 610, 622, 634, 646, 659, 672, 685, 699, 713,
    727, 741, 756, 771, 786, 801, 817, 833, 850, 866, 884, 901, 919, 937, 955, 974, 993, 1013, 1033, 1053, 1074, 1095,
    1117, 1139, 1161, 1184, 1207, 1232, 1256, 1281, 1306, 1332, 1358, 1385, 1412, 1440, 1468, 1497, 1527, 1557, 1587,
    1619, 1651, 1683, 1716, 1750, 1785, 1820, 1856, 1892, 1930, 1968, 2006, 2046, 2087, 2128, 2170, 2212, 2256, 2300,
    2346, 2392, 2439, 2488, 2537, 2587, 2638, 2690, 2743, 2796, 2852, 2908, 2966, 3024, 3084, 3145, 3207, 3270, 3334,
    3400, 3467, 3535, 3605, 3677, 3749, 3822, 3898, 3975, 4053, 4133, 4214, 4297, 4383, 4469, 4557, 4647, 4739, 4833,
    4927, 5024, 5124, 5225, 5328, 5433, 5541, 5649, 5761, 5875, 5991, 6109, 6230, 6352, 6477, 6605, 6736, 6868, 7004,
    7141, 7282, 7427, 7572, 7722, 7874, 8030, 8188, 8350, 8514, 8683, 8854, 9028, 9206, 9387, 9572, 9762, 9954, 10151,
    10351, 10555, 10763, 10976, 11191, 11412, 11637, 11867, 12102, 12341, 12583, 12831, 13085, 13342, 13606, 13874,
    14148, 14427, 14711, 15002, 15297, 15599, 15907, 16221, 16541, 16867, 17199, 17539, 17884, 18237, 18597, 18964,
    19338, 19719, 20108, 20505, 20909, 21322, 21742, 22171, 22608, 23054, 23509, 23973, 24445, 24928, 25419, 25921,
    26432, 26953, 27485, 28027, 28580, 29143, 29718, 30304, 30902, 31512, 32133, 32767};
static const int16_t mha__q16_recip[513] = {
    32767, 32704, 32640, 32578, 32514, 32451, 32388, 32326, 32264, 32202, 32141, 32079, 32018, 31957, 31896, 31835,
    31775, 31715, 31655, 31596, 31537, 31476, 31418, 31359, 31301, 31242, 31184, 31127, 31069, 31011, 30954, 30897,
    30840, 30784, 30727, 30671, 30615, 30560, 30504, 30449, 30394, 30339, 30283, 30229, 30175, 30121, 30067, 30013,
    29960, 29906, 29853, 29800, 29746, 29694, 29642, 29589, 29537, 29486, 29434, 29382, 29331, 29280, 29229, 29177,
    29127, 29076, 29026, 28976, 28926, 28877, 28827, 28777, 28728, 28679, 28630, 28581, 28532, 28484, 28436, 28388,
    28340, 28292, 28244, 28197, 28150, 28103, 28056, 28008, 27962, 27915, 27869, 27823, 27777, 27731, 27685, 27640,
    27594, 27549, 27504, 27459, 27413, 27369, 27324, 27280, 27236, 27192, 27148, 27104, 27060, 27016, 26973, 26930,
    26887, 26844, 26801, 26758, 26715, 26673, 26630, 26588, 26546, 26504, 26463, 26421, 26380, 26338, 26297, 26255,
    26214, 26174, 26132, 26092, 26051, 26011, 25971, 25931, 25891, 25851, 25811, 25772, 25732, 25693, 25653, 25614,
    25575, 25536, 25497, 25458, 25420, 25381, 25343, 25305, 25267, 25229, 25191, 25153, 25116, 25078, 25041, 25003,
    24967, 24928, 24892, 24855, 24818, 24781, 24745, 24709, 24672, 24636, 24600, 24564, 24528, 24492, 24457, 24421,
    24385, 24350, 24315, 24280, 24245, 24210, 24175, 24140, 24105, 24070, 24036, 24002, 23967, 23933, 23899, 23865,
    23831, 23798, 23764, 23730, 23697, 23664, 23630, 23597, 23564, 23530, 23498, 23465, 23432, 23399, 23366, 23334,
    23302, 23269, 23237, 23205, 23173, 23141, 23109, 23077, 23046, 23014, 22982, 22951, 22920, 22888, 22857, 22826,
    22795, 22764, 22733, 22703, 22672, 22641, 22611, 22580, 22550, 22520, 22490, 22459, 22429, 22400, 22370, 22340,
    22310, 22281, 22251, 22221, 22192, 22163, 22134, 22104, 22075, 22046, 22017, 21988, 21959, 21931, 21902, 21874,
    21845, 21817, 21788, 21760, 21732, 21704, 21676, 21648, 21620, 21592, 21565, 21537, 21509, 21482, 21455, 21427,
    21400, 21372, 21345, 21318, 21291, 21264, 21237, 21210, 21183, 21157, 21130, 21103, 21077, 21050, 21024, 20998,
    20971, 20945, 20919, 20893, 20867, 20841, 20815, 20790, 20764, 20738, 20713, 20687, 20662, 20636, 20611, 20586,
    20560, 20535, 20510, 20485, 20460, 20435, 20410, 20385, 20360, 20336, 20311, 20287, 20262, 20238, 20213, 20189,
    20165, 20141, 20117, 20092, 20068, 20044, 20021, 19997, 19973, 19949, 19926, 19902, 19878, 19855, 19832, 19808,
    19784, 19762, 19738, 19715, 19692, 19668, 19645, 19622, 19600, 19577, 19553, 19531, 19508, 19485, 19463, 19440,
    19418, 19395, 19373, 19351, 19328, 19306, 19284, 19262, 19240, 19218, 19196, 19174, 19152, 19130, 19109, 19087,
    19065, 19044, 19022, 19000, 18979, 18958, 18936, 18915, 18893, 18872, 18851, 18830, 18809, 18787, 18766, 18745,
    18725, 18704, 18682, 18662, 18641, 18620, 18600, 18579, 18559, 18538, 18518, 18497, 18477, 18457, 18436, 18416,
    18396, 18376, 18356, 18336, 18316, 18296, 18276, 18256, 18236, 18216, 18197, 18177, 18157, 18138, 18118, 18099,
    18079, 18059, 18040, 18021, 18001, 17982, 17963, 17944, 17924, 17905, 17886, 17867, 17848, 17829, 17810, 17791,
    17772, 17754, 17735, 17716, 17697, 17679, 17660, 17641, 17623, 17604, 17586, 17568, 17549, 17531, 17513, 17494,
    17476, 17458, 17440, 17422, 17404, 17386, 17368, 17350, 17332, 17314, 17296, 17278, 17261, 17243, 17225, 17208,
    17190, 17172, 17155, 17137, 17120, 17102, 17085, 17067, 17050, 17033, 17015, 16999, 16981, 16964, 16947, 16930,
    16913, 16895, 16878, 16862, 16845, 16828, 16810, 16794, 16777, 16760, 16743, 16727, 16710, 16693, 16677, 16660,
    16644, 16627, 16611, 16594, 16578, 16562, 16545, 16529, 16513, 16497, 16480, 16464, 16448, 16432, 16416, 16400,
    16384};

/* The table t at v in [-32768, 32767]: entry (v + 32768) / 128, plus the
   slope to the next times the remainder, in 128ths rounded (ties up). */
MHA__PRIVATE int32_t mha__q16_lut(int32_t v, const int16_t *t) {
    const uint32_t u = (uint32_t)(v + 32768), i = u >> 7;
    return t[i] + mha__q8_asr32((t[i + 1] - t[i]) * (int32_t)(u & 127u) + 64, 7);
}

/* x times r with its multiplier rounded to 16 bits, ties up (TFLite's int64
   MultiplyByQuantizedMultiplier; r's shift <= 7), x first saturated to
   [-2^47, 2^47) (TFLite: undefined past it); |result| < 2^54.
   mha__q16_rescale: then clamped to int16. */
MHA__PRIVATE int64_t mha__q16_mul(int64_t x, mha_q8_rescale r) {
    const int64_t lim = (int64_t)1 << 47;
    const int64_t red = r.multiplier < 0x7FFF0000 ? (r.multiplier + ((int32_t)1 << 15)) >> 16 : 0x7FFF;
    const int32_t total = 15 - r.shift; /* 8 .. 46 */
    x = x < -lim ? -lim : x >= lim ? lim - 1 : x;
    return mha__q8_asr(x * red + ((int64_t)1 << (total - 1)), total);
}
MHA__PRIVATE int16_t mha__q16_rescale(int64_t x, mha_q8_rescale r) {
    x = mha__q16_mul(x, r);
    return (int16_t)(x > 32767 ? 32767 : x < -32768 ? -32768 : x);
}

/* What the attend stage reads for one row and head (as mha__q8_row):
   position P's key at ka + (P mod ring) kst, its value at va + (P mod ring)
   vst; the row sees positions lo .. hi-1 (hi - lo <= m) where keep (by
   position; NULL: all) is nonzero. */
typedef struct mha__q16_row {
    const int16_t *ka, *va;
    size_t kst, vst, ring, lo, hi;
    const uint8_t *keep;
} mha__q16_row;

#define MHA__Q16_P16(c) ((int16_t *)(void *)((c)->sc + (c)->z.m))
/* One call of the 16x8 path: the sizes (z, as the int8 path's: mp key rows
   projected into kp, vp; decoding: tn new tokens, the cache), its arrays,
   the workspace's parts and the attend stage's row. */
typedef struct mha__q16 {
    mha__q8 z; /* h .. tn (mha__q8_sizes) and cache; its other pointers are not used */
    const mha_q16_weights *w;
    const mha_q8_params *p;
    const mha_mask *mask;
    const int16_t *queries, *keys, *values;
    int16_t *out;
    int64_t *sc;   /* [m]: a row's scores, exps, then probabilities (m: the keys, or the capacity) */
                   /* then [m] int16 (MHA__Q16_P16): the probabilities as int16 (Helium's pooling) */
    int16_t *kp;   /* [mp][kv*p_k]: the projected keys, all kv heads of key j side by side */
    int16_t *vp;   /* [mp][kv*p_v] */
    int16_t *qp;   /* [h*p_q]: one query row projected */
    int16_t *cat;  /* [h*p_v]: its heads */
    int16_t *x16;  /* [mha__q8_x16]: a linear stage's input in the order of int8's products (DSP cores) */
    uint8_t *keep; /* [m]: decoding with kept first positions: the row's keep row by slot */
    mha__q16_row r;
} mha__q16;

/* acc + x y in int64 for x y within int32: a 32-bit product where a 64-bit
   one is a library call (ARMv6-M, AVR), else SMLAL's form. */
#if defined(__ARM_ARCH_6M__) || defined(__AVR__)
#define MHA__Q16_MAC(acc, x, y) ((acc) + (int32_t)(x) * (y))
#else
#define MHA__Q16_MAC(acc, x, y) ((acc) + (int64_t)(x) * (y))
#endif
/* The linear stage `which` (0 q, 1 k, 2 v, 3 o) of one row x:
   y[r] = rescale_r(sum_c W[r][c] x_c + b[r]), clamped to int16; the sum in
   int64 (|sum| < 2^38), the bias saturated into [-2^47, 2^47] first. The
   products are int8's (Helium, DSP or plain C, with x in place of x - zx:
   on DSP cores copied into x16 in mha__q8_offset's order), over runs of at
   most MHA__Q16_RUN columns, each run's sum exact in int32 (504 products of
   at most 2^22: < 2^31) and added in int64: four rows a pass by
   mha__q8_dot4 where the core has it and x is one run, two by mha__q8_dot2,
   the last by mha__q8_dot. At -Os (the size and stack budgets) one row at
   a time in plain C. */
#define MHA__Q16_RUN ((size_t)504)
#if defined(__OPTIMIZE_SIZE__)
#define MHA__Q16_PRODUCTS 0
#else
#define MHA__Q16_PRODUCTS 1
#endif
MHA__PRIVATE int16_t mha__q16_row_out(int64_t acc, const int64_t *bias, const mha_q8_rescale *rs, size_t r) {
    const int64_t lim = (int64_t)1 << 47, b = bias ? bias[r] : 0;
    return mha__q16_rescale(acc + (b < -lim ? -lim : b > lim ? lim : b), rs[r]);
}
MHA__PRIVATE void mha__q16_linear(const mha__q16 *c, int which, const int16_t *x, int16_t *y) {
    const mha_q16_weights *w = c->w;
    const mha__q8 *z = &c->z;
    const int8_t *wt = which == 0 ? w->w_q : which == 1 ? w->w_k : which == 2 ? w->w_v : w->w_o;
    const int64_t *bias = which == 0 ? w->b_q : which == 1 ? w->b_k : which == 2 ? w->b_v : w->b_o;
    const mha_q8_rescale *rs = which == 0 ? w->r_q : which == 1 ? w->r_k : which == 2 ? w->r_v : w->r_o;
    const size_t rows = which == 0 ? z->h * z->pq : which == 1 ? z->kv * z->pk : which == 2 ? z->kv * z->pv : z->po;
    const size_t d = which == 0 ? z->dq : which == 1 ? z->dk : which == 2 ? z->dv : z->h * z->pv;
    size_t r = 0, k, len, j;
    if (MHA__Q16_PRODUCTS && MHA__Q8_DSP) { /* x in their order: each whole group of four as 0 2 1 3 */
        for (k = 0; k < d; ++k) c->x16[k] = x[k < (d & ~(size_t)3) ? (k & ~(size_t)3) | (k & 1) << 1 | (k >> 1 & 1) : k];
        x = c->x16;
    }
#if MHA__Q8_DOT4
    for (; d <= MHA__Q16_RUN && r + 4 <= rows; r += 4) {
        int32_t acc[4];
        mha__q8_dot4(wt + r * d, d, x, acc);
        for (k = 0; k < 4; ++k) y[r + k] = mha__q16_row_out(acc[k], bias, rs, r + k);
    }
#endif
    for (; MHA__Q16_PRODUCTS && r + 2 <= rows; r += 2) {
        int64_t s0 = 0, s1 = 0;
        for (k = 0; k < d; k += len) {
            int32_t a0, a1;
            len = d - k < MHA__Q16_RUN ? d - k : MHA__Q16_RUN;
            mha__q8_dot2(wt + r * d + k, wt + (r + 1) * d + k, x + k, len, &a0, &a1);
            s0 += a0;
            s1 += a1;
        }
        y[r] = mha__q16_row_out(s0, bias, rs, r);
        y[r + 1] = mha__q16_row_out(s1, bias, rs, r + 1);
    }
    for (; r < rows; ++r) {
        const int8_t *wr = wt + r * d;
        int64_t acc = 0;
        for (k = 0; k < d; k += len) {
            len = d - k < MHA__Q16_RUN ? d - k : MHA__Q16_RUN;
            if (MHA__Q16_PRODUCTS) acc += mha__q8_dot(wr + k, x + k, len);
            else
                for (j = k; j < k + len; ++j) acc = MHA__Q16_MAC(acc, wr[j], x[j]);
        }
        y[r] = mha__q16_row_out(acc, bias, rs, r);
    }
}

/* sum_a q_a k_a over n int16 pairs, in int64 (each product <= 2^30): eight
   a VMLALDAVA.S16 on Helium (the tail predicated), two an SMLALD on DSP
   cores, else one at a time. */
MHA__PRIVATE int64_t mha__q16_kdot(const int16_t *q, const int16_t *k, size_t n) {
    int64_t acc = 0;
    size_t a = 0;
#if MHA__Q8_MVE
    for (; a < n; a += 8) {
        const mve_pred16_t pr = vctp16q((uint32_t)(n - a));
        acc = vmlaldavaq_s16(acc, vldrhq_z_s16(q + a, pr), vldrhq_z_s16(k + a, pr));
    }
#elif MHA__Q8_DSP
    for (; a + 2 <= n; a += 2) acc = __smlald(MHA__Q8_LOAD(q + a), MHA__Q8_LOAD(k + a), acc);
#endif
    for (; a < n; ++a) acc = MHA__Q16_MAC(acc, q[a], k[a]);
    return acc;
}

/* Helium's pooling (step 4 of mha__q16_attend, its p_j in MHA__Q16_P16): each
   column a of the head, sum_j p_j V_ja over the row's positions, eight
   products a VMLALDAVA.S16 with the values gathered (VLDRH gather, offsets
   j vst: vst <= 9362 keeps the eighth within uint16), in the ring's at most
   two runs of slots; the same int64 as one product at a time. 0 where it
   does not apply (no Helium, a wider stride): the caller pools in C. */
#if MHA__Q8_MVE
MHA__PRIVATE int mha__q16_vpool(const mha__q16 *c, size_t hi, size_t first, int16_t *ho) {
    const mha__q16_row *r = &c->r;
    const size_t n0 = hi < r->ring - first ? hi : r->ring - first; /* positions before the wrap */
    uint16x8_t off;
    size_t a, k, s;
    if (r->vst > 9362) return 0;
    off = vmulq_n_u16(vidupq_n_u16(0, 1), (uint16_t)r->vst);
    for (a = 0; a < c->z.pv; ++a) {
        int64_t acc = 0;
        for (s = 0; s < 2; ++s) {
            const size_t n = s ? hi - n0 : n0;
            const int16_t *vb = r->va + (s ? 0 : first) * r->vst + a, *pb = MHA__Q16_P16(c) + (s ? n0 : 0);
            for (k = 0; k < n; k += 8) {
                const mve_pred16_t pr = vctp16q((uint32_t)(n - k));
                acc = vmlaldavaq_s16(acc, vldrhq_z_s16(pb + k, pr),
                                     vldrhq_gather_shifted_offset_z_s16(vb + k * r->vst, off, pr));
            }
        }
        ho[a] = mha__q16_rescale(acc, c->p->head);
    }
    return 1;
}
#else
MHA__PRIVATE int mha__q16_vpool(const mha__q16 *c, size_t hi, size_t first, int16_t *ho) {
    (void)c, (void)hi, (void)first, (void)ho;
    return 0;
}
#endif

/* The attend stage for one query row (its projection in qp) and head i,
   over the positions c->r says: heads' block i of cat.
     1. S_j = sum_a q_a k_ja (int64, |S_j| < 2^44) and their max M
     2. e_j = exp table at clamp(rescale_score(S_j - M) + 32767) (int16),
        their sum (< 2^31: m <= 65535)
     3. with h the sum's leading zeros (as uint32), the table 1 / (1 + x) at
        clamp(((sum 2^(h-1) + 2^13) >> 14) - 98304) gives R, and
        p_j = (e_j R + 2^(30-h)) >> (31-h), clamped to [0, 32767]: Q15
     4. head_a = rescale_head(sum_j p_j v_ja), clamped; no key seen: 0 */
MHA__PRIVATE MHA__NOINLINE void mha__q16_attend(const mha__q16 *c, size_t i) {
    const mha__q8 *z = &c->z;
    const mha__q16_row *r = &c->r;
    const size_t hi = r->hi - r->lo, first = r->lo % r->ring; /* hi: the positions' count */
    const int16_t *q = c->qp + i * z->pq;
    int16_t *ho = c->cat + i * z->pv;
    int64_t *sc = c->sc, mx = INT64_MIN, acc;
    uint32_t sum = 0, x;
    int32_t h = 0, recip, sym;
    size_t j, a, at = first * r->kst;
    /* 1. (at: position lo + j's key) */
    for (j = 0; j < hi; ++j, at = at + r->kst == r->ring * r->kst ? 0 : at + r->kst) {
        const int16_t *k = r->ka + at;
        if (r->keep && !r->keep[r->lo + j]) {
            sc[j] = INT64_MIN; /* below every score */
            continue;
        }
        sc[j] = acc = mha__q16_kdot(q, k, z->pq);
        mx = acc > mx ? acc : mx;
    }
    if (mx == INT64_MIN) { /* no key seen */
        for (a = 0; a < z->pv; ++a) ho[a] = 0;
        return;
    }
    /* 2. */
    for (j = 0; j < hi; ++j) {
        if (sc[j] == INT64_MIN) {
            sc[j] = 0;
            continue;
        }
        acc = mha__q16_mul(sc[j] - mx, c->p->score) + 32767; /* the product is <= 0 */
        sc[j] = mha__q16_lut(acc < -32768 ? -32768 : (int32_t)acc, mha__q16_exp);
        sum += (uint32_t)sc[j];
    }
    /* 3. sum >= the max's e (about 32767): h <= 17 */
    for (x = sum; !(x & 0x80000000u); x <<= 1) ++h;
    sym = (int32_t)((((uint32_t)sum << (h - 1)) + ((uint32_t)1 << 13)) >> 14) - 98304;
    recip = mha__q16_lut(sym > 32767 ? 32767 : sym, mha__q16_recip);
    for (j = 0; j < hi; ++j) {
        const int64_t p = (sc[j] * recip + ((int64_t)1 << (30 - h))) >> (31 - h); /* >= 0 */
        sc[j] = p > 32767 ? 32767 : p;
        if (MHA__Q8_MVE) MHA__Q16_P16(c)[j] = (int16_t)sc[j];
    }
    /* 4. |sum| < (2^15 + m) 2^15 */
    if (mha__q16_vpool(c, hi, first, ho)) return;
    for (a = 0; a < z->pv; ++a) { /* at: now position lo + j's value, stepping round the ring */
        const size_t wrap = r->ring * r->vst + a;
        at = first * r->vst + a;
        for (acc = 0, j = 0; j < hi; ++j) { /* p_j < 2^15 */
            acc = MHA__Q16_MAC(acc, (int32_t)sc[j], r->va[at]);
            at += r->vst;
            if (at == wrap) at = a;
        }
        ho[a] = mha__q16_rescale(acc, c->p->head);
    }
}

/* mha_forward_q16's stages over batch entry b: keys and values projected
   (every kv head), then each query row projected, attended by every head,
   and its output. c lies in the workspace. */
MHA__PRIVATE MHA__NOINLINE void mha__q16_compute(mha__q16 *c) {
    const mha__q8 *z = &c->z;
    mha__q16_row *r = &c->r;
    size_t b, j, t, i;
    r->kst = z->kv * z->pk; /* the projected keys' rows hold every kv head */
    r->vst = z->kv * z->pv;
    r->ring = z->m ? z->m : 1;
    r->lo = 0;
    for (b = 0; b < z->batch; ++b) {
        for (j = 0; j < z->m; ++j) {
            mha__q16_linear(c, 1, c->keys + (b * z->m + j) * z->dk, c->kp + j * z->kv * z->pk);
            mha__q16_linear(c, 2, c->values + (b * z->m + j) * z->dv, c->vp + j * z->kv * z->pv);
        }
        for (t = 0; t < z->n; ++t) {
            const size_t row = b * z->n + t;
            r->hi = mha__visible(c->mask, b, row, t, z->m);
            r->keep = c->mask && c->mask->keep ? c->mask->keep + row * z->m : NULL;
            mha__q16_linear(c, 0, c->queries + row * z->dq, c->qp);
            for (i = 0; i < z->h; ++i) {
                r->ka = c->kp + i / z->grp * z->pk;
                r->va = c->vp + i / z->grp * z->pv;
                mha__q16_attend(c, i);
            }
            mha__q16_linear(c, 3, c->cat, c->out + row * z->po);
        }
    }
}

/* Batch entry b's t new keys and values projected into kp, vp and copied
   into the slots of positions e, e + 1, ... (every kv head). */
MHA__PRIVATE MHA__NOINLINE void mha__q16_append(const mha__q16 *c, size_t b, size_t e) {
    const mha__q8 *z = &c->z;
    size_t j, g, a, slot;
    for (j = 0; j < z->tn; ++j, ++e) {
        mha__q16_linear(c, 1, c->keys + (b * z->tn + j) * z->dk, c->kp);
        mha__q16_linear(c, 2, c->values + (b * z->tn + j) * z->dv, c->vp);
        slot = b * z->kv * z->m + mha__pos_slot(e, MHA__KEPT(z->cache), z->m);
        for (g = 0; g < z->kv; ++g) {
            for (a = 0; a < z->pk; ++a) ((int16_t *)z->cache->k)[(slot + g * z->m) * z->pk + a] = c->kp[g * z->pk + a];
            for (a = 0; a < z->pv; ++a) ((int16_t *)z->cache->v)[(slot + g * z->m) * z->pv + a] = c->vp[g * z->pv + a];
        }
    }
}

/* With kept first positions (s > 0): the row walks every slot held, with
   a keep row by slot marking [0, s) and [lo, hi) through the slot rule (as
   mha__q8_kept; cross-attention: every slot). */
MHA__PRIVATE MHA__NOINLINE void mha__q16_kept(mha__q16 *c, size_t e, size_t s) {
    mha__q16_row *r = &c->r;
    const size_t held = e < c->z.m ? e : c->z.m;
    size_t p;
    for (p = 0; p < held; ++p) c->keep[p] = 0;
    for (p = 0; c->keys && p < r->hi; p = p + 1 == s && r->lo > s ? r->lo : p + 1)
        c->keep[mha__pos_slot(p, s, c->z.m)] = 1;
    r->keep = c->keys ? c->keep : NULL;
    r->lo = 0;
    r->hi = held;
}

/* Batch entry b's new queries, its length e: each projected, attended
   and its output. */
MHA__PRIVATE MHA__NOINLINE void mha__q16_queries(mha__q16 *c, size_t b, size_t e) {
    const mha__q8 *z = &c->z;
    mha__q16_row *r = &c->r;
    const mha_cache *cache = z->cache;
    const size_t cap = z->m;
    size_t j, i;
    for (j = 0; j < z->n; ++j) {
        mha__q16_linear(c, 0, c->queries + (b * z->n + j) * z->dq, c->qp);
        mha__decode_sees(e, z->n, j, (size_t)cache->window, !c->keys, &r->lo, &r->hi);
        if (r->hi - r->lo > cap) r->lo = r->hi - cap; /* cross-attention: the last capacity held */
        r->kst = z->pk;
        r->vst = z->pv;
        r->ring = cap;
        r->keep = NULL;
        if (MHA__KEPT(cache)) mha__q16_kept(c, e, MHA__KEPT(cache));
        for (i = 0; i < z->h; ++i) {
            r->ka = (const int16_t *)cache->k + (b * z->kv + i / z->grp) * cap * z->pk;
            r->va = (const int16_t *)cache->v + (b * z->kv + i / z->grp) * cap * z->pv;
            mha__q16_attend(c, i);
        }
        mha__q16_linear(c, 3, c->cat, c->out + (b * z->n + j) * z->po);
    }
}

/* Decoding's stages (mha__q8_decode's, in 16x8), each batch entry in turn: the t
   new keys and values projected into their positions' cache slots, then
   each new query projected, attended over the positions it sees
   (mha__decode_sees; the last capacity of them through the slot rule; with
   kept first positions a keep row by slot, as mha__q8_kept), and its
   output; the length grows by t where keys were given. */
MHA__PRIVATE MHA__NOINLINE void mha__q16_decode(mha__q16 *c) {
    size_t b, e;
    for (b = 0; b < c->z.batch; ++b) {
        e = (size_t)c->z.cache->length[b];
        if (c->keys) mha__q16_append(c, b, e);
        e += c->keys ? c->z.tn : 0;
        mha__q16_queries(c, b, e);
        c->z.cache->length[b] = (int32_t)e;
    }
}

/* The workspace: the call state (mha__q16) at the first 8-byte boundary,
   then sc [m] int64, kp, vp, qp, cat (int16), keep [m]. Its bytes
   (SIZE_MAX on overflow). */
#define MHA__Q16_STATE MHA__UP(sizeof(mha__q16), 8)
MHA__PRIVATE size_t mha__q16_bytes(const mha__q8 *z) {
    size_t t = mha__mul(z->mp, mha__mul(z->kv, mha__add(z->pk, z->pv)));
    t = mha__add(t, mha__add(mha__mul(z->h, mha__add(z->pq, z->pv)), mha__q8_x16(z)));
    return mha__add(mha__add(mha__mul(t, 2), mha__mul(z->m, 11)), 7 + MHA__Q16_STATE);
}

MHADEF size_t mha_q16_workspace_size(const mha_shape *shape, int32_t batch, int32_t n, int32_t m) {
    mha__q8 z;
    size_t t;
    if (mha__q8_shape(shape) != MHA_OK || batch < 0 || n < 0 || m < 0 || m > 65535) return 0;
    mha__q8_sizes(&z, shape);
    z.m = z.mp = MHA__SZ(m);
    t = mha__q16_bytes(&z);
    return t == SIZE_MAX ? 0 : t;
}

/* A rescale of the 16x8 path: as int8's, with a shift of at most 7. */
MHA__PRIVATE int mha__q16_rescale_ok(const mha_q8_rescale *r) { return mha__q8_rescale_ok(r) && r->shift <= 7; }

/* The parameters' checks: every zero point 0, every rescale valid. */
MHA__PRIVATE MHA__NOINLINE int mha__q16_params_ok(const mha__q8 *z, const mha_q16_weights *w, const mha_q8_params *p) {
    size_t k, j;
    for (k = 0; k < 8; ++k) /* zero_in_q .. zero_out */
        if (*(const int32_t *)(const void *)((const unsigned char *)p + k * sizeof(int32_t)) != 0) return 0;
    if (!mha__q16_rescale_ok(&p->score) || !mha__q16_rescale_ok(&p->head)) return 0;
    for (k = 0; k < 4; ++k) {
        const mha_q8_rescale *r = k == 0 ? w->r_q : k == 1 ? w->r_k : k == 2 ? w->r_v : w->r_o;
        const size_t rows = k == 0 ? z->h * z->pq : k == 1 ? z->kv * z->pk : k == 2 ? z->kv * z->pv : z->po;
        for (j = 0; r && j < rows; ++j) /* NULL: not used by this call */
            if (!mha__q16_rescale_ok(&r[j])) return 0;
    }
    return 1;
}

MHADEF mha_status mha_q16_prepare(const mha_shape *shape, const mha_q8_scales *scales, mha_q16_weights *w,
                                  mha_q8_params *p, mha_q8_rescale *rows, size_t count) {
    mha_q8_rescale sh[2];
    size_t ends[4], k;
    mha_status st = mha__q8_prep(shape, scales, w, p, rows, count, 1, sh, ends);
    if (st != MHA_OK) return st;
    w->r_q = rows;
    w->r_k = rows + ends[0];
    w->r_v = rows + ends[1];
    w->r_o = rows + ends[2];
    for (k = 0; k < 8; ++k) /* zero_in_q .. zero_out */
        *(int32_t *)(void *)((unsigned char *)p + k * sizeof(int32_t)) = 0;
    p->score = sh[0];
    p->head = sh[1];
    return MHA_OK;
}

/* A checked call's start: z's sizes into the workspace's state, byte by
   byte through a volatile pointer (as mha__q8_start), and the parts'
   places (mha__q16_bytes' order); the caller then sets the arguments'
   fields. The state. */
MHA__PRIVATE MHA__NOINLINE mha__q16 *mha__q16_start(void *workspace, const mha__q8 *z) {
    mha__q16 *c = (mha__q16 *)(void *)mha__q8_state(workspace);
    size_t t;
    for (t = 0; t < sizeof *z; ++t) ((volatile unsigned char *)&c->z)[t] = ((const unsigned char *)z)[t];
    c->sc = (int64_t *)(void *)((unsigned char *)c + MHA__Q16_STATE);
    c->kp = MHA__Q16_P16(c) + z->m;
    c->vp = c->kp + z->mp * z->kv * z->pk;
    c->qp = c->vp + z->mp * z->kv * z->pv;
    c->cat = c->qp + z->h * z->pq;
    c->x16 = c->cat + z->h * z->pv;
    c->keep = (uint8_t *)(c->x16 + mha__q8_x16(z));
    return c;
}

/* mha_forward_q16 up to the work: the checks in the order of the error
   table (mha_forward_q8's), then the call state into the workspace (byte by
   byte through a volatile pointer, as mha__q8_start), so that the work runs
   with none of it on the caller's stack. MHA__RUN, or a status. */
MHA__PRIVATE MHA__NOINLINE int mha__q16_enter(const mha_shape *shape, const mha_q16_weights *w, const mha_q8_params *p,
                                             int32_t batch, int32_t n, int32_t m, const int16_t *queries,
                                             const int16_t *keys, const int16_t *values, const mha_mask *mask,
                                             int16_t *out, void *workspace, size_t workspace_bytes) {
    mha__q8 z; /* the sizes alone: the rest of the state is written into the workspace at the end */
    mha__q16 *c;
    mha_status st;
    size_t bytes, t;
    if (!w || !p) return MHA_ERR_NULL;
    if ((st = mha__q8_shape(shape)) != MHA_OK) return st;
    mha__q8_sizes(&z, shape);
    if (batch < 0 || n < 0 || m < 0 || m > 65535 || (mask && mask->bias)) return MHA_ERR_SHAPE;
    z.batch = MHA__SZ(batch);
    z.n = MHA__SZ(n);
    z.m = z.mp = MHA__SZ(m);
    z.cache = NULL;
    if (!w->w_q || !w->w_k || !w->w_v || !w->w_o || !w->r_q || !w->r_k || !w->r_v || !w->r_o || !queries ||
        !keys || !values || !out)
        return MHA_ERR_NULL;
    bytes = mha__q16_bytes(&z);
    if (bytes == SIZE_MAX || !mha__q8_fits(&z, mask && mask->keep)) return MHA_ERR_OVERFLOW;
    if (!mha__q16_params_ok(&z, w, p)) return MHA_ERR_SHAPE;
    if (!workspace || workspace_bytes < bytes) return MHA_ERR_WORKSPACE;
    if (mask && mask->valid_lens)
        for (t = 0; t < z.batch * (mask->valid_lens_per_query ? z.n : 1); ++t)
            if (mask->valid_lens[t] < 0 || MHA__SZ(mask->valid_lens[t]) > z.m) return MHA_ERR_MASK;
    if (z.batch == 0 || z.n == 0) return MHA_OK;
    c = mha__q16_start(workspace, &z);
    c->w = w;
    c->p = p;
    c->mask = mask;
    c->queries = queries;
    c->keys = keys;
    c->values = values;
    c->out = out;
    return MHA__RUN;
}

MHADEF mha_status mha_forward_q16(const mha_shape *shape, const mha_q16_weights *w, const mha_q8_params *p,
                                  int32_t batch, int32_t n, int32_t m, const int16_t *queries, const int16_t *keys,
                                  const int16_t *values, const mha_mask *mask, int16_t *out, void *workspace,
                                  size_t workspace_bytes) {
    int st = mha__q16_enter(shape, w, p, batch, n, m, queries, keys, values, mask, out, workspace, workspace_bytes);
    if (st != MHA__RUN) return (mha_status)st;
    mha__q16_compute((mha__q16 *)(void *)mha__q8_state(workspace));
    return MHA_OK;
}

/* Decoding (queries given) or appending in 16x8 up to the work: the checks
   in mha__q8_enter_cache's order (a cache of type MHA_I16, capacity <=
   65535), then the state into the workspace. MHA__RUN, or a status. */
MHA__PRIVATE MHA__NOINLINE int mha__q16_enter_cache(const mha_shape *shape, const mha_q16_weights *w,
                                                   const mha_q8_params *p, mha_cache *cache, int32_t batch, int32_t t,
                                                   const int16_t *queries, const int16_t *keys, const int16_t *values,
                                                   int16_t *out, void *workspace, size_t workspace_bytes,
                                                   int decode) {
    mha__q8 z;
    mha__q16 *c;
    mha_status st;
    size_t b, bytes;
    if (!w || !p) return MHA_ERR_NULL;
    if ((st = mha__q8_shape(shape)) != MHA_OK) return st;
    mha__q8_sizes(&z, shape);
    if (batch < 0 || t < 0) return MHA_ERR_SHAPE;
    if (!cache) return MHA_ERR_NULL;
    if (mha__ring_bad(cache, keys ? MHA__SZ(t) : 0) || cache->capacity > 65535 || mha__types_bad(cache, 2, 0))
        return MHA_ERR_SHAPE;
    if (!cache->k || !cache->v || !cache->length || !keys != !values || (!decode && !keys) ||
        (keys && (!w->w_k || !w->w_v || !w->r_k || !w->r_v)) ||
        (decode && (!queries || !out || !w->w_q || !w->w_o || !w->r_q || !w->r_o)))
        return MHA_ERR_NULL;
    z.batch = MHA__SZ(batch);
    z.n = decode ? MHA__SZ(t) : 0;
    z.tn = MHA__SZ(t);
    z.m = z.tn; /* the keys given (for their counts), then the capacity */
    z.cache = cache;
    if (!mha__q8_fits(&z, 0) ||
        mha__rows_bytes(mha__mul(mha__mul(z.batch, z.kv), MHA__SZ(cache->capacity)), MHA_I16,
                        mha__add(z.pk, z.pv)) == SIZE_MAX)
        return MHA_ERR_OVERFLOW;
    z.m = MHA__SZ(cache->capacity);
    z.mp = 1;
    if ((bytes = mha__q16_bytes(&z)) == SIZE_MAX) return MHA_ERR_OVERFLOW;
    if (!mha__q16_params_ok(&z, w, p)) return MHA_ERR_SHAPE;
    if (!workspace || workspace_bytes < bytes) return MHA_ERR_WORKSPACE;
    for (b = 0; b < z.batch; ++b) /* every length first, then the room */
        if (cache->length[b] < 0 || (!cache->window && cache->length[b] > cache->capacity)) return MHA_ERR_MASK;
    for (b = 0; keys && b < z.batch; ++b)
        if ((int64_t)cache->length[b] + (int64_t)t > (cache->window ? MHA__POS_MAX : cache->capacity))
            return MHA_ERR_CAPACITY;
    if (z.batch == 0 || z.tn == 0) return MHA_OK;
    c = mha__q16_start(workspace, &z);
    c->w = w;
    c->p = p;
    c->mask = NULL;
    c->queries = queries;
    c->keys = keys;
    c->values = values;
    c->out = out;
    return MHA__RUN;
}

MHADEF mha_status mha_decode_q16(const mha_shape *shape, const mha_q16_weights *w, const mha_q8_params *p,
                                 mha_cache *cache, int32_t batch, int32_t t, const int16_t *queries,
                                 const int16_t *keys, const int16_t *values, int16_t *out, void *workspace,
                                 size_t workspace_bytes) {
    int st =
        mha__q16_enter_cache(shape, w, p, cache, batch, t, queries, keys, values, out, workspace, workspace_bytes, 1);
    if (st != MHA__RUN) return (mha_status)st;
    mha__q16_decode((mha__q16 *)(void *)mha__q8_state(workspace));
    return MHA_OK;
}

MHADEF mha_status mha_cache_append_q16(const mha_shape *shape, const mha_q16_weights *w, const mha_q8_params *p,
                                       mha_cache *cache, int32_t batch, int32_t t, const int16_t *keys,
                                       const int16_t *values, void *workspace, size_t workspace_bytes) {
    int st =
        mha__q16_enter_cache(shape, w, p, cache, batch, t, NULL, keys, values, NULL, workspace, workspace_bytes, 0);
    if (st != MHA__RUN) return (mha_status)st;
    mha__q16_decode((mha__q16 *)(void *)mha__q8_state(workspace));
    return MHA_OK;
}

MHADEF size_t mha_q16_decode_workspace_size(const mha_shape *shape, int32_t batch, int32_t t, int32_t capacity) {
    mha__q8 z;
    size_t bytes;
    if (mha__q8_shape(shape) != MHA_OK || batch < 0 || t < 0 || capacity < 1 || capacity > 65535) return 0;
    mha__q8_sizes(&z, shape);
    z.m = MHA__SZ(capacity);
    z.mp = 1;
    bytes = mha__q16_bytes(&z);
    return bytes == SIZE_MAX ? 0 : bytes;
}

#ifdef __cplusplus
}
#endif
#endif /* MHA_IMPLEMENTATION_INCLUDED */
#endif /* MHA_IMPLEMENTATION */

/*
   Revision history:
       unreleased  decoding: keep_first (attention sinks kept in a ring),
              mha_decode_tree (a tree of drafts in one call),
              mha_cache_row; mha_cache gains keep_first (at its end).
              MHA_WORKSPACE_STATE is 62 pointers (was 60: the tree's
              parents in the call state, on AVR).
              the decoder knobs: RoPE (both pairings, partial, angles
              exact at any position without double), ALiBi, the logit
              soft-cap, attention sinks; MHA_NO_EXTRAS. 16-bit floats:
              mha_f16_from_f32 and its three siblings; weights (w.type) and
              KV caches (cache.type) of f16 or bf16, fp32 arithmetic, with
              vector conversions on the fast path and a matrix-vector product
              for decoding with 16-bit weights; mha_cache_bytes_typed. API:
              mha_weights' w_q, w_k, w_v, w_o are const void *, mha_cache's k
              and v void * (indexing them needs a cast), mha_weights gains
              sinks and type (positional initialisers gain two fields).
              MHA_WORKSPACE_STATE is 60 pointers (was 56: the weights'
              type, on AVR).
       0.2.0  decoding over a caller-owned KV cache: mha_cache, mha_cache_append,
              mha_decode (self-attention with chunks of any length, a sliding
              window as a ring buffer, cross-attention), its fast path
              (split-KV, GQA groups read once, bit for bit the same for any
              schedule) and mha_decode_parallel; MHA_ERR_CAPACITY. The
              stages as public functions: mha_attend (the attend stage on
              projected inputs) and mha_output_rows; one orchestration loop
              for mha_forward, mha_head and mha_attend over stages with a
              reference and a fast variant of the same signature (the fast
              path one kv head per pass; mha_attend fast under MHA_FAST 1).
              MHA_WORKSPACE_STATE is 56 pointers (was 40).
              accuracy: every sum in blocks, compensated across them (never
              less accurate than PyTorch's fp32 module, error independent of
              m); exp within 1 ulp and tanh within 1.2 ulp on every build;
              one underflow rule on both paths; the fast path's finite
              results no longer overflow and a NaN behind a later key block's
              larger max no longer leaks; keep masks counted at one byte per
              element. The fast path is the default on hosted x86-64 and
              aarch64; mha_build_info(); MHA_INIT for C and C++; option
              macros defined empty mean 1; make install with pkg-config and
              CMake packages; examples/export_torch.py.
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
