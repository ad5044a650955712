/* A digit classifier trained in PyTorch (examples/digits/train.py), run in C: every one of the
   1797 8x8 images of scikit-learn's digits through an encoder block and an attention pooling,
   the attention by mha_forward, the rest written out below. Checks that the predicted class
   equals PyTorch's on every image and that the logits agree within 1e-4 (1 + max |logit|), and
   prints the accuracy on the 360 test images.

   Builds on the desktop (make examples: the reference and the fast path) and as a Cortex-M4F
   image under QEMU (make cross-test). Its memory is static: no heap. */
#include <math.h>
#include <stdio.h>

#define MHA_IMPLEMENTATION
#include "mha.h"
#include "digits_model.h"
#include "model_util.h" /* linear, layer_norm */

#define WS_BYTES 65536 /* both paths' workspace for these shapes, checked at run time */
static unsigned char ws[WS_BYTES];

/* The model on image `img`: logits[10]. MHA_OK, or the status of an attention call. */
static mha_status classify(int img, float *logits) {
    float x[DG_N * 8], t[DG_N * DG_D], a[DG_N * DG_D], att[DG_N * DG_D], f[DG_N * DG_FF], pooled[DG_PO];
    mha_status st;
    int i;
    for (i = 0; i < DG_N * 8; ++i) x[i] = (float)(dg_pixels[img][i] - 'a') / 16.0f;
    linear(x, DG_N, 8, dg_embed_w, dg_embed_b, DG_D, t); /* 8 row tokens, embedded */
    for (i = 0; i < DG_N * DG_D; ++i) t[i] += dg_pos[i];
    layer_norm(t, DG_N, DG_D, dg_ln1_w, dg_ln1_b, DG_LN_EPS, a); /* t += self-attention(ln1 t) */
    st = mha_forward(&dg_attn_shape, &dg_attn_weights, 1, DG_N, DG_N, a, a, a, NULL, att, NULL, ws, WS_BYTES);
    if (st != MHA_OK) return st;
    for (i = 0; i < DG_N * DG_D; ++i) t[i] += att[i];
    layer_norm(t, DG_N, DG_D, dg_ln2_w, dg_ln2_b, DG_LN_EPS, a); /* t += ff2 relu(ff1 ln2 t) */
    linear(a, DG_N, DG_D, dg_ff1_w, dg_ff1_b, DG_FF, f);
    for (i = 0; i < DG_N * DG_FF; ++i) f[i] = f[i] > 0.0f ? f[i] : 0.0f;
    linear(f, DG_N, DG_FF, dg_ff2_w, dg_ff2_b, DG_D, att);
    for (i = 0; i < DG_N * DG_D; ++i) t[i] += att[i];
    layer_norm(t, DG_N, DG_D, dg_ln3_w, dg_ln3_b, DG_LN_EPS, a); /* pooling: the learned query over the tokens */
    st = mha_forward(&dg_pool_shape, &dg_pool_weights, 1, 1, DG_N, dg_query, a, a, NULL, pooled, NULL, ws, WS_BYTES);
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
    printf("digits (%s path): the class agrees with PyTorch on %d of %d images; worst logit difference %.3g of the "
           "tolerance 1e-4 (1 + max |logit|) (image %d)\n",
           mha_build_info().fast ? "fast" : "reference", same, DG_IMAGES, worst, worst_img);
    printf("digits: accuracy %.2f %% on the %d test images (PyTorch: %.2f %%), %.2f %% on all %d\n",
           100.0 * right_test / tests, tests, DG_TORCH_TEST_ACCURACY, 100.0 * right_all / DG_IMAGES, DG_IMAGES);
    if (bad == 0 && same == DG_IMAGES) ++passed; else ++failed;
    if (bad == 0 && worst <= 1.0) ++passed; else ++failed;
    printf("%d passed, %d failed\n", passed, failed);
    return failed != 0;
}
#endif
