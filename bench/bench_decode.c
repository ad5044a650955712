/* bench/bench_decode.c - times one decoding step (mha_decode over a KV cache)
   on the decode shapes of docs/performance.md, "Benchmark", batch 1.

   A step reads every cached key and value and every weight once: it is bound
   by memory bandwidth, not by FLOPs. So this program first measures the
   streaming-read bandwidth of the machine itself (a sum over a 512 MiB
   array, one thread and two), then for each shape prints
     - the fast path on one thread: median and minimum ms per step, the bytes
       a step must read (cache + weights), the effective GB/s, and that as a
       percentage of the measured one-thread streaming bandwidth;
     - the fast path on 2 threads (mha_decode_parallel, tests/two_threads.h):
       median ms and the speed-up over one thread;
     - a baseline in the manner of llama2.c: a token-major cache
       ([position][kv_heads*p]), one query head at a time over every position,
       matrix-vector products row by row; its median ms and its time over
       mha.h's (> 1: mha.h faster). Its output is checked against mha.h's.
   Weights are packed once (mha_pack_weights); the cache holds m random
   positions, and each timed call decodes t tokens at position m (the
   lengths are set back to m before every call).

   Then the 16-bit table, and the same step with cold caches: before every
   timed step a buffer of twice the last-level cache (sysfs's size; at
   least 64 MiB, at most 2 GiB) is written, so that the step reads its
   cache and weights from memory, as a decoder does whose other layers
   passed through the caches in between (one thread and two, % of the
   streaming read).

       bench_decode [SECONDS_PER_SHAPE [SHAPE | sweep | tree]]     default 1.0 s, every shape

   "sweep": the first table alone, for D2's shape at cache lengths 256,
   512, .. 32768 (rows S256 ..; bench/peers.py draws them). "tree": after
   the first table's header, a tree of 8 drafts (mha_decode_tree) beside one
   step and a chain of 8 on D1, D2, D3.
*/
#define _POSIX_C_SOURCE 199309L
#ifndef MHA_FAST
#define MHA_FAST 1
#endif
#define MHA_IMPLEMENTATION
#include "../mha.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../tests/two_threads.h"
#include "bench_util.h"

typedef struct dshape {
    const char *name;
    int heads, kv, d, p, m, t;
} dshape;

static const dshape SHAPES[] = {
    {"D1", 8, 8, 512, 64, 1024, 1},
    {"D2", 32, 8, 2048, 64, 4096, 1},
    {"D3", 32, 8, 2048, 64, 32768, 1},
    {"D4", 16, 16, 2048, 128, 4096, 1}, /* no GQA: one query row a kv head */
    {"P", 32, 8, 2048, 64, 4096, 128},
};

/* ---- streaming-read bandwidth ---------------------------------------------- */
typedef struct sweep {
    const float *x;
    size_t n;
    float sums[2];
} sweep;

static void sweep_task(void *arg, int32_t half) {
    sweep *s = (sweep *)arg;
    size_t lo = (size_t)half * (s->n / 2), hi = half ? s->n : s->n / 2, j;
    mha__v a0 = mha__vset(0.0f), a1 = a0, a2 = a0, a3 = a0;
    float lanes[MHA__VL];
    int l;
    for (j = lo; j + 4 * MHA__VL <= hi; j += 4 * MHA__VL) {
        a0 = mha__vadd(a0, mha__vload(s->x + j));
        a1 = mha__vadd(a1, mha__vload(s->x + j + MHA__VL));
        a2 = mha__vadd(a2, mha__vload(s->x + j + 2 * MHA__VL));
        a3 = mha__vadd(a3, mha__vload(s->x + j + 3 * MHA__VL));
    }
    mha__vstore(lanes, mha__vadd(mha__vadd(a0, a1), mha__vadd(a2, a3)));
    s->sums[half] = 0.0f;
    for (l = 0; l < MHA__VL; ++l) s->sums[half] += lanes[l];
}

/* GB/s of reading a 512 MiB array once: the best of 7 runs, on one thread
   (both halves here) or two (tests/two_threads.h). */
static double stream_gbs(int threads) {
    static float *x;
    sweep s;
    double best = 1e30, t;
    int rep;
    s.n = (size_t)128 << 20;
    if (!x) x = filled(s.n, 1.0f);
    s.x = x;
    for (rep = 0; rep < 7; ++rep) {
        t = now();
        if (threads == 2) {
            two_threads(NULL, sweep_task, &s, 2);
        } else {
            sweep_task(&s, 0);
            sweep_task(&s, 1);
        }
        t = now() - t;
        if (s.sums[0] + s.sums[1] == 12345.0f) printf("?"); /* keeps the sums alive */
        if (t < best) best = t;
    }
    return (double)s.n * 4.0 / best * 1e-9;
}

/* ---- the llama2.c-style baseline ---------------------------------------------
   out[d] = W x, row by row, as llama2.c's matmul. */
static void matvec(float *out, const float *x, const float *W, const float *b, int n, int d) {
    int i, j;
    for (i = 0; i < d; ++i) {
        float val = 0.0f;
        for (j = 0; j < n; ++j) val += W[(size_t)i * (size_t)n + (size_t)j] * x[j];
        out[i] = val + (b ? b[i] : 0.0f);
    }
}

typedef struct baseline {
    float *kc, *vc;         /* [capacity][kv*p], token-major, as llama2.c's key_cache/value_cache */
    float *q, *att, *xb;    /* [h*p], [capacity], [h*p] */
} baseline;

/* t tokens at positions pos.. : project, cache, attend head by head, W_o. */
static void baseline_step(baseline *bl, const dshape *r, const mha_weights *w, int pos, const float *x, float *out) {
    int h = r->heads, kv = r->kv, p = r->p, d = r->d, grp = h / kv, tok, i, j, a;
    float scale = 1.0f / sqrtf((float)p);
    for (tok = 0; tok < r->t; ++tok, x += d, out += d) {
        int at = pos + tok;
        matvec(bl->q, x, w->w_q, w->b_q, d, h * p);
        matvec(bl->kc + (size_t)at * (size_t)(kv * p), x, w->w_k, w->b_k, d, kv * p);
        matvec(bl->vc + (size_t)at * (size_t)(kv * p), x, w->w_v, w->b_v, d, kv * p);
        for (i = 0; i < h; ++i) {
            const float *q = bl->q + i * p;
            float mx = -INFINITY, sum = 0.0f, *xb = bl->xb + i * p;
            for (j = 0; j <= at; ++j) {
                const float *k = bl->kc + (size_t)j * (size_t)(kv * p) + (i / grp) * p;
                float s = 0.0f;
                for (a = 0; a < p; ++a) s += q[a] * k[a];
                bl->att[j] = s * scale;
                if (bl->att[j] > mx) mx = bl->att[j];
            }
            for (j = 0; j <= at; ++j) {
                bl->att[j] = expf(bl->att[j] - mx);
                sum += bl->att[j];
            }
            for (a = 0; a < p; ++a) xb[a] = 0.0f;
            for (j = 0; j <= at; ++j) {
                const float *v = bl->vc + (size_t)j * (size_t)(kv * p) + (i / grp) * p;
                float wgt = bl->att[j] / sum;
                for (a = 0; a < p; ++a) xb[a] += wgt * v[a];
            }
        }
        matvec(out, bl->xb, w->w_o, w->b_o, h * p, d);
    }
}

/* The layer of a decode shape (one d, p_o = d) and its weight counts. */
static void shape_and_counts(const dshape *r, mha_shape *sh, mha_weight_counts *c) {
    sh->heads = r->heads;
    sh->kv_heads = r->kv;
    sh->d_q = sh->d_k = sh->d_v = sh->p_o = r->d;
    sh->p_q = sh->p_k = sh->p_v = r->p;
    if (mha_weight_counts_get(sh, c) != MHA_OK) exit(1);
}

/* ---- 16-bit weights and caches -------------------------------------------------
   The step of shape r on one thread three ways, side by side in one loop
   (each round times the three in turn): float weights (packed) and a float
   cache; f16 weights and an f16 cache; bf16 weights and a bf16 cache, the
   same values rounded. Prints the medians, the bytes each must read, GB/s
   and % of the one-thread stream, the speed-ups over float, and the largest
   difference of the 16-bit outputs from the float one (relative to 1 +
   |out|: the rounding of the weights and cache, not an error of mha.h). */
static void bench16(const dshape *r, double budget, double bw1) {
    const size_t kvp = (size_t)r->kv * (size_t)r->p, cap = (size_t)r->m + (size_t)r->t, runs_max = 200;
    mha_shape sh = {0};
    mha_weight_counts c;
    mha_weights w[3];
    mha_cache cache[3];
    int32_t len[3];
    size_t counts[4], k, i, v, runs = 0, bytes, pbytes, wbytes, bbytes;
    float *wf[4], *bias[4], *kf, *x, *out[3];
    uint16_t *wh[2][4], *ch[2];
    double times[3][200], ms[3], diff[3] = {0.0, 0.0, 0.0}, start;
    void *ws, *pack;
    shape_and_counts(r, &sh, &c);
    counts[0] = c.w_q; counts[1] = c.w_k; counts[2] = c.w_v; counts[3] = c.w_o;
    bias[0] = filled(c.b_q, 0.1f); bias[1] = filled(c.b_k, 0.1f); bias[2] = filled(c.b_v, 0.1f); bias[3] = filled(c.b_o, 0.1f);
    kf = filled(2 * kvp * cap, 1.0f);
    for (v = 0; v < 2; ++v) ch[v] = (uint16_t *)alloc(2 * kvp * cap * sizeof(uint16_t));
    for (i = 0; i < 2 * kvp * cap; ++i) {
        ch[0][i] = mha_f16_from_f32(kf[i]);
        ch[1][i] = mha_bf16_from_f32(kf[i]);
    }
    for (k = 0; k < 4; ++k) {
        wf[k] = filled(counts[k], sqrtf(3.0f / (float)(k == 3 ? r->heads * r->p : r->d)));
        for (v = 0; v < 2; ++v) wh[v][k] = (uint16_t *)alloc(counts[k] * sizeof(uint16_t));
        for (i = 0; i < counts[k]; ++i) {
            wh[0][k][i] = mha_f16_from_f32(wf[k][i]);
            wh[1][k][i] = mha_bf16_from_f32(wf[k][i]);
        }
    }
    for (v = 0; v < 3; ++v) {
        memset(&w[v], 0, sizeof w[v]);
        w[v].w_q = v ? (const void *)wh[v - 1][0] : wf[0];
        w[v].w_k = v ? (const void *)wh[v - 1][1] : wf[1];
        w[v].w_v = v ? (const void *)wh[v - 1][2] : wf[2];
        w[v].w_o = v ? (const void *)wh[v - 1][3] : wf[3];
        w[v].b_q = bias[0]; w[v].b_k = bias[1]; w[v].b_v = bias[2]; w[v].b_o = bias[3];
        w[v].type = v == 0 ? MHA_F32 : v == 1 ? MHA_F16 : MHA_BF16;
        memset(&cache[v], 0, sizeof cache[v]);
        cache[v].capacity = (int32_t)cap;
        cache[v].type = w[v].type;
        cache[v].k = v ? (void *)ch[v - 1] : (void *)kf;
        cache[v].v = v ? (void *)(ch[v - 1] + kvp * cap) : (void *)(kf + kvp * cap);
        cache[v].length = &len[v];
        out[v] = alloc((size_t)r->t * (size_t)r->d * sizeof(float));
    }
    pbytes = mha_packed_weights_size(&sh);
    pack = alloc(pbytes);
    if (mha_pack_weights(&sh, &w[0], pack, pbytes) != MHA_OK) exit(1);
    w[0].packed = pack;
    x = filled((size_t)r->t * (size_t)r->d, 1.0f);
    bytes = mha_decode_workspace_size(&sh, 1, r->t, (int32_t)cap);
    ws = alloc(bytes);
    fprintf(stderr, "bench_decode: shape %s: float, f16, bf16 side by side...\n", r->name);
    start = now();
    while (runs < runs_max && (runs < 3 || now() - start < 3.0 * budget)) {
        for (v = 0; v < 3; ++v) {
            double t0 = now();
            len[v] = r->m;
            if (mha_decode(&sh, &w[v], &cache[v], 1, r->t, x, x, x, out[v], ws, bytes) != MHA_OK) exit(1);
            times[v][runs] = now() - t0;
        }
        ++runs;
    }
    for (v = 0; v < 3; ++v) {
        qsort(times[v], runs, sizeof times[v][0], cmp_double);
        ms[v] = 1e3 * times[v][runs / 2];
        for (i = 0; i < (size_t)r->t * (size_t)r->d; ++i) {
            double e = fabs((double)out[v][i] - (double)out[0][i]) / (1.0 + fabs((double)out[0][i]));
            if (e > diff[v] || e != e) diff[v] = e;
        }
    }
    wbytes = 2 * kvp * cap + c.w_q + c.w_k + c.w_v + c.w_o; /* elements of the cache and the weight matrices */
    bbytes = 4 * (c.b_q + c.b_k + c.b_v + c.b_o);
    printf("| %s | %zu | %zu | %.3f | %.3f | %.3f | %.1f | %.0f %% | %.2f | %.2f | %.1e | %.1e |\n", r->name,
           4 * wbytes + bbytes, 2 * wbytes + bbytes, ms[0], ms[1], ms[2],
           (double)(2 * wbytes + bbytes) / ms[1] * 1e-6, 100.0 * (double)(2 * wbytes + bbytes) / ms[1] * 1e-6 / bw1,
           ms[0] / ms[1], ms[0] / ms[2], diff[1], diff[2]);
    fflush(stdout);
    for (k = 0; k < 4; ++k) {
        free(wf[k]); free(bias[k]); free(wh[0][k]); free(wh[1][k]);
    }
    for (v = 0; v < 3; ++v) free(out[v]);
    free(kf); free(ch[0]); free(ch[1]); free(pack); free(x); free(ws);
}

/* ---- block caches ------------------------------------------------------------
   Shape r's step with f16 weights and the cache as f16, q8, q4 and q8 keys
   with q4 values, one thread and two, side by side in one loop (each run
   times every variant in turn). The blocks hold random integers and one
   scale (the bytes read, not the values, decide the time); bytes per step:
   the f16 weights and every cached row of the step's type. */
#define BLK_VARIANTS 4
static void bench_blocks(const dshape *r, double budget, double bw1, double bw2) {
    static const int32_t kt[BLK_VARIANTS] = {MHA_F16, MHA_Q8, MHA_Q4, MHA_Q8},
                         vt[BLK_VARIANTS] = {MHA_F16, MHA_Q8, MHA_Q4, MHA_Q4};
    const size_t cap = (size_t)r->m + (size_t)r->t, runs_max = 200;
    mha_shape sh = {0};
    mha_weight_counts c;
    mha_weights w = {0};
    mha_cache cache[BLK_VARIANTS];
    int32_t len[BLK_VARIANTS];
    size_t counts[4], k, i, v, th, runs = 0, bytes, step[BLK_VARIANTS], wbytes;
    uint16_t *wh[4];
    unsigned char *arr[BLK_VARIANTS][2];
    float *x, *out;
    double times[2][BLK_VARIANTS][200], ms[2][BLK_VARIANTS], start;
    void *ws;
    shape_and_counts(r, &sh, &c);
    counts[0] = c.w_q; counts[1] = c.w_k; counts[2] = c.w_v; counts[3] = c.w_o;
    for (k = 0; k < 4; ++k) {
        float *f = filled(counts[k], sqrtf(3.0f / (float)(k == 3 ? r->heads * r->p : r->d)));
        wh[k] = (uint16_t *)alloc(counts[k] * sizeof(uint16_t));
        for (i = 0; i < counts[k]; ++i) wh[k][i] = mha_f16_from_f32(f[i]);
        free(f);
    }
    mha_weights_f16(&w, wh[0], wh[1], wh[2], wh[3]);
    wbytes = 2 * (c.w_q + c.w_k + c.w_v + c.w_o);
    for (v = 0; v < BLK_VARIANTS; ++v) {
        memset(&cache[v], 0, sizeof cache[v]);
        cache[v].capacity = (int32_t)cap;
        cache[v].type = kt[v];
        cache[v].value_type = vt[v];
        cache[v].length = &len[v];
        step[v] = wbytes;
        for (k = 0; k < 2; ++k) {
            const int32_t type = k ? vt[v] : kt[v];
            const size_t n = mha_cache_array_bytes(&sh, 1, (int32_t)cap, type, (int32_t)k);
            const size_t rb = n / ((size_t)r->kv * cap), bb = type == MHA_Q8 ? 34u : 18u;
            arr[v][k] = (unsigned char *)alloc(n);
            for (i = 0; i < n; ++i) arr[v][k][i] = (unsigned char)(rand() & 255);
            if (type == MHA_F16) /* finite values: f16s of moderate exponent */
                for (i = 0; i < n / 2; ++i) ((uint16_t *)(void *)arr[v][k])[i] = (uint16_t)(0x3000u + (unsigned)(rand() & 0x0FFF));
            else /* one moderate scale a block */
                for (i = 0; i < n; i += bb) ((uint16_t *)(void *)(arr[v][k] + i))[0] = 0x2000u;
            step[v] += rb * (size_t)r->kv * (size_t)(r->m + r->t);
        }
        cache[v].k = arr[v][0];
        cache[v].v = arr[v][1];
    }
    x = filled((size_t)r->t * (size_t)r->d, 1.0f);
    out = alloc((size_t)r->t * (size_t)r->d * sizeof(float));
    bytes = mha_decode_workspace_size(&sh, 1, r->t, (int32_t)cap);
    ws = alloc(bytes);
    fprintf(stderr, "bench_decode: shape %s: f16, q8, q4, q8/q4 caches, one and two threads...\n", r->name);
    start = now();
    while (runs < runs_max && (runs < 3 || now() - start < 4.0 * budget)) {
        for (v = 0; v < BLK_VARIANTS; ++v)
            for (th = 0; th < 2; ++th) {
                double t0 = now();
                len[v] = r->m;
                if (mha_decode_parallel(&sh, &w, &cache[v], 1, r->t, x, x, x, out, ws, bytes, th ? two_threads : NULL,
                                        NULL) != MHA_OK)
                    exit(1);
                times[th][v][runs] = now() - t0;
            }
        ++runs;
    }
    for (th = 0; th < 2; ++th)
        for (v = 0; v < BLK_VARIANTS; ++v) {
            qsort(times[th][v], runs, sizeof times[th][v][0], cmp_double);
            ms[th][v] = 1e3 * times[th][v][runs / 2];
        }
    for (th = 0; th < 2; ++th)
        printf("| %s | %zu | %d | %.3f | %.3f | %.3f | %.3f | %.2f | %.2f | %.0f %% | %.0f %% | %.0f %% |\n", r->name,
               th + 1, r->m, ms[th][0], ms[th][1], ms[th][2], ms[th][3], ms[th][1] / ms[th][0], ms[th][2] / ms[th][1],
               100.0 * (double)step[0] / ms[th][0] * 1e-6 / (th ? bw2 : bw1),
               100.0 * (double)step[1] / ms[th][1] * 1e-6 / (th ? bw2 : bw1),
               100.0 * (double)step[2] / ms[th][2] * 1e-6 / (th ? bw2 : bw1));
    fflush(stdout);
    for (k = 0; k < 4; ++k) free(wh[k]);
    for (v = 0; v < BLK_VARIANTS; ++v) {
        free(arr[v][0]);
        free(arr[v][1]);
    }
    free(x); free(out); free(ws);
}

/* The block caches' table: its header, then a row pair for each one-token
   shape (only: that shape's name alone; NULL: every one). */
static void blocks_table(const char *only, double budget, double bw1, double bw2) {
    size_t s;
    printf("\nblock caches (q8, q4: docs/quantized.md) against an f16 cache, f16 weights, side by side; %% of stream: "
           "the weights' and the cache's bytes per step over the time, against the streaming read\n");
    printf("| shape | threads | m | f16 ms | q8 ms | q4 ms | q8 keys, q4 values ms | q8 / f16 | q4 / q8 |"
           " f16 %% of stream | q8 %% of stream | q4 %% of stream |\n");
    printf("|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    for (s = 0; s < sizeof SHAPES / sizeof SHAPES[0]; ++s)
        if (SHAPES[s].t == 1 && (!only || strcmp(only, SHAPES[s].name) == 0))
            bench_blocks(&SHAPES[s], budget, bw1, bw2);
}

/* ---- cold caches ----------------------------------------------------------------
   Bytes of the buffer written before each cold step: twice the last-level
   cache that sysfs reports (64 MiB when it reports none), within [64 MiB, 2 GiB]. */
static size_t flush_bytes(void) {
    static const char *const paths[] = {"/sys/devices/system/cpu/cpu0/cache/index3/size",
                                        "/sys/devices/system/cpu/cpu0/cache/index2/size"};
    size_t best = 0, k;
    for (k = 0; k < 2 && !best; ++k) {
        FILE *f = fopen(paths[k], "r");
        unsigned long v = 0;
        char unit = 0;
        if (!f) continue;
        if (fscanf(f, "%lu%c", &v, &unit) >= 1)
            best = (size_t)v * (unit == 'K' ? 1024u : unit == 'M' ? 1048576u : 1u);
        fclose(f);
    }
    best *= 2;
    if (best < ((size_t)64 << 20)) best = (size_t)64 << 20;
    if (best > ((size_t)2 << 30)) best = (size_t)2 << 30;
    return best;
}
static void flush_caches(unsigned char *buf, size_t n) {
    static unsigned char v;
    memset(buf, ++v, n);
    if (buf[n / 2] != v) printf("?"); /* keeps the writes */
}

enum { ONE, TWO, BASE };
#define SWEEP_COUNT 8 /* cache lengths of the sweep: 256, 512, .. 32768 */

/* One row of the table: shape r (the s-th of count, for the progress
   lines), one thread, two threads, the baseline; with flush (cold caches:
   a buffer of flush_n bytes written before each step, not timed) one thread
   and two, and a row of its own. */
static void bench_step(const dshape *r, size_t s, size_t count, double budget, double bw1, double bw2,
                       unsigned char *flush, size_t flush_n) {
    mha_shape sh = {0};
    mha_weights w = {0};
    mha_weight_counts c;
    mha_cache cache;
    baseline bl;
    int32_t len = r->m;
    int cap = r->m + r->t, path, j;
    size_t bytes, pbytes, kvp = (size_t)r->kv * (size_t)r->p, step_bytes, runs_max = 200;
    double ms[3], mn[3], times[200], t0, start, diff = 0.0;
    float *x, *out, *out_bl, *kf;
    void *ws, *pack;
    shape_and_counts(r, &sh, &c);
    w.w_q = filled(c.w_q, sqrtf(3.0f / (float)r->d)); w.b_q = filled(c.b_q, 0.1f);
    w.w_k = filled(c.w_k, sqrtf(3.0f / (float)r->d)); w.b_k = filled(c.b_k, 0.1f);
    w.w_v = filled(c.w_v, sqrtf(3.0f / (float)r->d)); w.b_v = filled(c.b_v, 0.1f);
    w.w_o = filled(c.w_o, sqrtf(3.0f / (float)(r->heads * r->p))); w.b_o = filled(c.b_o, 0.1f);
    pbytes = mha_packed_weights_size(&sh);
    pack = alloc(pbytes);
    if (mha_pack_weights(&sh, &w, pack, pbytes) != MHA_OK) exit(1);
    w.packed = pack;
    memset(&cache, 0, sizeof cache);
    cache.capacity = cap;
    kf = filled(mha_cache_bytes(&sh, 1, cap) / sizeof(float), 1.0f);
    cache.k = kf;
    cache.v = kf + kvp * (size_t)cap;
    cache.length = &len;
    bl.kc = alloc(kvp * (size_t)cap * sizeof(float)); /* the same positions, token-major */
    bl.vc = alloc(kvp * (size_t)cap * sizeof(float));
    for (j = 0; j < r->m; ++j) {
        int g, a;
        for (g = 0; g < r->kv; ++g)
            for (a = 0; a < r->p; ++a) {
                bl.kc[(size_t)j * kvp + (size_t)(g * r->p + a)] = kf[((size_t)g * (size_t)cap + (size_t)j) * (size_t)r->p + (size_t)a];
                bl.vc[(size_t)j * kvp + (size_t)(g * r->p + a)] = kf[kvp * (size_t)cap + ((size_t)g * (size_t)cap + (size_t)j) * (size_t)r->p + (size_t)a];
            }
    }
    bl.q = alloc((size_t)(r->heads * r->p) * sizeof(float));
    bl.xb = alloc((size_t)(r->heads * r->p) * sizeof(float));
    bl.att = alloc((size_t)cap * sizeof(float));
    x = filled((size_t)r->t * (size_t)r->d, 1.0f);
    out = alloc((size_t)r->t * (size_t)r->d * sizeof(float));
    out_bl = alloc((size_t)r->t * (size_t)r->d * sizeof(float));
    bytes = mha_decode_workspace_size(&sh, 1, r->t, cap);
    ws = alloc(bytes);
    /* cache (every slot in use after the step) + weights + biases */
    step_bytes = 4 * (2 * kvp * (size_t)cap + c.w_q + c.w_k + c.w_v + c.w_o + c.b_q + c.b_k + c.b_v + c.b_o);
    for (path = ONE; path <= (flush ? TWO : BASE); ++path) {
        size_t runs = 0;
        fprintf(stderr, "bench_decode: shape %s (%zu of %zu): %s%s...\n", r->name, s + 1, count,
                path == ONE ? "one thread" : path == TWO ? "two threads" : "llama2.c-style baseline",
                flush ? ", cold caches" : "");
        start = now();
        while (runs < runs_max && (runs < 3 || now() - start < budget)) {
            len = r->m;
            if (flush) flush_caches(flush, flush_n);
            t0 = now();
            if (path == BASE) {
                baseline_step(&bl, r, &w, r->m, x, out_bl);
            } else if (mha_decode_parallel(&sh, &w, &cache, 1, r->t, x, x, x, out, ws, bytes,
                                           path == TWO ? two_threads : NULL, NULL) != MHA_OK) {
                fprintf(stderr, "bench_decode: mha_decode failed\n");
                exit(1);
            }
            times[runs++] = now() - t0;
        }
        qsort(times, runs, sizeof times[0], cmp_double);
        ms[path] = 1e3 * times[runs / 2];
        mn[path] = 1e3 * times[0];
    }
    if (flush) { /* the cold table's row */
        printf("| %s | %d | %zu | %.3f | %.1f | %.0f %% | %.3f | %.1f | %.0f %% |\n", r->name, r->m, step_bytes,
               ms[ONE], (double)step_bytes / ms[ONE] * 1e-6, 100.0 * (double)step_bytes / ms[ONE] * 1e-6 / bw1,
               ms[TWO], (double)step_bytes / ms[TWO] * 1e-6, 100.0 * (double)step_bytes / ms[TWO] * 1e-6 / bw2);
    } else {
        for (j = 0; j < r->t * r->d; ++j) { /* the same step, relative to the output's scale */
            double e = fabs((double)out[j] - (double)out_bl[j]) / (1.0 + fabs((double)out_bl[j]));
            if (e > diff || e != e) diff = e;
        }
        printf("| %s | %d / %d | %d | %d | %d | %d | %zu | %.3f | %.3f | %.1f | %.0f %% | %.3f | %.2f | %.3f | %.1f |"
               " %.1e |\n", r->name, r->heads, r->kv, r->d, r->p, r->m, r->t, step_bytes, ms[ONE], mn[ONE],
               (double)step_bytes / ms[ONE] * 1e-6, 100.0 * (double)step_bytes / ms[ONE] * 1e-6 / bw1, ms[TWO],
               ms[ONE] / ms[TWO], ms[BASE], ms[BASE] / ms[ONE], diff);
    }
    fflush(stdout);
    free((void *)w.w_q); free((void *)w.b_q); free((void *)w.w_k); free((void *)w.b_k);
    free((void *)w.w_v); free((void *)w.b_v); free((void *)w.w_o); free((void *)w.b_o);
    free(pack); free(cache.k); free(bl.kc); free(bl.vc); free(bl.q); free(bl.xb); free(bl.att);
    free(x); free(out); free(out_bl); free(ws);
}


/* ---- a tree of drafts -------------------------------------------------------
   Speculative decoding's check on shape r, one thread, side by side in one
   loop: one step (t = 1, mha_decode), a tree of 8 drafts in one
   mha_decode_tree call (two candidates a level: parents -1 -1 0 0 1 1 2 2)
   and a chain of 8 (mha_decode, t = 8); medians, and each over one step. */
static void bench_tree(const dshape *r, double budget) {
    static const int32_t parents[8] = {-1, -1, 0, 0, 1, 1, 2, 2};
    const size_t kvp = (size_t)r->kv * (size_t)r->p, cap = (size_t)r->m + 8, runs_max = 200;
    mha_shape sh = {0};
    mha_weight_counts c;
    mha_weights w = {0};
    mha_cache cache = {0};
    int32_t len;
    size_t runs = 0, bytes, pbytes, v;
    float *x, *out;
    double times[3][200], ms[3], start;
    void *ws, *pack;
    shape_and_counts(r, &sh, &c);
    w.w_q = filled(c.w_q, sqrtf(3.0f / (float)r->d)); w.w_k = filled(c.w_k, sqrtf(3.0f / (float)r->d));
    w.w_v = filled(c.w_v, sqrtf(3.0f / (float)r->d)); w.w_o = filled(c.w_o, sqrtf(3.0f / (float)(r->heads * r->p)));
    pbytes = mha_packed_weights_size(&sh);
    pack = alloc(pbytes);
    if (mha_pack_weights(&sh, &w, pack, pbytes) != MHA_OK) exit(1);
    w.packed = pack;
    cache.capacity = (int32_t)cap;
    cache.k = filled(2 * kvp * cap, 1.0f);
    cache.v = (float *)cache.k + kvp * cap;
    cache.length = &len;
    x = filled(8 * (size_t)r->d, 1.0f);
    out = alloc(8 * (size_t)r->d * sizeof(float));
    bytes = mha_decode_workspace_size(&sh, 1, 8, (int32_t)cap);
    ws = alloc(bytes);
    fprintf(stderr, "bench_decode: shape %s: a step, a tree of 8 drafts, a chain of 8...\n", r->name);
    start = now();
    while (runs < runs_max && (runs < 3 || now() - start < 3.0 * budget)) {
        for (v = 0; v < 3; ++v) {
            double t0 = now();
            mha_status st;
            len = r->m;
            st = v == 1 ? mha_decode_tree(&sh, &w, &cache, 1, 8, parents, x, x, x, out, ws, bytes)
                        : mha_decode(&sh, &w, &cache, 1, v ? 8 : 1, x, x, x, out, ws, bytes);
            if (st != MHA_OK) exit(1);
            times[v][runs] = now() - t0;
        }
        ++runs;
    }
    for (v = 0; v < 3; ++v) {
        qsort(times[v], runs, sizeof times[v][0], cmp_double);
        ms[v] = 1e3 * times[v][runs / 2];
    }
    printf("| %s | %d | %.3f | %.3f | %.3f | %.2f | %.2f |\n", r->name, r->m, ms[0], ms[1], ms[2], ms[1] / ms[0],
           ms[2] / ms[0]);
    fflush(stdout);
    free((void *)w.w_q); free((void *)w.w_k); free((void *)w.w_v); free((void *)w.w_o);
    free(pack); free(cache.k); free(x); free(out); free(ws);
}

int main(int argc, char **argv) {
    double budget = argc > 1 ? atof(argv[1]) : 1.0, bw1, bw2;
    size_t s, count = sizeof SHAPES / sizeof SHAPES[0];
    fprintf(stderr, "bench_decode: measuring the streaming-read bandwidth...\n");
    bw1 = stream_gbs(1);
    bw2 = stream_gbs(2);
    printf("vector unit: %s; measured streaming read (512 MiB): %.1f GB/s on one thread, %.1f GB/s on two; "
           "weights packed once (mha_pack_weights)\n", MHA__SIMD_NAME, bw1, bw2);
    printf("| shape | heads / kv | d | p | m | t | bytes per step | median ms | min ms | GB/s | %% of stream |"
           " 2 threads ms | speed-up 2 threads | llama2.c-style ms | llama2.c-style / mha.h | max diff |\n");
    printf("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    if (argc > 2 && strcmp(argv[2], "tree") == 0) { /* speculative decoding's check: a tree of 8 drafts */
        printf("\na tree of 8 drafts (mha_decode_tree) against one step and a chain of 8 (mha_decode), one thread\n");
        printf("| shape | m | step ms | tree of 8 ms | chain of 8 ms | tree / step | chain / step |\n|---|---|---|---|---|---|---|\n");
        for (s = 0; s < 3; ++s) bench_tree(&SHAPES[s], budget);
        return 0;
    }
    if (argc > 2 && strcmp(argv[2], "blocks") == 0) { /* the block caches' table alone */
        blocks_table(NULL, budget, bw1, bw2);
        return 0;
    }
    if (argc > 2 && strcmp(argv[2], "sweep") == 0) { /* D2's step at cache lengths 256 .. 32768 (bench/peers.py) */
        static char names[SWEEP_COUNT][8];
        for (s = 0; s < SWEEP_COUNT; ++s) {
            dshape d = SHAPES[1];
            d.m = 256 << s;
            snprintf(names[s], sizeof names[s], "S%d", d.m);
            d.name = names[s];
            bench_step(&d, s, SWEEP_COUNT, budget, bw1, bw2, NULL, 0);
        }
        return 0;
    }
    for (s = 0; s < count; ++s)
        if (argc <= 2 || strcmp(argv[2], SHAPES[s].name) == 0 || strcmp(argv[2], "all") == 0)
            bench_step(&SHAPES[s], s, count, budget, bw1, bw2, NULL, 0);
    printf("\n16-bit weights and caches, one thread, side by side (f16 and bf16 against float; max diff: the "
           "16-bit output's largest difference from the float one, |diff| / (1 + |out|))\n");
    printf("| shape | bytes float | bytes 16-bit | float ms | f16 ms | bf16 ms | f16 GB/s | %% of stream |"
           " float / f16 | float / bf16 | max diff f16 | max diff bf16 |\n");
    printf("|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    for (s = 0; s < count; ++s)
        if (SHAPES[s].t == 1 && (argc <= 2 || strcmp(argv[2], SHAPES[s].name) == 0 || strcmp(argv[2], "all") == 0))
            bench16(&SHAPES[s], budget, bw1);
    blocks_table(argc > 2 && strcmp(argv[2], "all") != 0 ? argv[2] : NULL, budget, bw1, bw2);
    {
        const size_t fn = flush_bytes();
        unsigned char *fb = (unsigned char *)alloc(fn);
        printf("\ncold caches: %zu MiB written before every step (twice the last-level cache), one thread and two\n",
               fn >> 20);
        printf("| shape | m | bytes per step | cold ms | cold GB/s | %% of stream | cold 2 threads ms | cold GB/s, 2 threads"
               " | %% of the 2-thread stream |\n");
        printf("|---|---|---|---|---|---|---|---|---|\n");
        for (s = 0; s < count; ++s)
            if (SHAPES[s].t == 1 && (argc <= 2 || strcmp(argv[2], SHAPES[s].name) == 0 || strcmp(argv[2], "all") == 0))
                bench_step(&SHAPES[s], s, count, budget, bw1, bw2, fb, fn);
        free(fb);
    }
    return 0;
}
