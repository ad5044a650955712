/* A Cortex-M4 firmware program using mha.h: weights in const arrays (flash),
   a static workspace sized at compile time, no heap. It runs causal
   self-attention over a sequence of 4 vectors and prints the result and its
   RAM use (workspace + the stack high-water mark of the call, measured by
   painting the stack) through semihosting. Built and run by `make cross-test`
   on qemu's mps2-an386 with tests/cross/cortexm_startup.c and cortexm.ld. */
#include <stdint.h>
#include <stdio.h>

#define MHA_NO_LIBM 1 /* no libm needed */
#define MHA_IMPLEMENTATION
#include "../../mha.h"
#include "weights.h"

/* kv_heads = heads, p_a = 0 (dot scoring), m = FW_SEQ */
static unsigned char workspace[MHA_WORKSPACE_BYTES(FW_HEADS, FW_HEADS, FW_P, FW_P, FW_P, 0, FW_SEQ)];
static float out[FW_SEQ * FW_D];

#define PAINT_WORDS 1024u /* 4 KiB below the caller's frame */
#define PAINT 0xC0FFEE11u

/* Runs the layer; kept out of line so that its frame is inside the painted area. */
__attribute__((noinline)) static mha_status run_layer(void) {
    mha_shape s = MHA_INIT;
    mha_weights w = MHA_INIT;
    mha_mask mask = MHA_INIT;
    s.heads = FW_HEADS; s.d_q = s.d_k = s.d_v = FW_D; s.p_q = s.p_k = s.p_v = FW_P; s.p_o = FW_D;
    w.w_q = FW_WQ; w.w_k = FW_WK; w.w_v = FW_WV; w.w_o = FW_WO; w.b_o = FW_BO;
    mask.causal = 1;
    return mha_forward(&s, &w, 1, FW_SEQ, FW_SEQ, FW_INPUT, FW_INPUT, FW_INPUT, &mask, out, NULL, workspace,
                       sizeof workspace);
}

int main(void) {
    volatile uint32_t here = 0;                 /* the current top of the stack, roughly */
    volatile uint32_t *top = (volatile uint32_t *)((uintptr_t)&here & ~(uintptr_t)7) - 16; /* below main's frame */
    volatile uint32_t *bottom = top - PAINT_WORDS;
    volatile uint32_t *p;
    unsigned used;
    mha_status st;
    int i, j;
    for (p = bottom; p < top; ++p) *p = PAINT;  /* paint */
    st = run_layer();
    for (p = bottom; p < top && *p == PAINT; ++p) {} /* the deepest word written */
    used = (unsigned)((uintptr_t)top - (uintptr_t)p);
    printf("firmware: mha_forward %s\n", mha_status_string(st));
    for (i = 0; i < FW_SEQ; ++i) {
        printf("  out[%d] =", i);
        for (j = 0; j < FW_D; ++j) printf(" %7.4f", (double)out[i * FW_D + j]);
        printf("\n");
    }
    printf("firmware RAM: workspace %u bytes + stack %u bytes (high-water of the call, painted %u)\n",
           (unsigned)sizeof workspace, used, PAINT_WORDS * 4u);
    printf("%d passed, %d failed\n", st == MHA_OK && used < PAINT_WORDS * 4u ? 1 : 0,
           st == MHA_OK && used < PAINT_WORDS * 4u ? 0 : 1);
    return st == MHA_OK ? 0 : 1;
}
