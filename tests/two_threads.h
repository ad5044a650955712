/* A parallel-for for mha_forward_parallel on two pthreads: the calling
   thread runs the even task indices, a helper thread the odd ones; without
   a helper (one task, or pthread_create fails) the caller runs them all.
   Used by tests/test_fast.c (make tsan) and bench/bench.c; link -pthread. */
#ifndef TWO_THREADS_H
#define TWO_THREADS_H
#include <pthread.h>

#include "../mha.h"

typedef struct two_threads_half {
    mha_task task;
    void *arg;
    int32_t count, first, step;
} two_threads_half;

static void *two_threads_run(void *p) {
    two_threads_half *h = (two_threads_half *)p;
    int32_t i;
    for (i = h->first; i < h->count; i += h->step) h->task(h->arg, i);
    return NULL;
}

static void two_threads(void *user, mha_task task, void *arg, int32_t count) {
    pthread_t th;
    two_threads_half a, b;
    (void)user;
    a.task = b.task = task;
    a.arg = b.arg = arg;
    a.count = b.count = count;
    a.first = 0;
    b.first = 1;
    a.step = b.step = 2;
    if (count < 2 || pthread_create(&th, NULL, two_threads_run, &b) != 0) {
        a.step = 1; /* no helper: all of them here */
        two_threads_run(&a);
        return;
    }
    two_threads_run(&a);
    pthread_join(th, NULL);
}
#endif
