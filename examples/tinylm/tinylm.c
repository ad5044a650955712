/* A character language model trained in PyTorch (examples/tinylm/train.py) generating text in
   C: a chunked prefill of the prompt, then one token per step, greedy, with each layer's keys
   and values in an mha_cache (mha_decode). Two layers, 4 heads, the second with 2 kv heads.
   For three prompts, causal and with a sliding window of 32 positions (a ring buffer), checks
   that the 200 characters equal PyTorch's and that every step's logits agree with PyTorch's
   within 1e-4 (1 + max |logit|); prints the text, tokens per second on one thread and the
   bytes that a step reads; then the same runs with q8 and q4 caches (docs/quantized.md): how
   many characters stay PyTorch's, its margin where the first one differs, and the worst logit
   difference before it. */
#define _POSIX_C_SOURCE 199309L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MHA_IMPLEMENTATION
#include "mha.h"
#include "tinylm_model.h"
#include "tinylm_expected.h"
#include "model_util.h" /* linear, layer_norm */

#define T_MAX 64  /* longest prompt: the prefill's chunk */
#define TIMING 21 /* runs timed for the speed */

typedef struct layer {
    const mha_shape *shape;
    const mha_weights *w;
    const float *ln1_w, *ln1_b, *ln2_w, *ln2_b, *ff1_w, *ff1_b, *ff2_w, *ff2_b;
    mha_cache cache;
    int32_t length; /* batch 1 */
} layer;

static layer layers[TL_LAYERS];
static void *ws;
static size_t ws_bytes;

/* t new tokens at positions length.. (every layer holds the same length): their logits of the
   last one into logits[TL_VOCAB]. */
static mha_status forward(const int *tok, int t, float *logits) {
    static float x[T_MAX * TL_D], a[T_MAX * TL_D], att[T_MAX * TL_D], f[T_MAX * TL_FF];
    int i, j, l, p0 = layers[0].length;
    for (i = 0; i < t; ++i)
        for (j = 0; j < TL_D; ++j) x[i * TL_D + j] = tl_emb[tok[i] * TL_D + j] + tl_pos[(p0 + i) * TL_D + j];
    for (l = 0; l < TL_LAYERS; ++l) {
        layer *L = &layers[l];
        mha_status st;
        /* x += attention(ln1 x) over the cache and the new tokens */
        layer_norm(x, t, TL_D, L->ln1_w, L->ln1_b, TL_LN_EPS, a);
        st = mha_decode(L->shape, L->w, &L->cache, 1, t, a, a, a, att, ws, ws_bytes);
        if (st != MHA_OK) return st;
        for (i = 0; i < t * TL_D; ++i) x[i] += att[i];
        layer_norm(x, t, TL_D, L->ln2_w, L->ln2_b, TL_LN_EPS, a); /* x += ff2 relu(ff1 ln2 x) */
        linear(a, t, TL_D, L->ff1_w, L->ff1_b, TL_FF, f);
        for (i = 0; i < t * TL_FF; ++i) f[i] = f[i] > 0.0f ? f[i] : 0.0f;
        linear(f, t, TL_FF, L->ff2_w, L->ff2_b, TL_D, att);
        for (i = 0; i < t * TL_D; ++i) x[i] += att[i];
    }
    layer_norm(x + (t - 1) * TL_D, 1, TL_D, tl_lnf_w, tl_lnf_b, TL_LN_EPS, a);
    linear(a, 1, TL_D, tl_head_w, tl_head_b, TL_VOCAB, logits);
    return MHA_OK;
}

static int argmax(const float *v) {
    int i, k = 0;
    for (i = 1; i < TL_VOCAB; ++i)
        if (v[i] > v[k]) k = i;
    return k;
}

/* Run `run`'s start: its prompt's tokens into tok (returned: how many) and
   every layer's cache emptied, with the run's window. */
static int start_run(int run, int *tok) {
    const char *prompt = tl_prompt[run];
    int i, l, n = (int)strlen(prompt);
    for (i = 0; i < n; ++i) tok[i] = (int)(strchr(tl_vocab, prompt[i]) - tl_vocab);
    for (l = 0; l < TL_LAYERS; ++l) {
        layers[l].length = 0;
        layers[l].cache.window = tl_run_window[run];
    }
    return n;
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#define LAYER(l)                                                                                         \
    (layers[l].shape = &tl_attn##l##_shape, layers[l].w = &tl_attn##l##_weights,                                \
     layers[l].ln1_w = tl_l##l##_ln1_w, layers[l].ln1_b = tl_l##l##_ln1_b, layers[l].ln2_w = tl_l##l##_ln2_w,   \
     layers[l].ln2_b = tl_l##l##_ln2_b, layers[l].ff1_w = tl_l##l##_ff1_w, layers[l].ff1_b = tl_l##l##_ff1_b,   \
     layers[l].ff2_w = tl_l##l##_ff2_w, layers[l].ff2_b = tl_l##l##_ff2_b)

int main(void) {
    int run, l, i, passed = 0, failed = 0;
    const int capacity = TL_CTX; /* slots per kv head: the longest run (prompt + 200 <= TL_CTX) */
    /* what every step reads besides the caches: each weight once (one row of the embeddings) */
    size_t weight_bytes = 4 * (2 * TL_D + TL_D + TL_D + TL_VOCAB * TL_D + TL_VOCAB);
    double bytes_read = 0.0, rate[TIMING];
    long steps_counted = 0;
    LAYER(0);
    LAYER(1);
    ws_bytes = 0;
    for (l = 0; l < TL_LAYERS; ++l) { /* a cache per layer, k and v in one block */
        mha_weight_counts wc;
        size_t b = mha_decode_workspace_size(layers[l].shape, 1, T_MAX, capacity);
        if (b > ws_bytes) ws_bytes = b;
        float *kv = (float *)malloc(mha_cache_bytes(layers[l].shape, 1, capacity));
        if (!kv) return 1;
        layers[l].cache.k = kv;
        layers[l].cache.v = kv + (size_t)layers[l].shape->kv_heads * (size_t)capacity * (size_t)layers[l].shape->p_k;
        layers[l].cache.length = &layers[l].length;
        layers[l].cache.capacity = capacity;
        layers[l].cache.type = 0;
        if (mha_weight_counts_get(layers[l].shape, &wc) != MHA_OK) return 1;
        weight_bytes += 4 * (wc.w_q + wc.b_q + wc.w_k + wc.b_k + wc.w_v + wc.b_v + wc.w_o + wc.b_o) +
                        4 * (4 * TL_D + 2 * TL_D * TL_FF + TL_FF + TL_D); /* layer norms, feed-forward */
    }
    ws = malloc(ws_bytes);
    if (!ws) return 1;
    for (run = 0; run < TL_RUNS; ++run) {
        const char *prompt = tl_prompt[run];
        int tok[T_MAX], n = start_run(run, tok), step, worst_step = 0, same_text = 1;
        char text[TL_GENERATE + 1];
        float logits[TL_VOCAB];
        double worst = 0.0;
        mha_status st = MHA_OK;
        for (step = 0; step < TL_GENERATE && st == MHA_OK; ++step) {
            const float *ref = tl_torch_logits + ((size_t)run * TL_GENERATE + (size_t)step) * TL_VOCAB;
            float top = 0.0f;
            st = step == 0 ? forward(tok, n, logits) : forward(tok, 1, logits); /* prefill, then one token */
            if (step > 0 && tl_run_window[run] == 0) {
                double cached = 0.0;
                ++steps_counted;
                for (l = 0; l < TL_LAYERS; ++l) /* the step reads the cached keys and values of each layer */
                    cached += 2.0 * (double)layers[l].length * layers[l].shape->kv_heads * layers[l].shape->p_k * 4;
                bytes_read += cached + (double)weight_bytes;
            }
            for (i = 0; i < TL_VOCAB; ++i) top = fabsf(ref[i]) > top ? fabsf(ref[i]) : top;
            for (i = 0; i < TL_VOCAB; ++i) {
                double e = fabs((double)logits[i] - (double)ref[i]) / (1e-4 * (1.0 + (double)top));
                if (e > worst) worst = e, worst_step = step;
            }
            tok[0] = argmax(logits);
            text[step] = tl_vocab[tok[0]];
            same_text &= text[step] == tl_torch_text[run][step];
        }
        text[step] = '\0';
        printf("tinylm (%s, %s path): \"%s\" -> \"%s\"\n",
               tl_run_window[run] ? "window 32" : "causal", mha_build_info().fast ? "fast" : "reference", prompt, text);
        printf("tinylm: %s PyTorch's %d characters; worst logit difference %.3g of the tolerance (step %d); "
               "PyTorch's smallest margin between its two best logits %.3g\n",
               same_text ? "the same as" : "DIFFERENT from", TL_GENERATE, worst, worst_step, (double)tl_torch_margin[run]);
        if (st == MHA_OK && same_text) ++passed; else ++failed;
        if (st == MHA_OK && worst <= 1.0) ++passed; else ++failed;
    }
    { /* the same runs with block caches (q8, q4): how far their text and logits stay with PyTorch's */
        static const int32_t types[4][2] = {{MHA_Q8, 0}, {MHA_Q4, 0}, {MHA_F16, MHA_Q8}, {MHA_F16, MHA_Q4}};
        static const char *const names[4] = {"q8", "q4", "f16 keys, q8 values", "f16 keys, q4 values"};
        void *qc[TL_LAYERS];
        float *fk[TL_LAYERS];
        int ti;
        for (l = 0; l < TL_LAYERS; ++l) fk[l] = (float *)layers[l].cache.k;
        for (ti = 0; ti < 4; ++ti) {
            int ok = 1;
            for (l = 0; l < TL_LAYERS; ++l) {
                const size_t kb = mha_cache_array_bytes(layers[l].shape, 1, capacity, types[ti][0], 0);
                qc[l] = malloc(kb + mha_cache_array_bytes(layers[l].shape, 1, capacity,
                                                          types[ti][1] ? types[ti][1] : types[ti][0], 1));
                if (!qc[l]) return 1;
                layers[l].cache.k = qc[l];
                layers[l].cache.v = (unsigned char *)qc[l] + kb;
                layers[l].cache.type = types[ti][0];
                layers[l].cache.value_type = types[ti][1];
            }
            for (run = 0; run < TL_RUNS; ++run) {
                int tok[T_MAX], n = start_run(run, tok), step, first = -1, same = 0;
                float logits[TL_VOCAB];
                double worst = 0.0, margin = 0.0;
                mha_status st = MHA_OK;
                for (step = 0; step < TL_GENERATE && st == MHA_OK; ++step) {
                    const float *ref = tl_torch_logits + ((size_t)run * TL_GENERATE + (size_t)step) * TL_VOCAB;
                    st = step == 0 ? forward(tok, n, logits) : forward(tok, 1, logits);
                    tok[0] = argmax(logits);
                    if (first < 0) { /* until the text leaves PyTorch's, the same context as PyTorch's */
                        float b1 = -1e30f, b2 = -1e30f;
                        for (i = 0; i < TL_VOCAB; ++i) {
                            double e = fabs((double)logits[i] - (double)ref[i]);
                            if (e > worst) worst = e;
                            if (ref[i] > b1) b2 = b1, b1 = ref[i];
                            else if (ref[i] > b2) b2 = ref[i];
                        }
                        if (tl_vocab[tok[0]] != tl_torch_text[run][step]) first = step, margin = (double)(b1 - b2);
                    }
                    same += tl_vocab[tok[0]] == tl_torch_text[run][step];
                }
                ok &= st == MHA_OK;
                if (first < 0)
                    printf("tinylm, %s cache (%s): the same %d characters as PyTorch's; worst logit difference %.3g\n",
                           names[ti], tl_run_window[run] ? "window 32" : "causal", TL_GENERATE, worst);
                else
                    printf("tinylm, %s cache (%s): %d of %d characters as PyTorch's, the first difference at %d (PyTorch's "
                           "margin there %.3g); worst logit difference before it %.3g\n",
                           names[ti], tl_run_window[run] ? "window 32" : "causal", same, TL_GENERATE, first,
                           margin, worst);
            }
            if (ok) ++passed; else ++failed; /* every step MHA_OK */
            for (l = 0; l < TL_LAYERS; ++l) free(qc[l]);
        }
        for (l = 0; l < TL_LAYERS; ++l) {
            layers[l].cache.k = fk[l];
            layers[l].cache.v = fk[l] + (size_t)layers[l].shape->kv_heads * (size_t)capacity * (size_t)layers[l].shape->p_k;
            layers[l].cache.type = layers[l].cache.value_type = 0;
        }
    }
    for (run = 0; run < TIMING; ++run) { /* speed: the first prompt, causal, again; the median of TIMING runs */
        const char *prompt = tl_prompt[0];
        int tok[T_MAX], n = (int)strlen(prompt), step, k;
        float logits[TL_VOCAB];
        double t0;
        for (i = 0; i < n; ++i) tok[i] = (int)(strchr(tl_vocab, prompt[i]) - tl_vocab);
        for (l = 0; l < TL_LAYERS; ++l) {
            layers[l].length = 0;
            layers[l].cache.window = 0;
        }
        if (forward(tok, n, logits) != MHA_OK) break;
        t0 = now();
        for (step = 1; step < TL_GENERATE; ++step) {
            tok[0] = argmax(logits);
            if (forward(tok, 1, logits) != MHA_OK) break;
        }
        rate[run] = (double)(TL_GENERATE - 1) / (now() - t0);
        for (k = run; k > 0 && rate[k - 1] > rate[k]; --k) { /* insertion sort */
            double x = rate[k];
            rate[k] = rate[k - 1];
            rate[k - 1] = x;
        }
    }
    printf("tinylm: %.0f tokens per second (one thread, one token a step: the median of %d runs of %d steps); a "
           "step reads %.0f bytes on average (weights %lu, and the cached keys and values)\n",
           rate[TIMING / 2], TIMING, TL_GENERATE - 1, bytes_read / (double)steps_counted, (unsigned long)weight_bytes);
    printf("%d passed, %d failed\n", passed, failed);
    for (l = 0; l < TL_LAYERS; ++l) free(layers[l].cache.k);
    free(ws);
    return failed != 0;
}
