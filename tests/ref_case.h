/* One reference case: inputs, weights, mask and the expected results.
   The data comes from tests/gen_vectors.py (PyTorch). */
#ifndef REF_CASE_H
#define REF_CASE_H
#include "../mha.h"

typedef struct ref_case {
    const char *group, *name;
    mha_shape shape;
    int32_t batch, n, m;
    const float *queries, *keys, *values; /* [batch][n][d_q], [batch][m][d_k], [batch][m][d_v] */
    mha_weights w;
    mha_mask mask;
    const float *out;  /* [batch][n][p_o] */
    const float *attn; /* NULL or [batch][heads][n][m] */
} ref_case;
#endif
