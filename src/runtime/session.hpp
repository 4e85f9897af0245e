// The runtime core (docs/runtime.md): everything an allreduce front-end would otherwise repeat,
// once. A front-end (MPI, NCCL, the PyTorch backend) supplies an Engine (engine.hpp) — its
// Transport, its Device, a small agreement collective, its native AllReduce and auto's timer —
// and calls Session::allreduce. The Session owns:
//
//   validate → resolve (algorithm, straggler, K) → plan cache (synthesize → verify → compile)
//   → scratch → agree across ranks (first call of each configuration: config_signature.hpp)
//   → Executor, the native fallback, the one-rank case, auto (auto_runner.hpp, its calls
//   auto_call.hpp), the "broken" state after a failure, and the one timeout every wait
//   honours (set_timeout).
//
// Rules it makes hold for every front-end:
// - An argument that is invalid on any rank gives an error on every rank (the first call of a
//   configuration always runs the agreement, carrying "my arguments/setup are valid"), and the
//   buffers stay untouched. Later calls of a known configuration only check the pointers.
// - A configuration seen before makes no heap allocation: a hash lookup, pointer checks that
//   build no strings unless they fail, then the executor.
// - After a timeout or an engine failure the session is broken: nothing it started may touch
//   memory it does not own (engines keep pending buffers alive), and every later call fails at
//   once with the first error, until the front-end's communicator is freed. A bad pointer on a
//   known configuration (checked without agreement) breaks the session too: the peers cannot be
//   told, so this rank must never again match their messages with its next call.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtime/auto_call.hpp"
#include "runtime/arrival_tickets.hpp"
#include "runtime/auto_runner.hpp"
#include "runtime/config_signature.hpp"
#include "runtime/call_trace.hpp"
#include "runtime/engine.hpp"
#include "runtime/env.hpp"
#include "runtime/executor.hpp"
#include "runtime/shared_block.hpp"
#include "runtime/first_call_trace.hpp"
#include "runtime/straggler_policy.hpp"
#include "stragglar/error.hpp"
#include "stragglar/options.hpp"
#include "stragglar/plan.hpp"
#include "stragglar/types.hpp"

namespace stragglar::detail {

class Session {
 public:
  // `api` names the front-end's call in messages ("stragglar::allreduce", "stragglarNcclAllReduce");
  // `after_failure` tells its user what to do with a broken session, in its own terms.
  // `config`: STRAGGLAR_* as read from the environment unless given (tests); it must outlive the
  // session.
  Session(Engine& engine, const char* api, const char* after_failure = "free it and create a new one",
          const RuntimeConfig* config = nullptr);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  int rank() const noexcept { return rank_; }
  int nranks() const noexcept { return nranks_; }

  // AllReduce of recvbuf[0, count) (sendbuf == recvbuf: in place). `phases` is for benchmarks
  // (the ideal case): no_wait_only then waiting_only continues on recvbuf.
  void allreduce(const void* sendbuf, void* recvbuf, std::size_t count, DataType dtype, ReduceOp op,
                 const Options& opts, PhaseSelection phases = PhaseSelection::all);

  // Seconds every wait of this communicator may take (default STRAGGLAR_TIMEOUT_S; the PyTorch
  // backend sets its process group's timeout): the only timeout a front-end sets. The session
  // gives it to the engine's transport (the executor's rounds) and to every other wait it asks
  // of the engine (the agreement, auto's native and exchange).
  void set_timeout(double timeout_s);
  // Whether the caller can see its buffer after a call raises (default true). False where the
  // error ends the process anyway (the MPI preload under MPI_ERRORS_ARE_FATAL): then no copy of
  // the buffer is kept for it (keeps_buffers; docs/reliability.md class 6).
  void set_caller_sees_buffers_after_errors(bool sees) noexcept { caller_sees_buffers_ = sees; }
  double timeout_s() const noexcept { return timeout_s_; }

  // Broken: every later call throws `error` (with a note) at once.
  bool broken() const noexcept { return broken_.has_value(); }
  void mark_broken(const Error& error);

  // What the most recent call ran (auto: the policy's choice for that call).
  const Choice& last_choice() const noexcept { return last_choice_; }
  // The most recently used auto configuration's state (active = false before any auto call).
  StragglerReport auto_report() const;
  // Ranks per host when the communicator spans 2+ host-major hosts of equal size, else 0; known
  // from the first call on (hosts.hpp).
  int ranks_per_host() const noexcept { return ranks_per_host_; }

 private:
  // Everything that tells configurations apart; every rank must call with the same key.
  struct Key {
    int algorithm, straggler, pipeline;  // as requested (straggler -1 resolved to n-1)
    std::size_t count;
    int dtype, op, phases;
    std::uint64_t stragglers = 0;  // late_set_fingerprint(Options::stragglers)
    bool operator==(const Key&) const = default;
  };
  struct KeyHash {
    std::size_t operator()(const Key& k) const noexcept;
  };
  struct Config {
    std::shared_ptr<const Plan> plan;  // null: native, auto, one rank, or count == 0
    Algorithm algorithm = Algorithm::stragglar;
    int straggler = -1;                // resolved, for last_choice(); -1 when unused
    std::vector<int> stragglers;       // Options::stragglers sorted, to check a fingerprint hit
    int tag = 1;
    std::shared_ptr<AutoRunner> automatic;  // algorithm = auto on more than one rank (auto_runner.hpp)
    // algorithm = auto on a message too small for any schedule to win (docs/auto.md "Small
    // messages"): the engine's bounded native at once, no policy, measurement or exchange.
    bool auto_native = false;
  };

  // ---- a configuration's first call, in steps (each timed under STRAGGLAR_DEBUG=TRACE) ----
  // Everything is checked and built locally, errors included are carried into one agreement,
  // so every rank fails together or goes on together.
  const Config& first_call(const Key& key, const void* sendbuf, void* recvbuf, std::size_t count,
                           DataType dtype, ReduceOp op, const Options& opts, PhaseSelection phases,
                           FirstCallTrace& trace);
  // The steps a rank can fail alone (validation, late set, plan, auto's set-up, the kept copy),
  // filling `cfg` and the signature's resolved K and cost; returns the error instead of raising.
  std::optional<Error> prepare(const Key& key, const void* sendbuf, void* recvbuf, std::size_t count,
                               DataType dtype, ReduceOp op, const Options& opts, PhaseSelection phases, Config& cfg,
                               ConfigSignature& signature, FirstCallTrace& trace);
  // The algorithm and straggler the configuration runs with, and its late set (Options::stragglers
  // of 2+ ranks; empty otherwise).
  std::vector<int> resolve_late_set(const Key& key, const Options& opts, Config& cfg) const;
  // A schedule's plan from the plan cache, and scratch for it.
  void build_plan(const Options& opts, const std::vector<int>& late, int resolved_k, std::size_t count,
                  DataType dtype, Config& cfg);
  // algorithm = auto: the small-message native, or an AutoRunner with every plan it may run, the
  // engine's native memory and the warm-up memory. Returns its cost model's fingerprint.
  std::int64_t set_up_auto(const Options& opts, bool in_place_whole, std::size_t count, DataType dtype,
                           ReduceOp op, Config& cfg, FirstCallTrace& trace);
  // Whether auto's warm-ups need memory of their own (AutoCall::warm_up_native): an auto
  // configuration that may run native, first called in place without the session's kept copy.
  bool warm_up_wanted(const Config& cfg, bool in_place_whole) const;
  // Forgets the kept copy without freeing it (a native that timed out may still write it).
  void abandon_kept() noexcept;
  // The copy calls in place keep (run), made with the configuration, outside the timed calls.
  void make_kept_copy(const Config& cfg, bool in_place_whole, std::size_t count, DataType dtype);
  // The agreement: every rank's signature, the lowest failing rank, the next tag, the warm-up
  // memory. Raises for this rank's error, a peer's, or a mismatch (every rank alike).
  AgreedSignature agree_signature(const ConfigSignature& signature, const std::optional<Error>& local,
                                  bool warm_up_memory);
  // The agreed tag, unused on every rank (the transport's limit checked).
  int take_tag(std::int64_t tag);
  void log_new_configuration(const Config& cfg, const Options& opts, std::size_t count, DataType dtype,
                             ReduceOp op, std::int64_t resolved_k) const;
  // ---- every call ------------------------------------------------------------------------
  // A known configuration: its late set compared (a fingerprint is not the set) and the
  // pointers checked, without agreement.
  void check_known_call(const Config& cfg, const Options& opts, const void* sendbuf, const void* recvbuf,
                        std::size_t count, DataType dtype);
  // Runs the configuration on this call's buffers (auto: its choice). `trace`: the first call's.
  void call(const Config& cfg, const void* sendbuf, void* recvbuf, std::size_t count, DataType dtype, ReduceOp op,
            PhaseSelection phases, FirstCallTrace* trace);
  void validate(const void* sendbuf, const void* recvbuf, std::size_t count, DataType dtype, ReduceOp op,
                const Options& opts, PhaseSelection phases) const;
  void check_buffers(const void* sendbuf, const void* recvbuf, std::size_t count, DataType dtype) const;
  void ensure_scratch(std::size_t bytes);
  void ensure_kept(std::size_t bytes);
  // An auto configuration called in place: the memory a kept buffer needs whatever auto runs —
  // the session's copy (schedules) and the engine's staging (its native, where it stages) —
  // so that the choice made in a later call allocates nothing.
  void prepare_auto_in_place(const AutoRunner& automatic, std::size_t bytes);
  // Whether a call in place must leave the caller's buffer as it was if it raises
  // (STRAGGLAR_KEEP_BUFFERS, set_caller_sees_buffers_after_errors, an engine that can).
  bool keeps_buffers() const;
  // Whether the session itself copies it for such a call (Engine::buffers_on_error: a native
  // that stages is told instead, native_allreduce's keep_buffer).
  bool session_keeps_copy(bool native) const;
  // Every rank's host and clock, exchanged at the session's first call (hosts.hpp): ranks_per_host_,
  // shared_clock_.
  void discover_hosts();
  void agree_or_break(std::span<std::int64_t> values, const char* what);
  [[noreturn]] void throw_broken() const;
  // auto's plans and its calls, for the AutoRunner (AutoHost): the session's side of auto.
  friend class AutoCall;
  // `bounded`: native must honour the timeout (auto's calls).
  void run(Algorithm algorithm, const Plan* plan, int tag, const void* sendbuf, void* recvbuf, std::size_t count,
           DataType dtype, ReduceOp op, PhaseSelection phases, bool bounded = false);

  Engine& engine_;
  const char* api_;
  const char* after_failure_;
  const RuntimeConfig& config_;  // STRAGGLAR_*, read once (env.hpp)
  int rank_ = 0;
  int nranks_ = 1;
  Executor executor_;
  std::unordered_map<Key, Config, KeyHash> configs_;
  int next_tag_ = 1;
  double timeout_s_;
  bool hosts_known_ = false;
  int ranks_per_host_ = 0;  // host_major_ranks_per_host of this communicator; 0: one host or no layout
  bool shared_clock_ = false;
  bool one_host_ = false;       // every rank on one host (equal host ids)
  // Arrival tickets (docs/arrival-tickets.md), set up at the first auto configuration's first
  // call when STRAGGLAR_ARRIVAL_TICKETS allows and every rank shares one host and clock.
  void set_up_arrival_tickets();
  bool tickets_tried_ = false;
  std::unique_ptr<SharedBlock> arrival_block_;
  std::optional<ArrivalTickets> tickets_;  // every rank reads one monotonic clock (Engine::clock_id)
  void* scratch_ = nullptr;
  std::size_t scratch_size_ = 0;
  // The copy of the caller's recvbuf a call puts back if it raises (keeps_buffers).
  void* kept_ = nullptr;
  std::size_t kept_size_ = 0;
  bool caller_sees_buffers_ = true;
  std::optional<Error> broken_;
  Choice last_choice_;
  std::shared_ptr<AutoRunner> last_auto_;
  // auto's warm-up memory (warm_up_wanted) between a configuration's creation and the end of its
  // first call.
  WarmUpMemory warm_up_;
  // During a configuration's first call: whether every rank can warm native up (agreed).
  bool warm_ups_agreed_ = false;
  std::unique_ptr<CallTrace> trace_;  // STRAGGLAR_TRACE: every call recorded (call_trace.hpp); null: off
};

}  // namespace stragglar::detail
