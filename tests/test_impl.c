/* The one translation unit of the test program that compiles the implementation.
   The suite tests the reference path unless the build asks for the fast one
   (-DMHA_FAST=1): the library's own default is the fast path on hosted
   x86-64 and aarch64. -DTEST_LIBRARY_DEFAULTS keeps the library's default
   (the object make test links the examples and models against). */
#if !defined(MHA_FAST) && !defined(TEST_LIBRARY_DEFAULTS)
#define MHA_FAST 0
#endif
#define MHA_IMPLEMENTATION
#include "../mha.h"

/* The test hooks (tests/test_hooks.h: hook_ names); tests/size_report.py measures the
   implementation alone (TEST_HOOKS 0). */
#if !defined(TEST_HOOKS) || TEST_HOOKS
#include "test_hooks.h"
uint32_t hook_q8_exp2(int32_t y) { return mha__q8_exp2(y); }
int hook_q8_single(void) { return MHA_Q8_SINGLE_ROUNDING; }
int hook_q8_vexp2(const int32_t y[4], uint32_t e[4]) {
#if MHA__Q8_MVE
    vst1q_u32(e, mha__q8_vexp2(vld1q_s32(y)));
    return 1;
#else
    int k;
    for (k = 0; k < 4; ++k) e[k] = mha__q8_exp2(y[k]);
    return 0;
#endif
}
int hook_q8_vrescale(const int32_t x[4], const mha_q8_rescale r[4], int32_t y[4]) {
#if MHA__Q8_MVE
    vst1q_s32(y, mha__q8_vrescale(vld1q_s32(x), r));
    return !MHA_Q8_SINGLE_ROUNDING; /* with single rounding it takes them one by one */
#else
    int k;
    for (k = 0; k < 4; ++k) y[k] = mha__q8_rescale(x[k], r[k]);
    return 0;
#endif
}
#if MHA_FAST
int hook_vl(void) { return MHA__VL; }
int hook_mr(void) { return (int)MHA__MR; }
int hook_nr(void) { return (int)MHA__NR; }
void hook_vexp(const float *in, float *out) { mha__vstore(out, mha__vexp(mha__vload(in))); }
void hook_vtanh(const float *in, float *out) { mha__vstore(out, mha__vtanh(mha__vload(in))); }
#else
int hook_vl(void) { return 0; }
int hook_mr(void) { return 0; }
int hook_nr(void) { return 0; }
void hook_vexp(const float *in, float *out) { (void)in, (void)out; }
void hook_vtanh(const float *in, float *out) { (void)in, (void)out; }
#endif
#endif
