#!/usr/bin/env bash
# The installed package as a user sees it (CTest test `package`, label
# `package`, registered by tests/package/CMakeLists.txt):
#   1. cmake --install <build> into a temporary prefix, then move the prefix (relocatable:
#      nothing may point back to where it was installed, the source or the build tree);
#   2. the installed headers are exactly the core ones (+ MPI's with mpi, + NCCL's with nccl;
#      no subdirectories), and the installed CMake files hold no absolute path;
#   3. consumer projects, configured with find_package(stragglar) against the moved prefix:
#      cxx/  C++-only: stragglar::core (synthesize, verify, run schedules) and stragglar::mpi
#            (allreduce under mpirun -np 2); every installed header alone as C++
#      c/    C: stragglar_mpi.h under mpirun -np 2; the C headers alone as C99
#      cuda/ CUDA + C++ against stragglar::nccl, compile and link (and run what needs no GPU)
#      components/  REQUIRED COMPONENTS that are missing fail with the reason.
# Arguments are KEY=VALUE (see tests/package/CMakeLists.txt). Sanitizer builds pass their flags
# as sanitize=...: the consumers are compiled and linked with them (the static libraries need
# the sanitizer runtimes), so they run under the sanitizers too.
set -euo pipefail

declare -A arg=([mpi]=0 [cuda]=0 [sanitize]="" [mpiexec]="" [mpiexec_flags]="" [cuda_compiler]=""
                [cuda_archs]="" [c_compiler]="" [cxx_compiler]="" [build_type]=Release)
for kv in "$@"; do arg[${kv%%=*}]=${kv#*=}; done
for key in source build cmake generator; do
  [ -n "${arg[$key]:-}" ] || { echo "run_package_test.sh: missing $key=..." >&2; exit 2; }
done
cmake="${arg[cmake]}"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/stragglar-package.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
start=$SECONDS
fail() { echo "FAIL: $*" >&2; exit 1; }
# logged NAME CMD...: runs CMD with its output in $tmp/NAME.log, shown when it fails.
logged() {
  local name="$1"
  shift
  if ! "$@" > "$tmp/$name.log" 2>&1; then
    tail -n 60 "$tmp/$name.log" >&2
    fail "$name: $*"
  fi
}

# ---- 1. install, then move --------------------------------------------------------------------
logged install "$cmake" --install "${arg[build]}" --prefix "$tmp/installed"
mv "$tmp/installed" "$tmp/prefix"
prefix="$tmp/prefix"
echo "installed ${arg[build]} and moved it to $prefix"

# ---- 2. what is installed ---------------------------------------------------------------------
mpi_headers="allreduce.hpp stragglar_mpi.h"
nccl_headers="nccl.hpp stragglar_nccl.h"
expected=$( (cd "${arg[source]}/include/stragglar" && ls -- *.h *.hpp) | grep -vxF -e allreduce.hpp -e stragglar_mpi.h \
                -e nccl.hpp -e stragglar_nccl.h
            echo config.hpp
            [ "${arg[mpi]}" = 1 ] && printf '%s\n' $mpi_headers
            [ "${arg[cuda]}" = 1 ] && printf '%s\n' $nccl_headers
            true)
expected=$(sort <<<"$expected")
actual=$(cd "$prefix/include/stragglar" && find . -mindepth 1 | sed 's|^\./||' | sort)
if [ "$expected" != "$actual" ]; then
  diff <(echo "$expected") <(echo "$actual") >&2 || true
  fail "installed headers (< expected, > installed) for mpi=${arg[mpi]} cuda=${arg[cuda]}"
fi
echo "headers: $(wc -l <<<"$actual") installed, as expected for mpi=${arg[mpi]} cuda=${arg[cuda]}"

config=$(find "$prefix" -name stragglarConfig.cmake)
[ -n "$config" ] || fail "no stragglarConfig.cmake under $prefix"
cmake_dir=$(dirname "$config")
# No path of this machine: neither the source, the build tree, the first prefix, nor any
# absolute path in a target property (dependencies are found again by stragglarConfig.cmake).
for path in "${arg[source]}" "${arg[build]}" "$tmp/installed"; do
  if grep -rnF -- "$path" "$cmake_dir" >&2; then fail "installed CMake files mention $path"; fi
done
if grep -nE '^ *(INTERFACE_[A-Z_]+|IMPORTED_[A-Z_]+) +"([^"]*;)?/' "$cmake_dir"/stragglar*Targets*.cmake >&2; then
  fail "an exported target property holds an absolute path"
fi
for target in stragglar_warnings stragglar_lemon nlohmann_json LEMON; do
  if grep -nF -- "$target" "$cmake_dir"/stragglar*Targets*.cmake >&2; then fail "exported targets mention $target"; fi
done
echo "CMake files: $(ls "$cmake_dir" | tr '\n' ' ')— no absolute paths, no build-only targets"

# ---- 3. consumer projects ---------------------------------------------------------------------
common=(-G "${arg[generator]}" -DCMAKE_BUILD_TYPE="${arg[build_type]}" -DCMAKE_PREFIX_PATH="$prefix")
[ -n "${arg[c_compiler]}" ] && common+=(-DCMAKE_C_COMPILER="${arg[c_compiler]}")
[ -n "${arg[cxx_compiler]}" ] && common+=(-DCMAKE_CXX_COMPILER="${arg[cxx_compiler]}")
if [ -n "${arg[sanitize]}" ]; then
  common+=(-DCMAKE_C_FLAGS="${arg[sanitize]}" -DCMAKE_CXX_FLAGS="${arg[sanitize]}"
           -DCMAKE_EXE_LINKER_FLAGS="${arg[sanitize]}")
fi
with_mpi=OFF
[ "${arg[mpi]}" = 1 ] && with_mpi=ON
IFS=',' read -r -a mpiexec_flags <<<"${arg[mpiexec_flags]}"  # CMake lists arrive comma-separated
mpirun2() { "${arg[mpiexec]}" "${mpiexec_flags[@]}" -n 2 "$@"; }
# consumer NAME [cmake args...]: configure and build tests/package/NAME against the prefix.
consumer() {
  local name="$1"
  shift
  logged "$name-configure" "$cmake" -S "${arg[source]}/tests/package/$name" -B "$tmp/$name" "${common[@]}" "$@"
  grep -E "headers: |stragglar: optional" "$tmp/$name-configure.log" | sed "s/^-- /$name: /" || true
  logged "$name-build" "$cmake" --build "$tmp/$name" --parallel 2
  echo "$name: configured and built ($((SECONDS - start)) s so far)"
}

consumer cxx -DWITH_MPI=$with_mpi
"$tmp/cxx/core_consumer"
if [ "${arg[mpi]}" = 1 ]; then mpirun2 "$tmp/cxx/mpi_consumer"; fi

consumer c -DWITH_MPI=$with_mpi
if [ "${arg[mpi]}" = 1 ]; then mpirun2 "$tmp/c/c_consumer"; else "$tmp/c/c_consumer"; fi

if [ "${arg[cuda]}" = 1 ]; then
  cuda_args=()
  [ -n "${arg[cuda_compiler]}" ] && cuda_args+=(-DCMAKE_CUDA_COMPILER="${arg[cuda_compiler]}")
  [ -n "${arg[cuda_archs]}" ] && cuda_args+=(-DCMAKE_CUDA_ARCHITECTURES="${arg[cuda_archs]//,/;}")
  consumer cuda "${cuda_args[@]}"
  "$tmp/cuda/nccl_consumer"
else
  echo "cuda: skipped (the package has no nccl component: built without CUDA + NCCL)"
fi

# components/: REQUIRED COMPONENTS that cannot be had fail at configure time, saying why.
# expect_components OK|FAIL REQUEST NEEDLE
expect_components() {
  local want="$1" request="$2" needle="$3" rc=0
  "$cmake" -S "${arg[source]}/tests/package/components" -B "$tmp/components-$want-${request//;/-}" \
           -DCMAKE_PREFIX_PATH="$prefix" -DREQUEST="$request" > "$tmp/components.log" 2>&1 || rc=$?
  if { [ "$want" = OK ] && [ $rc -ne 0 ]; } || { [ "$want" = FAIL ] && [ $rc -eq 0 ]; } ||
     ! grep -qF -- "$needle" "$tmp/components.log"; then
    cat "$tmp/components.log" >&2
    fail "find_package(stragglar REQUIRED COMPONENTS $request): wanted $want with \"$needle\""
  fi
  echo "components: REQUIRED COMPONENTS $request -> $want ($needle)"
}
expect_components OK core "stragglar components found: core"
expect_components FAIL "core;bogus" "unknown component 'bogus' (known: core, mpi, nccl, pmpi)"
if [ "${arg[mpi]}" = 1 ]; then
  expect_components FAIL mpi "component mpi needs the C or CXX language enabled in this project"
  # The preload library: its component, the library and the launcher beside it.
  expect_components OK pmpi "stragglar components found: pmpi"
  ls "$prefix"/lib*/libstragglar_pmpi_*.so >/dev/null 2>&1 || fail "no libstragglar_pmpi_<mpi>.so installed"
  [ -x "$prefix/bin/stragglar-run" ] || fail "no bin/stragglar-run installed"
else
  expect_components FAIL mpi "component mpi was not built"
fi
if [ "${arg[cuda]}" = 0 ]; then
  expect_components FAIL nccl "component nccl was not built"
fi

echo "package test passed in $((SECONDS - start)) s"
