// The benchmark runner behind stragglar-bench (MPI, CPU: stragglar_bench.cpp),
// stragglar-bench-gpu (NCCL: tools/bench_gpu/bench_gpu.cpp) and stragglar-ucx-bench (UCX, CPU:
// tools/ucx_bench/stragglar_ucx_bench.cpp), the way nccl-tests has one `common` runner and a
// small file per collective. The runner owns everything the tools share: the flags, the size
// loop, the `name:K` --algo entries and the K column, the exactly known inputs and expected
// results of every dtype/op, the identical-bits check across ranks, the timing definitions
// (common start, time, exposed, medians), the α-β-γ calibration and the model's prediction,
// the table, and one JSON/CSV writer. A Backend is only the data path: buffers, one
// allreduce, the straggler's sleep, the timers, and the calibration's exchange and reduction.
// Every backend runs one process per rank under mpirun; MPI gives the common start
// (MPI_Barrier) and gathers the timings. Definitions: docs/runtime.md "stragglar-bench".
#pragma once
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "../bench_flags.hpp"
#include "runtime/auto_cost_model.hpp"
#include "runtime/executor.hpp"
#include "runtime/straggler_policy.hpp"
#include "stragglar/options.hpp"
#include "stragglar/types.hpp"

namespace stragglar::bench {

// The flags of every tool: the nccl-tests-shaped ones (bench_flags.hpp) and the runner's own.
struct RunnerFlags : BenchFlags {
  bool calibrate = false;
  std::string csv_file;
  std::string move_straggler;  // "I:R[,I:R...]": from timed iteration I on, rank R is delayed
  std::string stragglers;      // "6,7": these ranks are all delayed; stragglar-k is told the set
  // A text file of per-rank delays (ms), one line per timed iteration (n numbers), cycled;
  // warm-ups and the check use line 1. Every rank sleeps its own delay; exposed = latest exit −
  // latest entry. The straggler of fixed entries (--straggler unset) is the rank latest most often.
  std::string delay_pattern;
  // Whether in-place calls keep a copy of the buffer to put back if they raise (the C API's
  // default: STRAGGLAR_KEEP_BUFFERS, docs/reliability.md class 6). Off: the benchmark never
  // reads a failed call's buffer (a row that fails is reported and its buffer refilled), as an
  // MPI program under MPI_ERRORS_ARE_FATAL, where the preload keeps no copy either.
  bool keep_buffers = false;
};

// One rank's data path. Every call is made on every rank in the same order.
class Backend {
 public:
  virtual ~Backend() = default;
  // Names the transport in the header line and the JSON ("MPI", "NCCL over loopback sockets, ...").
  virtual std::string transport() const = 0;
  // The cost model auto decides with when none is given (its engine's, Engine::auto_cost_model):
  // for the K column of auto's StragglAR candidate. GPU backends: the GPU default.
  virtual CostModel auto_cost_model() const { return detail::env().cost; }
  // Two buffers of `bytes` each: `work`, on which every allreduce runs in place, and `input`,
  // which resets it before each iteration.
  virtual void allocate(std::size_t bytes) = 0;
  virtual void upload_input(const void* host, std::size_t bytes) = 0;
  virtual void upload_work(const void* host, std::size_t bytes) = 0;
  virtual void download_work(void* host, std::size_t bytes) = 0;  // after the work enqueued so far
  // work ← input, ordered before the next allreduce (not timed).
  virtual void reset(std::size_t bytes) = 0;
  // The library's allreduce of work[0, count) in place (the core's PhaseSelection: the ideal case).
  virtual void allreduce(std::size_t count, DataType t, ReduceOp op, const Options& o, PhaseSelection phases) = 0;
  // Waits until the work enqueued so far is done (host backends: nothing to wait for).
  virtual void drain() = 0;
  // One timed iteration on this rank's own clock: mark_start right after the common start,
  // sleep (the delayed rank only), mark_entry, allreduce, mark_exit.
  virtual void mark_start() = 0;
  virtual void sleep(double ms) = 0;
  virtual void mark_entry() = 0;
  virtual void mark_exit() = 0;
  struct Times {
    double exit_s = 0;   // mark_exit − mark_start
    double entry_s = 0;  // mark_entry − mark_start
    // mark_start on the host's monotonic clock (steady_clock), which every process of a host
    // reads alike; -1: this backend's marks are not on it (CUDA events).
    double start_s = -1;
  };
  virtual Times read_times() = 0;  // waits for mark_exit
  // What the most recent allreduce ran (auto: the policy's choice).
  virtual detail::Choice last_choice() = 0;
  // --keep-buffers (RunnerFlags::keep_buffers): whether the library keeps a copy of an in-place
  // buffer for the benchmark to see after an error. GPU backends: nothing is kept anyway (NCCL).
  virtual void keep_buffers(bool /*keep*/) {}
  // Calibration, one measurement each, in seconds on this rank: exchange `bytes` both ways at
  // once with `peer` (send from input, receive into work; peer outside [0, n): stay idle), and
  // one reduction work[i] = work[i] op input[i] for i < count by the runtime's own reducer.
  virtual double time_exchange(std::size_t bytes, int peer) = 0;
  virtual double time_reduce(std::size_t count, DataType t, ReduceOp op) = 0;
};

// The host half of a CPU backend (MPI, UCX): both buffers in host memory, a host sleep,
// the host's monotonic clock (steady_clock: one for every process of a host, where MPI_Wtime
// may count from a per-process origin), the runtime's CPU reducer for the calibration. A CPU backend adds its
// data path: transport(), allreduce(), last_choice() and time_exchange() (send from input(),
// receive into work()).
class HostBackend : public Backend {
 public:
  CostModel auto_cost_model() const override { return detail::host_engine_auto_cost_model(); }
  void allocate(std::size_t bytes) override;
  void upload_input(const void* host, std::size_t bytes) override;
  void upload_work(const void* host, std::size_t bytes) override;
  void download_work(void* host, std::size_t bytes) override;
  void reset(std::size_t bytes) override;
  void drain() override {}
  void mark_start() override;
  void sleep(double ms) override;
  void mark_entry() override;
  void mark_exit() override;
  Times read_times() override { return {exit_, entry_, start_}; }
  double time_reduce(std::size_t count, DataType t, ReduceOp op) override;

 protected:
  char* work() noexcept { return work_.data(); }
  char* input() noexcept { return input_.data(); }

 private:
  std::vector<char> work_, input_;
  double start_ = 0, entry_ = 0, exit_ = 0;
};

// The MPI library's name and version, for transport(): "Open MPI v4.1.4".
std::string mpi_library();

// What differs between the tools' help and messages.
struct Tool {
  const char* name;         // "stragglar-bench"
  const char* description;  // CLI11's first line
  const char* delay_how;    // how the delayed rank waits: "host sleep", "GPU sleep kernel on its stream"
  const char* calibrate_how;
};

// Parses argv on every rank (rank 0 prints --help and parse errors). Returns the exit status
// when the process should end now (--help, a flag CLI11 rejects), nullopt to go on.
std::optional<int> parse_flags(int argc, char** argv, const Tool& tool, RunnerFlags& flags);

// The whole benchmark on MPI_COMM_WORLD. Returns the exit status: 0, or 1 when a row has
// #wrong > 0 or an error. Throws stragglar::Error for flag values it rejects (on every rank:
// every rank sees the same flags).
int run(const Tool& tool, const RunnerFlags& flags, Backend& backend);

// The whole main() of a tool whose backend needs nothing but MPI to be made (stragglar-bench,
// stragglar-ucx-bench): MPI_Init, parse_flags, make_backend and run (an exception: rank 0 prints
// it, exit status 2), the backend destroyed, MPI_Finalize.
int main_with(int argc, char** argv, const Tool& tool, const std::function<std::unique_ptr<Backend>()>& make_backend);

}  // namespace stragglar::bench
