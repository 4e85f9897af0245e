// UcxTransport's hot path allocates nothing once warmed up: after a few calls of
// every algorithm's plan through the executor, the last 20 of 60 more calls make no heap allocation on any
// rank — neither ours (operator new) nor UCX's (malloc/calloc/realloc, counted by
// interposing them in this binary: UCX's request and descriptor pools must have grown
// during the warm-up).
//
//   test_ucx_hot_path --np N     the launcher (RANK/WORLD_SIZE/STRAGGLAR_STORE_DIR, no MPI)
#include <cstdio>
#include <cstdlib>
#include <new>
#include <string>
#include <vector>

#include "runtime/cpu_device.hpp"
#include "runtime/executor.hpp"
#include "stragglar/plan.hpp"
#include "stragglar/synthesize.hpp"
#include "ucx/kv_store.hpp"
#include "ucx/local_launcher.hpp"
#include "ucx/transport_collectives.hpp"
#include "ucx/ucx_transport.hpp"

namespace {
bool g_counting = false;
long g_news = 0, g_mallocs = 0;
}  // namespace

extern "C" {
void* __libc_malloc(std::size_t);
void* __libc_calloc(std::size_t, std::size_t);
void* __libc_realloc(void*, std::size_t);
void __libc_free(void*);
void* malloc(std::size_t bytes) {
  if (g_counting) ++g_mallocs;
  return __libc_malloc(bytes);
}
void* calloc(std::size_t n, std::size_t bytes) {
  if (g_counting) ++g_mallocs;
  return __libc_calloc(n, bytes);
}
void* realloc(void* p, std::size_t bytes) {
  if (g_counting) ++g_mallocs;
  return __libc_realloc(p, bytes);
}
}

void* operator new(std::size_t bytes) {
  if (g_counting) ++g_news;
  if (void* p = __libc_malloc(bytes == 0 ? 1 : bytes)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t bytes) { return operator new(bytes); }
// The nothrow forms too (std::stable_sort's temporary buffer uses them): all of operator new
// must pair with the operator delete above, or ASan reports new-vs-free mismatches.
void* operator new(std::size_t bytes, const std::nothrow_t&) noexcept {
  try {
    return operator new(bytes);
  } catch (...) {
    return nullptr;
  }
}
void* operator new[](std::size_t bytes, const std::nothrow_t& t) noexcept { return operator new(bytes, t); }
void operator delete(void* p) noexcept { __libc_free(p); }
void operator delete[](void* p) noexcept { __libc_free(p); }
void operator delete(void* p, std::size_t) noexcept { __libc_free(p); }
void operator delete[](void* p, std::size_t) noexcept { __libc_free(p); }

using namespace stragglar;

int main(int argc, char** argv) {
  const char* rank_env = std::getenv("RANK");
  if (rank_env == nullptr) {
    LaunchOptions o;
    o.nprocs = argc > 2 ? std::atoi(argv[2]) : 4;
    o.argv = {self_executable()};
    o.timeout_s = 300;
    int bad = 0;
    for (const ProcessExit& e : launch_local(o)) {
      if (!e.ok()) ++bad;
      std::printf("%s %s\n", e.ok() ? "  " : "FAIL", e.describe().c_str());
    }
    std::printf("%s: hot path n=%d\n", bad ? "FAIL" : "PASS", o.nprocs);
    return bad ? 1 : 0;
  }
  const int rank = std::atoi(rank_env), n = std::atoi(std::getenv("WORLD_SIZE"));
  int failures = 0;
  try {
    DirectoryStore store(std::getenv("STRAGGLAR_STORE_DIR"));
    auto t = UcxTransport::connect(store, "hot", rank, n, 60);
    CpuDevice device;
    Executor exec(*t, device);
    // Large enough for rendezvous messages, with a count that leaves uneven chunks.
    std::vector<float> buf(300007, 1.0f);
    for (Algorithm a : scheduled_algorithms()) {
      SynthOptions so;
      so.pipeline = a == Algorithm::stragglar ? 2 : 1;
      const Plan plan = compile(synthesize(a, n, so), rank);
      const std::size_t sb = Executor::scratch_bytes(plan, buf.size(), DataType::float32);
      void* scratch = device.allocate(sb);
      barrier(*t);
      for (int i = 0; i < 3; ++i) exec.run(plan, buf.data(), buf.size(), DataType::float32, ReduceOp::max, scratch, sb);
      // UCX grows its memory pools (e.g. for messages that arrive before their receive) when the
      // timing first needs more: rare and bounded, unlike an allocation per call, which shows in
      // every window. So 3 windows of 20 calls on every rank (the same calls everywhere); the
      // last must allocate nothing.
      for (int window = 0; window < 3; ++window) {
        g_news = g_mallocs = 0;
        g_counting = true;
        for (int i = 0; i < 20; ++i)
          exec.run(plan, buf.data(), buf.size(), DataType::float32, ReduceOp::max, scratch, sb);
        g_counting = false;
      }
      if (g_news != 0 || g_mallocs != 0) {
        std::fprintf(stderr, "[rank %d] FAIL %s: %ld operator new, %ld malloc/calloc/realloc in 20 warm calls\n", rank,
                     to_string(a), g_news, g_mallocs);
        ++failures;
      }
      device.deallocate(scratch);
    }
    for (float v : buf)
      if (v != 1.0f) {
        std::fprintf(stderr, "[rank %d] FAIL: wrong result %g\n", rank, static_cast<double>(v));
        ++failures;
        break;
      }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "[rank %d] FAIL: %s\n", rank, e.what());
    ++failures;
  }
  return failures ? 1 : 0;
}
