#!/usr/bin/env bash
# scripts/gpu-pack.sh [BUILD_DIR] [DEST]: packs what scripts/gpu-check.sh needs on a GPU machine
# that has a CUDA driver, cuBLAS, cuDNN 9 and NCCL but none of the project's Debian packages:
#   DEST/pkg.tar.xz  the CUDA and NCCL test programs, the CPU tests that run per kernel set,
#                    ringgrad-bench and ringgrad-train of BUILD_DIR (a CUDA build), and every
#                    shared library they need that is not glibc's or CUDA's (gpu-check.sh uses
#                    one only where the machine lacks it);
#   DEST/data/       the Fashion-MNIST files, for a short training run.
# Defaults: BUILD_DIR=build, DEST=.gpu (ignored by git through .git/info/exclude).
set -euo pipefail
build=${1:-build}
dest=${2:-.gpu}
[ -x "$build/tests/test_cuda_ops" ] || { echo "gpu-pack: no CUDA build in $build" >&2; exit 1; }
# The CPU tests that run once per kernel set (tests/tensor/run_isa.sh): the GPU machines lent so
# far have AVX-512 Xeons, where gpu-check.sh's "cpu" step runs them with RG_ISA=avx512.
CPU_ISA_TESTS="test_conv2d test_elementwise test_kernels test_dropout test_maxpool2d test_batchnorm2d
    test_bcast test_reduce test_cross_entropy test_matmul test_gradcheck test_layers test_reference
    test_optim test_dist"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp"/{bin,tests,lib} "$dest/data"
cp "$build"/bin/ringgrad-bench "$build"/bin/ringgrad-train "$tmp/bin/"
for t in test_cuda_ops test_cuda_kernels test_cuda_alloc test_cuda_comm test_cuda_link \
         test_cuda_per_thread test_block_cache test_nccl cuda_streams mpi_nccl mpi_nccl_ddp \
         $CPU_ISA_TESTS; do
    cp "$build/tests/$t" "$tmp/tests/"
done
# Every library the programs load but glibc's and the GPU's own.
ldd "$tmp"/bin/* "$tmp"/tests/* | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' | sort -u |
    grep -v -E '^(libc|libm|libdl|libpthread|librt|libresolv|libcublas|libcublasLt|libcudart|libcudnn|libnccl)\.' |
    while read -r name path; do cp -L "$path" "$tmp/lib/$name"; done
tar -C "$tmp" -cf - bin tests lib | xz -T0 -6 >"$dest/pkg.tar.xz"
data=${RG_DATA_DIR:-/usr/share/datasets/fashion-mnist}
cp "$data"/*.gz "$dest/data/" 2>/dev/null || echo "gpu-pack: no Fashion-MNIST in $data (the training run will be skipped)"
# The tests look for their data files in the source tree they were built from.
sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$build/CMakeCache.txt" >"$dest/source_dir"
du -sh "$dest"/pkg.tar.xz "$dest"/data
