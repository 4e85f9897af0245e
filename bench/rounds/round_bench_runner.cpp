// The per-round benchmark's run (round_bench_runner.hpp).
#include "round_bench_runner.hpp"

#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <iostream>
#include <ostream>
#include <map>
#include <utility>
#include <vector>

#include "stragglar/algorithm.hpp"
#include "stragglar/synthesize.hpp"
#include "stragglar/units.hpp"

namespace stragglar::bench {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

struct Group {
  int n = 0;
  MPI_Comm comm = MPI_COMM_NULL;  // ranks 0..n-1 (rank r of it = rank r of the job)
};

class Run {
 public:
  Run(const RoundBenchOptions& o, RoundBackend& b, int rank) : o_(o), b_(b), rank_(rank) {}

  // One point: `algorithm` on group g at `bytes`; the row on rank 0, an empty one elsewhere.
  RoundCostRow point(const Group& g, const std::string& algorithm, std::size_t bytes) {
    const std::size_t count = bytes / sizeof(float);
    const bool native = algorithm == "native";
    Plan plan;
    if (!native) {
      SynthOptions so;
      so.straggler = g.n - 1;
      so.pipeline = o_.pipeline;
      plan = compile(synthesize(parse_algorithm(algorithm), g.n, so), rank_);
    }
    const int rounds = native ? 1 : static_cast<int>(plan.rounds.size());
    b_.begin_point(g.n, native ? nullptr : &plan, count);
    // Connections to every peer of the schedule are made by its first call (NCCL connects lazily).
    if (bool& w = warmed_[{g.n, algorithm}]; !w) {
      for (int i = 0; i < o_.warmup; ++i) {
        b_.reset();
        MPI_Barrier(g.comm);
        b_.mark_start();
        b_.call();
        (void)b_.finish();
      }
      w = true;
    }
    std::vector<double> host_call, device_call;
    const auto point_start = Clock::now();
    for (int more = 1; more != 0;) {
      b_.reset();
      MPI_Barrier(g.comm);
      b_.mark_start();
      const auto t0 = Clock::now();
      b_.call();
      host_call.push_back(seconds_since(t0));
      const double device_s = b_.finish();
      if (device_s >= 0) device_call.push_back(device_s);
      more = rank_ == 0 && another_call(o_, static_cast<int>(host_call.size()), seconds_since(point_start));
      MPI_Bcast(&more, 1, MPI_INT, 0, g.comm);
    }
    // The last call's result, exactly: rank r contributed r + 1, so every element is n(n+1)/2.
    std::vector<float> result(count);
    b_.download(result.data(), bytes);
    b_.end_point();
    const float want = static_cast<float>(g.n * (g.n + 1) / 2);
    long long wrong = 0, wrong_all = 0;
    for (float v : result) wrong += v != want;
    MPI_Reduce(&wrong, &wrong_all, 1, MPI_LONG_LONG, MPI_SUM, 0, g.comm);

    // Every rank made the same number of calls: rank 0 decided each one.
    const int calls = static_cast<int>(host_call.size());
    int timed_device = device_call.size() == host_call.size() ? 1 : 0, all_timed = 0;
    MPI_Allreduce(&timed_device, &all_timed, 1, MPI_INT, MPI_MIN, g.comm);
    if (all_timed == 0) device_call.assign(host_call.size(), -1);
    std::vector<int> rounds_all(static_cast<std::size_t>(g.n));
    std::vector<double> host_all(static_cast<std::size_t>(g.n * calls)), device_all(host_all.size());
    MPI_Gather(&rounds, 1, MPI_INT, rounds_all.data(), 1, MPI_INT, 0, g.comm);
    MPI_Gather(host_call.data(), calls, MPI_DOUBLE, host_all.data(), calls, MPI_DOUBLE, 0, g.comm);
    MPI_Gather(device_call.data(), calls, MPI_DOUBLE, device_all.data(), calls, MPI_DOUBLE, 0, g.comm);
    if (rank_ != 0) return {};
    PointSamples s;
    s.rounds = rounds_all;
    s.wrong = wrong_all;
    for (int r = 0; r < g.n; ++r) {
      s.host_call.emplace_back(host_all.begin() + r * calls, host_all.begin() + (r + 1) * calls);
      if (all_timed != 0) s.gpu_call.emplace_back(device_all.begin() + r * calls, device_all.begin() + (r + 1) * calls);
    }
    return summarize_point(algorithm, g.n, bytes, s);
  }

 private:
  const RoundBenchOptions& o_;
  RoundBackend& b_;
  int rank_;
  std::map<std::pair<int, std::string>, bool> warmed_;
};

}  // namespace

RoundCostTable run_round_bench(const RoundBenchOptions& o, RoundBackend& backend, const std::string& tool,
                               const std::function<void(const RoundCostRow&)>& on_row) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  RoundCostTable table;
  table.tool = tool;
  table.date = utc_now();
  table.pipeline = o.pipeline;
  const auto start = Clock::now();
  std::vector<Group> groups;
  for (int n : o.nranks) {
    Group g;
    g.n = n;
    MPI_Comm_split(MPI_COMM_WORLD, rank < n ? 0 : MPI_UNDEFINED, rank, &g.comm);
    backend.add_group(n, g.comm);
    groups.push_back(g);
  }
  table.transport = backend.transport();
  table.device = backend.device();
  table.library = backend.version();
  if (rank == 0)
    std::printf("%s: %s, %s, %s; %zu rank counts, %zu sizes, %zu algorithms; communicators in %.1f s\n",
                tool.c_str(), table.device.c_str(), table.library.c_str(), table.transport.c_str(),
                o.nranks.size(), o.sizes.size(), o.algorithms.size(), seconds_since(start));
  std::fflush(stdout);

  Run run(o, backend, rank);
  // Sizes outermost: a run stopped at its deadline has every n and algorithm at the smaller sizes.
  for (std::size_t bytes : o.sizes) {
    backend.prepare(bytes, static_cast<float>(rank + 1));
    for (const Group& g : groups)
      for (const std::string& algorithm : o.algorithms) {
        int go = rank == 0 && (o.deadline_s == 0 || seconds_since(start) < o.deadline_s);
        MPI_Bcast(&go, 1, MPI_INT, 0, MPI_COMM_WORLD);
        if (go == 0) {
          if (rank == 0) {
            RoundCostRow skipped;
            skipped.algorithm = algorithm;
            skipped.nranks = g.n;
            skipped.bytes = bytes;
            table.skipped.push_back(std::move(skipped));
            table.complete = false;
          }
          continue;
        }
        if (rank >= g.n) continue;
        RoundCostRow row = run.point(g, algorithm, bytes);
        if (rank == 0) {
          on_row(row);
          table.rows.push_back(std::move(row));
        }
      }
  }
  backend.close();
  for (Group& g : groups)
    if (g.comm != MPI_COMM_NULL) MPI_Comm_free(&g.comm);
  return table;
}

int report_round_bench(const RoundBenchOptions& o, const RoundCostTable& t, double seconds) {
  std::printf("\n%s", format_round_costs(t).c_str());
  long long wrong = 0;
  for (const RoundCostRow& r : t.rows) wrong += r.wrong;
  std::printf("%s: %zu rows, %lld wrong elements, %s, %.1f s\n", t.tool.c_str(), t.rows.size(), wrong,
              t.complete ? "complete" : "INCOMPLETE (deadline)", seconds);
  int rc = wrong != 0 ? 1 : 0;
  if (!o.json.empty()) {
    std::ofstream out(o.json, std::ios::binary);
    write_round_costs_json(out, t);
    if (!out.flush()) {
      std::fprintf(stderr, "%s: cannot write '%s'\n", t.tool.c_str(), o.json.c_str());
      rc = 1;
    }
  }
  std::fflush(stdout);
  return rc;
}

void print_round_row(const RoundCostRow& r) {
  std::printf("  %-10s n=%d %9s: %3d rounds, %d calls, host %.2f us/round (%.2f..%.2f), device %s us/round, %lld wrong\n",
              r.algorithm.c_str(), r.nranks, format_bytes(r.bytes).c_str(), r.rounds, r.calls, r.host_s * 1e6,
              r.host_min_s * 1e6, r.host_max_s * 1e6,
              r.gpu_s >= 0 ? std::to_string(r.gpu_s * 1e6).c_str() : "-", r.wrong);
  std::fflush(stdout);
}

std::optional<int> parse_round_bench_job(int argc, char** argv, const char* tool, const char* native_name,
                                         RoundBenchOptions& o) {
  int rank = 0, world = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  std::ostream null_stream(nullptr);
  const auto code = parse_round_bench_flags(argc, argv, world, tool, native_name, o, rank == 0 ? std::cout : null_stream,
                                            rank == 0 ? std::cerr : null_stream);
  if (code) MPI_Finalize();
  return code;
}

int run_round_bench_job(const RoundBenchOptions& o, const char* tool,
                        const std::function<std::unique_ptr<RoundBackend>()>& make_backend) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  int rc = 0;
  try {
    const auto start = std::chrono::steady_clock::now();
    const std::unique_ptr<RoundBackend> backend = make_backend();
    const RoundCostTable table = run_round_bench(o, *backend, tool, print_round_row);
    if (rank == 0)
      rc = report_round_bench(o, table, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "[rank %d] %s: %s\n", rank, tool, e.what());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  return rc;
}

}  // namespace stragglar::bench
