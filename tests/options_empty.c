/* Every option macro defined with no value, as stb users write them, means 1
   (a strict -Werror build of this file, run by make test). */
#define MHA_STATIC
#define MHA_NO_STATUS_STRINGS
#define MHA_NO_LIBM
#define MHA_NO_ADDITIVE
#define MHA_FAST
#define MHA_NO_SIMD
#define MHA_IMPLEMENTATION
#include "../mha.h"
#include <stdio.h>
#include <string.h>

#if MHA_STATIC != 1 || MHA_NO_STATUS_STRINGS != 1 || MHA_NO_LIBM != 1 || MHA_NO_ADDITIVE != 1 || MHA_FAST != 1 || \
    MHA_NO_SIMD != 1
#error "an option defined empty is not 1"
#endif

int main(void) {
    /* MHA_NO_STATUS_STRINGS: ""; MHA_NO_ADDITIVE: additive scoring refused; MHA_FAST: a packed size */
    mha_shape s = MHA_INIT;
    int ok;
    s.heads = 1; s.d_q = s.d_k = s.d_v = s.p_q = s.p_k = s.p_v = s.p_o = 4;
    ok = mha_status_string(MHA_ERR_NULL)[0] == '\0' && mha_packed_weights_size(&s) > 0;
    s.score = MHA_SCORE_ADDITIVE;
    s.p_a = 2;
    ok = ok && mha_workspace_size(&s, 1, 1, 1) == 0;
    { /* and mha_build_info says so */
        mha_build b = mha_build_info();
        ok = ok && b.fast == 1 && strcmp(b.vector, "portable") == 0 && b.no_libm == 1 && b.no_additive == 1 &&
             b.no_status_strings == 1 && b.no_simd == 1 && strcmp(b.version, MHA_VERSION_STRING) == 0;
    }
    printf("options defined empty mean 1: %s\n", ok ? "yes" : "no");
    printf("%d passed, %d failed\n", ok, !ok);
    return !ok;
}
