/* The int8 path in plain C (MHA_Q8_NO_DSP=1), a private MHA_STATIC copy, for tests/q8_paths.c to compare the
   core's own int8 kernels (SMLAD on DSP cores, Helium on the M55) with. */
#define MHA_STATIC 1
#define MHA_Q8_NO_DSP 1
#define MHA_IMPLEMENTATION
#include "../mha.h"

mha_status q8p_plain_forward(const mha_shape *s, const mha_q8_weights *w, const mha_q8_params *p, int32_t batch,
                             int32_t n, int32_t m, const int8_t *x, const int8_t *kx, const mha_mask *mask, int8_t *out,
                             void *ws, size_t bytes);
mha_status q8p_plain_forward(const mha_shape *s, const mha_q8_weights *w, const mha_q8_params *p, int32_t batch,
                             int32_t n, int32_t m, const int8_t *x, const int8_t *kx, const mha_mask *mask, int8_t *out,
                             void *ws, size_t bytes) {
    return mha_forward_q8(s, w, p, batch, n, m, x, kx, kx, mask, out, ws, bytes);
}
mha_status q8p_plain_step(const mha_shape *s, const mha_q8_weights *w, const mha_q8_params *p, mha_cache *c,
                          int32_t batch, int32_t m, const int8_t *kx, const int8_t *x, int8_t *out, void *ws,
                          size_t bytes);
mha_status q8p_plain_step(const mha_shape *s, const mha_q8_weights *w, const mha_q8_params *p, mha_cache *c,
                          int32_t batch, int32_t m, const int8_t *kx, const int8_t *x, int8_t *out, void *ws,
                          size_t bytes) {
    const mha_status st = mha_cache_append_q8(s, w, p, c, batch, m, kx, kx, ws, bytes);
    return st != MHA_OK ? st : mha_decode_q8(s, w, p, c, batch, 1, x, x, x, out, ws, bytes);
}
mha_status q16p_plain_forward(const mha_shape *s, const mha_q16_weights *w, const mha_q8_params *p, int32_t batch,
                              int32_t n, int32_t m, const int16_t *x, const int16_t *kx, const mha_mask *mask,
                              int16_t *out, void *ws, size_t bytes);
mha_status q16p_plain_forward(const mha_shape *s, const mha_q16_weights *w, const mha_q8_params *p, int32_t batch,
                              int32_t n, int32_t m, const int16_t *x, const int16_t *kx, const mha_mask *mask,
                              int16_t *out, void *ws, size_t bytes) {
    return mha_forward_q16(s, w, p, batch, n, m, x, kx, kx, mask, out, ws, bytes);
}
mha_status q16p_plain_step(const mha_shape *s, const mha_q16_weights *w, const mha_q8_params *p, mha_cache *c,
                           int32_t batch, int32_t m, const int16_t *kx, const int16_t *x, int16_t *out, void *ws,
                           size_t bytes);
mha_status q16p_plain_step(const mha_shape *s, const mha_q16_weights *w, const mha_q8_params *p, mha_cache *c,
                           int32_t batch, int32_t m, const int16_t *kx, const int16_t *x, int16_t *out, void *ws,
                           size_t bytes) {
    const mha_status st = mha_cache_append_q16(s, w, p, c, batch, m, kx, kx, ws, bytes);
    return st != MHA_OK ? st : mha_decode_q16(s, w, p, c, batch, 1, x, x, x, out, ws, bytes);
}
