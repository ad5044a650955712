#!/bin/sh
# The declarations of mha.h (without MHA_IMPLEMENTATION) may include only
# <stddef.h> and <stdint.h>. Lists the headers it includes directly.
cc=${CC:-cc}
list() { echo '#include "mha.h"' | $1 -I. -E -H -x c - 2>&1 >/dev/null | grep '^\.\. ' | sed 's/^\.\. //'; }
direct=$(list "$cc")
if [ -z "$direct" ] && [ "$cc" != cc ]; then # a compiler without -H (tcc): the header is the same for every compiler
    echo "$cc lists no includes with -H: checked with cc instead"
    direct=$(list cc)
fi
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
