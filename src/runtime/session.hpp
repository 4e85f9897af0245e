// The runtime core (DESIGN.md "Runtime core and front-ends"; docs/runtime.md): everything an
// allreduce front-end would otherwise repeat, once. A front-end (MPI, NCCL, the PyTorch backend)
// supplies an Engine — its Transport, its Device, a small agreement collective and its native
// AllReduce — and calls Session::allreduce. The Session owns:
//
//   validate → resolve (algorithm, straggler, K) → agree across ranks (first call of each
//   configuration) → plan cache (synthesize → verify → compile) → scratch → Executor,
//   the native fallback, the one-rank case, and the "broken" state after a failure.
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

#include "runtime/auto_cost_model.hpp"
#include "runtime/hosts.hpp"
#include "runtime/auto_runner.hpp"
#include "runtime/device.hpp"
#include "runtime/executor.hpp"
#include "runtime/straggler_policy.hpp"
#include "runtime/transport.hpp"
#include "stragglar/error.hpp"
#include "stragglar/options.hpp"
#include "stragglar/plan.hpp"
#include "stragglar/types.hpp"

namespace stragglar::detail {

// What a front-end supplies.
class Engine {
 public:
  virtual ~Engine() = default;
  virtual Transport& transport() = 0;
  virtual Device& device() = 0;
  // Element-wise maximum of `values` over all ranks, in place, within `timeout_s`. On a
  // timeout it throws Error(Timeout) and must leave nothing pending that writes to `values`
  // (stage through engine-owned memory and keep it alive); Error(SystemError) for an engine
  // failure. Used once per new configuration (and by the straggler policy's exchange).
  virtual void agree_max(std::span<std::int64_t> values, double timeout_s) = 0;
  // The engine's own AllReduce of count elements (sendbuf == recvbuf: in place).
  virtual void native_allreduce(const void* sendbuf, void* recvbuf, std::size_t count, DataType t,
                                ReduceOp op) = 0;
  // The same AllReduce when auto runs it: auto is the default, and the default must keep the
  // timeout promise whatever it picks. An engine whose native can block forever (MPI_Allreduce)
  // overrides this with a bounded form that, like agree_max, leaves nothing pending that writes
  // the caller's memory; the default is for natives that are bounded already (NCCL polled by the
  // front-end, Gloo with its own timeout). `tag` is the configuration's, for an engine that moves
  // the data through its transport.
  virtual void native_allreduce_bounded(const void* sendbuf, void* recvbuf, std::size_t count, DataType t,
                                        ReduceOp op, double /*timeout_s*/, int /*tag*/) {
    native_allreduce(sendbuf, recvbuf, count, t, op);
  }
  // Called when an auto configuration that may run native is created, with its size in bytes:
  // whatever native_allreduce_bounded needs is sized now, so later calls allocate nothing.
  virtual void reserve_native(std::size_t /*bytes*/) {}
  // Why these buffers cannot be used by this engine, beyond the core's own checks (NULL,
  // partial overlap), or nullptr; e.g. MPI's MPI_IN_PLACE passed as recvbuf. Builds no string.
  virtual const char* buffer_problem(const void* /*sendbuf*/, const void* /*recvbuf*/) const { return nullptr; }
  // Largest message tag the transport carries; each configuration gets its own tag in
  // [1, max_tag()] (engines without tags ignore them).
  virtual int max_tag() const { return 0x7fffffff; }
  // After a failure: may work the engine started still write into memory the session gave it
  // (scratch)? Then a broken session leaks that memory instead of freeing it under the writer.
  virtual bool writes_may_be_pending() const { return false; }

  // ---- algorithm = auto (straggler_policy.hpp, docs/auto.md) ---------------------------------
  // The policy needs every call's time inside its data phase on this rank, and one small
  // exchange every P calls. Host engines (the defaults): the host clock around the call and
  // agree_max right away. A GPU engine times its stream with events and runs the exchange
  // stream-ordered; it then delivers both measurement_lag() calls later, the same lag on every
  // rank, so that the host never waits for the GPU (docs/auto.md "Lags").
  virtual int measurement_lag() const { return 0; }
  virtual void time_begin();
  virtual void time_end();
  virtual double take_time();  // the oldest timed call not yet taken, in seconds
  virtual void exchange_begin(std::span<std::int64_t> values, double timeout_s);
  virtual void exchange_end(std::span<std::int64_t> values, double timeout_s);
  // Called when an auto configuration is created: size every buffer the exchange will use, so
  // that later calls allocate nothing.
  virtual void reserve_exchange(std::size_t values) { exchanged_.reserve(values); }
  // The cost model auto decides with when the user gave none (Options::cost, STRAGGLAR_*): its
  // small-message gate, exchange cadence and predictions (auto_cost_model.hpp). The default,
  // env().cost, is the GPU model; host engines return host_engine_auto_cost_model(). The same
  // on every rank (every rank has the same engine); agreed with each auto configuration.
  virtual CostModel auto_cost_model() const { return env().cost; }
  // Where this rank runs, for the hosts of the communicator (hosts.hpp): equal on the ranks of
  // one host. The default is the host name's hash; test engines give threads hosts of their own.
  virtual std::int64_t host_id() const { return this_host_id(); }

 private:
  // The defaults' state: host times of calls not taken yet, and the exchange's result.
  std::int64_t host_start_ns_ = 0;
  std::int64_t host_times_ns_[8] = {};
  int host_times_ = 0;
  std::vector<std::int64_t> exchanged_;
};


class Session {
 public:
  // `api` names the front-end's call in messages ("stragglar::allreduce", "stragglarNcclAllReduce");
  // `after_failure` tells its user what to do with a broken session, in its own terms.
  Session(Engine& engine, const char* api, const char* after_failure = "free it and create a new one");
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  int rank() const noexcept { return rank_; }
  int nranks() const noexcept { return nranks_; }

  // AllReduce of recvbuf[0, count) (sendbuf == recvbuf: in place). `phases` is for benchmarks
  // (the ideal case): no_wait_only then waiting_only continues on recvbuf.
  void allreduce(const void* sendbuf, void* recvbuf, std::size_t count, DataType dtype, ReduceOp op,
                 const Options& opts, PhaseSelection phases = PhaseSelection::all);

  // Seconds the agreement and auto's exchange may wait (default STRAGGLAR_TIMEOUT_S; the PyTorch
  // backend sets its process group's timeout).
  void set_timeout(double timeout_s);
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
    std::uint64_t stragglers = 0;  // late_set_fingerprint(Options::stragglers), issue #23
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

  const Config& first_call(const Key& key, const void* sendbuf, void* recvbuf, std::size_t count,
                           DataType dtype, ReduceOp op, const Options& opts, PhaseSelection phases);
  void validate(const void* sendbuf, const void* recvbuf, std::size_t count, DataType dtype, ReduceOp op,
                const Options& opts, PhaseSelection phases) const;
  void check_buffers(const void* sendbuf, const void* recvbuf, std::size_t count, DataType dtype) const;
  void ensure_scratch(std::size_t bytes);
  // Every rank's host, exchanged at the session's first call (hosts.hpp): ranks_per_host_.
  void discover_hosts();
  void agree_or_break(std::span<std::int64_t> values, const char* what);
  [[noreturn]] void throw_broken() const;
  // auto's plans and its calls, for the AutoRunner (AutoHost).
  class AutoCall;
  // `bounded`: native must honour the timeout (auto's calls).
  void run(Algorithm algorithm, const Plan* plan, int tag, const void* sendbuf, void* recvbuf, std::size_t count,
           DataType dtype, ReduceOp op, PhaseSelection phases, bool bounded = false);

  Engine& engine_;
  const char* api_;
  const char* after_failure_;
  int rank_ = 0;
  int nranks_ = 1;
  Executor executor_;
  std::unordered_map<Key, Config, KeyHash> configs_;
  int next_tag_ = 1;
  double timeout_s_;
  bool hosts_known_ = false;
  int ranks_per_host_ = 0;  // host_major_ranks_per_host of this communicator; 0: one host or no layout
  void* scratch_ = nullptr;
  std::size_t scratch_size_ = 0;
  std::optional<Error> broken_;
  Choice last_choice_;
  std::shared_ptr<AutoRunner> last_auto_;
};

}  // namespace stragglar::detail
