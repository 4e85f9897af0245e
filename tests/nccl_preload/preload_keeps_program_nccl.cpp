// A program linked against an NCCL (the build's: the system's), run with
// LD_PRELOAD=libstragglar_nccl_preload.so and no GPU needed: the preload must use that NCCL —
// the only libnccl mapped, the one its calls go to — and track ncclGroupStart's depth through
// ncclGroupEnd and ncclGroupSimulateEnd (both close a group). Exit 0 when all holds, 1 with the
// reasons otherwise.
#include <dlfcn.h>
#include <nccl.h>

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <set>
#include <string>

namespace {

std::string real_path(const char* p) {
  char buf[PATH_MAX];
  return p != nullptr && realpath(p, buf) != nullptr ? buf : std::string(p ? p : "(null)");
}

// Every libnccl file mapped into this process.
std::set<std::string> mapped_nccl() {
  std::set<std::string> files;
  std::ifstream maps("/proc/self/maps");
  for (std::string line; std::getline(maps, line);) {
    const auto slash = line.find('/');
    if (slash != std::string::npos && line.find("libnccl", slash) != std::string::npos)
      files.insert(real_path(line.c_str() + slash));
  }
  return files;
}

int failures = 0;
void check(bool ok, const std::string& what) {
  std::printf("%s: %s\n", ok ? "ok  " : "FAIL", what.c_str());
  failures += ok ? 0 : 1;
}

}  // namespace

int main() {
  // The NCCL this program linked: ncclGetVersion is not wrapped, so the global lookup finds it there.
  Dl_info own{};
  void* version = dlsym(RTLD_DEFAULT, "ncclGetVersion");
  if (version == nullptr || dladdr(version, &own) == 0) {
    std::printf("FAIL: ncclGetVersion not found in the NCCL this program links\n");
    return 1;
  }
  const std::string linked = real_path(own.dli_fname);
  int code = 0;
  ncclGetVersion(&code);
  std::printf("linked NCCL: %s (version code %d)\n", linked.c_str(), code);

  using Library = const char* (*)();
  using Depth = int (*)();
  auto library = reinterpret_cast<Library>(dlsym(RTLD_DEFAULT, "stragglar_nccl_preload_nccl_library"));
  auto depth = reinterpret_cast<Depth>(dlsym(RTLD_DEFAULT, "stragglar_nccl_preload_group_depth"));
  if (library == nullptr || depth == nullptr) {
    std::printf("FAIL: libstragglar_nccl_preload.so is not loaded (run with LD_PRELOAD)\n");
    return 1;
  }
  const std::set<std::string> mapped = mapped_nccl();
  std::string list;
  for (const std::string& f : mapped) list += " " + f;
  check(mapped.size() == 1 && *mapped.begin() == linked, "the only libnccl mapped is the program's:" + list);
  check(real_path(library()) == linked, std::string("the preload's NCCL is the program's: ") + real_path(library()));

  // Group depth: NCCL's own calls run (no GPU needed for an empty group); only the preload's
  // bookkeeping is checked.
  const ncclResult_t s1 = ncclGroupStart();
  const int inside = depth();
  const ncclResult_t e1 = ncclGroupEnd();
  check(inside == 1 && depth() == 0, "ncclGroupStart/End: depth " + std::to_string(inside) + " then " +
                                         std::to_string(depth()) + " (NCCL: " + ncclGetErrorString(s1) + ", " +
                                         ncclGetErrorString(e1) + ")");
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 22, 0)
  ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
  const ncclResult_t s2 = ncclGroupStart();
  ncclGroupStart();  // nested
  const int nested = depth();
  const ncclResult_t e2 = ncclGroupSimulateEnd(&sim);
  const int after_one = depth();
  ncclGroupSimulateEnd(&sim);
  check(nested == 2 && after_one == 1 && depth() == 0,
        "ncclGroupStart x2 / ncclGroupSimulateEnd x2: depth " + std::to_string(nested) + ", " +
            std::to_string(after_one) + ", " + std::to_string(depth()) + " (NCCL: " + ncclGetErrorString(s2) + ", " +
            ncclGetErrorString(e2) + ")");
#endif
  std::printf("preload_keeps_program_nccl: %s\n", failures ? "FAILED" : "PASSED");
  return failures ? 1 : 0;
}
