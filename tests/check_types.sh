#!/bin/sh
# The typed setters of mha.h (mha_weights_f32, _f16, _bf16): the right element type compiles
# cleanly under -Werror, the common wrong ones are refused (a warning made an error in C, an
# error in C++) with the compiler's pointer-type message. Compiles only (-c).
cc=${CC:-cc}
cxx=${CXX:-c++}
tmp=${TMPDIR:-/tmp}/mha_types.$$
mkdir -p "$tmp" || exit 1
trap 'rm -rf "$tmp"' EXIT
pass=0 fail=0
# case NAME EXPECT(ok|refused) SETTER ARRAY_TYPE
case_() {
    name=$1 expect=$2 setter=$3 type=$4
    cat > "$tmp/t.c" <<EOT
#include <stdint.h>
#include "mha.h"
int main(void) {
    static $type a[4], b[4], c[4], d[4];
    mha_weights w = MHA_INIT;
    $setter(&w, a, b, c, d);
    return w.w_q == (const void *)a ? (int)w.type : -1;
}
EOT
    for lang in c c++; do
        if [ $lang = c ]; then comp=$cc; else comp=$cxx; fi
        command -v "$comp" >/dev/null 2>&1 || { echo "$name ($lang): $comp not found, skipped"; continue; }
        if $comp -x $lang -I. -Werror -c "$tmp/t.c" -o "$tmp/t.o" >"$tmp/log" 2>&1; then got=ok; else got=refused; fi
        if [ $got = refused ] && ! grep -qi 'incompatible\|cannot convert\|invalid conversion\|no known conversion' "$tmp/log"; then
            got="refused for another reason: $(head -n 3 "$tmp/log")"
        fi
        if [ "$got" = "$expect" ]; then
            pass=$((pass + 1)); echo "$name ($lang, $comp): $got as expected"
        else
            fail=$((fail + 1)); echo "$name ($lang, $comp): expected $expect, got $got"
        fi
    done
}
case_ "float arrays to mha_weights_f32" ok mha_weights_f32 float
case_ "uint16_t arrays to mha_weights_f16" ok mha_weights_f16 uint16_t
case_ "uint16_t arrays to mha_weights_bf16" ok mha_weights_bf16 uint16_t
case_ "double arrays to mha_weights_f32" refused mha_weights_f32 double
case_ "float arrays to mha_weights_f16" refused mha_weights_f16 float
case_ "float arrays to mha_weights_bf16" refused mha_weights_bf16 float
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
