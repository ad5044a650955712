/* A Cortex-M4 firmware program using mha.h: weights in const arrays (flash),
   a static workspace sized at compile time, no heap. It runs causal
   self-attention over a sequence of 4 vectors and prints the result and its
   RAM use (workspace + the stack high-water mark of the call, measured by
   painting the stack from the stack pointer down) through semihosting's
   SYS_WRITE0, with numbers formatted here: no printf, so nothing in the
   image calls malloc (make cross-test checks that with nm). Built and run by
   `make cross-test` on qemu's mps2-an386 with tests/cross/cortexm_startup.c
   and cortexm.ld. */
#include <stdint.h>

#define MHA_NO_LIBM 1 /* no libm needed */
#define MHA_IMPLEMENTATION
#include "../../mha.h"
#include "weights.h"

/* kv_heads = heads, p_a = 0 (dot scoring), m = FW_SEQ */
static unsigned char workspace[MHA_WORKSPACE_BYTES(FW_HEADS, FW_HEADS, FW_P, FW_P, FW_P, 0, FW_SEQ)];
static float out[FW_SEQ * FW_D];

#define PAINT_WORDS 1024u /* 4 KiB below main's stack pointer */
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

/* Text out through semihosting (SYS_WRITE0: a string up to its 0). */
static void say(const char *text) {
    __asm__ volatile("mov r0, #4\n\tmov r1, %0\n\tbkpt 0xab" : : "r"(text) : "r0", "r1", "memory");
}

/* v in decimal, then text. */
static void say_int(long v, const char *text) {
    char buf[24], *p = buf + sizeof buf - 1;
    unsigned long u = v < 0 ? 0ul - (unsigned long)v : (unsigned long)v;
    *p = '\0';
    do *--p = (char)('0' + u % 10u); while ((u /= 10u) != 0);
    if (v < 0) *--p = '-';
    say(p);
    say(text);
}

/* x with 4 decimals (|x| < 2^31 / 10^4), as " -0.1234". */
static void say_fixed(float x) {
    long q = (long)(x * 10000.0f + (x < 0.0f ? -0.5f : 0.5f));
    unsigned long u = q < 0 ? 0ul - (unsigned long)q : (unsigned long)q;
    char frac[6];
    int k;
    say(q < 0 ? " -" : " ");
    say_int((long)(u / 10000u), ".");
    for (k = 3; k >= 0; --k, u /= 10u) frac[k] = (char)('0' + u % 10u);
    frac[4] = '\0';
    say(frac);
}

int main(void) {
    volatile uint32_t *top, *bottom, *p;
    uint32_t sp;
    unsigned used;
    mha_status st;
    int i, j;
    __asm__ volatile("mov %0, sp" : "=r"(sp)); /* main's stack pointer: the call's frames go below it */
    top = (volatile uint32_t *)(uintptr_t)(sp & ~(uint32_t)3);
    bottom = top - PAINT_WORDS;
    for (p = bottom; p < top; ++p) *p = PAINT; /* paint (below the stack pointer: unused memory) */
    st = run_layer();
    for (p = bottom; p < top && *p == PAINT; ++p) {} /* the deepest word written */
    used = (unsigned)((uintptr_t)top - (uintptr_t)p);
    say("firmware: mha_forward ");
    say(mha_status_string(st));
    say("\n");
    for (i = 0; i < FW_SEQ; ++i) {
        say("  out[");
        say_int(i, "] =");
        for (j = 0; j < FW_D; ++j) say_fixed(out[i * FW_D + j]);
        say("\n");
    }
    say("firmware RAM: workspace ");
    say_int((long)sizeof workspace, " bytes + stack ");
    say_int((long)used, " bytes (high-water of the call from main's stack pointer, painted ");
    say_int((long)(PAINT_WORDS * 4u), ")\n");
    say_int(st == MHA_OK && used < PAINT_WORDS * 4u ? 1 : 0, " passed, ");
    say_int(st == MHA_OK && used < PAINT_WORDS * 4u ? 0 : 1, " failed\n");
    return st == MHA_OK ? 0 : 1;
}
