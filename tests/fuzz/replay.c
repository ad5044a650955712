/* Runs files through the fuzz harness without libFuzzer, so the committed
   corpus is part of the ordinary test suite (and of valgrind and sanitizer
   runs). Usage: replay FILE...  A failed check aborts. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
extern unsigned long fuzz_count_error_path, fuzz_count_ok_compared, fuzz_count_fast_compared, fuzz_count_decode,
    fuzz_count_backward, fuzz_count_q8, fuzz_count_q16, fuzz_count_q16_decode, fuzz_count_q16_same;

int main(int argc, char **argv) {
    int i, ran = 0, unreadable = 0;
    for (i = 1; i < argc; ++i) {
        static uint8_t buf[1 << 16];
        size_t len;
        FILE *f = fopen(argv[i], "rb");
        if (!f) {
            ++unreadable;
            continue;
        }
        len = fread(buf, 1, sizeof buf, f);
        fclose(f);
        LLVMFuzzerTestOneInput(buf, len);
        ++ran;
    }
    printf("fuzz corpus replayed: %d inputs, %lu on the error path, %lu OK and compared with the naive reference, "
           "%lu compared fast path against reference path, %lu decoding calls checked, %lu backward calls checked, %lu int8 calls checked, "
           "%lu 16x8 calls checked, %lu 16x8 decodings checked (%lu equal to the causal forward)\n",
           ran, fuzz_count_error_path, fuzz_count_ok_compared, fuzz_count_fast_compared, fuzz_count_decode,
           fuzz_count_backward, fuzz_count_q8, fuzz_count_q16, fuzz_count_q16_decode, fuzz_count_q16_same);
    printf("%d passed, %d failed\n", ran, unreadable);
    return unreadable ? 1 : 0;
}
