#!/usr/bin/env bash
# Installs the build into a temporary prefix and uses it as a user would:
#   1. pkg-config: cc examples/train.c $(pkg-config --cflags --libs ringgrad)
#   2. CMake: a 5-line project with find_package(ringgrad)
#   3. C++: a translation unit that includes <ringgrad.h> and calls the API
# Each program runs examples/train.c's loop (20 steps) and must print its loss lines.
#   install.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1 src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix

cmake --install "$build" --prefix "$prefix" >"$tmp/install.log" || { cat "$tmp/install.log"; exit 1; }
for f in include/ringgrad.h include/ringgrad/tensor.h lib/libringgrad.a lib/libringgrad.so \
         bin/ringgrad-train lib/pkgconfig/ringgrad.pc lib/cmake/ringgrad/ringgradConfig.cmake \
         lib/cmake/ringgrad/ringgradConfigVersion.cmake; do
    [ -e "$prefix/$f" ] || { echo "FAIL: $f not installed"; find "$prefix" | sort; exit 1; }
done
if ls "$prefix"/include/ringgrad/*_impl.h >/dev/null 2>&1; then
    echo "FAIL: internal headers installed"; exit 1
fi

check_run() { # NAME PROGRAM: 20 steps of training print "step 15  loss"
    local out
    out=$("$2" 2>&1) || { echo "FAIL: $1 exited $?"; echo "$out"; exit 1; }
    grep -q "step 15  loss" <<<"$out" || { echo "FAIL: $1 printed no loss"; echo "$out"; exit 1; }
    echo "ok: $1: $(grep 'step 15' <<<"$out")"
}

# 1. pkg-config, against the shared library
export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
cc -std=c11 -Wall -Werror -o "$tmp/train_pc" "$src/examples/train.c" \
    $(pkg-config --cflags --libs ringgrad) -Wl,-rpath,"$prefix/lib"
# (a here-string, not a pipe: under pipefail, grep -q quitting at the first match can kill ldd
# with SIGPIPE and fail the line; that happened once in a fresh-clone CI run)
grep -q "$prefix/lib/libringgrad.so" <<<"$(ldd "$tmp/train_pc")" || { echo "FAIL: not linked to the installed .so"; exit 1; }
check_run "pkg-config build" "$tmp/train_pc"

# 2. a 5-line CMake project
mkdir -p "$tmp/proj"
cp "$src/examples/train.c" "$tmp/proj/"
cat >"$tmp/proj/CMakeLists.txt" <<'CMAKE'
cmake_minimum_required(VERSION 3.22)
project(train C)
find_package(ringgrad 0.9 REQUIRED)
add_executable(train train.c)
target_link_libraries(train PRIVATE ringgrad::ringgrad)
CMAKE
cmake -S "$tmp/proj" -B "$tmp/proj/build" -DCMAKE_PREFIX_PATH="$prefix" >"$tmp/cmake.log" 2>&1 ||
    { cat "$tmp/cmake.log"; exit 1; }
cmake --build "$tmp/proj/build" >"$tmp/cmake-build.log" 2>&1 || { cat "$tmp/cmake-build.log"; exit 1; }
check_run "find_package build" "$tmp/proj/build/train"

# 3. C++: every public header through the umbrella, linked and run
cat >"$tmp/use.cpp" <<'CPP'
#include <ringgrad.h>
#include <cstdio>
int main() {
    const int64_t shape[] = {2, 3};
    const rg_device cpu = {RG_DEV_CPU, 0};
    rg_scope_begin();
    rg_tensor *t = rg_tensor_zeros(RG_F32, 2, shape, cpu);
    if (!t) return std::printf("%s\n", rg_last_error()), 1;
    std::printf("ok: from C++: %s, %zu bytes\n", rg_status_name(RG_OK), rg_tensor_nbytes(t));
    rg_scope_end();
    return 0;
}
CPP
c++ -std=c++17 -Wall -Werror -o "$tmp/use_cpp" "$tmp/use.cpp" $(pkg-config --cflags --libs ringgrad) \
    -Wl,-rpath,"$prefix/lib"
"$tmp/use_cpp"
help=$("$prefix/bin/ringgrad-train" --help) || { echo "FAIL: installed ringgrad-train --help"; exit 1; }
grep -q -- "--batch-size" <<<"$help" || { echo "FAIL: installed ringgrad-train's --help"; exit 1; }
echo "ok: installed ringgrad used from pkg-config, CMake and C++"
