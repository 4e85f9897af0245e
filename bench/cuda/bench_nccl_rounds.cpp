// bench_nccl_rounds: what one round of stragglar's executor costs over NCCL — the host's time to
// enqueue it (the executor never waits on the host between rounds: one NCCL group of
// ncclSend/ncclRecv, then the reduce kernel, and on), and the GPU time per round from CUDA
// events — per algorithm, rank count n and buffer size. The simulator prices rounds with the
// host figure (stragglar simulate --round-costs FILE; docs/gpu.md "The simulator's GPU model").
//
//   mpirun -np 8 ./bench_nccl_rounds [--nranks 2-8] [-b 1K -e 256M -f 4 | --sizes LIST]
//          [--algo stragglar,ring] [-n 5] [--deadline S] [--json FILE]
//
// One MPI process per rank (several may share a GPU: each its own NCCL_HOSTID, sockets over
// loopback, docs/gpu.md "Tests"); communicators of ranks 0..n-1 for every n. Per point: the
// Executor over NcclTransport + CudaDevice on one stream, every call from the same input (rank
// r contributes r + 1), its result checked exactly on the last call. Without a GPU it says so
// and exits 77; any other CUDA error fails.
#include <cuda_runtime_api.h>
#include <mpi.h>
#include <nccl.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "../../tests/gpu/cuda_presence.hpp"
#include "cuda_check.hpp"
#include "cuda_device.hpp"
#include "nccl_rounds_options.hpp"
#include "nccl_transport.hpp"
#include "runtime/executor.hpp"
#include "stragglar/algorithm.hpp"
#include "stragglar/plan.hpp"
#include "stragglar/round_costs.hpp"
#include "stragglar/synthesize.hpp"
#include "stragglar/units.hpp"

using namespace stragglar;
using Clock = std::chrono::steady_clock;

namespace {

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Ranks 0..n-1 of the job: an MPI communicator (start, decisions, samples) and an NCCL one.
struct Group {
  int n = 0;
  MPI_Comm mpi = MPI_COMM_NULL;
  ncclComm_t nccl = nullptr;
};

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  ~DeviceBuffer() { (void)cudaFree(p_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  // At least `bytes`, contents undefined; the stream must be idle (the caller synchronised it).
  void reserve(std::size_t bytes) {
    if (bytes <= size_) return;
    STRAGGLAR_CUDA_CHECK(cudaFree(p_));
    p_ = nullptr;
    size_ = 0;
    STRAGGLAR_CUDA_CHECK(cudaMalloc(&p_, bytes));
    size_ = bytes;
  }
  void* get() const { return p_; }
  std::size_t size() const { return size_; }

 private:
  void* p_ = nullptr;
  std::size_t size_ = 0;
};

struct Bench {
  Bench(const bench::RoundBenchOptions& options, int r, int dev) : o(options), rank(r), device(dev) {
    STRAGGLAR_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    STRAGGLAR_CUDA_CHECK(cudaEventCreate(&start));
    STRAGGLAR_CUDA_CHECK(cudaEventCreate(&end));
  }
  ~Bench() {
    (void)cudaStreamSynchronize(stream);
    (void)cudaEventDestroy(start);
    (void)cudaEventDestroy(end);
    (void)cudaStreamDestroy(stream);
  }
  Bench(const Bench&) = delete;
  Bench& operator=(const Bench&) = delete;

  const bench::RoundBenchOptions& o;
  int rank;
  int device;
  cudaStream_t stream = nullptr;
  cudaEvent_t start = nullptr, end = nullptr;
  DeviceBuffer input, work, scratch;
  std::vector<float> host;  // the last call's result, checked
  std::map<std::pair<int, std::string>, bool> warmed;

  void sync() { STRAGGLAR_CUDA_CHECK(cudaStreamSynchronize(stream)); }

  // This size's input: rank r contributes r + 1 in every element (exact float sums).
  void prepare(std::size_t bytes) {
    sync();
    input.reserve(bytes);
    work.reserve(bytes);
    host.assign(bytes / sizeof(float), static_cast<float>(rank + 1));
    STRAGGLAR_CUDA_CHECK(cudaMemcpy(input.get(), host.data(), bytes, cudaMemcpyHostToDevice));
  }

  // One point: `algorithm` at n ranks on `bytes`; the row on rank 0, nothing elsewhere.
  RoundCostRow run_point(const Group& g, const std::string& algorithm, std::size_t bytes) {
    const std::size_t count = bytes / sizeof(float);
    const bool native = algorithm == "native";
    Plan plan;
    if (!native) {
      SynthOptions so;
      so.straggler = g.n - 1;
      so.pipeline = o.pipeline;
      plan = compile(synthesize(parse_algorithm(algorithm), g.n, so), rank);
      sync();
      scratch.reserve(std::max<std::size_t>(Executor::scratch_bytes(plan, count, DataType::float32), 16));
    }
    const int rounds = native ? 1 : static_cast<int>(plan.rounds.size());
    NcclTransport transport(g.nccl, stream, o.call_timeout_s);
    CudaDevice cuda_device(stream, device);
    Executor executor(transport, cuda_device);
    auto call = [&] {
      if (native)
        cuda::settle_nccl(g.nccl, ncclAllReduce(work.get(), work.get(), count, ncclFloat, ncclSum, g.nccl, stream),
                          "ncclAllReduce", o.call_timeout_s);
      else
        executor.run(plan, work.get(), count, DataType::float32, ReduceOp::sum, scratch.get(), scratch.size());
    };
    auto reset = [&] {
      STRAGGLAR_CUDA_CHECK(cudaMemcpyAsync(work.get(), input.get(), bytes, cudaMemcpyDeviceToDevice, stream));
      sync();
    };
    auto wait_end = [&](const char* what) {
      cuda::wait_event(g.nccl, end, o.call_timeout_s, cuda::deadline_after(o.call_timeout_s), what);
    };
    // Connections to every peer of the schedule are made by the first call (NCCL connects lazily).
    if (bool& w = warmed[{g.n, algorithm}]; !w) {
      for (int i = 0; i < o.warmup; ++i) {
        reset();
        MPI_Barrier(g.mpi);
        call();
        STRAGGLAR_CUDA_CHECK(cudaEventRecord(end, stream));
        wait_end("a warm-up call");
      }
      w = true;
    }
    std::vector<double> host_call, gpu_call;
    const auto point_start = Clock::now();
    for (int more = 1; more != 0;) {
      reset();
      MPI_Barrier(g.mpi);
      STRAGGLAR_CUDA_CHECK(cudaEventRecord(start, stream));
      const auto t0 = Clock::now();
      call();
      const double host_s = seconds_since(t0);
      STRAGGLAR_CUDA_CHECK(cudaEventRecord(end, stream));
      wait_end("a timed call");
      float ms = 0;
      STRAGGLAR_CUDA_CHECK(cudaEventElapsedTime(&ms, start, end));
      host_call.push_back(host_s);
      gpu_call.push_back(ms * 1e-3);
      more = rank == 0 && bench::another_call(o, static_cast<int>(host_call.size()), seconds_since(point_start));
      MPI_Bcast(&more, 1, MPI_INT, 0, g.mpi);
    }
    // The last call's result, exactly: Σ (r + 1) over the n ranks.
    STRAGGLAR_CUDA_CHECK(cudaMemcpy(host.data(), work.get(), bytes, cudaMemcpyDeviceToHost));
    const float want = static_cast<float>(g.n * (g.n + 1) / 2);
    long long wrong = 0, wrong_all = 0;
    for (std::size_t i = 0; i < count; ++i) wrong += host[i] != want;
    MPI_Reduce(&wrong, &wrong_all, 1, MPI_LONG_LONG, MPI_SUM, 0, g.mpi);

    // Every rank made the same number of calls (rank 0 decided each one).
    const int calls = static_cast<int>(host_call.size());
    std::vector<int> rounds_all(static_cast<std::size_t>(g.n));
    std::vector<double> host_all(static_cast<std::size_t>(g.n * calls)), gpu_all(host_all.size());
    MPI_Gather(&rounds, 1, MPI_INT, rounds_all.data(), 1, MPI_INT, 0, g.mpi);
    MPI_Gather(host_call.data(), calls, MPI_DOUBLE, host_all.data(), calls, MPI_DOUBLE, 0, g.mpi);
    MPI_Gather(gpu_call.data(), calls, MPI_DOUBLE, gpu_all.data(), calls, MPI_DOUBLE, 0, g.mpi);
    if (rank != 0) return {};
    bench::PointSamples s;
    s.rounds = rounds_all;
    s.wrong = wrong_all;
    for (int r = 0; r < g.n; ++r) {
      s.host_call.emplace_back(host_all.begin() + r * calls, host_all.begin() + (r + 1) * calls);
      s.gpu_call.emplace_back(gpu_all.begin() + r * calls, gpu_all.begin() + (r + 1) * calls);
    }
    return bench::summarize_point(algorithm, g.n, bytes, s);
  }
};

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

// One line per measured row as it comes (a run cut short keeps what it had in its log).
void print_row(const RoundCostRow& r) {
  std::printf("  %-10s n=%d %9s: %3d rounds, %d calls, host %.2f us/round (%.2f..%.2f), gpu %.1f us/round, "
              "%ld wrong\n",
              r.algorithm.c_str(), r.nranks, format_bytes(r.bytes).c_str(), r.rounds, r.calls, r.host_s * 1e6,
              r.host_min_s * 1e6, r.host_max_s * 1e6, r.gpu_s * 1e6, static_cast<long>(r.wrong));
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, world = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  bench::RoundBenchOptions o;
  std::ostream null_stream(nullptr);
  if (const auto code = bench::parse_round_bench_flags(argc, argv, world, o, rank == 0 ? std::cout : null_stream,
                                                       rank == 0 ? std::cerr : null_stream)) {
    MPI_Finalize();
    return *code;
  }

  // Without a GPU nothing is measured, and the exit says so (77), never 0; any other CUDA error fails.
  const gpu_test::CudaPresence gpu = gpu_test::cuda_presence();
  int state = gpu.kind == gpu_test::CudaPresence::present ? 0 : gpu.kind == gpu_test::CudaPresence::absent ? 1 : 2;
  int worst = 0;
  MPI_Allreduce(&state, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (worst != 0) {
    if (state == 2) std::fprintf(stderr, "[rank %d] bench_nccl_rounds: %s\n", rank, gpu.detail.c_str());
    if (worst == 1 && rank == 0)
      std::fprintf(stderr, "bench_nccl_rounds: no CUDA device (%s): nothing measured; it needs a GPU\n",
                   gpu.detail.c_str());
    MPI_Finalize();
    return worst == 1 ? 77 : 2;
  }
  MPI_Comm local;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &local);
  int local_rank = 0, local_size = 1;
  MPI_Comm_rank(local, &local_rank);
  MPI_Comm_size(local, &local_size);
  const bool shared = local_size > gpu.devices;
  if (shared) {  // docs/gpu.md "Tests": one NCCL "host" per rank, sockets over loopback
    const std::string host = "bench-nccl-rounds-host" + std::to_string(rank);
    setenv("NCCL_HOSTID", host.c_str(), 1);
    setenv("NCCL_NET", "Socket", 0);
    setenv("NCCL_P2P_DISABLE", "1", 0);
    setenv("NCCL_SHM_DISABLE", "1", 0);
    setenv("NCCL_SOCKET_IFNAME", "lo", 0);
  }
  int rc = 0;
  try {
    const int device = local_rank % gpu.devices;
    STRAGGLAR_CUDA_CHECK(cudaSetDevice(device));
    RoundCostTable table;
    table.tool = "bench_nccl_rounds";
    table.transport = shared ? "NCCL over loopback sockets, " + std::to_string(local_size) + " ranks sharing " +
                                   std::to_string(gpu.devices) + " GPU(s)"
                             : "NCCL (default transports)";
    cudaDeviceProp prop{};
    STRAGGLAR_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
    table.device = prop.name;
    int v = 0;
    STRAGGLAR_NCCL_CHECK(ncclGetVersion(&v));
    table.nccl_version = std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." + std::to_string(v % 100);
    table.date = utc_now();
    table.pipeline = o.pipeline;

    const auto start = Clock::now();
    std::vector<Group> groups;
    for (int n : o.nranks) {
      Group g;
      g.n = n;
      MPI_Comm_split(MPI_COMM_WORLD, rank < n ? 0 : MPI_UNDEFINED, rank, &g.mpi);
      if (rank < n) {
        ncclUniqueId id;
        if (rank == 0) STRAGGLAR_NCCL_CHECK(ncclGetUniqueId(&id));
        MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, g.mpi);
        STRAGGLAR_NCCL_CHECK(ncclCommInitRank(&g.nccl, n, id, rank));
      }
      groups.push_back(g);
    }
    if (rank == 0)
      std::printf("bench_nccl_rounds: %s, NCCL %s, %s; %zu rank counts, %zu sizes, %zu algorithms; communicators "
                  "in %.1f s\n",
                  table.device.c_str(), table.nccl_version.c_str(), table.transport.c_str(), o.nranks.size(),
                  o.sizes.size(), o.algorithms.size(), seconds_since(start));

    std::optional<Bench> bench_state(std::in_place, o, rank, device);
    Bench& b = *bench_state;
    // Sizes outermost: a run stopped at its deadline has every n and algorithm at the smaller sizes.
    for (std::size_t bytes : o.sizes) {
      b.prepare(bytes);
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
              table.skipped.push_back(skipped);
              table.complete = false;
            }
            continue;
          }
          if (rank >= g.n) continue;
          RoundCostRow row = b.run_point(g, algorithm, bytes);
          if (rank == 0) {
            print_row(row);
            table.rows.push_back(std::move(row));
          }
        }
    }
    b.sync();
    if (rank == 0) {
      std::printf("\n%s", format_round_costs(table).c_str());
      long long wrong = 0;
      for (const RoundCostRow& r : table.rows) wrong += r.wrong;
      std::printf("bench_nccl_rounds: %zu rows, %lld wrong elements, %s, %.1f s\n", table.rows.size(), wrong,
                  table.complete ? "complete" : "INCOMPLETE (deadline)", seconds_since(start));
      if (!o.json.empty()) {
        std::ofstream out(o.json, std::ios::binary);
        write_round_costs_json(out, table);
        if (!out.flush()) {
          std::fprintf(stderr, "bench_nccl_rounds: cannot write '%s'\n", o.json.c_str());
          rc = 1;
        }
      }
      if (wrong != 0) rc = 1;
    }
    MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD);
    bench_state.reset();  // its stream and buffers before the communicators
    for (Group& g : groups) {
      if (g.nccl != nullptr) STRAGGLAR_NCCL_CHECK(ncclCommDestroy(g.nccl));
      if (g.mpi != MPI_COMM_NULL) MPI_Comm_free(&g.mpi);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "[rank %d] bench_nccl_rounds: %s\n", rank, e.what());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  MPI_Comm_free(&local);
  MPI_Finalize();
  return rc;
}
