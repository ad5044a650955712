/* The KV cache and the attention core on projected inputs (mha_decode,
   mha_cache_append, mha_attend), against mha_forward, which the PyTorch
   vectors pin down:
     - decode equals forward: random shapes (every size its own, GQA, dot and
       additive, batch > 1 with different lengths), decoded token by token
       and in chunks of 3 and 17, equal one causal mha_forward per sequence;
     - ring equals window: after 3 x capacity tokens, a ring-buffer cache
       with a window equals mha_forward with the banded keep mask, windows 1,
       2, 7 and the capacity;
     - cross-attention: a cache filled by mha_cache_append (in two chunks),
       decoded with keys = values = NULL, equals mha_forward against the
       encoder's keys and values;
     - mha_attend on projections done here equals mha_forward (out and attn);
     - long caches (several split-KV chunks), any schedule bit for bit, and
       values that are not finite.
   Every status of the new functions: tests/test_hostile.c.
   The oracle is mha_forward_reference (the plain loops that the PyTorch
   vectors pin down), also in the fast build, where mha_decode and
   mha_forward take the fast path. Tolerance: 1e-5 (1 + max |ref|), the
   suite's. */
#include <float.h>

#include "naive_ref.h"
#include "test_util.h"

#define TOL 1e-5f

typedef struct seq {         /* one sequence's tokens and its forward result */
    int32_t len;             /* tokens */
    float *q, *k, *v, *want; /* [len][d_q], [len][d_k], [len][d_v], [len][p_o] */
} seq;

static float worst_ratio; /* error / allowed, the worst seen */

static int close_to(const float *got, const float *want, size_t count) {
    float allow = TOL * (1.0f + tu_max_abs(want, count)), err = tu_max_diff(got, want, count);
    if (err / allow > worst_ratio) worst_ratio = err / allow;
    return err <= allow;
}

static mha_shape random_shape(int additive) {
    mha_shape s = {0};
    int32_t kvh;
    s.heads = 1 + (int32_t)(tu_next() % 4);
    do kvh = 1 + (int32_t)(tu_next() % (uint32_t)s.heads);
    while (s.heads % kvh != 0);
    s.kv_heads = kvh;
    s.d_q = 1 + (int32_t)(tu_next() % 12);
    s.d_k = 1 + (int32_t)(tu_next() % 12);
    s.d_v = 1 + (int32_t)(tu_next() % 12);
    s.p_q = s.p_k = 1 + (int32_t)(tu_next() % 9);
    s.p_v = 1 + (int32_t)(tu_next() % 9);
    s.p_o = 1 + (int32_t)(tu_next() % 10);
    if (additive) {
        s.score = MHA_SCORE_ADDITIVE;
        s.p_k = 1 + (int32_t)(tu_next() % 9);
        s.p_a = 1 + (int32_t)(tu_next() % 7);
    }
    return s;
}

/* A sequence of len random tokens and its causal forward result (with a
   window: the banded mask instead, and the first `kept` columns too). */
static void seq_make(seq *q, const mha_shape *s, const mha_weights *w, int32_t len, int32_t window, int32_t kept) {
    mha_mask mask = {1, 0, NULL, 0, NULL, NULL};
    uint8_t *keep = NULL;
    size_t bytes = mha_reference_workspace_size(s, 1, len, len);
    void *ws = malloc(bytes);
    int32_t i, j;
    q->len = len;
    q->q = tu_floats((size_t)len * (size_t)s->d_q, 1.0f);
    q->k = tu_floats((size_t)len * (size_t)s->d_k, 1.0f);
    q->v = tu_floats((size_t)len * (size_t)s->d_v, 1.0f);
    q->want = tu_floats((size_t)len * (size_t)s->p_o, 0.0f);
    if (window > 0) { /* key j visible to query i when i - window < j <= i, or j < kept <= i */
        keep = (uint8_t *)malloc((size_t)len * (size_t)len);
        for (i = 0; i < len; ++i)
            for (j = 0; j < len; ++j)
                keep[(size_t)i * (size_t)len + (size_t)j] = j <= i && (j > i - window || j < kept);
        mask.causal = 0;
        mask.keep = keep;
    }
    if (mha_forward_reference(s, w, 1, len, len, q->q, q->k, q->v, &mask, q->want, NULL, ws, bytes) != MHA_OK) {
        printf("seq_make: forward failed\n");
        exit(2);
    }
    free(keep);
    free(ws);
}

static void seq_free(seq *q) {
    free(q->q);
    free(q->k);
    free(q->v);
    free(q->want);
}

/* Bytes of a cache row of p elements of type, by the docs' layout (a block
   type: ceil(p / 32) blocks of an f16 scale and 32 int8, or 16 bytes). */
static size_t row_bytes(int32_t type, size_t p) {
    if (type == MHA_Q8 || type == MHA_Q4) return (p + 31) / 32 * (type == MHA_Q8 ? 34u : 18u);
    return p * (type ? 2u : 4u);
}
static int32_t value_type(const mha_cache *c) { return c->value_type ? c->value_type : c->type; }

/* The cache of sequence b alone, as a batch of one. */
static mha_cache sub_cache(const mha_shape *s, const mha_cache *c, int32_t b) {
    mha_cache one = *c;
    size_t kv = (size_t)(s->kv_heads ? s->kv_heads : s->heads), cap = (size_t)c->capacity;
    one.k = (unsigned char *)c->k + (size_t)b * kv * cap * row_bytes(c->type, (size_t)s->p_k);
    one.v = (unsigned char *)c->v + (size_t)b * kv * cap * row_bytes(value_type(c), (size_t)s->p_v);
    one.length = c->length + b;
    return one;
}

/* Decodes tokens [from, from + t) of each of the batch sequences (which
   must all have them) in one mha_decode call; checks the outputs. */
static int decode_chunk(const mha_shape *s, const mha_weights *w, mha_cache *c, seq *sq, int32_t batch, int32_t from,
                        int32_t t) {
    size_t dq = (size_t)s->d_q, dk = (size_t)s->d_k, dv = (size_t)s->d_v, po = (size_t)s->p_o, bytes;
    float *q = tu_floats((size_t)batch * (size_t)t * dq, 0.0f), *k = tu_floats((size_t)batch * (size_t)t * dk, 0.0f);
    float *v = tu_floats((size_t)batch * (size_t)t * dv, 0.0f), *out = tu_floats((size_t)batch * (size_t)t * po, 0.0f);
    void *ws;
    int32_t b;
    int ok = 1;
    for (b = 0; b < batch; ++b) {
        memcpy(q + (size_t)b * (size_t)t * dq, sq[b].q + (size_t)from * dq, (size_t)t * dq * sizeof(float));
        memcpy(k + (size_t)b * (size_t)t * dk, sq[b].k + (size_t)from * dk, (size_t)t * dk * sizeof(float));
        memcpy(v + (size_t)b * (size_t)t * dv, sq[b].v + (size_t)from * dv, (size_t)t * dv * sizeof(float));
    }
    bytes = mha_decode_workspace_size(s, batch, t, c->capacity);
    ws = malloc(bytes);
    ok &= mha_decode(s, w, c, batch, t, q, k, v, out, ws, bytes) == MHA_OK;
    for (b = 0; b < batch; ++b)
        ok &= close_to(out + (size_t)b * (size_t)t * po, sq[b].want + (size_t)from * po, (size_t)t * po);
    free(q);
    free(k);
    free(v);
    free(out);
    free(ws);
    return ok;
}

/* Random shapes, batch 1..3 with prefixes of different lengths (each filled
   alone), then the common steps together in chunks of `chunk`. */
static void test_decode_equals_forward(void) {
    static const int32_t chunks[3] = {1, 3, 17};
    int problem, ci;
    for (ci = 0; ci < 3; ++ci) {
        int all = 1;
        for (problem = 0; problem < 20; ++problem) {
            mha_shape s = random_shape(problem % 4 == 3);
            tu_problem p;
            mha_cache c;
            seq sq[3];
            int32_t batch = 1 + (int32_t)(tu_next() % 3), steps = 1 + (int32_t)(tu_next() % 40), b, at;
            int32_t lens[3], cap = 0;
            int ok = 1, on = problem % 2 ? tu_extras(&s) : 0; /* RoPE, ALiBi, soft-cap, sinks: half of them */
            tu_problem_make(&p, &s, 1, 1, 1, problem % 2);
            tu_sinks(&p, on);
            for (b = 0; b < batch; ++b) {
                int32_t prefix = (int32_t)(tu_next() % 30);
                seq_make(&sq[b], &s, &p.w, prefix + steps, 0, 0);
                if (sq[b].len > cap) cap = sq[b].len;
            }
            memset(&c, 0, sizeof c);
            c.capacity = cap + (int32_t)(tu_next() % 3);
            c.k = tu_floats(mha_cache_bytes(&s, batch, c.capacity) / sizeof(float), 0.0f);
            c.v = (float *)c.k + (size_t)batch * (size_t)(s.kv_heads) * (size_t)c.capacity * (size_t)s.p_k;
            c.length = lens;
            for (b = 0; b < batch; ++b) { /* each sequence's prefix alone, chunk by chunk */
                mha_cache one = sub_cache(&s, &c, b);
                lens[b] = 0;
                for (at = 0; at < sq[b].len - steps; at += chunks[ci]) {
                    int32_t t = sq[b].len - steps - at < chunks[ci] ? sq[b].len - steps - at : chunks[ci];
                    ok &= decode_chunk(&s, &p.w, &one, &sq[b], 1, at, t);
                }
            }
            for (at = 0; at < steps; at += chunks[ci]) { /* then every sequence together */
                int32_t t = steps - at < chunks[ci] ? steps - at : chunks[ci];
                seq shifted[3];
                for (b = 0; b < batch; ++b) {
                    shifted[b] = sq[b];
                    shifted[b].len = sq[b].len;
                }
                for (b = 0; b < batch; ++b) ok &= lens[b] == sq[b].len - steps + at;
                /* decode_chunk reads tokens [from, from + t) of each; the prefixes differ */
                for (b = 0; b < batch; ++b) {
                    size_t off = (size_t)(sq[b].len - steps);
                    shifted[b].q = sq[b].q + off * (size_t)s.d_q;
                    shifted[b].k = sq[b].k + off * (size_t)s.d_k;
                    shifted[b].v = sq[b].v + off * (size_t)s.d_v;
                    shifted[b].want = sq[b].want + off * (size_t)s.p_o;
                }
                ok &= decode_chunk(&s, &p.w, &c, shifted, batch, at, t);
            }
            for (b = 0; b < batch; ++b) ok &= lens[b] == sq[b].len;
            if (!ok)
                printf("decode != forward: chunk %d, problem %d (heads %d/%d, %s, batch %d, steps %d)\n",
                       (int)chunks[ci], problem, (int)s.heads, (int)s.kv_heads,
                       s.score == MHA_SCORE_ADDITIVE ? "additive" : "dot", (int)batch, (int)steps);
            all &= ok;
            for (b = 0; b < batch; ++b) seq_free(&sq[b]);
            free(c.k);
            tu_problem_free(&p);
        }
        CHECK(all, "decode in chunks of %d equals a causal mha_forward on 20 random problems", (int)chunks[ci]);
    }
}

/* The position that slot j of a one-sequence cache of capacity cap, the
   first `kept` slots kept, holds after e appended (docs, "Decoding with a KV
   cache"): position p goes to slot p below kept, else to kept + (p - kept)
   mod (cap - kept); the slot holds the latest p < e sent there (-1: none).
   By search, not by the formula mha.h inverts. */
static int32_t slot_position(int32_t j, int32_t e, int32_t cap, int32_t kept) {
    int32_t p;
    for (p = e - 1; p >= 0; --p)
        if ((p < kept ? p : kept + (p - kept) % (cap - kept)) == j) return p;
    return -1;
}

/* mha_cache_row for every position 0 .. e (and one past) of a one-sequence
   cache that holds e positions, rows of row_bytes each: the address of the
   slot that slot_position finds holding it (kv head g's rows), or NULL
   where no slot does. */
static int rows_ok(const mha_shape *s, const mha_cache *c, int32_t e) {
    int32_t cap = c->capacity, kvh = s->kv_heads ? s->kv_heads : s->heads, P, j, g, which;
    int32_t *slot_of = (int32_t *)malloc(((size_t)e + 1) * sizeof(int32_t));
    int ok = 1;
    for (P = 0; P <= e; ++P) slot_of[P] = -1;
    for (j = 0; j < (e < cap ? e : cap); ++j) slot_of[slot_position(j, e, cap, c->keep_first)] = j;
    for (P = 0; P <= e; ++P)
        for (g = 0; g < kvh; ++g)
            for (which = 0; which < 2; ++which) {
                const size_t rb = row_bytes(which ? value_type(c) : c->type, (size_t)(which ? s->p_v : s->p_k));
                const unsigned char *want = slot_of[P] < 0 ? NULL
                                          : (const unsigned char *)(which ? c->v : c->k) +
                                                ((size_t)g * (size_t)cap + (size_t)slot_of[P]) * rb;
                ok &= mha_cache_row(s, c, 1, 0, g, P, which) == (const void *)want;
            }
    free(slot_of);
    return ok;
}

/* A ring cache with a window, 3 x capacity tokens, against the banded mask;
   then with kept first positions (keep_first 1, and window - 1) against the
   band and the first columns. */
static void test_ring_equals_window(void) {
    static const int32_t windows[7] = {1, 2, 7, 0, 2, 7, 4}, kepts[7] = {0, 0, 0, 0, 1, 6, 2};
    int wi;
    for (wi = 0; wi < 7; ++wi) {
        mha_shape s = random_shape(wi == 2);
        tu_problem p;
        mha_cache c;
        seq sq;
        int32_t len = 0, at, chunk = 1 + wi % 3, cap;
        int ok = 1, on = tu_extras(&s);
        tu_problem_make(&p, &s, 1, 1, 1, 1);
        tu_sinks(&p, on);
        memset(&c, 0, sizeof c);
        c.window = windows[wi] ? windows[wi] : 9;
        c.keep_first = kepts[wi];
        /* wi 3, 5: capacity = keep_first + window + chunk - 1, the tightest */
        cap = c.keep_first + c.window + chunk - 1 + (wi == 3 || wi == 5 ? 0 : 2);
        c.capacity = cap;
        seq_make(&sq, &s, &p.w, 3 * cap, c.window, c.keep_first);
        c.k = tu_floats(mha_cache_bytes(&s, 1, cap) / sizeof(float), 0.0f);
        c.v = (float *)c.k + (size_t)s.kv_heads * (size_t)cap * (size_t)s.p_k;
        c.length = &len;
        for (at = 0; at < sq.len; at += chunk) {
            int32_t t = sq.len - at < chunk ? sq.len - at : chunk;
            ok &= decode_chunk(&s, &p.w, &c, &sq, 1, at, t);
            ok &= rows_ok(&s, &c, len);
        }
        CHECK(ok && len == 3 * cap,
              "ring buffer, window %d, keep_first %d, capacity %d, chunks of %d: equals the banded mask (and the "
              "first columns) over %d tokens; mha_cache_row finds every position held",
              (int)c.window, (int)c.keep_first, (int)cap, (int)chunk, (int)sq.len);
        seq_free(&sq);
        free(c.k);
        tu_problem_free(&p);
    }
}

/* Cross-attention: the encoder's keys and values appended in two chunks. */
static void test_cross_attention(void) {
    int problem, all = 1;
    for (problem = 0; problem < 10; ++problem) {
        mha_shape s = random_shape(problem == 4);
        tu_problem p;
        mha_cache c;
        int32_t batch = 1 + problem % 3, m = 1 + (int32_t)(tu_next() % 25), n = 1 + (int32_t)(tu_next() % 6);
        int32_t lens[3] = {0, 0, 0}, first = m / 2, b;
        size_t bytes, po = (size_t)s.p_o, dk = (size_t)s.d_k, dv = (size_t)s.d_v;
        float *out, *k2, *v2;
        void *ws;
        int ok = 1, on = tu_extras(&s) | 8; /* soft-cap and sinks: a cross-attention query has no position */
        s.rope_dim = s.alibi = 0;
        tu_problem_make(&p, &s, batch, n, m, 1);
        tu_sinks(&p, on);
        memset(&c, 0, sizeof c);
        c.capacity = m + problem % 2;
        c.k = tu_floats(mha_cache_bytes(&s, batch, c.capacity) / sizeof(float), 0.0f);
        c.v = (float *)c.k + (size_t)batch * (size_t)s.kv_heads * (size_t)c.capacity * (size_t)s.p_k;
        c.length = lens;
        ok &= tu_forward(&p, NULL, NULL) == MHA_OK;
        out = tu_floats((size_t)batch * (size_t)n * po, 0.0f);
        /* the encoder's rows [0, first) of every sequence, then the rest */
        k2 = tu_floats((size_t)batch * (size_t)m * dk, 0.0f);
        v2 = tu_floats((size_t)batch * (size_t)m * dv, 0.0f);
        for (b = 0; b < batch; ++b) {
            memcpy(k2 + (size_t)b * (size_t)first * dk, p.k + (size_t)b * (size_t)m * dk, (size_t)first * dk * 4);
            memcpy(v2 + (size_t)b * (size_t)first * dv, p.v + (size_t)b * (size_t)m * dv, (size_t)first * dv * 4);
        }
        bytes = mha_decode_workspace_size(&s, batch, m, c.capacity);
        ws = malloc(bytes);
        ok &= mha_cache_append(&s, &p.w, &c, batch, first, k2, v2, ws, bytes) == MHA_OK;
        for (b = 0; b < batch; ++b) {
            memcpy(k2 + (size_t)b * (size_t)(m - first) * dk, p.k + ((size_t)b * (size_t)m + (size_t)first) * dk,
                   (size_t)(m - first) * dk * 4);
            memcpy(v2 + (size_t)b * (size_t)(m - first) * dv, p.v + ((size_t)b * (size_t)m + (size_t)first) * dv,
                   (size_t)(m - first) * dv * 4);
        }
        ok &= mha_cache_append(&s, &p.w, &c, batch, m - first, k2, v2, ws, bytes) == MHA_OK;
        for (b = 0; b < batch; ++b) ok &= lens[b] == m;
        free(ws);
        bytes = mha_decode_workspace_size(&s, batch, n, c.capacity);
        ws = malloc(bytes);
        ok &= mha_decode(&s, &p.w, &c, batch, n, p.q, NULL, NULL, out, ws, bytes) == MHA_OK;
        ok &= close_to(out, p.out, (size_t)batch * (size_t)n * po);
        for (b = 0; b < batch; ++b) ok &= lens[b] == m; /* cross-attention appends nothing */
        all &= ok;
        free(ws);
        free(out);
        free(k2);
        free(v2);
        free(c.k);
        tu_problem_free(&p);
    }
    CHECK(all, "cross-attention decode equals mha_forward against the encoder's keys and values (10 problems, with "
               "soft-cap and sinks)");
    { /* RoPE and ALiBi need the query's position, which a cross-attention query does not have */
        mha_shape s = random_shape(0);
        tu_problem p;
        mha_cache c;
        int32_t len = 1;
        size_t bytes;
        void *ws;
        mha_status st[2];
        int k;
        s.p_q = s.p_k = 4;
        tu_problem_make(&p, &s, 1, 1, 1, 1);
        memset(&c, 0, sizeof c);
        c.capacity = 2;
        c.k = tu_floats(mha_cache_bytes(&s, 1, 2) / sizeof(float), 0.0f);
        c.v = (float *)c.k + (size_t)s.kv_heads * 2 * 4;
        c.length = &len;
        for (k = 0; k < 2; ++k) {
            s.rope_dim = k ? 0 : 2;
            s.alibi = k;
            bytes = mha_decode_workspace_size(&s, 1, 1, 2);
            ws = malloc(bytes);
            st[k] = mha_decode(&s, &p.w, &c, 1, 1, p.q, NULL, NULL, p.out, ws, bytes);
            free(ws);
        }
        CHECK(st[0] == MHA_ERR_SHAPE && st[1] == MHA_ERR_SHAPE && len == 1,
              "cross-attention decode with RoPE or ALiBi: MHA_ERR_SHAPE, nothing written");
        free(c.k);
        tu_problem_free(&p);
    }
}

/* y[r][o] = W[o] . x[r] + b[o] in double, rows r < rows, W [out][in]. */
static void project(const float *x, size_t rows, size_t in, const float *W, const float *b, size_t out, float *y) {
    size_t r, o, i;
    for (r = 0; r < rows; ++r)
        for (o = 0; o < out; ++o) {
            double acc = b ? b[o] : 0.0;
            for (i = 0; i < in; ++i) acc += (double)W[o * in + i] * x[r * in + i];
            y[r * out + o] = (float)acc;
        }
}

/* mha_attend on projections made here, then W_o here: equals mha_forward. */
static void test_attend(void) {
    int problem, all = 1;
    for (problem = 0; problem < 20; ++problem) {
        mha_shape s = random_shape(problem % 5 == 4);
        tu_problem p;
        mha_mask mask = {problem % 2, (int32_t)(tu_next() % 5) - 2, NULL, 0, NULL, NULL};
        int32_t batch = 1 + problem % 3, n = 1 + (int32_t)(tu_next() % 20), m = 1 + (int32_t)(tu_next() % 20);
        size_t h = (size_t)s.heads, kv = (size_t)s.kv_heads, rq = (size_t)batch * (size_t)n, rk = (size_t)batch * (size_t)m;
        size_t hpv = h * (size_t)s.p_v, bytes, na = (size_t)batch * h * (size_t)n * (size_t)m;
        float *q = tu_floats(rq * h * (size_t)s.p_q, 0.0f), *k = tu_floats(rk * kv * (size_t)s.p_k, 0.0f);
        float *v = tu_floats(rk * kv * (size_t)s.p_v, 0.0f), *heads = tu_floats(rq * hpv, 0.0f);
        float *out = tu_floats(rq * (size_t)s.p_o, 0.0f), *attn = tu_floats(na, 0.0f);
        void *ws;
        int ok = 1, on = problem % 2 ? 0 : tu_extras(&s);
        tu_problem_make(&p, &s, batch, n, m, 1);
        tu_sinks(&p, on);
        ok &= tu_forward(&p, &mask, p.attn) == MHA_OK;
        project(p.q, rq, (size_t)s.d_q, p.w.w_q, p.w.b_q, h * (size_t)s.p_q, q);
        project(p.k, rk, (size_t)s.d_k, p.w.w_k, p.w.b_k, kv * (size_t)s.p_k, k);
        project(p.v, rk, (size_t)s.d_v, p.w.w_v, p.w.b_v, kv * (size_t)s.p_v, v);
        bytes = mha_attend_workspace_size(&s, batch, n, m);
        ws = malloc(bytes);
        ok &= mha_attend(&s, &p.w, batch, n, m, q, k, v, &mask, heads, attn, ws, bytes) == MHA_OK;
        project(heads, rq, hpv, p.w.w_o, p.w.b_o, (size_t)s.p_o, out);
        ok &= close_to(out, p.out, rq * (size_t)s.p_o);
        ok &= tu_max_diff(attn, p.attn, na) <= 1e-5f;
        if (!ok) printf("mha_attend != mha_forward: problem %d\n", problem);
        all &= ok;
        free(q);
        free(k);
        free(v);
        free(heads);
        free(out);
        free(attn);
        free(ws);
        tu_problem_free(&p);
    }
    CHECK(all, "mha_attend on projected inputs, then W_o, equals mha_forward (out and attn, 20 problems, masks, "
               "GQA, additive)");
}

#if !defined(TEST_DECODE_SMALL) || !TEST_DECODE_SMALL
#ifdef TEST_DECODE_THREADS /* make tsan: two real threads */
#include "two_threads.h"
#define reverse_for two_threads
#else
/* A parallel-for that runs the tasks in reverse order on this thread: the
   result must not depend on the order. */
static void reverse_for(void *user, mha_task task, void *arg, int32_t count) {
    int32_t i;
    (void)user;
    for (i = count - 1; i >= 0; --i) task(arg, i);
}
#endif

/* A long cache (three split-KV chunks where the build cuts them at 256
   slots, as the Makefile's portable and AVX-512 builds do): a prefill of
   `pre` tokens in one chunk, then steps one token at a time, with and
   without packed weights, sequential and through a parallel-for: equal to
   the causal forward, and bit for bit the same for either schedule. */
static void test_long(void) {
    int variant, all = 1, same = 1;
    for (variant = 0; variant < 6; ++variant) {
        mha_shape s = {0};
        tu_problem p;
        mha_cache c1, c2;
        seq sq;
        int32_t pre = variant < 4 ? 530 + 37 * variant : 515, steps = 6, len1 = 0, len2 = 0, at;
        size_t bytes, pbytes = 0;
        void *ws, *packed = NULL;
        float *out1, *out2;
        int ok = 1;
        s.heads = 4;
        s.kv_heads = variant % 2 ? 2 : 4;
        s.d_q = s.d_k = s.d_v = 12;
        s.p_q = s.p_k = variant < 4 ? 8 : 64;
        s.p_v = variant < 4 ? 5 + variant : variant == 4 ? 64 : 80; /* 64, 80: the four-vector kernels */
        s.p_o = 7;
        if (variant == 1 || variant == 4) { /* every decoder knob at once, over the split-KV chunks */
            s.rope_dim = variant == 1 ? 8 : 32;
            s.rope_pairs = variant == 4;
            s.alibi = 1;
            s.softcap = 4.0f;
        }
        tu_problem_make(&p, &s, 1, 1, 1, 1);
        tu_sinks(&p, s.alibi ? 8 : 0);
        if (variant >= 2) { /* packed weights (a no-op under MHA_FAST 0) */
            pbytes = mha_packed_weights_size(&s);
            packed = malloc(pbytes ? pbytes : 1);
            if (pbytes && mha_pack_weights(&s, &p.w, packed, pbytes) == MHA_OK) p.w.packed = packed;
        }
        seq_make(&sq, &s, &p.w, pre + steps, 0, 0);
        memset(&c1, 0, sizeof c1);
        c1.capacity = pre + steps;
        c1.k = tu_floats(mha_cache_bytes(&s, 1, c1.capacity) / sizeof(float), 0.0f);
        c1.v = (float *)c1.k + (size_t)s.kv_heads * (size_t)c1.capacity * (size_t)s.p_k;
        c1.length = &len1;
        c2 = c1;
        c2.k = tu_floats(mha_cache_bytes(&s, 1, c2.capacity) / sizeof(float), 0.0f);
        c2.v = (float *)c2.k + (size_t)s.kv_heads * (size_t)c2.capacity * (size_t)s.p_k;
        c2.length = &len2;
        bytes = mha_decode_workspace_size(&s, 1, pre, c1.capacity);
        ws = malloc(bytes);
        out1 = tu_floats((size_t)pre * (size_t)s.p_o, 0.0f);
        out2 = tu_floats((size_t)pre * (size_t)s.p_o, 0.0f);
        ok &= mha_decode(&s, &p.w, &c1, 1, pre, sq.q, sq.k, sq.v, out1, ws, bytes) == MHA_OK;
        ok &= mha_decode_parallel(&s, &p.w, &c2, 1, pre, sq.q, sq.k, sq.v, out2, ws, bytes, reverse_for, NULL) ==
              MHA_OK;
        ok &= close_to(out1, sq.want, (size_t)pre * (size_t)s.p_o);
        same &= memcmp(out1, out2, (size_t)pre * (size_t)s.p_o * sizeof(float)) == 0;
        for (at = pre; at < pre + steps; ++at) {
            size_t o = (size_t)at;
            ok &= mha_decode(&s, &p.w, &c1, 1, 1, sq.q + o * 12, sq.k + o * 12, sq.v + o * 12, out1, ws, bytes) ==
                  MHA_OK;
            ok &= mha_decode_parallel(&s, &p.w, &c2, 1, 1, sq.q + o * 12, sq.k + o * 12, sq.v + o * 12, out2, ws,
                                      bytes, reverse_for, NULL) == MHA_OK;
            ok &= close_to(out1, sq.want + o * (size_t)s.p_o, (size_t)s.p_o);
            same &= memcmp(out1, out2, (size_t)s.p_o * sizeof(float)) == 0;
        }
        ok &= len1 == pre + steps && len2 == pre + steps;
        same &= memcmp(c1.k, c2.k, mha_cache_bytes(&s, 1, c1.capacity)) == 0;
        if (!ok) printf("long decode != forward: variant %d\n", variant);
        all &= ok;
        free(ws);
        free(out1);
        free(out2);
        free(c1.k);
        free(c2.k);
        free(packed);
        seq_free(&sq);
        tu_problem_free(&p);
    }
    CHECK(all, "a cache of 515 to 647 positions, heads of 5 to 8 and of 64 and 80: a prefill "
               "chunk, then steps, packed and unpacked weights, "
               "equal the causal forward");
    CHECK(same, "mha_decode_parallel with tasks in reverse order equals mha_decode bit for bit (cache too)");
}

/* A long ring: 300 slots (two split-KV chunks where the build cuts them at
   256 slots), filled three times over in chunks of tokens, so that its
   oldest slot passes through both chunks; with RoPE, ALiBi, the soft-cap and
   sinks at once: equal to the causal forward with the window's band. */
static void test_long_ring(void) {
    static const int32_t windows[3] = {300, 250, 200}, chunks[3] = {1, 37, 37}, kepts[3] = {0, 0, 60};
    int wi;
    for (wi = 0; wi < 3; ++wi) {
        mha_shape s = {0};
        tu_problem p;
        mha_cache c;
        seq sq;
        int32_t len = 0, at, cap = 300;
        int ok = 1;
        s.heads = 4;
        s.kv_heads = 2;
        s.d_q = s.d_k = s.d_v = 12;
        s.p_q = s.p_k = 8;
        s.p_v = 6;
        s.p_o = 7;
        s.rope_dim = 8;
        s.alibi = 1;
        s.softcap = 4.0f;
        tu_problem_make(&p, &s, 1, 1, 1, 1);
        tu_sinks(&p, 8);
        memset(&c, 0, sizeof c);
        c.window = windows[wi];
        c.keep_first = kepts[wi];
        c.capacity = cap;
        seq_make(&sq, &s, &p.w, 3 * cap, c.window, c.keep_first);
        c.k = tu_floats(mha_cache_bytes(&s, 1, cap) / sizeof(float), 0.0f);
        c.v = (float *)c.k + (size_t)s.kv_heads * (size_t)cap * (size_t)s.p_k;
        c.length = &len;
        for (at = 0; at < sq.len; at += chunks[wi]) {
            int32_t t = sq.len - at < chunks[wi] ? sq.len - at : chunks[wi];
            ok &= decode_chunk(&s, &p.w, &c, &sq, 1, at, t);
        }
        CHECK(ok && len == 3 * cap,
              "a ring of 300 slots, window %d, keep_first %d, chunks of %d, RoPE, ALiBi, soft-cap, sinks: equals the "
              "banded mask (and the first columns) over %d tokens",
              (int)c.window, (int)c.keep_first, (int)chunks[wi], (int)sq.len);
        seq_free(&sq);
        free(c.k);
        tu_problem_free(&p);
    }
}

#endif

/* ---- 16-bit weights and caches ---------------------------------------------- */

/* Element a of row `row` (rows of p) of a cache array of type: float,
   16-bit converted exactly, or a block type's scale times its integer (the
   docs' layout, read here byte by byte). */
static double cache_elt(const void *base, int32_t type, size_t p, size_t row, size_t a) {
    const unsigned char *r = (const unsigned char *)base + row * row_bytes(type, p);
    if (type == MHA_Q8 || type == MHA_Q4) {
        const unsigned char *blk = r + a / 32 * (type == MHA_Q8 ? 34u : 18u);
        uint16_t h;
        int q;
        memcpy(&h, blk, 2);
        if (type == MHA_Q8)
            q = (int)(int8_t)blk[2 + a % 32];
        else
            q = (a % 32 < 16 ? blk[2 + a % 16] & 15 : blk[2 + a % 16] >> 4) - 8;
        return (double)mha_f32_from_f16(h) * q;
    }
    if (type == MHA_F16) return (double)mha_f32_from_f16(((const uint16_t *)(const void *)r)[a]);
    if (type == MHA_BF16) return (double)mha_f32_from_bf16(((const uint16_t *)(const void *)r)[a]);
    return (double)((const float *)(const void *)r)[a];
}

/* The double-precision output [p_o] of the query x (d_q) at position P of
   a one-sequence cache that holds e positions, computed from the same
   rounded values mha.h reads: the weights as the floats wq, bq, wo, bo (the
   16-bit ones converted), the cache's elements converted exactly. Position
   p lives in slot p, or p mod capacity once e > capacity (docs); the
   query sees p <= P, with a window only p > P - window. Into out as floats. */
static void oracle_step(const mha_shape *s, const float *wq, const float *bq, const float *wo, const float *bo,
                        const mha_cache *c, int32_t e, const float *x, int32_t P, float *out) {
    int32_t H = s->heads, G = H / s->kv_heads, pq = s->p_q, pv = s->p_v, cap = c->capacity, i, j, a, r;
    int32_t held = e < cap ? e : cap;
    double *qp = (double *)malloc(sizeof(double) * (size_t)(H * pq)), *cat = (double *)malloc(sizeof(double) * (size_t)(H * pv));
    double *sc = (double *)malloc(sizeof(double) * (size_t)cap), scale = 1.0 / sqrt((double)s->p_k), mx, sum, acc;
    int32_t *held_pos = (int32_t *)malloc(sizeof(int32_t) * (size_t)cap);
    double *kd = (double *)malloc(sizeof(double) * (size_t)(cap * pq)), *vd = (double *)malloc(sizeof(double) * (size_t)(cap * pv));
    for (j = 0; j < held; ++j) held_pos[j] = slot_position(j, e, cap, c->keep_first);
    for (r = 0; r < H * pq; ++r) {
        for (acc = bq ? (double)bq[r] : 0.0, a = 0; a < s->d_q; ++a) acc += (double)wq[(size_t)r * (size_t)s->d_q + (size_t)a] * x[a];
        qp[r] = acc;
    }
    for (i = 0; i < H && s->rope_dim; ++i) naive_rope(s, qp + i * pq, (double)P);
    for (i = 0; i < H; ++i) {
        size_t base = (size_t)(i / G) * (size_t)cap;
        if (i % G == 0) /* the first head of its kv head: the cached values, read once */
            for (j = 0; j < held; ++j) {
                for (a = 0; a < pq; ++a) kd[j * pq + a] = cache_elt(c->k, c->type, (size_t)pq, base + (size_t)j, (size_t)a);
                for (a = 0; a < pv; ++a) vd[j * pv + a] = cache_elt(c->v, value_type(c), (size_t)pv, base + (size_t)j, (size_t)a);
            }
        for (mx = -INFINITY, j = 0; j < held; ++j) {
            int32_t pos = held_pos[j];
            sc[j] = -INFINITY;
            if (pos <= P && (!c->window || pos > P - c->window || pos < c->keep_first)) {
                for (acc = 0.0, a = 0; a < pq; ++a) acc += qp[i * pq + a] * kd[j * pq + a];
                sc[j] = scale * acc;
            }
            if (sc[j] > mx) mx = sc[j];
        }
        for (sum = 0.0, j = 0; j < held; ++j) sum += sc[j] = exp(sc[j] - mx);
        for (a = 0; a < pv; ++a) {
            for (acc = 0.0, j = 0; j < held; ++j) acc += sc[j] / sum * vd[j * pv + a];
            cat[i * pv + a] = acc;
        }
    }
    for (r = 0; r < s->p_o; ++r) {
        for (acc = bo ? (double)bo[r] : 0.0, a = 0; a < H * pv; ++a) acc += (double)wo[(size_t)r * (size_t)(H * pv) + (size_t)a] * cat[a];
        out[r] = (float)acc;
    }
    free(qp);
    free(cat);
    free(sc);
    free(held_pos);
    free(kd);
    free(vd);
}

/* How far a cached element may be from the exact projection x, for its
   array's type: half a unit in the last place of a 16-bit type (2^-11
   relative for f16, 2^-8 for bf16); for a block type half its scale d
   (MHA_Q8) or d (MHA_Q4, whose one value of the sign opposite to the
   block's largest may clamp from 8 to 7, and d itself is rounded to f16:
   d (1 + 2^-8)); plus fp32's own error. */
static double cached_tolerance(const void *base, int32_t type, size_t p, size_t row, size_t a, double x) {
    double t = 1e-6 * (1.0 + fabs(x));
    if (type == MHA_F16 || type == MHA_BF16) return t + fabs(x) * (type == MHA_F16 ? 1.0 / 2048.0 : 1.0 / 256.0);
    if (type == MHA_Q8 || type == MHA_Q4) {
        uint16_t h;
        memcpy(&h, (const unsigned char *)base + row * row_bytes(type, p) + a / 32 * (type == MHA_Q8 ? 34u : 18u), 2);
        return t + fabs((double)mha_f32_from_f16(h)) * (type == MHA_Q8 ? 0.5 : 1.0 + 1.0 / 256.0);
    }
    return t;
}

/* Whether every position the one-sequence cache holds (e appended) is its
   projected key (RoPE at its position) and value, computed in double from
   the same weights (wk, bk, wv, bv) and the tokens k, v (d_k, d_v each),
   stored in the array's type within cached_tolerance. */
static int cache_rounded_ok(const mha_shape *s, const float *wk, const float *bk, const float *wv, const float *bv,
                            const mha_cache *c, int32_t e, const float *k, const float *v) {
    int32_t cap = c->capacity, held = e < cap ? e : cap, j, g, r, a, pk = s->p_k, pv = s->p_v;
    double kp[64], acc, got;
    int ok = 1;
    for (j = 0; j < held; ++j) {
        int32_t pos = slot_position(j, e, cap, c->keep_first);
        for (g = 0; g < s->kv_heads; ++g) {
            size_t slot = (size_t)g * (size_t)cap + (size_t)j;
            for (r = 0; r < pk; ++r) {
                size_t row = (size_t)(g * pk + r);
                for (acc = bk ? (double)bk[row] : 0.0, a = 0; a < s->d_k; ++a)
                    acc += (double)wk[row * (size_t)s->d_k + (size_t)a] * k[(size_t)pos * (size_t)s->d_k + (size_t)a];
                kp[r] = acc;
            }
            if (s->rope_dim) naive_rope(s, kp, (double)pos);
            for (r = 0; r < pk; ++r) {
                got = cache_elt(c->k, c->type, (size_t)pk, slot, (size_t)r);
                ok &= fabs(got - kp[r]) <= cached_tolerance(c->k, c->type, (size_t)pk, slot, (size_t)r, kp[r]);
            }
            for (r = 0; r < pv; ++r) {
                size_t row = (size_t)(g * pv + r);
                for (acc = bv ? (double)bv[row] : 0.0, a = 0; a < s->d_v; ++a)
                    acc += (double)wv[row * (size_t)s->d_v + (size_t)a] * v[(size_t)pos * (size_t)s->d_v + (size_t)a];
                got = cache_elt(c->v, value_type(c), (size_t)pv, slot, (size_t)r);
                ok &= fabs(got - acc) <= cached_tolerance(c->v, value_type(c), (size_t)pv, slot, (size_t)r, acc);
            }
        }
    }
    return ok;
}

/* The block of type (MHA_Q8, MHA_Q4) that the docs' rule makes of r <= 32
   floats x, written independently of mha.h (in double: x / d computed in
   double and rounded to float is the float quotient; rint rounds ties to
   even): 34 or 18 bytes into blk. */
static void quantize_ref(unsigned char *blk, int32_t type, const float *x, size_t r) {
    double big = 0.0, d, y;
    int bad = 0, q;
    size_t i;
    uint16_t h;
    for (i = 0; i < r; ++i) {
        if (!isfinite(x[i])) bad = 1;
        if (fabs((double)x[i]) > fabs(big)) big = (double)x[i];
    }
    h = mha_f16_from_f32(type == MHA_Q8 ? (float)(fabs(big) / 127.0) : (float)(big / -8.0));
    if ((h & 0x7FFF) == 0x7C00) h = (uint16_t)((h & 0x8000) | 0x7BFF);
    if (bad) h = 0x7E00;
    memcpy(blk, &h, 2);
    d = (double)mha_f32_from_f16(h);
    memset(blk + 2, type == MHA_Q8 ? 0 : 0x88, type == MHA_Q8 ? 32 : 16);
    for (i = 0; i < r && !bad && d != 0.0; ++i) {
        y = rint((double)(float)((double)x[i] / d));
        if (type == MHA_Q8) {
            q = y > 127.0 ? 127 : y < -127.0 ? -127 : (int)y;
            blk[2 + i] = (unsigned char)(int8_t)q;
        } else {
            q = (y > 7.0 ? 7 : y < -8.0 ? -8 : (int)y) + 8;
            blk[2 + i % 16] = (unsigned char)(i < 16 ? (blk[2 + i % 16] & 0xF0) | q : (blk[2 + i % 16] & 0x0F) | q << 4);
        }
    }
}

/* Whether each row of the array (rows rows of p, type a block type) holds,
   byte for byte, quantize_ref of the same row of the float array f. */
static int blocks_equal(const void *arr, int32_t type, const float *f, size_t p, size_t rows) {
    unsigned char blk[34];
    size_t i, b, rb = row_bytes(type, p), bb = type == MHA_Q8 ? 34u : 18u;
    int ok = 1;
    for (i = 0; i < rows; ++i)
        for (b = 0; b * 32 < p; ++b) {
            quantize_ref(blk, type, f + i * p + b * 32, p - b * 32 < 32 ? p - b * 32 : 32);
            ok &= memcmp(blk, (const unsigned char *)arr + i * rb + b * bb, bb) == 0;
        }
    return ok;
}

/* Cross-attention (no append) of one query q against the cache c (a block
   type in k or v, one sequence) and against a float cache that holds the
   values c's elements read as: the same outputs bit for bit, on the path
   asked for (the block types' values are exact floats, d q, and each path
   sums them as it sums floats); on the fast path also through a
   parallel-for that runs the split-KV items in reverse. Not asked (1) with
   RoPE or ALiBi, which cross-attention refuses. */
static int typed_equals_float(const mha_shape *s, const mha_weights *w, mha_cache *c, int path, const float *q,
                              float *out, void *ws, size_t bytes) {
    const size_t kvh = (size_t)s->kv_heads, cap = (size_t)c->capacity, pk = (size_t)s->p_k, pv = (size_t)s->p_v;
    mha_cache f = *c;
    int32_t len = *c->length;
    float *fk, *fv, *out2 = tu_floats((size_t)s->p_o, 0.0f);
    size_t r, a;
    int ok;
    if (s->rope_dim || s->alibi) {
        free(out2);
        return 1;
    }
    fk = tu_floats(kvh * cap * pk, 0.0f);
    fv = tu_floats(kvh * cap * pv, 0.0f);
    for (r = 0; r < kvh * cap; ++r) {
        for (a = 0; a < pk; ++a) fk[r * pk + a] = (float)cache_elt(c->k, c->type, pk, r, a);
        for (a = 0; a < pv; ++a) fv[r * pv + a] = (float)cache_elt(c->v, value_type(c), pv, r, a);
    }
    f.k = fk;
    f.v = fv;
    f.type = f.value_type = MHA_F32;
    f.length = &len;
    ok = (path ? mha_decode_reference : mha_decode)(s, w, c, 1, 1, q, NULL, NULL, out, ws, bytes) == MHA_OK;
    ok &= (path ? mha_decode_reference : mha_decode)(s, w, &f, 1, 1, q, NULL, NULL, out2, ws, bytes) == MHA_OK;
    ok &= memcmp(out, out2, (size_t)s->p_o * sizeof(float)) == 0 && len == *c->length;
#if !defined(TEST_DECODE_SMALL) || !TEST_DECODE_SMALL
    if (!path) { /* the split-KV items in another order: the same bits */
        ok &= mha_decode_parallel(s, w, c, 1, 1, q, NULL, NULL, out2, ws, bytes, reverse_for, NULL) == MHA_OK;
        ok &= memcmp(out, out2, (size_t)s->p_o * sizeof(float)) == 0;
    }
#endif
    free(fk);
    free(fv);
    free(out2);
    return ok;
}

/* A weight matrix of count floats rounded to type: its 16-bit elements
   (returned, malloc'd) and, in place, the floats they convert back to. */
static uint16_t *round_weights(float *w, size_t count, int32_t type) {
    uint16_t *h = (uint16_t *)malloc((count ? count : 1) * sizeof(uint16_t));
    size_t i;
    for (i = 0; i < count; ++i) {
        h[i] = type == MHA_F16 ? mha_f16_from_f32(w[i]) : mha_bf16_from_f32(w[i]);
        w[i] = type == MHA_F16 ? mha_f32_from_f16(h[i]) : mha_f32_from_bf16(h[i]);
    }
    return h;
}

/* f16 and bf16 caches, with float weights and with weights of the same
   type, on mha_decode and mha_decode_reference: a prefill chunk (more than
   the 8 rows that decoding reads 16-bit weights for as they are), then
   single steps; every output against oracle_step on the same rounded values
   (README: the fp32 computation on the rounded values, within the suite's
   tolerance), and the cache's contents against cache_rounded_ok. Variants:
   GQA; RoPE with a window over a ring that wraps; heads of 16 and 64
   (whole vectors, the four-vector kernels); a long cache over several
   split-KV chunks, filled by mha_cache_append, then steps (not on the
   small targets). */
static void test_16bit(void) {
#if !defined(TEST_DECODE_SMALL) || !TEST_DECODE_SMALL
    const int variants = 4;
#else
    const int variants = 3;
#endif
    /* the cache's key and value types (0: the key type's) */
    static const int32_t types[6][2] = {{MHA_F16, 0}, {MHA_BF16, 0}, {MHA_Q8, 0}, {MHA_Q4, 0}, {MHA_Q8, MHA_Q4},
                                        {MHA_F32, MHA_Q8}};
    int variant, ti, wi, path, all = 1, refused = 1, blocks = 1, same = 1;
    double dist[6] = {0.0, 0.0, 0.0, 0.0, 0.0, 0.0}; /* by cache type: the largest distance to the float cache */
    const float before = worst_ratio;
    worst_ratio = 0.0f;
    for (variant = 0; variant < variants; ++variant)
        for (ti = 0; ti < 6; ++ti)
            for (wi = 0; wi < 2; ++wi)
                for (path = 0; path < 2; ++path) {
                    const int32_t type = types[ti][0], vtype = types[ti][1] ? types[ti][1] : type;
                    const int32_t wtype = !wi ? MHA_F32 : type == MHA_BF16 ? MHA_BF16 : MHA_F16;
                    const int blocked = type >= MHA_Q8 || vtype >= MHA_Q8;
                    mha_cache twin; /* a float cache given the same calls: the projections before rounding */
                    void *twin_store = NULL;
                    mha_shape s = {0};
                    tu_problem p;
                    mha_weight_counts wc;
                    mha_weights w;
                    mha_cache c;
                    uint16_t *w16[4] = {NULL, NULL, NULL, NULL};
                    int32_t len = 0, twin_len, pre, steps, cap, e, P, check_from;
                    size_t bytes;
                    void *ws, *store;
                    float *q, *k, *v, *out, *want, *out_twin;
                    int ok = 1;
                    s.heads = 4;
                    s.kv_heads = 2;
                    const size_t d = variant == 2 ? 300 : 12; /* 300: past a block of KC = 128 */
                    s.d_q = s.d_k = s.d_v = (int32_t)d;
                    s.p_q = s.p_k = variant == 2 ? 16 : variant == 3 ? 64 : 8;
                    s.p_v = variant == 2 ? 64 : variant == 3 ? 80 : 6;
                    s.p_o = 7;
                    pre = variant == 1 ? 3 : variant == 3 ? 1090 : 9;
                    steps = variant == 1 ? 20 : 4;
                    cap = variant == 1 ? 12 : pre + steps;
                    if (variant == 1 || variant == 3) {
                        s.rope_dim = variant == 1 ? 8 : 32;
                        s.rope_pairs = variant == 3;
                    }
                    tu_problem_make(&p, &s, 1, 1, 1, 1);
                    mha_weight_counts_get(&s, &wc);
                    w = p.w;
                    w.type = wtype;
                    if (wtype != MHA_F32) {
                        w.w_q = w16[0] = round_weights((float *)p.w.w_q, wc.w_q, wtype);
                        w.w_k = w16[1] = round_weights((float *)p.w.w_k, wc.w_k, wtype);
                        w.w_v = w16[2] = round_weights((float *)p.w.w_v, wc.w_v, wtype);
                        w.w_o = w16[3] = round_weights((float *)p.w.w_o, wc.w_o, wtype);
                    }
                    memset(&c, 0, sizeof c);
                    c.capacity = cap;
                    c.window = variant == 1 ? 5 : 0;
                    c.keep_first = variant == 1 && wi ? 2 : 0; /* 2 + 5 + 3 - 1 <= 12 */
                    c.type = type;
                    c.value_type = types[ti][1];
                    c.length = &len;
                    store = malloc(mha_cache_array_bytes(&s, 1, cap, type, 0) + mha_cache_array_bytes(&s, 1, cap, vtype, 1));
                    c.k = store;
                    c.v = (unsigned char *)store + mha_cache_array_bytes(&s, 1, cap, type, 0);
                    twin = c;
                    twin.type = twin.value_type = MHA_F32;
                    twin.length = &twin_len;
                    twin_len = 0;
                    if (blocked) {
                        twin_store = malloc(mha_cache_bytes(&s, 1, cap));
                        twin.k = twin_store;
                        twin.v = (float *)twin_store + (size_t)s.kv_heads * (size_t)cap * (size_t)s.p_k;
                    }
                    q = tu_floats((size_t)(pre + steps) * d, 1.0f);
                    k = tu_floats((size_t)(pre + steps) * d, 1.0f);
                    v = tu_floats((size_t)(pre + steps) * d, 1.0f);
                    out = tu_floats((size_t)pre * 7, 0.0f);
                    want = tu_floats(7, 0.0f);
                    out_twin = tu_floats((size_t)pre * 7, 0.0f);
                    bytes = mha_decode_workspace_size(&s, 1, pre, cap); /* mha_cache_append's too */
                    if (path && mha_decode_reference_workspace_size(&s, 1, pre, cap) > bytes)
                        bytes = mha_decode_reference_workspace_size(&s, 1, pre, cap);
                    ws = malloc(bytes);
                    if (variant == 3) { /* the long cache: filled by mha_cache_append (no queries), then steps */
                        ok &= mha_cache_append(&s, &w, &c, 1, pre, k, v, ws, bytes) == MHA_OK;
                        if (blocked) ok &= mha_cache_append(&s, &w, &twin, 1, pre, k, v, ws, bytes) == MHA_OK;
                        e = pre;
                    } else {
                        e = 0;
                    }
                    for (; e < pre + steps; e += e ? 1 : pre) { /* the chunk, then steps */
                        int32_t t = e ? 1 : pre;
                        if (blocked)
                            ok &= (path ? mha_decode_reference : mha_decode)(&s, &w, &twin, 1, t, q + (size_t)e * d,
                                                                              k + (size_t)e * d, v + (size_t)e * d,
                                                                              out_twin, ws, bytes) == MHA_OK;
                        ok &= (path ? mha_decode_reference : mha_decode)(&s, &w, &c, 1, t, q + (size_t)e * d,
                                                                          k + (size_t)e * d, v + (size_t)e * d,
                                                                          out, ws, bytes) == MHA_OK;
                        check_from = t > 8 ? t - 8 : 0; /* the last 8 rows of a long chunk */
                        for (P = e + check_from; P < e + t; ++P) {
                            oracle_step(&s, (const float *)p.w.w_q, p.w.b_q, (const float *)p.w.w_o, p.w.b_o, &c, e + t,
                                        q + (size_t)P * d, P, want);
                            ok &= close_to(out + (size_t)(P - e) * 7, want, 7);
                        }
                        for (P = 0; blocked && P < t * 7; ++P) { /* the distance to the float cache's outputs */
                            const double x = fabs((double)out[P] - (double)out_twin[P]) / (1.0 + fabs((double)out_twin[P]));
                            if (x > dist[ti]) dist[ti] = x;
                        }
                    }
                    ok &= len == pre + steps;
                    ok &= cache_rounded_ok(&s, (const float *)p.w.w_k, p.w.b_k, (const float *)p.w.w_v, p.w.b_v, &c,
                                           pre + steps, k, v);
                    ok &= rows_ok(&s, &c, pre + steps);
                    if (!ok)
                        printf("typed cache decode: variant %d, cache types %d/%d, weights type %d, %s path\n",
                               variant, (int)type, (int)vtype, (int)wtype, path ? "reference" : "mha_decode's");
                    all &= ok;
                    if (blocked) { /* every block is the docs' rule applied to the float projection */
                        const size_t held = (size_t)s.kv_heads * (size_t)(pre + steps < cap ? pre + steps : cap);
                        int b_ok = 1, s_ok;
                        if (type >= MHA_Q8) b_ok &= blocks_equal(c.k, type, (const float *)twin.k, (size_t)s.p_k, held);
                        if (vtype >= MHA_Q8) b_ok &= blocks_equal(c.v, vtype, (const float *)twin.v, (size_t)s.p_v, held);
                        if (!b_ok)
                            printf("blocks differ from the rule: variant %d, cache types %d/%d, %s path\n", variant,
                                   (int)type, (int)vtype, path ? "reference" : "mha_decode's");
                        blocks &= b_ok;
                        s_ok = typed_equals_float(&s, &w, &c, path, q, out, ws, bytes);
                        if (!s_ok)
                            printf("block cache != float cache of its values: variant %d, cache types %d/%d, %s path\n",
                                   variant, (int)type, (int)vtype, path ? "reference" : "mha_decode's");
                        same &= s_ok;
                    }
                    if (variant == 0 && !path) { /* additive scoring: no 16-bit cache */
                        mha_shape sa = s;
                        sa.score = MHA_SCORE_ADDITIVE;
                        sa.p_a = 3;
                        refused &= mha_decode(&sa, &w, &c, 1, 1, q, k, v, out, ws, bytes) == MHA_ERR_SHAPE;
                    }
                    free(ws);
                    free(store);
                    free(twin_store);
                    free(out_twin);
                    free(q);
                    free(k);
                    free(v);
                    free(out);
                    free(want);
                    free(w16[0]);
                    free(w16[1]);
                    free(w16[2]);
                    free(w16[3]);
                    tu_problem_free(&p);
                }
    CHECK(all, "f16, bf16, q8 and q4 caches, q8 keys with q4 values, float keys with q8 values, with float and "
               "16-bit weights (GQA; RoPE and a window over a wrapped ring, keep_first 2 with 16-bit weights; "
               "heads of 16 and 64, p 6, 8, 80 (short blocks); a long cache by mha_cache_append), prefill chunk then "
               "steps, fast and reference paths: every output equals the double computation on the cache's values, "
               "and the cache holds the projections rounded or quantized to its types, each row where "
               "mha_cache_row says");
    CHECK(blocks, "q8 and q4 caches: every block, byte for byte, the documented quantization (an independent one in "
                  "the test) of the float cache's row given the same calls");
    CHECK(same, "q8 and q4 caches: cross-attention gives the same bits as a float cache holding the values the "
                "blocks read as, on both paths, and (fast path) for a reversed schedule of the split-KV items");
    CHECK(refused, "a 16-bit or block cache with additive scoring: MHA_ERR_SHAPE");
    printf("block caches against a float cache given the same calls, worst |out - out_float| / (1 + |out_float|): "
           "q8 %.2g, q4 %.2g, q8 keys with q4 values %.2g, float keys with q8 values %.2g\n", dist[2], dist[3], dist[4],
           dist[5]);
    printf("16-bit weights and caches against the double computation on their values: worst error %.3g of the "
           "tolerance\n", (double)worst_ratio);
    if (before > worst_ratio) worst_ratio = before;
}

/* Values that are not finite, or so large that the weighted sum would
   overflow on the way: the same results (NaN where NaN, inf where inf,
   finite values within the tolerance) as the reference path. */
static void test_non_finite(void) {
    float bad[4]; /* set here: tcc takes INFINITY and NAN for no constant */
    int k, all = 1;
    bad[0] = INFINITY;
    bad[1] = -INFINITY;
    bad[2] = NAN;
    bad[3] = 3e37f;
    for (k = 0; k < 4; ++k) {
        mha_shape s = {0};
        tu_problem p;
        mha_cache c1, c2;
        int32_t len1 = 0, len2 = 0, n = 40, i;
        size_t bytes1, bytes2, a;
        void *ws1, *ws2;
        float *out1, *out2, top = 0.0f;
        int ok = 1;
        s.heads = 2;
        s.d_q = s.d_k = s.d_v = 4;
        s.p_q = s.p_k = s.p_v = 4;
        s.p_o = 4;
        tu_problem_make(&p, &s, 1, n, n, 0);
        for (i = 0; i < 16; ++i) ((float *)p.w.w_v)[i] = i % 5 == 0 ? 1.0f : 0.0f; /* W_v = I */
        p.v[4 * 7 + 1] = bad[k]; /* token 7's value, component 1 */
        if (k == 3)
            for (i = 0; i < n * 4; ++i) p.v[i] = i % 2 ? 3e37f : -2e37f;
        memset(&c1, 0, sizeof c1);
        c1.capacity = n;
        c1.k = tu_floats(mha_cache_bytes(&s, 1, n) / sizeof(float), 0.0f);
        c1.v = (float *)c1.k + (size_t)2 * (size_t)n * 4;
        c1.length = &len1;
        c2 = c1;
        c2.k = tu_floats(mha_cache_bytes(&s, 1, n) / sizeof(float), 0.0f);
        c2.v = (float *)c2.k + (size_t)2 * (size_t)n * 4;
        c2.length = &len2;
        bytes1 = mha_decode_workspace_size(&s, 1, n, n);
        bytes2 = mha_decode_reference_workspace_size(&s, 1, n, n);
        ws1 = malloc(bytes1);
        ws2 = malloc(bytes2);
        out1 = tu_floats((size_t)n * 4, 0.0f);
        out2 = tu_floats((size_t)n * 4, 0.0f);
        ok &= mha_decode(&s, &p.w, &c1, 1, n, p.q, p.k, p.v, out1, ws1, bytes1) == MHA_OK;
        ok &= mha_decode_reference(&s, &p.w, &c2, 1, n, p.q, p.k, p.v, out2, ws2, bytes2) == MHA_OK;
        for (a = 0; a < (size_t)n * 4; ++a) /* the largest finite result */
            if (fabsf(out2[a]) <= FLT_MAX && fabsf(out2[a]) > top) top = fabsf(out2[a]);
        for (a = 0; a < (size_t)n * 4; ++a) {
            float x = out1[a], y = out2[a];
            if (x != x || y != y)
                ok &= x != x && y != y;
            else if (isinf(x) || isinf(y))
                ok &= x == y;
            else
                ok &= fabsf(x - y) <= TOL * (1.0f + top);
        }
        if (!ok) printf("non-finite case %d: decode != decode_reference\n", k);
        all &= ok;
        free(ws1);
        free(ws2);
        free(out1);
        free(out2);
        free(c1.k);
        free(c2.k);
        tu_problem_free(&p);
    }
    CHECK(all, "values inf, -inf, NaN, and near FLT_MAX: mha_decode gives the reference path's NaN, inf and "
               "finite results");
}

/* The workspace mha_decode_workspace_size gives is all a call writes, also where the fast decode's
   parts are smaller than the call state it keeps there (batch 0 with t 0 and 1; one element a head,
   capacity 1): the bytes after it, a canary, stay as they were, for every offset from the alignment. */
static void test_tiny_workspace(void) {
    mha_shape s = {0};
    tu_problem p;
    mha_cache c;
    int32_t len, off, t;
    int ok = 1;
    size_t bytes, k;
    unsigned char *buf;
    s.heads = s.kv_heads = 1;
    s.d_q = s.d_k = s.d_v = s.p_q = s.p_k = s.p_v = s.p_o = 1;
    tu_problem_make(&p, &s, 1, 1, 1, 1);
    for (t = 0; t < 2; ++t)
    for (off = 0; off < 64; ++off) {
        bytes = mha_decode_workspace_size(&s, 0, t, 1);
        buf = (unsigned char *)malloc(bytes + 128);
        memset(&c, 0, sizeof c);
        len = 0;
        c.capacity = 1;
        c.k = tu_floats(mha_cache_bytes(&s, 1, 1) / sizeof(float), 0.0f);
        c.v = (float *)c.k + 1;
        c.length = &len;
        memset(buf, 0xa5, bytes + 128);
        ok &= mha_decode(&s, &p.w, &c, 0, t, p.q, p.k, p.v, p.out, buf + off, bytes) == MHA_OK;
        for (k = (size_t)off + bytes; k < bytes + 128; ++k) ok &= buf[k] == 0xa5;
        free(c.k);
        free(buf);
    }
    CHECK(ok, "a decode of batch 0: nothing written past its workspace, at every alignment");
    tu_problem_free(&p);
}

/* ---- speculative decoding: a tree of drafts --------------------------------- */

/* A random tree of t drafts: parent -1 (the prefix) or an earlier draft. */
static void random_tree(int32_t *par, int32_t t) {
    int32_t i;
    for (i = 0; i < t; ++i) par[i] = i == 0 ? -1 : (int32_t)(tu_next() % (uint32_t)(i + 1)) - 1;
}

/* The drafts from the root down to draft i (path[0] the root's child of
   the prefix, path[len - 1] = i): their count. */
static int32_t tree_path(const int32_t *par, int32_t i, int32_t *path) {
    int32_t len = 0, k, a;
    for (a = i; a >= 0; a = par[a]) ++len;
    for (a = i, k = len - 1; a >= 0; a = par[a]) path[k--] = a;
    return len;
}

/* mha_decode_tree against two oracles: (1) each draft's output equals
   decoding the prefix and then its path (its ancestors and itself) token by
   token on a copy of the cache (mha_decode_reference); (2) with no RoPE,
   ALiBi or window, a float cache, the forward pass over the prefix and the
   drafts with the keep mask that lets draft i see the prefix and its
   ancestors. Random
   shapes (dot and additive), ragged batches, float, f16 and bf16 caches,
   windows over wrapped rings with kept first positions, RoPE, ALiBi,
   soft-cap and sinks on half; lengths unchanged after the call. */
static void test_tree(void) {
    int problem, all = 1, fwd_all = 1, fwd_runs = 0;
    for (problem = 0; problem < 32; ++problem) {
        const int variant = problem % 4; /* 0 float; 1 float, window, keep_first; 2 f16 or q8; 3 bf16 or q4,
                                            window */
        mha_shape s = random_shape(problem % 8 == 0 || problem % 8 == 5); /* additive: float caches */
        tu_problem p;
        mha_cache c, o;
        int on = problem % 3 ? tu_extras(&s) : 0;
        const int32_t type = variant == 2 ? (problem % 8 < 4 ? MHA_F16 : MHA_Q8)
                           : variant == 3 ? (problem % 8 < 4 ? MHA_BF16 : MHA_Q4) : MHA_F32;
        int32_t batch = 1 + (int32_t)(tu_next() % 3), t = 1 + (int32_t)(tu_next() % 8), b, i, k, cap, len_max = 0;
        int32_t lens[3], pre[3], par[3 * 8], path[8], olen, plen;
        size_t dq = (size_t)s.d_q, dk = (size_t)s.d_k, dv = (size_t)s.d_v, po = (size_t)s.p_o, bytes, cbytes;
        float *q[3], *kk[3], *vv[3], *dq_all, *dk_all, *dv_all, *out, *one;
        void *store, *snap, *ostore, *ws;
        int ok = 1;
        if (type && s.score == MHA_SCORE_ADDITIVE) s.score = MHA_SCORE_DOT;
        if (s.score == MHA_SCORE_DOT) s.p_k = s.p_q;
        tu_problem_make(&p, &s, 1, 1, 1, problem % 2);
        tu_sinks(&p, on);
        memset(&c, 0, sizeof c);
        c.type = type;
        c.window = variant == 1 ? 2 + (int32_t)(tu_next() % 5) : variant == 3 ? 3 : 0;
        c.keep_first = variant == 1 ? (int32_t)(tu_next() % (uint32_t)c.window) : 0;
        if (problem == 1) { /* a chain of 8 after 1 token, window 3, 2 kept: draft 0 (position 1) is kept */
            c.window = 3;
            c.keep_first = 2;
            t = 8;
        }
        for (b = 0; b < batch; ++b) {
            pre[b] = problem == 1 ? 1 : (int32_t)(tu_next() % (c.window ? 30u : 12u)); /* a ring wraps */
            if (pre[b] > len_max) len_max = pre[b];
            q[b] = tu_floats((size_t)(pre[b] + t) * dq, 1.0f);
            kk[b] = tu_floats((size_t)(pre[b] + t) * dk, 1.0f);
            vv[b] = tu_floats((size_t)(pre[b] + t) * dv, 1.0f);
            random_tree(par + b * t, t);
            for (i = 0; i < t && problem == 1; ++i) par[b * t + i] = i - 1;
        }
        cap = c.window ? c.keep_first + c.window + t - 1 + (int32_t)(tu_next() % 3) : len_max + t + (int32_t)(tu_next() % 3);
        c.capacity = cap;
        cbytes = mha_cache_bytes_typed(&s, batch, cap, type);
        store = malloc(cbytes);
        snap = malloc(cbytes);
        ostore = malloc(cbytes);
        memset(store, 0, cbytes);
        c.k = store;
        c.v = (unsigned char *)store + mha_cache_array_bytes(&s, batch, cap, type, 0);
        c.length = lens;
        bytes = mha_decode_workspace_size(&s, batch, t, cap);
        if (mha_decode_reference_workspace_size(&s, batch, t, cap) > bytes)
            bytes = mha_decode_reference_workspace_size(&s, batch, t, cap);
        ws = malloc(bytes);
        for (b = 0; b < batch; ++b) { /* each prefix, a token at a time */
            mha_cache one_c = sub_cache(&s, &c, b);
            lens[b] = 0;
            for (k = 0; k < pre[b]; ++k)
                ok &= mha_cache_append(&s, &p.w, &one_c, 1, 1, kk[b] + (size_t)k * dk, vv[b] + (size_t)k * dv, ws,
                                       bytes) == MHA_OK;
        }
        memcpy(snap, store, cbytes);
        dq_all = tu_floats((size_t)batch * (size_t)t * dq, 0.0f);
        dk_all = tu_floats((size_t)batch * (size_t)t * dk, 0.0f);
        dv_all = tu_floats((size_t)batch * (size_t)t * dv, 0.0f);
        out = tu_floats((size_t)batch * (size_t)t * po, 0.0f);
        one = tu_floats(po, 0.0f);
        for (b = 0; b < batch; ++b) {
            memcpy(dq_all + (size_t)b * (size_t)t * dq, q[b] + (size_t)pre[b] * dq, (size_t)t * dq * sizeof(float));
            memcpy(dk_all + (size_t)b * (size_t)t * dk, kk[b] + (size_t)pre[b] * dk, (size_t)t * dk * sizeof(float));
            memcpy(dv_all + (size_t)b * (size_t)t * dv, vv[b] + (size_t)pre[b] * dv, (size_t)t * dv * sizeof(float));
        }
        ok &= mha_decode_tree(&s, &p.w, &c, batch, t, par, dq_all, dk_all, dv_all, out, ws, bytes) == MHA_OK;
        for (b = 0; b < batch; ++b) ok &= lens[b] == pre[b];
        for (b = 0; b < batch; ++b) /* (1) each draft's path, decoded token by token after the prefix */
            for (i = 0; i < t; ++i) {
                memcpy(ostore, snap, cbytes);
                o = c;
                o.k = ostore;
                o.v = (unsigned char *)ostore + ((unsigned char *)c.v - (unsigned char *)store);
                o = sub_cache(&s, &o, b);
                olen = pre[b];
                o.length = &olen;
                plen = tree_path(par + b * t, i, path);
                for (k = 0; k < plen; ++k) /* (a block cache: the path of the same build, whose projections
                                               quantize to the same integers as the tree's) */
                    ok &= (type >= MHA_Q8 ? mha_decode : mha_decode_reference)(&s, &p.w, &o, 1, 1, q[b] + (size_t)(pre[b] + path[k]) * dq,
                                               kk[b] + (size_t)(pre[b] + path[k]) * dk,
                                               vv[b] + (size_t)(pre[b] + path[k]) * dv, one, ws, bytes) == MHA_OK;
                ok &= close_to(out + ((size_t)b * (size_t)t + (size_t)i) * po, one, po);
            }
        if (!s.rope_dim && !s.alibi && !c.window && !type) /* (2) the forward pass with the tree's keep mask */
            for (b = 0; b < batch; ++b) {
                int32_t L = pre[b], n = L + t, r, j;
                uint8_t *keep = (uint8_t *)calloc((size_t)n * (size_t)n, 1);
                mha_mask mask = {0, 0, NULL, 0, NULL, NULL};
                float *fo = tu_floats((size_t)n * po, 0.0f);
                size_t fb = mha_reference_workspace_size(&s, 1, n, n);
                void *fws = malloc(fb);
                for (r = 0; r < n; ++r)
                    for (j = 0; j < n; ++j) {
                        int see = j <= r && j < L; /* the prefix: causal */
                        if (r >= L && j >= L) /* draft r - L sees draft j - L where it descends from it */
                            for (k = r - L; k >= 0 && !see; k = par[b * t + k]) see = k == j - L;
                        if (r < L) see = j <= r;
                        keep[(size_t)r * (size_t)n + (size_t)j] = (uint8_t)see;
                    }
                mask.keep = keep;
                fwd_all &= mha_forward_reference(&s, &p.w, 1, n, n, q[b], kk[b], vv[b], &mask, fo, NULL, fws, fb) ==
                               MHA_OK &&
                           close_to(out + (size_t)b * (size_t)t * po, fo + (size_t)L * po, (size_t)t * po);
                ++fwd_runs;
                free(keep);
                free(fo);
                free(fws);
            }
        if (!ok)
            printf("tree decode: problem %d (variant %d, %s, heads %d/%d, batch %d, t %d, window %d, keep_first %d)\n",
                   problem, variant, s.score == MHA_SCORE_ADDITIVE ? "additive" : "dot", (int)s.heads,
                   (int)s.kv_heads, (int)batch, (int)t, (int)c.window, (int)c.keep_first);
        all &= ok;
        for (b = 0; b < batch; ++b) {
            free(q[b]);
            free(kk[b]);
            free(vv[b]);
        }
        free(dq_all);
        free(dk_all);
        free(dv_all);
        free(out);
        free(one);
        free(store);
        free(snap);
        free(ostore);
        free(ws);
        tu_problem_free(&p);
    }
    CHECK(all, "mha_decode_tree on 32 random problems (float, f16, bf16, q8 and q4 caches, windows over wrapped rings with "
               "kept first positions, ragged batches, RoPE, ALiBi, soft-cap, sinks): each draft equals decoding its "
               "path after the prefix token by token; lengths unchanged");
    CHECK(fwd_all && fwd_runs > 0, "mha_decode_tree equals mha_forward with the tree's keep mask (%d sequences of float "
                                   "caches without RoPE, ALiBi or window)", fwd_runs);
}

/* Block caches at their edges, through identity projections (so that the
   cached floats are the tokens themselves): values past f16's range (the
   scale saturates at 65504, the integers at their limits), values too small
   for a scale (d = 0, every q 0), short blocks (p = 40), and a token with
   an inf (every projection of it NaN: 0 inf): the block gets the NaN scale
   and q = 0, mha_decode returns MHA_OK and its output is NaN. Every block
   compared byte for byte with quantize_ref. */
static void test_block_edges(void) {
    static const int32_t types[2] = {MHA_Q8, MHA_Q4};
    const int32_t P = 40;
    int ti, ok = 1, nan_ok = 1;
    for (ti = 0; ti < 2; ++ti) {
        mha_shape s = {0};
        mha_weights w = {0};
        mha_cache c;
        float *eye = tu_floats((size_t)(P * P), 0.0f), *tok = tu_floats(4 * (size_t)P, 0.0f), out[40];
        int32_t len = 0, i;
        size_t kb, bytes;
        void *store, *ws;
        s.heads = s.kv_heads = 1;
        s.d_q = s.d_k = s.d_v = s.p_q = s.p_k = s.p_v = s.p_o = P;
        for (i = 0; i < P; ++i) eye[i * P + i] = 1.0f;
        w.w_q = w.w_k = w.w_v = w.w_o = eye;
        for (i = 0; i < P; ++i) {
            tok[i] = i == 3 ? 3e9f : (float)(i - 20) * 1e3f;      /* a scale past 65504 */
            tok[P + i] = (float)(i % 7 - 3) * 1e-12f;             /* a scale below f16's least */
            /* ties: the largest value sets d exactly (q8: 127/128 gives 1/128; q4: 127/128 gives
               -127/1024), then values of (k + 1/2) d for k of both signs, odd and even */
            tok[2 * P + i] = i == 0 ? 127.0f / 128.0f
                                    : ((float)(i % 13) - 6.5f) * (types[ti] == MHA_Q8 ? 1.0f / 128.0f : -127.0f / 1024.0f);
            tok[3 * P + i] = i == 5 ? INFINITY : 1.0f;            /* an inf: NaN after the projection */
        }
        memset(&c, 0, sizeof c);
        c.capacity = 4;
        c.type = types[ti];
        c.length = &len;
        kb = mha_cache_array_bytes(&s, 1, 4, c.type, 0);
        store = malloc(2 * kb);
        c.k = store;
        c.v = (unsigned char *)store + kb;
        bytes = mha_decode_workspace_size(&s, 1, 3, 4);
        ws = malloc(bytes);
        ok &= mha_cache_append(&s, &w, &c, 1, 3, tok, tok, ws, bytes) == MHA_OK;
        ok &= blocks_equal(c.k, c.type, tok, (size_t)P, 3) && blocks_equal(c.v, c.type, tok, (size_t)P, 3);
        for (i = 0; i < 2; ++i) { /* the cases are what they say: the scales of the first blocks */
            uint16_t h;
            memcpy(&h, mha_cache_row(&s, &c, 1, 0, 0, i, 0), 2);
            ok &= h == (i ? 0 : c.type == MHA_Q8 ? 0x7BFF : 0xFBFF);
        }
        nan_ok &= mha_decode(&s, &w, &c, 1, 1, tok + 3 * P, tok + 3 * P, tok + 3 * P, out, ws, bytes) == MHA_OK;
        {
            const unsigned char *row = (const unsigned char *)mha_cache_row(&s, &c, 1, 0, 0, 3, 0);
            uint16_t h;
            memcpy(&h, row, 2);
            nan_ok &= h == 0x7E00 && row[2] == (c.type == MHA_Q8 ? 0 : 0x88) && isnan(out[0]) && isnan(out[P - 1]);
        }
        free(store);
        free(ws);
        free(eye);
        free(tok);
    }
    CHECK(ok, "q8 and q4 blocks of values past f16's range (scale 65504, integers saturated), too small for a scale "
              "(0), short blocks (p 40) and exact ties of both signs: byte for byte the documented rule");
    CHECK(nan_ok, "q8 and q4: a token with an inf is cached as the NaN scale with q = 0; mha_decode returns MHA_OK "
                  "and a NaN output");
}

/* Rows four at a time or alone: decoding's kernel takes the query rows of a
   kv head four at a time, or one alone (one head a kv head, one query);
   both reduce each sum in the same order. Cross-attention of four queries
   in one call (four rows a kv head) against four calls of one query each
   (one row): the same bits, for a float, a q8 and a q4 cache, heads of 64
   (the one-row kernel's four keys at a time) and of 20 (its one-key loop,
   with a tail). Where float arithmetic is evaluated wider (FLT_EVAL_METHOD
   1 or 2: i386's x87, s390x with gcc in C99), the two kernels round their
   sums to float at different places: there, within the suite's tolerance. */
static void test_rows_alone(void) {
    static const int32_t types[3] = {MHA_F32, MHA_Q8, MHA_Q4};
    int ti, hp, ok = 1;
    for (ti = 0; ti < 3; ++ti)
        for (hp = 0; hp < 2; ++hp) {
            mha_shape s = {0};
            tu_problem p;
            mha_cache c;
            int32_t len = 0, t, cap = 150;
            size_t kb, vb, bytes;
            void *store, *ws;
            float *x, *o4, *o1;
            s.heads = s.kv_heads = 3;
            s.d_q = s.d_k = s.d_v = 24;
            s.p_q = s.p_k = s.p_v = hp ? 20 : 64;
            s.p_o = 10;
            tu_problem_make(&p, &s, 1, 1, 1, 1);
            memset(&c, 0, sizeof c);
            c.capacity = cap;
            c.type = types[ti];
            c.length = &len;
            kb = mha_cache_array_bytes(&s, 1, cap, c.type, 0);
            vb = mha_cache_array_bytes(&s, 1, cap, c.type, 1);
            store = malloc(kb + vb);
            c.k = store;
            c.v = (unsigned char *)store + kb;
            x = tu_floats((size_t)cap * 24, 1.0f);
            o4 = tu_floats(4 * 10, 0.0f);
            o1 = tu_floats(4 * 10, 0.0f);
            bytes = mha_decode_workspace_size(&s, 1, cap, cap);
            ws = malloc(bytes);
            ok &= mha_cache_append(&s, &p.w, &c, 1, cap - 3, x, x, ws, bytes) == MHA_OK;
            ok &= mha_decode(&s, &p.w, &c, 1, 4, x, NULL, NULL, o4, ws, bytes) == MHA_OK;
            for (t = 0; t < 4; ++t)
                ok &= mha_decode(&s, &p.w, &c, 1, 1, x + t * 24, NULL, NULL, o1 + t * 10, ws, bytes) == MHA_OK;
#if FLT_EVAL_METHOD == 0
            ok &= memcmp(o4, o1, sizeof(float) * 40) == 0 && tu_max_abs(o4, 40) > 0.0f;
#else /* i386's x87, s390x's gcc in C99: float sums kept wider, rounded where the register allocation says */
            ok &= close_to(o4, o1, 40) && tu_max_abs(o4, 40) > 0.0f;
#endif
            free(store);
            free(ws);
            free(x);
            free(o4);
            free(o1);
            tu_problem_free(&p);
        }
    CHECK(ok, "cross-attention of 4 queries in one call equals 4 calls of one query, bit for bit (rows four at a "
              "time and alone; float, q8 and q4 caches; heads of 64 and 20)");
}

int main(void) {
    (void)naive_forward; /* naive_ref.h: only its RoPE is used here */
    tu_seed(20261202u);
    test_decode_equals_forward();
    test_ring_equals_window();
    test_cross_attention();
    test_attend();
#if !defined(TEST_DECODE_SMALL) || !TEST_DECODE_SMALL /* firmware targets: no long caches */
    test_long();
    test_long_ring();
#endif
    test_non_finite();
    test_tiny_workspace();
    test_16bit();
    test_rows_alone();
    test_block_edges();
    test_tree();
    printf("decode, cross-attention and mha_attend against mha_forward: worst error %.3g of the tolerance\n",
           (double)worst_ratio);
    return tu_summary();
}
