#!/bin/sh
# The README's quick start, taken from README.md as it stands: it must be examples/quickstart.c
# byte for byte, and it is compiled as C99 and as C++11 with -Wall -Wextra -Werror by each
# compiler present (gcc, g++, clang, clang++) and run. Then the firmware snippet of
# docs/firmware.md, built for this host.
# Usage: tests/readme_snippet.sh [BUILD_DIR [COMPILERS]]
#   COMPILERS: "all" (the default) or "none": make test builds and runs examples/quickstart.c
#   itself, so there the snippet is compared and not compiled again; make matrix compiles it
#   with all four.
B=${1:-build}
compilers=${2:-all}
mkdir -p "$B"
awk '/^## Quick start/ {q = 1} q && /^```c$/ {on = 1; next} on && /^```$/ {exit} on {print}' README.md \
    > "$B/readme_snippet.c"
passed=0
failed=0
if [ -s "$B/readme_snippet.c" ] && cmp -s "$B/readme_snippet.c" examples/quickstart.c; then
    echo "readme snippet: the quick start is examples/quickstart.c"; passed=$((passed + 1))
else
    echo "readme snippet: the quick start of README.md is not examples/quickstart.c: FAILED"; failed=$((failed + 1))
fi
for c in "gcc -std=c99 -x c" "clang -std=c99 -x c" "g++ -std=c++11 -x c++" "clang++ -std=c++11 -x c++"; do
    [ "$compilers" = none ] && break
    set -- $c
    command -v "$1" > /dev/null 2>&1 || { echo "readme snippet: $1 not installed, skipped"; continue; }
    if $c -I. -Wall -Wextra -Werror "$B/readme_snippet.c" -o "$B/readme_snippet" -lm && "$B/readme_snippet"; then
        echo "readme snippet: $c -Wall -Wextra -Werror: compiles and runs"; passed=$((passed + 1))
    else
        echo "readme snippet: $c -Wall -Wextra -Werror: FAILED"; failed=$((failed + 1))
    fi
done
# The firmware snippet (docs/firmware.md, "Firmware and cross-target tests"), compiled for this host as firmware
# developers do for unit tests, with the call its comment names at the sizes of its
# MHA_WORKSPACE_BYTES (heads 2, kv_heads 2, p 4, m 4; n 4, d 8, p_o 8): its static buffer must do.
fw=$(awk '/^## Firmware and cross-target tests/ {q = 1} q && /^```c$/ {on = 1; next} on && /^```$/ {exit} on {print}' docs/firmware.md)
call=$(printf '%s\n' "$fw" | grep -o 'mha_forward[a-z_]*(' | head -n 1)
if [ -z "$fw" ] || [ -z "$call" ]; then
    echo "no firmware snippet with a call found in docs/firmware.md"; failed=$((failed + 1))
else
    cat > "$B/readme_firmware.c" <<EOF2
$fw
static const float wq[8 * 8], wk[8 * 8], wv[8 * 8], wo[8 * 8], x[4 * 8];
int main(void) {
    mha_shape s = {0};
    mha_weights w = {0};
    float out[4 * 8];
    s.heads = 2; s.kv_heads = 2; s.d_q = s.d_k = s.d_v = 8; s.p_q = s.p_k = s.p_v = 4; s.p_o = 8;
    w.w_q = wq; w.w_k = wk; w.w_v = wv; w.w_o = wo;
    return ${call}&s, &w, 1, 4, 4, x, x, x, NULL, out, NULL, ws, sizeof ws) == MHA_OK ? 0 : 1;
}
EOF2
    if gcc -std=c99 -O0 -I. -Wall -Wextra -Werror "$B/readme_firmware.c" -o "$B/readme_firmware" -lm &&
        "$B/readme_firmware"; then
        echo "readme firmware snippet: compiles for this host and its workspace does for $call...)"
        passed=$((passed + 1))
    else
        echo "readme firmware snippet: FAILED on this host (${call}...) with its static workspace)"
        failed=$((failed + 1))
    fi
fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
