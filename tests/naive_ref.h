/* A deliberately plain double-precision attention, written apart from mha.h's
   kernels, used by the fuzzer and the hostile-input tests as a second opinion.
   It follows the README's definition literally and allocates freely. Masks use
   64-bit arithmetic for the causal bound. Fully masked rows give zero weights. */
#ifndef NAIVE_REF_H
#define NAIVE_REF_H
#include <math.h>
#include <stdlib.h>

#include "../mha.h"

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
                for (c = 0; c < s->d_k; ++c) acc += (double)w->w_k[(size_t)r * (size_t)s->d_k + (size_t)c] * kb[(size_t)j * (size_t)s->d_k + (size_t)c];
                kp[(size_t)j * (size_t)(KV * pk) + (size_t)r] = acc;
            }
            for (r = 0; r < KV * pv; ++r) {
                double acc = w->b_v ? (double)w->b_v[r] : 0.0;
                for (c = 0; c < s->d_v; ++c) acc += (double)w->w_v[(size_t)r * (size_t)s->d_v + (size_t)c] * vb[(size_t)j * (size_t)s->d_v + (size_t)c];
                vp[(size_t)j * (size_t)(KV * pv) + (size_t)r] = acc;
            }
        }
        for (t = 0; t < n; ++t) {
            size_t row = (size_t)b * (size_t)n + (size_t)t;
            const float *qt = q + row * (size_t)s->d_q;
            for (r = 0; r < H * pq; ++r) {
                double acc = w->b_q ? (double)w->b_q[r] : 0.0;
                for (c = 0; c < s->d_q; ++c) acc += (double)w->w_q[(size_t)r * (size_t)s->d_q + (size_t)c] * qt[c];
                qp[r] = acc;
            }
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
                    if (mask && mask->bias) e += (double)mask->bias[row * (size_t)m + (size_t)j];
                    sc[j] = e;
                    if (!any || e > mx) mx = e;
                    any = 1;
                }
                for (j = 0; j < m; ++j) {
                    sc[j] = vis[j] ? exp(sc[j] - mx) : 0.0;
                    sum += sc[j];
                }
                for (a = 0; a < pv; ++a) cat[i * pv + a] = 0.0;
                for (j = 0; j < m; ++j) {
                    double p = any ? sc[j] / sum : 0.0;
                    if (attn) attn[(((size_t)b * (size_t)H + (size_t)i) * (size_t)n + (size_t)t) * (size_t)m + (size_t)j] = p;
                    for (a = 0; a < pv; ++a) cat[i * pv + a] += p * vp[(size_t)j * (size_t)(KV * pv) + (size_t)(g * pv + a)];
                }
            }
            for (r = 0; r < s->p_o; ++r) {
                double acc = w->b_o ? (double)w->b_o[r] : 0.0;
                for (c = 0; c < H * pv; ++c) acc += (double)w->w_o[(size_t)r * (size_t)(H * pv) + (size_t)c] * cat[c];
                out[row * (size_t)s->p_o + (size_t)r] = acc;
            }
        }
    }
    free(qp); free(kp); free(vp); free(sc); free(cat); free(vis);
}
#endif
