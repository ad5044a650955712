// The implementation compiled as C++ and used from C++.
#define MHA_IMPLEMENTATION
#include "../mha.h"
#include <cmath>
#include <cstdio>
#include <vector>

int main() {
    mha_shape s = mha_shape();
    s.heads = 2; s.d_q = s.d_k = s.d_v = 4; s.p_q = s.p_k = s.p_v = 2; s.p_o = 3;
    mha_weight_counts c;
    if (mha_weight_counts_get(&s, &c) != MHA_OK) return 1;
    std::vector<float> wq(c.w_q, 0.1f), wk(c.w_k, 0.2f), wv(c.w_v, 0.3f), wo(c.w_o, 0.5f);
    std::vector<float> q(8, 1.0f), k(12, 1.0f), v(12, 1.0f), out(6, 0.0f); // [2][4], [3][4], [3][4], [2][3]
    mha_weights w = mha_weights();
    w.w_q = wq.data(); w.w_k = wk.data(); w.w_v = wv.data(); w.w_o = wo.data();
    std::vector<unsigned char> ws(mha_workspace_size(&s, 1, 2, 3));
    mha_status st = mha_forward(&s, &w, 1, 2, 3, q.data(), k.data(), v.data(), NULL, out.data(), NULL,
                                ws.data(), ws.size());
    // every value projection is 4 * 0.3 = 1.2; every output 4 heads' entries * 0.5 * 1.2 = 2.4
    bool ok = st == MHA_OK && std::fabs(out[0] - 2.4f) < 1e-5f && std::fabs(out[5] - 2.4f) < 1e-5f;
    std::printf("C++ translation unit: %s\n", ok ? "ok" : "FAILED");
    std::printf("%d passed, %d failed\n", ok ? 1 : 0, ok ? 0 : 1);
    return ok ? 0 : 1;
}
