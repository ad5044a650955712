/* The reduced reference-vector suite (tests/ref_vectors_small.h) on an AVR
   ATmega2560 under simavr: int is 16 bits, size_t is 16 bits, 8 KiB of RAM,
   so the data sits in RAM (mha.h reads weights through plain pointers, not
   from AVR program memory). Output goes through USART0; a sleep with
   interrupts off ends the simulation. Built with MHA_NO_LIBM=1. Also: each
   case decoded token by token over a KV cache equals one causal forward, and
   counts that fit an int32_t but not a 16-bit size_t give the statuses that
   the fuzz harness's predicates (tests/fuzz/predicate.h) expect on this
   target. And mha_backward (the reference path) on a tiny case of
   PyTorch autograd in float64 (tests/ref_backward_small.h): every gradient
   within 1e-5 (1 + max |ref|). */
#include <avr/interrupt.h>
#include <avr/io.h>
#include <avr/sleep.h>
#include <math.h>
#include <stdio.h>

#include "ref_vectors_small.h"
#include "ref_backward_small.h"
#include "fuzz/predicate.h"

static int uart_put(char c, FILE *f) {
    (void)f;
    while (!(UCSR0A & (1 << UDRE0))) {}
    UDR0 = (uint8_t)c;
    return 0;
}
static FILE uart = FDEV_SETUP_STREAM(uart_put, NULL, _FDEV_SETUP_WRITE);

static unsigned char workspace[512];
static float out[16], attn[32];
static int passed, failed;

static void check(int ok, const char *what, const char *name) {
    if (ok) {
        ++passed;
    } else {
        ++failed;
        printf("FAIL %s: %s\n", name, what);
    }
}

static float absf(float x) { return x < 0.0f ? -x : x; }

int main(void) {
    int c;
    int32_t i;
    UCSR0B = (1 << TXEN0);
    stdout = &uart;
    for (c = 0; c < REF_CASE_COUNT; ++c) {
        const ref_case *rc = &ref_cases[c];
        size_t bytes = mha_workspace_size(&rc->shape, rc->batch, rc->n, rc->m);
        int32_t n_out = rc->batch * rc->n * rc->shape.p_o;
        int32_t n_attn = rc->batch * rc->shape.heads * rc->n * rc->m;
        float err = 0.0f, mx = 0.0f, err_a = 0.0f;
        mha_status st;
        check(bytes > 0 && bytes <= sizeof workspace && n_out <= 16 && n_attn <= 32, "fits the buffers", rc->name);
        if (bytes == 0 || bytes > sizeof workspace || n_out > 16 || n_attn > 32) continue;
        st = mha_forward(&rc->shape, &rc->w, rc->batch, rc->n, rc->m, rc->queries, rc->keys, rc->values,
                         &rc->mask, out, rc->attn ? attn : NULL, workspace, bytes);
        check(st == MHA_OK, "status", rc->name);
        for (i = 0; i < n_out; ++i) {
            if (absf(out[i] - rc->out[i]) > err) err = absf(out[i] - rc->out[i]);
            if (absf(rc->out[i]) > mx) mx = absf(rc->out[i]);
        }
        for (i = 0; rc->attn && i < n_attn; ++i)
            if (absf(attn[i] - rc->attn[i]) > err_a) err_a = absf(attn[i] - rc->attn[i]);
        check(err <= 1e-5f * (1.0f + mx) && err_a <= 2e-5f, "within 1e-5 (1 + max|ref|)", rc->name);
        printf("%s/%s: worst |err| %ld e-9\n", rc->group, rc->name, (long)(err * 1e9f));
        check(mha_forward(&rc->shape, &rc->w, rc->batch, rc->n, rc->m, rc->queries, rc->keys, rc->values,
                          &rc->mask, out, NULL, workspace, bytes - 1) == MHA_ERR_WORKSPACE,
              "one byte short", rc->name);
    }
    {
        mha_shape s = {0};
        s.heads = 2; s.kv_heads = 1; s.d_q = s.d_k = s.d_v = 3; s.p_q = s.p_k = s.p_v = 2; s.p_o = 2;
        check(mha_workspace_size(&s, 1, 2, 3) == MHA_WORKSPACE_BYTES(2, 1, 2, 2, 2, 0, 3), "macro = function",
              "workspace");
        s.d_q = 30000; s.p_q = s.p_k = 30000; /* 2 x 30000 x 30000 floats: beyond a 16-bit size_t */
        check(mha_workspace_size(&s, 1, 1, 1) == 0, "16-bit size_t overflow gives 0", "overflow");
        check(mha_forward(&s, &ref_cases[0].w, 1, 1, 1, out, out, out, NULL, out, NULL, workspace, 512) ==
                  MHA_ERR_OVERFLOW,
              "16-bit size_t overflow", "overflow");
    }
    for (c = 0; c < REF_CASE_COUNT; ++c) { /* decode equals forward: the first min(n, m) tokens, causal */
        static float cache[64], ref[16];
        const ref_case *rc = &ref_cases[c];
        int32_t len = 0, L = rc->n < rc->m ? rc->n : rc->m, po = rc->shape.p_o, t, ty;
        mha_mask causal = {1, 0, NULL, 0, NULL, NULL};
        mha_cache kc = {NULL, NULL, NULL, 0, 0, 0, 0, 0};
        size_t cb = mha_cache_bytes(&rc->shape, 1, L), bytes = mha_decode_workspace_size(&rc->shape, 1, 1, L);
        float err = 0.0f, mx = 0.0f;
        int ok = cb <= sizeof cache && bytes <= sizeof workspace && L * po <= 16;
        ok = ok && mha_forward(&rc->shape, &rc->w, 1, L, L, rc->queries, rc->keys, rc->values, &causal, ref, NULL,
                               workspace, mha_workspace_size(&rc->shape, 1, L, L)) == MHA_OK;
        kc.k = cache;
        kc.v = cache + (size_t)(rc->shape.kv_heads ? rc->shape.kv_heads : rc->shape.heads) * (size_t)L *
                           (size_t)rc->shape.p_k;
        kc.length = &len;
        kc.capacity = L;
        for (t = 0; ok && t < L; ++t)
            ok = mha_decode(&rc->shape, &rc->w, &kc, 1, 1, rc->queries + t * rc->shape.d_q, rc->keys + t * rc->shape.d_k,
                            rc->values + t * rc->shape.d_v, out + t * po, workspace, bytes) == MHA_OK;
        for (i = 0; ok && i < L * po; ++i) {
            if (absf(out[i] - ref[i]) > err) err = absf(out[i] - ref[i]);
            if (absf(ref[i]) > mx) mx = absf(ref[i]);
        }
        check(ok && len == L && err <= 1e-5f * (1.0f + mx), "decode token by token equals causal mha_forward", rc->name);
        for (ty = MHA_F16; ok && ty <= MHA_BF16 && rc->shape.score == MHA_SCORE_DOT && !rc->shape.rope_dim &&
                           !rc->shape.alibi;
             ++ty) {
            /* a 16-bit cache, token by token: its last step equals, bit for bit, cross-attention over a
               float cache holding the same rounded values (the same sums in the same order) */
            static uint16_t c16[64];
            mha_cache hc = kc;
            int32_t len16 = 0, lenf = L;
            size_t e, count = cb / sizeof(float);
            hc.k = c16;
            hc.v = c16 + ((float *)kc.v - (float *)kc.k);
            hc.type = ty;
            hc.length = &len16;
            for (t = 0; ok && t < L; ++t)
                ok = mha_decode(&rc->shape, &rc->w, &hc, 1, 1, rc->queries + t * rc->shape.d_q,
                                rc->keys + t * rc->shape.d_k, rc->values + t * rc->shape.d_v, out, workspace,
                                bytes) == MHA_OK;
            for (e = 0; e < count; ++e) cache[e] = ty == MHA_F16 ? mha_f32_from_f16(c16[e]) : mha_f32_from_bf16(c16[e]);
            kc.length = &lenf;
            ok = ok && mha_decode(&rc->shape, &rc->w, &kc, 1, 1, rc->queries + (L - 1) * rc->shape.d_q, NULL, NULL,
                                  ref, workspace, bytes) == MHA_OK;
            for (i = 0; ok && i < po; ++i) ok = out[i] == ref[i];
            check(ok && len16 == L, ty == MHA_F16 ? "f16 cache: the last step equals the float computation on its values"
                                                  : "bf16 cache: the last step equals the float computation on its values",
                  rc->name);
        }
    }
    { /* counts beyond a 16-bit size_t: statuses as the predicates expect, never a wrapped size */
        static const int32_t big[][4] = {/* which field, its value, and n, m */
                                         {0, 1, 2, 65537}, {0, 1, 70000, 3}, {1, 65540, 2, 3}, {2, 65536, 2, 3},
                                         {3, 65537, 2, 3}, {4, 65536, 2, 3}, {5, 40000, 2, 3}};
        static int32_t lens[1], len = 0;
        static float ho[2], *heads[2] = {ho, ho};
        static const float w4[4] = {0.5f, -0.25f, 0.125f, 1.0f}; /* 2 x 2 weights for the decoding case */
        mha_weights w2 = {w4, NULL, w4, NULL, w4, NULL, w4, NULL, NULL, NULL, NULL, NULL, NULL, MHA_F32};
        mha_shape s = {0};
        mha_mask vl = {0, 0, lens, 0, NULL, NULL};
        mha_cache kc = {NULL, NULL, NULL, 0, 0, 0, 0, 0};
        size_t k;
        int32_t batch;
        for (k = 0; k < sizeof big / sizeof big[0]; ++k) {
            mha_status want, got;
            s.heads = 1; s.kv_heads = 0; s.d_q = s.d_k = s.d_v = 2; s.p_q = s.p_k = s.p_v = 2; s.p_o = 2;
            batch = 1;
            if (big[k][0] == 1) s.d_q = big[k][1];
            if (big[k][0] == 2) batch = big[k][1];
            if (big[k][0] == 3) s.heads = big[k][1];
            if (big[k][0] == 4) s.p_o = big[k][1];
            if (big[k][0] == 5) s.p_q = s.p_k = big[k][1];
            want = fuzz_expected_status(&s, batch, big[k][2], big[k][3], 0, NULL, 0, workspace, sizeof workspace);
            check(want == MHA_ERR_OVERFLOW, "the predicate expects MHA_ERR_OVERFLOW", "16-bit size_t");
            if (want == MHA_OK) continue; /* it would compute on these small buffers */
            got = mha_forward(&s, &ref_cases[0].w, batch, big[k][2], big[k][3], out, out, out, NULL, out, NULL,
                              workspace, sizeof workspace);
            check(got == want && mha_workspace_size(&s, batch, big[k][2], big[k][3]) == 0,
                  "mha_forward as the predicate, and no workspace size", "16-bit size_t");
            if (got != want) printf("  case %d: status %d, expected %d\n", (int)k, (int)got, (int)want);
        }
        s.heads = 1; s.kv_heads = 0; s.d_q = s.d_k = s.d_v = 2; s.p_q = s.p_k = s.p_v = 2; s.p_o = 2;
        lens[0] = 65537; /* a valid length that a 16-bit size_t would wrap to 1 */
        check(fuzz_expected_status(&s, 1, 2, 3, 0, &vl, 0, workspace, sizeof workspace) == MHA_ERR_MASK &&
                  mha_forward(&s, &ref_cases[0].w, 1, 2, 3, out, out, out, &vl, out, NULL, workspace,
                              sizeof workspace) == MHA_ERR_MASK,
              "valid length 65537 with m = 3 is MHA_ERR_MASK", "16-bit size_t");
        check(mha_head(&s, &ref_cases[0].w, 0, out, out, out, 3, 65537, ho, workspace, sizeof workspace) ==
                  MHA_ERR_MASK,
              "mha_head: valid length 65537 with m = 3 is MHA_ERR_MASK", "16-bit size_t");
        check(mha_concat(1, 65537, (const float *const *)heads, out) == MHA_ERR_OVERFLOW &&
                  mha_concat(65537, 1, (const float *const *)heads, out) == MHA_ERR_OVERFLOW,
              "mha_concat: 65537 heads or values overflow", "16-bit size_t");
        check(mha_cache_bytes(&s, 1, 70000) == 0 && mha_decode_workspace_size(&s, 1, 1, 70000) == 0,
              "a capacity of 70000: no sizes", "16-bit size_t");
        kc.k = out; /* a window over 2 slots: positions run up to SIZE_MAX, then MHA_ERR_CAPACITY */
        kc.v = out + 4;
        kc.length = &len;
        kc.capacity = 2;
        kc.window = 1;
        for (k = 0; k < 8; ++k) out[k] = 0.0f;
        for (len = 65533; len <= 65535; ++len) {
            int32_t before = len;
            mha_status want = fz_decode_status(&s, 1, 1, 2, 1, 0, 0, 0, &len, 1, 0, NULL, workspace, sizeof workspace);
            mha_status got = mha_decode(&s, &w2, &kc, 1, 1, attn, attn, attn, attn + 8, workspace,
                                        sizeof workspace);
            check(got == want && (got == MHA_OK ? len == before + 1 : len == before) &&
                      (before < 65535 ? got == MHA_OK : got == MHA_ERR_CAPACITY),
                  "a window's positions up to 65535, then MHA_ERR_CAPACITY", "16-bit size_t");
            len = before;
        }
    }
    for (c = 0; c < BWD_CASE_COUNT; ++c) { /* the backward pass against PyTorch autograd */
        static float got[112];
        static const char *names[] = BWD_GRADS;
        const bwd_case *bc = &bwd_cases[c];
        mha_weight_counts wc;
        mha_grads g;
        float *part[15], err, mx, worst = 0.0f;
        size_t counts[15], used = 0, bytes = mha_backward_workspace_size(&bc->shape, bc->batch, bc->n, bc->m), e;
        int k, ok = mha_weight_counts_get(&bc->shape, &wc) == MHA_OK;
        counts[0] = (size_t)(bc->batch * bc->n * bc->shape.d_q);
        counts[1] = (size_t)(bc->batch * bc->m * bc->shape.d_k);
        counts[2] = (size_t)(bc->batch * bc->m * bc->shape.d_v);
        counts[3] = wc.w_q; counts[4] = wc.b_q; counts[5] = wc.w_k; counts[6] = wc.b_k; counts[7] = wc.w_v;
        counts[8] = wc.b_v; counts[9] = wc.w_o; counts[10] = wc.b_o; counts[11] = wc.a_q; counts[12] = wc.a_k;
        counts[13] = wc.a_v; counts[14] = (size_t)bc->shape.heads;
        for (k = 0; k < 15; ++k) { /* each expected array's room in got, from 0 */
            part[k] = bc->grad[k] && used + counts[k] <= sizeof got / sizeof got[0] ? got + used : NULL;
            ok = ok && (part[k] || !bc->grad[k]);
            for (e = 0; part[k] && e < counts[k]; ++e) part[k][e] = 0.0f;
            if (part[k]) used += counts[k];
        }
        g.w_q = part[3]; g.b_q = part[4]; g.w_k = part[5]; g.b_k = part[6]; g.w_v = part[7]; g.b_v = part[8];
        g.w_o = part[9]; g.b_o = part[10]; g.a_q = part[11]; g.a_k = part[12]; g.a_v = part[13]; g.sinks = part[14];
        check(ok && bytes > 0 && bytes <= sizeof workspace, "fits the buffers", bc->name);
        if (!ok || bytes == 0 || bytes > sizeof workspace) continue;
        check(mha_backward(&bc->shape, &bc->w, bc->batch, bc->n, bc->m, bc->queries, bc->keys, bc->values, &bc->mask, NULL,
                           bc->d_out, part[0], part[1], part[2], &g, workspace, bytes) == MHA_OK,
              "mha_backward status", bc->name);
        for (k = 0; k < 15; ++k) {
            if (!part[k]) continue;
            for (err = mx = 0.0f, e = 0; e < counts[k]; ++e) {
                if (absf(part[k][e] - bc->grad[k][e]) > err) err = absf(part[k][e] - bc->grad[k][e]);
                if (absf(bc->grad[k][e]) > mx) mx = absf(bc->grad[k][e]);
            }
            check(err <= 1e-5f * (1.0f + mx), names[k], bc->name);
            if (err / (1e-5f * (1.0f + mx)) > worst) worst = err / (1e-5f * (1.0f + mx));
        }
        printf("backward %s/%s: worst %ld.%ld %% of 1e-5 (1 + max|ref|)\n", bc->group, bc->name,
               (long)(worst * 100.0f), (long)(worst * 1000.0f) % 10);
    }
    printf("avr: %d cases, %d backward cases, sizeof(int) %d, sizeof(size_t) %d\n", REF_CASE_COUNT, BWD_CASE_COUNT,
           (int)sizeof(int), (int)sizeof(size_t));
    printf("%d passed, %d failed\n", passed, failed);
    cli();
    sleep_mode();
    return 0;
}
