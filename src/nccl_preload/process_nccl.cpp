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

}  // namespace stragglar::nccl_preload
