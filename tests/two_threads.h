/* A parallel-for for mha_forward_parallel and mha_decode_parallel on two
   threads: the calling thread and one persistent helper, started at the
   first call and kept waiting for the next (a thread made per call costs
   tens of microseconds, more than a stage of a small problem). The pieces
   are handed out one at a time from a shared counter, so either thread runs
   whichever piece comes next. Calls are serialised: one job at a time, from
   any thread. Without a helper (pthread_create fails) the caller runs every
   piece. Between jobs the helper, and the caller at the end of one, spin a
   little (atomic loads, gcc and clang) before they sleep on a condition
   variable: a stage follows another within microseconds. Used by tests/test_fast.c, tests/test_decode.c (make tsan) and the
   benchmarks; link -pthread. */
#ifndef TWO_THREADS_H
#define TWO_THREADS_H
#include <pthread.h>

#include "../mha.h"

#if (defined(__GNUC__) || defined(__clang__)) && !defined(__TINYC__)
#define TWO_THREADS_LOAD(x) __atomic_load_n(&(x), __ATOMIC_ACQUIRE)
#define TWO_THREADS_STORE(x, v) __atomic_store_n(&(x), (v), __ATOMIC_RELEASE)
#if defined(__x86_64__) || defined(__i386__)
#define TWO_THREADS_SPIN 4000 /* pause instructions: some tens of microseconds */
#define TWO_THREADS_RELAX() __builtin_ia32_pause()
#else
#define TWO_THREADS_SPIN 20000
#define TWO_THREADS_RELAX() ((void)0)
#endif
#else /* no atomics (tcc): sleep at once */
#define TWO_THREADS_LOAD(x) (x)
#define TWO_THREADS_STORE(x, v) ((x) = (v))
#define TWO_THREADS_SPIN 0
#define TWO_THREADS_RELAX() ((void)0)
#endif

typedef struct two_threads_pool {
    pthread_mutex_t call;       /* held for a whole job: one job at a time */
    pthread_mutex_t lock;       /* guards the rest */
    pthread_cond_t wake, done;  /* a new job for the helper; the last piece of a job finished */
    mha_task task;
    void *arg;
    int32_t count, next;          /* pieces of the job, the next to hand out */
    unsigned long running, job;   /* pieces being run; jobs handed out so far */
    int started;                  /* 1: the helper runs; -1: it could not be started */
} two_threads_pool;

static two_threads_pool two_threads_p = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER,
                                         PTHREAD_COND_INITIALIZER, PTHREAD_COND_INITIALIZER,
                                         NULL, NULL, 0, 0, 0, 0, 0};

/* Runs pieces of the current job until none is left; called and returns with lock held. */
static void two_threads_take(two_threads_pool *p) {
    while (p->next < p->count) {
        int32_t i = p->next++;
        TWO_THREADS_STORE(p->running, p->running + 1);
        pthread_mutex_unlock(&p->lock);
        p->task(p->arg, i);
        pthread_mutex_lock(&p->lock);
        TWO_THREADS_STORE(p->running, p->running - 1);
        if (p->running == 0 && p->next >= p->count) pthread_cond_signal(&p->done);
    }
}

/* Spins, with lock held on entry and exit, while *x equals v (a while). */
static void two_threads_spin(two_threads_pool *p, const unsigned long *x, unsigned long v) {
    int k;
    pthread_mutex_unlock(&p->lock);
    for (k = 0; k < TWO_THREADS_SPIN && TWO_THREADS_LOAD(*x) == v; ++k) TWO_THREADS_RELAX();
    pthread_mutex_lock(&p->lock);
}

static void *two_threads_helper(void *arg) {
    two_threads_pool *p = (two_threads_pool *)arg;
    unsigned long seen = 0;
    pthread_mutex_lock(&p->lock);
    for (;;) { /* waits for the next job for as long as the process lives */
        if (p->job == seen) two_threads_spin(p, &p->job, seen);
        while (p->job == seen) pthread_cond_wait(&p->wake, &p->lock);
        seen = p->job;
        two_threads_take(p);
    }
    return NULL;
}

static void two_threads(void *user, mha_task task, void *arg, int32_t count) {
    two_threads_pool *p = &two_threads_p;
    pthread_t th;
    (void)user;
    pthread_mutex_lock(&p->call);
    pthread_mutex_lock(&p->lock);
    if (p->started == 0) {
        p->started = pthread_create(&th, NULL, two_threads_helper, p) == 0 ? 1 : -1;
        if (p->started == 1) pthread_detach(th);
    }
    p->task = task;
    p->arg = arg;
    p->count = count;
    p->next = 0;
    if (count > 1 && p->started == 1) {
        TWO_THREADS_STORE(p->job, p->job + 1);
        pthread_cond_signal(&p->wake);
    }
    two_threads_take(p);
    if (p->running > 0) two_threads_spin(p, &p->running, p->running);
    while (p->running > 0) pthread_cond_wait(&p->done, &p->lock);
    pthread_mutex_unlock(&p->lock);
    pthread_mutex_unlock(&p->call);
}
#endif
