/* The int8 path's kernels of this core (SMLAD with the DSP extension, Helium on the M55; plain C elsewhere)
   against its plain C (tests/q8_paths_plain.c, MHA_Q8_NO_DSP=1), bit for bit, on random problems of the sizes
   the small numpy cases do not reach: inputs of 1 to 70 values (whole and partial groups of sixteen), p_q and
   p_v of 1 to 40, up to 60 keys, GQA, zero points, biases, causal and keep masks; then the keys appended to
   int8 caches and one decoding step (outputs and caches compared). The plain C is itself checked against the
   numpy model (tests/q8_ref.py) on a thousand such cases on the Linux targets (make cross-test). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#define MHA_STATIC 1
#define MHA_IMPLEMENTATION
#include "../mha.h"

mha_status q8p_plain_forward(const mha_shape *s, const mha_q8_weights *w, const mha_q8_params *p, int32_t batch,
                             int32_t n, int32_t m, const int8_t *x, const int8_t *kx, const mha_mask *mask, int8_t *out,
                             void *ws, size_t bytes);
mha_status q8p_plain_step(const mha_shape *s, const mha_q8_weights *w, const mha_q8_params *p, mha_cache *c,
                          int32_t batch, int32_t m, const int8_t *kx, const int8_t *x, int8_t *out, void *ws,
                          size_t bytes);
mha_status q16p_plain_forward(const mha_shape *s, const mha_q16_weights *w, const mha_q8_params *p, int32_t batch,
                              int32_t n, int32_t m, const int16_t *x, const int16_t *kx, const mha_mask *mask,
                              int16_t *out, void *ws, size_t bytes);
mha_status q16p_plain_step(const mha_shape *s, const mha_q16_weights *w, const mha_q8_params *p, mha_cache *c,
                           int32_t batch, int32_t m, const int16_t *kx, const int16_t *x, int16_t *out, void *ws,
                           size_t bytes);

#define MAXW (4 * 40 * 70)
static int8_t wt[4][MAXW], xq[2 * 6 * 70], xk[2 * 60 * 70], out[2][2 * 6 * 40], cache[2][2][2 * 4 * 61 * 40];
static int32_t bias[4][160];
static float wsc[4][160];
static uint8_t keep[2 * 6 * 60];
static mha_q8_rescale rows[4 * 160];
static unsigned char ws[2][49152];
static uint32_t seed = 2024u;

static int32_t rnd(int32_t lo, int32_t hi) { /* lo .. hi */
    seed = seed * 1664525u + 1013904223u;
    return lo + (int32_t)((seed >> 8) % (uint32_t)(hi - lo + 1));
}

/* The 16x8 path the same way: int16 inputs over their whole range, int64 biases, no zero points; one
   problem in four with inputs of 500 to 700 values (sums over more than one run of MHA__Q16_RUN columns). */
static int16_t yq[2 * 4 * 700], yk[2 * 24 * 700], yout[2][2 * 4 * 40], ycache[2][2][2 * 2 * 25 * 24];
static int64_t ybias[4][160];
static int q16_paths(void) {
    int cases = 0, tried = 0, same = 1, steps = 0, k;
    while (cases < 60 && tried < 2000) {
        mha_shape s = MHA_INIT;
        mha_q16_weights w = MHA_INIT;
        mha_q8_params p = MHA_INIT;
        mha_q8_scales sc;
        mha_mask mask = MHA_INIT;
        const int32_t batch = rnd(1, 2), n = rnd(1, 4), m = rnd(1, 24), wide = rnd(0, 3) == 0;
        int32_t length[2][2] = {{0, 0}, {0, 0}}, i;
        size_t bytes, rowsq, dbytes;
        ++tried;
        s.kv_heads = rnd(1, 2);
        s.heads = s.kv_heads * rnd(1, 2);
        s.d_q = wide ? rnd(500, 700) : rnd(1, 70); s.d_k = wide ? rnd(500, 700) : rnd(1, 70); s.d_v = rnd(1, 70);
        s.p_q = s.p_k = rnd(1, wide ? 4 : 24); s.p_v = rnd(1, 24); s.p_o = rnd(1, 40);
        if (s.heads * s.p_q * s.d_q > MAXW || s.kv_heads * s.p_k * s.d_k > MAXW || s.kv_heads * s.p_v * s.d_v > MAXW ||
            s.p_o * s.heads * s.p_v > MAXW || s.heads * s.p_v > 160 || s.heads * s.p_q > 160)
            continue;
        for (k = 0; k < 4; ++k) {
            for (i = 0; i < MAXW; ++i) wt[k][i] = (int8_t)rnd(-128, 127);
            for (i = 0; i < 160; ++i) {
                ybias[k][i] = (int64_t)rnd(-3000000, 3000000) * (rnd(0, 31) ? 1 : rnd(-1000000, 1000000));
                wsc[k][i] = 0.004f * (float)rnd(50, 150) / 100.0f;
            }
        }
        for (i = 0; i < (int32_t)(sizeof yq / sizeof yq[0]); ++i) yq[i] = (int16_t)rnd(-32768, 32767);
        for (i = 0; i < (int32_t)(sizeof yk / sizeof yk[0]); ++i) yk[i] = (int16_t)rnd(-32768, 32767);
        for (i = 0; i < (int32_t)sizeof keep; ++i) keep[i] = (uint8_t)(rnd(0, 9) < 7);
        /* the projections' scales about four standard deviations a range (few saturated outputs) */
        sc.in_q = sc.in_k = sc.in_v = 0.0002f;
        sc.q = 0.000134f * sqrtf((float)s.d_q) * (float)rnd(50, 200) / 100.0f;
        sc.k = 0.000134f * sqrtf((float)s.d_k) * (float)rnd(50, 200) / 100.0f;
        sc.v = sc.heads = 0.000134f * sqrtf((float)s.d_v);
        sc.out = 0.000039f * sqrtf((float)(s.d_v * s.heads * s.p_v)) * (float)rnd(50, 200) / 100.0f;
        sc.w_q = wsc[0]; sc.w_k = wsc[1]; sc.w_v = wsc[2]; sc.w_o = wsc[3];
        w.w_q = wt[0]; w.w_k = wt[1]; w.w_v = wt[2]; w.w_o = wt[3];
        if (rnd(0, 1)) w.b_q = ybias[0], w.b_k = ybias[1], w.b_v = ybias[2], w.b_o = ybias[3];
        rowsq = mha_q8_rows(&s);
        if (rowsq > sizeof rows / sizeof rows[0] || mha_q16_prepare(&s, &sc, &w, &p, rows, rowsq) != MHA_OK) continue;
        k = rnd(0, 3);
        if (k == 1) mask.causal = 1, mask.causal_offset = rnd(-2, m);
        if (k == 2) mask.keep = keep;
        bytes = mha_q16_workspace_size(&s, batch, n, m);
        if (bytes == 0 || bytes > sizeof ws[0]) continue;
        memset(yout, 0x55, sizeof yout);
        if (q16p_plain_forward(&s, &w, &p, batch, n, m, yq, yk, &mask, yout[0], ws[0], bytes) != MHA_OK ||
            mha_forward_q16(&s, &w, &p, batch, n, m, yq, yk, yk, &mask, yout[1], ws[1], bytes) != MHA_OK) {
            printf("q16 paths: a call failed (case %d)\n", cases);
            return 0;
        }
        if (memcmp(yout[0], yout[1], (size_t)(batch * n * s.p_o) * sizeof(int16_t)) != 0) {
            printf("q16 paths: forward outputs differ: heads %d/%d d %d %d %d p %d %d %d n %d m %d mask %d\n",
                   (int)s.heads, (int)s.kv_heads, (int)s.d_q, (int)s.d_k, (int)s.d_v, (int)s.p_q, (int)s.p_v,
                   (int)s.p_o, (int)n, (int)m, k);
            same = 0;
        }
        ++cases;
        dbytes = mha_q16_decode_workspace_size(&s, batch, m, m + 1);
        if (dbytes > 0 && dbytes <= sizeof ws[0] && (size_t)(batch * s.kv_heads * (m + 1) * (s.p_k > s.p_v ? s.p_k : s.p_v)) <=
                                                      sizeof ycache[0][0] / sizeof(int16_t)) {
            mha_cache c0 = {ycache[0][0], ycache[0][1], NULL, 0, 0, 0, 0, 0}, c1 = {ycache[1][0], ycache[1][1], NULL, 0, 0, 0, 0, 0};
            c0.capacity = c1.capacity = m + 1;
            c0.type = c1.type = MHA_I16;
            c0.length = length[0];
            c1.length = length[1];
            memset(ycache, 0, sizeof ycache);
            if (q16p_plain_step(&s, &w, &p, &c0, batch, m, yk, yq, yout[0], ws[0], dbytes) != MHA_OK ||
                mha_cache_append_q16(&s, &w, &p, &c1, batch, m, yk, yk, ws[1], dbytes) != MHA_OK ||
                mha_decode_q16(&s, &w, &p, &c1, batch, 1, yq, yq, yq, yout[1], ws[1], dbytes) != MHA_OK) {
                printf("q16 paths: a decoding call failed\n");
                return 0;
            }
            if (memcmp(yout[0], yout[1], (size_t)(batch * s.p_o) * sizeof(int16_t)) != 0 ||
                memcmp(ycache[0], ycache[1], sizeof ycache[0]) != 0) {
                printf("q16 paths: decoding differs (p %d %d, m %d)\n", (int)s.p_q, (int)s.p_v, (int)m);
                same = 0;
            }
            ++steps;
        }
    }
    printf("q16 paths: %d random problems and %d decoding steps: this core's 16x8 kernels %s its plain C bit for "
           "bit\n", cases, steps, same ? "equal" : "DIFFER from");
    return same && cases >= 60 && steps >= 30;
}

int main(void) {
    int cases = 0, tried = 0, same = 1, steps = 0, k, i16;
    while (cases < 150 && tried < 2000) {
        mha_shape s = MHA_INIT;
        mha_q8_weights w = MHA_INIT;
        mha_q8_params p = MHA_INIT;
        mha_q8_scales sc;
        mha_mask mask = MHA_INIT;
        const int32_t batch = rnd(1, 2), n = rnd(1, 6), m = rnd(1, 60);
        int32_t length[2][2] = {{0, 0}, {0, 0}}, i;
        size_t bytes, rowsq, dbytes;
        ++tried;
        s.kv_heads = rnd(1, 2);
        s.heads = s.kv_heads * rnd(1, 2);
        s.d_q = rnd(1, 70); s.d_k = rnd(1, 70); s.d_v = rnd(1, 70);
        s.p_q = s.p_k = rnd(1, 40); s.p_v = rnd(1, 40); s.p_o = rnd(1, 40);
        if (s.heads * s.p_q * s.d_q > MAXW || s.kv_heads * s.p_k * s.d_k > MAXW || s.kv_heads * s.p_v * s.d_v > MAXW ||
            s.p_o * s.heads * s.p_v > MAXW || s.heads * s.p_v > 160 || s.heads * s.p_q > 160)
            continue;
        for (k = 0; k < 4; ++k) {
            for (i = 0; i < MAXW; ++i) wt[k][i] = (int8_t)rnd(-127, 127);
            for (i = 0; i < 160; ++i) bias[k][i] = rnd(-3000, 3000), wsc[k][i] = 0.004f * (float)rnd(50, 150) / 100.0f;
        }
        for (i = 0; i < (int32_t)sizeof xq; ++i) xq[i] = (int8_t)rnd(-128, 127);
        for (i = 0; i < (int32_t)sizeof xk; ++i) xk[i] = (int8_t)rnd(-128, 127);
        for (i = 0; i < (int32_t)sizeof keep; ++i) keep[i] = (uint8_t)(rnd(0, 9) < 7);
        sc.in_q = sc.in_k = sc.in_v = 0.02f;
        sc.q = sc.k = 0.05f * (float)rnd(50, 200) / 100.0f;
        sc.v = sc.heads = 0.03f;
        sc.out = 0.02f * (float)rnd(50, 200) / 100.0f;
        sc.w_q = wsc[0]; sc.w_k = wsc[1]; sc.w_v = wsc[2]; sc.w_o = wsc[3];
        w.w_q = wt[0]; w.w_k = wt[1]; w.w_v = wt[2]; w.w_o = wt[3];
        if (rnd(0, 1)) w.b_q = bias[0], w.b_k = bias[1], w.b_v = bias[2], w.b_o = bias[3];
        rowsq = mha_q8_rows(&s);
        if (rowsq > sizeof rows / sizeof rows[0] || mha_q8_prepare(&s, &sc, &w, &p, rows, rowsq) != MHA_OK) continue;
        if (rnd(0, 1)) { /* zero points */
            p.zero_in_q = rnd(-128, 127); p.zero_in_k = rnd(-128, 127); p.zero_in_v = rnd(-128, 127);
            p.zero_q = rnd(-20, 20); p.zero_k = rnd(-20, 20); p.zero_v = rnd(-20, 20);
            p.zero_heads = rnd(-20, 20); p.zero_out = rnd(-20, 20);
        }
        k = rnd(0, 3);
        if (k == 1) mask.causal = 1, mask.causal_offset = rnd(-2, m);
        if (k == 2) mask.keep = keep;
        bytes = mha_q8_workspace_size(&s, batch, n, m);
        if (bytes == 0 || bytes > sizeof ws[0]) continue;
        memset(out, 0x55, sizeof out);
        if (q8p_plain_forward(&s, &w, &p, batch, n, m, xq, xk, &mask, out[0], ws[0], bytes) != MHA_OK ||
            mha_forward_q8(&s, &w, &p, batch, n, m, xq, xk, xk, &mask, out[1], ws[1], bytes) != MHA_OK) {
            printf("q8 paths: a call failed (case %d)\n", cases);
            same = 0;
            break;
        }
        if (memcmp(out[0], out[1], (size_t)(batch * n * s.p_o)) != 0) {
            printf("q8 paths: forward outputs differ: heads %d/%d d %d %d %d p %d %d %d n %d m %d mask %d\n",
                   (int)s.heads, (int)s.kv_heads, (int)s.d_q, (int)s.d_k, (int)s.d_v, (int)s.p_q, (int)s.p_v,
                   (int)s.p_o, (int)n, (int)m, k);
            same = 0;
        }
        ++cases;
        /* the m keys into int8 caches (capacity m + 1), then one step */
        dbytes = mha_q8_decode_workspace_size(&s, batch, m, m + 1);
        if (dbytes > 0 && dbytes <= sizeof ws[0] && (size_t)(batch * s.kv_heads * (m + 1) * (s.p_k > s.p_v ? s.p_k : s.p_v)) <=
                                                      sizeof cache[0][0]) {
            mha_cache c0 = {cache[0][0], cache[0][1], NULL, 0, 0, 0, 0, 0}, c1 = {cache[1][0], cache[1][1], NULL, 0, 0, 0, 0, 0};
            c0.capacity = c1.capacity = m + 1;
            c0.type = c1.type = MHA_I8;
            c0.length = length[0];
            c1.length = length[1];
            memset(cache, 0, sizeof cache);
            if (q8p_plain_step(&s, &w, &p, &c0, batch, m, xk, xq, out[0], ws[0], dbytes) != MHA_OK ||
                mha_cache_append_q8(&s, &w, &p, &c1, batch, m, xk, xk, ws[1], dbytes) != MHA_OK ||
                mha_decode_q8(&s, &w, &p, &c1, batch, 1, xq, xq, xq, out[1], ws[1], dbytes) != MHA_OK) {
                printf("q8 paths: a decoding call failed\n");
                same = 0;
                break;
            }
            if (memcmp(out[0], out[1], (size_t)(batch * s.p_o)) != 0 || memcmp(cache[0], cache[1], sizeof cache[0]) != 0) {
                printf("q8 paths: decoding differs (p %d %d, m %d)\n", (int)s.p_q, (int)s.p_v, (int)m);
                same = 0;
            }
            ++steps;
        }
    }
    printf("q8 paths: %d random problems and %d decoding steps: this core's int8 kernels %s its plain C bit for "
           "bit\n", cases, steps, same ? "equal" : "DIFFER from");
    k = same && cases >= 100 && steps >= 50;
    i16 = q16_paths();
    printf("%d passed, %d failed\n", k + i16, !k + !i16);
    return !k || !i16;
}
