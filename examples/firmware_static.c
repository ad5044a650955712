/* Firmware-style use: weights in const arrays (flash on a microcontroller), a
   static workspace sized at compile time by MHA_WORKSPACE_BYTES, no heap.
   Self-attention over a sequence of 3 vectors of size 4, 2 heads of 2. */
#include <stdio.h>
#define MHA_FAST 0 /* the reference path: MHA_WORKSPACE_BYTES is its size */
#define MHA_IMPLEMENTATION
#include "mha.h"

#define HEADS 2
#define D 4
#define P 2
#define SEQ 3

static const float W_Q[16] = {
    -0.247f, -0.489f, 0.211f, -0.599f, 0.050f, -0.188f, -0.619f, 0.010f,
    -0.648f, -0.093f, -0.602f, -0.573f, -0.106f, 0.458f, -0.527f, -0.387f,
};
static const float W_K[16] = {
    0.178f, 0.627f, 0.108f, -0.145f, 0.667f, -0.635f, 0.502f, -0.295f,
    -0.498f, -0.535f, -0.268f, 0.443f, -0.447f, 0.114f, 0.194f, -0.179f,
};
static const float W_V[16] = {
    0.067f, -0.612f, -0.617f, -0.412f, 0.253f, -0.101f, -0.260f, 0.120f,
    -0.066f, -0.280f, 0.412f, 0.279f, -0.358f, 0.104f, 0.035f, 0.525f,
};
static const float W_O[16] = {
    0.321f, -0.297f, 0.672f, -0.535f, -0.115f, 0.360f, -0.487f, -0.015f,
    -0.645f, 0.236f, 0.370f, 0.102f, 0.526f, -0.261f, 0.273f, 0.132f,
};
static const float B_O[4] = {
    0.112f, -0.061f, 0.476f, 0.623f,
};
static const float X[SEQ * D] = {
    0.5f, -0.25f, 1.0f, 0.0f,
    -1.0f, 0.75f, 0.25f, 0.5f,
    0.125f, 0.5f, -0.5f, 1.0f,
};

/* heads, kv_heads, p_q, p_k, p_v, p_a (0: dot scoring), m */
static unsigned char workspace[MHA_WORKSPACE_BYTES(HEADS, HEADS, P, P, P, 0, SEQ)];
static float out[SEQ * D];

int main(void) {
    mha_shape s = MHA_INIT;
    mha_weights w = MHA_INIT;
    mha_status st;
    int i, j;
    s.heads = HEADS; s.d_q = s.d_k = s.d_v = D; s.p_q = s.p_k = s.p_v = P; s.p_o = D;
    w.w_q = W_Q; w.w_k = W_K; w.w_v = W_V; w.w_o = W_O; w.b_o = B_O;
    st = mha_forward(&s, &w, 1, SEQ, SEQ, X, X, X, NULL, out, NULL, workspace, sizeof workspace);
    printf("static workspace: %lu bytes (mha_workspace_size says %lu): %s\n", (unsigned long)sizeof workspace,
           (unsigned long)mha_workspace_size(&s, 1, SEQ, SEQ), mha_status_string(st));
    for (i = 0; i < SEQ; ++i) {
        for (j = 0; j < D; ++j) printf(" %8.4f", (double)out[i * D + j]);
        printf("\n");
    }
    return st == MHA_OK && sizeof workspace == mha_workspace_size(&s, 1, SEQ, SEQ) ? 0 : 1;
}
