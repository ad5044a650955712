/* The header included before and after MHA_IMPLEMENTATION, and the
   implementation twice: each part must appear exactly once. */
#include "../mha.h"
#include "../mha.h"
#define MHA_IMPLEMENTATION
#include "../mha.h"
#include "../mha.h"
#include <stdio.h>

int main(void) {
    int ok = mha_status_string(MHA_OK) != NULL && mha_workspace_size(NULL, 1, 1, 1) == 0;
    printf("include twice: %s\n", ok ? "ok" : "FAILED");
    printf("%d passed, %d failed\n", ok, !ok);
    return ok ? 0 : 1;
}
