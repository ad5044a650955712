/* bench/bench.c - times mha_forward on the benchmark shapes (README, "Benchmark").

   Built with MHA_FAST 1 for the host's vector unit (make bench). For each
   shape, batch 1:
     - the fast path, one thread: median and minimum time, GFLOP/s by the
       README's formula, and that as a percentage of the FMA peak which this
       program measures first (independent vector FMAs in registers);
     - the fast path on 2 threads (tests/two_threads.h);
     - the reference path (mha_forward_reference), median, and the ratio of
       its time to the fast path's (not on N, whose call would take seconds);
     - workspace bytes of each path;
   then bf16 weights (second table) and the backward pass (third table,
   bench_backward).
   Weights are uniform in +-sqrt(3 / fan_in) and packed once with
   mha_pack_weights (as a model would at load time); inputs are uniform in
   [-1, 1]. Progress goes to stderr.

       bench [SECONDS_PER_SHAPE [SHAPE [unpacked | fast | two | backward | once]]]
           default 1.0 s, every shape ("all"); each timing runs at least 3
           times. "unpacked": no mha_pack_weights. "fast": the one-thread
           fast path only, "two": the two-thread one only (bench/peers.py).
           "backward": the backward table's row alone (bench/peers.py). "once": one call of mha_forward
           per shape and nothing else (no peak, no timing), for instruction
           counts under valgrind --tool=callgrind.
*/
#define _POSIX_C_SOURCE 199309L
#ifndef MHA_FAST
#define MHA_FAST 1
#endif
#ifndef MHA_BF16_DOT
#define MHA_BF16_DOT 1 /* bf16 products where the build targets AVX512-BF16 (the second table) */
#endif
#define MHA_IMPLEMENTATION
#include "../mha.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../tests/two_threads.h" /* a parallel-for on 2 pthreads */
#include "bench_util.h"            /* clock, data, allocation */
#include "shapes.h"                /* the table of shapes */


/* Floating-point operations of one forward pass (multiply and add count as 2). */
static double flops(const shape_row *r) {
    double n = r->n, m = r->m, h = r->heads, kv = r->kv, pq = r->pq, pv = r->pv, pa = r->pa;
    double f = 2.0 * (n * r->dq * h * pq + m * r->dk * kv * pq + m * r->dv * kv * pv) /* projections */
               + 2.0 * n * m * h * pv                                              /* weights x values */
               + 2.0 * n * h * pv * r->po;                                         /* output projection */
    if (pa > 0) f += 2.0 * (m * h * pa * pq + n * h * pa * pq + n * m * h * pa); /* A_k K, A_q q, w_a . tanh */
    else f += 2.0 * n * m * h * pq;                                              /* q . k */
    return f;
}

/* The FMA peak of one core: 12 independent chains of vector FMAs, in
   registers; the best of 20 short runs, as the machine is shared. */
#define PEAK_CHAINS(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)
static double peak_gflops(void) {
    const long iters = 4000000;
    mha__v a = mha__vset(1.0000001f), b = mha__vset(-1e-7f);
    float lanes[MHA__VL];
    double t, best = 1e30;
    long it;
    int rep;
#define PEAK_DECL(i) mha__v c##i = mha__vset((float)(i));
#define PEAK_FMA(i) c##i = mha__vfma(c##i, a, b);
#define PEAK_SUM(i) c0 = mha__vadd(c0, c##i);
    for (rep = 0; rep < 20; ++rep) {
        PEAK_CHAINS(PEAK_DECL)
        t = now();
        for (it = 0; it < iters; ++it) {
            PEAK_CHAINS(PEAK_FMA)
        }
        t = now() - t;
        PEAK_CHAINS(PEAK_SUM)
        mha__vstore(lanes, c0);
        if (lanes[0] == 12345.0f) printf("?"); /* keeps the chains alive */
        if (t < best) best = t;
    }
    return 2.0 * (double)iters * 12.0 * MHA__VL / best * 1e-9;
}

#if MHA__BFDP
/* The same for vdpbf16ps (4 flops a lane: two products and their sums). */
static double peak_bf16(void) {
    const long iters = 4000000;
    const __m512bh a = (__m512bh)_mm512_set1_epi32(0x3f803f80), b = (__m512bh)_mm512_set1_epi32(0x33d633d6);
    float lanes[MHA__VL];
    double t, best = 1e30;
    long it;
    int rep;
#define PEAK_BF(i) c##i = _mm512_dpbf16_ps(c##i, a, b);
    for (rep = 0; rep < 20; ++rep) {
        PEAK_CHAINS(PEAK_DECL)
        t = now();
        for (it = 0; it < iters; ++it) {
            PEAK_CHAINS(PEAK_BF)
        }
        t = now() - t;
        PEAK_CHAINS(PEAK_SUM)
        mha__vstore(lanes, c0);
        if (lanes[0] == 12345.0f) printf("?");
        if (t < best) best = t;
    }
    return 4.0 * (double)iters * 12.0 * MHA__VL / best * 1e-9;
}
#endif

/* Float weights for a row of SHAPES (counts c): uniform in +-sqrt(3 / fan_in),
   biases in +-0.1, drawn in this order; free them with free_weights. */
static mha_weights weights_of(const shape_row *r, const mha_weight_counts *c) {
    mha_weights w = {0};
    w.w_q = filled(c->w_q, sqrtf(3.0f / (float)r->dq)); w.b_q = filled(c->b_q, 0.1f);
    w.w_k = filled(c->w_k, sqrtf(3.0f / (float)r->dk)); w.b_k = filled(c->b_k, 0.1f);
    w.w_v = filled(c->w_v, sqrtf(3.0f / (float)r->dv)); w.b_v = filled(c->b_v, 0.1f);
    w.w_o = filled(c->w_o, sqrtf(3.0f / (float)(r->heads * r->pv))); w.b_o = filled(c->b_o, 0.1f);
    if (r->pa > 0) {
        w.a_q = filled(c->a_q, sqrtf(3.0f / (float)r->pq));
        w.a_k = filled(c->a_k, sqrtf(3.0f / (float)r->pq));
        w.a_v = filled(c->a_v, sqrtf(3.0f / (float)r->pa));
    }
    return w;
}
static void free_weights(mha_weights *w) {
    free((void *)w->w_q); free((void *)w->b_q); free((void *)w->w_k); free((void *)w->b_k);
    free((void *)w->w_v); free((void *)w->b_v); free((void *)w->w_o); free((void *)w->b_o);
    free((void *)w->a_q); free((void *)w->a_k); free((void *)w->a_v);
}

enum { FAST, FAST2, REF };
#define REF_FLOPS 2e10 /* the reference path is timed on shapes below this (N would take seconds a call) */
/* Median (and *min) ms of repeated calls of one path, for `budget` seconds, 3 to 2000 runs. */
static double time_ms(int path, double budget, const mha_shape *sh, const mha_weights *w, const shape_row *r,
                      const float *q, const float *k, const float *v, float *out, void *ws, size_t bytes,
                      double *min) {
    double times[2000], t0, start = now();
    size_t runs = 0;
    mha_status st = MHA_OK;
    while (runs < 2000 && (runs < 3 || now() - start < budget)) {
        t0 = now();
        if (path == REF)
            st = mha_forward_reference(sh, w, 1, r->n, r->m, q, k, v, NULL, out, NULL, ws, bytes);
        else
            st = mha_forward_parallel(sh, w, 1, r->n, r->m, q, k, v, NULL, out, NULL, ws, bytes,
                                      path == FAST2 ? two_threads : NULL, NULL);
        times[runs++] = now() - t0;
        if (st != MHA_OK) {
            fprintf(stderr, "bench: %s\n", mha_status_string(st));
            exit(1);
        }
    }
    qsort(times, runs, sizeof times[0], cmp_double);
    if (min) *min = 1e3 * times[0];
    return 1e3 * times[runs / 2];
}

/* bf16 weights on the shapes M, B and L, packed, one thread: the fp32 path
   (float weights of the same values) and the bf16 one (bf16 products where
   compiled in, MHA_BF16_DOT; else the same fp32 arithmetic on converted
   panels), timed alternately in one loop; GFLOP/s of each, the speed-up, and
   the largest difference of the outputs relative to 1 + |fp32's|. */
static void bench_bf16(double budget, const char *only, double fma_peak) {
    static const char *names = "MBL";
    double bf_peak = 0.0;
    int amx = 0;
    size_t s, count = sizeof SHAPES / sizeof SHAPES[0];
#if MHA__BFDP
    bf_peak = peak_bf16();
    printf("\nbf16 weights: fp32 arithmetic against bf16 products (MHA_BF16_DOT, vdpbf16ps; measured peak %.1f"
           " GFLOP/s, %.2fx the FMA peak), packed, one thread, timed alternately\n", bf_peak, bf_peak / fma_peak);
#else
    (void)fma_peak;
    printf("\nbf16 weights: fp32 arithmetic both ways (bf16 products not compiled in: no AVX512-BF16)\n");
#endif
#if MHA__AMX
    amx = mha__amx_ask() == 1;
    printf("(and bf16 products by AMX tiles: %s)\n", amx ? "this CPU has them; timed in the same loop"
                                                      : "not run: no AMX-TILE/AMX-BF16, or not granted by the OS");
#endif
    printf("| shape | fp32 ms | bf16 ms | fp32 GFLOP/s | bf16 GFLOP/s | speed-up | bf16 %% of its peak | largest difference "
           "| AMX ms | AMX GFLOP/s | AMX speed-up over fp32 | AMX largest difference |\n");
    printf("|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    for (s = 0; s < count; ++s) {
        const shape_row *r = &SHAPES[s];
        mha_shape sh = shape_of(r);
        mha_weights w = {0}, wb;
        mha_weight_counts c;
        double t32[200], t16[200], tam[200], t0, start, diff = 0.0, damx = 0.0, ms32, ms16, msam = 0.0;
        size_t bytes, pbytes, runs = 0, i, k, no = (size_t)r->n * (size_t)r->po;
        float *q, *k_, *v, *o32, *o16, *oam, *wf[4];
        uint16_t *wh[4];
        size_t wn[4];
        void *ws, *p32, *p16;
        if (!strchr(names, r->name[0]) || (strcmp(only, "all") != 0 && strcmp(only, r->name) != 0)) continue;
        if (mha_weight_counts_get(&sh, &c) != MHA_OK) exit(1);
        wn[0] = c.w_q; wn[1] = c.w_k; wn[2] = c.w_v; wn[3] = c.w_o;
        for (k = 0; k < 4; ++k) { /* bf16 weights and their float values */
            wf[k] = filled(wn[k], sqrtf(3.0f / (float)(k == 0 ? r->dq : k == 1 ? r->dk : k == 2 ? r->dv : r->heads * r->pv)));
            wh[k] = (uint16_t *)alloc(wn[k] * sizeof(uint16_t));
            for (i = 0; i < wn[k]; ++i) {
                wh[k][i] = mha_bf16_from_f32(wf[k][i]);
                wf[k][i] = mha_f32_from_bf16(wh[k][i]);
            }
        }
        w.b_q = filled(c.b_q, 0.1f); w.b_k = filled(c.b_k, 0.1f); w.b_v = filled(c.b_v, 0.1f); w.b_o = filled(c.b_o, 0.1f);
        wb = w;
        w.w_q = wf[0]; w.w_k = wf[1]; w.w_v = wf[2]; w.w_o = wf[3];
        wb.w_q = wh[0]; wb.w_k = wh[1]; wb.w_v = wh[2]; wb.w_o = wh[3];
        wb.type = MHA_BF16;
        pbytes = mha_packed_weights_size(&sh);
        p32 = alloc(pbytes);
        p16 = alloc(pbytes);
        if (mha_pack_weights(&sh, &w, p32, pbytes) != MHA_OK || mha_pack_weights(&sh, &wb, p16, pbytes) != MHA_OK) exit(1);
        w.packed = p32;
        wb.packed = p16;
        q = filled((size_t)r->n * (size_t)r->dq, 1.0f);
        k_ = filled((size_t)r->m * (size_t)r->dk, 1.0f);
        v = filled((size_t)r->m * (size_t)r->dv, 1.0f);
        o32 = filled(no, 0.0f);
        o16 = filled(no, 0.0f);
        oam = filled(no, 0.0f);
        bytes = mha_workspace_size(&sh, 1, r->n, r->m);
        ws = alloc(bytes);
        fprintf(stderr, "bench: shape %s: fp32 and bf16 products side by side...\n", r->name);
        start = now();
        while (runs < 200 && (runs < 3 || now() - start < 2.0 * budget)) {
            t0 = now();
            if (mha_forward(&sh, &w, 1, r->n, r->m, q, k_, v, NULL, o32, NULL, ws, bytes) != MHA_OK) exit(1);
            t32[runs] = now() - t0;
#if MHA__AMX
            mha__amx_use = 0; /* vdpbf16ps */
#endif
            t0 = now();
            if (mha_forward(&sh, &wb, 1, r->n, r->m, q, k_, v, NULL, o16, NULL, ws, bytes) != MHA_OK) exit(1);
            t16[runs] = now() - t0;
#if MHA__AMX
            mha__amx_use = -1;
            if (amx) {
                t0 = now();
                if (mha_forward(&sh, &wb, 1, r->n, r->m, q, k_, v, NULL, oam, NULL, ws, bytes) != MHA_OK) exit(1);
                tam[runs] = now() - t0;
            }
#endif
            runs++;
        }
        if (amx) {
            qsort(tam, runs, sizeof tam[0], cmp_double);
            msam = 1e3 * tam[runs / 2];
            for (i = 0; i < no; ++i) {
                double d = fabs((double)oam[i] - o32[i]) / (1.0 + fabs((double)o32[i]));
                if (!(d <= damx)) damx = d;
            }
        }
        qsort(t32, runs, sizeof t32[0], cmp_double);
        qsort(t16, runs, sizeof t16[0], cmp_double);
        ms32 = 1e3 * t32[runs / 2];
        ms16 = 1e3 * t16[runs / 2];
        for (i = 0; i < no; ++i) {
            double d = fabs((double)o16[i] - o32[i]) / (1.0 + fabs((double)o32[i]));
            if (!(d <= diff)) diff = d;
        }
        printf("| %s | %.3f | %.3f | %.1f | %.1f | %.2f | ", r->name, ms32, ms16, flops(r) / ms32 * 1e-6,
               flops(r) / ms16 * 1e-6, ms32 / ms16);
        if (bf_peak > 0.0)
            printf("%.0f %% | %.2e |", 100.0 * flops(r) / ms16 * 1e-6 / bf_peak, diff);
        else
            printf("- | %.2e |", diff);
        if (amx)
            printf(" %.3f | %.1f | %.2f | %.2e |\n", msam, flops(r) / msam * 1e-6, ms32 / msam, damx);
        else
            printf(" not run | - | - | - |\n");
        fflush(stdout);
        for (k = 0; k < 4; ++k) {
            free(wf[k]);
            free(wh[k]);
        }
        free((void *)w.b_q); free((void *)w.b_k); free((void *)w.b_v); free((void *)w.b_o);
        free(p32); free(p16); free(q); free(k_); free(v); free(o32); free(o16); free(oam); free(ws);
    }
}

/* Floating-point operations of one backward pass of dot scoring, stated as
   twice the forward's (each product of the forward has two of the
   backward: the gradients of both its factors) plus the scores once more
   (the backward recomputes S = Q K^T rather than keep it): 2.5x the
   forward where the attention dominates, 2x where the projections do. */
static double flops_backward(const shape_row *r) {
    return 2.0 * flops(r) + 2.0 * (double)r->n * r->m * r->heads * r->pq;
}

/* mha_backward on the shapes M, B and L, one thread: every gradient (the
   inputs', every weight's and bias's), median ms and GFLOP/s by
   flops_backward; its workspace and that at n = m = 4096 as a share of one
   n x m fp32 matrix; then mha_backward_parallel on two threads, timed
   alternately with it. `row_only`: the table row alone (bench/peers.py);
   2: that row for mha_backward_parallel on two threads. */
static void bench_backward(double budget, const char *only, int row_only) {
    static const char *names = "MBL";
    size_t s, count = sizeof SHAPES / sizeof SHAPES[0];
    if (!row_only) {
        printf("\nbackward (mha_backward, every gradient), one thread; GFLOP/s = (2 forward + 2 n m h p_q) / time\n");
        printf("| shape | median ms | min ms | GFLOP/s | workspace bytes | workspace at n = m = 4096 "
               "| 2 threads ms | speed-up 2 threads | parallel workspace bytes |\n");
        printf("|---|---|---|---|---|---|---|---|---|\n");
    }
    for (s = 0; s < count; ++s) {
        const shape_row *r = &SHAPES[s];
        mha_shape sh = shape_of(r);
        mha_weights w;
        mha_weight_counts c;
        mha_grads g;
        double times[200], times2[200], t0, start, ms, ms2;
        size_t bytes, big, bytes2, runs = 0;
        float *q, *k, *v, *dout, *dq, *dk, *dv;
        void *ws;
        if (!strchr(names, r->name[0]) || (strcmp(only, "all") != 0 && strcmp(only, r->name) != 0)) continue;
        if (mha_weight_counts_get(&sh, &c) != MHA_OK) exit(1);
        w = weights_of(r, &c);
        g.w_q = filled(c.w_q, 0.0f); g.b_q = filled(c.b_q, 0.0f); g.w_k = filled(c.w_k, 0.0f);
        g.b_k = filled(c.b_k, 0.0f); g.w_v = filled(c.w_v, 0.0f); g.b_v = filled(c.b_v, 0.0f);
        g.w_o = filled(c.w_o, 0.0f); g.b_o = filled(c.b_o, 0.0f);
        g.a_q = g.a_k = g.a_v = g.sinks = NULL;
        q = filled((size_t)r->n * (size_t)r->dq, 1.0f);
        k = filled((size_t)r->m * (size_t)r->dk, 1.0f);
        v = filled((size_t)r->m * (size_t)r->dv, 1.0f);
        dout = filled((size_t)r->n * (size_t)r->po, 1.0f);
        dq = filled((size_t)r->n * (size_t)r->dq, 0.0f);
        dk = filled((size_t)r->m * (size_t)r->dk, 0.0f);
        dv = filled((size_t)r->m * (size_t)r->dv, 0.0f);
        bytes = mha_backward_workspace_size(&sh, 1, r->n, r->m);
        bytes2 = mha_backward_parallel_workspace_size(&sh, 1, r->n, r->m);
        big = mha_backward_workspace_size(&sh, 1, 4096, 4096);
        ws = alloc(bytes > bytes2 ? bytes : bytes2);
        fprintf(stderr, "bench: shape %s: backward%s...\n", r->name, row_only ? "" : ", one thread and two alternately");
        start = now();
        while (runs < 200 && (runs < 3 || now() - start < (row_only ? 1.0 : 2.0) * budget)) {
            t0 = now();
            if (row_only == 2 ? mha_backward_parallel(&sh, &w, 1, r->n, r->m, q, k, v, NULL, NULL, dout, dq, dk, dv, &g,
                                                      ws, bytes2, two_threads, NULL) != MHA_OK
                              : mha_backward(&sh, &w, 1, r->n, r->m, q, k, v, NULL, NULL, dout, dq, dk, dv, &g, ws,
                                             bytes) != MHA_OK)
                exit(1);
            times[runs] = now() - t0;
            if (!row_only) {
                t0 = now();
                if (mha_backward_parallel(&sh, &w, 1, r->n, r->m, q, k, v, NULL, NULL, dout, dq, dk, dv, &g, ws, bytes2,
                                          two_threads, NULL) != MHA_OK)
                    exit(1);
                times2[runs] = now() - t0;
            }
            ++runs;
        }
        qsort(times, runs, sizeof times[0], cmp_double);
        ms = 1e3 * times[runs / 2];
        printf("| %s | %.3f | %.3f | %.1f | %zu | %zu (1/%.0f) |", r->name, ms, 1e3 * times[0],
               flops_backward(r) / ms * 1e-6, row_only == 2 ? bytes2 : bytes, big, 4096.0 * 4096.0 * 4.0 / (double)big);
        if (!row_only) {
            qsort(times2, runs, sizeof times2[0], cmp_double);
            ms2 = 1e3 * times2[runs / 2];
            printf(" %.3f | %.2f | %zu |", ms2, ms / ms2, bytes2);
        }
        printf("\n");
        fflush(stdout);
        free_weights(&w);
        free(g.w_q); free(g.b_q); free(g.w_k); free(g.b_k); free(g.w_v); free(g.b_v); free(g.w_o); free(g.b_o);
        free(q); free(k); free(v); free(dout); free(dq); free(dk); free(dv); free(ws);
    }
}

int main(int argc, char **argv) {
    double budget = argc > 1 ? atof(argv[1]) : 1.0, peak;
    const char *mode = argc > 3 ? argv[3] : "";
    int packed = strcmp(mode, "unpacked") != 0, once = strcmp(mode, "once") == 0, two = strcmp(mode, "two") == 0;
    int fast = two || strcmp(mode, "fast") == 0; /* "two": the fast path on 2 threads alone */
    size_t s, count = sizeof SHAPES / sizeof SHAPES[0];
    if (strcmp(mode, "backward") == 0 || strcmp(mode, "backward2") == 0) { /* one shape's backward row
                                                                              (bench/peers.py; 2: two threads) */
        bench_backward(budget, argc > 2 ? argv[2] : "all", mode[8] ? 2 : 1);
        return 0;
    }
    fprintf(stderr, "bench: measuring the FMA peak...\n");
    peak = once || fast ? 0.0 : peak_gflops();
    printf("vector unit: %s; measured FMA peak of one core: %.1f GFLOP/s; weights %s\n", MHA__SIMD_NAME, peak,
           packed ? "packed once (mha_pack_weights)" : "packed by each call");
    if (fast || once) printf("(peak not measured in this mode)\n");
    printf("| shape | n | m | heads | median ms | min ms | GFLOP/s | %% of peak | 2 threads ms | speed-up 2 threads"
           " | reference ms | fast / reference | workspace bytes | reference workspace bytes |\n");
    printf("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    for (s = 0; s < count; ++s) {
        const shape_row *r = &SHAPES[s];
        mha_shape sh = shape_of(r);
        mha_weights w;
        mha_weight_counts c;
        size_t bytes, ref_bytes, pbytes;
        double fast_ms, fast_min, two_ms, ref_ms, gf;
        float *q, *k, *v, *out;
        void *ws, *pack = NULL;
        if (argc > 2 && strcmp(argv[2], r->name) != 0 && strcmp(argv[2], "all") != 0) continue;
        if (mha_weight_counts_get(&sh, &c) != MHA_OK) return 1;
        w = weights_of(r, &c);
        pbytes = mha_packed_weights_size(&sh);
        if (packed && pbytes > 0) {
            pack = alloc(pbytes);
            if (mha_pack_weights(&sh, &w, pack, pbytes) != MHA_OK) return 1;
            w.packed = pack;
        }
        q = filled((size_t)r->n * (size_t)r->dq, 1.0f);
        k = filled((size_t)r->m * (size_t)r->dk, 1.0f);
        v = filled((size_t)r->m * (size_t)r->dv, 1.0f);
        out = filled((size_t)r->n * (size_t)r->po, 0.0f);
        bytes = mha_workspace_size(&sh, 1, r->n, r->m);
        ref_bytes = mha_reference_workspace_size(&sh, 1, r->n, r->m);
        ws = alloc(bytes > ref_bytes ? bytes : ref_bytes);
        if (once) {
            if (mha_forward(&sh, &w, 1, r->n, r->m, q, k, v, NULL, out, NULL, ws, bytes) != MHA_OK) return 1;
            printf("%s: one call of mha_forward, out[0] = %g\n", r->name, (double)out[0]);
        } else {
            fast_ms = fast_min = two_ms = ref_ms = 0.0;
            if (!two) {
                fprintf(stderr, "bench: shape %s (%zu of %zu): fast path...\n", r->name, s + 1, count);
                fast_ms = time_ms(FAST, budget, &sh, &w, r, q, k, v, out, ws, bytes, &fast_min);
            }
            if (!fast || two) {
                fprintf(stderr, "bench: shape %s: fast path, 2 threads...\n", r->name);
                two_ms = time_ms(FAST2, budget, &sh, &w, r, q, k, v, out, ws, bytes, NULL);
            }
            if (!fast && flops(r) < REF_FLOPS) {
                fprintf(stderr, "bench: shape %s: reference path...\n", r->name);
                ref_ms = time_ms(REF, budget, &sh, &w, r, q, k, v, out, ws, ref_bytes, NULL);
            }
            printf("| %s | %d | %d | %d | ", r->name, r->n, r->m, r->heads);
            gf = two ? 0.0 : flops(r) / fast_ms * 1e-6;
            if (two) /* (bench/peers.py: a fifth decimal for T's microseconds) */
                printf("- | - | - | - | %.5f | - | - | - |", two_ms);
            else if (fast)
                printf("%.5f | %.5f | %.1f | - | - | - | - | - |", fast_ms, fast_min, gf);
            else
                printf("%.3f | %.3f | %.1f | %.0f %% | %.3f | %.2f |", fast_ms, fast_min, gf, 100.0 * gf / peak, two_ms,
                       fast_ms / two_ms);
            if (ref_ms > 0.0)
                printf(" %.3f | %.1f |", ref_ms, ref_ms / fast_ms);
            else if (!fast)
                printf(" - | - |");
            printf(" %zu | %zu |\n", bytes, ref_bytes);
        }
        fflush(stdout);
        free_weights(&w);
        free(pack); free(q); free(k); free(v); free(out); free(ws);
    }
    if (!once && !fast && packed) bench_bf16(budget, argc > 2 ? argv[2] : "all", peak);
    if (!once && !fast && packed) bench_backward(budget, argc > 2 ? argv[2] : "all", 0);
    return 0;
}
