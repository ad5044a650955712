/* The fuzz harness's independent status predicates, written from the
   README's error tables alone (not from mha.h's code): the status that
   mha_forward (fuzz_expected_status) and mha_decode (fz_decode_status) must
   return. Byte counts are exact, and compared with this target's SIZE_MAX,
   so the same predicates model a 16-bit size_t where they run on one
   (tests/cross/avr_test.c uses them there). Needs <math.h>, <stdint.h> and
   mha.h first. */
#ifndef FUZZ_PREDICATE_H
#define FUZZ_PREDICATE_H

/* The last position a windowed cache may reach: INT32_MAX, or SIZE_MAX where
   size_t is narrower (docs, "Decoding with a KV cache"). */
#if SIZE_MAX < INT32_MAX
#define FZ_POS_MAX ((int64_t)SIZE_MAX)
#else
#define FZ_POS_MAX ((int64_t)INT32_MAX)
#endif

/* Exact byte counts for the predicate: 128-bit where the compiler has it;
   elsewhere 64-bit arithmetic that saturates at UINT64_MAX. A count is too
   large when it is >= SIZE_MAX: mha.h's own saturating arithmetic takes
   SIZE_MAX itself for an overflow, a byte count (a multiple of 4) is never
   exactly SIZE_MAX, and a saturated 64-bit count (tcc, 64-bit size_t) is. */
#ifdef __SIZEOF_INT128__
typedef unsigned __int128 fz_u;
static fz_u fz_mul(fz_u a, fz_u b) { return a * b; }
static fz_u fz_add(fz_u a, fz_u b) { return a + b; }
#else
typedef uint64_t fz_u;
static fz_u fz_mul(fz_u a, fz_u b) { return a != 0 && b > UINT64_MAX / a ? UINT64_MAX : a * b; }
static fz_u fz_add(fz_u a, fz_u b) { return b > UINT64_MAX - a ? UINT64_MAX : a + b; }
#endif
static fz_u fz_count3(int64_t a, int64_t b, int64_t c) { return fz_mul(fz_mul((fz_u)a, (fz_u)b), (fz_u)c); }
static fz_u fz_bytes3(int64_t a, int64_t b, int64_t c) { return fz_mul(fz_count3(a, b, c), 4u); }

/* The decoder knobs as the README allows them: rope_dim 0, or even and at
   most p_q and p_k; a pairing 0 or 1; theta and the soft-cap finite and
   >= 0. */
static int fz_knobs_valid(const mha_shape *s) {
    return s->rope_dim >= 0 && s->rope_dim % 2 == 0 && s->rope_dim <= s->p_q && s->rope_dim <= s->p_k &&
           (s->rope_pairs == 0 || s->rope_pairs == 1) && isfinite(s->rope_theta) && s->rope_theta >= 0.0f &&
           isfinite(s->softcap) && s->softcap >= 0.0f;
}

/* The status mha_forward must return, from the docs' rules alone. */
static mha_status fuzz_expected_status(const mha_shape *s, int32_t batch, int32_t n, int32_t m, int null_which,
                                       const mha_mask *mask, int want_attn, const void *ws, size_t ws_bytes) {
    int32_t kv = s->kv_heads == 0 ? s->heads : s->kv_heads;
    int additive = s->score == MHA_SCORE_ADDITIVE;
    fz_u limit = (fz_u)SIZE_MAX, total;
    int64_t H, KV, pa;
    int32_t b, t, per;
    if (null_which == 1 || null_which == 2) return MHA_ERR_NULL; /* shape or weights */
    if (s->heads < 1 || s->kv_heads < 0 || kv < 1 || s->heads % kv != 0 || s->d_q < 1 || s->d_k < 1 ||
        s->d_v < 1 || s->p_q < 1 || s->p_k < 1 || s->p_v < 1 || s->p_o < 1)
        return MHA_ERR_SHAPE;
    if (s->score != MHA_SCORE_DOT && s->score != MHA_SCORE_ADDITIVE) return MHA_ERR_SHAPE;
    if (!additive && (s->p_q != s->p_k || !isfinite(s->scale))) return MHA_ERR_SHAPE;
    if (additive && s->p_a < 1) return MHA_ERR_SHAPE;
    if (!fz_knobs_valid(s)) return MHA_ERR_SHAPE;
    if (batch < 0 || n < 0 || m < 0) return MHA_ERR_SHAPE;
    if (null_which >= 3 && null_which <= 13 && (null_which < 11 || additive)) return MHA_ERR_NULL; /* 11..13: a_* */
    H = s->heads;
    KV = kv;
    pa = additive ? s->p_a : 0;
    if (fz_bytes3(H, s->p_q, s->d_q) >= limit || fz_bytes3(KV, s->p_k, s->d_k) >= limit ||
        fz_bytes3(KV, s->p_v, s->d_v) >= limit || fz_bytes3(s->p_o, H, s->p_v) >= limit ||
        fz_bytes3(H, pa, s->p_q) >= limit || fz_bytes3(H, pa, s->p_k) >= limit ||
        fz_bytes3(batch, n, s->d_q) >= limit || fz_bytes3(batch, m, s->d_k) >= limit ||
        fz_bytes3(batch, m, s->d_v) >= limit || fz_bytes3(batch, n, s->p_o) >= limit ||
        (want_attn && fz_mul(fz_bytes3(batch, n, m), (fz_u)H) >= limit) ||
        (mask && mask->bias && fz_bytes3(batch, n, m) >= limit) ||
        (mask && mask->keep && fz_count3(batch, n, m) >= limit)) /* keep: one byte each */
        return MHA_ERR_OVERFLOW;
    /* 4 (kv m (p_k + p_v) + h m p_a + h p_q + p_a + m + h p_v) + 64 + the call state */
    total = fz_mul(fz_mul((fz_u)KV, (fz_u)m), (fz_u)s->p_k + (fz_u)s->p_v);
    total = fz_add(total, fz_mul(fz_mul((fz_u)H, (fz_u)m), (fz_u)pa));
    total = fz_add(total, fz_mul((fz_u)H, (fz_u)s->p_q));
    total = fz_add(total, fz_add((fz_u)pa, (fz_u)m));
    total = fz_add(total, fz_mul((fz_u)H, (fz_u)s->p_v));
    total = fz_add(fz_mul(total, 4u), (fz_u)(MHA_WORKSPACE_ALIGN + MHA_WORKSPACE_STATE));
    if (total >= limit) return MHA_ERR_OVERFLOW;
#if defined(MHA_FAST) && MHA_FAST
    /* the fast path needs its own amount (exactness: tests/test_fast.c), with the same overflow verdict */
    total = (fz_u)mha_workspace_size(s, batch, n, m);
#endif
    if (!ws || (fz_u)ws_bytes < total) return MHA_ERR_WORKSPACE;
    if (mask && mask->valid_lens) {
        per = mask->valid_lens_per_query ? n : 1;
        for (b = 0; b < batch; ++b)
            for (t = 0; t < per; ++t) {
                int32_t len = mask->valid_lens[b * per + t];
                if (len < 0 || len > m) return MHA_ERR_MASK;
            }
    }
    return MHA_OK;
}

/* The status mha_decode (queries given) must return for a valid shape, from
   the docs' decoding rules alone. kv: 0 neither keys nor values (cross-
   attention), 1 both, 2 keys only, 3 values only; null_which: 1 the cache,
   2 cache->k, 3 cache->length, 4 queries, 5 out; tree: NULL (mha_decode),
   or mha_decode_tree's parents [batch][t]. */
static mha_status fz_decode_status(const mha_shape *s, int32_t batch, int32_t t, int32_t cap, int32_t window,
                                   int32_t kept, int32_t type, int32_t vtype, const int32_t *lens, int kv,
                                   int null_which, const int32_t *tree, const void *ws, size_t ws_bytes) {
    int32_t kvh = s->kv_heads == 0 ? s->heads : s->kv_heads, b;
    int64_t H = s->heads, pa = s->score == MHA_SCORE_ADDITIVE ? s->p_a : 0;
    fz_u limit = (fz_u)SIZE_MAX, total;
    if (batch < 0 || t < 0) return MHA_ERR_SHAPE;
    if (null_which == 1) return MHA_ERR_NULL;
#if defined(MHA_NO_EXTRAS) && MHA_NO_EXTRAS
    const int type_ok = type == 0 && vtype == 0;
#else /* keys float, f16, bf16, q8 or q4; values 0 (the keys' type) or one of those but float; other than float
         with dot scoring only */
    const int type_ok = type >= 0 && type <= 5 && type != 3 && vtype >= 0 && vtype <= 5 && vtype != 3 &&
                        !((type || vtype) && s->score == MHA_SCORE_ADDITIVE);
#endif
    const int32_t vt = vtype ? vtype : type;
    /* bytes of a cache row of p elements: 4 or 2 a value, or blocks of 32 in 34 (q8) or 18 (q4) bytes */
#define FZ_ROW(ty, p) ((ty) >= 4 ? ((fz_u)(p) + 31u) / 32u * ((ty) == 4 ? 34u : 18u) : (fz_u)(p) * ((ty) ? 2u : 4u))
#if defined(MHA_NO_EXTRAS) && MHA_NO_EXTRAS
    const int kept_ok = kept == 0;
#else /* 0, or 1 .. window - 1 with a window, below the capacity */
    const int kept_ok = kept == 0 || (kept > 0 && window > 0 && kept < window && kept < cap);
#endif
#if defined(MHA_NO_EXTRAS) && MHA_NO_EXTRAS
    if (tree) return MHA_ERR_SHAPE; /* trees are compiled out */
#endif
    if (cap < 1 || window < 0 || !type_ok || !kept_ok ||
        (window && kv && t > 0 && (int64_t)kept + window + t - 1 > cap))
        return MHA_ERR_SHAPE;
    if (kv == 0 && (s->rope_dim || s->alibi)) return MHA_ERR_SHAPE; /* a cross-attention query has no position */
    if (null_which >= 2 || kv >= 2 || (tree && kv != 1)) return MHA_ERR_NULL; /* a tree: keys and values */
    if (fz_bytes3(batch, t, s->d_q) >= limit || (kv && fz_bytes3(batch, t, s->d_k) >= limit) ||
        (kv && fz_bytes3(batch, t, s->d_v) >= limit) || fz_bytes3(batch, t, s->p_o) >= limit ||
        fz_mul(fz_count3(batch, kvh, cap), FZ_ROW(type, s->p_k)) >= limit ||
        fz_mul(fz_count3(batch, kvh, cap), FZ_ROW(vt, s->p_v)) >= limit)
        return MHA_ERR_OVERFLOW;
#undef FZ_ROW
    /* 4 (h p_q + p_a + capacity + h p_v + h capacity p_a) + 64 + the call state */
    total = fz_add(fz_mul((fz_u)H, (fz_u)s->p_q), fz_add((fz_u)pa, (fz_u)cap));
    total = fz_add(total, fz_add(fz_mul((fz_u)H, (fz_u)s->p_v), fz_mul(fz_mul((fz_u)H, (fz_u)cap), (fz_u)pa)));
    total = fz_add(fz_mul(total, 4u), (fz_u)(MHA_WORKSPACE_ALIGN + MHA_WORKSPACE_STATE));
    if (total >= limit) return MHA_ERR_OVERFLOW;
#if defined(MHA_FAST) && MHA_FAST
    total = (fz_u)mha_decode_workspace_size(s, batch, t, cap); /* the fast path's own amount */
    if (total == 0) return MHA_ERR_OVERFLOW; /* its parts (t new rows per chunk) overflow size_t */
#endif
    if (!ws || (fz_u)ws_bytes < total) return MHA_ERR_WORKSPACE;
    for (b = 0; b < batch; ++b)
        if (lens[b] < 0 || (!window && lens[b] > cap)) return MHA_ERR_MASK;
    for (b = 0; tree && b < (int64_t)batch * t; ++b) /* each parent -1 or an earlier draft */
        if (tree[b] < -1 || tree[b] >= (int32_t)(b % t)) return MHA_ERR_MASK;
    for (b = 0; b < batch; ++b)
        if ((int64_t)lens[b] + (kv ? t : 0) > (window ? FZ_POS_MAX : (int64_t)cap)) return MHA_ERR_CAPACITY;
    return MHA_OK;
}
#endif
