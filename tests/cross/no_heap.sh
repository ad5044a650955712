#!/bin/sh
# Checks with nm that a firmware image links no heap: no malloc, free,
# calloc, realloc (nor newlib's _malloc_r, _free_r). Usage: no_heap.sh ELF
bad=$(arm-none-eabi-nm "$1" | grep -E ' (malloc|free|calloc|realloc|_malloc_r|_free_r)$')
if [ -z "$bad" ] && arm-none-eabi-nm "$1" > /dev/null 2>&1; then
    echo "$1: no malloc/free/calloc/realloc (nm)"
    echo "1 passed, 0 failed"
else
    printf '%s\n' "$bad"
    echo "$1: links a heap"
    echo "0 passed, 1 failed"
fi
