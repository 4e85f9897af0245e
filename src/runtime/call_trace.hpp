// A trace of every call of one communicator (STRAGGLAR_TRACE, set_trace_path; docs/trace.md).
//
// The Session holds one CallTrace when tracing is on and brackets each allreduce with a
// CallTrace::Call: two reads of the steady clock and one fixed-size record written into a
// preallocated buffer — no allocation, no lock and no I/O on the call's path. A full buffer is
// swapped for a spare one and written by a writer thread of the trace (started at the first
// full buffer: a job of fewer calls never has one), off the calls' path; a call waits only when
// the writer is still on the previous buffer. What is left is written when the session ends and
// at process exit (every trace still open).
//
// Each rank of each communicator writes its own two files (no communication at the end, so a
// rank that dies or a communicator freed on some ranks only still leaves the others' files):
//   PREFIX.c<C>.r<R>.jsonl  compact JSON lines: a header (rank, clock and host ids, the cost
//                           model), one line per configuration (with auto's model of it), one per call
//   PREFIX.c<C>.r<R>.json   the same calls as Chrome trace events (Perfetto, chrome://tracing):
//                           this rank as a process, each call a slice
// C numbers the process's communicators of the same rank and size in creation order (the same
// on every rank when they create them in the same order, as MPI's collective creation does).
// Entry and exit times are on the host's steady clock, so ranks with equal clock ids (one host)
// can be merged exactly; python -m stragglar.report merges the files, finds each call's late
// rank and writes one Chrome trace with lateness counters.
#pragma once
#include <cstddef>
#include <cstdint>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "runtime/straggler_policy.hpp"
#include "stragglar/options.hpp"
#include "stragglar/types.hpp"

namespace stragglar::detail {

class AutoRunner;
class Engine;

// Why a call ran what it ran.
enum class TraceReason : std::uint8_t {
  requested,     // the caller's algorithm (not auto)
  auto_small,    // auto on a message too small for any schedule to win: native, no policy
  auto_first,    // auto's first call of the configuration (native measured, or the model's pick)
  auto_decided,  // auto's decided choice (its incumbent)
  auto_explore,  // auto measuring another candidate (not its incumbent)
  failed,        // the call raised
  empty,         // count 0: nothing ran
};
const char* to_string(TraceReason r) noexcept;

// One call, fixed size.
struct CallRecord {
  static constexpr int kMaxLate = 8;  // a late set's first ranks kept (late_count says how many it had)
  std::int64_t call = 0;              // this communicator's call index, from 0
  std::int64_t entry_ns = 0, exit_ns = 0;  // steady clock
  std::int64_t auto_decisions = 0;    // auto: exchanges decided so far
  double auto_delay_s = 0;            // auto: its late rank's median delay over its last window
  std::int32_t config = -1;           // index into the trace's configurations
  std::int16_t algorithm = -1;        // what ran
  std::int16_t straggler = -1;        // the rank it was told is late, -1: none
  std::int16_t auto_late_rank = -1;   // auto: the rank it found late in most calls of its last window
  std::int16_t late[kMaxLate] = {};   // stragglar-k / hierarchical: the late set told
  std::uint8_t late_count = 0;
  TraceReason reason = TraceReason::requested;
  bool shared_clock = false;          // the session found every rank on one clock (Engine::clock_id)
};

class CallTrace {
 public:
  static constexpr std::size_t kCapacity = std::size_t{1} << 15;  // records held before a write

  // The trace of a new session, or null when tracing is off (STRAGGLAR_TRACE unset and no
  // set_trace_path). A path that cannot be written prints one error naming it (once per process)
  // and returns null: the job runs untraced.
  static std::unique_ptr<CallTrace> open(const Engine& engine, const char* api, int rank, int nranks);
  ~CallTrace();  // writes what is left and closes the files
  CallTrace(const CallTrace&) = delete;
  CallTrace& operator=(const CallTrace&) = delete;

  // One call, from construction (its entry) to done() or destruction (a call that raised).
  class Call {
   public:
    Call(CallTrace* trace, std::size_t count, DataType dtype, ReduceOp op, const Options& o) noexcept;
    ~Call();
    Call(const Call&) = delete;
    Call& operator=(const Call&) = delete;
    // What ran: the choice, and the configuration's auto runner (null: not auto) or its
    // small-message native. `engine` and `ranks_per_host` give auto's cost model for a
    // configuration's first call (its model, computed once).
    void done(const Choice& ran, const AutoRunner* automatic, bool auto_native, bool shared_clock,
              const Engine& engine, int ranks_per_host) noexcept;

   private:
    CallTrace* trace_;
    std::size_t count_;
    DataType dtype_;
    ReduceOp op_;
    const Options& options_;
    std::int64_t entry_ns_ = 0;
    bool done_ = false;
  };

  // Writes what is left and closes the files (at the end, at exit); later calls are not recorded.
  void close() noexcept;

 private:
  struct Config {
    std::size_t count;
    int dtype, op, algorithm, straggler, pipeline;
    // auto's model of this configuration (auto_runner.cpp's PredictionCache, the same formula):
    // StragglAR's exposed time with nobody late and with the straggler late for ever, and the
    // best bulk-synchronous schedule's (what native is modelled as); NaN where not simulated.
    double stragglar_at_zero, stragglar_at_infinity, bulk;
    CostModel cost;
  };
  CallTrace(std::FILE* jsonl, std::FILE* chrome, const Engine& engine, const char* api,
            int rank, int nranks, int comm);
  std::int32_t config_of(std::size_t count, DataType dtype, ReduceOp op, const Options& o, const Engine& engine,
                         int ranks_per_host) noexcept;
  void record(const CallRecord& r) noexcept;
  void hand_to_writer() noexcept;  // the full buffer to the writer thread, the spare one in its place
  void writer_loop() noexcept;
  // Writes the header (once), the configurations not written yet and `n` records. Called by one
  // thread at a time: the writer, or close() after it stopped.
  void write(const CallRecord* records, std::size_t n) noexcept;

  std::FILE* jsonl_;
  std::FILE* chrome_;
  const char* api_;
  int rank_, nranks_, comm_;
  std::int64_t host_id_, clock_id_;
  std::unique_ptr<CallRecord[]> buffers_[2];
  CallRecord* records_;          // the buffer calls record into
  std::size_t used_ = 0;
  std::int64_t calls_ = 0;
  std::vector<Config> configs_;  // grows at a configuration's first call only (under mutex_)
  std::size_t configs_written_ = 0;
  bool header_written_ = false;
  bool shared_clock_ = false;
  // The writer: pending_ is the full buffer it writes (null: idle).
  std::mutex mutex_;
  std::condition_variable wake_;
  const CallRecord* pending_ = nullptr;
  std::size_t pending_used_ = 0;
  bool stop_ = false;
  std::atomic<bool> closed_{false};  // read by every call: an atomic, as close() may run at exit
  std::thread writer_;
};

// The process's trace path as set_trace_path left it, else STRAGGLAR_TRACE ("" when neither).
std::string trace_path();

}  // namespace stragglar::detail
