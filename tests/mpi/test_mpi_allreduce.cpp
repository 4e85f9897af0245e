// MPI tests of stragglar::allreduce (run under mpirun by CTest; see CMakeLists.txt).
//
//   test_mpi_allreduce correctness [quick]   every algorithm (incl. native) × dtype × op × count
//                                    {0, 1, n-2, 1009} × in/out of place × straggler {0, n-1},
//                                    a subset with a straggler delay, a subset at 1M+ elements
//   test_mpi_allreduce errors        invalid arguments, mismatched arguments across ranks
//   test_mpi_allreduce stop V DIR    rank V SIGSTOPs itself; every other rank must report
//                                    Timeout (written to DIR/rank<r>.txt), then V is killed
//   test_mpi_allreduce stop_auto V DIR  as stop, after three 4 MiB calls of auto's policy
//   test_mpi_allreduce kill V        rank V SIGKILLs itself; the run must end (driver script)
//   test_mpi_allreduce late [S]      rank n-1 comes S s late (beyond STRAGGLAR_TIMEOUT_S) to a first
//                                    call: Timeout everywhere, no stray writes, clean finalize
//   test_mpi_allreduce auto_late [R] algorithm = auto, rank R late by 30 ms before each of 30 calls:
//                                    the same choice on every rank, exact results, R reported late
//   test_mpi_allreduce auto_moving   auto with arrival tickets, a random rank late by 30 ms before each
//                                    of 30 calls: same choices, exact, every call after the first ticketed
//   test_mpi_allreduce auto_moving_hosts  (under run_two_hostnames.sh: the ranks' host names say two
//                                    hosts) as auto_moving, with arrival tickets left off by auto:
//                                    same choices, exact, no call ticketed, two hosts reported
//   test_mpi_allreduce auto_late_set auto, ranks n-2 and n-1 late together by 30 ms before each of 30
//                                    calls: the same choice (set included) on every rank,
//                                    exact, the set learned and reported, stragglar-k told it run
//   test_mpi_allreduce tiny_timeout  (with STRAGGLAR_TIMEOUT_S=1e-9) success or Timeout, no crash
//   test_mpi_allreduce cluster       (under scripts/cluster.sh) every algorithm, stragglar-k and
//                                    hierarchical told the last host late, a few dtypes and counts
//   test_mpi_allreduce late_set      stragglar-k and hierarchical with several late ranks: sets of 1..n/2
//                                    ranks × dtype × op × counts, C and C++, late ranks delayed;
//                                    a set for stragglar and mismatched sets are refused
//
// Results are compared with a float64 reference computed from the very inputs (rounded to the
// dtype), within a bound on the dtype's rounding error; every rank must hold identical bits.
#include <mpi.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <random>
#include <thread>
#include <vector>

#include "stragglar/allreduce.hpp"
#include "runtime/element.hpp"
#include "runtime/env.hpp"
#include "runtime/mpi_session.hpp"
#include "stragglar/stragglar_mpi.h"

using namespace stragglar;

namespace {

int g_rank = 0, g_n = 1;
long g_failures = 0;
long g_checked = 0;

void fail(const std::string& what) {
  if (g_failures < 20) std::fprintf(stderr, "[rank %d] FAIL: %s\n", g_rank, what.c_str());
  ++g_failures;
}

std::uint64_t mix(std::uint64_t x) {  // splitmix64
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

const std::vector<DataType> kTypes = {DataType::float32, DataType::float64, DataType::float16,
                                      DataType::bfloat16, DataType::int32, DataType::int64};
const std::vector<ReduceOp> kOps = {ReduceOp::sum, ReduceOp::prod, ReduceOp::min, ReduceOp::max,
                                    ReduceOp::avg};
const std::vector<std::string> kAlgos = {"stragglar", "ring", "rhd", "allpairs", "broadcast", "native", "auto"};

bool is_int(DataType t) { return t == DataType::int32 || t == DataType::int64; }

// Unit roundoff of the dtype (0 for integers: exact).
double unit_roundoff(DataType t) {
  switch (t) {
    case DataType::float16: return std::ldexp(1.0, -11);
    case DataType::bfloat16: return std::ldexp(1.0, -8);
    case DataType::float32: return std::ldexp(1.0, -24);
    case DataType::float64: return std::ldexp(1.0, -53);
    default: return 0;
  }
}



// Input of rank r, element i: exact in every dtype for prod (±1, ±2: products stay exact),
// fractional for float sums (so rounding is exercised), small integers otherwise.
double input(std::uint64_t seed, int r, std::size_t i, DataType t, ReduceOp op) {
  const std::uint64_t h = mix(seed ^ mix(static_cast<std::uint64_t>(r) * 1000003ull + i));
  switch (op) {
    case ReduceOp::prod: {
      static const double v[4] = {-2, -1, 1, 2};
      return v[h % 4];
    }
    case ReduceOp::sum:
    case ReduceOp::avg:
      if (is_int(t)) return static_cast<double>(static_cast<int>(h % 2001) - 1000);
      return (static_cast<double>(h % 20001) - 10000.0) / 1000.0;
    default:
      if (is_int(t)) return static_cast<double>(static_cast<int>(h % 200001) - 100000);
      return (static_cast<double>(h % 20001) - 10000.0) / 64.0;
  }
}

// The input as the dtype stores it.
double rounded(double v, DataType t) {
  std::uint64_t tmp = 0;
  store_element(&tmp, 0, t, v);
  return load_element(&tmp, 0, t);
}

std::uint64_t fnv(const void* p, std::size_t bytes) {
  std::uint64_t h = 1469598103934665603ull;
  const auto* b = static_cast<const unsigned char*>(p);
  for (std::size_t i = 0; i < bytes; ++i) h = (h ^ b[i]) * 1099511628211ull;
  return h;
}

struct Case {
  std::string algo;
  DataType dtype;
  ReduceOp op;
  std::size_t count;
  bool in_place;
  int straggler;
  int delay_ms;
  bool c_api;
  std::uint64_t seed;
  std::vector<int> stragglers = {};  // Options::stragglers; all of them are delayed
  int pipeline = kPipelineAuto;      // Options::pipeline (pipelined algorithms)
};

std::string describe(const Case& c) {
  char text[256];
  std::snprintf(text, sizeof text, "n=%d algo=%s dtype=%s op=%s count=%zu %s straggler=%d delay=%dms api=%s K=%d",
                g_n, c.algo.c_str(), to_string(c.dtype), to_string(c.op), c.count,
                c.in_place ? "in-place" : "out-of-place", c.straggler, c.delay_ms, c.c_api ? "C" : "C++", c.pipeline);
  return text;
}

constexpr std::size_t kGuard = 8;  // elements of canary after the buffer
constexpr unsigned char kCanary = 0xA5;

void run_case(const Case& c) {
  const std::size_t es = size_of(c.dtype);
  std::vector<unsigned char> send((c.count + kGuard) * es, kCanary);
  std::vector<unsigned char> recv((c.count + kGuard) * es, kCanary);
  for (std::size_t i = 0; i < c.count; ++i)
    store_element(c.in_place ? recv.data() : send.data(), i, c.dtype, input(c.seed, g_rank, i, c.dtype, c.op));
  const std::vector<unsigned char> send_before = send;

  const bool late = g_rank == c.straggler ||
                    std::find(c.stragglers.begin(), c.stragglers.end(), g_rank) != c.stragglers.end();
  if (c.delay_ms > 0 && late)
    std::this_thread::sleep_for(std::chrono::milliseconds(c.delay_ms));
  const void* sbuf = c.in_place ? static_cast<const void*>(recv.data()) : send.data();
  try {
    if (c.c_api) {
      stragglar_options o;
      stragglar_options_init(&o);
      o.algorithm = static_cast<stragglar_algorithm>(options_for(c.algo).algorithm);  // the C enum = the table's ids
      o.straggler = c.straggler;
      o.pipeline = c.pipeline;
      o.stragglers = c.stragglers.empty() ? nullptr : c.stragglers.data();
      o.nstragglers = static_cast<int>(c.stragglers.size());
      const stragglar_result r = stragglar_mpi_allreduce(
          c.in_place ? MPI_IN_PLACE : sbuf, recv.data(), c.count, static_cast<stragglar_dtype>(c.dtype),
          static_cast<stragglar_op>(c.op), MPI_COMM_WORLD, &o);
      if (r != stragglar_success) {
        fail(describe(c) + ": " + stragglar_result_string(r) + ": " + stragglar_last_error());
        return;
      }
    } else {
      Options o = options_for(c.algo);
      o.straggler = c.straggler;
      o.stragglers = c.stragglers;
      o.pipeline = c.pipeline;
      allreduce(sbuf, recv.data(), c.count, c.dtype, c.op, MPI_COMM_WORLD, o);
    }
  } catch (const std::exception& e) {
    fail(describe(c) + ": threw " + e.what());
    return;
  }
  ++g_checked;

  // Element-wise against the float64 reference.
  const double u = unit_roundoff(c.dtype);
  std::size_t wrong = 0, first_wrong = 0;
  double got_first = 0, want_first = 0;
  for (std::size_t i = 0; i < c.count; ++i) {
    double acc = 0, abs_sum = 0;
    std::int64_t iacc = 0;
    for (int r = 0; r < g_n; ++r) {
      const double x = rounded(input(c.seed, r, i, c.dtype, c.op), c.dtype);
      abs_sum += std::fabs(x);
      if (r == 0) {
        acc = x;
        iacc = static_cast<std::int64_t>(x);
        continue;
      }
      switch (c.op) {
        case ReduceOp::sum:
        case ReduceOp::avg: acc += x; iacc += static_cast<std::int64_t>(x); break;
        case ReduceOp::prod: acc *= x; break;
        case ReduceOp::min: acc = std::min(acc, x); break;
        case ReduceOp::max: acc = std::max(acc, x); break;
      }
    }
    double want = acc, tol = 0;
    if (c.op == ReduceOp::avg) want = is_int(c.dtype) ? static_cast<double>(iacc / g_n) : acc / g_n;
    if (!is_int(c.dtype) && (c.op == ReduceOp::sum || c.op == ReduceOp::avg))
      tol = (g_n + 2) * u * abs_sum;
    const double got = load_element(recv.data(), i, c.dtype);
    if (!(std::fabs(got - want) <= tol)) {
      if (wrong == 0) { first_wrong = i; got_first = got; want_first = want; }
      ++wrong;
    }
  }
  if (wrong)
    fail(describe(c) + ": " + std::to_string(wrong) + " wrong elements, first at " + std::to_string(first_wrong) +
         ": got " + std::to_string(got_first) + ", expected " + std::to_string(want_first));
  for (std::size_t b = c.count * es; b < recv.size(); ++b)
    if (recv[b] != kCanary) { fail(describe(c) + ": wrote past the end of recvbuf"); break; }
  if (!c.in_place && send != send_before) fail(describe(c) + ": modified sendbuf");

  // Identical bits on every rank: min and max of the hash agree.
  const std::uint64_t h = fnv(recv.data(), c.count * es);
  std::uint64_t hv[2] = {h, ~h}, out[2];
  MPI_Allreduce(hv, out, 2, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
  if (out[0] != h || ~out[1] != h) fail(describe(c) + ": ranks hold different bits");
}

// quick (sanitizer builds): one straggler per case (alternating), about half the calls.
int correctness(bool large_only, bool quick) {
  std::uint64_t seed = 1;
  std::vector<std::size_t> counts = {0, 1, static_cast<std::size_t>(g_n >= 2 ? g_n - 2 : 2), 1009};
  if (!large_only) {
    int cases = 0;
    for (const std::string& algo : kAlgos)
      for (DataType t : kTypes)
        for (ReduceOp op : kOps)
          for (std::size_t count : counts)
            for (int in_place = 1; in_place >= 0; --in_place)
              for (int straggler : {g_n - 1, 0}) {
                if (quick && (straggler == 0) != ((cases + in_place) % 2 == 1)) continue;
                // A small delay on a subset keeps the runtime sane (the delay is pure sleep).
                const bool delayed = count == 1009 && (op == ReduceOp::sum || op == ReduceOp::max) &&
                                     (t == DataType::float32 || t == DataType::float16);
                const bool c_api = ((cases++) % 3) == 0;
                run_case({algo, t, op, count, in_place == 1, straggler, 0, c_api, ++seed});
                if (delayed) run_case({algo, t, op, count, in_place == 1, straggler, 3, c_api, ++seed});
              }
  }
  // At least 1M elements: fewer combinations.
  const std::size_t big = (std::size_t{1} << 20) + 3;
  for (const std::string& algo : kAlgos) {
    run_case({algo, DataType::float32, ReduceOp::sum, big, true, g_n - 1, 5, false, ++seed});
    run_case({algo, DataType::bfloat16, ReduceOp::avg, big, false, 0, 0, true, ++seed});
    run_case({algo, DataType::int64, ReduceOp::max, big, false, g_n - 1, 0, false, ++seed});
  }
  // Explicit pipelining factors for StragglAR (more chunks than elements included).
  for (int k : {1, 2, 3}) {
    for (std::size_t count : {std::size_t{5}, std::size_t{1009}}) {
      Options o = options_for("stragglar");
      o.pipeline = k;
      std::vector<float> buf(count), want(count);
      for (std::size_t i = 0; i < count; ++i) {
        buf[i] = static_cast<float>(g_rank + 1) * static_cast<float>(i % 7);
        want[i] = static_cast<float>(g_n * (g_n + 1) / 2) * static_cast<float>(i % 7);
      }
      try {
        allreduce(buf.data(), buf.data(), count, DataType::float32, ReduceOp::sum, MPI_COMM_WORLD, o);
        ++g_checked;
        if (buf != want) fail("stragglar pipeline=" + std::to_string(k) + " count=" + std::to_string(count) + ": wrong result");
      } catch (const std::exception& e) {
        fail("stragglar pipeline=" + std::to_string(k) + ": threw " + e.what());
      }
    }
  }
  return 0;
}

// Expects fn to throw stragglar::Error with `code`; records a failure otherwise.
template <typename F>
void expect_error(const std::string& what, ErrorCode code, F&& fn) {
  try {
    fn();
    fail(what + ": no error, expected " + to_string(code));
  } catch (const Error& e) {
    ++g_checked;
    if (e.code() != code)
      fail(what + ": got " + to_string(e.code()) + " (" + e.what() + "), expected " + to_string(code));
    else if (g_rank == 0)
      std::printf("ok   %s: %s: %s\n", what.c_str(), to_string(code), e.what());
  }
}

int errors() {
  std::vector<float> buf(100, 1.0f), out(100, 7.0f);
  const std::vector<float> out_before = out;
  // Mismatched straggler across ranks: Mismatch on every rank, buffers untouched.
  {
    Options o = options_for("stragglar");
    o.straggler = g_rank == 0 ? 0 : g_n - 1;
    expect_error("mismatched straggler", ErrorCode::Mismatch, [&] {
      allreduce(buf.data(), out.data(), buf.size(), DataType::float32, ReduceOp::sum, MPI_COMM_WORLD, o);
    });
    if (out != out_before) fail("mismatched straggler: recvbuf modified");
  }
  // Mismatched count, dtype, op, algorithm.
  expect_error("mismatched count", ErrorCode::Mismatch, [&] {
    allreduce(buf.data(), buf.data(), g_rank == 1 ? 99 : 100, DataType::float32, ReduceOp::sum, MPI_COMM_WORLD);
  });
  expect_error("mismatched op", ErrorCode::Mismatch, [&] {
    allreduce(buf.data(), buf.data(), 10, DataType::float32, g_rank == 0 ? ReduceOp::max : ReduceOp::min,
              MPI_COMM_WORLD);
  });
  expect_error("mismatched dtype", ErrorCode::Mismatch, [&] {
    allreduce(buf.data(), buf.data(), 10, g_rank == 0 ? DataType::float32 : DataType::int32, ReduceOp::sum,
              MPI_COMM_WORLD);
  });
  expect_error("mismatched algorithm", ErrorCode::Mismatch, [&] {
    allreduce(buf.data(), buf.data(), 10, DataType::float32, ReduceOp::sum, MPI_COMM_WORLD,
              options_for(g_rank == 0 ? "ring" : "native"));
  });
  expect_error("mismatched pipeline", ErrorCode::Mismatch, [&] {
    Options o = options_for("stragglar");
    o.pipeline = g_rank == 0 ? 1 : 2;
    allreduce(buf.data(), buf.data(), 10, DataType::float32, ReduceOp::sum, MPI_COMM_WORLD, o);
  });
  // Invalid argument on one rank: InvalidUsage there, RemoteError on the others; no hang.
  expect_error("bad straggler on rank 0", g_rank == 0 ? ErrorCode::InvalidUsage : ErrorCode::RemoteError, [&] {
    Options o = options_for("ring");
    o.straggler = g_rank == 0 ? g_n + 5 : -1;
    allreduce(buf.data(), out.data(), 10, DataType::float32, ReduceOp::sum, MPI_COMM_WORLD, o);
  });
  if (out != out_before) fail("bad straggler: recvbuf modified");
  expect_error("NULL recvbuf", ErrorCode::InvalidUsage, [&] {
    allreduce(buf.data(), nullptr, 11, DataType::float32, ReduceOp::sum, MPI_COMM_WORLD);
  });
  // MPI_IN_PLACE is a send buffer only (MPI_Allreduce says MPI_ERR_BUFFER): an error, not a crash.
  for (const char* alg : {"stragglar", "native", "auto"})
    expect_error(std::string("MPI_IN_PLACE as recvbuf, ") + alg, ErrorCode::InvalidUsage, [&] {
      allreduce(buf.data(), MPI_IN_PLACE, 13, DataType::float32, ReduceOp::sum, MPI_COMM_WORLD, options_for(alg));
    });
  expect_error("partially overlapping buffers", ErrorCode::InvalidUsage, [&] {
    allreduce(buf.data(), buf.data() + 1, 12, DataType::float32, ReduceOp::sum, MPI_COMM_WORLD);
  });
  expect_error("unknown algorithm name", ErrorCode::InvalidUsage, [&] { (void)options_for("bogus"); });
  // C API: bad enum values give invalid_usage with a message, buffers untouched.
  {
    stragglar_options o;
    stragglar_options_init(&o);
    const stragglar_result r = stragglar_mpi_allreduce(buf.data(), out.data(), 10, static_cast<stragglar_dtype>(7),
                                                       stragglar_sum, MPI_COMM_WORLD, &o);
    ++g_checked;
    if (r != stragglar_invalid_usage || std::strstr(stragglar_last_error(), "7") == nullptr)
      fail(std::string("C API bad dtype: got ") + stragglar_result_string(r) + ": " + stragglar_last_error());
    o.algorithm = static_cast<stragglar_algorithm>(50);  // a hole in the table's C enum
    const stragglar_result r2 = stragglar_mpi_allreduce(buf.data(), out.data(), 10, stragglar_float32,
                                                        stragglar_sum, MPI_COMM_WORLD, &o);
    ++g_checked;
    if (r2 != stragglar_invalid_usage || std::strstr(stragglar_last_error(), "algorithm 50 is not valid") == nullptr)
      fail(std::string("C API bad algorithm: got ") + stragglar_result_string(r2) + ": " + stragglar_last_error());
    if (out != out_before) fail("C API bad arguments: recvbuf modified");
  }
  // After all these errors the communicator still works (nothing was sent).
  std::vector<float> ok(33, 1.0f);
  try {
    allreduce(ok.data(), ok.data(), ok.size(), DataType::float32, ReduceOp::sum, MPI_COMM_WORLD);
    ++g_checked;
    for (float v : ok)
      if (v != static_cast<float>(g_n)) { fail("allreduce after errors: wrong result"); break; }
  } catch (const std::exception& e) {
    fail(std::string("allreduce after errors threw: ") + e.what());
  }
  return 0;
}

// Rank `victim` stops (or dies) after a first, successful call; the others call again and
// must get Timeout. Survivors write their outcome to DIR/rank<r>.txt.
// `auto_policy`: 4 MiB calls, where auto runs its policy (not the small-message native), three
// of them before the stop: the survivors' next call begins by collecting auto's exchange of the
// last one (MPI: split around the next call, docs/auto.md "The exchange").
int stop_peer(int victim, const std::string& dir, bool kill, bool auto_policy = false) {
  std::vector<float> buf(auto_policy ? std::size_t{1} << 20 : 4096, 1.0f);
  // Set up the communicator state and the configuration while everyone is alive.
  for (int call = 0; call < (auto_policy ? 3 : 1); ++call)
    allreduce(buf.data(), buf.data(), buf.size(), DataType::float32, ReduceOp::sum, MPI_COMM_WORLD);
  const int pid = static_cast<int>(getpid());
  std::vector<int> pids(static_cast<std::size_t>(g_n));
  MPI_Allgather(&pid, 1, MPI_INT, pids.data(), 1, MPI_INT, MPI_COMM_WORLD);
  MPI_Comm survivors;
  MPI_Comm_split(MPI_COMM_WORLD, g_rank == victim ? 1 : 0, g_rank, &survivors);
  MPI_Barrier(MPI_COMM_WORLD);
  if (g_rank == victim) raise(kill ? SIGKILL : SIGSTOP);
  std::string outcome;
  const double t0 = MPI_Wtime();
  try {
    allreduce(buf.data(), buf.data(), buf.size(), DataType::float32, ReduceOp::sum, MPI_COMM_WORLD);
    outcome = "NO-ERROR";
  } catch (const Error& e) {
    // A survivor not waiting for the victim itself may first get the "gave up" notice of one
    // that timed out: RemoteError naming that rank, instead of its own timeout.
    const bool gave_up = e.code() == ErrorCode::RemoteError && std::strstr(e.what(), "gave up on this call");
    outcome = std::string(e.code() == ErrorCode::Timeout ? "Timeout" : gave_up ? "GaveUp" : "WRONG-CODE") + " (" +
              to_string(e.code()) + ") after " + std::to_string(MPI_Wtime() - t0) + " s: " + e.what();
  }
  std::fprintf(stderr, "[rank %d] %s\n", g_rank, outcome.c_str());
  if (!dir.empty()) {
    std::ofstream(dir + "/rank" + std::to_string(g_rank) + ".txt") << outcome << "\n";
  }
  // Everyone has reported: end the stopped victim so mpirun can finish (with an error status).
  MPI_Barrier(survivors);
  if (g_rank == (victim == 0 ? 1 : 0)) ::kill(pids[static_cast<std::size_t>(victim)], SIGKILL);
  std::fflush(stderr);
  std::_Exit(outcome.rfind("Timeout", 0) == 0 || outcome.rfind("GaveUp", 0) == 0 ? 0 : 1);
}

// A rank later than STRAGGLAR_TIMEOUT_S: on the first call on a communicator (the
// communicator's idup times out) and on a new configuration of a working one (the argument
// check times out). Every rank must get Timeout, later calls on a broken communicator must fail
// at once, and nothing may write into memory after a call returned (run under ASan in CI; the
// buffers and stack frames of the timed-out calls are gone when the late rank's operations
// complete). Freeing the communicators and MPI_Finalize must not crash.
int late_rank(double late_s) {
  const int late = g_n - 1;
  auto outcome = [&](const char* what, auto&& call) {
    std::string got;
    try {
      call();
      got = "NO-ERROR";
    } catch (const Error& e) {
      got = to_string(e.code());
      // The late rank itself may find the others' "gave up" notices: RemoteError
      // at once instead of its own timeout. So may a punctual rank that entered the call after
      // another punctual one (a loaded machine deschedules it between the barrier and the call):
      // the earlier rank's timeout fires first and its notice reaches the later one.
      const bool gave_up_notice = e.code() == ErrorCode::RemoteError && std::strstr(e.what(), "gave up") != nullptr;
      const bool ok = e.code() == ErrorCode::Timeout || (g_rank == late && e.code() == ErrorCode::RemoteError) ||
                      gave_up_notice;
      if (!ok) fail(std::string(what) + ": got " + got + ": " + e.what());
      else ++g_checked;
    }
    if (got == "NO-ERROR") fail(std::string(what) + ": no error, expected Timeout");
  };
  MPI_Comm a, b;
  MPI_Comm_dup(MPI_COMM_WORLD, &a);
  MPI_Comm_dup(MPI_COMM_WORLD, &b);
  {
    std::vector<float> warm(64, 1.0f);  // b works: its state and one configuration exist
    allreduce(warm.data(), warm.data(), warm.size(), DataType::float32, ReduceOp::sum, b);
  }
  // 1. First call on `a`: the late rank arrives after the others gave up.
  if (g_rank == late) std::this_thread::sleep_for(std::chrono::duration<double>(late_s));
  {
    std::vector<float> buf(1000, 1.0f);
    outcome("late first call on a communicator", [&] {
      allreduce(buf.data(), buf.data(), buf.size(), DataType::float32, ReduceOp::sum, a);
    });
    if (g_rank != late)
      outcome("second call on the broken communicator", [&] {
        allreduce(buf.data(), buf.data(), 10, DataType::float32, ReduceOp::max, a);
      });
  }
  MPI_Barrier(MPI_COMM_WORLD);
  // 2. A new configuration on `b`: the argument check times out on the punctual ranks.
  if (g_rank == late) std::this_thread::sleep_for(std::chrono::duration<double>(late_s));
  {
    std::vector<double> buf(5000, 2.0);
    outcome("late rank on a new configuration", [&] {
      allreduce(buf.data(), buf.data(), buf.size(), DataType::float64, ReduceOp::sum, b);
    });
  }
  MPI_Barrier(MPI_COMM_WORLD);
  // 3. auto (the default) while it runs native: MPI_Allreduce cannot time out, so auto's native
  // is bounded; the punctual ranks get Timeout, not a hang. At 8 ranks and 1 KiB the model says
  // no schedule can beat native at any delay (docs/auto.md "Small messages"), so auto runs the
  // bounded native on every call, with no policy.
  MPI_Comm c;
  MPI_Comm_dup(MPI_COMM_WORLD, &c);
  {
    std::vector<float> warm(256, 1.0f);
    for (int i = 0; i < 4; ++i)
      allreduce(warm.data(), warm.data(), warm.size(), DataType::float32, ReduceOp::sum, c, options_for("auto"));
  }
  if (g_rank == late) std::this_thread::sleep_for(std::chrono::duration<double>(late_s));
  {
    // Freed right after the call: a late write by the pending collective would hit freed memory.
    auto buf = std::make_unique<std::vector<float>>(256, 1.0f);
    const double t0 = MPI_Wtime();
    if (g_rank != late) {
      outcome("late rank while auto runs native", [&] {
        allreduce(buf->data(), buf->data(), buf->size(), DataType::float32, ReduceOp::sum, c, options_for("auto"));
      });
      if (detail::mpi_session(c).last_choice().algorithm != Algorithm::native)
        fail("auto's call was not native: the test's premise (auto's small-message gate at 8 ranks) changed");
      if (MPI_Wtime() - t0 > detail::env().timeout_s + 10) fail("auto's native: the timeout took far too long");
    } else {
      try {  // the late rank finds the others' pending collective: success or Timeout
        allreduce(buf->data(), buf->data(), buf->size(), DataType::float32, ReduceOp::sum, c, options_for("auto"));
      } catch (const Error& e) {
        if (e.code() != ErrorCode::Timeout) fail(std::string("late rank in auto's native: ") + e.what());
      }
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
  // 4. A bad pointer on one rank on a configuration already in use: no agreement runs, so that
  // rank's communicator becomes unusable (its next call would pair with the others' current one
  // and mix data), and the others time out instead of returning success with wrong data.
  MPI_Comm d;
  MPI_Comm_dup(MPI_COMM_WORLD, &d);
  {
    const int bad = 1 % g_n;
    std::vector<float> buf(300, 1.0f);
    allreduce(buf.data(), buf.data(), buf.size(), DataType::float32, ReduceOp::sum, d, options_for("ring"));
    if (g_rank == bad) {
      expect_error("NULL recvbuf on a known configuration", ErrorCode::InvalidUsage, [&] {
        allreduce(buf.data(), nullptr, buf.size(), DataType::float32, ReduceOp::sum, d, options_for("ring"));
      });
      try {
        allreduce(buf.data(), buf.data(), buf.size(), DataType::float32, ReduceOp::sum, d, options_for("ring"));
        fail("the call after a local error on a known configuration succeeded: it pairs with the others' last call");
      } catch (const Error& e) {
        ++g_checked;
        if (std::strstr(e.what(), "unusable") == nullptr) fail(std::string("expected 'unusable': ") + e.what());
      }
    } else {
      outcome("peer with a bad pointer on a known configuration", [&] {
        allreduce(buf.data(), buf.data(), buf.size(), DataType::float32, ReduceOp::sum, d, options_for("ring"));
      });
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
  // Give every pending operation the chance to complete into freed stack/heap, then free.
  std::vector<char> scribble(1 << 20, 0x5a);
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Comm_free(&a);
  MPI_Comm_free(&b);
  MPI_Comm_free(&c);
  MPI_Comm_free(&d);
  (void)scribble;
  return 0;
}

// Issue #22: a rank calling with another count on a configuration the others already know (no
// agreement runs there) gets Error(Mismatch) on every rank, within a short bound (the test runs
// under a 20 s STRAGGLAR_TIMEOUT_S: a timeout would take 20 s), and the communicator is broken
// after it (the next call fails at once). Three shapes: the odd rank in the argument check of a
// new configuration while the others run a known one; both in known configurations; the odd
// rank in a known configuration while the others check a new one.
int mismatch_known() {
  const double bound_s = 3.0;
  if (detail::env().timeout_s < 4 * bound_s) fail("mismatch_known: needs STRAGGLAR_TIMEOUT_S >= 12");
  const char* shapes[] = {"odd rank checks a new configuration", "both configurations known",
                          "the others check a new configuration"};
  for (const char* algo : {"ring", "stragglar", "rhd", "allpairs", "broadcast"})
    for (int odd : {0, g_n - 1})
      for (int shape = 0; shape < 3; ++shape) {
        MPI_Comm c;
        MPI_Comm_dup(MPI_COMM_WORLD, &c);
        const Options o = options_for(algo);
        const std::size_t usual = 3000, other = 3001;
        std::vector<float> buf(other, 1.0f);
        allreduce(buf.data(), buf.data(), usual, DataType::float32, ReduceOp::sum, c, o);
        if (shape == 1) allreduce(buf.data(), buf.data(), other, DataType::float32, ReduceOp::sum, c, o);
        // shapes 0, 1: the odd rank passes `other`; shape 2: everyone else does (new for them).
        const bool passes_other = (g_rank == odd) == (shape != 2);
        const std::string what = std::string(algo) + ", odd rank " + std::to_string(odd) + ", " + shapes[shape];
        const double t0 = MPI_Wtime();
        expect_error(what, ErrorCode::Mismatch, [&] {
          allreduce(buf.data(), buf.data(), passes_other ? other : usual, DataType::float32, ReduceOp::sum, c, o);
        });
        const double took = MPI_Wtime() - t0;
        if (took > bound_s) fail(what + ": Mismatch after " + std::to_string(took) + " s, expected < 3 s");
        const double t1 = MPI_Wtime();
        try {
          allreduce(buf.data(), buf.data(), usual, DataType::float32, ReduceOp::sum, c, o);
          fail(what + ": the call after the mismatch succeeded on a broken communicator");
        } catch (const Error&) {
          ++g_checked;
          if (MPI_Wtime() - t1 > 1.0) fail(what + ": the call after the mismatch did not fail at once");
        }
        MPI_Barrier(MPI_COMM_WORLD);
        MPI_Comm_free(&c);
      }
  return 0;
}

// auto's choices (one rank's record, per call) must be the same on every rank.
void expect_same_choices_on_every_rank(const std::vector<int>& ran, const std::string& what) {
  std::vector<int> all(ran.size() * static_cast<std::size_t>(g_n));
  MPI_Allgather(ran.data(), static_cast<int>(ran.size()), MPI_INT, all.data(), static_cast<int>(ran.size()), MPI_INT,
                MPI_COMM_WORLD);
  for (int r = 0; r < g_n; ++r)
    if (!std::equal(ran.begin(), ran.end(), all.begin() + static_cast<std::ptrdiff_t>(r * ran.size())))
      fail(what + ": rank " + std::to_string(r) + " ran other choices than rank " + std::to_string(g_rank));
}

// algorithm = auto with rank `late` sleeping before every call: every rank runs the same choice
// at every call, the results stay exact, and the report (C++ and C) names the late rank.
int auto_late(int late, int calls, int delay_ms) {
  const std::size_t count = 1 << 16;
  std::vector<float> buf(count);
  Options o = options_for("auto");
  std::vector<int> ran;  // algorithm and straggler of every call, to compare across ranks
  for (int call = 0; call < calls; ++call) {
    for (std::size_t i = 0; i < count; ++i) buf[i] = static_cast<float>((g_rank + 1) * static_cast<int>(i % 5));
    if (g_rank == late) std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
    allreduce(buf.data(), buf.data(), count, DataType::float32, ReduceOp::sum, MPI_COMM_WORLD, o);
    ++g_checked;
    for (std::size_t i = 0; i < count; ++i)
      if (buf[i] != static_cast<float>(g_n * (g_n + 1) / 2 * static_cast<int>(i % 5))) {
        fail("auto call " + std::to_string(call) + ": wrong result at " + std::to_string(i));
        break;
      }
    const detail::Choice c = detail::mpi_session(MPI_COMM_WORLD).last_choice();
    ran.push_back(static_cast<int>(c.algorithm) * 10000 + c.straggler + 1);
  }
  expect_same_choices_on_every_rank(ran, "auto");
  const StragglerReport rep = straggler_report(MPI_COMM_WORLD);
  if (!rep.active || rep.late_rank != late || rep.calls != calls)
    fail("auto report: active " + std::to_string(rep.active) + ", late rank " + std::to_string(rep.late_rank) +
         " (expected " + std::to_string(late) + "), calls " + std::to_string(rep.calls));
  stragglar_straggler_report c{};
  std::vector<double> scores(static_cast<std::size_t>(g_n), -1.0);
  if (stragglar_mpi_straggler_report(MPI_COMM_WORLD, &c, scores.data(), g_n) != stragglar_success)
    fail(std::string("C report: ") + stragglar_last_error());
  if (c.late_rank != late || c.nranks != g_n || c.active != 1) fail("C report: wrong late rank or nranks");
  for (int r = 0; r < g_n; ++r)
    if (scores[static_cast<std::size_t>(r)] < 0 || scores[static_cast<std::size_t>(r)] > 1 ||
        (r != late && scores[static_cast<std::size_t>(r)] >= scores[static_cast<std::size_t>(late)]))
      fail("C report: score of rank " + std::to_string(r) + " = " + std::to_string(scores[static_cast<std::size_t>(r)]));
  if (g_rank == 0)
    std::printf("auto: late rank %d, delay %.1f ms, decided %s(straggler %d) after %lld calls\n", rep.late_rank,
                rep.delay_s * 1e3, to_string(rep.algorithm), rep.straggler, static_cast<long long>(rep.calls));
  return 0;
}

// algorithm = auto with a different random rank late before each call (one seed on every rank)
// and arrival tickets on (STRAGGLAR_ARRIVAL_TICKETS=on, docs/arrival-tickets.md): every rank
// runs the same choice at every call, the results stay exact (so identical on every rank), and
// every call after the configuration's first took a ticket.
int auto_moving(int calls, int delay_ms, bool one_host = true) {
  const std::size_t count = (1 << 16) + 3;  // chunks of unequal sizes
  std::vector<float> buf(count);
  Options o = options_for("auto");
  std::vector<int> ran;
  std::mt19937 shared(11);
  for (int call = 0; call < calls; ++call) {
    const int late = static_cast<int>(shared() % static_cast<unsigned>(g_n));
    for (std::size_t i = 0; i < count; ++i) buf[i] = static_cast<float>((g_rank + 1) * static_cast<int>(i % 5) + call);
    if (g_rank == late) std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
    allreduce(buf.data(), buf.data(), count, DataType::float32, ReduceOp::sum, MPI_COMM_WORLD, o);
    ++g_checked;
    for (std::size_t i = 0; i < count; ++i)
      if (buf[i] != static_cast<float>(g_n * (g_n + 1) / 2 * static_cast<int>(i % 5) + g_n * call)) {
        fail("auto call " + std::to_string(call) + ": wrong result at " + std::to_string(i));
        break;
      }
    const detail::Choice c = detail::mpi_session(MPI_COMM_WORLD).last_choice();
    ran.push_back(static_cast<int>(c.algorithm) * 10000 + c.straggler + 1);
  }
  expect_same_choices_on_every_rank(ran, "auto with arrival tickets");
  const StragglerReport rep = straggler_report(MPI_COMM_WORLD);
  const int ticketed = one_host ? calls - 1 : 0;  // across hosts auto leaves them off
  if (!rep.active || rep.calls != calls || rep.arrival_calls != ticketed)
    fail("auto report: calls " + std::to_string(rep.calls) + ", arrival-ticket calls " + std::to_string(rep.arrival_calls) +
         " (expected " + std::to_string(ticketed) + ")");
  if (!one_host && rep.ranks_per_host != g_n / 2)
    fail("auto report: " + std::to_string(rep.ranks_per_host) + " ranks per host, expected two hosts of " +
         std::to_string(g_n / 2));
  if (g_rank == 0)
    std::printf("auto with arrival tickets: %lld of %d calls went on without their late rank\n",
                static_cast<long long>(rep.arrival_late_calls), calls);
  return 0;
}

// auto with two ranks late together: the policy learns the set from the
// exchanged in-call times; every rank must run the same choices (sets included), exactly.
int auto_late_set(int calls, int delay_ms) {
  // 4 MiB: there the host model puts stragglar-k with this set ahead of ring and rhd (at 256 KiB
  // rhd is ahead, and auto rightly keeps it), so auto measures it; whether it then wins depends on
  // this host's load (timings are not tested).
  const std::size_t count = 1 << 20;
  std::vector<float> buf(count);
  Options o = options_for("auto");
  const std::vector<int> late = {g_n - 2, g_n - 1};
  std::vector<int> ran;  // per call: algorithm, straggler, the set's ranks (padded), to compare across ranks
  int k_calls = 0;
  for (int call = 0; call < calls; ++call) {
    for (std::size_t i = 0; i < count; ++i) buf[i] = static_cast<float>((g_rank + 1) * static_cast<int>(i % 5));
    if (std::find(late.begin(), late.end(), g_rank) != late.end())
      std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
    allreduce(buf.data(), buf.data(), count, DataType::float32, ReduceOp::sum, MPI_COMM_WORLD, o);
    ++g_checked;
    for (std::size_t i = 0; i < count; ++i)
      if (buf[i] != static_cast<float>(g_n * (g_n + 1) / 2 * static_cast<int>(i % 5))) {
        fail("auto (late set) call " + std::to_string(call) + ": wrong result at " + std::to_string(i));
        break;
      }
    const detail::Choice c = detail::mpi_session(MPI_COMM_WORLD).last_choice();
    ran.push_back(static_cast<int>(c.algorithm));
    ran.push_back(c.straggler);
    for (std::size_t i = 0; i < 4; ++i) ran.push_back(i < c.late.size() ? c.late[i] : -1);
    k_calls += c.algorithm == Algorithm::stragglar_k;
  }
  expect_same_choices_on_every_rank(ran, "auto (late set)");
  const StragglerReport rep = straggler_report(MPI_COMM_WORLD);
  if (!rep.active || rep.late_set != late || rep.calls != calls)
    fail("auto report: late set of " + std::to_string(rep.late_set.size()) + " ranks (expected ranks " +
         std::to_string(late[0]) + "," + std::to_string(late[1]) + "), calls " + std::to_string(rep.calls));
  if (k_calls == 0) fail(std::string("auto (late set): stragglar-k never ran, decided ") + to_string(rep.algorithm));
  if (g_rank == 0)
    std::printf("auto: late set %d,%d, decided %s after %lld calls (stragglar-k in %d of them)\n",
                rep.late_set.empty() ? -1 : rep.late_set[0], rep.late_set.size() < 2 ? -1 : rep.late_set[1],
                to_string(rep.algorithm), static_cast<long long>(rep.calls), k_calls);
  return 0;
}

// STRAGGLAR_TIMEOUT_S=1e-9: every wait times out at once. Each call must end in success or
// Timeout (never another error, never a crash), and freeing + MPI_Finalize must stay clean.
int tiny_timeout() {
  MPI_Comm c;
  MPI_Comm_dup(MPI_COMM_WORLD, &c);
  for (MPI_Comm comm : {MPI_COMM_WORLD, c})
    for (int i = 0; i < 3; ++i) {
      std::vector<float> buf(100 + static_cast<std::size_t>(i), 1.0f);
      try {
        allreduce(buf.data(), buf.data(), buf.size(), DataType::float32, ReduceOp::sum, comm);
        ++g_checked;
      } catch (const Error& e) {
        // Another rank's timeout may fire first and its gave-up notice reach this one.
        if (e.code() == ErrorCode::Timeout ||
            (e.code() == ErrorCode::RemoteError && std::strstr(e.what(), "gave up") != nullptr))
          ++g_checked;
        else fail(std::string("tiny timeout: got ") + to_string(e.code()) + ": " + e.what());
      }
    }
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Comm_free(&c);
  return 0;
}

}  // namespace

// stragglar-k with several late ranks: exact on every rank for sets of 1..n/2 ranks,
// in any order; refused where it cannot run, with buffers untouched.
int late_set() {
  std::vector<std::vector<int>> sets = {{g_n - 1}};
  if (g_n >= 4) sets.push_back({g_n - 1, g_n - 2});
  if (g_n >= 4) sets.push_back({g_n / 2, 0});
  if (g_n >= 6) sets.push_back({1, 3, 5});
  if (g_n >= 2) {
    std::vector<int> half;
    for (int r = g_n - 1; r >= g_n - g_n / 2; --r) half.push_back(r);
    sets.push_back(half);
  }
  std::uint64_t seed = 7000;
  int cases = 0;
  for (const std::vector<int>& set : sets)
    for (DataType t : {DataType::float32, DataType::float64, DataType::bfloat16, DataType::int64})
      for (ReduceOp op : {ReduceOp::sum, ReduceOp::max, ReduceOp::avg})
        for (std::size_t count : {std::size_t{0}, std::size_t{1}, std::size_t{1009}, std::size_t{100003}})
          for (int in_place = 0; in_place < 2; ++in_place) {
            const bool c_api = (cases++ % 2) == 0;
            const int delay = count == 1009 && op == ReduceOp::sum ? 3 : 0;
            run_case({"stragglar-k", t, op, count, in_place == 1, -1, delay, c_api, ++seed, set});
            // hierarchical where the set is one host of |set| ranks (host-major)
            const int k = static_cast<int>(set.size());
            const int first = *std::min_element(set.begin(), set.end());
            if (2 * k <= g_n && g_n % k == 0 && first % k == 0 && *std::max_element(set.begin(), set.end()) == first + k - 1)
              run_case({"hierarchical", t, op, count, in_place == 1, -1, delay, !c_api, ++seed, set,
                        1 + static_cast<int>(seed % 4)});  // StragglAR across hosts pipelined 1..4-fold
          }
  if (g_n >= 4) {
    std::vector<double> in(64, 1.0), out(64, -1.0);
    const std::vector<double> out_before = out;
    Options o = options_for("stragglar");
    o.stragglers = {g_n - 1, g_n - 2};
    try {
      allreduce(in.data(), out.data(), in.size(), DataType::float64, ReduceOp::sum, MPI_COMM_WORLD, o);
      fail("stragglar with two stragglers: no error");
    } catch (const Error& e) {
      if (e.code() != ErrorCode::InvalidUsage || std::string(e.what()).find("expected stragglar-k") == std::string::npos)
        fail(std::string("stragglar with two stragglers: ") + e.what());
    }
    o = options_for("stragglar-k");
    o.stragglers = {g_rank == 0 ? 0 : g_n - 1, g_n - 2};  // rank 0 names another set
    try {
      allreduce(in.data(), out.data(), in.size(), DataType::float64, ReduceOp::sum, MPI_COMM_WORLD, o);
      fail("mismatched stragglers: no error");
    } catch (const Error& e) {
      if (e.code() != ErrorCode::Mismatch) fail(std::string("mismatched stragglers: ") + e.what());
    }
    // C: a count without an array is refused on every rank, buffers untouched.
    stragglar_options c;
    stragglar_options_init(&c);
    c.algorithm = stragglar_algo_stragglar_k;
    c.stragglers = nullptr;
    c.nstragglers = 2;
    if (stragglar_mpi_allreduce(in.data(), out.data(), in.size(), stragglar_float64, stragglar_sum, MPI_COMM_WORLD, &c) !=
        stragglar_invalid_usage)
      fail(std::string("C stragglers = NULL, nstragglers = 2: expected invalid usage, got: ") + stragglar_last_error());
    if (out != out_before) fail("refused stragglers: recvbuf modified");
  }
  return 0;
}

// Every algorithm across the testbed's hosts (scripts/cluster.sh): the last host of
// `per_host` ranks is the late set of stragglar-k and hierarchical, rank n-1 the straggler of the
// others; the late host is delayed in part of the calls.
int cluster(int per_host) {
  std::vector<int> last_host;
  for (int r = g_n - per_host; r < g_n; ++r) last_host.push_back(r);
  std::vector<std::string> algos = kAlgos;
  algos.push_back("stragglar-k");
  if (g_n % per_host == 0 && 2 * per_host <= g_n) algos.push_back("hierarchical");
  std::uint64_t seed = 9000;
  int cases = 0;
  for (const std::string& algo : algos)
    for (DataType t : {DataType::float32, DataType::float64, DataType::int64})
      for (std::size_t count : {std::size_t{1}, std::size_t{1009}, std::size_t{100003}}) {
        const bool set = algo == "stragglar-k" || algo == "hierarchical";
        const ReduceOp op = t == DataType::float64 ? ReduceOp::max : ReduceOp::sum;
        const int delay = count == 1009 ? 5 : 0;
        run_case({algo, t, op, count, (cases % 2) == 0, g_n - 1, delay, (cases % 3) == 0, ++seed,
                  set ? last_host : std::vector<int>{}});
        ++cases;
      }
  // auto across hosts: it finds them at the communicator's first call (hosts.hpp) and learns the
  // late host as its late set; exact, the same choices on every rank (which ones is the host's
  // business: timings are not tested).
  const std::size_t count = 1 << 18;
  std::vector<float> buf(count);
  const Options o = options_for("auto");
  std::vector<int> ran;
  int hierarchical = 0;
  const bool late = std::find(last_host.begin(), last_host.end(), g_rank) != last_host.end();
  for (int call = 0; call < 20; ++call) {
    for (std::size_t i = 0; i < count; ++i) buf[i] = static_cast<float>((g_rank + 1) * static_cast<int>(i % 3));
    if (late) std::this_thread::sleep_for(std::chrono::milliseconds(30));
    allreduce(buf.data(), buf.data(), count, DataType::float32, ReduceOp::sum, MPI_COMM_WORLD, o);
    ++g_checked;
    for (std::size_t i = 0; i < count; ++i)
      if (buf[i] != static_cast<float>(g_n * (g_n + 1) / 2 * static_cast<int>(i % 3))) {
        fail("auto across hosts, call " + std::to_string(call) + ": wrong result at " + std::to_string(i));
        break;
      }
    const detail::Choice c = detail::mpi_session(MPI_COMM_WORLD).last_choice();
    ran.push_back(static_cast<int>(c.algorithm));
    hierarchical += c.algorithm == Algorithm::hierarchical;
  }
  expect_same_choices_on_every_rank(ran, "auto across hosts");
  const StragglerReport rep = straggler_report(MPI_COMM_WORLD);
  if (rep.ranks_per_host != per_host)
    fail("auto across hosts: " + std::to_string(rep.ranks_per_host) + " ranks per host reported, expected " +
         std::to_string(per_host));
  if (rep.late_set != last_host) fail("auto across hosts: the late host was not learned as the late set");
  if (g_rank == 0)
    std::printf("auto across hosts: %d ranks per host, decided %s, hierarchical in %d of 20 calls\n",
                rep.ranks_per_host, to_string(rep.algorithm), hierarchical);
  return 0;
}

// A malformed STRAGGLAR_* variable (run with STRAGGLAR_DEBUG=bogus): every call fails with
// InvalidUsage naming the variable and leaves the buffers untouched, the program goes on with
// MPI, and MPI_Finalize (whose callback frees stragglar's communicator state and reads the
// timeout) ends cleanly instead of terminating on the same error.
int bad_env() {
  for (int i = 0; i < 2; ++i) {
    std::vector<float> in(100, 1.0f), out(100, -7.0f);
    try {
      allreduce(in.data(), out.data(), in.size(), DataType::float32, ReduceOp::sum, MPI_COMM_WORLD);
      fail("a malformed STRAGGLAR_DEBUG: the call succeeded");
    } catch (const Error& e) {
      if (e.code() != ErrorCode::InvalidUsage || std::strstr(e.what(), "STRAGGLAR_DEBUG") == nullptr)
        fail(std::string("a malformed STRAGGLAR_DEBUG: expected InvalidUsage naming it, got ") + e.what());
      else ++g_checked;
    }
    if (out != std::vector<float>(100, -7.0f) || in != std::vector<float>(100, 1.0f))
      fail("a malformed STRAGGLAR_DEBUG: the call wrote the user's buffers");
  }
  return 0;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_n);
  const std::string mode = argc > 1 ? argv[1] : "correctness";
  const double t0 = MPI_Wtime();
  if (mode == "correctness") {
    correctness(false, argc > 2 && std::string(argv[2]) == "quick");
  } else if (mode == "large") {
    correctness(true, false);
  } else if (mode == "errors") {
    errors();
  } else if (mode == "auto_late") {
    auto_late(argc > 2 ? std::atoi(argv[2]) : g_n / 2, 30, 30);
  } else if (mode == "auto_moving") {
    auto_moving(30, 30);
  } else if (mode == "auto_moving_hosts") {
    auto_moving(12, 30, /*one_host=*/false);
  } else if (mode == "auto_late_set") {
    if (g_n >= 4) auto_late_set(30, 30);
    else if (g_rank == 0) std::printf("auto_late_set needs 4+ ranks: skipped\n");
  } else if (mode == "cluster") {
    cluster(argc > 2 ? std::atoi(argv[2]) : 4);
  } else if (mode == "late_set") {
    late_set();
  } else if (mode == "tiny_timeout") {
    tiny_timeout();
  } else if (mode == "bad_env") {
    bad_env();
  } else if (mode == "mismatch_known") {
    mismatch_known();
  } else if (mode == "late") {
    late_rank(argc > 2 ? std::atof(argv[2]) : 4.0);
  } else if (mode == "stop" || mode == "kill" || mode == "stop_auto") {
    const int victim = argc > 2 ? std::atoi(argv[2]) : g_n - 1;
    stop_peer(victim, argc > 3 ? argv[3] : "", mode == "kill", mode == "stop_auto");
  } else {
    if (g_rank == 0) std::fprintf(stderr, "unknown mode '%s': expected correctness, large, errors, auto_late, auto_moving, auto_moving_hosts, auto_late_set, cluster, late_set, late, tiny_timeout, mismatch_known, bad_env, stop, stop_auto, kill\n", mode.c_str());
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  long totals[2] = {g_failures, g_checked}, sums[2];
  MPI_Allreduce(totals, sums, 2, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
  if (g_rank == 0)
    std::printf("%s n=%d: %ld checks (summed over ranks), %ld failures, %.1f s\n", mode.c_str(), g_n, sums[1],
                sums[0], MPI_Wtime() - t0);
  MPI_Finalize();
  return sums[0] == 0 ? 0 : 1;
}
