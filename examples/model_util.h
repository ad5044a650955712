/* The plain layers around attention in the trained-model examples
   (examples/digits, examples/tinylm): a Linear layer and PyTorch's LayerNorm,
   in float, written out. */
#ifndef MODEL_UTIL_H
#define MODEL_UTIL_H
#include <math.h>

/* y[r][o] = x[r] . w[o] + b[o] for `rows` rows: a Linear layer, w [outs][in]. */
static void linear(const float *x, int rows, int in, const float *w, const float *b, int outs, float *y) {
    int r, o, i;
    for (r = 0; r < rows; ++r)
        for (o = 0; o < outs; ++o) {
            float s = b[o];
            for (i = 0; i < in; ++i) s += x[r * in + i] * w[o * in + i];
            y[r * outs + o] = s;
        }
}

/* PyTorch's LayerNorm over the d values of each row (biased variance). */
static void layer_norm(const float *x, int rows, int d, const float *g, const float *b, float eps, float *y) {
    int r, i;
    for (r = 0; r < rows; ++r, x += d, y += d) {
        float mean = 0.0f, var = 0.0f, inv;
        for (i = 0; i < d; ++i) mean += x[i];
        mean /= (float)d;
        for (i = 0; i < d; ++i) var += (x[i] - mean) * (x[i] - mean);
        inv = 1.0f / sqrtf(var / (float)d + eps);
        for (i = 0; i < d; ++i) y[i] = (x[i] - mean) * inv * g[i] + b[i];
    }
}
#endif
