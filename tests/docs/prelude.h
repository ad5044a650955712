/* The names that the documentation's C fragments use (tests/docs_check.sh compiles each
   fragment that is not a whole program as the body of a function after this file). */
#include <stdio.h>
#include <stdlib.h>
enum { BATCH = 2, CAPACITY = 64, T_MAX = 8, ROWS = 16 };
static int32_t batch = 2, n = 3, m = 5, t = 1, kv_heads = 2, B = 2, N = 3, M = 5;
static mha_shape s;
static mha_weights w;
static mha_mask mask;
static mha_status st;
static const float *wq, *wk, *wv, *wo;
static float *queries, *keys, *values, *q, *k, *v, *out, *attn, *lse, *d_out, *d_q, *d_k, *d_v;
static float *gw_q, *gb_q, *gw_k;
static const uint16_t *wq16, *wk16, *wv16, *wo16;
static const int8_t *q8, *k8, *v8;
static int8_t *out8;
static const int16_t *q16, *k16, *v16;
static int16_t *out16;
static void *ws, *workspace, *fwd_workspace, *my_pool;
static size_t bytes;
