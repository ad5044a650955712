/* Deterministic made-up weights for the examples (a real program loads trained ones). */
#ifndef EXAMPLE_UTIL_H
#define EXAMPLE_UTIL_H
#include <stddef.h>
#include <stdint.h>

/* Fills x[count] with values in [-scale, scale) from a fixed sequence. */
static void example_fill(float *x, size_t count, float scale, uint32_t seed) {
    size_t i;
    for (i = 0; i < count; ++i) {
        seed = seed * 1664525u + 1013904223u;
        x[i] = scale * ((float)(seed >> 8) * (2.0f / 16777216.0f) - 1.0f);
    }
}
#endif
