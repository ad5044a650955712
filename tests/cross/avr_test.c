/* The reduced reference-vector suite (tests/ref_vectors_small.h) on an AVR
   ATmega2560 under simavr: int is 16 bits, size_t is 16 bits, 8 KiB of RAM,
   so the data sits in RAM (mha.h reads weights through plain pointers, not
   from AVR program memory). Output goes through USART0; a sleep with
   interrupts off ends the simulation. Built with MHA_NO_LIBM=1. Also: each
   case decoded token by token over a KV cache equals one causal forward. */
#include <avr/interrupt.h>
#include <avr/io.h>
#include <avr/sleep.h>
#include <stdio.h>

#include "ref_vectors_small.h"

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
        int32_t len = 0, L = rc->n < rc->m ? rc->n : rc->m, po = rc->shape.p_o, t;
        mha_mask causal = {1, 0, NULL, 0, NULL, NULL};
        mha_cache kc = {NULL, NULL, NULL, 0, 0, 0};
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
    }
    printf("avr: %d cases, sizeof(int) %d, sizeof(size_t) %d\n", REF_CASE_COUNT, (int)sizeof(int),
           (int)sizeof(size_t));
    printf("%d passed, %d failed\n", passed, failed);
    cli();
    sleep_mode();
    return 0;
}
