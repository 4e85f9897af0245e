// stragglar-ucx-bench: the executor over UcxTransport, ranks started without MPI (issue #11),
// with the columns and the timing rules of stragglar-bench (tools/bench, docs/runtime.md).
//
//   ./build/stragglar-ucx-bench --np 8 -b 64M -e 64M -d float -n 10 -w 2
//          --algo stragglar,stragglar:1,ring,rhd --straggler 7 --delay 300
//
// --np N starts N copies of itself like torchrun (RANK, WORLD_SIZE, a DirectoryStore
// directory); without it the ranks come from RANK / WORLD_SIZE and STRAGGLAR_STORE_DIR (or
// --store). One iteration: every rank resets its buffer, a barrier over the transport (the
// common start), the straggler sleeps --delay ms, every rank runs the plan and records its
// exit. time = latest exit − start; exposed = latest exit − the straggler's entry; each rank
// on its own clock from its own barrier exit; rank 0 takes the median over iterations.
// UCX_TLS, STRAGGLAR_UCX_WAIT and STRAGGLAR_UCX_ERROR_MODE choose the engine (docs/ucx.md).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "../bench_flags.hpp"
#include "runtime/cpu_device.hpp"
#include "runtime/element.hpp"
#include "runtime/env.hpp"
#include "runtime/executor.hpp"
#include "stragglar/error.hpp"
#include "stragglar/plan.hpp"
#include "stragglar/synthesize.hpp"
#include "stragglar/units.hpp"
#include "stragglar/verify.hpp"
#include "ucx/kv_store.hpp"
#include "ucx/local_launcher.hpp"
#include "ucx/transport_collectives.hpp"
#include "ucx/ucx_transport.hpp"

using namespace stragglar;

namespace {

using Clock = std::chrono::steady_clock;

struct Config : bench::BenchFlags {
  int np = 0;
  std::string store_dir;
};

struct Row {
  std::size_t bytes = 0, count = 0;
  std::string algo;
  int pipeline = 1;
  double time_us = 0, exposed_us = 0, algbw = 0, busbw = 0;
  long wrong = 0;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t m = v.size() / 2;
  return v.empty() ? 0 : v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

// As stragglar-bench: small integers, so every dtype reduces exactly.
double input_value(int r, std::size_t i, ReduceOp op) {
  const auto k = static_cast<long>((static_cast<std::size_t>(r) * 7 + i * 13) % 5);
  switch (op) {
    case ReduceOp::prod: return (k % 2 ? 2.0 : 1.0) * (k >= 3 ? -1.0 : 1.0);
    case ReduceOp::min:
    case ReduceOp::max: return static_cast<double>(k * 3 - 6 + r % 3);
    default: return static_cast<double>(k - 2);
  }
}

double expected_value(int n, std::size_t i, DataType t, ReduceOp op) {
  double acc = input_value(0, i, op);
  for (int r = 1; r < n; ++r) {
    const double x = input_value(r, i, op);
    switch (op) {
      case ReduceOp::sum:
      case ReduceOp::avg: acc += x; break;
      case ReduceOp::prod: acc *= x; break;
      case ReduceOp::min: acc = std::min(acc, x); break;
      case ReduceOp::max: acc = std::max(acc, x); break;
    }
  }
  if (op == ReduceOp::avg) {
    if (t == DataType::int32 || t == DataType::int64) return std::trunc(acc / n);
    std::uint64_t tmp = 0;
    store_element(&tmp, 0, t, acc / n);
    return load_element(&tmp, 0, t);
  }
  return acc;
}

std::uint64_t fnv(const void* p, std::size_t bytes) {
  std::uint64_t h = 1469598103934665603ull;
  const auto* b = static_cast<const unsigned char*>(p);
  for (std::size_t i = 0; i < bytes; ++i) h = (h ^ b[i]) * 1099511628211ull;
  return h;
}

class Bench {
 public:
  Bench(UcxTransport& t, const Config& cfg) : t_(t), cfg_(cfg), exec_(t, device_) {}
  ~Bench() { device_.deallocate(scratch_); }

  Row run(const std::string& entry, std::size_t bytes, DataType dt, ReduceOp op) {
    const int n = t_.nranks(), me = t_.rank();
    const int straggler = cfg_.straggler < 0 ? n - 1 : cfg_.straggler;
    const std::size_t colon = entry.find(':');
    const std::string name = entry.substr(0, colon);
    const Algorithm algo = parse_algorithm(name);
    Row row;
    row.algo = entry;
    row.count = bytes / size_of(dt);
    row.bytes = row.count * size_of(dt);
    const std::string ktext = colon == std::string::npos ? cfg_.pipeline : entry.substr(colon + 1);
    row.pipeline = algo != Algorithm::stragglar ? 1 : bench::parse_pipeline_text(ktext, "--algo entry '" + entry + "'");
    if (algo == Algorithm::stragglar && row.pipeline == kPipelineAuto)
      row.pipeline = std::max(1, choose_pipeline(n, row.bytes, detail::env().cost));  // as stragglar::allreduce
    SynthOptions so;
    so.straggler = straggler;
    so.pipeline = row.pipeline;
    const Schedule s = synthesize(algo, n, so);
    verify_or_throw(s);
    const Plan plan = compile(s, me);
    const std::size_t sb = Executor::scratch_bytes(plan, row.count, dt);
    if (sb > scratch_size_) {
      device_.deallocate(scratch_);
      scratch_ = device_.allocate(sb);
      scratch_size_ = sb;
    }
    input_.resize(row.bytes);
    buf_.resize(row.bytes);
    for (std::size_t i = 0; i < row.count; ++i) store_element(input_.data(), i, dt, input_value(me, i, op));

    auto once = [&](double delay_ms) {
      std::memcpy(buf_.data(), input_.data(), row.bytes);  // fresh inputs, not timed
      if (cfg_.ideal) {
        exec_.run(plan, buf_.data(), row.count, dt, op, scratch_, scratch_size_, PhaseSelection::no_wait_only);
      }
      barrier(t_);
      const Clock::time_point start = Clock::now();
      double entry_s = 0;
      if (!cfg_.ideal && me == straggler && delay_ms > 0) {
        std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(delay_ms));
        entry_s = std::chrono::duration<double>(Clock::now() - start).count();
      }
      exec_.run(plan, buf_.data(), row.count, dt, op, scratch_, scratch_size_,
                cfg_.ideal ? PhaseSelection::waiting_only : PhaseSelection::all);
      const double done_s = std::chrono::duration<double>(Clock::now() - start).count();
      const std::vector<double> done = allgather(t_, done_s), entry_all = allgather(t_, entry_s);
      const double latest = *std::max_element(done.begin(), done.end());
      return std::pair<double, double>{latest, latest - *std::max_element(entry_all.begin(), entry_all.end())};
    };

    if (cfg_.check) {
      once(cfg_.delay_ms);
      long wrong = 0;
      for (std::size_t i = 0; i < row.count; ++i)
        if (load_element(buf_.data(), i, dt) != expected_value(n, i, dt, op)) ++wrong;
      const std::vector<std::uint64_t> h = allgather(t_, fnv(buf_.data(), row.bytes));
      if (wrong == 0 && std::any_of(h.begin(), h.end(), [&](std::uint64_t x) { return x != h[0]; })) wrong = 1;
      const std::vector<long> all = allgather(t_, wrong);
      for (long w : all) row.wrong += w;
    }
    for (int i = 0; i < cfg_.warmup; ++i) once(0);
    std::vector<double> times, exposed;
    for (int i = 0; i < cfg_.iters; ++i) {
      const auto [time_s, exposed_s] = once(cfg_.delay_ms);
      times.push_back(time_s);
      exposed.push_back(exposed_s);
    }
    row.time_us = median(times) * 1e6;
    row.exposed_us = median(exposed) * 1e6;
    if (row.exposed_us > 0) row.algbw = static_cast<double>(row.bytes) / (row.exposed_us * 1e-6) / 1e9;
    row.busbw = row.algbw * 2.0 * (n - 1) / n;
    return row;
  }

 private:
  UcxTransport& t_;
  const Config& cfg_;
  CpuDevice device_;
  Executor exec_;
  void* scratch_ = nullptr;
  std::size_t scratch_size_ = 0;
  std::vector<char> input_, buf_;
};

int worker(const Config& cfg, int rank, int n) {
  const DataType dt = parse_dtype(cfg.dtype_name);
  const ReduceOp op = parse_reduce_op(cfg.op_name);
  std::vector<std::string> algos;
  {
    std::stringstream ss(cfg.algos);
    std::string a;
    while (std::getline(ss, a, ','))
      if (!a.empty()) {
        const Algorithm algo = parse_algorithm(a.substr(0, a.find(':')));
        require(algorithm_info(algo).kind == AlgorithmKind::schedule,
                "--algo " + a + ": only algorithms with a schedule run over UCX (" + algorithm_names(true) + ")");
        algos.push_back(a);
      }
  }
  require(!algos.empty(), "--algo '" + cfg.algos + "' names no algorithm");
  require(cfg.straggler >= -1 && cfg.straggler < n,
          "--straggler " + std::to_string(cfg.straggler) + " is outside [0, " + std::to_string(n) + ") (or -1)");
  const std::size_t lo = parse_bytes(cfg.min_bytes), hi = parse_bytes(cfg.max_bytes);
  require(lo <= hi, "-b " + cfg.min_bytes + " is larger than -e " + cfg.max_bytes);
  std::vector<std::size_t> sizes;
  for (double s = static_cast<double>(lo); s <= static_cast<double>(hi) * 1.000001; s *= cfg.factor) {
    sizes.push_back(static_cast<std::size_t>(s));
    if (cfg.factor <= 1) break;
  }

  DirectoryStore store(cfg.store_dir);
  auto t = UcxTransport::connect(store, "bench", rank, n, detail::env().timeout_s);
  barrier(*t);  // wires up every endpoint before anything is timed
  Bench bench(*t, cfg);
  const int straggler = cfg.straggler < 0 ? n - 1 : cfg.straggler;
  if (rank == 0) {
    const char* tls = std::getenv("UCX_TLS");
    const char* wait = std::getenv("STRAGGLAR_UCX_WAIT");
    const char* mode = std::getenv("STRAGGLAR_UCX_ERROR_MODE");
    std::printf("# stragglar-ucx-bench: nranks %d, straggler %d, delay %g ms%s, iters %d, warmup %d, check %d\n", n,
                straggler, cfg.delay_ms, cfg.ideal ? " (ideal: waiting phases only)" : "", cfg.iters, cfg.warmup,
                cfg.check);
    std::printf("# UCX_TLS=%s STRAGGLAR_UCX_WAIT=%s STRAGGLAR_UCX_ERROR_MODE=%s; rank 0 -> rank 1: %s\n",
                tls ? tls : "(all)", wait ? wait : "(backoff)", mode ? mode : "(per_host)",
                n > 1 ? t->describe_peer(1).c_str() : "-");
    std::printf("# time: latest exit - common start; exposed: latest exit - straggler entry; bw from exposed\n");
    std::printf("%12s %12s %8s %6s %12s %4s %9s %12s %12s %9s %9s %7s\n", "size", "count", "type", "redop", "algo", "K",
                "delay(ms)", "time(us)", "exposed(us)", "algbw", "busbw", "#wrong");
  }
  int rc = 0;
  nlohmann::json rows = nlohmann::json::array();
  for (std::size_t bytes : sizes)
    for (const std::string& algo : algos) {
      const Row row = bench.run(algo, bytes, dt, op);
      if (row.wrong) rc = 1;
      if (rank != 0) continue;
      std::printf("%12zu %12zu %8s %6s %12s %4d %9g %12.1f %12.1f %9.3f %9.3f %7ld\n", row.bytes, row.count,
                  to_string(dt), to_string(op), row.algo.c_str(), row.pipeline, cfg.ideal ? 0 : cfg.delay_ms,
                  row.time_us, row.exposed_us, row.algbw, row.busbw, row.wrong);
      std::fflush(stdout);
      rows.push_back({{"algo", row.algo}, {"bytes", row.bytes}, {"count", row.count}, {"type", to_string(dt)},
                      {"redop", to_string(op)}, {"pipeline", row.pipeline}, {"delay_ms", cfg.ideal ? 0 : cfg.delay_ms},
                      {"time_us", row.time_us}, {"exposed_us", row.exposed_us}, {"algbw", row.algbw},
                      {"busbw", row.busbw}, {"wrong", row.wrong}});
    }
  if (rank == 0 && !cfg.json_file.empty()) {
    const char* tls = std::getenv("UCX_TLS");
    nlohmann::json j = {{"engine", "ucx"},
                        {"ucx_tls", tls ? tls : ""},
                        {"nranks", n},
                        {"straggler", straggler},
                        {"delay_ms", cfg.delay_ms},
                        {"ideal", cfg.ideal},
                        {"iters", cfg.iters},
                        {"rows", rows}};
    std::ofstream(cfg.json_file) << j.dump(2) << "\n";
  }
  return rc;
}

}  // namespace

int main(int argc, char** argv) {
  Config cfg;
  cfg.algos = "stragglar,stragglar:1,ring,rhd";
  CLI::App app{"stragglar-ucx-bench: AllReduce under a straggler over UCX, ranks started without MPI"};
  bench::add_bench_flags(app, cfg, " (native: not over UCX); stragglar:K fixes the pipeline for that entry", "ms");
  app.add_option("--np", cfg.np, "Start this many ranks (like torchrun); else RANK/WORLD_SIZE come from the environment");
  app.add_option("--store", cfg.store_dir, "DirectoryStore directory (default: STRAGGLAR_STORE_DIR)");
  CLI11_PARSE(app, argc, argv);

  const char* rank_env = std::getenv("RANK");
  try {
    if (rank_env == nullptr) {
      require(cfg.np >= 1, "no ranks: pass --np N, or set RANK, WORLD_SIZE and STRAGGLAR_STORE_DIR as torchrun does");
      LaunchOptions o;
      o.nprocs = cfg.np;
      o.argv.push_back(self_executable());
      for (int i = 1; i < argc; ++i) o.argv.push_back(argv[i]);
      o.timeout_s = 3600;
      int bad = 0;
      for (const ProcessExit& e : launch_local(o))
        if (!e.ok()) {
          std::fprintf(stderr, "stragglar-ucx-bench: %s\n", e.describe().c_str());
          ++bad;
        }
      return bad ? 1 : 0;
    }
    const char* world = std::getenv("WORLD_SIZE");
    require(world != nullptr, "RANK is set but WORLD_SIZE is not");
    if (cfg.store_dir.empty()) {
      const char* dir = std::getenv("STRAGGLAR_STORE_DIR");
      require(dir != nullptr, "no store: set STRAGGLAR_STORE_DIR or pass --store DIR");
      cfg.store_dir = dir;
    }
    return worker(cfg, std::atoi(rank_env), std::atoi(world));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "stragglar-ucx-bench (rank %s): %s\n", rank_env ? rank_env : "-", e.what());
    return 2;
  }
}
