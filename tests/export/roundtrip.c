/* The C side of tests/export/roundtrip.py: layers trained in PyTorch and
   exported by examples/export_torch.py, run through mha.h on the inputs
   PyTorch saw, against PyTorch's outputs (tolerance 1e-5 (1 + max |ref|)). */
#define MHA_IMPLEMENTATION
#include "mha.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "roundtrip_data.h"   /* layer A (sep_*), inputs and PyTorch's outputs */
#include "roundtrip_packed.h" /* layer B (pk_*), written by the exporter's command line */

#define B 2
#define N 5
#define M 7
static int passed, failed;

static void check(int ok, const char *what) {
    printf("%s: %s\n", what, ok ? "ok" : "FAILED");
    passed += ok;
    failed += !ok;
}

/* max |got - want| <= 1e-5 (1 + max |want|) */
static int close_to(const float *got, const float *want, size_t count) {
    float err = 0.0f, big = 0.0f;
    size_t i;
    for (i = 0; i < count; ++i) {
        float d = fabsf(got[i] - want[i]);
        if (!(d <= err)) err = d; /* NaN too */
        if (fabsf(want[i]) > big) big = fabsf(want[i]);
    }
    printf("  max error %.3g (allowed %.3g)\n", (double)err, (double)(1e-5f * (1.0f + big)));
    return err <= 1e-5f * (1.0f + big);
}

int main(void) {
    static float out[B * N * 16], attn[B * 4 * N * M];
    static unsigned char ws[1 << 20];
    mha_mask mask = MHA_INIT;
    int32_t lens0[B] = {0, 7};
    int i, ok;
    /* layer A: separate W_q [16][16], W_k [16][12], W_v [16][10] */
    mask.valid_lens = a_lens;
    check(mha_forward(&sep_shape, &sep_weights, B, N, M, a_q, a_k, a_v, &mask, out, attn, ws, sizeof ws) == MHA_OK &&
              close_to(out, a_y_pad, B * N * 16),
          "kdim 12, vdim 10, key_padding_mask as valid_lens: out equals PyTorch");
    check(close_to(attn, a_w_pad, B * 4 * N * M), "attention weights per head equal average_attn_weights=False");
    mask.valid_lens = NULL;
    mask.keep = a_keep;
    check(mha_forward(&sep_shape, &sep_weights, B, N, M, a_q, a_k, a_v, &mask, out, NULL, ws, sizeof ws) == MHA_OK &&
              close_to(out, a_y_am, B * N * 16),
          "a 2-D bool attn_mask as keep (inverted, broadcast over the batch): out equals PyTorch");
    mask.keep = NULL;
    mask.valid_lens = lens0;
    ok = mha_forward(&sep_shape, &sep_weights, B, N, M, a_q, a_k, a_v, &mask, out, NULL, ws, sizeof ws) == MHA_OK;
    for (i = 0; i < N * 16; ++i) ok &= out[i] == sep_b_o[i % 16];
    check(ok, "valid length 0: every row of that sequence is exactly b_o (PyTorch: NaN)");
    /* layer B: packed in_proj_weight, causal */
    mask.valid_lens = NULL;
    mask.causal = 1;
    check(mha_forward(&pk_shape, &pk_weights, B, N, N, b_x, b_x, b_x, &mask, out, NULL, ws, sizeof ws) == MHA_OK &&
              close_to(out, b_y_causal, B * N * 16),
          "packed in_proj_weight from a state_dict, causal mask: out equals PyTorch");
    printf("%d passed, %d failed\n", passed, failed);
    return failed != 0;
}
