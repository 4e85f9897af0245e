// The executor over UcxTransport in n processes started without MPI.
//
//   test_ucx_allreduce --np N MODE      the launcher: starts N copies of itself the way
//                                       torchrun does (RANK, WORLD_SIZE, a DirectoryStore
//                                       directory in STRAGGLAR_STORE_DIR; no MPI) and checks
//                                       how each ended
//   MODE = correctness [quick]   every algorithm (StragglAR also with K = 1 and K from
//                                choose_pipeline, and straggler 0) × count {0, 1, 7, 1000,
//                                1M+3} × {float32, int64, float16} × {sum, max}: results equal
//                                the float64 reference exactly, identical bits on every
//                                rank, canaries after the buffer untouched
//          transport             message order, tags, zero-byte messages, big messages,
//                                size mismatches, cancelled receives, a second transport
//          huge                  one message of 2^31 + 16 bytes from every rank to the next
//                                (beyond any int count; ~9 GB of memory at n = 2: run by hand)
//          stop                  the last rank SIGSTOPs itself: every other rank gets Timeout (or
//                                RemoteError from a peer that timed out first)
//          kill                  the last rank SIGKILLs itself: every other rank gets an error
//
// Inputs are chosen so every partial sum is exact in every dtype (quarters in fp16/fp32,
// integers below 2^50 in int64): "exact" means bit-equal to the float64 reference.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "runtime/cpu_device.hpp"
#include "runtime/element.hpp"
#include "runtime/executor.hpp"
#include "stragglar/error.hpp"
#include "stragglar/plan.hpp"
#include "stragglar/synthesize.hpp"
#include "stragglar/verify.hpp"
#include "ucx/kv_store.hpp"
#include "ucx/local_launcher.hpp"
#include "ucx/transport_collectives.hpp"
#include "ucx/ucx_transport.hpp"

using namespace stragglar;

namespace {

int g_rank = 0, g_n = 1;
long g_failures = 0, g_checked = 0, g_skipped = 0;

void fail(const std::string& what) {
  if (g_failures < 20) std::fprintf(stderr, "[rank %d] FAIL: %s\n", g_rank, what.c_str());
  ++g_failures;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::uint64_t mix(std::uint64_t x) {  // splitmix64
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

std::uint64_t fnv(const void* p, std::size_t bytes) {
  std::uint64_t h = 1469598103934665603ull;
  const auto* b = static_cast<const unsigned char*>(p);
  for (std::size_t i = 0; i < bytes; ++i) h = (h ^ b[i]) * 1099511628211ull;
  return h;
}

// Exact in its dtype, and so is every partial sum of n <= 8 of them.
double input(std::uint64_t seed, int r, std::size_t i, DataType t, ReduceOp op) {
  const std::uint64_t h = mix(seed ^ mix(static_cast<std::uint64_t>(r) * 1000003ull + i));
  if (t == DataType::int64) {
    const double v = static_cast<double>(h % (std::uint64_t{1} << 47));  // |sum| < 2^50
    return h & (std::uint64_t{1} << 63) ? -v : v;
  }
  if (op == ReduceOp::sum) return (static_cast<double>(h % 33) - 16.0) / 4.0;  // quarters in [-4, 4]
  return (static_cast<double>(h % 2001) - 1000.0) / 8.0;                        // eighths, fp16-exact
}

double rounded(double v, DataType t) {
  std::uint64_t tmp = 0;
  store_element(&tmp, 0, t, v);
  return load_element(&tmp, 0, t);
}

// ---- correctness ---------------------------------------------------------------------------
struct Variant {
  Algorithm algo;
  int pipeline;  // 0: choose_pipeline
  int straggler;
  std::string name() const {
    return std::string(to_string(algo)) + (algo == Algorithm::stragglar
                                               ? (pipeline ? ":K=" + std::to_string(pipeline) : std::string(":K=auto"))
                                               : "") +
           " straggler=" + std::to_string(straggler);
  }
};

constexpr std::size_t kGuard = 16;  // canary bytes after the buffer
constexpr unsigned char kCanary = 0xA5;

class Correctness {
 public:
  explicit Correctness(UcxTransport& t) : t_(t), exec_(t, device_) {}

  void run(const Variant& v, std::size_t count, DataType dt, ReduceOp op, int delay_ms, std::uint64_t seed) {
    char what[256];
    std::snprintf(what, sizeof what, "n=%d %s count=%zu %s %s delay=%dms", g_n, v.name().c_str(), count,
                  to_string(dt), to_string(op), delay_ms);
    const Plan* plan = plan_for(v, count * size_of(dt), what);
    if (plan == nullptr) return;
    const std::size_t es = size_of(dt);
    std::vector<unsigned char> buf(count * es + kGuard, kCanary);
    for (std::size_t i = 0; i < count; ++i) store_element(buf.data(), i, dt, input(seed, g_rank, i, dt, op));
    const std::size_t sb = Executor::scratch_bytes(*plan, count, dt);
    if (scratch_size_ < sb) {
      device_.deallocate(scratch_);
      scratch_ = device_.allocate(sb);
      scratch_size_ = sb;
    }
    if (delay_ms > 0 && g_rank == v.straggler) std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
    t_.set_tag(1);
    exec_.run(*plan, buf.data(), count, dt, op, scratch_, scratch_size_);  // errors end the run
    ++g_checked;
    std::size_t wrong = 0, first = 0;
    double got_first = 0, want_first = 0;
    for (std::size_t i = 0; i < count; ++i) {
      double want = rounded(input(seed, 0, i, dt, op), dt);
      for (int r = 1; r < g_n; ++r) {
        const double x = rounded(input(seed, r, i, dt, op), dt);
        want = op == ReduceOp::sum ? want + x : std::max(want, x);
      }
      const double got = load_element(buf.data(), i, dt);
      if (got != want) {
        if (wrong++ == 0) {
          first = i;
          got_first = got;
          want_first = want;
        }
      }
    }
    if (wrong)
      fail(std::string(what) + ": " + std::to_string(wrong) + " wrong elements, first at " + std::to_string(first) +
           ": got " + std::to_string(got_first) + ", expected " + std::to_string(want_first));
    for (std::size_t b = count * es; b < buf.size(); ++b)
      if (buf[b] != kCanary) {
        fail(std::string(what) + ": wrote past the end of the buffer");
        break;
      }
    const std::vector<std::uint64_t> hashes = allgather(t_, fnv(buf.data(), count * es));
    if (std::any_of(hashes.begin(), hashes.end(), [&](std::uint64_t h) { return h != hashes[0]; }))
      fail(std::string(what) + ": ranks hold different bits");
  }

  ~Correctness() { device_.deallocate(scratch_); }

 private:
  const Plan* plan_for(const Variant& v, std::size_t bytes, const char* what) {
    const int k = v.algo != Algorithm::stragglar ? 1
                  : v.pipeline                 ? v.pipeline
                                               : std::max(1, choose_pipeline(g_n, bytes, CostModel{}));
    const auto key = std::make_tuple(static_cast<int>(v.algo), k, v.straggler);
    auto it = plans_.find(key);
    if (it != plans_.end()) return it->second.get();
    SynthOptions so;
    so.straggler = v.straggler;
    so.pipeline = k;
    std::unique_ptr<Plan> plan;
    try {
      const Schedule s = synthesize(v.algo, g_n, so);
      verify_or_throw(s);
      plan = std::make_unique<Plan>(compile(s, g_rank));
    } catch (const Error& e) {
      // The same on every rank (synthesis is deterministic): reported, not a failure.
      if (g_rank == 0) std::printf("skip %s: %s\n", what, e.what());
      ++g_skipped;
    }
    return (plans_[key] = std::move(plan)).get();
  }

  UcxTransport& t_;
  CpuDevice device_;
  Executor exec_;
  void* scratch_ = nullptr;
  std::size_t scratch_size_ = 0;
  std::map<std::tuple<int, int, int>, std::unique_ptr<Plan>> plans_;
};

void correctness(UcxTransport& t, bool quick) {
  std::vector<Variant> variants;
  for (Algorithm a : scheduled_algorithms()) {
    if (a == Algorithm::stragglar) {
      variants.push_back({a, 0, g_n - 1});
      variants.push_back({a, 1, g_n - 1});
      variants.push_back({a, 0, 0});
    } else {
      variants.push_back({a, 1, a == Algorithm::broadcast ? 0 : g_n - 1});
    }
  }
  const std::size_t big = (std::size_t{1} << 20) + 3;
  const std::pair<DataType, ReduceOp> kinds[] = {
      {DataType::float32, ReduceOp::sum}, {DataType::float32, ReduceOp::max}, {DataType::int64, ReduceOp::sum},
      {DataType::int64, ReduceOp::max},   {DataType::float16, ReduceOp::sum}, {DataType::float16, ReduceOp::max}};
  Correctness c(t);
  std::uint64_t seed = 1;
  int cases = 0;
  for (const Variant& v : variants)
    for (std::size_t count : {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{1000}, big})
      for (const auto& [dt, op] : kinds) {
        ++seed;
        // quick (sanitizer builds): the large count for one kind per variant.
        if (quick && count == big && cases++ % 6 != 0) continue;
        // A late straggler now and then: the others' messages reach it before it posts.
        const int delay = count == 1000 && dt == DataType::float32 ? 20 : 0;
        c.run(v, count, dt, op, delay, seed);
      }
}

// ---- transport-level checks -----------------------------------------------------------------
std::vector<std::uint8_t> pattern(std::size_t bytes, int salt) {
  std::vector<std::uint8_t> v(bytes);
  for (std::size_t i = 0; i < bytes; ++i) v[i] = static_cast<std::uint8_t>(mix(i * 31 + static_cast<std::size_t>(salt)));
  return v;
}

template <typename F>
void expect_error(const std::string& what, ErrorCode code, F&& fn) {
  try {
    fn();
    fail(what + ": no error, expected " + to_string(code));
  } catch (const Error& e) {
    ++g_checked;
    if (e.code() != code) fail(what + ": got " + to_string(e.code()) + " (" + e.what() + "), expected " + to_string(code));
    else std::printf("[rank %d] ok %s: %s: %s\n", g_rank, what.c_str(), to_string(code), e.what());
  }
}

void transport_checks(UcxTransport& t, KeyValueStore& store, double timeout_s) {
  const int me = g_rank, n = g_n;
  // 1. Several messages to every other rank in one round, from a few bytes to the rendezvous
  //    protocol's sizes: each lands in its own receive, in order.
  {
    const std::size_t sizes[] = {1, 100, 9000, 300000, 5u << 20};
    std::vector<std::vector<std::uint8_t>> out, in;
    std::vector<Message> sends, recvs;
    for (int peer = 0; peer < n; ++peer) {
      if (peer == me) continue;
      for (std::size_t k = 0; k < std::size(sizes); ++k) {
        out.push_back(pattern(sizes[k], me * 1000 + peer * 10 + static_cast<int>(k)));
        in.emplace_back(sizes[k], 0);
      }
    }
    std::size_t j = 0;
    for (int peer = 0; peer < n; ++peer) {
      if (peer == me) continue;
      for (std::size_t k = 0; k < std::size(sizes); ++k, ++j) {
        sends.push_back({peer, out[j].data(), out[j].size()});
        recvs.push_back({peer, nullptr, 0});  // zero-byte messages are skipped on both sides
        recvs.push_back({peer, in[j].data(), in[j].size()});
        sends.push_back({peer, nullptr, 0});
      }
    }
    t.exchange(sends, recvs);
    j = 0;
    for (int peer = 0; peer < n; ++peer) {
      if (peer == me) continue;
      for (std::size_t k = 0; k < std::size(sizes); ++k, ++j) {
        ++g_checked;
        if (in[j] != pattern(sizes[k], peer * 1000 + me * 10 + static_cast<int>(k)))
          fail("message " + std::to_string(k) + " from rank " + std::to_string(peer) + " has wrong bytes");
      }
    }
  }
  // 2. Tags: rank 0 sends under tag 5 then tag 6; rank 1 receives tag 6 first, then tag 5.
  if (me <= 1 && n >= 2) {
    std::vector<std::uint8_t> a = pattern(64, 5), b = pattern(64, 6), ra(64, 0), rb(64, 0);
    if (me == 0) {
      t.set_tag(5);
      const Message s5[] = {{1, a.data(), a.size()}};
      t.exchange(s5, {});
      t.set_tag(6);
      const Message s6[] = {{1, b.data(), b.size()}};
      t.exchange(s6, {});
    } else {
      t.set_tag(6);
      const Message r6[] = {{0, rb.data(), rb.size()}};
      t.exchange({}, r6);
      t.set_tag(5);
      const Message r5[] = {{0, ra.data(), ra.size()}};
      t.exchange({}, r5);
      ++g_checked;
      if (ra != a || rb != b) fail("tags: a message matched a receive of another tag");
    }
    t.set_tag(1);
  }
  barrier(t);
  // 3. A big message (64 MiB + 5 bytes) from every rank to the next.
  {
    const std::size_t bytes = (std::size_t{64} << 20) + 5;
    const int to = (me + 1) % n, from = (me + n - 1) % n;
    std::vector<std::uint8_t> out = pattern(bytes, me), in(bytes, 0);
    const Message s[] = {{to, out.data(), out.size()}};
    const Message r[] = {{from, in.data(), in.size()}};
    if (n > 1) {
      t.exchange(s, r);
      ++g_checked;
      if (in != pattern(bytes, from)) fail("64 MiB message from rank " + std::to_string(from) + " has wrong bytes");
    }
  }
  // 4. Size mismatches (each breaks its transport: a fresh one per check, connected by all).
  for (const std::size_t sent : {std::size_t{100}, std::size_t{32}}) {
    auto t2 = UcxTransport::connect(store, "mismatch" + std::to_string(sent), me, n, timeout_s);
    std::vector<std::uint8_t> out = pattern(sent, 1), in(64, 0);
    if (me == 0 && n > 1) {
      const Message s[] = {{1, out.data(), out.size()}};
      t2->exchange(s, {});  // eager: completes whatever the receiver expects
    } else if (me == 1) {
      const Message r[] = {{0, in.data(), in.size()}};
      expect_error("receive of 64 bytes, peer sends " + std::to_string(sent), ErrorCode::Mismatch,
                   [&] { t2->exchange({}, r); });
      expect_error("exchange after an error", ErrorCode::RemoteError, [&] { t2->exchange({}, r); });
    }
    barrier(t);
  }
  // 5. A receive that timed out is cancelled: the message that arrives later never lands in
  //    its buffer, not even when the transport is destroyed.
  {
    auto t3 = UcxTransport::connect(store, "cancel", me, n, timeout_s);
    std::vector<std::uint8_t> out = pattern(64, 9), in(64, 0xEE);
    if (me == 1) {
      t3->set_timeout(0.3);
      const Message r[] = {{0, in.data(), in.size()}};
      expect_error("receive from a rank that sends late", ErrorCode::Timeout, [&] { t3->exchange({}, r); });
    }
    barrier(t);  // rank 1 has timed out
    if (me == 0 && n > 1) {
      const Message s[] = {{1, out.data(), out.size()}};
      t3->exchange(s, {});
    }
    barrier(t);  // the message is on its way or there
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    t3.reset();
    ++g_checked;
    if (in != std::vector<std::uint8_t>(64, 0xEE)) fail("a cancelled receive wrote into its buffer");
  }
  barrier(t);
}

void huge_message(UcxTransport& t) {
  const std::size_t bytes = (std::size_t{1} << 31) + 16;
  const int to = (g_rank + 1) % g_n, from = (g_rank + g_n - 1) % g_n;
  std::vector<std::uint8_t> out(bytes), in(bytes, 0);
  for (std::size_t i = 0; i < bytes; i += 4096) out[i] = static_cast<std::uint8_t>(mix(i + static_cast<std::size_t>(g_rank)));
  out[bytes - 1] = static_cast<std::uint8_t>(g_rank + 1);
  const Message s[] = {{to, out.data(), out.size()}};
  const Message r[] = {{from, in.data(), in.size()}};
  const auto t0 = std::chrono::steady_clock::now();
  t.exchange(s, r);
  std::printf("[rank %d] %zu bytes in %.2f s\n", g_rank, bytes, seconds_since(t0));
  ++g_checked;
  bool ok = in[bytes - 1] == static_cast<std::uint8_t>(from + 1);
  for (std::size_t i = 0; i < bytes && ok; i += 4096) ok = in[i] == static_cast<std::uint8_t>(mix(i + static_cast<std::size_t>(from)));
  if (!ok) fail("message of 2^31 + 16 bytes from rank " + std::to_string(from) + " has wrong bytes");
}

// ---- a peer that stops or dies ------------------------------------------------------------------
int dead_peer(UcxTransport& t, bool kill) {
  const int victim = g_n - 1;
  const double timeout_s = 5;
  t.set_timeout(timeout_s);
  CpuDevice device;
  Executor exec(t, device);
  const Schedule s = synthesize(Algorithm::stragglar, g_n, {});
  const Plan plan = compile(s, g_rank);
  std::vector<float> buf(4096, 1.0f);
  const std::size_t sb = Executor::scratch_bytes(plan, buf.size(), DataType::float32);
  void* scratch = device.allocate(sb);
  exec.run(plan, buf.data(), buf.size(), DataType::float32, ReduceOp::sum, scratch, sb);  // everyone alive
  barrier(t);
  if (g_rank == victim) raise(kill ? SIGKILL : SIGSTOP);
  const auto t0 = std::chrono::steady_clock::now();
  std::string outcome;
  bool ok = false;
  try {
    exec.run(plan, buf.data(), buf.size(), DataType::float32, ReduceOp::sum, scratch, sb);
    outcome = "no error";
  } catch (const Error& e) {
    const double took = seconds_since(t0);
    // stop: Timeout, after the timeout, or RemoteError from a rank whose own timeout came a
    // moment earlier and told the others it gave up (the cascade of docs/reliability.md);
    // kill: RemoteError (the dead process is seen) or Timeout (a rank that only waits for a
    // live rank that itself gave up).
    const bool told_by_a_peer_that_timed_out = e.code() == ErrorCode::RemoteError && took >= 0.9 * timeout_s &&
                                               std::string(e.what()).find("gave up") != std::string::npos;
    ok = kill ? (e.code() == ErrorCode::RemoteError || e.code() == ErrorCode::Timeout)
              : (e.code() == ErrorCode::Timeout || told_by_a_peer_that_timed_out);
    ok = ok && took < timeout_s + 10;
    outcome = std::string(to_string(e.code())) + " after " + std::to_string(took) + " s: " + e.what();
  }
  std::fprintf(stderr, "[rank %d] %s %s\n", g_rank, ok ? "ok" : "FAIL", outcome.c_str());
  device.deallocate(scratch);
  return ok ? 0 : 1;
}

// ---- the launcher ------------------------------------------------------------------------------
int launch(int argc, char** argv) {
  if (argc < 4 || std::string(argv[1]) != "--np") {
    std::fprintf(stderr, "usage: %s --np N correctness [quick] | transport | stop | kill\n", argv[0]);
    return 2;
  }
  LaunchOptions o;
  o.nprocs = std::atoi(argv[2]);
  const std::string mode = argv[3];
  o.argv.push_back(self_executable());
  for (int i = 3; i < argc; ++i) o.argv.push_back(argv[i]);
  const bool dead = mode == "stop" || mode == "kill";
  if (dead) o.victim = o.nprocs - 1;
  o.timeout_s = dead ? 60 : 900;
  const auto t0 = std::chrono::steady_clock::now();
  const std::vector<ProcessExit> exits = launch_local(o);
  int bad = 0;
  for (const ProcessExit& e : exits) {
    const bool expected = dead && e.rank == o.victim ? !e.exited : e.ok() && !e.killed_by_launcher;
    if (!expected) ++bad;
    std::printf("%s %s\n", expected ? "  " : "FAIL", e.describe().c_str());
  }
  const double took = seconds_since(t0);
  std::printf("%s: %s n=%d, %.1f s\n", bad ? "FAIL" : "PASS", mode.c_str(), o.nprocs, took);
  return bad ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  const char* rank_env = std::getenv("RANK");
  if (rank_env == nullptr) return launch(argc, argv);
  g_rank = std::atoi(rank_env);
  g_n = std::atoi(std::getenv("WORLD_SIZE"));
  const char* dir = std::getenv("STRAGGLAR_STORE_DIR");
  const std::string mode = argc > 1 ? argv[1] : "correctness";
  const char* timeout_env = std::getenv("STRAGGLAR_TIMEOUT_S");
  const double timeout_s = timeout_env ? std::atof(timeout_env) : 60.0;
  const auto t0 = std::chrono::steady_clock::now();
  int rc = 0;
  try {
    DirectoryStore store(dir ? dir : "");
    auto t = UcxTransport::connect(store, "world", g_rank, g_n, timeout_s);
    if (mode == "stop" || mode == "kill") return dead_peer(*t, mode == "kill");
    if (mode == "correctness") {
      correctness(*t, argc > 2 && std::string(argv[2]) == "quick");
    } else if (mode == "transport") {
      transport_checks(*t, store, timeout_s);
    } else if (mode == "huge") {
      huge_message(*t);
    } else {
      std::fprintf(stderr, "unknown mode '%s': expected correctness, transport, huge, stop, kill\n", mode.c_str());
      return 2;
    }
    const std::vector<long> failures = allgather(*t, g_failures);
    const std::vector<long> checked = allgather(*t, g_checked);
    long f = 0, c = 0;
    for (int r = 0; r < g_n; ++r) {
      f += failures[static_cast<std::size_t>(r)];
      c += checked[static_cast<std::size_t>(r)];
    }
    if (g_rank == 0) {
      std::printf("%s n=%d: %ld checks (summed over ranks), %ld failures, %ld skipped, %.1f s (peer 1: %s)\n",
                  mode.c_str(), g_n, c, f, g_skipped, seconds_since(t0), g_n > 1 ? t->describe_peer(1).c_str() : "-");
    }
    rc = f == 0 ? 0 : 1;
  } catch (const std::exception& e) {
    fail(std::string("threw: ") + e.what());
    rc = 1;
  }
  std::fflush(stdout);
  return rc;
}
