/* Minimal start-up for the Cortex-M test images run under qemu-system-arm:
   a vector table and a reset handler that enables the FPU (when there is one)
   and enters newlib's _start (rdimon crt0: zeroes .bss, sets up semihosting,
   calls main, and exits through semihosting with main's status). With
   CORTEXM_NO_LIBC 1 (linked -nostartfiles, for images that use no C library
   at all, such as examples/firmware) it zeroes .bss itself, calls main and
   exits through semihosting: 0 when main returns 0, else 1. */
#include <stdint.h>

#ifndef CORTEXM_NO_LIBC
#define CORTEXM_NO_LIBC 0
#endif
#if CORTEXM_NO_LIBC
extern uint32_t __bss_start__, __bss_end__;
int main(void);
#else
#include <errno.h>
#include <stddef.h>
extern void _start(void);
extern char end, __heap_end;
void *_sbrk(ptrdiff_t incr);
#endif
extern uint32_t __stack_top;

void cortexm_reset(void);
void cortexm_fault(void);

void cortexm_reset(void) {
#if defined(__ARM_FP) || defined(__ARM_FEATURE_MVE)
    /* CPACR: full access to CP10 and CP11, before any float instruction */
    *(volatile uint32_t *)0xE000ED88u |= (0xFu << 20);
    __asm__ volatile("dsb\n\tisb");
#endif
#if CORTEXM_NO_LIBC
    {
        uint32_t *p, reason;
        for (p = &__bss_start__; p < &__bss_end__; ++p) *p = 0;
        reason = main() == 0 ? 0x20026u : 0x20024u; /* ADP_Stopped_ApplicationExit, _RunTimeErrorUnknown */
        __asm__ volatile("mov r0, #0x18\n\tmov r1, %0\n\tbkpt 0xab" : : "r"(reason) : "r0", "r1", "memory");
    }
#else
    _start();
#endif
    for (;;) {}
}

#if !CORTEXM_NO_LIBC
/* newlib's heap (malloc's sbrk, in place of librdimon's weak one): from
   the end of .bss up to __heap_end, the end of the linker script's RAM
   region, and no closer than 1 KiB to the stack where the stack lies above
   the heap. (rdimon's start-up puts the stack where qemu's HEAPINFO says:
   in other memory on the MPS2 boards and in the ITCM on the AN547, whose
   data and heap are in the SRAM.) */
void *_sbrk(ptrdiff_t incr) {
    static char *brk = &end;
    char *const sp = (char *)__builtin_frame_address(0);
    char *const limit = brk < sp && sp - 1024 < &__heap_end ? sp - 1024 : &__heap_end;
    char *const old = brk;
    if (incr < 0 ? (size_t)-incr > (size_t)(brk - &end) : limit < brk || (size_t)incr > (size_t)(limit - brk)) {
        errno = ENOMEM;
        return (void *)-1;
    }
    brk += incr;
    return old;
}
#endif

/* A fault ends the run with a message through semihosting (SYS_WRITE0) and exit. */
void cortexm_fault(void) {
    static const char msg[] = "cortexm: hard fault\n0 passed, 1 failed\n";
    register uint32_t r0 __asm__("r0") = 0x04u; /* SYS_WRITE0 */
    register const char *r1 __asm__("r1") = msg;
    __asm__ volatile("bkpt 0xab" : : "r"(r0), "r"(r1) : "memory");
    r0 = 0x18u; /* SYS_EXIT */
    r1 = (const char *)0x20024u; /* ADP_Stopped_RunTimeErrorUnknown */
    __asm__ volatile("bkpt 0xab" : : "r"(r0), "r"(r1) : "memory");
    for (;;) {}
}

__attribute__((section(".vectors"), used)) static void (*const cortexm_vectors[16])(void) = {
    (void (*)(void))(uintptr_t)&__stack_top, cortexm_reset, cortexm_fault, cortexm_fault, cortexm_fault,
    cortexm_fault, cortexm_fault, 0, 0, 0, 0, cortexm_fault, cortexm_fault, 0, cortexm_fault, cortexm_fault,
};
