/* Two threads and packed weights, as a server would run mha.h:
     - mha_pack_weights once at load time (w.packed), so calls skip packing;
     - mha_forward_parallel with a small persistent pthread pool (one worker
       plus the calling thread): the library starts no threads and hands its
       pieces of work to the parallel-for you give it. The pool below takes
       the pieces one at a time from a shared counter, so any thread may run
       any piece; the result is the same, bit for bit, for any schedule.
   Checks the result against one plain mha_forward call and prints both times. */
#define _POSIX_C_SOURCE 200112L
#define MHA_IMPLEMENTATION
#include "mha.h"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "example_util.h"

/* ---- a persistent pool: one worker thread, and the caller works too ---- */
typedef struct pool {
    pthread_t worker;
    pthread_mutex_t lock;
    pthread_cond_t wake, idle;
    mha_task task;        /* the job being run */
    void *arg;
    int32_t count, next;  /* pieces, and the next one to take */
    int busy, quit;       /* the worker is inside the job; the pool is closing */
    unsigned long job;    /* counts the jobs handed out */
} pool;

/* Takes pieces until none is left. */
static void take_pieces(pool *p) {
    for (;;) {
        int32_t i;
        pthread_mutex_lock(&p->lock);
        i = p->next < p->count ? p->next++ : -1;
        pthread_mutex_unlock(&p->lock);
        if (i < 0) return;
        p->task(p->arg, i);
    }
}

static void *worker_main(void *arg) {
    pool *p = (pool *)arg;
    unsigned long seen = 0;
    pthread_mutex_lock(&p->lock);
    for (;;) {
        while (!p->quit && p->job == seen) pthread_cond_wait(&p->wake, &p->lock);
        if (p->quit) break;
        seen = p->job;
        p->busy = 1;
        pthread_mutex_unlock(&p->lock);
        take_pieces(p);
        pthread_mutex_lock(&p->lock);
        p->busy = 0;
        pthread_cond_signal(&p->idle);
    }
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

/* mha_parallel_for: task(arg, i) for every i < count, on both threads; returns when all are done. */
static void pool_for(void *user, mha_task task, void *arg, int32_t count) {
    pool *p = (pool *)user;
    pthread_mutex_lock(&p->lock);
    p->task = task;
    p->arg = arg;
    p->count = count;
    p->next = 0;
    ++p->job;
    pthread_cond_signal(&p->wake);
    pthread_mutex_unlock(&p->lock);
    take_pieces(p);
    pthread_mutex_lock(&p->lock);
    while (p->busy || p->next < p->count) pthread_cond_wait(&p->idle, &p->lock);
    pthread_mutex_unlock(&p->lock);
}

static int pool_start(pool *p) {
    memset(p, 0, sizeof *p);
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->wake, NULL);
    pthread_cond_init(&p->idle, NULL);
    return pthread_create(&p->worker, NULL, worker_main, p) == 0;
}

static void pool_stop(pool *p) {
    pthread_mutex_lock(&p->lock);
    p->quit = 1;
    pthread_cond_signal(&p->wake);
    pthread_mutex_unlock(&p->lock);
    pthread_join(p->worker, NULL);
    pthread_cond_destroy(&p->wake);
    pthread_cond_destroy(&p->idle);
    pthread_mutex_destroy(&p->lock);
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int main(void) {
    enum { H = 8, D = 256, P = 32, N = 192, M = 192 };
    mha_shape s = MHA_INIT;
    mha_weights w = MHA_INIT, wp;
    mha_weight_counts c;
    pool workers;
    float *W[4], *q, *kv, *one, *two;
    void *ws, *packed;
    size_t bytes, pbytes;
    double t0, t1, t2;
    int i, same;
    s.heads = H; s.d_q = s.d_k = s.d_v = D; s.p_q = s.p_k = s.p_v = P; s.p_o = D;
    mha_weight_counts_get(&s, &c);
    for (i = 0; i < 4; ++i) {
        size_t count = i == 0 ? c.w_q : i == 1 ? c.w_k : i == 2 ? c.w_v : c.w_o;
        W[i] = (float *)malloc(count * sizeof(float));
        example_fill(W[i], count, 0.06f, (uint32_t)(i + 1));
    }
    w.w_q = W[0]; w.w_k = W[1]; w.w_v = W[2]; w.w_o = W[3];
    q = (float *)malloc((size_t)N * D * sizeof(float));
    kv = (float *)malloc((size_t)M * D * sizeof(float));
    one = (float *)malloc((size_t)N * D * sizeof(float));
    two = (float *)malloc((size_t)N * D * sizeof(float));
    example_fill(q, (size_t)N * D, 1.0f, 7u);
    example_fill(kv, (size_t)M * D, 1.0f, 8u);
    bytes = mha_workspace_size(&s, 1, N, M);
    ws = malloc(bytes);

    /* once, at load time: pack the weights (0 bytes needed on the reference path) */
    pbytes = mha_packed_weights_size(&s);
    packed = malloc(pbytes ? pbytes : 1);
    wp = w;
    if (pbytes) {
        if (mha_pack_weights(&s, &w, packed, pbytes) != MHA_OK) return 1;
        wp.packed = packed;
    }
    if (!pool_start(&workers)) return 1;

    t0 = now();
    if (mha_forward(&s, &w, 1, N, M, q, kv, kv, NULL, one, NULL, ws, bytes) != MHA_OK) return 1;
    t1 = now();
    if (mha_forward_parallel(&s, &wp, 1, N, M, q, kv, kv, NULL, two, NULL, ws, bytes, pool_for, &workers) != MHA_OK)
        return 1;
    t2 = now();
    pool_stop(&workers);
    same = memcmp(one, two, (size_t)N * D * sizeof(float)) == 0;
    printf("%d heads of %d, d %d, n = m = %d (%s path, %s)\n", H, P, D, N, mha_build_info().fast ? "fast" : "reference",
           mha_build_info().vector);
    printf("  one thread, weights packed in the call: %.2f ms\n", 1e3 * (t1 - t0));
    printf("  two threads, weights packed once:       %.2f ms\n", 1e3 * (t2 - t1));
    printf("  results identical bit for bit: %s\n", same ? "yes" : "NO");
    for (i = 0; i < 4; ++i) free(W[i]);
    free(q); free(kv); free(one); free(two); free(ws); free(packed);
    return same ? 0 : 1;
}
