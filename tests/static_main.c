/* Links the two MHA_STATIC copies of tests/static_a.c and tests/static_b.c. */
#include <stdio.h>
#include <stddef.h>
size_t static_a_size(void);
size_t static_b_size(void);

int main(void) {
    int ok = static_a_size() != 0 && static_a_size() == static_b_size();
    printf("two MHA_STATIC copies: %s\n", ok ? "ok" : "FAILED");
    printf("%d passed, %d failed\n", ok, !ok);
    return ok ? 0 : 1;
}
