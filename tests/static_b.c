/* The other of two translation units that each hold a private MHA_STATIC copy. */
#define MHA_STATIC 1
#define MHA_IMPLEMENTATION
#include "../mha.h"

size_t static_b_size(void) {
    mha_shape s = {0};
    s.heads = 2; s.d_q = s.d_k = s.d_v = 4; s.p_q = s.p_k = s.p_v = 2; s.p_o = 4;
    return mha_workspace_size(&s, 1, 1, 3);
}
