#!/usr/bin/env bash
# Set up, build and run every test (the README's test command; .ci/run calls it).
#   1. Release build with -Werror (CUDA/NCCL code too when nvcc + NCCL are found: it must
#      compile and link even where no GPU can run it), then all CTest tests (unit, MPI; GPU
#      tests skip without a GPU).
#   1b. The preload library built with MPICH too, its tests, and mpi4py's collective tests
#      through it with both MPIs (issue #21).
#   2. ASan + UBSan build of everything CPU-side (core, runtime core, MPI front-end, CLI), and
#      its tests under the sanitizers: unit, runtime (threads) and MPI tests, so a use after
#      free in the runtime fails CI.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/install-python-deps.sh --torch
jobs=$(nproc)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1

cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DSTRAGGLAR_WERROR=ON -DSTRAGGLAR_CUDA="${STRAGGLAR_CUDA:-AUTO}" \
      -DSTRAGGLAR_TORCH="${STRAGGLAR_TORCH:-ON}"
cmake --build build -j"$jobs"
ctest --test-dir build --output-on-failure -j1

# The preload library with MPICH (issue #21, docs/preload.md): a second build directory made with
# MPICH's wrappers, only the preload's targets and tests. Then mpi4py's own buffer-collective
# tests (PyPI sdist, built against each MPI) at 1, 2, 3, 5 processes, with and without the
# preload: they must pass alike.
cmake -S . -B build-mpich -DCMAKE_BUILD_TYPE=Release -DSTRAGGLAR_WERROR=ON -DMPI_C_COMPILER=mpicc.mpich \
      -DMPI_CXX_COMPILER=mpicxx.mpich -DMPIEXEC_EXECUTABLE="$(command -v mpiexec.mpich)" -DSTRAGGLAR_MPIEXEC_FLAGS= \
      -DSTRAGGLAR_CUDA=OFF -DSTRAGGLAR_TORCH=OFF -DSTRAGGLAR_UCX=OFF -DSTRAGGLAR_BENCH=OFF
cmake --build build-mpich -j"$jobs" --target stragglar_pmpi pmpi_check delayed_allreduce
ctest --test-dir build-mpich -L pmpi --output-on-failure -j1
bash scripts/mpi4py-check.sh openmpi build
bash scripts/mpi4py-check.sh mpich build-mpich

cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSTRAGGLAR_SANITIZE=ON -DSTRAGGLAR_WERROR=ON \
      -DSTRAGGLAR_CUDA=OFF -DSTRAGGLAR_BENCH=OFF
cmake --build build-asan -j"$jobs"
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 ctest --test-dir build-asan --output-on-failure -j1
