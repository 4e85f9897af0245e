// stragglar-bench-gpu: StragglAR vs the baselines vs ncclAllReduce on GPUs (issue #4 item 5),
// the GPU mode of stragglar-bench: same flags, same columns, same definitions (tools/bench).
// One MPI process per GPU rank (several may share a GPU: see shared/DEVICE.md); MPI only
// bootstraps the ncclUniqueId and gathers timings.
//
//   mpirun -np 8 ./build/stragglar-bench-gpu -b 64M -e 64M -d float
//          --algo stragglar,ring,native --straggler 7 --delay 300 --json out.json
//
// One iteration: the streams drain, MPI_Barrier (the common start); every rank records a start
// event on its stream; the straggler enqueues a GPU sleep of --delay ms (a kernel, so no host
// waits) and records its entry event; everyone enqueues the allreduce and records its exit.
// time = latest exit − start; exposed = latest exit − the straggler's entry (each rank on its
// own GPU clock from its own start; rank 0 takes the maximum over ranks and the median over
// iterations). --ideal: the phases that do not wait for the straggler run first (untimed), then
// only the waiting phases are timed (native: the whole call). algbw = size / exposed,
// busbw = algbw · 2(n−1)/n; #wrong (-c 1): elements differing from the exactly known result.
#include <cuda_runtime_api.h>
#include <mpi.h>
#include <nccl.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <optional>
#include <tuple>
#include <utility>
#include <vector>

#include "../bench_flags.hpp"
#include "cuda_check.hpp"
#include "kernels.hpp"
#include "nccl_front.hpp"
#include "stragglar/nccl.hpp"
#include "runtime/element.hpp"
#include "stragglar/simulate.hpp"
#include "stragglar/synthesize.hpp"
#include "stragglar/units.hpp"

using namespace stragglar;

namespace {

struct Config : bench::BenchFlags {
  DataType dtype = DataType::float32;  // parsed from dtype_name / op_name
  ReduceOp op = ReduceOp::sum;
  bool calibrate = false;
};

int g_rank = 0, g_n = 1;

Config parse(int argc, char** argv) {
  Config cfg;
  CLI::App app{"stragglar-bench-gpu: AllReduce timings under a straggler on GPUs (NCCL), shaped like nccl-tests"};
  bench::add_bench_flags(app, cfg, "", "ms (GPU sleep kernel)");
  app.add_flag("--calibrate", cfg.calibrate,
               "Measure alpha and beta with pairwise ncclSend/ncclRecv exchanges; print the model's prediction");
  try {
    app.parse(argc, argv);
    cfg.dtype = parse_dtype(cfg.dtype_name);
    cfg.op = parse_reduce_op(cfg.op_name);
  } catch (const CLI::ParseError& e) {
    const int code = g_rank == 0 ? app.exit(e) : (e.get_exit_code() == 0 ? 0 : 2);
    MPI_Finalize();
    std::exit(code);
  } catch (const std::exception& e) {
    if (g_rank == 0) std::fprintf(stderr, "stragglar-bench-gpu: %s\n", e.what());
    MPI_Finalize();
    std::exit(2);
  }
  return cfg;
}

std::vector<std::string> split(const std::string& list) {
  std::vector<std::string> out;
  for (std::size_t p = 0; p <= list.size();) {
    const std::size_t q = std::min(list.find(',', p), list.size());
    if (q > p) out.push_back(list.substr(p, q - p));
    p = q + 1;
  }
  return out;
}

Options options_for_name(const std::string& name, const Config& c) {
  Options o = options_for(name);
  o.straggler = c.straggler;
  o.pipeline = bench::parse_pipeline_text(c.pipeline, "--pipeline");
  return o;
}

// Exactly known inputs for -c 1 (every partial result exact in every dtype for n <= 16):
// sum/avg/min/max: rank r holds (r+1) + i%7; prod: rank r holds 1 + r%2 everywhere.
double input(ReduceOp op, int r, std::size_t i) {
  if (op == ReduceOp::prod) return 1.0 + r % 2;
  return (r + 1) + static_cast<double>(i % 7);
}
double expected(ReduceOp op, DataType t, std::size_t i) {
  double acc = input(op, 0, i);
  for (int r = 1; r < g_n; ++r) {
    const double v = input(op, r, i);
    switch (op) {
      case ReduceOp::sum: case ReduceOp::avg: acc += v; break;
      case ReduceOp::prod: acc *= v; break;
      case ReduceOp::min: acc = std::min(acc, v); break;
      case ReduceOp::max: acc = std::max(acc, v); break;
    }
  }
  if (op == ReduceOp::avg) acc = (t == DataType::int32 || t == DataType::int64) ? std::trunc(acc / g_n) : acc / g_n;
  return acc;
}
// α-β calibration over the same transport: ranks pair up (r ↔ r^1; an odd last rank idles)
// and exchange `bytes` both ways in one NCCL group, timed with CUDA events; t(s) = α + β·s from
// two sizes, median over repetitions, maximum over ranks. (γ is left 0: CUDA reductions run
// far above the link bandwidth.) sendbuf/recvbuf must hold `large` bytes.
CostModel calibrate(ncclComm_t comm, cudaStream_t stream, void* sendbuf, void* recvbuf, std::size_t large) {
  const std::size_t small = 4096;
  const int peer = g_rank ^ 1;
  cudaEvent_t a, b;
  STRAGGLAR_CUDA_CHECK(cudaEventCreate(&a));
  STRAGGLAR_CUDA_CHECK(cudaEventCreate(&b));
  auto measure = [&](std::size_t bytes, int reps) {
    std::vector<double> ts;
    for (int i = 0; i < reps + 2; ++i) {
      STRAGGLAR_CUDA_CHECK(cudaStreamSynchronize(stream));
      MPI_Barrier(MPI_COMM_WORLD);
      STRAGGLAR_CUDA_CHECK(cudaEventRecord(a, stream));
      if (peer < g_n) {
        STRAGGLAR_NCCL_CHECK(ncclGroupStart());
        STRAGGLAR_NCCL_CHECK(ncclSend(sendbuf, bytes, ncclChar, peer, comm, stream));
        STRAGGLAR_NCCL_CHECK(ncclRecv(recvbuf, bytes, ncclChar, peer, comm, stream));
        STRAGGLAR_NCCL_CHECK(ncclGroupEnd());
      }
      STRAGGLAR_CUDA_CHECK(cudaEventRecord(b, stream));
      STRAGGLAR_CUDA_CHECK(cudaEventSynchronize(b));
      float ms = 0;
      STRAGGLAR_CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
      double dt = ms * 1e-3, worst = 0;
      MPI_Allreduce(&dt, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
      if (i >= 2) ts.push_back(worst);
    }
    std::sort(ts.begin(), ts.end());
    return ts[ts.size() / 2];
  };
  const double t_small = measure(small, 30), t_large = measure(large, 10);
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  CostModel c;
  c.beta_s_per_byte = std::max(1e-15, (t_large - t_small) / static_cast<double>(large - small));
  c.alpha_s = std::max(0.0, t_small - c.beta_s_per_byte * static_cast<double>(small));
  if (g_rank == 0)
    std::printf("# calibration: exchange %zu B: %.1f us, %zu B: %.1f us -> alpha %.2f us, beta %.3f GB/s\n", small,
                t_small * 1e6, large, t_large * 1e6, c.alpha_s * 1e6, 1.0 / c.beta_s_per_byte / 1e9);
  return c;
}

// The model's (time, exposed) for one row: the schedule the runtime runs (same K choice).
std::pair<double, double> predict(const Options& o, std::size_t bytes, const CostModel& cost, const Config& cfg) {
  SynthOptions so;
  if (o.algorithm == Algorithm::stragglar || o.algorithm == Algorithm::broadcast)
    so.straggler = o.straggler < 0 ? g_n - 1 : o.straggler;
  so.pipeline = o.algorithm != Algorithm::stragglar ? 1
                : o.pipeline == kPipelineAuto    ? std::max(1, choose_pipeline(g_n, bytes, cost))
                                                 : o.pipeline;
  const Schedule s = synthesize(o.algorithm, g_n, so);
  Delay d;
  d.ideal = cfg.ideal;
  d.seconds = cfg.ideal ? 0 : cfg.delay_ms * 1e-3;
  const SimResult sim = simulate(s, bytes, cost, d);
  return {sim.time_s, sim.exposed_s};
}

// The expected value rounded to the dtype, back as a double (bit-exact comparison).
double rounded(double v, DataType t) {
  switch (t) {
    case DataType::float32: return static_cast<float>(v);
    case DataType::float64: return v;
    case DataType::float16: return half_to_float(float_to_half(static_cast<float>(v)));
    case DataType::bfloat16: return bfloat16_to_float(float_to_bfloat16(static_cast<float>(v)));
    case DataType::int32: case DataType::int64: return v;
  }
  return v;
}

struct Row {
  std::size_t bytes, count;
  std::string algo;
  double delay_s, time_s, exposed_s, algbw, busbw;
  long wrong;
  double predicted_s, predicted_exposed_s;  // -1: no prediction (no --calibrate, or native)
};

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_n);
  const Config cfg = parse(argc, argv);

  int ngpus = 0;
  const cudaError_t ge = cudaGetDeviceCount(&ngpus);
  int have = (ge == cudaSuccess && ngpus > 0) ? 1 : 0, all_have = 0;
  MPI_Allreduce(&have, &all_have, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (!all_have) {
    if (g_rank == 0) std::printf("no CUDA device: skipped\n");
    MPI_Finalize();
    return 0;
  }
  MPI_Comm local;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, g_rank, MPI_INFO_NULL, &local);
  int local_rank = 0, local_size = 1;
  MPI_Comm_rank(local, &local_rank);
  MPI_Comm_size(local, &local_size);
  const bool shared = local_size > ngpus;
  if (shared) {  // shared/DEVICE.md: one NCCL "host" per rank, sockets over loopback
    const std::string host = "stragglar-bench-host" + std::to_string(g_rank);
    setenv("NCCL_HOSTID", host.c_str(), 1);
    setenv("NCCL_NET", "Socket", 0);
    setenv("NCCL_P2P_DISABLE", "1", 0);
    setenv("NCCL_SHM_DISABLE", "1", 0);
    setenv("NCCL_SOCKET_IFNAME", "lo", 0);
  }
  const std::string transport = shared ? "NCCL over loopback sockets, " + std::to_string(ngpus) + " GPU shared"
                                       : "NCCL (default transports)";
  int rc = 0;
  try {
    STRAGGLAR_CUDA_CHECK(cudaSetDevice(local_rank % ngpus));
    ncclUniqueId id;
    if (g_rank == 0) STRAGGLAR_NCCL_CHECK(ncclGetUniqueId(&id));
    MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
    ncclComm_t comm;
    STRAGGLAR_NCCL_CHECK(ncclCommInitRank(&comm, g_n, id, g_rank));
    cudaStream_t stream;
    STRAGGLAR_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    int max_blocks = 0, dev = 0;
    STRAGGLAR_CUDA_CHECK(cudaGetDevice(&dev));
    STRAGGLAR_CUDA_CHECK(cudaDeviceGetAttribute(&max_blocks, cudaDevAttrMultiProcessorCount, dev));
    max_blocks *= 4;
    const std::size_t min_bytes = parse_bytes(cfg.min_bytes), max_bytes = parse_bytes(cfg.max_bytes);
    require(min_bytes <= max_bytes, "-b " + cfg.min_bytes + " is larger than -e " + cfg.max_bytes);
    const std::vector<std::string> algos = split(cfg.algos);
    const std::size_t es = size_of(cfg.dtype);
    void *sendbuf = nullptr, *recvbuf = nullptr;
    // --calibrate exchanges up to max(max_bytes/(n-1), 1 MiB) bytes through the same buffers.
    const std::size_t calib_bytes = std::max(max_bytes / static_cast<std::size_t>(std::max(1, g_n - 1)), std::size_t{1} << 20);
    const std::size_t buf_bytes = std::max(max_bytes, cfg.calibrate ? calib_bytes : 0) + es;
    STRAGGLAR_CUDA_CHECK(cudaMalloc(&sendbuf, buf_bytes));
    STRAGGLAR_CUDA_CHECK(cudaMalloc(&recvbuf, buf_bytes));
    // Inputs: pattern 1 = (r+1) + i%7; pattern 0 for prod = 1 + r%2.
    const std::size_t max_count = max_bytes / es;
    if (cfg.op == ReduceOp::prod) cuda::launch_fill(sendbuf, max_count, cfg.dtype, 1.0 + g_rank % 2, 0, stream, max_blocks);
    else cuda::launch_fill(sendbuf, max_count, cfg.dtype, g_rank + 1.0, 1, stream, max_blocks);
    cudaEvent_t ev_start, ev_entry, ev_exit;
    STRAGGLAR_CUDA_CHECK(cudaEventCreate(&ev_start));
    STRAGGLAR_CUDA_CHECK(cudaEventCreate(&ev_entry));
    STRAGGLAR_CUDA_CHECK(cudaEventCreate(&ev_exit));
    const int straggler = cfg.straggler < 0 ? g_n - 1 : cfg.straggler;
    require(straggler < g_n, "--straggler " + std::to_string(cfg.straggler) + ": expected a rank < " + std::to_string(g_n));
    const long long delay_ns = static_cast<long long>(cfg.delay_ms * 1e6);
    std::optional<CostModel> cost;
    if (cfg.calibrate) cost = calibrate(comm, stream, sendbuf, recvbuf, calib_bytes);

    if (g_rank == 0) {
      std::printf("# stragglar-bench-gpu: %d ranks, transport: %s, straggler %d, delay %.3f ms%s, %d iters (+%d warm-up)\n",
                  g_n, transport.c_str(), straggler, cfg.delay_ms, cfg.ideal ? " (ideal: waiting phases only)" : "",
                  cfg.iters, cfg.warmup);
      std::printf("%12s %12s %8s %6s %10s %10s %12s %12s %8s %8s %7s%s\n", "size", "count", "type", "redop", "algo",
                  "delay(ms)", "time(us)", "exposed(us)", "algbw", "busbw", "#wrong",
                  cost ? "     pred(us) pred_exp(us) meas/pred" : "");
      std::printf("%12s %12s %8s %6s %10s %10s %12s %12s %8s %8s %7s\n", "(B)", "(elements)", "", "", "", "", "", "",
                  "(GB/s)", "(GB/s)", "");
    }
    std::vector<Row> rows;
    for (std::size_t bytes = min_bytes; bytes <= max_bytes;
         bytes = std::max(bytes + 1, static_cast<std::size_t>(static_cast<double>(bytes) * cfg.factor))) {
      const std::size_t count = bytes / es;
      for (const std::string& name : algos) {
        Options o = options_for_name(name, cfg);
        if (cost) o.cost = cost;  // the runtime's auto K from the same model as the prediction
        const bool native = o.algorithm == Algorithm::native;
        const bool ideal = cfg.ideal && !native;
        PhaseSelection phases = PhaseSelection::all;
        // One iteration; returns (time, exposed) in seconds on this rank's GPU clock.
        auto iteration = [&]() -> std::pair<double, double> {
          STRAGGLAR_CUDA_CHECK(cudaStreamSynchronize(stream));
          if (ideal) {  // the no-wait phases first, untimed (the straggler has none)
            detail::nccl_allreduce(sendbuf, recvbuf, count, cfg.dtype, cfg.op, comm, stream, o,
                                   PhaseSelection::no_wait_only);
            STRAGGLAR_CUDA_CHECK(cudaStreamSynchronize(stream));
            phases = PhaseSelection::waiting_only;
          }
          MPI_Barrier(MPI_COMM_WORLD);  // the common start
          STRAGGLAR_CUDA_CHECK(cudaEventRecord(ev_start, stream));
          if (g_rank == straggler && !ideal) cuda::launch_sleep(stream, delay_ns);
          STRAGGLAR_CUDA_CHECK(cudaEventRecord(ev_entry, stream));
          detail::nccl_allreduce(sendbuf, recvbuf, count, cfg.dtype, cfg.op, comm, stream, o, phases);
          STRAGGLAR_CUDA_CHECK(cudaEventRecord(ev_exit, stream));
          STRAGGLAR_CUDA_CHECK(cudaEventSynchronize(ev_exit));
          float t_ms = 0, entry_ms = 0;
          STRAGGLAR_CUDA_CHECK(cudaEventElapsedTime(&t_ms, ev_start, ev_exit));
          STRAGGLAR_CUDA_CHECK(cudaEventElapsedTime(&entry_ms, ev_start, ev_entry));
          return {t_ms * 1e-3, entry_ms * 1e-3};
        };
        for (int w = 0; w < cfg.warmup; ++w) iteration();
        std::vector<double> times, exposeds;
        for (int it = 0; it < cfg.iters; ++it) {
          const auto [t, entry] = iteration();
          double tmax = 0, straggler_entry = 0;
          MPI_Allreduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
          const double mine = g_rank == straggler ? entry : 0.0;
          MPI_Allreduce(&mine, &straggler_entry, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
          times.push_back(tmax);
          exposeds.push_back(std::max(tmax - straggler_entry, 0.0));
        }
        auto median = [](std::vector<double> v) {
          std::sort(v.begin(), v.end());
          return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
        };
        const double time = median(times), exposed = median(exposeds);
        long wrong = 0;
        if (cfg.check) {
          std::vector<std::byte> host(count * es);
          STRAGGLAR_CUDA_CHECK(cudaMemcpy(host.data(), recvbuf, host.size(), cudaMemcpyDeviceToHost));
          // native avg of floating types: NCCL pre-multiplies by 1/n (not one final division).
          const bool loose = native && cfg.op == ReduceOp::avg && cfg.dtype != DataType::int32 &&
                             cfg.dtype != DataType::int64;
          for (std::size_t i = 0; i < count; ++i) {
            const double want = rounded(expected(cfg.op, cfg.dtype, i), cfg.dtype);
            const double got = load_element(host.data(), i, cfg.dtype);
            if (loose ? !(std::fabs(got - want) <= 1e-2 * std::fabs(want)) : got != want) ++wrong;
          }
        }
        long wrong_all = 0;
        MPI_Allreduce(&wrong, &wrong_all, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
        const double algbw = exposed > 0 ? static_cast<double>(count * es) / exposed / 1e9 : 0.0;
        const double busbw = algbw * 2.0 * (g_n - 1) / g_n;
        const double delay_s = ideal ? 0.0 : cfg.delay_ms * 1e-3;
        Row row{count * es, count, name, delay_s, time, exposed, algbw, busbw, cfg.check ? wrong_all : -1, -1, -1};
        if (cost && !native) std::tie(row.predicted_s, row.predicted_exposed_s) = predict(o, count * es, *cost, cfg);
        rows.push_back(row);
        if (g_rank == 0) {
          std::printf("%12zu %12zu %8s %6s %10s %10.3f %12.1f %12.1f %8.3f %8.3f %7s", count * es, count,
                      to_string(cfg.dtype), to_string(cfg.op), name.c_str(), delay_s * 1e3, time * 1e6,
                      exposed * 1e6, algbw, busbw, cfg.check ? std::to_string(wrong_all).c_str() : "N/A");
          if (row.predicted_exposed_s > 0)
            std::printf(" %12.1f %12.1f %9.2f", row.predicted_s * 1e6, row.predicted_exposed_s * 1e6,
                        exposed / row.predicted_exposed_s);
          else if (cost)
            std::printf(" %12s %12s %9s", "-", "-", "-");
          std::printf("\n");
          std::fflush(stdout);
        }
        if (wrong_all > 0) rc = 1;
      }
    }
    if (g_rank == 0 && !cfg.json_file.empty()) {
      if (FILE* f = std::fopen(cfg.json_file.c_str(), "w")) {
        std::fprintf(f, "{\"tool\": \"stragglar-bench-gpu\", \"nranks\": %d, \"transport\": \"%s\", \"straggler\": %d, "
                        "\"type\": \"%s\", \"redop\": \"%s\", \"ideal\": %s, \"iters\": %d, \"warmup\": %d, \"rows\": [\n",
                     g_n, transport.c_str(), straggler, to_string(cfg.dtype), to_string(cfg.op),
                     cfg.ideal ? "true" : "false", cfg.iters, cfg.warmup);
        for (std::size_t i = 0; i < rows.size(); ++i) {
          const Row& r = rows[i];
          std::fprintf(f, "  {\"size\": %zu, \"count\": %zu, \"type\": \"%s\", \"redop\": \"%s\", \"algo\": \"%s\", "
                          "\"delay_ms\": %.6g, \"time_us\": %.6g, \"exposed_us\": %.6g, \"algbw\": %.6g, "
                          "\"busbw\": %.6g, \"wrong\": %ld",
                       r.bytes, r.count, to_string(cfg.dtype), to_string(cfg.op), r.algo.c_str(), r.delay_s * 1e3,
                       r.time_s * 1e6, r.exposed_s * 1e6, r.algbw, r.busbw, r.wrong);
          if (r.predicted_exposed_s > 0)
            std::fprintf(f, ", \"predicted_us\": %.6g, \"predicted_exposed_us\": %.6g", r.predicted_s * 1e6,
                         r.predicted_exposed_s * 1e6);
          std::fprintf(f, "}%s\n", i + 1 < rows.size() ? "," : "");
        }
        std::fprintf(f, "]}\n");
        std::fclose(f);
      }
    }
    STRAGGLAR_CUDA_CHECK(cudaStreamSynchronize(stream));
    nccl_comm_release(comm);
    cudaFree(sendbuf);
    cudaFree(recvbuf);
    ncclCommDestroy(comm);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "[rank %d] stragglar-bench-gpu: %s\n", g_rank, e.what());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  MPI_Comm_free(&local);
  MPI_Finalize();
  return rc;
}
