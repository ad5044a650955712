/* Accuracy of the MHA_NO_LIBM math functions, in ulp of the fp32 result,
   against libm's double-precision exp, tanh and sqrt (rounded references
   are not needed: the error is measured against the double value).
   Sweeps float bit patterns with a stride (MATHF_STRIDE, smaller is denser). */
#define MHA_NO_LIBM 1
#define MHA_IMPLEMENTATION
#include "../mha.h"
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "test_util.h"

#ifndef MATHF_STRIDE
#define MATHF_STRIDE 61u
#endif

static float from_bits(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
static uint32_t to_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }

typedef double (*ref_fn)(double);
typedef float (*our_fn)(float);

/* max ulp error over floats in [lo, hi], both signs as the range says */
static double sweep(our_fn f, ref_fn g, float lo, float hi, float *worst_x, unsigned long *count) {
    double worst = 0.0;
    uint32_t u, stop;
    int side;
    *count = 0;
    for (side = 0; side < 2; ++side) {
        /* positive part [max(lo,0), hi] then negative part [lo, min(hi,0)] */
        float a = side == 0 ? (lo > 0.0f ? lo : 0.0f) : (hi < 0.0f ? -hi : 0.0f);
        float b = side == 0 ? hi : -lo;
        if (b < a || (side == 0 && hi < 0.0f) || (side == 1 && lo >= 0.0f)) continue;
        stop = to_bits(b);
        for (u = to_bits(a); u <= stop; u += MATHF_STRIDE) {
            float x = side == 0 ? from_bits(u) : -from_bits(u);
            double e = tu_ulp_err(f(x), g((double)x));
            ++*count;
            if (e > worst) worst = e, *worst_x = x;
            if (stop - u < MATHF_STRIDE) break;
        }
    }
    return worst;
}

int main(void) {
    float wx = 0.0f;
    unsigned long n;
    double e_exp, e_tanh, e_sqrt, e_sqrt_sub;
    int ok;
    e_exp = sweep(mha__expf, exp, -87.3f, 88.7f, &wx, &n);
    printf("expf  on [-87.3, 88.7]: max %.3f ulp at %.9g over %lu points\n", e_exp, (double)wx, n);
    CHECK(e_exp <= 1.0, "expf: %.3f ulp > 1 (the README's bound)", e_exp);
    e_tanh = sweep(mha__tanhf, tanh, -10.0f, 10.0f, &wx, &n);
    printf("tanhf on [-10, 10]:     max %.3f ulp at %.9g over %lu points\n", e_tanh, (double)wx, n);
    CHECK(e_tanh <= 1.2, "tanhf: %.3f ulp > 1.2 (the README's bound)", e_tanh);
    e_sqrt = sweep(mha__sqrtf, sqrt, FLT_MIN, FLT_MAX, &wx, &n);
    printf("sqrtf on [FLT_MIN, FLT_MAX]: max %.3f ulp at %.9g over %lu points\n", e_sqrt, (double)wx, n);
    e_sqrt_sub = sweep(mha__sqrtf, sqrt, 1e-45f, FLT_MIN, &wx, &n);
    printf("sqrtf on subnormals:    max %.3f ulp at %.9g over %lu points\n", e_sqrt_sub, (double)wx, n);
    CHECK(e_sqrt <= 1.0 && e_sqrt_sub <= 1.0, "sqrtf: %.3f / %.3f ulp > 1", e_sqrt, e_sqrt_sub);
    /* underflow: exactly 0 below ln(FLT_MIN), never a subnormal */
    ok = mha__expf(-87.34f) == 0.0f && mha__expf(-100.0f) == 0.0f && mha__expf(-1e30f) == 0.0f &&
         mha__expf(-FLT_MAX * 2.0f) == 0.0f && mha__expf(-87.33f) >= FLT_MIN;
    CHECK(ok, "expf: exactly 0 below ln(FLT_MIN), normal just above");
    ok = mha__expf(88.73f) > FLT_MAX && mha__expf(FLT_MAX * 2.0f) > FLT_MAX && mha__expf(0.0f) == 1.0f;
    CHECK(ok, "expf: +inf above ln(FLT_MAX), exp(0) = 1");
    ok = mha__expf(NAN) != mha__expf(NAN) && mha__tanhf(NAN) != mha__tanhf(NAN) && mha__sqrtf(NAN) != mha__sqrtf(NAN) &&
         mha__sqrtf(-1.0f) != mha__sqrtf(-1.0f);
    CHECK(ok, "NaN in, NaN out; sqrt(-1) is NaN");
    ok = mha__tanhf(20.0f) == 1.0f && mha__tanhf(-20.0f) == -1.0f && mha__tanhf(0.0f) == 0.0f &&
         mha__sqrtf(0.0f) == 0.0f && mha__sqrtf(FLT_MAX * 2.0f) > FLT_MAX;
    CHECK(ok, "tanh(+-20) = +-1, tanh(0) = 0, sqrt(0) = 0, sqrt(inf) = inf");
    return tu_summary();
}
