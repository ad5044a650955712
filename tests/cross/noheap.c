/* A whole Cortex-M4F firmware image around mha.h with nothing else in it:
   its own vector table and reset handler, no C runtime start-up, no stdio.
   make cross-test links it with --gc-sections and checks with nm that it
   contains no malloc/free/calloc/realloc and no soft-float double helper
   (__aeabi_d*). It is linked, not run. */
#include <stdint.h>

#define MHA_NO_LIBM 1
#define MHA_IMPLEMENTATION
#include "../../mha.h"
#include "../../examples/firmware/weights.h"

static unsigned char workspace[MHA_WORKSPACE_BYTES(FW_HEADS, FW_HEADS, FW_P, FW_P, FW_P, 0, FW_SEQ)];
static float out[FW_SEQ * FW_D];
volatile int noheap_status;

void noheap_reset(void);
void noheap_reset(void) {
    mha_shape s = {0};
    mha_weights w = {0};
    *(volatile uint32_t *)0xE000ED88u |= (0xFu << 20); /* enable the FPU */
    s.heads = FW_HEADS; s.d_q = s.d_k = s.d_v = FW_D; s.p_q = s.p_k = s.p_v = FW_P; s.p_o = FW_D;
    w.w_q = FW_WQ; w.w_k = FW_WK; w.w_v = FW_WV; w.w_o = FW_WO; w.b_o = FW_BO;
    noheap_status = (int)mha_forward(&s, &w, 1, FW_SEQ, FW_SEQ, FW_INPUT, FW_INPUT, FW_INPUT, NULL, out, NULL,
                                     workspace, sizeof workspace);
    for (;;) {}
}

extern uint32_t __stack_top;
__attribute__((section(".vectors"), used)) static void (*const noheap_vectors[2])(void) = {
    (void (*)(void))(uintptr_t)&__stack_top, noheap_reset,
};
