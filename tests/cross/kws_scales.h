/* The int8 scales of the keyword-spotting layer (tests/cross/kws_count.c, tests/cross/cmsis_kws.c): inputs
   quantised as x * 120, weights as w * 600 (scale 0.2 / 127 per row, D rows each), the projections and heads
   0.03, the output 0.02. ws: the weights' per-row scales, filled. */
static void kws_scales(mha_q8_scales *sc8, float ws[4][64]) {
    int i;
    for (i = 0; i < 4 * 64; ++i) ws[i / 64][i % 64] = 0.2f / 127.0f;
    sc8->in_q = sc8->in_k = sc8->in_v = 1.0f / 120.0f;
    sc8->q = sc8->k = sc8->v = sc8->heads = 0.03f;
    sc8->out = 0.02f;
    sc8->w_q = ws[0]; sc8->w_k = ws[1]; sc8->w_v = ws[2]; sc8->w_o = ws[3];
}
