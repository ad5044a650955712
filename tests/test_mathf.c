/* Accuracy of the MHA_NO_LIBM math functions, in ulp of the fp32 result,
   against libm's double-precision exp, tanh and sqrt (rounded references
   are not needed: the error is measured against the double value).
   Sweeps float bit patterns with a stride (MATHF_STRIDE, smaller is denser). */
#define MHA_NO_LIBM 1
#ifndef MHA_FAST /* the scalar functions tested here are the same on both paths: without the fast one, it builds faster */
#define MHA_FAST 0
#endif
#define MHA_IMPLEMENTATION
#include "../mha.h"
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "test_util.h"

#ifndef MATHF_STRIDE
#define MATHF_STRIDE 61u
#endif

static float from_bits(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
static uint32_t to_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }

typedef double (*ref_fn)(double);
typedef float (*our_fn)(float);

/* max ulp error over floats in [lo, hi], both signs as the range says */
static double sweep(our_fn f, ref_fn g, float lo, float hi, float *worst_x, unsigned long *count) {
    double worst = 0.0;
    uint32_t u, stop;
    int side;
    *count = 0;
    for (side = 0; side < 2; ++side) {
        /* positive part [max(lo,0), hi] then negative part [lo, min(hi,0)] */
        float a = side == 0 ? (lo > 0.0f ? lo : 0.0f) : (hi < 0.0f ? -hi : 0.0f);
        float b = side == 0 ? hi : -lo;
        if (b < a || (side == 0 && hi < 0.0f) || (side == 1 && lo >= 0.0f)) continue;
        stop = to_bits(b);
        for (u = to_bits(a); u <= stop; u += MATHF_STRIDE) {
            float x = side == 0 ? from_bits(u) : -from_bits(u);
            double e = tu_ulp_err(f(x), g((double)x));
            ++*count;
            if (e > worst) worst = e, *worst_x = x;
            if (stop - u < MATHF_STRIDE) break;
        }
    }
    return worst;
}

/* RoPE's cos and sin (mha__rope_angle over mha__freqs) against long
   double: every pair of r = 128 for bases 2, 10000, 500000 and 10^6, at
   positions 0 .. 8191, around 32768, 2^20, 2^24, 1e6, 2^31 - 1 and below 0.
   Returns the largest absolute error below 2^31 - 128, and in *top the
   largest at the positions just below 2^31. */
static double rope_sweep(double *top) {
    static const float thetas[4] = {2.0f, 10000.0f, 500000.0f, 1e6f};
    static const int64_t spots[6] = {32768 - 64, 1 << 20, 1 << 24, INT32_MAX - 127, -1000, 1000000 - 64};
    mha__ctx c;
    mha_shape s;
    double worst = 0.0;
    int ti, a, si;
    int64_t pos;
    memset(&c, 0, sizeof c);
    memset(&s, 0, sizeof s);
    s.rope_dim = 128;
    c.knobs = &s;
    for (ti = 0; ti < 4; ++ti) {
        mha__freqs q;
        s.rope_theta = thetas[ti];
        mha__rope_base(&c);
        mha__freqs_start(&c, &q);
        for (a = 0; a < 64; ++a) {
            uint64_t F = mha__freqs_next(&q);
            long double f = powl((long double)thetas[ti], -(long double)(2 * a) / 128.0L);
            for (si = -1; si < 6; ++si)
                for (pos = si < 0 ? 0 : spots[si]; pos < (si < 0 ? 8192 : spots[si] + 128); ++pos) {
                    float cs[2];
                    long double ang = (long double)pos * f;
                    double ec, es;
                    mha__rope_angle(F, pos, cs);
                    ec = fabs((double)((long double)cs[0] - cosl(ang)));
                    es = fabs((double)((long double)cs[1] - sinl(ang)));
                    if (si == 3) {
                        if (ec > *top) *top = ec;
                        if (es > *top) *top = es;
                        continue;
                    }
                    if (ec > worst) worst = ec;
                    if (es > worst) worst = es;
                }
        }
    }
    return worst;
}

/* ---- 16-bit floats ---------------------------------------------------------- */

#define SIXTEEN_STRIDE (MATHF_STRIDE * 8u + 3u) /* 3899 on the host: about a million floats */

/* The exact value of f16 bits h, from the definition (sign, 5-bit exponent
   with bias 15, 10-bit fraction; exponent 0: subnormal), in double. */
static double f16_value(uint16_t h) {
    int e = (h >> 10) & 31, m = h & 1023;
    double v = e == 31 ? INFINITY : e ? ldexp(1.0 + m / 1024.0, e - 15) : ldexp(m / 1024.0, -14);
    return (h & 0x8000) ? -v : v;
}
/* The nearest f16 to x (ties to even), found by comparing x with the values
   of the bit patterns around it: a second algorithm, not mha.h's. */
static uint16_t f16_nearest(float x) {
    double ax = fabs((double)x), best = INFINITY;
    uint16_t lo = 0, hi = 0x7c00, mid, pick = 0;
    while (hi - lo > 1) { /* the largest finite pattern with value <= |x| (patterns are monotonic) */
        mid = (uint16_t)((lo + hi) / 2);
        if (f16_value(mid) <= ax) lo = mid; else hi = mid;
    }
    {
        uint16_t c[2];
        int k;
        c[0] = lo;
        c[1] = (uint16_t)(lo + 1); /* 0x7c00 is inf: past 65504 the next step would be 2^16 */
        for (k = 0; k < 2; ++k) {
            double v = c[k] == 0x7c00 ? 65536.0 : f16_value(c[k]), d = fabs(v - ax);
            if (d < best || (d == best && !(c[k] & 1))) best = d, pick = c[k];
        }
        if (ax >= 65536.0) pick = 0x7c00;
    }
    return (uint16_t)(pick | (signbit(x) ? 0x8000 : 0));
}
static uint16_t bf16_nearest(float x) { /* the same, by bf16's two neighbours */
    uint32_t u, t;
    double ax = fabs((double)x), a, b;
    memcpy(&u, &x, 4);
    if (isinf(x)) return (uint16_t)(u >> 16);
    t = u & 0x7fff0000u; /* truncated magnitude */
    {
        float fa, fb;
        uint32_t ua = t, ub = t + 0x10000u;
        memcpy(&fa, &ua, 4);
        memcpy(&fb, &ub, 4);
        a = (double)fa;
        b = ub >= 0x7f800000u ? ldexp(1.0, 128) : (double)fb; /* past FLT_MAX the next step is 2^128: inf */
        t = fabs(ax - a) < fabs(b - ax) || (fabs(ax - a) == fabs(b - ax) && !((t >> 16) & 1u)) ? t : t + 0x10000u;
    }
    return (uint16_t)(((u >> 16) & 0x8000u) | (t >> 16));
}

static void test_16bit(void) {
    uint32_t h, u, bad_exact = 0, bad_back = 0, bad_nan = 0, bad_round = 0, bad_bexact = 0, bad_bback = 0, n = 0;
    for (h = 0; h < 65536; ++h) { /* every pattern: the exact value, and back */
        float f = mha_f32_from_f16((uint16_t)h), b = mha_f32_from_bf16((uint16_t)h);
        uint32_t bu = h << 16, fu;
        float bref;
        int nan16 = ((h >> 10) & 31) == 31 && (h & 1023), nanb = (bu & 0x7fffffffu) > 0x7f800000u;
        memcpy(&bref, &bu, 4);
        if (nan16) {
            memcpy(&fu, &f, 4);
            bad_nan += !(f != f) || (fu & 0x400000u) == 0 || ((fu >> 13) & 0x1ffu) != (h & 0x1ffu) ||
                       mha_f16_from_f32(f) != (h | 0x200u);
        } else {
            bad_exact += (double)f != f16_value((uint16_t)h) || !!signbit(f) != ((h & 0x8000) != 0);
            bad_back += mha_f16_from_f32(f) != h;
        }
        if (nanb)
            bad_nan += !(b != b) || mha_bf16_from_f32(b) != (h | 0x40u);
        else {
            uint32_t got;
            memcpy(&got, &b, 4);
            bad_bexact += got != bu;
            bad_bback += mha_bf16_from_f32(b) != h;
        }
        (void)bref;
    }
    CHECK(!bad_exact && !bad_back && !bad_bexact && !bad_bback && !bad_nan,
          "16-bit floats, all 65536 patterns: exact value %u bad, back %u bad; bf16 %u / %u; NaN %u",
          bad_exact, bad_back, bad_bexact, bad_bback, bad_nan);
    /* float -> 16 bits against the nearest-value search, every SIXTEEN_STRIDE-th float and the edges */
    for (u = 0; ; u += SIXTEEN_STRIDE) {
        float x;
        memcpy(&x, &u, 4);
        if (!(x != x)) {
            ++n;
            bad_round += mha_f16_from_f32(x) != f16_nearest(x) || mha_bf16_from_f32(x) != bf16_nearest(x);
        }
        if (u > 0xffffffffu - SIXTEEN_STRIDE) break;
    }
    {
        static const float edge[] = {INFINITY, 65504.0f, 65519.99f, 65520.0f, 65535.0f, 1e9f, 5.96046448e-8f, 2.98023224e-8f,
                                     2.98023259e-8f, 8.94069672e-8f, 6.10351562e-5f, 6.09755516e-5f, 1e-45f,
                                     3.40282347e38f, 3.3961775e38f, 1.0009765625f, 1.00048828125f, 1.00146484375f};
        size_t k;
        for (k = 0; k < sizeof edge / sizeof edge[0]; ++k) {
            n += 2;
            bad_round += mha_f16_from_f32(edge[k]) != f16_nearest(edge[k]) ||
                         mha_f16_from_f32(-edge[k]) != f16_nearest(-edge[k]) ||
                         mha_bf16_from_f32(edge[k]) != bf16_nearest(edge[k]);
        }
    }
    printf("16-bit floats: all 65536 f16 and bf16 patterns exact and back; %lu floats rounded as the nearest-value "
           "search rounds them (ties, overflow, subnormals): %lu differ\n", (unsigned long)n, (unsigned long)bad_round);
    CHECK(bad_round == 0, "float -> f16/bf16 rounding: %u of %u differ", bad_round, n);
}

int main(void) {
    float wx = 0.0f;
    unsigned long n;
    double e_exp, e_tanh, e_sqrt, e_sqrt_sub;
    int ok;
    e_exp = sweep(mha__expf, exp, -87.3f, 88.7f, &wx, &n);
    printf("expf  on [-87.3, 88.7]: max %.3f ulp at %.9g over %lu points\n", e_exp, (double)wx, n);
    CHECK(e_exp <= 1.0, "expf: %.3f ulp > 1 (the docs' bound)", e_exp);
    e_tanh = sweep(mha__tanhf, tanh, -10.0f, 10.0f, &wx, &n);
    printf("tanhf on [-10, 10]:     max %.3f ulp at %.9g over %lu points\n", e_tanh, (double)wx, n);
    CHECK(e_tanh <= 1.2, "tanhf: %.3f ulp > 1.2 (the docs' bound)", e_tanh);
    e_sqrt = sweep(mha__sqrtf, sqrt, FLT_MIN, FLT_MAX, &wx, &n);
    printf("sqrtf on [FLT_MIN, FLT_MAX]: max %.3f ulp at %.9g over %lu points\n", e_sqrt, (double)wx, n);
    e_sqrt_sub = sweep(mha__sqrtf, sqrt, 1e-45f, FLT_MIN, &wx, &n);
    printf("sqrtf on subnormals:    max %.3f ulp at %.9g over %lu points\n", e_sqrt_sub, (double)wx, n);
    CHECK(e_sqrt <= 1.0 && e_sqrt_sub <= 1.0, "sqrtf: %.3f / %.3f ulp > 1", e_sqrt, e_sqrt_sub);
    /* underflow: exactly 0 below ln(FLT_MIN), never a subnormal */
    ok = mha__expf(-87.34f) == 0.0f && mha__expf(-100.0f) == 0.0f && mha__expf(-1e30f) == 0.0f &&
         mha__expf(-FLT_MAX * 2.0f) == 0.0f && mha__expf(-87.33f) >= FLT_MIN;
    CHECK(ok, "expf: exactly 0 below ln(FLT_MIN), normal just above");
    ok = mha__expf(88.73f) > FLT_MAX && mha__expf(FLT_MAX * 2.0f) > FLT_MAX && mha__expf(0.0f) == 1.0f;
    CHECK(ok, "expf: +inf above ln(FLT_MAX), exp(0) = 1");
    ok = mha__expf(NAN) != mha__expf(NAN) && mha__tanhf(NAN) != mha__tanhf(NAN) && mha__sqrtf(NAN) != mha__sqrtf(NAN) &&
         mha__sqrtf(-1.0f) != mha__sqrtf(-1.0f);
    CHECK(ok, "NaN in, NaN out; sqrt(-1) is NaN");
    ok = mha__tanhf(20.0f) == 1.0f && mha__tanhf(-20.0f) == -1.0f && mha__tanhf(0.0f) == 0.0f &&
         mha__sqrtf(0.0f) == 0.0f && mha__sqrtf(FLT_MAX * 2.0f) > FLT_MAX;
    CHECK(ok, "tanh(+-20) = +-1, tanh(0) = 0, sqrt(0) = 0, sqrt(inf) = inf");
    {
        double top = 0.0, e_rope = rope_sweep(&top), e_slope = 0.0;
        int h, i, exact = 1;
        printf("RoPE cos and sin (theta 2 .. 1e6, r 128, positions 0 .. 8191, 32768, 2^20, 2^24, 1e6, < 0): "
               "max abs error %.3g; at 2^31: %.3g (fp32 spacing at 1: 1.19e-07)\n", e_rope, top);
        /* the long double reference itself is good to |P| 2^-63 rad, or to |P| 2^-52 (2.4e-7 at 2^31)
           where long double is double (ARM, s390x): there only positions below 2^25 are judged */
        CHECK(e_rope <= 1.2e-7 && (top <= 2.5e-7 || LDBL_MANT_DIG < 64),
              "RoPE angles: %.3g > 1.2e-7 or %.3g > 2.5e-7", e_rope, top);
        for (h = 1; h <= 64; ++h)
            for (i = 0; i < h; ++i) {
                int p = 1;
                double want, e;
                while (p * 2 <= h) p *= 2;
                want = i < p ? pow(2.0, -8.0 * (i + 1) / p) : pow(2.0, -4.0 * (2 * (i - p) + 1) / p);
                e = tu_ulp_err(mha__alibi_slope((size_t)h, (size_t)i), want);
                if (e > e_slope) e_slope = e;
                if (p == h && mha__alibi_slope((size_t)h, (size_t)i) != (float)want) exact = 0;
            }
        printf("ALiBi slopes, 1 .. 64 heads: max %.3f ulp from 2^x (exact for powers of two: %s)\n", e_slope,
               exact ? "yes" : "no");
        CHECK(e_slope <= 0.5 && exact, "ALiBi slopes: %.3f ulp, exact %d", e_slope, exact);
    }
    test_16bit();
    return tu_summary();
}
