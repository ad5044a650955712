/* The private functions that tests check directly, under names a test program can link:
   tests/test_impl.c defines them after the implementation, so that such a test links the
   configuration's object instead of compiling the implementation itself (whether the object
   is the fast path's: mha_build_info). */
#ifndef TEST_HOOKS_H
#define TEST_HOOKS_H
#include <stdint.h>

#define HOOK_VL_MAX 64 /* no vector unit has more float lanes */
int hook_vl(void);                           /* the fast path's float lanes (MHA__VL); 0 without it */
int hook_mr(void);                           /* its micro-kernel's rows and columns (MHA__MR, MHA__NR) */
int hook_nr(void);
void hook_vexp(const float *in, float *out);  /* the vector exp and tanh over hook_vl() lanes */
void hook_vtanh(const float *in, float *out);
uint32_t hook_q8_exp2(int32_t y);            /* the int8 path's integer exp (mha__q8_exp2) */
int hook_q8_single(void);                    /* MHA_Q8_SINGLE_ROUNDING of the object */
int hook_q8_vexp2(const int32_t y[4], uint32_t e[4]); /* four exps at once (Helium's mha__q8_vexp2; 1 if it ran) */
struct mha_q8_rescale;                       /* the int8 path's four rescales at once (Helium's mha__q8_vrescale; */
int hook_q8_vrescale(const int32_t x[4], const struct mha_q8_rescale r[4], int32_t y[4]); /* 1 if it ran) */
#endif
