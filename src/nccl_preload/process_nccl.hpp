// The NCCL the process already has: where the preload library finds every NCCL function it
// forwards to (its own wrappers' real calls and the static runtime's calls inside it).
//
// The library has no DT_NEEDED on libnccl: linking one would make the loader map that NCCL
// before the program's own (a system libnccl.so.2 ahead of PyTorch's wheel, whose newer symbols
// torch then misses), and a process must hold a single NCCL. So every NCCL symbol is looked up
// at run time, never loading anything:
//   1. dlsym(RTLD_NEXT): the next definition after this library in the global scope — a
//      libnccl the program links, or one dlopen'ed with RTLD_GLOBAL;
//   2. a libnccl.so.2 already loaded with RTLD_LOCAL (PyTorch loads its wheel's NCCL as a
//      dependency of a module imported locally), found with dlopen(RTLD_NOLOAD).
#pragma once
#include <nccl.h>

#include <cstdio>
#include <cstdlib>

namespace stragglar::nccl_preload {

// The address of `name` in the process's NCCL, or null when no loaded NCCL defines it.
void* find_nccl_symbol(const char* name) noexcept;

// The path of the NCCL library the calls go to (the one defining ncclGetErrorString), or null
// when the process has loaded none yet.
const char* nccl_library() noexcept;

// find_nccl_symbol as a function pointer; a program that reaches an NCCL call without any NCCL
// loaded cannot go on: the message names the function and the process aborts.
template <class F>
F nccl_function(const char* name) noexcept {
  void* p = find_nccl_symbol(name);
  if (p == nullptr) {
    std::fprintf(stderr,
                 "stragglar-nccl-preload: %s is in no NCCL this process has loaded (the preload library "
                 "uses the program's own libnccl and loads none itself)\n",
                 name);
    std::abort();
  }
  return reinterpret_cast<F>(p);
}

// The process's NCCL functions the preload's exported wrappers forward to (nccl_preload.cpp),
// looked up at the first call that needs one.
struct NcclFunctions {
  decltype(&ncclAllReduce) all_reduce;
  decltype(&ncclGroupStart) group_start;
  decltype(&ncclGroupEnd) group_end;
  decltype(&ncclCommDestroy) comm_destroy;
  decltype(&ncclCommAbort) comm_abort;
  decltype(&ncclCommCount) comm_count;
  decltype(&ncclCommUserRank) comm_user_rank;
};
const NcclFunctions& real();

}  // namespace stragglar::nccl_preload
