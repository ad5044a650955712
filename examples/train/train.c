/* examples/train/train.c - trains an attention layer in C alone, with
   mha_backward and plain SGD, and checks that its loss curve is PyTorch's.

   A student-teacher run: a teacher layer with fixed random weights, a student
   of the same shape (2 heads, d 8, p 4, p_o 8, biases, causal mask) started
   from other random weights; each step draws a batch of 4 sequences of 6
   random vectors, the loss is the mean squared difference of the student's
   output from the teacher's, and SGD (learning rate 0.25) updates every
   weight and bias of the student. examples/train/train_torch.py runs the same
   numbers (one xorshift32 stream, drawn in the same order) in PyTorch's float32
   autograd and wrote torch_curve.h; each of the 100 losses here must be
   within 1e-5 (relative) of PyTorch's. No heap: every array is static, so it
   runs on a microcontroller too (make cross-test: Cortex-M4F under QEMU).

       train        prints the loss every 10 steps, then "N passed, M failed"
*/
#define MHA_IMPLEMENTATION
#include "mha.h"

#include <stdio.h>

#include "torch_curve.h" /* PyTorch's losses of the same run */

#define H 2
#define D 8
#define P 4
#define PO 8
#define B 4
#define N 6
#define STEPS 100
#define LR 0.25f
#define NW 8 /* weight arrays: W_q, b_q, W_k, b_k, W_v, b_v, W_o, b_o */

static const int sizes[NW] = {H * P * D, H * P, H * P * D, H * P, H * P * D, H * P, PO * H * P, PO};

/* xorshift32; uniform in [-1, 1) as (x >> 8) 2^-23 - 1, exact in float */
static uint32_t rng = 2463534242u;
static float uniform(void) {
    rng ^= rng << 13;
    rng ^= rng >> 17;
    rng ^= rng << 5;
    return (float)(rng >> 8) * (1.0f / 8388608.0f) - 1.0f;
}

typedef struct layer {
    float a[NW][PO * H * P]; /* each array at its own row, the largest size */
} layer;

static layer teacher, student, grads;
static float x[B * N * D], target[B * N * PO], out[B * N * PO], d_out[B * N * PO];
static unsigned char workspace[16384]; /* the fast backward on AVX-512 needs about 12 KiB */

static mha_weights weights_of(const layer *l) {
    mha_weights w = {0};
    w.w_q = l->a[0]; w.b_q = l->a[1]; w.w_k = l->a[2]; w.b_k = l->a[3];
    w.w_v = l->a[4]; w.b_v = l->a[5]; w.w_o = l->a[6]; w.b_o = l->a[7];
    return w;
}

static void draw(layer *l, float half) {
    int k, i;
    for (k = 0; k < NW; ++k)
        for (i = 0; i < sizes[k]; ++i) l->a[k][i] = uniform() * half;
}

int main(void) {
    mha_shape s = {0};
    mha_mask causal = {0};
    mha_weights tw, sw;
    mha_grads g = {0};
    int step, k, i, passed = 0, failed = 0;
    float worst = 0.0f;
    s.heads = H; s.d_q = s.d_k = s.d_v = D; s.p_q = s.p_k = s.p_v = P; s.p_o = PO;
    causal.causal = 1;
    if (mha_reference_workspace_size(&s, B, N, N) > sizeof workspace ||
        mha_backward_workspace_size(&s, B, N, N) > sizeof workspace) {
        printf("train: workspace too small\n0 passed, 1 failed\n");
        return 1;
    }
    draw(&teacher, 1.0f);
    draw(&student, 0.5f);
    tw = weights_of(&teacher);
    sw = weights_of(&student);
    g.w_q = grads.a[0]; g.b_q = grads.a[1]; g.w_k = grads.a[2]; g.b_k = grads.a[3];
    g.w_v = grads.a[4]; g.b_v = grads.a[5]; g.w_o = grads.a[6]; g.b_o = grads.a[7];
    for (step = 0; step < STEPS; ++step) {
        double loss = 0.0;
        float rel;
        for (i = 0; i < B * N * D; ++i) x[i] = uniform();
        if (mha_forward_reference(&s, &tw, B, N, N, x, x, x, &causal, target, NULL, workspace, sizeof workspace) ||
            mha_forward_reference(&s, &sw, B, N, N, x, x, x, &causal, out, NULL, workspace, sizeof workspace)) {
            printf("train: forward failed\n0 passed, 1 failed\n");
            return 1;
        }
        for (i = 0; i < B * N * PO; ++i) { /* loss = mean (out - target)^2; d_out its gradient */
            const float e = out[i] - target[i];
            loss += (double)(e * e);
            d_out[i] = 2.0f * e / (float)(B * N * PO);
        }
        loss /= (double)(B * N * PO);
        for (k = 0; k < NW; ++k)
            for (i = 0; i < sizes[k]; ++i) grads.a[k][i] = 0.0f;
        /* self-attention: the input is queries, keys and values at once, so its gradient would be
           the sum of the three; the weights' gradients are what SGD needs */
        if (mha_backward(&s, &sw, B, N, N, x, x, x, &causal, NULL, d_out, NULL, NULL, NULL, &g, workspace,
                         sizeof workspace)) {
            printf("train: backward failed\n0 passed, 1 failed\n");
            return 1;
        }
        for (k = 0; k < NW; ++k)
            for (i = 0; i < sizes[k]; ++i) student.a[k][i] -= LR * grads.a[k][i];
        rel = (float)((loss - (double)torch_curve[step]) / (double)torch_curve[step]);
        if (rel < 0.0f) rel = -rel;
        if (rel > worst) worst = rel;
        if (rel <= 1e-5f)
            ++passed;
        else
            ++failed;
        if (step % 10 == 0 || step == STEPS - 1)
            printf("step %3d: loss %.6f (PyTorch %.6f)\n", step + 1, loss, (double)torch_curve[step]);
    }
    printf("largest relative difference from PyTorch's loss over %d steps: %.2e (allowed 1e-5)\n", STEPS,
           (double)worst);
    printf("%d passed, %d failed\n", passed, failed);
    return failed != 0;
}
