#!/usr/bin/env bash
# Builds what scripts/gpu-check.sh runs into a folder small enough to carry to the lent GPU
# machine in one device call (docs/gpu.md "First run: the check in one device call").
#
#   scripts/gpu-bundle.sh DIR            (build tree: ${BUILD:-build-gpu-bundle}, reused)
#
# DIR gets (nothing else; at most 60 MiB, checked):
#   bin/     test_cuda_device, test_nccl_allreduce, bench_reduce_kernels, stragglar-bench-gpu,
#            bench_nccl_rounds, nccl_preload_check, preload_keeps_program_nccl +
#            libstragglar_nccl_preload.so:
#            sm_90 (H100/H200), static cudart; libnccl.so.2 and Open MPI's libmpi.so.40 come
#            from the device's system paths
#   torch/   when this machine's python3 imports torch and UCX is found: the prebuilt static
#            libraries the PyTorch module links (core, runtime, UCX engine, NCCL engine; -fPIC),
#            config.hpp, and the headers the device lacks (UCX's, nccl.h). The module itself is
#            built ON THE DEVICE against its own torch and Python by gpu-check.sh
#            (tests/gpu/torch_module/CMakeLists.txt): a module built here would be for this
#            machine's Python and torch (3.11 / 2.15 here; the device: torch 2.11+cu130 and its
#            own Python), and the device lacks LEMON, which the core needs.
#   MANIFEST.txt  the commit, the build, what is inside, sizes.
# Then, in the repository root on the device: bash scripts/gpu-check.sh DIR
# Knobs: BUILD (build tree), CUDA_ARCHS (default 90), JOBS (default 2), BUNDLE_LIMIT_MIB (60).
set -euo pipefail
DIR=${1:?usage: scripts/gpu-bundle.sh DIR}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$ROOT/build-gpu-bundle}
CUDA_ARCHS=${CUDA_ARCHS:-90}
JOBS=${JOBS:-2}
LIMIT_MIB=${BUNDLE_LIMIT_MIB:-60}

with_torch=0
if python3 -c "import torch" >/dev/null 2>&1 && pkg-config --exists ucx 2>/dev/null; then with_torch=1; fi

# One configure: the GPU runtime for sm_90, the tests and tools the check runs, no torch module
# here (STRAGGLAR_TORCH=OFF: its libraries are built, the module is the device's).
cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DSTRAGGLAR_CUDA=ON -DSTRAGGLAR_TORCH=OFF \
  -DCMAKE_CUDA_ARCHITECTURES="$CUDA_ARCHS" -DSTRAGGLAR_TESTS=ON -DSTRAGGLAR_BENCH=ON -DSTRAGGLAR_WERROR=ON >/dev/null
targets=(test_cuda_device test_nccl_allreduce bench_reduce_kernels stragglar_bench_gpu bench_nccl_rounds
         stragglar_nccl_preload nccl_preload_check preload_keeps_program_nccl)  # the NCCL preload
[ $with_torch = 1 ] && targets+=(stragglar_core stragglar_runtime stragglar_ucx stragglar_nccl)
cmake --build "$BUILD" -j"$JOBS" --target "${targets[@]}"

rm -rf "$DIR"
mkdir -p "$DIR/bin"
for b in test_cuda_device test_nccl_allreduce bench_reduce_kernels stragglar-bench-gpu bench_nccl_rounds; do
  cp "$BUILD/$b" "$DIR/bin/"
  strip --strip-debug "$DIR/bin/$b"
done
for b in nccl_preload_check preload_keeps_program_nccl libstragglar_nccl_preload.so; do
  cp "$BUILD/$b" "$DIR/bin/"
  strip --strip-debug "$DIR/bin/$b"
done

if [ $with_torch = 1 ]; then
  mkdir -p "$DIR/torch/lib" "$DIR/torch/include/stragglar"
  for lib in src/libstragglar_core.a src/runtime/libstragglar_runtime.a src/ucx/libstragglar_ucx.a \
             src/cuda/libstragglar_nccl.a; do
    cp "$BUILD/$lib" "$DIR/torch/lib/"
    strip --strip-debug "$DIR/torch/lib/$(basename "$lib")"
  done
  cp "$BUILD/include/stragglar/config.hpp" "$DIR/torch/include/stragglar/"
  ucx_inc=$(pkg-config --variable=includedir ucx)
  for d in ucp uct ucs ucm; do [ -d "$ucx_inc/$d" ] && cp -r "$ucx_inc/$d" "$DIR/torch/include/"; done
  nccl_h=$(grep -m1 '^NCCL_INCLUDE_DIR:' "$BUILD/CMakeCache.txt" | cut -d= -f2 || true)
  [ -n "$nccl_h" ] && [ -f "$nccl_h/nccl.h" ] || nccl_h=$(dirname "$(find /usr/local/cuda*/include /usr/include -maxdepth 1 -name nccl.h 2>/dev/null | head -1)")
  cp "$nccl_h/nccl.h" "$DIR/torch/include/"
  # UCX's run-time libraries, used only where the device has none (gpu-check.sh checks ldconfig).
  mkdir -p "$DIR/torch/ucx-lib"
  ucx_lib=$(pkg-config --variable=libdir ucx)
  for l in ucp uct ucs ucm; do cp -L "$ucx_lib/lib$l.so.0" "$DIR/torch/ucx-lib/"; done
  strip --strip-debug "$DIR/torch/ucx-lib/"*.so.0
fi

{
  echo "stragglar GPU bundle (scripts/gpu-bundle.sh) — run: bash scripts/gpu-check.sh <this folder>"
  echo "commit: $(git -C "$ROOT" rev-parse HEAD 2>/dev/null || echo unknown)$(git -C "$ROOT" diff --quiet 2>/dev/null || echo ' (+ uncommitted changes)')"
  echo "built: $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -n), $(g++ --version | head -1), nvcc $(nvcc --version | grep -o 'V[0-9.]*' | tail -1), CUDA archs $CUDA_ARCHS"
  echo "torch module: $([ $with_torch = 1 ] && echo 'prebuilt libraries in torch/, module built on the device' || echo 'not bundled (no torch or UCX here)')"
  (cd "$DIR" && find . -type f ! -name MANIFEST.txt -printf '%8k KiB  %p\n' | sort -k3)
} >"$DIR/MANIFEST.txt"

size_kib=$(du -sk "$DIR" | cut -f1)
echo "gpu-bundle: $DIR: $(du -sh "$DIR" | cut -f1) ($size_kib KiB), limit $LIMIT_MIB MiB"
if [ "$size_kib" -gt $((LIMIT_MIB * 1024)) ]; then
  echo "gpu-bundle: $DIR is larger than $LIMIT_MIB MiB: a device call carries at most 64 MiB" >&2
  exit 1
fi
