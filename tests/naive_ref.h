/* A deliberately plain double-precision attention, written apart from mha.h's
   kernels, used by the fuzzer and the hostile-input tests as a second opinion.
   It follows the docs' definition literally and allocates freely. Masks use
   64-bit arithmetic for the causal bound. Fully masked rows give zero weights.
   The decoder knobs as the README defines them: RoPE on the projected q and k
   (angles P theta^(-2a/r) in double), the soft-cap, ALiBi with the published
   slopes, sinks in the softmax's denominator. */
#ifndef NAIVE_REF_H
#define NAIVE_REF_H
#include <math.h>
#include <stdlib.h>

#include "../mha.h"

/* RoPE on x [rope_dim entries of a head] at position pos, in double. */
static void naive_rope(const mha_shape *s, double *x, double pos) {
    int32_t r = s->rope_dim, a;
    double theta = s->rope_theta != 0.0f ? (double)s->rope_theta : 10000.0;
    for (a = 0; a < r / 2; ++a) {
        int32_t i0 = s->rope_pairs ? 2 * a : a, i1 = s->rope_pairs ? 2 * a + 1 : a + r / 2;
        double ang = pos * pow(theta, -2.0 * a / r), x0 = x[i0], x1 = x[i1];
        x[i0] = x0 * cos(ang) - x1 * sin(ang);
        x[i1] = x1 * cos(ang) + x0 * sin(ang);
    }
}

/* The published ALiBi slope of head i of h. */
static double naive_slope(int32_t h, int32_t i) {
    int32_t p = 1;
    while (p * 2 <= h) p *= 2;
    return i < p ? pow(2.0, -8.0 * (i + 1) / p) : pow(2.0, -4.0 * (2 * (i - p) + 1) / p);
}

/* When set, naive_forward also writes each row's log-sum-exp here,
   [batch][heads][n] (-inf for a row that sees no key and has no sink). */
static double *naive_lse;

/* out[batch][n][p_o] and (if attn) attn[batch][heads][n][m], in double.
   The shape and sizes must be valid. */
static void naive_forward(const mha_shape *s, const mha_weights *w, int32_t batch, int32_t n, int32_t m,
                          const float *q, const float *k, const float *v, const mha_mask *mask, double *out,
                          double *attn) {
    int32_t H = s->heads, KV = s->kv_heads ? s->kv_heads : s->heads, G = H / KV;
    int32_t pq = s->p_q, pk = s->p_k, pv = s->p_v, pa = s->p_a;
    double scale = s->scale != 0.0f ? (double)s->scale : (double)(1.0f / sqrtf((float)s->p_k));
    double *qp = (double *)malloc(sizeof(double) * (size_t)(H * pq));
    double *kp = (double *)malloc(sizeof(double) * (size_t)(m * KV * pk + 1));
    double *vp = (double *)malloc(sizeof(double) * (size_t)(m * KV * pv + 1));
    double *sc = (double *)malloc(sizeof(double) * (size_t)(m + 1));
    double *cat = (double *)malloc(sizeof(double) * (size_t)(H * pv));
    char *vis = (char *)malloc((size_t)m + 1);
    int32_t b, t, i, j, r, c, a;
    for (b = 0; b < batch; ++b) {
        const float *kb = k + (size_t)b * (size_t)m * (size_t)s->d_k, *vb = v + (size_t)b * (size_t)m * (size_t)s->d_v;
        for (j = 0; j < m; ++j) {
            for (r = 0; r < KV * pk; ++r) {
                double acc = w->b_k ? (double)w->b_k[r] : 0.0;
                for (c = 0; c < s->d_k; ++c) acc += (double)((const float *)w->w_k)[(size_t)r * (size_t)s->d_k + (size_t)c] * kb[(size_t)j * (size_t)s->d_k + (size_t)c];
                kp[(size_t)j * (size_t)(KV * pk) + (size_t)r] = acc;
            }
            for (r = 0; r < KV * pv; ++r) {
                double acc = w->b_v ? (double)w->b_v[r] : 0.0;
                for (c = 0; c < s->d_v; ++c) acc += (double)((const float *)w->w_v)[(size_t)r * (size_t)s->d_v + (size_t)c] * vb[(size_t)j * (size_t)s->d_v + (size_t)c];
                vp[(size_t)j * (size_t)(KV * pv) + (size_t)r] = acc;
            }
            for (r = 0; r < KV && s->rope_dim; ++r) /* key j at position j */
                naive_rope(s, kp + (size_t)j * (size_t)(KV * pk) + (size_t)(r * pk), (double)j);
        }
        for (t = 0; t < n; ++t) {
            size_t row = (size_t)b * (size_t)n + (size_t)t;
            const float *qt = q + row * (size_t)s->d_q;
            for (r = 0; r < H * pq; ++r) {
                double acc = w->b_q ? (double)w->b_q[r] : 0.0;
                for (c = 0; c < s->d_q; ++c) acc += (double)((const float *)w->w_q)[(size_t)r * (size_t)s->d_q + (size_t)c] * qt[c];
                qp[r] = acc;
            }
            for (r = 0; r < H && s->rope_dim; ++r) /* query t at t + causal_offset */
                naive_rope(s, qp + r * pq, (double)t + (mask ? (double)mask->causal_offset : 0.0));
            for (j = 0; j < m; ++j) {
                int ok = 1;
                if (mask && mask->valid_lens) {
                    int32_t len = mask->valid_lens[mask->valid_lens_per_query ? row : (size_t)b];
                    ok &= j < len;
                }
                if (mask && mask->causal) ok &= (int64_t)j <= (int64_t)t + (int64_t)mask->causal_offset;
                if (mask && mask->keep) ok &= mask->keep[row * (size_t)m + (size_t)j] != 0;
                vis[j] = (char)ok;
            }
            for (i = 0; i < H; ++i) {
                int32_t g = i / G, any = 0;
                double mx = 0.0, sum = 0.0;
                for (j = 0; j < m; ++j) {
                    const double *kj = kp + (size_t)j * (size_t)(KV * pk) + (size_t)(g * pk);
                    double e = 0.0;
                    if (!vis[j]) continue;
                    if (s->score == MHA_SCORE_DOT) {
                        for (a = 0; a < pk; ++a) e += qp[i * pq + a] * kj[a];
                        e *= scale;
                    } else {
                        for (a = 0; a < pa; ++a) {
                            double x = 0.0;
                            for (c = 0; c < pq; ++c)
                                x += (double)w->a_q[((size_t)i * (size_t)pa + (size_t)a) * (size_t)pq + (size_t)c] * qp[i * pq + c];
                            for (c = 0; c < pk; ++c)
                                x += (double)w->a_k[((size_t)i * (size_t)pa + (size_t)a) * (size_t)pk + (size_t)c] * kj[c];
                            e += (double)w->a_v[(size_t)i * (size_t)pa + (size_t)a] * tanh(x);
                        }
                    }
                    if (s->softcap != 0.0f) e = (double)s->softcap * tanh(e / (double)s->softcap);
                    if (s->alibi)
                        e -= naive_slope(H, i) * ((double)t + (mask ? (double)mask->causal_offset : 0.0) - (double)j);
                    if (mask && mask->bias) e += (double)mask->bias[row * (size_t)m + (size_t)j];
                    sc[j] = e;
                    if (!any || e > mx) mx = e;
                    any = 1;
                }
                if (w->sinks && (!any || (double)w->sinks[i] > mx)) mx = (double)w->sinks[i];
                for (j = 0; j < m; ++j) {
                    sc[j] = vis[j] ? exp(sc[j] - mx) : 0.0;
                    sum += sc[j];
                }
                if (w->sinks) sum += exp((double)w->sinks[i] - mx);
                if (naive_lse)
                    naive_lse[((size_t)b * (size_t)H + (size_t)i) * (size_t)n + (size_t)t] =
                        any || w->sinks ? mx + log(sum) : -HUGE_VAL;
                for (a = 0; a < pv; ++a) cat[i * pv + a] = 0.0;
                for (j = 0; j < m; ++j) {
                    double p = any ? sc[j] / sum : 0.0;
                    if (attn) attn[(((size_t)b * (size_t)H + (size_t)i) * (size_t)n + (size_t)t) * (size_t)m + (size_t)j] = p;
                    for (a = 0; a < pv; ++a) cat[i * pv + a] += p * vp[(size_t)j * (size_t)(KV * pv) + (size_t)(g * pv + a)];
                }
            }
            for (r = 0; r < s->p_o; ++r) {
                double acc = w->b_o ? (double)w->b_o[r] : 0.0;
                for (c = 0; c < H * pv; ++c) acc += (double)((const float *)w->w_o)[(size_t)r * (size_t)(H * pv) + (size_t)c] * cat[c];
                out[row * (size_t)s->p_o + (size_t)r] = acc;
            }
        }
    }
    free(qp); free(kp); free(vp); free(sc); free(cat); free(vis);
}
#endif
