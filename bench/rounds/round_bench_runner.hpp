// The per-round benchmark's run, whatever the engine: every size (smallest first), rank count and
// algorithm; per point a warm-up on first use, timed calls decided by rank 0, the last call's
// result checked exactly, the samples gathered into a row. A backend supplies the communicators,
// buffers, the call and its clock: bench_nccl_rounds (NCCL, GPU) and bench_mpi_rounds (MPI, CPU,
// which also tests this run end to end without a GPU).
#pragma once
#include <mpi.h>

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "round_bench_options.hpp"
#include "stragglar/plan.hpp"
#include "stragglar/round_costs.hpp"

namespace stragglar::bench {

class RoundBackend {
 public:
  virtual ~RoundBackend() = default;
  // Collective over the job: a communicator of ranks 0..n-1 (`comm`: MPI_COMM_NULL on the others).
  virtual void add_group(int n, MPI_Comm comm) = 0;
  // Every rank, each size: the input is `value` in all bytes/4 floats.
  virtual void prepare(std::size_t bytes, float value) = 0;
  // A point on group n: what call() runs (`plan` null: the backend's native AllReduce).
  virtual void begin_point(int n, const Plan* plan, std::size_t count) = 0;
  virtual void reset() = 0;        // the working buffer = the input, done when it returns
  virtual void mark_start() = 0;   // just before the timed host part
  virtual void call() = 0;         // the timed host part (a GPU backend only enqueues)
  virtual double finish() = 0;     // waits for the call; the device's time since mark_start (s), < 0: none
  virtual void download(float* dst, std::size_t bytes) = 0;  // the working buffer
  virtual void end_point() = 0;
  virtual void close() = 0;        // the communicators and buffers, before MPI_Finalize
  virtual std::string transport() const = 0;
  virtual std::string device() const = 0;
  virtual std::string version() const = 0;  // e.g. the NCCL version
};

// The whole run; rank 0 gets the table (`on_row` called as each row is measured), the others an
// empty one. Throws on a backend error (the caller aborts the job).
RoundCostTable run_round_bench(const RoundBenchOptions& o, RoundBackend& backend, const std::string& tool,
                               const std::function<void(const RoundCostRow&)>& on_row);

// Rank 0 after the run: the table printed, the JSON written (--json). The exit code: 0, or 1 for
// wrong results or a JSON that could not be written.
int report_round_bench(const RoundBenchOptions& o, const RoundCostTable& t, double seconds);

// One progress line per row.
void print_round_row(const RoundCostRow& r);

// A benchmark's main, after MPI_Init: the flags parsed (rank 0 prints help and errors). nullopt to
// go on; else the exit code, MPI already finalized.
std::optional<int> parse_round_bench_job(int argc, char** argv, const char* tool, const char* native_name,
                                         RoundBenchOptions& o);

// Then the run and its report with the backend `make_backend` gives: rank 0's exit code on every
// rank; an error on any rank names it and aborts the job.
int run_round_bench_job(const RoundBenchOptions& o, const char* tool,
                        const std::function<std::unique_ptr<RoundBackend>()>& make_backend);

}  // namespace stragglar::bench
