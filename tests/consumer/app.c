/* A consumer of an installed or fetched mha.h: one forward call. With
   APP_LINKS_IMPL the implementation comes from the library mha::impl. */
#ifndef APP_LINKS_IMPL
#define MHA_IMPLEMENTATION
#endif
#include "mha.h"
#include <stdio.h>
#include <stdlib.h>

int main(void) {
    static const float eye[4] = {1, 0, 0, 1};
    mha_shape s = MHA_INIT;
    mha_weights w = MHA_INIT;
    float q[2] = {1, 0}, k[4] = {1, 0, 0, 1}, v[4] = {2, 0, 0, 4}, out[2];
    size_t bytes;
    void *ws;
    mha_status st;
    s.heads = 1;
    s.d_q = s.d_k = s.d_v = s.p_q = s.p_k = s.p_v = s.p_o = 2;
    w.w_q = w.w_k = w.w_v = w.w_o = eye;
    bytes = mha_workspace_size(&s, 1, 1, 2);
    ws = malloc(bytes);
    st = mha_forward(&s, &w, 1, 1, 2, q, k, v, NULL, out, NULL, ws, bytes);
    free(ws);
    printf("mha %s: %s, out = (%.4f, %.4f)\n", MHA_VERSION_STRING, mha_status_string(st), (double)out[0], (double)out[1]);
    return st == MHA_OK && out[0] > 1.0f && out[1] > 0.0f ? 0 : 1;
}
