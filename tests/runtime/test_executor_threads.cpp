// The executor without MPI: n ranks as threads over an in-process transport, every
// algorithm × n in [2, 9] × StragglAR pipelining K ∈ {1, 2, 3} × counts, checked exactly.
// Covers compile() + Executor + CpuDevice for odd n and many chunkings in a fraction of a
// second, and runs cheaply under ASan/UBSan.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "stragglar/error.hpp"
#include "runtime/executor.hpp"
#include "stragglar/plan.hpp"
#include "runtime/cpu_device.hpp"
#include "stragglar/synthesize.hpp"
#include "stragglar/verify.hpp"
#include "thread_transport.hpp"

using namespace stragglar;

namespace {

int failures = 0, runs = 0, skipped = 0;

template <typename T>
void run(const Schedule& s, std::size_t count, DataType t, ReduceOp op, const std::string& what) {
  const int n = s.nranks;
  testing::ThreadHub hub(n);
  std::vector<std::vector<T>> bufs(static_cast<std::size_t>(n), std::vector<T>(count));
  for (int r = 0; r < n; ++r)
    for (std::size_t i = 0; i < count; ++i)
      bufs[static_cast<std::size_t>(r)][i] = static_cast<T>((r * 37 + static_cast<int>(i) * 11) % 23 - 11);
  std::vector<T> want(count);
  for (std::size_t i = 0; i < count; ++i) {
    T acc = bufs[0][i];
    for (int r = 1; r < n; ++r) {
      const T x = bufs[static_cast<std::size_t>(r)][i];
      acc = op == ReduceOp::max ? std::max(acc, x) : static_cast<T>(acc + x);
    }
    want[i] = acc;
  }
  std::vector<std::string> errors(static_cast<std::size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      try {
        const Plan plan = compile(s, r);
        testing::ThreadTransport transport(hub, r);
        CpuDevice device;
        Executor exec(transport, device);
        const std::size_t sb = Executor::scratch_bytes(plan, count, t);
        void* scratch = device.allocate(sb);
        exec.run(plan, bufs[static_cast<std::size_t>(r)].data(), count, t, op, scratch, sb);
        device.deallocate(scratch);
      } catch (const std::exception& e) {
        errors[static_cast<std::size_t>(r)] = e.what();
      }
    });
  }
  for (auto& th : threads) th.join();
  ++runs;
  if (std::getenv("TRACE")) { std::printf("%s\n", what.c_str()); std::fflush(stdout); }
  for (int r = 0; r < n; ++r) {
    if (!errors[static_cast<std::size_t>(r)].empty()) {
      if (failures++ < 20) std::printf("FAIL %s rank %d: %s\n", what.c_str(), r, errors[static_cast<std::size_t>(r)].c_str());
      return;
    }
    if (bufs[static_cast<std::size_t>(r)] != want) {
      if (failures++ < 20) std::printf("FAIL %s: rank %d holds a wrong result\n", what.c_str(), r);
      return;
    }
  }
}

}  // namespace

int main() {
  for (Algorithm a : scheduled_algorithms()) {
    for (int n = 2; n <= 9; ++n) {
      for (int k : {1, 2, 3}) {
        if (k > 1 && a != Algorithm::stragglar) continue;
        for (int straggler : {n - 1, 0}) {
          if (straggler == 0 && a != Algorithm::stragglar && a != Algorithm::broadcast) continue;
          SynthOptions so;
          so.straggler = straggler;
          so.pipeline = k;
          Schedule s;
          try {
            s = synthesize(a, n, so);
            verify_or_throw(s);
          } catch (const Error& e) {
            ++skipped;
            std::printf("skip %s n=%d K=%d straggler=%d: %s\n", to_string(a), n, k, straggler, e.what());
            continue;
          }
          for (std::size_t count : {std::size_t{0}, std::size_t{1}, std::size_t{5}, static_cast<std::size_t>(n + 1),
                                    std::size_t{1000}}) {
            const std::string what = std::string(to_string(a)) + " n=" + std::to_string(n) + " K=" + std::to_string(k) +
                                     " straggler=" + std::to_string(straggler) + " count=" + std::to_string(count);
            run<double>(s, count, DataType::float64, ReduceOp::sum, what + " float64 sum");
            run<std::int32_t>(s, count, DataType::int32, ReduceOp::max, what + " int32 max");
          }
        }
      }
    }
  }
  std::printf("%s: %d runs, %d failures, %d schedules skipped\n", failures ? "FAIL" : "PASS", runs, failures, skipped);
  return failures ? 1 : 0;
}
