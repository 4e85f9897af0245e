// stragglar-bench: AllReduce timings under a straggler, shaped like nccl-tests.
//
//   mpirun -np 8 ./build/stragglar-bench -b 64M -e 64M -d float
//          --algo stragglar,ring,native --straggler 7 --delay 300 --calibrate
//
// One iteration: every rank resets its buffer, MPI_Barrier (the common start), the straggler
// sleeps --delay ms while the others enter at once, everyone calls allreduce and records its
// exit. time = latest exit − start; exposed = latest exit − the straggler's entry. Each rank
// measures on its own clock from its own barrier exit (no global clock is assumed), rank 0
// takes the maximum over ranks and the median over iterations. See docs/runtime.md.
#include <mpi.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "../bench_flags.hpp"
#include "stragglar/allreduce.hpp"
#include "runtime/cpu_device.hpp"
#include "runtime/element.hpp"
#include "runtime/mpi_session.hpp"
#include "stragglar/simulate.hpp"
#include "stragglar/units.hpp"

using namespace stragglar;

namespace {

int g_rank = 0, g_n = 1;

struct Config : bench::BenchFlags {
  bool calibrate = false;
  std::string csv_file;
};

struct Row {
  std::size_t bytes = 0, count = 0;
  std::string type, redop, algo;
  double delay_ms = 0, time_us = 0, exposed_us = 0, algbw = 0, busbw = 0;
  long wrong = 0;
  int pipeline = 1;
  std::optional<double> predicted_us, predicted_exposed_us;
  std::string error;
};

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

// ---- verifiable inputs (as nccl-tests): small integers, so every dtype reduces exactly -----
double input_value(int r, std::size_t i, ReduceOp op) {
  const auto k = static_cast<long>((static_cast<std::size_t>(r) * 7 + i * 13) % 5);
  switch (op) {
    case ReduceOp::prod: return (k % 2 ? 2.0 : 1.0) * (k >= 3 ? -1.0 : 1.0);  // |prod| <= 2^n
    case ReduceOp::min:
    case ReduceOp::max: return static_cast<double>(k * 3 - 6 + r % 3);
    default: return static_cast<double>(k - 2);  // sum/avg: |sum| <= 2n
  }
}



double expected_value(std::size_t i, DataType t, ReduceOp op) {
  double acc = input_value(0, i, op);
  for (int r = 1; r < g_n; ++r) {
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
    if (t == DataType::int32 || t == DataType::int64) return std::trunc(acc / g_n);
    // The runtime divides the exact sum once: the result is the dtype's rounding of acc/n.
    std::uint64_t tmp = 0;
    store_element(&tmp, 0, t, acc / g_n);
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

// ---- one timed collective ---------------------------------------------------------------------
struct Sample {
  double time_s = 0;     // latest exit − common start
  double exposed_s = 0;  // latest exit − straggler's entry
};

// Runs one iteration on every rank; rank 0 gets the sample.
Sample run_once(const Options& base, void* buf, const void* input, std::size_t count, DataType t, ReduceOp op,
                int straggler, double delay_ms, bool ideal) {
  const std::size_t bytes = count * size_of(t);
  std::memcpy(buf, input, bytes);  // fresh inputs, outside the timed region
  const Options& o = base;
  detail::Session& session = detail::mpi_session(MPI_COMM_WORLD);
  PhaseSelection phases = PhaseSelection::all;
  if (ideal && algorithm_info(o.algorithm).kind == AlgorithmKind::schedule) {
    // Ideal case (paper §4): the others finish the phases that do not wait for the straggler
    // before it arrives; only what follows is timed.
    session.allreduce(buf, buf, count, t, op, o, PhaseSelection::no_wait_only);
    phases = PhaseSelection::waiting_only;
  }
  MPI_Barrier(MPI_COMM_WORLD);
  const double start = MPI_Wtime();
  double entry = 0;
  if (!ideal && g_rank == straggler && delay_ms > 0) {
    std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(delay_ms));
    entry = MPI_Wtime() - start;
  }
  session.allreduce(buf, buf, count, t, op, o, phases);
  const double done = MPI_Wtime() - start;
  double local[2] = {done, entry}, global[2] = {0, 0};
  MPI_Reduce(local, global, 2, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
  return {global[0], global[0] - global[1]};
}

// ---- α-β-γ calibration ------------------------------------------------------------------------
// α, β: all ranks pair up (r ↔ r^1; an odd last rank idles) and exchange messages both ways at
// once, as a round of a schedule does. t(s) = α + β·s from two sizes, median over repetitions,
// maximum over pairs. γ: rank 0 alone runs the runtime's own reduction (this run's dtype and
// op) on `large` bytes, t = γ·s, median over repetitions: the reducer's own speed. (All ranks
// reducing at once would charge every reduction with the host's core contention: on an
// oversubscribed host that overstates schedules in which few ranks reduce per round.)
CostModel calibrate(std::size_t large, DataType t, ReduceOp op) {
  const std::size_t small = 4096;
  large = std::max<std::size_t>(large, std::size_t{1} << 20);
  std::vector<char> sbuf(large, 1), rbuf(large, 0);
  const int peer = g_rank ^ 1;
  auto slowest_median = [&](int reps, auto&& body) {
    std::vector<double> ts;
    for (int i = 0; i < reps + 2; ++i) {
      MPI_Barrier(MPI_COMM_WORLD);
      const double t0 = MPI_Wtime();
      body();
      double dt = MPI_Wtime() - t0, worst = 0;
      MPI_Allreduce(&dt, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
      if (i >= 2) ts.push_back(worst);
    }
    return median(ts);
  };
  auto exchange = [&](std::size_t bytes) {
    return [&, bytes] {
      if (peer < g_n)
        MPI_Sendrecv(sbuf.data(), static_cast<int>(bytes), MPI_BYTE, peer, 7, rbuf.data(), static_cast<int>(bytes),
                     MPI_BYTE, peer, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    };
  };
  const double t_small = slowest_median(30, exchange(small));
  const double t_large = slowest_median(10, exchange(large));

  // Reduce real values (char patterns could be denormals, which are slow); prod of values near
  // 1 stays finite over the repetitions.
  const std::size_t count = large / size_of(t);
  for (std::size_t i = 0; i < count; ++i) {
    store_element(rbuf.data(), i, t, 1.0 + static_cast<double>(i % 3));
    store_element(sbuf.data(), i, t, 1.0);
  }
  const double t_reduce = slowest_median(10, [&] {
    if (g_rank == 0) cpu_reduce(rbuf.data(), sbuf.data(), count, t, op);
  });

  CostModel c;
  c.beta_s_per_byte = std::max(1e-15, (t_large - t_small) / static_cast<double>(large - small));
  c.alpha_s = std::max(0.0, t_small - c.beta_s_per_byte * static_cast<double>(small));
  c.gamma_s_per_byte = t_reduce / static_cast<double>(count * size_of(t));
  if (g_rank == 0)
    std::printf("# calibration: exchange %zu B: %.1f us, %zu B: %.1f us -> alpha %.2f us, beta %.3f GB/s; "
                "reduce %zu B: %.1f us -> gamma %.3f GB/s\n",
                small, t_small * 1e6, large, t_large * 1e6, c.alpha_s * 1e6, 1.0 / c.beta_s_per_byte / 1e9,
                count * size_of(t), t_reduce * 1e6, c.gamma_s_per_byte > 0 ? 1.0 / c.gamma_s_per_byte / 1e9 : 0.0);
  return c;
}

// An --algo entry is NAME or NAME:K (a StragglAR pipeline factor for that entry only), so
// `--algo stragglar:1,stragglar` compares the paper's schedule with auto pipelining in one run.
struct AlgoEntry {
  std::string name;
  std::string pipeline;  // "" = the --pipeline value
};
AlgoEntry split_algo_entry(const std::string& entry) {
  const std::size_t colon = entry.find(':');
  if (colon == std::string::npos) return {entry, ""};
  return {entry.substr(0, colon), entry.substr(colon + 1)};
}
// ---- one row -----------------------------------------------------------------------------------
Row run_benchmark(const Config& cfg, const std::string& algo, std::size_t bytes, DataType t, ReduceOp op,
          const std::optional<CostModel>& cost, std::vector<char>& buf, std::vector<char>& input,
          std::vector<char>& expected) {
  Row row;
  const std::size_t es = size_of(t);
  row.count = bytes / es;
  row.bytes = row.count * es;
  row.type = to_string(t);
  row.redop = to_string(op);
  row.algo = algo;
  row.delay_ms = cfg.ideal ? 0 : cfg.delay_ms;
  const int straggler = cfg.straggler < 0 ? g_n - 1 : cfg.straggler;
  const AlgoEntry entry = split_algo_entry(algo);
  Options o = options_for(entry.name);
  o.straggler = straggler;
  o.pipeline = bench::parse_pipeline_text(entry.pipeline.empty() ? cfg.pipeline : entry.pipeline, "--pipeline");
  o.cost = cost;
  try {
    row.pipeline = resolve_pipeline(o, g_n, row.bytes);
    // Inputs and the expected result.
    for (std::size_t i = 0; i < row.count; ++i) {
      store_element(input.data(), i, t, input_value(g_rank, i, op));
      if (cfg.check) store_element(expected.data(), i, t, expected_value(i, t, op));
    }
    if (cfg.check) {
      run_once(o, buf.data(), input.data(), row.count, t, op, straggler, cfg.delay_ms, cfg.ideal);
      long wrong = 0;
      for (std::size_t i = 0; i < row.count; ++i)
        if (load_element(buf.data(), i, t) != load_element(expected.data(), i, t)) ++wrong;
      // Identical bits everywhere: a rank whose hash differs from the max counts its elements.
      const std::uint64_t h = fnv(buf.data(), row.bytes);
      std::uint64_t hv[2] = {h, ~h}, hmax[2];
      MPI_Allreduce(hv, hmax, 2, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
      if ((hmax[0] != h || ~hmax[1] != h) && wrong == 0) wrong = 1;
      MPI_Allreduce(&wrong, &row.wrong, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    }
    for (int i = 0; i < cfg.warmup; ++i)
      run_once(o, buf.data(), input.data(), row.count, t, op, straggler, 0, cfg.ideal);
    std::vector<double> times, exposed;
    for (int i = 0; i < cfg.iters; ++i) {
      const Sample s = run_once(o, buf.data(), input.data(), row.count, t, op, straggler, cfg.delay_ms, cfg.ideal);
      times.push_back(s.time_s);
      exposed.push_back(s.exposed_s);
    }
    row.time_us = median(times) * 1e6;
    row.exposed_us = median(exposed) * 1e6;
    if (row.exposed_us > 0) row.algbw = static_cast<double>(row.bytes) / (row.exposed_us * 1e-6) / 1e9;
    row.busbw = row.algbw * 2.0 * (g_n - 1) / g_n;
    if (cost && algorithm_info(o.algorithm).kind == AlgorithmKind::schedule) {
      const auto sched = schedule_for(o, g_n, row.bytes);
      Delay d;
      d.ideal = cfg.ideal;
      d.seconds = cfg.ideal ? 0 : cfg.delay_ms * 1e-3;
      const SimResult sim = simulate(*sched, row.bytes, *cost, d);
      row.predicted_us = sim.time_s * 1e6;
      row.predicted_exposed_us = sim.exposed_s * 1e6;
    }
  } catch (const Error& e) {
    row.error = e.what();
  }
  return row;
}

std::string fmt(const char* f, double v) {
  char text[64];
  std::snprintf(text, sizeof text, f, v);
  return text;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_n);

  Config cfg;
  CLI::App app{"stragglar-bench: AllReduce under a straggler (run with mpirun -np N)"};
  bench::add_bench_flags(app, cfg, "; stragglar:K fixes the pipeline for that entry", "ms");
  app.add_flag("--calibrate", cfg.calibrate, "Measure alpha, beta (pairwise exchanges) and gamma (reductions); print the model's prediction");
  app.add_option("--csv", cfg.csv_file, "Write rows as CSV");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = g_rank == 0 ? app.exit(e) : (e.get_exit_code() == 0 ? 0 : 1);
    MPI_Finalize();
    return rc;
  }

  int rc = 0;
  try {
    const DataType t = parse_dtype(cfg.dtype_name);
    const ReduceOp op = parse_reduce_op(cfg.op_name);
    require(cfg.straggler >= -1 && cfg.straggler < g_n,
            "--straggler " + std::to_string(cfg.straggler) + " is outside [0, " + std::to_string(g_n) + ") (or -1)");
    (void)bench::parse_pipeline_text(cfg.pipeline, "--pipeline");
    std::vector<std::string> algos;
    {
      std::stringstream ss(cfg.algos);
      std::string a;
      while (std::getline(ss, a, ','))
        if (!a.empty()) {
          const AlgoEntry entry = split_algo_entry(a);
          (void)options_for(entry.name);  // validates the name
          if (!entry.pipeline.empty()) {
            require(entry.name == "stragglar", "--algo entry '" + a + "': only stragglar takes a pipeline factor");
            (void)bench::parse_pipeline_text(entry.pipeline, "--algo entry '" + a + "' pipeline");
          }
          algos.push_back(a);
        }
    }
    require(!algos.empty(), "--algo '" + cfg.algos + "' names no algorithm");
    const std::size_t lo = parse_bytes(cfg.min_bytes), hi = parse_bytes(cfg.max_bytes);
    require(lo <= hi, "-b " + cfg.min_bytes + " is larger than -e " + cfg.max_bytes);
    require(cfg.factor > 1 || lo == hi, "-f " + std::to_string(cfg.factor) + " must be > 1 when -b < -e");
    std::vector<std::size_t> sizes;
    for (double s = static_cast<double>(lo); s <= static_cast<double>(hi) * 1.000001; s *= cfg.factor) {
      sizes.push_back(static_cast<std::size_t>(s));
      if (cfg.factor <= 1) break;
    }

    std::optional<CostModel> cost;
    if (cfg.calibrate) cost = calibrate(hi / static_cast<std::size_t>(std::max(1, g_n - 1)), t, op);

    const int straggler = cfg.straggler < 0 ? g_n - 1 : cfg.straggler;
    if (g_rank == 0) {
      std::printf("# stragglar-bench: nranks %d, straggler %d, delay %g ms%s, iters %d, warmup %d, check %d\n", g_n,
                  straggler, cfg.delay_ms, cfg.ideal ? " (ideal: waiting phases only)" : "", cfg.iters, cfg.warmup,
                  cfg.check);
      std::printf("# time: latest exit - common start; exposed: latest exit - straggler entry; bw from exposed\n");
      std::printf("%12s %12s %8s %6s %10s %4s %9s %12s %12s %9s %9s %7s", "size", "count", "type", "redop", "algo", "K",
                  "delay(ms)", "time(us)", "exposed(us)", "algbw", "busbw", "#wrong");
      if (cost) std::printf(" %12s %12s %9s", "pred(us)", "pred_exp(us)", "meas/pred");
      std::printf("\n");
    }
    std::vector<Row> rows;
    const std::size_t es = size_of(t);
    std::vector<char> buf(hi + es), input(hi + es), expected(cfg.check ? hi + es : 0);
    for (std::size_t bytes : sizes) {
      for (const std::string& algo : algos) {
        Row row = run_benchmark(cfg, algo, bytes, t, op, cost, buf, input, expected);
        if (g_rank == 0) {
          if (!row.error.empty()) {
            std::printf("# %s, %zu bytes: error: %s\n", algo.c_str(), row.bytes, row.error.c_str());
          } else {
            std::printf("%12zu %12zu %8s %6s %10s %4d %9g %12.1f %12.1f %9.3f %9.3f %7ld", row.bytes, row.count,
                        row.type.c_str(), row.redop.c_str(), row.algo.c_str(), row.pipeline, row.delay_ms, row.time_us,
                        row.exposed_us, row.algbw, row.busbw, row.wrong);
            if (cost) {
              if (row.predicted_us)
                std::printf(" %12.1f %12.1f %9.2f", *row.predicted_us, *row.predicted_exposed_us,
                            row.exposed_us / *row.predicted_exposed_us);
              else
                std::printf(" %12s %12s %9s", "-", "-", "-");
            }
            std::printf("\n");
          }
          std::fflush(stdout);
        }
        if (row.wrong) rc = 1;
        rows.push_back(std::move(row));
      }
    }

    if (g_rank == 0 && !cfg.json_file.empty()) {
      nlohmann::json j;
      j["nranks"] = g_n;
      j["straggler"] = straggler;
      j["delay_ms"] = cfg.delay_ms;
      j["ideal"] = cfg.ideal;
      j["iters"] = cfg.iters;
      if (cost) j["calibration"] = {{"alpha_us", cost->alpha_s * 1e6},
                                          {"bandwidth_GBps", 1.0 / cost->beta_s_per_byte / 1e9},
                                          {"reduce_bandwidth_GBps", cost->gamma_s_per_byte > 0 ? 1.0 / cost->gamma_s_per_byte / 1e9 : 0.0}};
      j["rows"] = nlohmann::json::array();
      for (const Row& r : rows) {
        nlohmann::json x = {{"algo", r.algo},       {"bytes", r.bytes},      {"count", r.count},
                            {"type", r.type},       {"redop", r.redop},      {"pipeline", r.pipeline},
                            {"delay_ms", r.delay_ms}, {"time_us", r.time_us}, {"exposed_us", r.exposed_us},
                            {"algbw", r.algbw},     {"busbw", r.busbw},      {"wrong", r.wrong}};
        if (r.predicted_us) {
          x["predicted_us"] = *r.predicted_us;
          x["predicted_exposed_us"] = *r.predicted_exposed_us;
        }
        if (!r.error.empty()) x["error"] = r.error;
        j["rows"].push_back(x);
      }
      std::ofstream(cfg.json_file) << j.dump(2) << "\n";
    }
    if (g_rank == 0 && !cfg.csv_file.empty()) {
      std::ofstream f(cfg.csv_file);
      f << "size,count,type,redop,algo,pipeline,delay_ms,time_us,exposed_us,algbw_GBps,busbw_GBps,wrong,predicted_us,"
           "predicted_exposed_us,error\n";
      for (const Row& r : rows) {
        f << r.bytes << ',' << r.count << ',' << r.type << ',' << r.redop << ',' << r.algo << ',' << r.pipeline << ','
          << r.delay_ms << ',' << fmt("%.3f", r.time_us) << ',' << fmt("%.3f", r.exposed_us) << ','
          << fmt("%.4f", r.algbw) << ',' << fmt("%.4f", r.busbw) << ',' << r.wrong << ','
          << (r.predicted_us ? fmt("%.3f", *r.predicted_us) : "") << ','
          << (r.predicted_exposed_us ? fmt("%.3f", *r.predicted_exposed_us) : "") << ',' << '"' << r.error << '"'
          << "\n";
      }
    }
  } catch (const std::exception& e) {
    if (g_rank == 0) std::fprintf(stderr, "stragglar-bench: %s\n", e.what());
    rc = 2;
  }
  MPI_Finalize();
  return rc;
}
