/* Several threads share one set of weights and inputs, each with its own
   workspace and output; every result must be bitwise equal to a
   single-threaded run. pthreads are used by this test only, never by mha.h.
   Run under -fsanitize=thread by `make tsan`. */
#include <pthread.h>

#include "test_util.h"

#define THREADS 4
#define ROUNDS 20

static tu_problem shared; /* read-only while the threads run */
static mha_mask shared_mask;
static float *expected;
static size_t n_out;

typedef struct worker {
    float *out;
    void *ws;
    int mismatches, errors;
} worker;

static void *work(void *arg) {
    worker *wk = (worker *)arg;
    int r;
    for (r = 0; r < ROUNDS; ++r) {
        if (mha_forward(&shared.s, &shared.w, shared.batch, shared.n, shared.m, shared.q, shared.k, shared.v,
                        &shared_mask, wk->out, NULL, wk->ws, shared.ws_bytes) != MHA_OK)
            ++wk->errors;
        if (memcmp(wk->out, expected, n_out * sizeof(float)) != 0) ++wk->mismatches;
    }
    return NULL;
}

int main(void) {
    mha_shape s;
    pthread_t th[THREADS];
    worker wk[THREADS];
    int i, mismatches = 0, errors = 0, started = 1;
    memset(&s, 0, sizeof s);
    s.heads = 4; s.kv_heads = 2; s.d_q = 12; s.d_k = 10; s.d_v = 9; s.p_q = s.p_k = 6; s.p_v = 5; s.p_o = 11;
    tu_problem_make(&shared, &s, 2, 7, 9, 1);
    memset(&shared_mask, 0, sizeof shared_mask);
    shared_mask.causal = 1;
    shared_mask.causal_offset = 2;
    n_out = 2 * 7 * 11;
    expected = (float *)malloc(n_out * sizeof(float));
    CHECK(mha_forward(&s, &shared.w, 2, 7, 9, shared.q, shared.k, shared.v, &shared_mask, expected, NULL, shared.ws,
                      shared.ws_bytes) == MHA_OK,
          "single-threaded run");
    for (i = 0; i < THREADS; ++i) {
        wk[i].out = (float *)malloc(n_out * sizeof(float));
        wk[i].ws = malloc(shared.ws_bytes);
        wk[i].mismatches = wk[i].errors = 0;
        started &= pthread_create(&th[i], NULL, work, &wk[i]) == 0;
    }
    for (i = 0; i < THREADS; ++i) {
        pthread_join(th[i], NULL);
        mismatches += wk[i].mismatches;
        errors += wk[i].errors;
        free(wk[i].out);
        free(wk[i].ws);
    }
    CHECK(started, "threads started");
    CHECK(errors == 0, "%d calls failed in threads", errors);
    CHECK(mismatches == 0, "%d of %d threaded results differ from the single-threaded one", mismatches,
          THREADS * ROUNDS);
    printf("threads: %d threads x %d rounds, bitwise equal to the single-threaded result\n", THREADS, ROUNDS);
    free(expected);
    tu_problem_free(&shared);
    return tu_summary();
}
