// algorithm = auto in the runtime core (docs/auto.md "In the runtime core"):
// one AutoRunner per auto configuration (count, dtype, op) drives the straggler policy — it times
// every call through its own CallTimer from the engine (call_timer.hpp), runs the exchange, feeds the
// decisions back — while the session keeps validation, agreement, plans, scratch and the data
// path. The model it gives the policy is the α-β-γ simulator on each choice's schedule
// (PredictionCache in auto_runner.cpp).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "runtime/arrival_choice.hpp"
#include "runtime/call_timer.hpp"
#include "runtime/env.hpp"
#include "runtime/straggler_policy.hpp"
#include "stragglar/options.hpp"
#include "stragglar/plan.hpp"
#include "stragglar/types.hpp"

namespace stragglar::detail {

class Engine;

// The options auto decides with: `o` with its cost model resolved — Options::cost, else the
// engine's default for auto (Engine::auto_cost_model: STRAGGLAR_* if set, else the GPU model, or
// the host model on host engines; docs/auto.md "The cost model per engine"), given the
// communicator's hosts when it spans several (`ranks_per_host`, hosts.hpp; one link class).
Options with_auto_cost(const Options& o, const Engine& engine, int ranks_per_host = 0);

// Small messages (docs/auto.md "Small messages"): true when the model (o.cost, resolved by
// with_auto_cost) says no schedule can win at any delay, so auto runs the engine's bounded
// native with no policy, measurement or exchange.
bool auto_runs_native(const Options& o, int nranks, std::size_t bytes);

// What the session does for the runner.
class AutoHost {
 public:
  virtual ~AutoHost() = default;
  // The plan of choice c for `count` elements of `dtype` with the configuration's options (its
  // scratch sized now); null for native.
  virtual std::shared_ptr<const Plan> plan(const Choice& c, const Options& base, std::size_t count, DataType dtype) = 0;
  // One call of c with that plan on the current call's buffers (native: the bounded form).
  virtual void run(const Choice& c, const Plan* plan) = 0;
  // Runs the engine's native `runs` times on memory of its own (a copy of this call's input),
  // not on the caller's buffers and not timed: what native pays on its first runs (NCCL's
  // connections) is paid here (Engine::native_warm_ups).
  virtual void warm_up_native(int runs) = 0;
};

class AutoRunner {
 public:
  // `config`: STRAGGLAR_* (the exchange period, what to print), the session's, alive as long as
  // the runner. `o`: the configuration's options with auto's cost model (with_auto_cost). `shared_clock`:
  // every rank reads one monotonic clock (Engine::clock_id), so where the engine's timer reads it
  // too, the policy gets each call's exact exposed time (PolicyConfig::shared_clock).
  // Builds every plan auto may run now (through host.plan), sizes the timer's exchange and the
  // engine's native buffers: later calls allocate nothing.
  AutoRunner(Engine& engine, const RuntimeConfig& config, const char* api, int rank, int nranks, std::size_t count,
             DataType dtype, const Options& o, AutoHost& host, bool shared_clock = false);
  // One call: the policy's choice, run through host.run, timed, exchanged and decided when due
  // (an exchange the timer ends at the next call: decided at the start of this configuration's
  // next call, before it picks). Returns what ran. Every rank makes the same calls at the same
  // call index. With `tickets` (every rank of the communicator shares one host: arrival
  // tickets, docs/arrival-tickets.md), each call after the configuration's first takes one: a
  // call whose late ranks the tickets name runs StragglAR told them (ArrivalChoice), without the
  // policy; a call every rank reached in time runs the policy's choice. Every rank passes tickets
  // or none.
  Choice call(AutoHost& host, double timeout_s, ArrivalTickets* tickets = nullptr);
  // Arrival tickets' part (null without tickets; made at the configuration's first call).
  const ArrivalChoice* arrivals() const noexcept { return arrivals_ ? &*arrivals_ : nullptr; }
  const StragglerPolicy& policy() const noexcept { return policy_; }
  // Whether the engine's native is one of the candidates (what to reserve for it).
  bool may_run_native() const noexcept { return may_run_native_; }
  StragglerReport report(int nranks) const;

 private:
  const Plan* plan_for(AutoHost& host, const Choice& c);
  void finish_exchange(AutoHost& host, double timeout_s);
  bool hierarchical_fits(std::span<const int> set) const;

  // This configuration's own (Engine::make_timer): its lagged times and exchanges are its alone.
  std::unique_ptr<CallTimer> timer_;
  const RuntimeConfig& config_;
  const char* api_;
  int rank_, nranks_;
  Options options_;  // pipeline and cost for the candidates' schedules
  std::size_t count_;
  DataType dtype_;
  StragglerPolicy policy_;
  std::vector<std::int64_t> exchange_;  // nranks × slots: the policy's window, every rank's after the max
  struct Sub {
    Choice choice;
    std::shared_ptr<const Plan> plan;  // null for native
  };
  std::vector<Sub> subs_;  // the choices run so far, each with its plan
  bool may_run_native_ = false;
  int native_warm_ups_;    // Engine::native_warm_ups
  int untaken_ = 0;        // calls timed whose time is not recorded yet (GPU: the lag)
  bool in_flight_ = false; // an exchange begun and not yet decided
  int in_flight_age_ = 0;  // calls since it began
  std::optional<ArrivalChoice> arrivals_;  // made at the configuration's first call, with tickets
};

}  // namespace stragglar::detail
