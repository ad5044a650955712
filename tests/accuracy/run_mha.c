/* The C side of `make accuracy` (tests/accuracy/accuracy.py): runs mha.h,
   built as the Makefile chooses (the reference path, or the fast path for
   one vector unit), on problems written by accuracy.py, and writes the
   outputs back. Also the identical-keys family, whose exact answer is known.
     run_mha PROBLEMS OUT   problems file in, outputs out (formats below)
     run_mha --identical    one head, d = p = 4, identity weights, no biases,
                            n = 1, m identical keys and values v: the exact
                            answer is v; prints the error for m up to 65536
   Problems file: int32 count, then per problem int32 batch, n, m, heads,
   d_q, d_k, d_v, p (per head, p_q = p_k = p_v), p_o, causal, lens (0/1),
   then float32 w_q, b_q, w_k, b_k, w_v, b_v, w_o, b_o, queries, keys, values
   and, with lens, int32 valid_lens [batch]. Output: float32 out per problem,
   in order. Exit status 0 unless a call fails or a file cannot be read. */
#define MHA_IMPLEMENTATION
#include "../../mha.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static float *read_floats(FILE *f, size_t count) {
    float *p = (float *)malloc((count ? count : 1) * sizeof(float));
    if (!p || fread(p, sizeof(float), count, f) != count) {
        fprintf(stderr, "run_mha: short problems file\n");
        exit(2);
    }
    return p;
}

static int run_file(const char *in, const char *outpath) {
    FILE *f = fopen(in, "rb"), *o = fopen(outpath, "wb");
    int32_t count, k, hd[11], *lens = NULL;
    if (!f || !o || fread(&count, 4, 1, f) != 1) return 2;
    for (k = 0; k < count; ++k) {
        mha_shape s = {0};
        mha_weights w = {0};
        mha_mask mask = {0};
        int32_t b, n, m, h;
        size_t qk, ws_bytes, n_out;
        float *arr[11], *out;
        void *ws;
        mha_status st;
        int a;
        if (fread(hd, 4, 11, f) != 11) return 2;
        b = hd[0]; n = hd[1]; m = hd[2]; h = hd[3];
        s.heads = h; s.d_q = hd[4]; s.d_k = hd[5]; s.d_v = hd[6];
        s.p_q = s.p_k = s.p_v = hd[7]; s.p_o = hd[8];
        qk = (size_t)h * (size_t)hd[7];
        arr[0] = read_floats(f, qk * (size_t)s.d_q); arr[1] = read_floats(f, qk);
        arr[2] = read_floats(f, qk * (size_t)s.d_k); arr[3] = read_floats(f, qk);
        arr[4] = read_floats(f, qk * (size_t)s.d_v); arr[5] = read_floats(f, qk);
        arr[6] = read_floats(f, (size_t)s.p_o * qk); arr[7] = read_floats(f, (size_t)s.p_o);
        arr[8] = read_floats(f, (size_t)b * (size_t)n * (size_t)s.d_q);
        arr[9] = read_floats(f, (size_t)b * (size_t)m * (size_t)s.d_k);
        arr[10] = read_floats(f, (size_t)b * (size_t)m * (size_t)s.d_v);
        w.w_q = arr[0]; w.b_q = arr[1]; w.w_k = arr[2]; w.b_k = arr[3];
        w.w_v = arr[4]; w.b_v = arr[5]; w.w_o = arr[6]; w.b_o = arr[7];
        mask.causal = hd[9];
        if (hd[10]) {
            lens = (int32_t *)malloc((size_t)b * 4);
            if (!lens || fread(lens, 4, (size_t)b, f) != (size_t)b) return 2;
            mask.valid_lens = lens;
        }
        n_out = (size_t)b * (size_t)n * (size_t)s.p_o;
        out = (float *)malloc(n_out * sizeof(float));
        ws_bytes = mha_workspace_size(&s, b, n, m);
        ws = malloc(ws_bytes);
        st = mha_forward(&s, &w, b, n, m, arr[8], arr[9], arr[10], &mask, out, NULL, ws, ws_bytes);
        if (st != MHA_OK) {
            fprintf(stderr, "run_mha: problem %d: %s\n", (int)k, mha_status_string(st));
            return 1;
        }
        fwrite(out, sizeof(float), n_out, o);
        for (a = 0; a < 11; ++a) free(arr[a]);
        free(out);
        free(ws);
        free(lens);
        lens = NULL;
    }
    fclose(f);
    return fclose(o) != 0;
}

/* The identical-keys family: error per m; fails above 2e-6 (1 + max |v|). */
static int identical(void) {
    static const float eye[16] = {1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1};
    static const float v4[4] = {0.1f, 0.3f, 0.7f, 1.9f};
    static const int32_t ms[6] = {256, 1024, 4096, 16384, 65536, 0};
    mha_shape s = {0};
    mha_weights w = {0};
    float q[4] = {1, 1, 1, 1}, out[4], *kv, worst_all = 0.0f;
    int i, a, bad = 0;
    s.heads = 1; s.d_q = s.d_k = s.d_v = s.p_q = s.p_k = s.p_v = s.p_o = 4;
    w.w_q = w.w_k = w.w_v = w.w_o = eye;
    kv = (float *)malloc((size_t)65536 * 4 * sizeof(float));
    for (i = 0; i < 65536; ++i)
        for (a = 0; a < 4; ++a) kv[i * 4 + a] = v4[a];
    for (i = 0; ms[i]; ++i) {
        size_t bytes = mha_workspace_size(&s, 1, 1, ms[i]);
        void *ws = malloc(bytes);
        float err = 0.0f;
        if (mha_forward(&s, &w, 1, 1, ms[i], q, kv, kv, NULL, out, NULL, ws, bytes) != MHA_OK) return 1;
        for (a = 0; a < 4; ++a) err = fmaxf(err, fabsf(out[a] - v4[a]));
        printf("identical keys, m = %6d: max error %.3g = %.3f of 2e-6 (1 + max |v|)\n", (int)ms[i], (double)err,
               (double)(err / (2e-6f * 2.9f)));
        if (err > worst_all) worst_all = err;
        bad |= !(err <= 2e-6f * 2.9f);
        free(ws);
    }
    free(kv);
    printf("%d passed, %d failed\n", !bad, bad);
    return bad;
}

int main(int argc, char **argv) {
    if (argc == 2 && argv[1][0] == '-') return identical();
    if (argc != 3) {
        fprintf(stderr, "usage: run_mha PROBLEMS OUT | run_mha --identical\n");
        return 2;
    }
    return run_file(argv[1], argv[2]);
}
