#!/bin/sh
# Prints how to run an i386 (-m32) program here: nothing where the kernel runs
# them itself, else "qemu-i386" (some x86-64 kernels are built without 32-bit
# support, and then exec fails with "Exec format error").
# Usage: RUN32=$(sh tests/runner32.sh DIR)   (DIR: where to build the probe)
dir=${1:-build}
mkdir -p "$dir"
printf 'int main(void) { return 0; }\n' > "$dir/probe32.c"
if gcc -m32 "$dir/probe32.c" -o "$dir/probe32" 2> /dev/null && "$dir/probe32" 2> /dev/null; then
    echo ""
else
    echo "qemu-i386"
fi
