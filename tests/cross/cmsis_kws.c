/* The keyword-spotting layer of tests/cross/kws_count.c (d 64, 4 heads of 16,
   self-attention over n = m = 49 frames, int8) two ways on a Cortex-M core,
   for tests/cross/peers_mcu.py (make peers-mcu) to count under QEMU:
     - mha_forward_q8, one call;
     - the same layer composed from Arm CMSIS-NN's kernels the way TensorFlow
       Lite Micro runs a converted attention layer: fully connected for Q, K
       and V, transposes to heads first, a batch matmul for the scores (int8,
       their scale calibrated), softmax per row (int8 probabilities, scale
       1/256, zero point -128), a batch matmul with the values, a transpose
       back and the output's fully connected; once with per-tensor and once
       with per-channel requantisation of the fully connected layers.
   A call of kws_mark() separates the counted parts (set-up is not counted:
   the rescales, CMSIS-NN's kernel sums, which TFLite Micro makes at Prepare).
   Both outputs are compared with the float layer (the int8 weights and inputs
   dequantised, attention in float, quantised with the output's scale): the
   share within 0, 1, 2 and 3+ LSB, and checked (every output within 16 LSB,
   at least half within 1: a wrong composition fails). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "../../mha.h"
#include "arm_nnfunctions.h"
#include "kws_scales.h"

#define D 64
#define H 4
#define P 16
#define N 49
#define HP (H * P)

static int8_t wgt[4][HP * D], xin[N * D], out_mha[N * D], out_pt[N * D], out_pc[N * D];
static int8_t qp[N * HP], kp[N * HP], vp[N * HP], qt[N * HP], kt[N * HP], vt[N * HP], ht[N * HP], hn[N * HP];
static int8_t sc[H * N * N], pr[H * N * N];
static int32_t ksum[4][HP], bmm_buf[N], chan_mult[4][HP], chan_shift[4][HP];
static float wsc[4][HP], fq[N * HP], fk[N * HP], fv[N * HP], fh[N * HP], fo[N * D];
static unsigned char ws[32768];
static mha_q8_rescale rows[4 * HP];

__attribute__((noinline)) void kws_mark(void);
__attribute__((noinline)) void kws_mark(void) { __asm__ volatile(""); }

/* the inputs and weights of kws_count.c: the same made-up values, quantised the same way */
static void make_inputs(void) {
    uint32_t seed;
    int i, k;
    for (k = 0; k < 5; ++k) {
        int count = k < 4 ? HP * D : N * D;
        seed = (uint32_t)k + 1u;
        for (i = 0; i < count; ++i) {
            float v;
            seed = seed * 1664525u + 1013904223u;
            v = (float)(seed >> 8) * (2.0f / 16777216.0f) - 1.0f;
            if (k < 4) wgt[k][i] = (int8_t)(0.2f * v * 600.0f);
            else xin[i] = (int8_t)(v * 120.0f);
        }
    }
}

/* The float layer of the int8 values: x / 120, W (0.2 / 127) */
static float fdot(const float *a, const float *b, int n) {
    float s = 0.0f;
    int i;
    for (i = 0; i < n; ++i) s += a[i] * b[i];
    return s;
}
static void float_layer(float *max_score) {
    static float xf[N * D], wf[4][HP * D];
    float row[N];
    int i, j, k, a;
    *max_score = 0.0f;
    for (i = 0; i < N * D; ++i) xf[i] = (float)xin[i] / 120.0f;
    for (k = 0; k < 4; ++k)
        for (i = 0; i < HP * D; ++i) wf[k][i] = (float)wgt[k][i] * (0.2f / 127.0f);
    for (j = 0; j < N; ++j)
        for (i = 0; i < HP; ++i) {
            fq[j * HP + i] = fdot(wf[0] + i * D, xf + j * D, D);
            fk[j * HP + i] = fdot(wf[1] + i * D, xf + j * D, D);
            fv[j * HP + i] = fdot(wf[2] + i * D, xf + j * D, D);
        }
    for (k = 0; k < H; ++k)
        for (i = 0; i < N; ++i) {
            float mx = -1e30f, sum = 0.0f;
            for (j = 0; j < N; ++j) {
                row[j] = fdot(fq + i * HP + k * P, fk + j * HP + k * P, P) * 0.25f; /* 1/sqrt(16) */
                if (fabsf(row[j]) > *max_score) *max_score = fabsf(row[j]);
                if (row[j] > mx) mx = row[j];
            }
            for (j = 0; j < N; ++j) sum += row[j] = expf(row[j] - mx);
            for (a = 0; a < P; ++a) {
                float acc = 0.0f;
                for (j = 0; j < N; ++j) acc += row[j] * fv[j * HP + k * P + a];
                fh[i * HP + k * P + a] = acc / sum;
            }
        }
    for (i = 0; i < N; ++i)
        for (a = 0; a < D; ++a) fo[i * D + a] = fdot(wf[3] + a * HP, fh + i * HP, HP);
}

/* TFLite's softmax input scaling (PreprocessSoftmaxScaling, CalculateInputRadius) for 5 integer bits */
static int softmax_params(float input_scale, int32_t *mult, int32_t *shift, int32_t *diff_min) {
    mha_q8_rescale r;
    if (mha_q8_rescale_make((double)input_scale * (double)(1 << 26), &r) != MHA_OK || r.shift < 0) return 0;
    *mult = r.multiplier;
    *shift = r.shift;
    *diff_min = -(int32_t)floor(31.0 * (double)(1 << 26) / (double)(1 << r.shift));
    return 1;
}

static const cmsis_nn_activation clamp8 = {-128, 127};

/* Q, K or V (k 0..2) or out (k 3) by CMSIS-NN's fully connected layer */
static int fc(int k, int per_channel, const int8_t *x, int8_t *y, int rows_in, int depth) {
    cmsis_nn_context ctx;
    cmsis_nn_fc_params fp;
    cmsis_nn_dims in = {0, 1, 1, 0}, filt = {0, 1, 1, 0}, bias = {1, 1, 1, 0}, outd = {0, 1, 1, 0};
    memset(&fp, 0, sizeof fp);
    fp.activation = clamp8;
    ctx.buf = ksum[k];
    ctx.size = (int32_t)sizeof ksum[k];
    in.n = rows_in;
    in.c = depth;
    filt.n = depth;
    filt.c = k < 3 ? HP : D;
    bias.c = filt.c;
    outd.n = rows_in;
    outd.c = filt.c;
    if (per_channel) {
        cmsis_nn_per_channel_quant_params qc;
        qc.multiplier = chan_mult[k];
        qc.shift = chan_shift[k];
        return arm_fully_connected_per_channel_s8(&ctx, &fp, &qc, &in, x, &filt, wgt[k], &bias, NULL, &outd, y) ==
               ARM_CMSIS_NN_SUCCESS;
    } else {
        cmsis_nn_per_tensor_quant_params qt1;
        qt1.multiplier = chan_mult[k][0];
        qt1.shift = chan_shift[k][0];
        return arm_fully_connected_s8(&ctx, &fp, &qt1, &in, x, &filt, wgt[k], &bias, NULL, &outd, y) ==
               ARM_CMSIS_NN_SUCCESS;
    }
}

/* [1][a][b][c] permuted by perm into y */
static int transpose(const int8_t *x, int8_t *y, int a, int b, int c, const uint32_t *perm) {
    const cmsis_nn_dims in = {1, a, b, c};
    const int32_t d[4] = {1, a, b, c};
    const cmsis_nn_dims outd = {1, d[perm[1]], d[perm[2]], d[perm[3]]};
    const cmsis_nn_transpose_params tp = {4, perm};
    return arm_transpose_s8(x, y, &in, &outd, &tp) == ARM_CMSIS_NN_SUCCESS;
}

static int bmm(const int8_t *lhs, int lhs_rows, const int8_t *rhs, int rhs_rows, int cols, int32_t lhs_offset,
               const mha_q8_rescale *r, int8_t *y) {
    cmsis_nn_context ctx;
    const cmsis_nn_bmm_params bp = {0, 0, {lhs_offset, 0, 0, {-128, 127}}};
    const cmsis_nn_dims l = {1, H, lhs_rows, cols}, rr = {1, H, rhs_rows, cols}, o = {1, H, lhs_rows, rhs_rows};
    cmsis_nn_per_tensor_quant_params q;
    ctx.buf = bmm_buf;
    ctx.size = (int32_t)sizeof bmm_buf;
    q.multiplier = r->multiplier;
    q.shift = r->shift;
    return arm_batch_matmul_s8(&ctx, &bp, &q, &l, lhs, &rr, rhs, &o, y) == ARM_CMSIS_NN_SUCCESS;
}

/* one CMSIS-NN composition of the layer; marks between its stages when `marks` */
static int composition(int per_channel, int marks, const mha_q8_rescale *score_r, const mha_q8_rescale *head_r,
                       const int32_t smx[3], int8_t *y) {
    static const uint32_t heads_first[4] = {0, 2, 1, 3}, values_t[4] = {0, 2, 3, 1};
    int ok = 1;
    ok &= fc(0, per_channel, xin, qp, N, D);
    if (marks) kws_mark();
    ok &= fc(1, per_channel, xin, kp, N, D);
    if (marks) kws_mark();
    ok &= fc(2, per_channel, xin, vp, N, D);
    if (marks) kws_mark();
    ok &= transpose(qp, qt, N, H, P, heads_first);                   /* [n][h][p] -> [h][n][p] */
    ok &= transpose(kp, kt, N, H, P, heads_first);
    ok &= transpose(vp, vt, N, H, P, values_t);                      /* [m][h][p] -> [h][p][m] */
    if (marks) kws_mark();
    ok &= bmm(qt, N, kt, N, P, 0, score_r, sc);                      /* scores [h][n][m] */
    if (marks) kws_mark();
    arm_softmax_s8(sc, H * N, N, smx[0], smx[1], smx[2], pr);         /* probabilities, zero point -128 */
    if (marks) kws_mark();
    ok &= bmm(pr, N, vt, P, N, 128, head_r, ht);                      /* heads [h][n][p] */
    if (marks) kws_mark();
    ok &= transpose(ht, hn, H, N, P, heads_first);                   /* -> [n][h][p] */
    if (marks) kws_mark();
    ok &= fc(3, per_channel, hn, y, N, HP);
    return ok;
}

static void compare(const char *name, const int8_t *y, int *ok) {
    int hist[4] = {0, 0, 0, 0}, i, worst = 0;
    for (i = 0; i < N * D; ++i) {
        float want = roundf(fo[i] / 0.02f);
        int e;
        want = want > 127.0f ? 127.0f : want < -128.0f ? -128.0f : want;
        e = (int)fabsf((float)y[i] - want);
        hist[e > 3 ? 3 : e]++;
        if (e > worst) worst = e;
    }
    printf("%s against the float layer, %d outputs: |error| 0 LSB %.2f %%, 1 LSB %.2f %%, 2 LSB %.2f %%, 3+ LSB "
           "%.2f %%, worst %d\n",
           name, N * D, 100.0 * hist[0] / (N * D), 100.0 * hist[1] / (N * D), 100.0 * hist[2] / (N * D),
           100.0 * hist[3] / (N * D), worst);
    *ok &= worst <= 16 && 2 * (hist[0] + hist[1]) >= N * D;
}

int main(void) {
    mha_shape s = MHA_INIT;
    mha_q8_weights w8 = MHA_INIT;
    mha_q8_params p8 = MHA_INIT;
    mha_q8_scales sc8;
    mha_q8_rescale score_r, head_r;
    int32_t smx[3];
    float max_score, s_scores;
    size_t fw;
    int i, k, ok = 1, same = 0, diff_max = 0;
    mha_status st;
    s.heads = H; s.d_q = s.d_k = s.d_v = D; s.p_q = s.p_k = s.p_v = P; s.p_o = D;
    make_inputs();
    float_layer(&max_score);
    kws_scales(&sc8, wsc);
    w8.w_q = wgt[0]; w8.w_k = wgt[1]; w8.w_v = wgt[2]; w8.w_o = wgt[3];
    st = mha_q8_prepare(&s, &sc8, &w8, &p8, rows, 4 * HP);
    fw = mha_q8_workspace_size(&s, 1, N, N);
    if (st != MHA_OK || fw > sizeof ws) {
        printf("cmsis_kws: mha_q8_prepare %s, workspace %u\n0 passed, 1 failed\n", mha_status_string(st),
               (unsigned)fw);
        return 1;
    }
    /* CMSIS-NN's set-up: the fully connected layers' rescales (per channel: the same rows as mha.h's), their
       kernel sums (Helium: the weights' row sums times the input offset, 0 here), the scores' scale (the
       float layer's largest score over 127), the batch matmuls' and the softmax's rescales */
    for (k = 0; k < 4; ++k) {
        for (i = 0; i < (k < 3 ? HP : D); ++i) {
            chan_mult[k][i] = rows[k * HP + i].multiplier;
            chan_shift[k][i] = rows[k * HP + i].shift;
        }
        arm_vector_sum_s8(ksum[k], k < 3 ? D : HP, k < 3 ? HP : D, wgt[k], 0, 0, NULL);
    }
    s_scores = max_score / 127.0f;
    ok &= mha_q8_rescale_make(0.03 * 0.03 * 0.25 / (double)s_scores, &score_r) == MHA_OK;
    ok &= mha_q8_rescale_make(0.03 / 256.0 / 0.03, &head_r) == MHA_OK;
    ok &= softmax_params(s_scores, &smx[0], &smx[1], &smx[2]);
    kws_mark();
    st = mha_forward_q8(&s, &w8, &p8, 1, N, N, xin, xin, xin, NULL, out_mha, ws, fw);
    kws_mark();
    ok &= composition(0, 1, &score_r, &head_r, smx, out_pt);
    kws_mark();
    ok &= composition(1, 0, &score_r, &head_r, smx, out_pc);
    kws_mark();
    ok &= st == MHA_OK;
    for (i = 0; i < N * D; ++i) {
        int e = out_mha[i] - out_pt[i];
        e = e < 0 ? -e : e;
        same += e == 0;
        if (e > diff_max) diff_max = e;
        ok &= out_pt[i] == out_pc[i]; /* equal rows' rescales: per channel = per tensor */
    }
    printf("cmsis_kws: mha_forward_q8 %s; CMSIS-NN composition per tensor and per channel %s, equal %s; "
           "scores' scale %g (largest float score %g)\n",
           mha_status_string(st), ok ? "ok" : "FAILED", ok ? "yes" : "no", (double)s_scores, (double)max_score);
    printf("mha_forward_q8 against the composition: %d of %d outputs equal, at most %d LSB apart\n", same, N * D,
           diff_max);
    compare("mha_forward_q8", out_mha, &ok);
    compare("CMSIS-NN composition", out_pt, &ok);
    printf("%d passed, %d failed\n", ok, !ok);
    return !ok;
}
