/* Token-by-token decoding over a KV cache, the way a small language model's
   attention layer runs: a prompt of 5 tokens in one chunk (a prefill), then
   8 steps of one token each, where each new token is made from the previous
   step's output (a stand-in for the rest of a model: here the output itself,
   scaled). Every step projects only the new token and reads the cache.
   At the end the whole sequence goes through one mha_forward with a causal
   mask, which must give the same outputs: the program prints the largest
   difference and exits 1 if it is above 1e-5 (1 + max |out|).
   GQA: 4 query heads share 2 key/value heads; d = 16, heads of 4. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#define MHA_IMPLEMENTATION
#include "mha.h"
#include "example_util.h"

enum { D = 16, H = 4, KV = 2, P = 4, PROMPT = 5, STEPS = 8, CAP = PROMPT + STEPS };

int main(void) {
    static float wq[H * P * D], wk[KV * P * D], wv[KV * P * D], wo[D * H * P], bo[D];
    static float x[CAP * D], out[CAP * D], ref[CAP * D], cache_kv[2 * KV * CAP * P];
    mha_shape s = MHA_INIT;
    mha_weights w = MHA_INIT;
    mha_cache cache = MHA_INIT;
    mha_mask causal = MHA_INIT;
    int32_t length = 0; /* tokens in the cache: the position of the next one */
    size_t bytes;
    void *ws;
    float diff = 0.0f, top = 0.0f;
    int t, j;
    s.heads = H; s.kv_heads = KV; s.d_q = s.d_k = s.d_v = D; s.p_q = s.p_k = s.p_v = P; s.p_o = D;
    example_fill(wq, sizeof wq / sizeof wq[0], 0.43f, 1u);
    example_fill(wk, sizeof wk / sizeof wk[0], 0.43f, 2u);
    example_fill(wv, sizeof wv / sizeof wv[0], 0.43f, 3u);
    example_fill(wo, sizeof wo / sizeof wo[0], 0.43f, 4u);
    example_fill(bo, D, 0.1f, 5u);
    example_fill(x, PROMPT * D, 1.0f, 6u); /* the prompt's tokens */
    w.w_q = wq; w.w_k = wk; w.w_v = wv; w.w_o = wo; w.b_o = bo;

    /* The cache: mha_cache_bytes() bytes, keys first; this one holds every token. */
    if (mha_cache_bytes(&s, 1, CAP) != sizeof cache_kv) return 1;
    cache.k = cache_kv;
    cache.v = cache_kv + KV * CAP * P;
    cache.length = &length;
    cache.capacity = CAP;
    bytes = mha_decode_workspace_size(&s, 1, PROMPT, CAP); /* enough for any t <= PROMPT */
    ws = malloc(bytes);

    /* The prompt in one call: its 5 queries attend causally among themselves. */
    if (mha_decode(&s, &w, &cache, 1, PROMPT, x, x, x, out, ws, bytes) != MHA_OK) return 1;
    printf("prompt of %d tokens decoded in one call; cache length %d of %d\n", PROMPT, (int)length, CAP);
    for (t = PROMPT; t < CAP; ++t) {
        mha_status st;
        for (j = 0; j < D; ++j) x[t * D + j] = 0.5f * out[(t - 1) * D + j]; /* the next token */
        st = mha_decode(&s, &w, &cache, 1, 1, x + t * D, x + t * D, x + t * D, out + t * D, ws, bytes);
        if (st != MHA_OK) {
            printf("mha_decode: %s\n", mha_status_string(st));
            return 1;
        }
        printf("step %2d (position %2d): out[0..3] = %8.4f %8.4f %8.4f %8.4f\n", t - PROMPT + 1, t,
               (double)out[t * D], (double)out[t * D + 1], (double)out[t * D + 2], (double)out[t * D + 3]);
    }
    /* A full cache refuses more (no window: it is not a ring). */
    if (mha_decode(&s, &w, &cache, 1, 1, x, x, x, out, ws, bytes) != MHA_ERR_CAPACITY) return 1;
    free(ws);

    /* The same sequence in one causal mha_forward. */
    causal.causal = 1;
    bytes = mha_workspace_size(&s, 1, CAP, CAP);
    ws = malloc(bytes);
    if (mha_forward(&s, &w, 1, CAP, CAP, x, x, x, &causal, ref, NULL, ws, bytes) != MHA_OK) return 1;
    free(ws);
    for (j = 0; j < CAP * D; ++j) {
        float d = fabsf(out[j] - ref[j]);
        if (d > diff) diff = d;
        if (fabsf(ref[j]) > top) top = fabsf(ref[j]);
    }
    printf("decoded outputs against one causal mha_forward: max |difference| %.3g (tolerance %.3g)\n",
           (double)diff, 1e-5 * (1.0 + (double)top));
    return diff <= 1e-5f * (1.0f + top) ? 0 : 1;
}
