// The process's own NCCL, found at run time (process_nccl.hpp).
#include "process_nccl.hpp"

#include <dlfcn.h>

#include <initializer_list>

namespace stragglar::nccl_preload {

void* find_nccl_symbol(const char* name) noexcept {
  if (void* p = dlsym(RTLD_NEXT, name)) return p;
  // RTLD_NOLOAD only hands back a library already loaded. The reference it adds is kept: calls
  // may come until exit. Each function is looked up once (its caller keeps the address).
  for (const char* soname : {"libnccl.so.2", "libnccl.so"})
    if (void* h = dlopen(soname, RTLD_NOW | RTLD_NOLOAD | RTLD_LOCAL)) return dlsym(h, name);
  return nullptr;
}

const char* nccl_library() noexcept {
  Dl_info info{};
  void* p = find_nccl_symbol("ncclGetErrorString");
  if (p == nullptr || dladdr(p, &info) == 0) return nullptr;
  return info.dli_fname;
}

const NcclFunctions& real() {
  static const NcclFunctions r{
      nccl_function<decltype(&ncclAllReduce)>("ncclAllReduce"),
      nccl_function<decltype(&ncclGroupStart)>("ncclGroupStart"),
      nccl_function<decltype(&ncclGroupEnd)>("ncclGroupEnd"),
      nccl_function<decltype(&ncclCommDestroy)>("ncclCommDestroy"),
      nccl_function<decltype(&ncclCommAbort)>("ncclCommAbort"),
      nccl_function<decltype(&ncclCommCount)>("ncclCommCount"),
      nccl_function<decltype(&ncclCommUserRank)>("ncclCommUserRank"),
  };
  return r;
}

}  // namespace stragglar::nccl_preload

// For checks (found with dlsym): the path of the NCCL the preload's calls go to (null when the
// process has none loaded).
extern "C" const char* stragglar_nccl_preload_nccl_library() { return stragglar::nccl_preload::nccl_library(); }
