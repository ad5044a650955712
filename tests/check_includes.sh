#!/bin/sh
# The declarations of mha.h (without MHA_IMPLEMENTATION) may include only
# <stddef.h> and <stdint.h>. Lists the headers it includes directly.
cc=${CC:-cc}
direct=$(echo '#include "mha.h"' | $cc -I. -E -H -x c - 2>&1 >/dev/null | grep '^\.\. ' | sed 's/^\.\. //')
bad=0
for h in $direct; do
    case "$h" in
        */stddef.h|*/stdint.h) echo "declarations include $h" ;;
        *) echo "declarations include $h: not allowed"; bad=1 ;;
    esac
done
[ -n "$direct" ] || { echo "no includes found: check broken"; bad=1; }
if [ $bad -eq 0 ]; then echo "1 passed, 0 failed"; else echo "0 passed, 1 failed"; fi
exit $bad
