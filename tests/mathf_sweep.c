/* The exp and tanh of one build against libm's double functions, in ulp of
   the fp32 result, over every STRIDE-th float (STRIDE 1: every float):
   exp on [ln(FLT_MIN), 88.7] (88 for the vector code, its domain), tanh on
   [-10, 10] (beyond, both give +-1; tests/test_mathf.c and test_fast.c check
   that). Built as the MHA_NO_LIBM scalar functions (-DSWEEP_SCALAR) or as the
   fast path's vector functions for the vector unit the compiler targets.
   Fails when exp is above 1 ulp or tanh above 1.2 ulp.
   Usage: mathf_sweep [STRIDE] (default 1). */
#ifdef SWEEP_SCALAR
#define MHA_NO_LIBM 1
#else
#define MHA_FAST 1
#endif
#define MHA_IMPLEMENTATION
#include "../mha.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_util.h"

#ifdef SWEEP_SCALAR
#define NAME "scalar (MHA_NO_LIBM)"
#define LANES 1
static void run(int which, const float *in, float *out) {
    out[0] = which ? mha__tanhf(in[0]) : mha__expf(in[0]);
}
#else
#define NAME MHA__SIMD_NAME
#define LANES MHA__VL
static void run(int which, const float *in, float *out) {
    mha__vstore(out, which ? mha__vtanh(mha__vload(in)) : mha__vexp(mha__vload(in)));
}
#endif

/* worst error of function `which` (0 exp, 1 tanh) over [lo, hi] */
static double sweep(int which, float lo, float hi, uint32_t stride, double *at, unsigned long *count) {
    float in[LANES], out[LANES], x;
    double worst = 0.0, e;
    uint32_t u, top;
    int sign, l = 0, i;
    for (sign = 0; sign < 2; ++sign) {
        x = sign ? -lo : hi; /* the largest magnitude on this side */
        if (x < 0.0f) continue;
        memcpy(&top, &x, 4);
        for (u = sign; u <= top; u += stride) { /* sign 1 starts at -(smallest subnormal): -0 is +0 */
            memcpy(&x, &u, 4);
            in[l++] = sign ? -x : x;
            if (l < LANES && u + stride <= top) continue;
            while (l < LANES) in[l++] = 0.0f;
            run(which, in, out);
            for (i = 0; i < LANES; ++i) {
                e = tu_ulp_err(out[i], which ? tanh((double)in[i]) : exp((double)in[i]));
                if (e > worst) worst = e, *at = in[i];
            }
            *count += LANES;
            l = 0;
            if (top - u < stride) break;
        }
    }
    return worst;
}

int main(int argc, char **argv) {
    uint32_t stride = argc > 1 ? (uint32_t)atoi(argv[1]) : 1u;
    double e_exp, e_tanh, at = 0.0;
    unsigned long n = 0;
#ifdef SWEEP_SCALAR
    const float exp_hi = 88.7f;
#else
    const float exp_hi = 88.0f;
#endif
    if (stride == 0) stride = 1;
    e_exp = sweep(0, -87.33654f, exp_hi, stride, &at, &n);
    printf("%s: exp  max %.4f ulp at %.9g on [-87.34, %.1f], %lu points (stride %u)\n", NAME, e_exp, at,
           (double)exp_hi, n, (unsigned)stride);
    n = 0;
    e_tanh = sweep(1, -10.0f, 10.0f, stride, &at, &n);
    printf("%s: tanh max %.4f ulp at %.9g on [-10, 10], %lu points (stride %u)\n", NAME, e_tanh, at, n,
           (unsigned)stride);
    if (e_exp <= 1.0 && e_tanh <= 1.2) {
        printf("1 passed, 0 failed\n");
        return 0;
    }
    printf("0 passed, 1 failed (bounds: exp 1 ulp, tanh 1.2 ulp)\n");
    return 1;
}
