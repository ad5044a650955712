#!/bin/sh
# make install into a scratch prefix, then three consumers of tests/consumer/app.c:
# pkg-config --cflags/--libs mha, CMake find_package(mha), CMake FetchContent
# from this checkout; then make uninstall leaves nothing behind.
# Usage: tests/install_test.sh SCRATCH_DIR   (needs pkg-config and cmake)
set -u
dir=$(mkdir -p "$1" && cd "$1" && pwd)
root=$(pwd)
prefix=$dir/prefix
passed=0
failed=0
check() { # check NAME COMMAND...
    name=$1; shift
    if "$@" > "$dir/log" 2>&1; then
        echo "install: $name: ok"; passed=$((passed + 1))
    else
        cat "$dir/log"; echo "install: $name: FAILED"; failed=$((failed + 1))
    fi
}
rm -rf "$prefix" "$dir/find" "$dir/find02" "$dir/find9" "$dir/fetch" "$dir/stage" "$dir/impl_find" "$dir/impl_fetch"
check "make install PREFIX=$prefix" make -s install PREFIX="$prefix"
check "installed files" sh -c "test -f '$prefix/include/mha.h' && test -f '$prefix/share/licenses/mha/LICENSE' &&
    test -f '$prefix/lib/pkgconfig/mha.pc' && test -f '$prefix/lib/cmake/mha/mhaConfig.cmake' &&
    test -f '$prefix/lib/cmake/mha/mhaConfigVersion.cmake'"
check "DESTDIR stages under it" sh -c "make -s install PREFIX=/opt/mha DESTDIR='$dir/stage' &&
    test -f '$dir/stage/opt/mha/include/mha.h' && grep -q '^prefix=/opt/mha\$' '$dir/stage/opt/mha/lib/pkgconfig/mha.pc'"
check "pkg-config consumer" sh -c "PKG_CONFIG_PATH='$prefix/lib/pkgconfig' &&
    export PKG_CONFIG_PATH && test \"\$(pkg-config --modversion mha)\" = \"\$(sed -n 's/^#define MHA_VERSION_STRING \"\\(.*\\)\"/\\1/p' mha.h)\" &&
    cc \$(pkg-config --cflags mha) tests/consumer/app.c -o '$dir/app_pc' \$(pkg-config --libs mha) && '$dir/app_pc'"
check "CMake find_package(mha MAJOR.MINOR) consumer" sh -c "cmake -S tests/consumer -B '$dir/find' -DMHA_HOW=find \
    -DCMAKE_PREFIX_PATH='$prefix' > /dev/null && cmake --build '$dir/find' > /dev/null && '$dir/find/app'"
minor=$(sed -n 's/^#define MHA_VERSION_MINOR \([0-9]*\)/\1/p' mha.h)
major=$(sed -n 's/^#define MHA_VERSION_MAJOR \([0-9]*\)/\1/p' mha.h)
check "CMake find_package refuses $major.$((minor + 1)) and 9.0 (before 1.0 the minor version must match)" sh -c "
    ! cmake -S tests/consumer -B '$dir/find02' -DMHA_HOW=find -DMHA_WANT=$major.$((minor + 1)) -DCMAKE_PREFIX_PATH='$prefix' &&
    ! cmake -S tests/consumer -B '$dir/find9' -DMHA_HOW=find -DMHA_WANT=9.0 -DCMAKE_PREFIX_PATH='$prefix'"
check "CMake FetchContent consumer (this checkout)" sh -c "cmake -S tests/consumer -B '$dir/fetch' -DMHA_HOW=fetch \
    -DMHA_SOURCE='$root' > /dev/null && cmake --build '$dir/fetch' > /dev/null && '$dir/fetch/app'"
# mha::impl, with no build type (CMake then passes no -O flag): the implementation's file is
# compiled with -O2 all the same, and the app links it without defining MHA_IMPLEMENTATION
for how in find fetch; do
    check "CMake mha::impl ($how), no build type: the implementation compiled with -O2" sh -c "
        cmake -S tests/consumer -B '$dir/impl_$how' -DMHA_HOW=$how -DMHA_IMPL=ON -DMHA_SOURCE='$root' \
            -DCMAKE_PREFIX_PATH='$prefix' > /dev/null &&
        cmake --build '$dir/impl_$how' --verbose > '$dir/impl_$how.log' 2>&1 &&
        grep 'mha_impl\.c' '$dir/impl_$how.log' | grep -q -- '-O2' && '$dir/impl_$how/app'"
done
check "make uninstall removes every file" sh -c "make -s uninstall PREFIX='$prefix' &&
    test -z \"\$(find '$prefix' -type f)\""
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
