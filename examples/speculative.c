/* Speculative decoding over a streaming KV cache: a window of 12 positions
   with the first 2 kept for good (attention sinks), RoPE on.
   A prompt of 20 tokens is appended (the ring wraps), then a draft model's
   proposal, a tree of 5 tokens, is checked in one mha_decode_tree call:

       prefix - 0 - 2 - 4        drafts 0 and 1: two candidates for the next token,
              \     \ 3          2 and 3: two for the one after draft 0,
               1                 4: one after draft 2.

   Each draft's output must equal what decoding the prefix and then its path
   token by token gives (on a copy of the cache): the program prints the
   largest difference and exits 1 if it is above 1e-5 (1 + max |out|). The
   lengths do not change; the accepted path (0, 2) is then decoded again as
   an ordinary chunk, and mha_cache_row shows where the kept and the newest
   positions are cached. GQA: 4 query heads share 2 key/value heads. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#define MHA_IMPLEMENTATION
#include "mha.h"
#include "example_util.h"

enum { D = 16, H = 4, KV = 2, P = 8, PROMPT = 20, T = 5, WINDOW = 12, KEPT = 2, CAP = KEPT + WINDOW + T - 1 };

int main(void) {
    static float wq[H * P * D], wk[KV * P * D], wv[KV * P * D], wo[D * H * P];
    static float x[(PROMPT + T) * D], out[T * D], one[D], kv[2 * KV * CAP * P], copy[2 * KV * CAP * P];
    static const int32_t parents[T] = {-1, -1, 0, 0, 2};
    mha_shape s = MHA_INIT;
    mha_weights w = MHA_INIT;
    mha_cache cache = MHA_INIT, scratch;
    int32_t length = 0, scratch_length, path[T], n, i, k, j;
    size_t bytes;
    void *ws;
    float diff = 0.0f, top = 0.0f;
    s.heads = H; s.kv_heads = KV; s.d_q = s.d_k = s.d_v = D; s.p_q = s.p_k = s.p_v = P; s.p_o = D;
    s.rope_dim = P;
    example_fill(wq, sizeof wq / sizeof wq[0], 0.35f, 11u);
    example_fill(wk, sizeof wk / sizeof wk[0], 0.35f, 12u);
    example_fill(wv, sizeof wv / sizeof wv[0], 0.35f, 13u);
    example_fill(wo, sizeof wo / sizeof wo[0], 0.35f, 14u);
    example_fill(x, (PROMPT + T) * D, 1.0f, 15u); /* the prompt's tokens, then the drafts' */
    w.w_q = wq; w.w_k = wk; w.w_v = wv; w.w_o = wo;

    if (mha_cache_bytes(&s, 1, CAP) != sizeof kv) return 1;
    cache.k = kv;
    cache.v = kv + KV * CAP * P;
    cache.length = &length;
    cache.capacity = CAP; /* 2 kept slots and a ring of 16: a window of 12 and chunks of up to 5 */
    cache.window = WINDOW;
    cache.keep_first = KEPT;
    bytes = mha_decode_workspace_size(&s, 1, T, CAP);
    ws = malloc(bytes);
    for (k = 0; k < PROMPT; k += 4) /* the prompt, 4 tokens a call */
        if (mha_cache_append(&s, &w, &cache, 1, 4, x + k * D, x + k * D, ws, bytes) != MHA_OK) return 1;

    /* The tree of drafts in one call. */
    if (mha_decode_tree(&s, &w, &cache, 1, T, parents, x + PROMPT * D, x + PROMPT * D, x + PROMPT * D, out, ws,
                        bytes) != MHA_OK || length != PROMPT)
        return 1;
    printf("%d drafts checked in one call after a prompt of %d tokens; the length stays %d\n", T, PROMPT,
           (int)length);

    /* Each draft against its path, decoded token by token on a copy of the cache. */
    for (i = 0; i < T; ++i) {
        for (n = 0, k = i; k >= 0; k = parents[k]) ++n;
        for (j = n - 1, k = i; k >= 0; k = parents[k]) path[j--] = k;
        scratch = cache;
        scratch.k = copy + 0;
        scratch.v = copy + KV * CAP * P;
        scratch_length = PROMPT;
        scratch.length = &scratch_length;
        memcpy(copy, kv, sizeof kv); /* the prefix's slots are the same; the drafts' are rewritten */
        for (j = 0; j < n; ++j) {
            const float *tok = x + (PROMPT + path[j]) * D;
            if (mha_decode(&s, &w, &scratch, 1, 1, tok, tok, tok, one, ws, bytes) != MHA_OK) return 1;
        }
        for (j = 0; j < D; ++j) {
            float d = fabsf(out[i * D + j] - one[j]);
            if (d > diff) diff = d;
            if (fabsf(one[j]) > top) top = fabsf(one[j]);
        }
        printf("draft %d (path of %d): out[0..2] = %8.4f %8.4f %8.4f\n", (int)i, (int)n, (double)out[i * D],
               (double)out[i * D + 1], (double)out[i * D + 2]);
    }
    printf("drafts against their paths decoded token by token: max |difference| %.3g (tolerance %.3g)\n",
           (double)diff, 1e-5 * (1.0 + (double)top));

    /* Accept drafts 0 and 2: decode them again as an ordinary chunk, which appends them. */
    memcpy(x + (PROMPT + 1) * D, x + (PROMPT + 2) * D, D * sizeof(float));
    if (mha_decode(&s, &w, &cache, 1, 2, x + PROMPT * D, x + PROMPT * D, x + PROMPT * D, out, ws, bytes) != MHA_OK ||
        length != PROMPT + 2)
        return 1;
    printf("accepted drafts 0 and 2: length %d; position 0's key in slot %d, position %d's in slot %d, "
           "position 3 no longer held (%s)\n",
           (int)length, (int)(((float *)mha_cache_row(&s, &cache, 1, 0, 0, 0, 0) - kv) / P), PROMPT + 1,
           (int)(((float *)mha_cache_row(&s, &cache, 1, 0, 0, PROMPT + 1, 0) - kv) / P),
           mha_cache_row(&s, &cache, 1, 0, 0, 3, 0) ? "held" : "NULL");
    free(ws);
    return diff <= 1e-5f * (1.0f + top) ? 0 : 1;
}
