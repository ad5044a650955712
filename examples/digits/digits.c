/* A digit classifier trained in PyTorch (examples/digits/train.py), run in C: every one of the
   1797 8x8 images of scikit-learn's digits through an encoder block and an attention pooling,
   the attention by mha_forward, the rest written out below. Checks that the predicted class
   equals PyTorch's on every image and that the logits agree within 1e-4 (1 + max |logit|), and
   prints the accuracy on the 360 test images.

   Builds on the desktop (make examples: the reference and the fast path) and as a Cortex-M4F
   image under QEMU (make cross-test). Its memory is static: no heap.

   With -DDG_Q8 both attention layers run in int8 (mha_forward_q8, weights and scales from
   examples/digits/quantize.py's post-training calibration, digits_q8.h), the rest in float:
   it then checks that the accuracy on the test images stays within a point of PyTorch's and
   prints how many predictions changed. With -DDG_Q16 (and DG_Q8) the same in 16x8
   (mha_forward_q16, int16 activations; quantize.py --q16), where every class must stay. */
#include <math.h>
#include <stdio.h>

#define MHA_IMPLEMENTATION
#include "mha.h"
#include "digits_model.h"
#include "model_util.h" /* linear, layer_norm */

#define WS_BYTES 65536 /* both paths' workspace for these shapes, checked at run time */
static unsigned char ws[WS_BYTES];

#ifdef DG_Q8
#include "digits_q8.h"
/* An attention layer in int8: its weights, parameters and rescales (mha_q8_prepare). */
#ifdef DG_Q16 /* 16x8: int16 activations, int64 biases */
typedef int16_t dg_act;
typedef int64_t dg_bias;
typedef mha_q16_weights dg_weights;
#define dg_prepare mha_q16_prepare
#define dg_forward mha_forward_q16
#define DG_LO (-32768.0f)
#define DG_HI 32767.0f
#define DG_KIND "16x8"
#else
typedef int8_t dg_act;
typedef int32_t dg_bias;
typedef mha_q8_weights dg_weights;
#define dg_prepare mha_q8_prepare
#define dg_forward mha_forward_q8
#define DG_LO (-128.0f)
#define DG_HI 127.0f
#define DG_KIND "int8"
#endif
typedef struct dg_q8_layer {
    dg_weights w;
    mha_q8_params p;
    const float *scales; /* in_q, in_k, in_v, q, k, v, heads, out */
    mha_q8_rescale rows[4 * DG_D];
} dg_q8_layer;
static dg_q8_layer dg_q8_attn, dg_q8_pool;

static mha_status dg_q8_init(dg_q8_layer *l, const mha_shape *s, const int8_t *const w[4], const dg_bias *const b[4],
                             const float *const sw[4], const float *scales, const int32_t *zeros) {
    mha_q8_scales sc;
    l->w.w_q = w[0]; l->w.w_k = w[1]; l->w.w_v = w[2]; l->w.w_o = w[3];
    l->w.b_q = b[0]; l->w.b_k = b[1]; l->w.b_v = b[2]; l->w.b_o = b[3];
    sc.in_q = scales[0]; sc.in_k = scales[1]; sc.in_v = scales[2]; sc.q = scales[3];
    sc.k = scales[4]; sc.v = scales[5]; sc.heads = scales[6]; sc.out = scales[7];
    sc.w_q = sw[0]; sc.w_k = sw[1]; sc.w_v = sw[2]; sc.w_o = sw[3];
    l->p.zero_in_q = zeros[0]; l->p.zero_in_k = zeros[1]; l->p.zero_in_v = zeros[2]; l->p.zero_q = zeros[3];
    l->p.zero_k = zeros[4]; l->p.zero_v = zeros[5]; l->p.zero_heads = zeros[6]; l->p.zero_out = zeros[7];
    l->scales = scales;
    return dg_prepare(s, &sc, &l->w, &l->p, l->rows, sizeof l->rows / sizeof l->rows[0]);
}

static dg_act dg_q8_of(float x, float scale, int32_t zero) {
    float v = x / scale + (float)zero;
    v = v < DG_LO ? DG_LO : v > DG_HI ? DG_HI : v;
    return (dg_act)(v < 0.0f ? v - 0.5f : v + 0.5f); /* to nearest, ties away from zero */
}

/* out[n][p_o] (float) = the int8 layer on float queries [n][d] and keys = values [m][d]:
   the inputs quantised with the layer's scales, the output dequantised. */
static mha_status dg_q8_forward(const dg_q8_layer *l, const mha_shape *s, int32_t n, int32_t m, const float *q,
                                const float *kv, float *out) {
    dg_act q8[DG_N * DG_D], kv8[DG_N * DG_D], out8[DG_N * DG_D];
    mha_status st;
    int i;
    for (i = 0; i < n * s->d_q; ++i) q8[i] = dg_q8_of(q[i], l->scales[0], l->p.zero_in_q);
    for (i = 0; i < m * s->d_k; ++i) kv8[i] = dg_q8_of(kv[i], l->scales[1], l->p.zero_in_k);
    st = dg_forward(s, &l->w, &l->p, 1, n, m, q8, kv8, kv8, NULL, out8, ws, WS_BYTES);
    for (i = 0; st == MHA_OK && i < n * s->p_o; ++i) out[i] = l->scales[7] * (float)(out8[i] - l->p.zero_out);
    return st;
}
/* Both layers' rescales, made once. */
static mha_status dg_q8_setup(void) {
    const int8_t *const wa[4] = {dg8_attn_w_q, dg8_attn_w_k, dg8_attn_w_v, dg8_attn_w_o};
    const dg_bias *const ba[4] = {dg8_attn_b_q, dg8_attn_b_k, dg8_attn_b_v, dg8_attn_b_o};
    const float *const sa[4] = {dg8_attn_sw_q, dg8_attn_sw_k, dg8_attn_sw_v, dg8_attn_sw_o};
    const int8_t *const wp[4] = {dg8_pool_w_q, dg8_pool_w_k, dg8_pool_w_v, dg8_pool_w_o};
    const dg_bias *const bp[4] = {dg8_pool_b_q, dg8_pool_b_k, dg8_pool_b_v, dg8_pool_b_o};
    const float *const sp[4] = {dg8_pool_sw_q, dg8_pool_sw_k, dg8_pool_sw_v, dg8_pool_sw_o};
    mha_status st = dg_q8_init(&dg_q8_attn, &dg_attn_shape, wa, ba, sa, dg8_attn_scales, dg8_attn_zeros);
    if (st == MHA_OK) st = dg_q8_init(&dg_q8_pool, &dg_pool_shape, wp, bp, sp, dg8_pool_scales, dg8_pool_zeros);
#ifdef DG_Q16
    if (st == MHA_OK && mha_q16_workspace_size(&dg_attn_shape, 1, DG_N, DG_N) > WS_BYTES) st = MHA_ERR_WORKSPACE;
#endif
    return st == MHA_OK && mha_q8_workspace_size(&dg_attn_shape, 1, DG_N, DG_N) > WS_BYTES ? MHA_ERR_WORKSPACE : st;
}
#define DG_ATTN(out) dg_q8_forward(&dg_q8_attn, &dg_attn_shape, DG_N, DG_N, a, a, out)
#define DG_POOL(out) dg_q8_forward(&dg_q8_pool, &dg_pool_shape, 1, DG_N, dg_query, a, out)
#else
#define DG_ATTN(out) \
    mha_forward(&dg_attn_shape, &dg_attn_weights, 1, DG_N, DG_N, a, a, a, NULL, out, NULL, ws, WS_BYTES)
#define DG_POOL(out) mha_forward(&dg_pool_shape, &dg_pool_weights, 1, 1, DG_N, dg_query, a, a, NULL, out, NULL, ws, \
                                 WS_BYTES)
static mha_status dg_q8_setup(void) { return MHA_OK; }
#endif

/* The model on image `img`: logits[10]. MHA_OK, or the status of an attention call. */
static mha_status classify(int img, float *logits) {
    float x[DG_N * 8], t[DG_N * DG_D], a[DG_N * DG_D], att[DG_N * DG_D], f[DG_N * DG_FF], pooled[DG_PO];
    mha_status st;
    int i;
    for (i = 0; i < DG_N * 8; ++i) x[i] = (float)(dg_pixels[img][i] - 'a') / 16.0f;
    linear(x, DG_N, 8, dg_embed_w, dg_embed_b, DG_D, t); /* 8 row tokens, embedded */
    for (i = 0; i < DG_N * DG_D; ++i) t[i] += dg_pos[i];
    layer_norm(t, DG_N, DG_D, dg_ln1_w, dg_ln1_b, DG_LN_EPS, a); /* t += self-attention(ln1 t) */
    st = DG_ATTN(att);
    if (st != MHA_OK) return st;
    for (i = 0; i < DG_N * DG_D; ++i) t[i] += att[i];
    layer_norm(t, DG_N, DG_D, dg_ln2_w, dg_ln2_b, DG_LN_EPS, a); /* t += ff2 relu(ff1 ln2 t) */
    linear(a, DG_N, DG_D, dg_ff1_w, dg_ff1_b, DG_FF, f);
    for (i = 0; i < DG_N * DG_FF; ++i) f[i] = f[i] > 0.0f ? f[i] : 0.0f;
    linear(f, DG_N, DG_FF, dg_ff2_w, dg_ff2_b, DG_D, att);
    for (i = 0; i < DG_N * DG_D; ++i) t[i] += att[i];
    layer_norm(t, DG_N, DG_D, dg_ln3_w, dg_ln3_b, DG_LN_EPS, a); /* pooling: the learned query over the tokens */
    st = DG_POOL(pooled);
    if (st != MHA_OK) return st;
    for (i = 0; i < DG_PO; ++i) pooled[i] = pooled[i] > 0.0f ? pooled[i] : 0.0f;
    linear(pooled, 1, DG_PO, dg_cls_w, dg_cls_b, 10, logits);
    return MHA_OK;
}

static int argmax(const float *v) {
    int i, k = 0;
    for (i = 1; i < 10; ++i)
        if (v[i] > v[k]) k = i;
    return k;
}

#ifdef DG_COUNT
/* Instruction counting (make cross-test, tests/cross/count_insns.py): the first DG_COUNT images
   are classified between calls of this marker, and nothing else is checked. */
__attribute__((noinline)) void dg_mark(void) { __asm__ volatile(""); }
int main(void) {
    float logits[10];
    int img;
    if (dg_q8_setup() != MHA_OK) return 1;
    for (img = 0; img < DG_COUNT; ++img) {
        dg_mark();
        if (classify(img, logits) != MHA_OK) return 1;
    }
    dg_mark();
    printf("digits: %d images classified between markers\n", DG_COUNT);
    return 0;
}
#else
int main(void) {
    int img, i, same = 0, right_test = 0, tests = 0, right_all = 0, bad = 0, worst_img = 0, passed = 0, failed = 0;
    double worst = 0.0;
    if (mha_workspace_size(&dg_attn_shape, 1, DG_N, DG_N) > WS_BYTES ||
        mha_workspace_size(&dg_pool_shape, 1, 1, DG_N) > WS_BYTES) {
        printf("digits: the workspace needs more than %d bytes\n0 passed, 1 failed\n", WS_BYTES);
        return 1;
    }
    if (dg_q8_setup() != MHA_OK) {
        printf("digits: the int8 layers' set-up failed\n0 passed, 1 failed\n");
        return 1;
    }
    for (img = 0; img < DG_IMAGES; ++img) {
        float logits[10], top = 0.0f;
        const float *ref = dg_logits_torch + img * 10;
        int k;
        if (classify(img, logits) != MHA_OK) {
            ++bad;
            continue;
        }
        for (i = 0; i < 10; ++i) top = fabsf(ref[i]) > top ? fabsf(ref[i]) : top;
        for (i = 0; i < 10; ++i) {
            double e = fabs((double)logits[i] - (double)ref[i]) / (1e-4 * (1.0 + (double)top));
            if (e > worst) worst = e, worst_img = img;
        }
        k = argmax(logits);
        same += k == argmax(ref);
        right_all += k == dg_labels[img] - '0';
        if (dg_split[img] == 't') {
            ++tests;
            right_test += k == dg_labels[img] - '0';
        }
    }
#ifdef DG_Q8
    printf("digits (" DG_KIND " attention): the class agrees with PyTorch's float model on %d of %d images; largest "
           "logit difference %.3g (1 + max |logit|) (image %d)\n", same, DG_IMAGES, worst * 1e-4, worst_img);
    printf("digits (" DG_KIND " attention): accuracy %.2f %% on the %d test images (PyTorch, float: %.2f %%), %.2f %% "
           "on all %d\n", 100.0 * right_test / tests, tests, DG_TORCH_TEST_ACCURACY, 100.0 * right_all / DG_IMAGES,
           DG_IMAGES);
    if (bad == 0 && 100.0 * right_test / tests >= DG_TORCH_TEST_ACCURACY - 1.0) ++passed; else ++failed;
#ifdef DG_Q16
    if (bad == 0 && same == DG_IMAGES) ++passed; else ++failed; /* every class kept */
#else
    if (bad == 0 && same >= DG_IMAGES - DG_IMAGES / 100) ++passed; else ++failed; /* 99 % of the classes kept */
#endif
#else
    printf("digits (%s path): the class agrees with PyTorch on %d of %d images; worst logit difference %.3g of the "
           "tolerance 1e-4 (1 + max |logit|) (image %d)\n",
           mha_build_info().fast ? "fast" : "reference", same, DG_IMAGES, worst, worst_img);
    printf("digits: accuracy %.2f %% on the %d test images (PyTorch: %.2f %%), %.2f %% on all %d\n",
           100.0 * right_test / tests, tests, DG_TORCH_TEST_ACCURACY, 100.0 * right_all / DG_IMAGES, DG_IMAGES);
    if (bad == 0 && same == DG_IMAGES) ++passed; else ++failed;
    if (bad == 0 && worst <= 1.0) ++passed; else ++failed;
#endif
    printf("%d passed, %d failed\n", passed, failed);
    return failed != 0;
}
#endif
