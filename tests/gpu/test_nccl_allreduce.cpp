// GPU tests of stragglarNcclAllReduce / stragglar::nccl_allreduce: one MPI process per rank;
// MPI bootstraps the ncclUniqueId and compares results across ranks.
//
//   test_nccl_allreduce [all|correctness|special|one-rank|mismatch|streams|errors|timeout]
//
// all (default) runs every section but `timeout`, which needs STRAGGLAR_TIMEOUT_S <= 10 and
// leaves a communicator aborted: run it in its own process (CTest gpu_nccl_timeout_n2).
//
// correctness  every algorithm of the table (schedules, native = ncclAllReduce, auto): every
//              dtype × op at one count, and every count {0, 1, 13, 65539} × in/out of place ×
//              straggler {0, n−1} at fp32 sum and bf16 max (n = 2: also fp16 prod, int32 avg;
//              ranks take turns on one GPU over loopback sockets). Inputs
//              with exactly representable results, compared bit for bit with a float64
//              reference rounded to the dtype (native avg of floating types: NCCL pre-multiplies
//              by 1/n, compared within rounding); random fp32/fp64/fp16/bf16 sums within a
//              rounding bound; a delayed straggler (GPU sleep kernel on its stream). Every case:
//              identical bits on every rank, sendbuf unchanged, the bytes after recvbuf's count
//              unchanged.
// special      NaN, −NaN, ±Inf, −0, +0 on each rank in turn, fp32/fp64/fp16/bf16 × sum/prod/min/
//              max: identical bits on every rank and the documented rule (a NaN result is the
//              canonical quiet NaN; min/max are IEEE 754-2019 minimum/maximum, −0 < +0). native
//              (ncclAllReduce, and auto when it ran native) must give identical bits; whether it
//              also follows the rule is reported, not required. auto with every schedule rated
//              free must run a schedule within 20 calls of each dtype × op, following the rule.
// one-rank     a communicator of one rank: every algorithm, in/out of place, returns the input.
// mismatch     count, dtype, op, algorithm, straggler, pipeline differing on rank 0 →
//              stragglar_mismatch on every rank naming the field, buffers untouched, and the
//              communicator still works.
// streams      calls alternating between two streams with no host wait between them (the
//              stream hand-off orders them), and a call after the previous call's stream was
//              destroyed.
// errors       invalid arguments rejected before anything is enqueued; a call on a stream being
//              captured into a CUDA graph refused the same way (the capture ends cleanly).
// timeout      first, on a communicator of its own, rank 0 comes 2.5 × STRAGGLAR_TIMEOUT_S late to
//              a later auto call: every call succeeds exactly (auto's per-call waits are not
//              bounded on NCCL); then rank 0 never calls on a fresh non-blocking communicator:
//              every other rank gets stragglar_timeout from the first-call agreement within
//              [0.9, 2] × STRAGGLAR_TIMEOUT_S, a later call fails at once, and ncclCommAbort ends
//              the pending work.
//
// Every section but one-rank and errors needs n >= 2 (at n = 1 it exits 2: it would test nothing).
// Every rank takes the same path: each case agrees across ranks on whether the call succeeded
// before any collective that depends on it. The last line names the algorithms that ran (the
// script scripts/gpu-check.sh requires all of them at n = 2, 4, 8) and says PASSED or FAILED.
// No GPU (tests/gpu/cuda_presence.hpp): "no CUDA device: skipped", exit 77 (CTest
// SKIP_RETURN_CODE); any other CUDA error fails. More ranks than GPUs on a node: every rank gets
// its own NCCL_HOSTID and the socket transport (docs/gpu.md "Tests").
#include <cuda_runtime_api.h>
#include <mpi.h>
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "cuda_check.hpp"
#include "cuda_presence.hpp"
#include "mpi_gpu_place.hpp"
#include "kernels.hpp"
#include "nccl_front.hpp"
#include "runtime/element.hpp"
#include "stragglar/algorithm.hpp"
#include "stragglar/nccl.hpp"
#include "stragglar/stragglar_nccl.h"

using namespace stragglar;

namespace {

constexpr int kSkip = 77;
constexpr double kStreamWaitS = 120;  // a stream that runs longer than this is hung
int g_rank = 0, g_n = 1;
long g_failures = 0, g_checked = 0;
std::map<std::string, long> g_cases_run;  // per algorithm: cases that ran and were checked

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

void fail(const std::string& what) {
  if (g_failures < 40) std::fprintf(stderr, "[rank %d] FAIL: %s\n", g_rank, what.c_str());
  ++g_failures;
}

#define CK_CUDA(x)                                                                            \
  do {                                                                                        \
    cudaError_t e_ = (x);                                                                     \
    if (e_ != cudaSuccess) {                                                                  \
      std::fprintf(stderr, "[rank %d] %s failed: %s\n", g_rank, #x, cudaGetErrorString(e_)); \
      MPI_Abort(MPI_COMM_WORLD, 2);                                                           \
    }                                                                                         \
  } while (0)
#define CK_NCCL(x)                                                                            \
  do {                                                                                        \
    ncclResult_t r_ = (x);                                                                    \
    if (r_ != ncclSuccess) {                                                                  \
      std::fprintf(stderr, "[rank %d] %s failed: %s\n", g_rank, #x, ncclGetErrorString(r_)); \
      MPI_Abort(MPI_COMM_WORLD, 2);                                                           \
    }                                                                                         \
  } while (0)

// Waits for `s` with a bound: a hung stream ends the job with a message instead of the test
// timing out silently.
void wait_stream(cudaStream_t s, const std::string& what) {
  const auto start = Clock::now();
  for (unsigned polls = 0;; ++polls) {
    const cudaError_t q = cudaStreamQuery(s);
    if (q == cudaSuccess) return;
    if (q != cudaErrorNotReady) {
      std::fprintf(stderr, "[rank %d] %s: cudaStreamQuery: %s\n", g_rank, what.c_str(), cudaGetErrorString(q));
      MPI_Abort(MPI_COMM_WORLD, 2);
    }
    cuda::clear_not_ready();  // the poll left cudaErrorNotReady as this thread's last error
    if (seconds_since(start) > kStreamWaitS) {
      std::fprintf(stderr, "[rank %d] %s: the stream did not finish within %.0f s (hung)\n", g_rank, what.c_str(),
                   kStreamWaitS);
      MPI_Abort(MPI_COMM_WORLD, 2);
    }
    if (polls > 100) std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

// True on every rank iff `ok` on every rank.
bool all_ranks(bool ok) {
  int mine = ok ? 1 : 0, all = 0;
  MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return all == 1;
}

const std::vector<DataType> kTypes = {DataType::float32, DataType::float64, DataType::float16,
                                      DataType::bfloat16, DataType::int32, DataType::int64};
const std::vector<DataType> kFloatTypes = {DataType::float32, DataType::float64, DataType::float16,
                                           DataType::bfloat16};
const std::vector<ReduceOp> kOps = {ReduceOp::sum, ReduceOp::prod, ReduceOp::min, ReduceOp::max, ReduceOp::avg};

// Every algorithm of the table: the test must not fall behind when one is added.
std::vector<Algorithm> all_algorithms() {
  std::vector<Algorithm> v;
  for (const AlgorithmInfo& row : algorithm_table()) v.push_back(row.id);
  return v;
}
bool is_int(DataType t) { return t == DataType::int32 || t == DataType::int64; }

void store(std::vector<std::byte>& b, std::size_t i, DataType t, double v) { store_element(b.data(), i, t, v); }
double load(const std::vector<std::byte>& b, std::size_t i, DataType t) { return load_element(b.data(), i, t); }

std::uint64_t fnv1a(const std::byte* p, std::size_t n) {
  std::uint64_t h = 1469598103934665603ull;
  for (std::size_t i = 0; i < n; ++i) h = (h ^ static_cast<std::uint64_t>(p[i])) * 1099511628211ull;
  return h;
}

// True on every rank iff `bytes` are identical on every rank.
bool identical_everywhere(const std::vector<std::byte>& bytes) {
  const std::uint64_t h = fnv1a(bytes.data(), bytes.size());
  std::uint64_t v[2] = {h, ~h}, m[2] = {0, 0};
  MPI_Allreduce(v, m, 2, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
  return all_ranks(m[0] == h && ~m[1] == h);
}

// ---- inputs and references ------------------------------------------------------------------
enum class Inputs { exact, random, special };

// Exact inputs: every partial result is a small integer, so any order of reduction gives the
// same, exactly representable value in every dtype (n <= 16).
double exact_input(ReduceOp op, int rank, std::size_t i) {
  switch (op) {
    case ReduceOp::sum:
    case ReduceOp::avg: return 1.0 + static_cast<double>((i + static_cast<std::size_t>(rank)) % 4);
    case ReduceOp::prod: return 1.0 + static_cast<double>((i + static_cast<std::size_t>(rank)) % 2);
    case ReduceOp::min:
    case ReduceOp::max:
      return static_cast<double>(static_cast<long>((i * 7 + static_cast<std::size_t>(rank) * 3) % 11) - 5);
  }
  return 0;
}

// Special values: element j holds specials[j % 6] on rank (j / 6) % n and a regular value
// (−1, +0, −0, 2) on the others, so every special meets every regular value on every rank.
const std::vector<double>& specials() {
  static const std::vector<double> v = {std::numeric_limits<double>::quiet_NaN(),
                                        -std::numeric_limits<double>::quiet_NaN(),
                                        std::numeric_limits<double>::infinity(),
                                        -std::numeric_limits<double>::infinity(), -0.0, 0.0};
  return v;
}
const std::vector<double> kRegular = {-1.0, 0.0, -0.0, 2.0};
std::size_t special_count() { return specials().size() * static_cast<std::size_t>(g_n) * kRegular.size(); }
double special_input(int r, std::size_t j) {
  const std::size_t k = j % specials().size();
  const int special_rank = static_cast<int>((j / specials().size()) % static_cast<std::size_t>(g_n));
  return r == special_rank ? specials()[k]
                           : kRegular[(j / (specials().size() * static_cast<std::size_t>(g_n)) +
                                       static_cast<std::size_t>(r)) % kRegular.size()];
}

// The documented rule (docs/runtime.md, src/runtime/cpu_device.cpp, src/cuda/kernels.cu).
double rule(ReduceOp op, double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<double>::quiet_NaN();
  switch (op) {
    case ReduceOp::sum:
    case ReduceOp::avg: return a + b;
    case ReduceOp::prod: return a * b;
    case ReduceOp::min: return a == b ? (std::signbit(a) ? a : b) : std::min(a, b);
    case ReduceOp::max: return a == b ? (std::signbit(a) ? b : a) : std::max(a, b);
  }
  return 0;
}

std::vector<std::vector<std::byte>> make_inputs(Inputs kind, DataType t, ReduceOp op, std::size_t count) {
  const std::size_t bytes = count * size_of(t);
  std::vector<std::vector<std::byte>> all(static_cast<std::size_t>(g_n), std::vector<std::byte>(bytes));
  for (int r = 0; r < g_n; ++r) {
    std::mt19937_64 rng(0x5eedull * 1315423911ull + static_cast<unsigned>(r) * 977u + count);
    std::uniform_real_distribution<double> u(-1.0, 1.0);
    for (std::size_t i = 0; i < count; ++i)
      store(all[static_cast<std::size_t>(r)], i, t,
            kind == Inputs::random ? u(rng) : kind == Inputs::special ? special_input(r, i) : exact_input(op, r, i));
  }
  return all;
}

// Reference of element i from every rank's (dtype-rounded) inputs, in float64.
double reference(ReduceOp op, DataType t, std::size_t i, const std::vector<std::vector<std::byte>>& all) {
  double acc = load(all[0], i, t);
  for (int r = 1; r < g_n; ++r) acc = rule(op, acc, load(all[static_cast<std::size_t>(r)], i, t));
  if (op == ReduceOp::avg) acc = is_int(t) ? std::trunc(acc / g_n) : acc / g_n;
  return acc;
}

struct Ctx {
  ncclComm_t comm;
  cudaStream_t stream;
  void* send;
  void* recv;
  std::size_t capacity;  // bytes of each buffer
};
constexpr std::size_t kCanaryBytes = 64;  // checked after recvbuf's count
constexpr unsigned char kCanary = 0xA5;

struct Case {
  Algorithm algo = Algorithm::stragglar;
  DataType t = DataType::float32;
  ReduceOp op = ReduceOp::sum;
  std::size_t count = 0;
  bool in_place = false;
  int straggler = -1;
  Inputs inputs = Inputs::exact;
  long long delay_ns = 0;  // GPU sleep on the straggler's stream before its call
  // Set: the call goes through the C++ API with this cost model for auto (else the C API).
  std::optional<CostModel> cost = std::nullopt;
};

// A cost model under which auto rates every schedule far faster than any measured
// ncclAllReduce: after its first call (native, docs/auto.md "The first calls") it explores the
// schedules within a few blocks of calls, so its own reductions (and its timer) get exercised.
CostModel schedules_look_free() {
  CostModel m;
  m.alpha_s = 1e-9;
  m.beta_s_per_byte = 1e-15;
  return m;
}

std::string describe(const Case& k) {
  return std::string(to_string(k.algo)) + " " + to_string(k.t) + " " + to_string(k.op) + " count=" +
         std::to_string(k.count) + (k.in_place ? " in-place" : " out-of-place") + " straggler=" +
         std::to_string(k.straggler) +
         (k.inputs == Inputs::random ? " random" : k.inputs == Inputs::special ? " special" : " exact") +
         (k.delay_ns > 0 ? " delayed" : "");
}

long g_native_rule_deviations = 0;  // special values: native results that differ from the rule

// One case on every rank; every rank takes the same path (same collectives in the same order).
// Returns what the call ran (algorithm native with straggler -2 when it failed somewhere).
detail::Choice run_case(Ctx& c, const Case& k) {
  const std::size_t es = size_of(k.t), bytes = k.count * es;
  const std::string what = describe(k);
  const auto all = make_inputs(k.inputs, k.t, k.op, k.count);
  const auto& mine = all[static_cast<std::size_t>(g_rank)];
  void* src = k.in_place ? c.recv : c.send;
  // Everything on the test's stream, in order: the canary after the data, the inputs, the delay.
  CK_CUDA(cudaMemsetAsync(c.recv, kCanary, bytes + kCanaryBytes, c.stream));
  if (bytes > 0) CK_CUDA(cudaMemcpyAsync(src, mine.data(), bytes, cudaMemcpyHostToDevice, c.stream));
  const int straggler = k.straggler < 0 ? g_n - 1 : k.straggler;
  if (g_rank == straggler && k.delay_ns > 0) cuda::launch_sleep(c.stream, k.delay_ns);

  stragglar_options o;
  stragglar_options_init(&o);
  o.algorithm = static_cast<stragglar_algorithm>(k.algo);
  o.straggler = k.straggler;
  stragglar_result res = stragglar_success;
  if (k.cost) {
    Options x;
    x.algorithm = k.algo;
    x.straggler = k.straggler;
    x.cost = k.cost;
    try {
      nccl_allreduce(src, c.recv, k.count, k.t, k.op, c.comm, c.stream, x);
    } catch (const Error& e) {
      res = stragglar_system_error;
      fail(what + ": " + e.what());
    }
  } else {
    res = stragglarNcclAllReduce(src, c.recv, k.count, to_nccl(k.t), to_nccl(k.op), c.comm, c.stream, &o);
    if (res != stragglar_success) fail(what + ": " + stragglar_result_string(res) + ": " + stragglar_last_error());
  }
  const detail::Choice failed{Algorithm::native, -2};
  if (!all_ranks(res == stragglar_success)) {
    if (res == stragglar_success) fail(what + ": failed on another rank");
    wait_stream(c.stream, what);
    return failed;
  }
  const detail::Choice ran = detail::nccl_last_choice(c.comm);
  std::vector<std::byte> out(bytes), canary(kCanaryBytes), sent(k.in_place ? 0 : bytes);
  if (bytes > 0) CK_CUDA(cudaMemcpyAsync(out.data(), c.recv, bytes, cudaMemcpyDeviceToHost, c.stream));
  CK_CUDA(cudaMemcpyAsync(canary.data(), static_cast<std::byte*>(c.recv) + bytes, kCanaryBytes,
                          cudaMemcpyDeviceToHost, c.stream));
  if (!k.in_place && bytes > 0) CK_CUDA(cudaMemcpyAsync(sent.data(), c.send, bytes, cudaMemcpyDeviceToHost, c.stream));
  wait_stream(c.stream, what);

  for (std::byte b : canary)
    if (b != std::byte{kCanary}) {
      fail(what + ": wrote past recvbuf[count)");
      break;
    }
  if (!k.in_place && sent != mine) fail(what + ": sendbuf changed");

  // native avg of floating types: NCCL pre-multiplies by 1/n; special values: native may not
  // follow our NaN/−0 rule (reported, not required).
  const bool native = ran.algorithm == Algorithm::native;
  const bool loose = k.inputs == Inputs::random || (native && k.op == ReduceOp::avg && !is_int(k.t));
  const double u = is_int(k.t) ? 0.0
                   : k.t == DataType::float16 ? 0x1p-11 : k.t == DataType::bfloat16 ? 0x1p-8
                   : k.t == DataType::float32 ? 0x1p-24 : 0x1p-53;
  std::vector<std::byte> expect(bytes);
  long bad = 0, deviations = 0;
  for (std::size_t i = 0; i < k.count; ++i) {
    const double ref = reference(k.op, k.t, i, all);
    store(expect, i, k.t, std::isnan(ref) ? std::numeric_limits<double>::quiet_NaN() : ref);
    if (!loose) {
      if (std::memcmp(out.data() + i * es, expect.data() + i * es, es) == 0) continue;
      if (k.inputs == Inputs::special && native) {
        ++deviations;
        continue;
      }
      if (bad++ < 3)
        fail(what + ": element " + std::to_string(i) + " = " + std::to_string(load(out, i, k.t)) + ", expected " +
             std::to_string(load(expect, i, k.t)) + " (bits differ)");
    } else {
      double mag = 0;
      for (int r = 0; r < g_n; ++r) mag += std::fabs(load(all[static_cast<std::size_t>(r)], i, k.t));
      const double tol = (2.0 * g_n + 2.0) * u * std::max(mag, std::fabs(ref)) + 1e-300;
      if (!(std::fabs(load(out, i, k.t) - ref) <= tol) && bad++ < 3)
        fail(what + ": element " + std::to_string(i) + " = " + std::to_string(load(out, i, k.t)) + ", expected " +
             std::to_string(ref) + " ± " + std::to_string(tol));
    }
  }
  if (bad > 3) fail(what + ": " + std::to_string(bad) + " wrong elements in all");
  if (deviations > 0) ++g_native_rule_deviations;
  if (!identical_everywhere(out)) fail(what + ": results differ across ranks (ran " + to_string(ran) + ")");
  ++g_checked;
  ++g_cases_run[to_string(k.algo)];
  return ran;
}

// ---- sections ---------------------------------------------------------------------------------
void correctness(Ctx& c) {
  const int last = g_n - 1;
  for (Algorithm a : all_algorithms()) {
    const auto start = Clock::now();
    const long before = g_failures;
    auto run = [&](DataType t, ReduceOp op, std::size_t count, bool in_place, int straggler,
                   Inputs inputs = Inputs::exact, long long delay_ns = 0) {
      run_case(c, Case{a, t, op, count, in_place, straggler, inputs, delay_ns});
    };
    // Sized for one time-sliced GPU (ranks over loopback sockets): every dtype × op once, and
    // every shape (count, in/out of place, straggler) at dtype/op pairs covering the float,
    // half, bfloat16 and integer paths — four at n = 2, two at n >= 4 (each case costs more).
    const std::vector<std::pair<DataType, ReduceOp>> shaped =
        g_n <= 2 ? std::vector<std::pair<DataType, ReduceOp>>{{DataType::float32, ReduceOp::sum},
                                                              {DataType::bfloat16, ReduceOp::max},
                                                              {DataType::float16, ReduceOp::prod},
                                                              {DataType::int32, ReduceOp::avg}}
                 : std::vector<std::pair<DataType, ReduceOp>>{{DataType::float32, ReduceOp::sum},
                                                              {DataType::bfloat16, ReduceOp::max}};
    for (DataType t : kTypes)
      for (ReduceOp op : kOps) run(t, op, 1031, false, last);
    for (auto [t, op] : shaped)
      for (std::size_t count : {std::size_t{0}, std::size_t{1}, std::size_t{13}, std::size_t{65539}})
        for (bool in_place : {false, true})
          for (int s : {0, last}) run(t, op, count, in_place, s);
    // Random float sums (rounding bound, identical bits) and a delayed straggler.
    for (DataType t : kFloatTypes) run(t, ReduceOp::sum, 65539, false, last, Inputs::random);
    run(DataType::float32, ReduceOp::sum, 65539, true, last, Inputs::exact, 2'000'000);
    run(DataType::bfloat16, ReduceOp::max, 1031, false, 0, Inputs::exact, 1'000'000);
    if (g_rank == 0)
      std::printf("  correctness %-9s n=%d: %ld cases, %s (%.1f s)\n", to_string(a), g_n, g_cases_run[to_string(a)],
                  g_failures == before ? "ok" : "FAILURES", seconds_since(start));
    std::fflush(stdout);
  }
}

void special(Ctx& c) {
  const auto start = Clock::now();
  const long deviations_before = g_native_rule_deviations;
  for (Algorithm a : all_algorithms())
    for (DataType t : kFloatTypes)
      for (ReduceOp op : {ReduceOp::sum, ReduceOp::prod, ReduceOp::min, ReduceOp::max})
        run_case(c, Case{a, t, op, special_count(), false, static_cast<int>(op) % g_n, Inputs::special});
  // auto's own reductions on special values: auto starts with ncclAllReduce and, under the
  // default cost model at these sizes, never leaves it (at n = 8 the small-message gate alone
  // decides); with schedules_look_free() it runs a schedule within a few calls, and that call
  // must follow the rule bit for bit (run_case is strict for anything but native).
  constexpr int kAutoCalls = 20;
  for (DataType t : kFloatTypes)
    for (ReduceOp op : {ReduceOp::sum, ReduceOp::prod, ReduceOp::min, ReduceOp::max}) {
      int schedule_calls = 0;
      for (int i = 0; i < kAutoCalls; ++i) {
        Case k{Algorithm::automatic, t, op, special_count(), false, static_cast<int>(op) % g_n, Inputs::special};
        k.cost = schedules_look_free();
        const detail::Choice ran = run_case(c, k);
        // auto's choice is the same on every rank; one schedule call checked is enough.
        if (all_ranks(ran.algorithm != Algorithm::native)) {
          ++schedule_calls;
          break;
        }
      }
      if (!all_ranks(schedule_calls > 0))
        fail(std::string("special: auto ") + to_string(t) + " " + to_string(op) + " ran no schedule in " +
             std::to_string(kAutoCalls) + " calls with every schedule rated free: its NaN/-0 rule went unchecked");
    }
  // 17 auto configurations or more (the 16 above, one more): the engine's timer pool holds 16
  // sets, so the least recently used timer parks; called again, it takes a set back and its
  // parked times and exchange are read (NcclCallTimer::park). Every call still checked.
  auto auto_special = [&](DataType t, ReduceOp op, std::size_t count) {
    Case k{Algorithm::automatic, t, op, count, false, static_cast<int>(op) % g_n, Inputs::special};
    k.cost = schedules_look_free();
    run_case(c, k);
  };
  for (int i = 0; i < 3; ++i) auto_special(DataType::float32, ReduceOp::max, special_count() + 6);
  for (int i = 0; i < 8; ++i) auto_special(kFloatTypes.front(), ReduceOp::sum, special_count());
  long dev = g_native_rule_deviations - deviations_before, dev_all = 0;
  MPI_Allreduce(&dev, &dev_all, 1, MPI_LONG, MPI_MAX, MPI_COMM_WORLD);
  if (g_rank == 0)
    std::printf("  special values n=%d: done (%.1f s); ncclAllReduce (native) differs from our NaN/-0 rule in %ld of "
                "16 dtype/op cases (identical bits on every rank required, the rule not)\n",
                g_n, seconds_since(start), dev_all);
}

// A communicator of one rank per process: every algorithm returns its input.
void one_rank() {
  ncclUniqueId id;
  CK_NCCL(ncclGetUniqueId(&id));
  ncclComm_t solo;
  CK_NCCL(ncclCommInitRank(&solo, 1, id, 0));
  cudaStream_t s;
  CK_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  const std::size_t max_count = 1031;
  void *send = nullptr, *recv = nullptr;
  CK_CUDA(cudaMalloc(&send, max_count * 8));
  CK_CUDA(cudaMalloc(&recv, max_count * 8));
  long cases = 0;
  for (Algorithm a : all_algorithms())
    for (auto [t, op] : {std::pair{DataType::float32, ReduceOp::sum}, std::pair{DataType::bfloat16, ReduceOp::max},
                         std::pair{DataType::int32, ReduceOp::avg}, std::pair{DataType::float16, ReduceOp::prod},
                         std::pair{DataType::float64, ReduceOp::avg}})
      for (std::size_t count : {std::size_t{0}, std::size_t{1}, max_count})
        for (bool in_place : {false, true}) {
          const std::size_t bytes = count * size_of(t);
          std::vector<std::byte> in(bytes), out(bytes);
          for (std::size_t i = 0; i < count; ++i) store(in, i, t, static_cast<double>(i % 9) - 4);
          void* src = in_place ? recv : send;
          CK_CUDA(cudaMemsetAsync(recv, 0x5A, max_count * 8, s));
          if (bytes > 0) CK_CUDA(cudaMemcpyAsync(src, in.data(), bytes, cudaMemcpyHostToDevice, s));
          stragglar_options o;
          stragglar_options_init(&o);
          o.algorithm = static_cast<stragglar_algorithm>(a);
          const std::string what = std::string("one rank: ") + to_string(a) + " " + to_string(t) + " " +
                                   to_string(op) + " count=" + std::to_string(count) +
                                   (in_place ? " in-place" : " out-of-place");
          const stragglar_result r = stragglarNcclAllReduce(src, recv, count, to_nccl(t), to_nccl(op), solo, s, &o);
          if (r != stragglar_success) {
            fail(what + ": " + stragglar_result_string(r) + ": " + stragglar_last_error());
            continue;
          }
          if (bytes > 0) CK_CUDA(cudaMemcpyAsync(out.data(), recv, bytes, cudaMemcpyDeviceToHost, s));
          wait_stream(s, what);
          if (out != in) fail(what + ": the result is not the input");
          ++cases;
          ++g_checked;
        }
  if (stragglarNcclCommRelease(solo) != stragglar_success) fail("one rank: stragglarNcclCommRelease");
  CK_NCCL(ncclCommDestroy(solo));
  CK_CUDA(cudaFree(send));
  CK_CUDA(cudaFree(recv));
  CK_CUDA(cudaStreamDestroy(s));
  if (g_rank == 0) std::printf("  one-rank communicators: %ld cases\n", cases);
}

void expect_result(stragglar_result got, stragglar_result want, const std::string& what, const std::string& needle) {
  if (got != want) {
    fail(what + ": got " + stragglar_result_string(got) + ", expected " + stragglar_result_string(want) + " (" +
         stragglar_last_error() + ")");
    return;
  }
  const std::string msg = stragglar_last_error();
  if (!needle.empty() && msg.find(needle) == std::string::npos)
    fail(what + ": message '" + msg + "' does not name '" + needle + "'");
  ++g_checked;
}

// A field differing on rank 0 → stragglar_mismatch on every rank, naming it; nothing written.
void mismatch(Ctx& c) {
  struct M {
    const char* field;
    std::size_t count[2];  // rank 0, the others
    DataType t[2];
    ReduceOp op[2];
    Algorithm algo[2];
    int straggler[2];
    int pipeline[2];
  };
  const int last = g_n - 1;
  const Algorithm S = Algorithm::stragglar;
  const DataType F = DataType::float32;
  const ReduceOp P = ReduceOp::sum;
  // Counts not used elsewhere: every case is a new configuration, so the agreement runs. A fixed
  // K (pipeline 1) but in the pipeline case, so that only the field under test differs.
  const std::vector<M> ms = {
      {"count", {100, 101}, {F, F}, {P, P}, {S, S}, {last, last}, {1, 1}},
      {"dtype", {102, 102}, {DataType::float64, F}, {P, P}, {S, S}, {last, last}, {1, 1}},
      {"op", {103, 103}, {F, F}, {ReduceOp::max, P}, {S, S}, {last, last}, {1, 1}},
      {"algorithm", {104, 104}, {F, F}, {P, P}, {Algorithm::ring, Algorithm::rhd}, {last, last}, {1, 1}},
      {"straggler", {105, 105}, {F, F}, {P, P}, {S, S}, {0, last}, {1, 1}},
      {"pipeline", {106, 106}, {F, F}, {P, P}, {S, S}, {last, last}, {2, 3}},
  };
  for (const M& m : ms) {
    const int w = g_rank == 0 ? 0 : 1;
    const std::size_t bytes = m.count[w] * size_of(m.t[w]);
    std::vector<std::byte> in(bytes), before(bytes + kCanaryBytes), after(bytes + kCanaryBytes), sent(bytes);
    for (std::size_t i = 0; i < m.count[w]; ++i) store(in, i, m.t[w], 1.0);
    CK_CUDA(cudaMemsetAsync(c.recv, 0x3C, bytes + kCanaryBytes, c.stream));
    CK_CUDA(cudaMemcpyAsync(c.send, in.data(), bytes, cudaMemcpyHostToDevice, c.stream));
    CK_CUDA(cudaMemcpyAsync(before.data(), c.recv, before.size(), cudaMemcpyDeviceToHost, c.stream));
    stragglar_options o;
    stragglar_options_init(&o);
    o.algorithm = static_cast<stragglar_algorithm>(m.algo[w]);
    o.straggler = m.straggler[w];
    o.pipeline = m.pipeline[w];
    const stragglar_result r = stragglarNcclAllReduce(c.send, c.recv, m.count[w], to_nccl(m.t[w]), to_nccl(m.op[w]),
                                                      c.comm, c.stream, &o);
    expect_result(r, stragglar_mismatch, std::string("mismatched ") + m.field, m.field);
    CK_CUDA(cudaMemcpyAsync(after.data(), c.recv, after.size(), cudaMemcpyDeviceToHost, c.stream));
    CK_CUDA(cudaMemcpyAsync(sent.data(), c.send, bytes, cudaMemcpyDeviceToHost, c.stream));
    wait_stream(c.stream, std::string("mismatched ") + m.field);
    if (after != before) fail(std::string("mismatched ") + m.field + ": recvbuf was written");
    if (sent != in) fail(std::string("mismatched ") + m.field + ": sendbuf was written");
  }
  // The communicator still works afterwards.
  run_case(c, Case{Algorithm::stragglar, DataType::float32, ReduceOp::sum, 1031, true, -1});
  run_case(c, Case{Algorithm::ring, DataType::float32, ReduceOp::sum, 103, false, -1});
  if (g_rank == 0) std::printf("  mismatch: %zu fields\n", ms.size());
}

// Calls alternating between streams with no host wait in between: each in-place sum of the
// previous result multiplies it by n, so the result is exact only if every call waited for the
// one before it (the stream hand-off). Then a call after the previous call's stream is gone.
void streams(Ctx& c) {
  cudaStream_t s1, s2;
  CK_CUDA(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
  CK_CUDA(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
  const std::size_t count = 4099;
  std::vector<float> ones(count, 1.0f), out(count);
  const float n = static_cast<float>(g_n);
  long cases = 0;
  for (Algorithm a : all_algorithms()) {
    stragglar_options o;
    stragglar_options_init(&o);
    o.algorithm = static_cast<stragglar_algorithm>(a);
    const std::string what = std::string("streams: ") + to_string(a);
    auto call = [&](cudaStream_t s, const char* where) {
      const stragglar_result r =
          stragglarNcclAllReduce(c.recv, c.recv, count, ncclFloat32, ncclSum, c.comm, s, &o);
      if (r != stragglar_success)
        fail(what + " " + where + ": " + stragglar_result_string(r) + ": " + stragglar_last_error());
      return r == stragglar_success;
    };
    // A first call makes the configuration known (its agreement waits on the host); then s1
    // behind a 10 ms GPU sleep (so a call 2 that did not wait would read stale data), s2, s1.
    bool ok = call(s1, "call 0 (s1)");
    wait_stream(s1, what);
    CK_CUDA(cudaMemcpyAsync(c.recv, ones.data(), count * 4, cudaMemcpyHostToDevice, s1));
    cuda::launch_sleep(s1, 10'000'000);
    // Every rank makes every call, whatever failed before (the same NCCL operations everywhere).
    ok = call(s1, "call 1 (s1)") && ok;
    ok = call(s2, "call 2 (s2)") && ok;
    ok = call(s1, "call 3 (s1)") && ok;
    if (all_ranks(ok)) {
      CK_CUDA(cudaMemcpyAsync(out.data(), c.recv, count * 4, cudaMemcpyDeviceToHost, s1));
      wait_stream(s1, what);
      wait_stream(s2, what);
      for (std::size_t i = 0; i < count; ++i)
        if (out[i] != n * n * n) {
          fail(what + ": element " + std::to_string(i) + " = " + std::to_string(out[i]) + " after s1, s2, s1, expected " +
               std::to_string(n * n * n));
          break;
        }
    }
    wait_stream(s1, what);
    wait_stream(s2, what);
    // A call on a stream destroyed right after it, then one on s1: s1 must wait for the first
    // call's end without touching the destroyed stream.
    cudaStream_t s3;
    CK_CUDA(cudaStreamCreateWithFlags(&s3, cudaStreamNonBlocking));
    CK_CUDA(cudaMemcpyAsync(c.recv, ones.data(), count * 4, cudaMemcpyHostToDevice, s3));
    cuda::launch_sleep(s3, 10'000'000);
    ok = call(s3, "call on s3");
    CK_CUDA(cudaStreamDestroy(s3));
    ok = call(s1, "call on s1 after s3 was destroyed") && ok;
    if (all_ranks(ok)) {
      CK_CUDA(cudaMemcpyAsync(out.data(), c.recv, count * 4, cudaMemcpyDeviceToHost, s1));
      wait_stream(s1, what);
      for (std::size_t i = 0; i < count; ++i)
        if (out[i] != n * n) {
          fail(what + ": element " + std::to_string(i) + " = " + std::to_string(out[i]) +
               " after a destroyed stream, expected " + std::to_string(n * n));
          break;
        }
    }
    wait_stream(s1, what);
    ++cases;
    ++g_checked;
  }
  // Back on the test's stream.
  run_case(c, Case{Algorithm::stragglar, DataType::float32, ReduceOp::sum, 1031, true, -1});
  CK_CUDA(cudaStreamDestroy(s1));
  CK_CUDA(cudaStreamDestroy(s2));
  if (g_rank == 0) std::printf("  streams: %ld algorithms\n", cases);
}

void errors(Ctx& c) {
  stragglar_options o;
  stragglar_options_init(&o);
  expect_result(stragglarNcclAllReduce(nullptr, c.recv, 8, ncclFloat32, ncclSum, c.comm, c.stream, &o),
                stragglar_invalid_usage, "null sendbuff", "sendbuf");
  expect_result(stragglarNcclAllReduce(c.send, nullptr, 8, ncclFloat32, ncclSum, c.comm, c.stream, &o),
                stragglar_invalid_usage, "null recvbuff", "recvbuf");
  expect_result(stragglarNcclAllReduce(c.send, c.recv, 8, ncclFloat8e4m3, ncclSum, c.comm, c.stream, &o),
                stragglar_invalid_usage, "ncclFloat8e4m3", "ncclFloat8e4m3");
  expect_result(stragglarNcclAllReduce(c.send, c.recv, 8, ncclUint8, ncclSum, c.comm, c.stream, &o),
                stragglar_invalid_usage, "ncclUint8", "ncclUint8");
  expect_result(stragglarNcclAllReduce(c.send, c.recv, 8, ncclFloat32, static_cast<ncclRedOp_t>(ncclNumOps), c.comm,
                                       c.stream, &o),
                stragglar_invalid_usage, "custom op", "ncclRedOp_t");
  o.straggler = g_n;
  expect_result(stragglarNcclAllReduce(c.send, c.recv, 8, ncclFloat32, ncclSum, c.comm, c.stream, &o),
                stragglar_invalid_usage, "straggler n", std::to_string(g_n));
  o.straggler = -2;
  expect_result(stragglarNcclAllReduce(c.send, c.recv, 8, ncclFloat32, ncclSum, c.comm, c.stream, &o),
                stragglar_invalid_usage, "straggler -2", "-2");
  stragglar_options_init(&o);
  const int bogus_algorithm = 42;  // not a stragglar_algorithm value
  std::memcpy(&o.algorithm, &bogus_algorithm, sizeof bogus_algorithm);
  expect_result(stragglarNcclAllReduce(c.send, c.recv, 8, ncclFloat32, ncclSum, c.comm, c.stream, &o),
                stragglar_invalid_usage, "algorithm 42", "42");
  stragglar_options_init(&o);
  o.pipeline = -1;
  expect_result(stragglarNcclAllReduce(c.send, c.recv, 8, ncclFloat32, ncclSum, c.comm, c.stream, &o),
                stragglar_invalid_usage, "pipeline -1", "-1");
  // C++ API: the same checks throw Error(InvalidUsage).
  try {
    nccl_allreduce(c.send, nullptr, 3, DataType::float32, ReduceOp::sum, c.comm, c.stream);
    fail("C++ null recvbuf: no exception");
  } catch (const Error& e) {
    if (e.code() != ErrorCode::InvalidUsage) fail(std::string("C++ null recvbuf: ") + to_string(e.code()));
    ++g_checked;
  }
  // A stream being captured into a CUDA graph: refused before anything is enqueued, the capture
  // ends cleanly (an empty graph), and the communicator is not broken.
  {
    stragglar_options_init(&o);  // valid options: only the capture may be what is refused
    cudaStream_t cap;
    CK_CUDA(cudaStreamCreateWithFlags(&cap, cudaStreamNonBlocking));
    CK_CUDA(cudaStreamBeginCapture(cap, cudaStreamCaptureModeThreadLocal));
    const stragglar_result r = stragglarNcclAllReduce(c.send, c.recv, 8, ncclFloat32, ncclSum, c.comm, cap, &o);
    cudaGraph_t graph = nullptr;
    const cudaError_t ended = cudaStreamEndCapture(cap, &graph);
    expect_result(r, stragglar_invalid_usage, "a call during graph capture", "CUDA graph");
    if (ended != cudaSuccess)
      fail(std::string("graph capture: cudaStreamEndCapture after the refused call: ") + cudaGetErrorString(ended));
    if (graph != nullptr) CK_CUDA(cudaGraphDestroy(graph));
    CK_CUDA(cudaStreamDestroy(cap));
  }
  wait_stream(c.stream, "errors");
  // The communicator still works afterwards.
  run_case(c, Case{Algorithm::stragglar, DataType::float32, ReduceOp::sum, 1031, true, -1});
  if (g_rank == 0) std::printf("  errors: done\n");
}

// The first-call agreement's timeout: rank 0 never calls on a fresh communicator.
void timeout_path() {
  const char* env = std::getenv("STRAGGLAR_TIMEOUT_S");
  const double limit = env != nullptr ? std::atof(env) : 0;
  if (!(limit > 0 && limit <= 10)) {
    fail("timeout: set STRAGGLAR_TIMEOUT_S to at most 10 s for this section (it is " + std::string(env ? env : "unset") +
         ")");
    return;
  }
  ncclUniqueId id;
  if (g_rank == 0) CK_NCCL(ncclGetUniqueId(&id));
  MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
  // A non-blocking communicator: NCCL connects peers at their first collective
  // (NCCL_RUNTIME_CONNECT, the default since 2.22), so on a blocking one the first
  // ncclAllReduce of the agreement would block inside NCCL until rank 0 came — no timeout can
  // fire there (docs/gpu.md "Timeouts"). Non-blocking, it answers ncclInProgress and is polled.
  ncclComm_t comm = nullptr;
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclResult_t init = ncclCommInitRankConfig(&comm, g_n, id, g_rank, &config);
  for (const auto t0 = Clock::now(); init == ncclInProgress && seconds_since(t0) < kStreamWaitS;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    CK_NCCL(ncclCommGetAsyncError(comm, &init));
  }
  CK_NCCL(init);
  cudaStream_t s;
  CK_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  void* buf = nullptr;
  CK_CUDA(cudaMalloc(&buf, 1031 * 4));
  CK_CUDA(cudaMemsetAsync(buf, 0, 1031 * 4, s));
  wait_stream(s, "timeout: setup");
  if (g_rank != 0) {
    stragglar_options o;
    stragglar_options_init(&o);
    auto start = Clock::now();
    stragglar_result r = stragglarNcclAllReduce(buf, buf, 1031, ncclFloat32, ncclSum, comm, s, &o);
    const double waited = seconds_since(start);
    expect_result(r, stragglar_timeout, "timeout: first call without rank 0", "STRAGGLAR_TIMEOUT_S");
    if (waited < limit * 0.9 || waited > 2 * limit)
      fail("timeout: the first call returned after " + std::to_string(waited) + " s, expected between " +
           std::to_string(limit * 0.9) + " and " + std::to_string(2 * limit) + " s (2x STRAGGLAR_TIMEOUT_S)");
    if (g_rank == 1) std::printf("  timeout: the first call failed after %.2f s (STRAGGLAR_TIMEOUT_S=%g)\n", waited, limit);
    // The communicator is broken for stragglar: later calls fail at once, whatever they ask.
    for (std::size_t count : {std::size_t{1031}, std::size_t{7}}) {
      start = Clock::now();
      r = stragglarNcclAllReduce(buf, buf, count, ncclFloat32, ncclSum, comm, s, &o);
      expect_result(r, stragglar_timeout, "timeout: a later call (count " + std::to_string(count) + ")", "unusable");
      if (seconds_since(start) > 1.0)
        fail("timeout: a later call took " + std::to_string(seconds_since(start)) + " s, expected to fail at once");
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);  // rank 0 stayed away until every other rank gave up
  // As after any NCCL failure: abandon stragglar's state, abort the communicator; the pending
  // agreement then ends and the stream drains.
  if (stragglarNcclCommAbandon(comm) != stragglar_success) fail("timeout: stragglarNcclCommAbandon");
  if (const ncclResult_t r = ncclCommAbort(comm); r != ncclSuccess && r != ncclInProgress) CK_NCCL(r);
  wait_stream(s, "timeout: the stream after ncclCommAbort");
  CK_CUDA(cudaStreamDestroy(s));
  CK_CUDA(cudaFree(buf));
  if (g_rank == 0) std::printf("  timeout: done (STRAGGLAR_TIMEOUT_S=%g)\n", limit);
}

// A rank far later than STRAGGLAR_TIMEOUT_S in a later call: auto's per-call waits on NCCL
// (its timer's, its exchange's) wait as ncclAllReduce would, so every call succeeds exactly.
// The calls go back to back, with no MPI between them: the others' host must wait inside
// stragglar (the timer reads call 6's time at call 8), not in a check of the test's.
void late_rank() {
  const char* env = std::getenv("STRAGGLAR_TIMEOUT_S");
  const double limit = env != nullptr ? std::atof(env) : 0;
  if (!(limit > 0 && limit <= 10)) {
    fail("late: set STRAGGLAR_TIMEOUT_S to at most 10 s for this section");
    return;
  }
  ncclUniqueId id;
  if (g_rank == 0) CK_NCCL(ncclGetUniqueId(&id));
  MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
  ncclComm_t comm = nullptr;
  CK_NCCL(ncclCommInitRank(&comm, g_n, id, g_rank));
  cudaStream_t s;
  CK_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  constexpr std::size_t count = 65539;
  constexpr int kCalls = 14, kLateCall = 6;
  std::vector<float> in(count), out(count);
  for (std::size_t i = 0; i < count; ++i) in[i] = static_cast<float>(g_rank + 1 + static_cast<int>(i % 5));
  void *send = nullptr, *recv = nullptr;
  CK_CUDA(cudaMalloc(&send, count * sizeof(float)));
  CK_CUDA(cudaMalloc(&recv, count * sizeof(float)));
  CK_CUDA(cudaMemcpyAsync(send, in.data(), count * sizeof(float), cudaMemcpyHostToDevice, s));
  wait_stream(s, "late: setup");
  MPI_Barrier(MPI_COMM_WORLD);
  Options x;
  x.algorithm = Algorithm::automatic;
  x.cost = schedules_look_free();
  const auto start = Clock::now();
  int errors = 0;
  for (int call = 0; call < kCalls; ++call) {
    if (call == kLateCall && g_rank == 0) std::this_thread::sleep_for(std::chrono::duration<double>(2.5 * limit));
    try {
      nccl_allreduce(send, recv, count, DataType::float32, ReduceOp::sum, comm, s, x);
    } catch (const Error& e) {
      if (errors++ == 0) fail("late: call " + std::to_string(call) + ": " + e.what());
    }
  }
  if (all_ranks(errors == 0)) {
    CK_CUDA(cudaMemcpyAsync(out.data(), recv, count * sizeof(float), cudaMemcpyDeviceToHost, s));
    wait_stream(s, "late: end");
    long wrong = 0;
    for (std::size_t i = 0; i < count; ++i)
      wrong += out[i] != static_cast<float>(g_n * (g_n + 1) / 2 + g_n * static_cast<int>(i % 5));
    if (wrong > 0) fail("late: " + std::to_string(wrong) + " wrong elements after the last call");
    ++g_checked;
  } else if (errors == 0) {
    fail("late: failed on another rank");
  }
  const double took = seconds_since(start);
  wait_stream(s, "late: end");
  CK_CUDA(cudaStreamDestroy(s));
  if (errors == 0 && stragglarNcclCommRelease(comm) != stragglar_success) fail("late: stragglarNcclCommRelease");
  if (errors != 0) (void)stragglarNcclCommAbandon(comm);
  CK_CUDA(cudaFree(send));
  CK_CUDA(cudaFree(recv));
  if (errors == 0) CK_NCCL(ncclCommDestroy(comm));
  else (void)ncclCommAbort(comm);
  if (g_rank == 0)
    std::printf("  late: rank 0 came %.1f s late to call %d of %d (STRAGGLAR_TIMEOUT_S=%g): %s (%.1f s)\n", 2.5 * limit,
                kLateCall, kCalls, limit, errors == 0 ? "every call succeeded" : "FAILED", took);
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_n);
  const std::string mode = argc > 1 ? argv[1] : "all";
  const std::vector<std::string> modes = {"all", "correctness", "special", "one-rank", "mismatch", "streams", "errors",
                                          "timeout"};
  if (std::find(modes.begin(), modes.end(), mode) == modes.end()) {
    if (g_rank == 0) std::fprintf(stderr, "test_nccl_allreduce: unknown section '%s'\n", mode.c_str());
    MPI_Finalize();
    return 2;
  }

  // A section that compares ranks must have some: at n = 1 it would pass having tested nothing.
  if (g_n < 2 && mode != "one-rank" && mode != "errors") {
    if (g_rank == 0)
      std::fprintf(stderr, "test_nccl_allreduce: section '%s' needs at least 2 ranks (mpirun -np 2 or more)\n",
                   mode.c_str());
    MPI_Finalize();
    return 2;
  }

  // Skip only without a GPU; any other CUDA error fails (tests/gpu/cuda_presence.hpp).
  const gpu_test::CudaPresence gpu = gpu_test::cuda_presence();
  const gpu_test::GpuPlace place = gpu_test::place_on_gpu(gpu, g_rank, "stragglar-test-host");
  if (place.worst != 0) {
    if (gpu.kind == gpu_test::CudaPresence::error) std::fprintf(stderr, "[rank %d] FAIL: %s\n", g_rank, gpu.detail.c_str());
    if (place.worst == 1 && g_rank == 0) std::printf("no CUDA device: skipped (%s)\n", gpu.detail.c_str());
    MPI_Finalize();
    return place.worst == 1 ? kSkip : 1;
  }
  CK_CUDA(cudaSetDevice(place.device));
  if (g_rank == 0)
    std::printf("test_nccl_allreduce %s: %d ranks, %d GPU(s) per node, %d ranks per node%s\n", mode.c_str(), g_n,
                gpu.devices, place.local_size, place.shared ? " (shared GPU: NCCL over loopback sockets)" : "");
  std::fflush(stdout);
  const auto start = Clock::now();

  if (mode == "timeout") {
    late_rank();
    timeout_path();
  } else {
    ncclUniqueId id;
    if (g_rank == 0) CK_NCCL(ncclGetUniqueId(&id));
    MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
    Ctx c{};
    CK_NCCL(ncclCommInitRank(&c.comm, g_n, id, g_rank));
    CK_CUDA(cudaStreamCreateWithFlags(&c.stream, cudaStreamNonBlocking));
    c.capacity = 65539 * 8 + kCanaryBytes;
    CK_CUDA(cudaMalloc(&c.send, c.capacity));
    CK_CUDA(cudaMalloc(&c.recv, c.capacity));
    const bool every = mode == "all";
    if (every || mode == "correctness") correctness(c);
    if (every || mode == "special") special(c);
    if (every || mode == "one-rank") one_rank();
    if (every || mode == "mismatch") mismatch(c);
    if (every || mode == "streams") streams(c);
    if (every || mode == "errors") errors(c);
    wait_stream(c.stream, "end");
    // The stream goes first, as a user may do: the release must not free scratch on it.
    CK_CUDA(cudaStreamDestroy(c.stream));
    if (stragglarNcclCommRelease(c.comm) != stragglar_success) fail("stragglarNcclCommRelease");
    CK_CUDA(cudaFree(c.send));
    CK_CUDA(cudaFree(c.recv));
    CK_NCCL(ncclCommDestroy(c.comm));
  }

  long failures = 0, checked = 0;
  MPI_Allreduce(&g_failures, &failures, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
  MPI_Allreduce(&g_checked, &checked, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
  // Every algorithm of the table must have run (checked) cases in the correctness section.
  std::string ran, missing;
  int table = 0, ran_count = 0;
  for (Algorithm a : all_algorithms()) {
    ++table;
    long mine = g_cases_run[to_string(a)], least = 0;
    MPI_Allreduce(&mine, &least, 1, MPI_LONG, MPI_MIN, MPI_COMM_WORLD);
    if (least > 0) {
      ran += std::string(ran.empty() ? "" : " ") + to_string(a);
      ++ran_count;
    } else {
      missing += std::string(missing.empty() ? "" : " ") + to_string(a);
    }
  }
  const bool need_all = mode == "all" || mode == "correctness";
  if (need_all && ran_count != table) failures += 1;
  if (g_rank == 0) {
    if (need_all)
      std::printf("test_nccl_allreduce n=%d: algorithms run: %s (%d of %d in the table)%s%s\n", g_n, ran.c_str(),
                  ran_count, table, missing.empty() ? "" : "; NOT RUN: ", missing.c_str());
    std::printf("test_nccl_allreduce n=%d %s: %ld checks, %ld failures, %.1f s: %s\n", g_n, mode.c_str(), checked,
                failures, seconds_since(start), failures == 0 ? "PASSED" : "FAILED");
  }
  MPI_Finalize();
  return failures == 0 ? 0 : 1;
}
