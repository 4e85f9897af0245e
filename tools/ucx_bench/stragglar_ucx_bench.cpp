// stragglar-ucx-bench: stragglar-bench over UCX (docs/ucx.md). The benchmark itself
// (flags, sizes, inputs, checks, timing, calibration, table, JSON/CSV) is the shared runner
// (tools/bench/bench_runner.hpp); this file is the UCX backend: the runtime core's Session over
// UcxEngine (src/ucx/ucx_engine.hpp, the PyTorch backend's CPU engine) on the engine's host
// buffers (HostBackend).
//
//   mpirun -np 8 ./build/stragglar-ucx-bench -b 64M -e 64M -d float
//          --algo stragglar,ring,rhd,native,auto --straggler 7 --delay 300
//
// It runs under mpirun like every tool of the runner. MPI does the benchmark's bookkeeping
// only: the common start and the gathering of timings (the runner), the exchange of UCX worker
// addresses at start (MpiKeyValueStore below), and `native`, which is MPI_Allreduce (UCX has
// no AllReduce of its own, and auto counts native among its candidates). The schedules
// (stragglar, ring, rhd, allpairs, broadcast), the core's agreement and auto's exchange move
// over UCX. UCX_TLS, STRAGGLAR_UCX_WAIT and STRAGGLAR_UCX_ERROR_MODE choose how (docs/ucx.md);
// `mpirun -x NAME=value` hands them to every rank.
#include <mpi.h>

#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "bench_runner.hpp"
#include "runtime/env.hpp"
#include "runtime/mpi_engine.hpp"
#include "runtime/session.hpp"
#include "stragglar/error.hpp"
#include "ucx/kv_store.hpp"
#include "ucx/ucx_engine.hpp"
#include "ucx/ucx_transport.hpp"

using namespace stragglar;

namespace {

// UcxTransport's bootstrap over MPI: works wherever mpirun starts the ranks (no shared
// directory needed). set() keeps the value here; get() of a key not seen yet is collective:
// every rank hands every rank what it set since the last such get (MPI_Allgather of sizes,
// MPI_Allgatherv of the entries). UcxTransport::connect makes every rank set its own key, then
// get the others', so each rank makes exactly one such get. MPI collectives do not time out:
// under mpirun a rank that dies ends the job.
class MpiKeyValueStore final : public KeyValueStore {
 public:
  explicit MpiKeyValueStore(MPI_Comm comm) : comm_(comm) {}

  void set(const std::string& key, std::span<const std::uint8_t> value) override {
    entries_[key].assign(value.begin(), value.end());
    append(unsent_, key.size());
    unsent_.insert(unsent_.end(), key.begin(), key.end());
    append(unsent_, value.size());
    unsent_.insert(unsent_.end(), value.begin(), value.end());
  }
  std::vector<std::uint8_t> get(const std::string& key, double) override {
    if (!check(key)) share();
    const auto it = entries_.find(key);
    require(it != entries_.end(), "stragglar-ucx-bench: no rank published the UCX address key '" + key + "'",
            ErrorCode::Mismatch);
    return it->second;
  }
  bool check(const std::string& key) override { return entries_.count(key) > 0; }

 private:
  static void append(std::vector<char>& out, std::uint64_t v) {
    const auto* p = reinterpret_cast<const char*>(&v);
    out.insert(out.end(), p, p + sizeof v);
  }
  static std::uint64_t take(const char*& p) {
    std::uint64_t v = 0;
    std::memcpy(&v, p, sizeof v);
    p += sizeof v;
    return v;
  }
  void share() {
    int n = 1;
    check_mpi(MPI_Comm_size(comm_, &n), "MPI_Comm_size");
    require(unsent_.size() <= static_cast<std::size_t>(INT32_MAX), "stragglar-ucx-bench: UCX addresses too large");
    const int mine = static_cast<int>(unsent_.size());
    std::vector<int> sizes(static_cast<std::size_t>(n)), offsets(static_cast<std::size_t>(n));
    check_mpi(MPI_Allgather(&mine, 1, MPI_INT, sizes.data(), 1, MPI_INT, comm_), "MPI_Allgather (bootstrap)");
    std::size_t total = 0;
    for (int r = 0; r < n; ++r) {
      offsets[static_cast<std::size_t>(r)] = static_cast<int>(total);
      total += static_cast<std::size_t>(sizes[static_cast<std::size_t>(r)]);
    }
    require(total <= static_cast<std::size_t>(INT32_MAX), "stragglar-ucx-bench: UCX addresses too large");
    std::vector<char> all(total);
    check_mpi(MPI_Allgatherv(unsent_.data(), mine, MPI_BYTE, all.data(), sizes.data(), offsets.data(), MPI_BYTE,
                             comm_),
              "MPI_Allgatherv (bootstrap)");
    unsent_.clear();
    for (const char* p = all.data(); p < all.data() + all.size();) {
      const std::uint64_t key_bytes = take(p);
      const std::string key(p, key_bytes);
      p += key_bytes;
      const std::uint64_t value_bytes = take(p);
      const auto* value = reinterpret_cast<const std::uint8_t*>(p);
      entries_[key].assign(value, value + value_bytes);
      p += value_bytes;
    }
  }

  MPI_Comm comm_;
  std::map<std::string, std::vector<std::uint8_t>> entries_;
  std::vector<char> unsent_;  // (key size, key, value size, value) of every set() not shared yet
};

// The calibration's messages: a tag no configuration reaches (the session numbers them from 1).
constexpr int kCalibrationTag = kAgreementTag - 2;

// A duplicate of a communicator with MPI_ERRORS_RETURN (what MpiEngine expects), freed last.
struct PrivateComm {
  explicit PrivateComm(MPI_Comm comm) {
    check_mpi(MPI_Comm_dup(comm, &c), "MPI_Comm_dup");
    check_mpi(MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
  }
  ~PrivateComm() { MPI_Comm_free(&c); }
  PrivateComm(const PrivateComm&) = delete;
  PrivateComm& operator=(const PrivateComm&) = delete;
  MPI_Comm c = MPI_COMM_NULL;
};

class UcxBackend final : public bench::HostBackend {
 public:
  explicit UcxBackend(MPI_Comm world)
      : comm_(world),
        options_(UcxOptions::from_env(detail::env().timeout_s)),
        mpi_(comm_.c, detail::env()),
        engine_(connect(comm_.c, options_),
                [this](void* buf, std::size_t count, DataType t, ReduceOp op, bool /*keep: session_restores*/) {
                  mpi_.native_allreduce(buf, buf, count, t, op, /*bound=*/std::nullopt, /*keep_buffer=*/false);  // MPI_Allreduce
                }),
        session_(engine_, "stragglar-ucx-bench") {}

  // "UCX (rank 0 -> 1: sysv/memory.0 cma/memory.0 (process watched); wait backoff, errors
  // per_host); native: MPI_Allreduce (Open MPI v4.1.4)"
  std::string transport() const override {
    const UcxTransport& t = engine_.ucx();
    const int peer = (t.rank() + 1) % t.nranks();
    return "UCX (rank " + std::to_string(t.rank()) + " -> " + std::to_string(peer) + ": " + t.describe_peer(peer) +
           "; " + options_.describe() + "); native: MPI_Allreduce (" + bench::mpi_library() + ")";
  }
  void allreduce(std::size_t count, DataType t, ReduceOp op, const Options& o, PhaseSelection phases) override {
    session_.allreduce(work(), work(), count, t, op, o, phases);
  }
  detail::Choice last_choice() override { return session_.last_choice(); }
  void keep_buffers(bool keep) override { session_.set_caller_sees_buffers_after_errors(keep); }
  double time_exchange(std::size_t bytes, int peer) override {
    const double t0 = MPI_Wtime();
    if (peer >= 0) {
      const Message send{peer, input(), bytes}, recv{peer, work(), bytes};
      engine_.ucx().set_tag(kCalibrationTag);
      engine_.ucx().exchange({&send, 1}, {&recv, 1});
    }
    return MPI_Wtime() - t0;
  }

 private:
  static std::unique_ptr<UcxTransport> connect(MPI_Comm comm, const UcxOptions& options) {
    int rank = 0, n = 1;
    check_mpi(MPI_Comm_rank(comm, &rank), "MPI_Comm_rank");
    check_mpi(MPI_Comm_size(comm, &n), "MPI_Comm_size");
    MpiKeyValueStore store(comm);
    return UcxTransport::connect(store, "stragglar-ucx-bench", rank, n, options);
  }

  PrivateComm comm_;  // the bootstrap's and native's (first: freed last)
  UcxOptions options_;
  detail::MpiEngine mpi_;  // only its native_allreduce (MPI_Allreduce, fp16/bf16 by the CPU loops)
  detail::UcxEngine engine_;
  detail::Session session_;
};

const bench::Tool kTool{"stragglar-ucx-bench",
                        "stragglar-ucx-bench: AllReduce under a straggler over UCX (run with mpirun -np N; MPI only "
                        "starts the ranks, times and gathers; native is MPI_Allreduce)",
                        "host sleep",
                        "Measure alpha, beta (pairwise UCX exchanges) and gamma (the CPU reducer); print the model's "
                        "prediction"};

}  // namespace

int main(int argc, char** argv) {
  return bench::main_with(argc, argv, kTool, [] { return std::make_unique<UcxBackend>(MPI_COMM_WORLD); });
}
