/* A whole transformer encoder block around mha_forward, with weights trained
   in PyTorch and exported by examples/export_torch.py
   (examples/make_encoder_weights.py wrote encoder_weights.h):

       x = LayerNorm1(x + SelfAttention(x))          PyTorch's TransformerEncoderLayer,
       x = LayerNorm2(x + W2 relu(W1 x + b1) + b2)   post-norm (norm_first=False), ReLU

   The attention is mha.h's; the layer norms, feed-forward and residuals are
   the few plain loops below. Prints the block's output beside PyTorch's and
   fails unless they agree within 1e-5 (1 + max |y|). */
#define MHA_IMPLEMENTATION
#include "mha.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "encoder_weights.h"

/* y[d] = (x - mean) / sqrt(var + eps) * g + b over one token of ENC_D */
static void layer_norm(const float *x, const float *g, const float *b, float *y) {
    float mean = 0.0f, var = 0.0f;
    int i;
    for (i = 0; i < ENC_D; ++i) mean += x[i];
    mean /= (float)ENC_D;
    for (i = 0; i < ENC_D; ++i) var += (x[i] - mean) * (x[i] - mean);
    var /= (float)ENC_D;
    for (i = 0; i < ENC_D; ++i) y[i] = (x[i] - mean) / sqrtf(var + ENC_LN_EPS) * g[i] + b[i];
}

/* y[o] = W[o] . x + b[o], W [out][in] (PyTorch's Linear layout) */
static void linear(const float *W, const float *b, const float *x, int in, int out, float *y) {
    int o, i;
    for (o = 0; o < out; ++o) {
        float s = b[o];
        for (i = 0; i < in; ++i) s += W[o * in + i] * x[i];
        y[o] = s;
    }
}

int main(void) {
    float attn_out[ENC_N * ENC_D], h[ENC_N * ENC_D], y[ENC_N * ENC_D], ff[ENC_FF], t[ENC_D], err = 0.0f, big = 0.0f;
    size_t bytes = mha_workspace_size(&enc_attn_shape, 1, ENC_N, ENC_N);
    void *ws = malloc(bytes);
    mha_status st;
    int r, i;
    /* 1. self-attention: queries, keys and values are the same tokens */
    st = mha_forward(&enc_attn_shape, &enc_attn_weights, 1, ENC_N, ENC_N, enc_x, enc_x, enc_x, NULL, attn_out, NULL,
                     ws, bytes);
    if (st != MHA_OK) {
        printf("mha_forward: %s\n", mha_status_string(st));
        return 1;
    }
    for (r = 0; r < ENC_N; ++r) {
        const float *x = enc_x + r * ENC_D;
        /* 2. residual and the first layer norm */
        for (i = 0; i < ENC_D; ++i) t[i] = x[i] + attn_out[r * ENC_D + i];
        layer_norm(t, enc_ln1_w, enc_ln1_b, h + r * ENC_D);
        /* 3. feed-forward, residual, second layer norm */
        linear(enc_ff1_w, enc_ff1_b, h + r * ENC_D, ENC_D, ENC_FF, ff);
        for (i = 0; i < ENC_FF; ++i) ff[i] = ff[i] > 0.0f ? ff[i] : 0.0f;
        linear(enc_ff2_w, enc_ff2_b, ff, ENC_FF, ENC_D, t);
        for (i = 0; i < ENC_D; ++i) t[i] += h[r * ENC_D + i];
        layer_norm(t, enc_ln2_w, enc_ln2_b, y + r * ENC_D);
    }
    printf("encoder block (d_model %d, %d heads, feed-forward %d) on %d tokens, mha.h %s path:\n", ENC_D,
           (int)enc_attn_shape.heads, ENC_FF, ENC_N, mha_build_info().fast ? "fast" : "reference");
    for (r = 0; r < ENC_N; ++r)
        printf("  token %d: mha.h %9.5f %9.5f %9.5f ...   PyTorch %9.5f %9.5f %9.5f ...\n", r, (double)y[r * ENC_D],
               (double)y[r * ENC_D + 1], (double)y[r * ENC_D + 2], (double)enc_y_torch[r * ENC_D],
               (double)enc_y_torch[r * ENC_D + 1], (double)enc_y_torch[r * ENC_D + 2]);
    for (i = 0; i < ENC_N * ENC_D; ++i) {
        if (fabsf(y[i] - enc_y_torch[i]) > err) err = fabsf(y[i] - enc_y_torch[i]);
        if (fabsf(enc_y_torch[i]) > big) big = fabsf(enc_y_torch[i]);
    }
    printf("max |mha.h - PyTorch| = %.3g (allowed 1e-5 (1 + max |y|) = %.3g)\n", (double)err,
           (double)(1e-5f * (1.0f + big)));
    free(ws);
    return err <= 1e-5f * (1.0f + big) ? 0 : 1;
}
