/* tests/test_bf16dot.c - bf16 products (MHA_BF16_DOT 1, AVX512-BF16):
   mha_forward, mha_forward_parallel and mha_decode with bf16 weights, whose
   products round their activations to bf16 (vdpbf16ps), against the double
   computation of tests/naive_ref.h on the same (exact) weights and the
   unrounded inputs. Built with -mavx512bf16; run only where the CPU has it
   (tests/if_cpu.sh avx512_bf16).

   The bound (docs, "bf16 products"): |out - ref| <= TOL (1 + |ref|) for
   every output, TOL = 2^-6. Each product's activation is rounded to 8
   significant bits (relative error <= 2^-9), and that error passes through
   up to four products (a projection, the scores, the weights times values,
   the output projection): with these weights (uniform, fan-in scaled) the
   worst error measured is printed; TOL leaves it a margin of several times.
   Cases: five chosen problems, a decode, 120 random ones. Also checked: the products really are bf16 (the fp32 reference path of the
   same weights, within 1e-5 of the oracle, differs from them by more than
   1e-5 somewhere), packed,
   unpacked and two-thread results are identical, and a buffer packed for
   other element types is refused. */
#define MHA_FAST 1
#define MHA_BF16_DOT 1
#define MHA__PAR_MIN 1 /* the two-thread runs hand out every call's steps, small ones too */
#define MHA_IMPLEMENTATION
#include "test_util.h"
#include "naive_ref.h"
#include "two_threads.h"

#if !MHA__BFDP /* a compiler that does not target AVX512-BF16 (tcc): nothing to test, said so */
int main(void) {
    printf("skipped test_bf16dot: this build has no AVX512-BF16 code generation\n");
    return tu_summary();
}
#else

#define TOL 0.015625 /* 2^-6 */

static double worst_seen, worst_ref;

/* bf16 copies of p's weights (tu_w16: w16 holds them, w32 their float values). */
typedef tu_w16 bfw;
#define bfw_make(b, p) tu_w16_make(b, &(p)->s, &(p)->w, MHA_BF16)
#define bfw_free(b) tu_w16_free(b)

/* The worst |x - ref| / (1 + |ref|) over count outputs. */
static double rel_err(const float *x, const double *ref, size_t count) {
    double e = 0.0, d;
    size_t i;
    for (i = 0; i < count; ++i) {
        d = fabs((double)x[i] - ref[i]) / (1.0 + fabs(ref[i]));
        if (!(d <= e)) e = d; /* NaN counts as worst */
    }
    return e;
}

/* One problem: forward with bf16 products (unpacked, packed, two threads)
   against the double oracle; the fp32 reference path of the same weights
   against it too, and against the bf16 result (they must differ). */
static void check_forward(const char *name, const mha_shape *s, int32_t batch, int32_t n, int32_t m,
                          const mha_mask *mask, int bias) {
    tu_problem p;
    bfw b;
    size_t no, pbytes, rbytes;
    double *ref, e, eref, diff;
    float *o1, *o2, *o3, *o4;
    void *pk, *rws;
    size_t i;
    tu_problem_make(&p, s, batch, n, m, bias);
    bfw_make(&b, &p);
    no = (size_t)batch * (size_t)n * (size_t)s->p_o;
    ref = (double *)malloc(no * sizeof(double));
    o1 = tu_floats(no, 0.0f); o2 = tu_floats(no, 0.0f); o3 = tu_floats(no, 0.0f); o4 = tu_floats(no, 0.0f);
    pbytes = mha_packed_weights_size(s);
    pk = malloc(pbytes);
    naive_forward(s, &b.w32, batch, n, m, p.q, p.k, p.v, mask, ref, NULL);

    CHECK(mha_forward(s, &b.w16, batch, n, m, p.q, p.k, p.v, mask, o1, NULL, p.ws, p.ws_bytes) == MHA_OK,
          "%s: forward", name);
    CHECK(mha_pack_weights(s, &b.w16, pk, pbytes) == MHA_OK, "%s: pack", name);
    b.w16.packed = pk;
    CHECK(mha_forward(s, &b.w16, batch, n, m, p.q, p.k, p.v, mask, o2, NULL, p.ws, p.ws_bytes) == MHA_OK,
          "%s: forward, packed", name);
    CHECK(mha_forward_parallel(s, &b.w16, batch, n, m, p.q, p.k, p.v, mask, o3, NULL, p.ws, p.ws_bytes,
                               two_threads, NULL) == MHA_OK,
          "%s: forward, packed, two threads", name);
    b.w16.packed = NULL;
    CHECK(memcmp(o1, o2, no * sizeof(float)) == 0 && memcmp(o1, o3, no * sizeof(float)) == 0,
          "%s: unpacked, packed and two threads differ", name);

    e = rel_err(o1, ref, no);
    if (e > worst_seen) worst_seen = e;
    CHECK(e <= TOL, "%s: error %.3g > %.3g", name, e, TOL);

    /* the fp32 reference path: exact products, within the core tolerance */
    rbytes = mha_reference_workspace_size(s, batch, n, m);
    rws = malloc(rbytes);
    CHECK(mha_forward_reference(s, &b.w16, batch, n, m, p.q, p.k, p.v, mask, o4, NULL, rws, rbytes) == MHA_OK,
          "%s: reference", name);
    eref = rel_err(o4, ref, no);
    if (eref > worst_ref) worst_ref = eref;
    CHECK(eref <= 1e-5, "%s: reference error %.3g", name, eref);
    for (diff = 0.0, i = 0; i < no; ++i)
        if (fabs((double)o1[i] - o4[i]) > diff) diff = fabs((double)o1[i] - o4[i]);
    CHECK(diff > 1e-5, "%s: bf16 products equal fp32 to %.3g: not in use?", name, diff);
    printf("%-34s error %.3e (fp32 reference %.1e), largest difference from fp32 %.3e\n", name, e, eref, diff);

    free(ref); free(o1); free(o2); free(o3); free(o4); free(pk); free(rws);
    bfw_free(&b);
    tu_problem_free(&p);
}

/* Decoding with bf16 weights: a prefill of t tokens (> 8: the packed-panel
   GEMMs, bf16 products) and one more step, against the oracle's causal
   forward over all t + 1 tokens. */
static void check_decode(void) {
    mha_shape s = shape_of(8, 2, 96, 80, 72, 64, 48, 100, 0);
    const int32_t t = 40, all = t + 1;
    tu_problem p;
    bfw b;
    mha_cache cache;
    mha_mask causal;
    int32_t len = 0;
    size_t no = (size_t)all * (size_t)s.p_o, ws_bytes = mha_decode_workspace_size(&s, 1, t, all), pbytes;
    void *ws = malloc(ws_bytes), *pk;
    double *ref = (double *)malloc(no * sizeof(double));
    float *out = tu_floats(no, 0.0f), e;
    memset(&causal, 0, sizeof causal);
    causal.causal = 1;
    tu_problem_make(&p, &s, 1, all, all, 1);
    bfw_make(&b, &p);
    naive_forward(&s, &b.w32, 1, all, all, p.q, p.k, p.v, &causal, ref, NULL);
    memset(&cache, 0, sizeof cache);
    cache.k = malloc(mha_cache_bytes(&s, 1, all));
    cache.v = (float *)cache.k + (size_t)s.kv_heads * (size_t)all * (size_t)s.p_k;
    cache.length = &len;
    cache.capacity = all;
    pbytes = mha_packed_weights_size(&s);
    pk = malloc(pbytes);
    CHECK(mha_pack_weights(&s, &b.w16, pk, pbytes) == MHA_OK, "decode: pack");
    b.w16.packed = pk;
    CHECK(mha_decode(&s, &b.w16, &cache, 1, t, p.q, p.k, p.v, out, ws, ws_bytes) == MHA_OK, "decode: prefill");
    CHECK(mha_decode(&s, &b.w16, &cache, 1, 1, p.q + (size_t)t * (size_t)s.d_q, p.k + (size_t)t * (size_t)s.d_k,
                     p.v + (size_t)t * (size_t)s.d_v, out + (size_t)t * (size_t)s.p_o, ws, ws_bytes) == MHA_OK,
          "decode: step");
    e = (float)rel_err(out, ref, no);
    if (e > worst_seen) worst_seen = e;
    CHECK(e <= TOL, "decode: error %.3g > %.3g", e, TOL);
    printf("%-34s error %.3e\n", "decode, 40-token prefill + 1", e);
    free(ws); free(pk); free(ref); free(out); free(cache.k);
    bfw_free(&b);
    tu_problem_free(&p);
}

/* Random problems (sizes from 1 to 127 with odd ones, GQA, dot and
   additive, every mask kind, batch 1 to 3, random RoPE, ALiBi, soft-cap and
   sinks on half of them, an empty key set now and then): bf16 products
   against the oracle within TOL, packed equal to unpacked, two threads equal
   to one. */
static const int32_t SIZES[] = {1, 2, 3, 15, 16, 17, 31, 33, 63, 64, 65, 127};
static int32_t pick_size(void) {
    return tu_next() % 4 == 0 ? (int32_t)(1 + tu_next() % 40) : SIZES[tu_next() % 12];
}
static void check_random(int count) {
    int index, agree = 0;
    double worst = 0.0;
    for (index = 0; index < count; ++index) {
        mha_shape s;
        mha_mask mask;
        tu_problem p;
        bfw b;
        int32_t kvh, *lens = NULL, i;
        uint8_t *keep = NULL;
        size_t no, j, pbytes;
        double *ref, e;
        float *o1, *o2, *o3;
        void *pk;
        int kinds, ok, extras;
        memset(&s, 0, sizeof s);
        memset(&mask, 0, sizeof mask);
        s.heads = 1 + (int32_t)(tu_next() % 4);
        do kvh = 1 + (int32_t)(tu_next() % (uint32_t)s.heads);
        while (s.heads % kvh != 0);
        s.kv_heads = kvh;
        s.d_q = pick_size(); s.d_k = pick_size(); s.d_v = pick_size();
        s.p_q = s.p_k = pick_size(); s.p_v = pick_size(); s.p_o = pick_size();
        if (index % 5 == 4) {
            s.score = MHA_SCORE_ADDITIVE;
            s.p_a = pick_size();
            s.p_k = pick_size();
        }
        extras = index % 2 ? tu_extras(&s) : 0;
        tu_problem_make(&p, &s, 1 + (int32_t)(tu_next() % 3), pick_size() * (1 + (int32_t)(tu_next() % 3)),
                        tu_next() % 12 == 0 ? 0 : pick_size() * (1 + (int32_t)(tu_next() % 3)), (int)(tu_next() % 2));
        tu_sinks(&p, extras);
        kinds = (int)(tu_next() % 8); /* bit 0 lengths, 1 causal, 2 keep */
        if (kinds & 1) {
            lens = (int32_t *)malloc((size_t)p.batch * sizeof(int32_t));
            for (i = 0; i < p.batch; ++i) lens[i] = (int32_t)(tu_next() % (uint32_t)(p.m + 1));
            mask.valid_lens = lens;
        }
        if (kinds & 2) {
            mask.causal = 1;
            mask.causal_offset = p.m - p.n;
        }
        j = (size_t)p.batch * (size_t)p.n * (size_t)p.m;
        if (kinds & 4) {
            keep = (uint8_t *)malloc(j ? j : 1);
            for (j = 0; j < (size_t)p.batch * (size_t)p.n * (size_t)p.m; ++j) keep[j] = (uint8_t)(tu_next() % 5 != 0);
            mask.keep = keep;
        }
        bfw_make(&b, &p);
        no = (size_t)p.batch * (size_t)p.n * (size_t)s.p_o;
        ref = (double *)malloc((no ? no : 1) * sizeof(double));
        o1 = tu_floats(no, 0.0f); o2 = tu_floats(no, 0.0f); o3 = tu_floats(no, 0.0f);
        pbytes = mha_packed_weights_size(&s);
        pk = malloc(pbytes);
        naive_forward(&s, &b.w32, p.batch, p.n, p.m, p.q, p.k, p.v, &mask, ref, NULL);
        ok = mha_forward(&s, &b.w16, p.batch, p.n, p.m, p.q, p.k, p.v, &mask, o1, NULL, p.ws, p.ws_bytes) == MHA_OK;
        ok &= mha_pack_weights(&s, &b.w16, pk, pbytes) == MHA_OK;
        b.w16.packed = pk;
        ok &= mha_forward_parallel(&s, &b.w16, p.batch, p.n, p.m, p.q, p.k, p.v, &mask, o2, NULL, p.ws, p.ws_bytes,
                                   two_threads, NULL) == MHA_OK;
        ok &= mha_forward(&s, &b.w16, p.batch, p.n, p.m, p.q, p.k, p.v, &mask, o3, NULL, p.ws, p.ws_bytes) == MHA_OK;
        ok &= memcmp(o1, o2, no * sizeof(float)) == 0 && memcmp(o1, o3, no * sizeof(float)) == 0;
        e = rel_err(o1, ref, no);
        if (e > worst) worst = e;
        ok &= e <= TOL;
        CHECK(ok, "random problem %d (error %.3g)", index, e);
        agree += ok;
        free(ref); free(o1); free(o2); free(o3); free(pk); free(lens); free(keep);
        bfw_free(&b);
        tu_problem_free(&p);
    }
    if (worst > worst_seen) worst_seen = worst;
    printf("%d of %d random problems within the bound, worst error %.3e\n", agree, count, worst);
}

/* A buffer packed for float weights is not taken for bf16 ones, nor the reverse. */
static void check_refusals(void) {
    mha_shape s = shape_of(4, 2, 37, 19, 23, 20, 17, 33, 0);
    tu_problem p;
    bfw b;
    size_t pbytes = mha_packed_weights_size(&s);
    void *pk = malloc(pbytes);
    tu_problem_make(&p, &s, 1, 5, 7, 1);
    bfw_make(&b, &p);
    CHECK(mha_pack_weights(&s, &b.w32, pk, pbytes) == MHA_OK, "refusals: pack float");
    b.w16.packed = pk;
    CHECK(mha_forward(&s, &b.w16, 1, 5, 7, p.q, p.k, p.v, NULL, p.out, NULL, p.ws, p.ws_bytes) == MHA_ERR_SHAPE,
          "refusals: bf16 weights with float panels");
    CHECK(mha_pack_weights(&s, &b.w16, pk, pbytes) == MHA_OK, "refusals: pack bf16");
    b.w32.packed = pk;
    CHECK(mha_forward(&s, &b.w32, 1, 5, 7, p.q, p.k, p.v, NULL, p.out, NULL, p.ws, p.ws_bytes) == MHA_ERR_SHAPE,
          "refusals: float weights with bf16 panels");
    free(pk);
    bfw_free(&b);
    tu_problem_free(&p);
}

#if MHA__AMX
/* The GEMMs' three ways (mha__amx_use): vdpbf16ps, the plain-C model of the AMX tiles, and the tiles
   themselves where the CPU and the OS give them. On one problem with odd sizes (K tails, edge blocks),
   K past two blocks and GQA: the model's results differ from vdpbf16ps's (its pairs are added in
   another order), so it really ran; the tiles' agree with the model's to 2^-14 (1 + |out|): the
   model adds each product as the instruction's description in Intel's manual does, and the
   hardware rounds its sums otherwise in the last bits (measured: see the line printed), while a
   block taken from the wrong place would be off by the size of the outputs. */
static void check_tiles(int have) {
    mha_shape s = shape_of(4, 2, 301, 37, 64, 48, 33, 70, 0);
    tu_problem p;
    bfw b;
    size_t no, k;
    float *o[3];
    int use, diff01 = 0;
    double d12 = 0.0, d01 = 0.0, d;
    tu_problem_make(&p, &s, 2, 45, 29, 1);
    bfw_make(&b, &p);
    no = (size_t)2 * 45 * (size_t)s.p_o;
    for (use = 0; use < 3; ++use) {
        o[use] = tu_floats(no, 0.0f);
        mha__amx_use = use;
        if (use < 2 || have)
            CHECK(mha_forward(&s, &b.w16, 2, 45, 29, p.q, p.k, p.v, NULL, o[use], NULL, p.ws, p.ws_bytes) == MHA_OK,
                  "tiles: forward, mode %d", use);
    }
    mha__amx_use = -1;
    for (k = 0; k < no; ++k) {
        diff01 |= memcmp(&o[0][k], &o[1][k], sizeof(float)) != 0;
        d = fabs((double)o[0][k] - o[1][k]) / (1.0 + fabs((double)o[1][k]));
        if (!(d <= d01)) d01 = d;
        d = have ? fabs((double)o[1][k] - o[2][k]) / (1.0 + fabs((double)o[1][k])) : 0.0;
        if (!(d <= d12)) d12 = d; /* NaN counts */
    }
    CHECK(diff01, "tiles: the model's results equal vdpbf16ps's: not in use?");
    CHECK(d12 <= 1.0 / 16384, "tiles: the AMX tiles differ from their model by %.3g (1 + |out|)", d12);
    printf("AMX tiles: the model ran (%.2e (1 + |out|) from vdpbf16ps); the tiles %s %.2e (1 + |out|) from the "
           "model\n", d01, have ? "ran," : "not run (no AMX-TILE/AMX-BF16, or not granted by the OS):", d12);
    for (use = 0; use < 3; ++use) free(o[use]);
    bfw_free(&b);
    tu_problem_free(&p);
}

/* Where bf16 products are declined (an Intel core without AMX; mha__amx_use 3 forces it), bf16
   weights take the float path: the same bits as float weights of the same values, packed or not.
   And which way this CPU goes by itself. */
static void check_declined(void) {
    mha_shape s = shape_of(4, 2, 37, 19, 23, 20, 17, 33, 0);
    tu_problem p;
    bfw b;
    size_t no = (size_t)2 * 9 * (size_t)s.p_o, pbytes = mha_packed_weights_size(&s);
    float *o16 = tu_floats(no, 0.0f), *o32 = tu_floats(no, 0.0f);
    void *pk = malloc(pbytes);
    int vendor;
    tu_problem_make(&p, &s, 2, 9, 11, 1);
    bfw_make(&b, &p);
    mha__amx_use = 3;
    CHECK(mha_forward(&s, &b.w32, 2, 9, 11, p.q, p.k, p.v, NULL, o32, NULL, p.ws, p.ws_bytes) == MHA_OK &&
              mha_forward(&s, &b.w16, 2, 9, 11, p.q, p.k, p.v, NULL, o16, NULL, p.ws, p.ws_bytes) == MHA_OK &&
              memcmp(o16, o32, no * sizeof(float)) == 0,
          "declined: bf16 weights give float weights' results, bit for bit");
    CHECK(mha_pack_weights(&s, &b.w16, pk, pbytes) == MHA_OK, "declined: pack");
    b.w16.packed = pk;
    CHECK(mha_forward(&s, &b.w16, 2, 9, 11, p.q, p.k, p.v, NULL, o16, NULL, p.ws, p.ws_bytes) == MHA_OK &&
              memcmp(o16, o32, no * sizeof(float)) == 0,
          "declined: packed bf16 weights too");
    b.w16.packed = NULL;
    mha__amx_use = -1;
    vendor = mha__bf_pick(); /* (asks the CPU) */
    printf("bf16 products on this CPU by themselves: %s\n",
           mha__amx() == 2 ? "by the AMX tiles"
           : vendor      ? "by vdpbf16ps (not an Intel core)"
                         : "declined: the float path (an Intel core without AMX tiles)");
    free(pk);
    free(o16);
    free(o32);
    bfw_free(&b);
    tu_problem_free(&p);
}
#endif

static void check_all(void) {
    mha_shape s;
    mha_mask mask;
    uint8_t *keep;
    size_t i;

    s = shape_of(4, 2, 37, 19, 23, 20, 17, 33, 0); /* odd sizes everywhere */
    check_forward("odd sizes, GQA, bias", &s, 2, 5, 7, NULL, 1);

    s = shape_of(8, 8, 301, 300, 299, 64, 64, 96, 0); /* d past two K blocks, odd; n, m not tile multiples */
    memset(&mask, 0, sizeof mask);
    mask.causal = 1;
    check_forward("d 301/300/299, causal, m 333", &s, 1, 333, 333, &mask, 1);

    s = shape_of(6, 3, 64, 48, 40, 32, 24, 50, 0);
    memset(&mask, 0, sizeof mask);
    keep = (uint8_t *)malloc((size_t)2 * 70 * 261);
    for (i = 0; i < (size_t)2 * 70 * 261; ++i) keep[i] = (uint8_t)(tu_next() % 4u != 0u);
    mask.keep = keep;
    check_forward("cross 70 x 261, keep mask, batch 2", &s, 2, 70, 261, &mask, 0);
    free(keep);

    s = shape_of(8, 4, 128, 128, 128, 64, 64, 128, 0); /* the decoder knobs */
    s.rope_dim = 64;
    s.alibi = 1;
    s.softcap = 8.0f;
    memset(&mask, 0, sizeof mask);
    mask.causal = 1;
    check_forward("RoPE, ALiBi, soft-cap, causal", &s, 1, 150, 150, &mask, 1);

    s = shape_of(3, 3, 40, 30, 20, 16, 12, 24, 1); /* additive: bf16 projections, fp32 attention */
    check_forward("additive scoring", &s, 1, 20, 30, NULL, 1);

    check_decode();
    check_random(120);
}

int main(void) {
    tu_seed(20261203u);
#if MHA__AMX
    {
        /* every check with the GEMMs by vdpbf16ps, by the model of the tiles, and by the tiles where the CPU
           has them (mha__amx_ask: the CPU, XCR0, arch_prctl) */
        static const char *const names[3] = {"vdpbf16ps", "the model of the AMX tiles", "the AMX tiles"};
        const int have = mha__amx_ask() == 1;
        int use;
        for (use = 0; use < (have ? 3 : 2); ++use) {
            printf("-- GEMMs by %s\n", names[use]);
            mha__amx_use = use;
            check_all();
        }
        mha__amx_use = -1;
        check_tiles(have);
        check_declined();
    }
#else
    printf("-- GEMMs by vdpbf16ps (this build has no AMX code: not x86-64 Linux GNU C, or MHA_NO_AMX)\n");
    check_all();
#endif
    check_refusals();
    printf("worst error of bf16 products %.3e (bound %.3e); fp32 reference path %.1e\n", worst_seen, TOL, worst_ref);
    return tu_summary();
}
#endif
