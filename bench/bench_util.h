/* bench/bench_util.h - what bench/bench.c and bench/bench_decode.c share: a
   monotonic clock, deterministic uniform data, allocation that exits on
   failure, and the comparison for sorting times. Include after mha.h. */
#ifndef BENCH_UTIL_H
#define BENCH_UTIL_H
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static uint32_t rng = 12345u;
static float uniform(float lim) { /* in [-lim, lim] */
    rng = rng * 1664525u + 1013904223u;
    return lim * (2.0f * (float)(rng >> 8) / 16777216.0f - 1.0f);
}
static void *alloc(size_t bytes) {
    void *p = malloc(bytes ? bytes : 1);
    if (!p) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    return p;
}
static float *filled(size_t count, float lim) {
    float *p = (float *)alloc(count * sizeof(float));
    size_t i;
    for (i = 0; i < count; ++i) p[i] = uniform(lim);
    return p;
}
static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}
#endif
