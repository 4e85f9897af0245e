// The runtime core: one path for every front-end (see session.hpp).
#include "runtime/session.hpp"

#include <algorithm>
#include <array>
#include <climits>
#include <cmath>
#include <cstring>
#include <limits>
#include <cstdio>
#include <functional>
#include <memory>
#include <new>
#include <string>

#include "plan/plan_cache.hpp"
#include "runtime/env.hpp"
#include "runtime/hosts.hpp"
#include "runtime/late_set.hpp"
#include "stragglar/simulate.hpp"
#include "stragglar/verify.hpp"

namespace stragglar::detail {
namespace {

// ---- the agreement signature ----------------------------------------------------------------
// One element-wise max over ranks of (v, -v) gives every rank the max and min of each field.
enum Field { kOk, kAlgorithm, kStraggler, kPipeline, kResolvedK, kCount, kDtype, kOp, kPhases, kCost, kStragglers, kFields };
constexpr std::array<const char*, kFields> kFieldNames = {
    "ok",    "algorithm", "straggler", "pipeline", "pipeline (resolved K)", "count", "dtype", "op",
    "phases", "cost model (auto decides from it: pass the same Options::cost / STRAGGLAR_* model)",
    "stragglers (a fingerprint of the set)"};
constexpr std::size_t kFailingRank = 2 * kFields;  // max of -rank: the lowest rank that failed
constexpr std::size_t kTag = kFailingRank + 1;     // max of every rank's next free tag
constexpr std::size_t kSignatureSize = kTag + 1;

// A signature value as the user wrote it ("ring", "float", "sum", "auto").
std::string field_value(int field, std::int64_t v) {
  const bool small = v >= 0 && v < 1000;
  if (field == kAlgorithm && small) {
    const char* name = to_string(static_cast<Algorithm>(v));
    if (name[0] != '?') return name;
  }
  if (field == kDtype && small && v <= static_cast<int>(DataType::int64)) return to_string(static_cast<DataType>(v));
  if (field == kOp && small && v <= static_cast<int>(ReduceOp::avg)) return to_string(static_cast<ReduceOp>(v));
  if (field == kPipeline && v == kPipelineAuto) return "auto";
  if (field == kPhases && small && v <= 2) return v == 0 ? "all" : v == 1 ? "no_wait_only" : "waiting_only";
  return std::to_string(v);
}

bool valid(DataType t) {
  switch (t) {
    case DataType::float32: case DataType::float64: case DataType::float16:
    case DataType::bfloat16: case DataType::int32: case DataType::int64: return true;
  }
  return false;
}
bool valid(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: case ReduceOp::prod: case ReduceOp::min: case ReduceOp::max:
    case ReduceOp::avg: return true;
  }
  return false;
}

// Why these buffers cannot be used, or nullptr. Builds no string: it runs on every call.
const char* buffer_problem(const void* sendbuf, const void* recvbuf, std::size_t bytes) {
  if (bytes == 0) return nullptr;
  if (recvbuf == nullptr) return "recvbuf is NULL, expected a buffer";
  if (sendbuf == nullptr) return "sendbuf is NULL, expected a buffer (or recvbuf for in place)";
  if (sendbuf == recvbuf) return nullptr;
  const auto s = reinterpret_cast<std::uintptr_t>(sendbuf);
  const auto r = reinterpret_cast<std::uintptr_t>(recvbuf);
  if (s + bytes <= r || r + bytes <= s) return nullptr;
  return "sendbuf and recvbuf overlap partially, expected the same pointer (in place) or disjoint buffers";
}

// The cost model's bits, folded: auto's predictions must be the same on every rank.
std::int64_t cost_fingerprint(const CostModel& c) {
  std::uint64_t h = 1469598103934665603ull;
  for (double d : {c.alpha_s, c.beta_s_per_byte, c.gamma_s_per_byte}) {
    std::uint64_t bits = 0;
    std::memcpy(&bits, &d, sizeof bits);
    h = (h ^ bits) * 1099511628211ull;
  }
  return static_cast<std::int64_t>(h >> 1);
}

// Scratch grows geometrically: a job whose sizes keep growing reallocates O(log) times, not at
// every new size (which fragments the heap).
std::size_t grown_size(std::size_t current, std::size_t need) {
  return std::max(need, current + current / 2);
}

}  // namespace

// ---- algorithm = auto: the session's side (auto_runner.hpp runs the policy) ----------------------
// One per call (and one at a configuration's creation, which only builds plans): the plans come
// from the plan cache with the session's scratch sized for them; a call runs on this call's
// buffers with the configuration's tag, native in its bounded form. Lives on the stack: no
// allocation per call.
class Session::AutoCall final : public AutoHost {
 public:
  AutoCall(Session& s, const void* sendbuf, void* recvbuf, std::size_t count, DataType dtype, ReduceOp op, int tag = 0)
      : s_(s), sendbuf_(sendbuf), recvbuf_(recvbuf), count_(count), dtype_(dtype), op_(op), tag_(tag) {}
  std::shared_ptr<const Plan> plan(const Choice& c, const Options& base, std::size_t count, DataType dtype) override {
    const AlgorithmInfo& info = algorithm_info(c.algorithm);
    if (info.kind != AlgorithmKind::schedule) return nullptr;
    Options x = base;
    x.algorithm = c.algorithm;
    x.straggler = c.straggler;
    x.stragglers.assign(c.late.begin(), c.late.end());  // stragglar-k / hierarchical: the learned set
    const std::size_t bytes = count * size_of(dtype);
    const ScheduleKey key{c.algorithm, s_.nranks_, info.uses_straggler && c.late.empty() ? c.straggler : -1,
                          resolve_pipeline(x, s_.nranks_, bytes), x.stragglers};
    std::shared_ptr<const Plan> plan = cached_plan(key, s_.rank_, env().verify);
    s_.ensure_scratch(Executor::scratch_bytes(*plan, count, dtype));
    return plan;
  }
  void run(const Choice& c, const Plan* plan) override {
    s_.run(c.algorithm, plan, tag_, sendbuf_, recvbuf_, count_, dtype_, op_, PhaseSelection::all, /*bounded=*/true);
  }
  void warm_up_native(int runs) override {
    if (s_.nranks_ < 2 || count_ == 0 || runs <= 0) return;
    const std::size_t bytes = count_ * size_of(dtype_);
    Device& device = s_.engine_.device();
    void* raw = nullptr;
    try {
      raw = device.allocate(bytes);
    } catch (const Error&) {
      return;  // no memory to spare (a GPU near full): native's first measurement is then cold
    }
    const std::unique_ptr<void, std::function<void(void*)>> memory(raw, [&device](void* p) { device.deallocate(p); });
    for (int i = 0; i < runs; ++i) {
      device.copy(memory.get(), sendbuf_, bytes);  // the caller's values: no overflow of its own
      s_.engine_.native_allreduce(memory.get(), memory.get(), count_, dtype_, op_,
                                  Engine::NativeBound{s_.timeout_s_, tag_}, /*keep_buffer=*/false);
    }
  }

 private:
  Session& s_;
  const void* sendbuf_;
  void* recvbuf_;
  std::size_t count_;
  DataType dtype_;
  ReduceOp op_;
  int tag_;
};

std::size_t Session::KeyHash::operator()(const Key& k) const noexcept {
  std::uint64_t h = 1469598103934665603ull;  // FNV-1a over the fields
  for (std::uint64_t v : {std::uint64_t(k.algorithm), std::uint64_t(k.straggler), std::uint64_t(k.pipeline),
                          std::uint64_t(k.count), std::uint64_t(k.dtype), std::uint64_t(k.op),
                          std::uint64_t(k.phases), k.stragglers}) {
    h ^= v;
    h *= 1099511628211ull;
  }
  return static_cast<std::size_t>(h);
}

Session::Session(Engine& engine, const char* api, const char* after_failure)
    : engine_(engine), api_(api), after_failure_(after_failure), rank_(engine.transport().rank()), nranks_(engine.transport().nranks()),
      executor_(engine.transport(), engine.device()), timeout_s_(env().timeout_s) {
  configs_.reserve(16);
  engine_.transport().set_timeout(timeout_s_);  // the session's timeout from the first call on
  trace_ = CallTrace::open(engine_, api_, rank_, nranks_);
}

void Session::set_timeout(double timeout_s) {
  if (!(timeout_s > 0) || !std::isfinite(timeout_s))
    throw Error(ErrorCode::InvalidUsage, std::string(api_) + ": timeout " + std::to_string(timeout_s) +
                                             " s is not valid, expected a positive number of seconds");
  // The transport's waits (the executor's rounds, and whatever the engine runs over it) and the
  // session's own (agree_max, auto's native and exchange: passed per call) are the same value.
  engine_.transport().set_timeout(timeout_s);
  timeout_s_ = timeout_s;
}

Session::~Session() {
  // A broken session may have engine work in flight that writes to scratch (a GPU stream that
  // never finishes, an MPI receive that could not be cancelled): leak it rather than free
  // memory that is still a target.
  if (!broken_ || !engine_.transport().writes_may_be_pending()) engine_.device().deallocate(scratch_);
  engine_.device().deallocate(kept_);  // written and read by the device's copies only
}

void Session::mark_broken(const Error& error) {
  if (!broken_) broken_ = error;
}

void Session::throw_broken() const {
  throw Error(broken_->code(), std::string(api_) + ": this communicator is unusable after an earlier failure (" +
                                   broken_->what() + "); " + after_failure_);
}

void Session::validate(const void* sendbuf, const void* recvbuf, std::size_t count, DataType dtype,
                       ReduceOp op, const Options& o, PhaseSelection phases) const {
  const std::string api = api_;
  require(valid(dtype), api + ": dtype " + std::to_string(static_cast<int>(dtype)) +
                            " is not valid, expected float32, float64, float16, bfloat16, int32 or int64 (0..5)");
  require(valid(op), api + ": op " + std::to_string(static_cast<int>(op)) +
                         " is not valid, expected sum, prod, min, max or avg (0..4)");
  if (find_algorithm(o.algorithm) == nullptr) {
    try {
      (void)algorithm_info(o.algorithm);  // throws, naming the value and the table's values
    } catch (const Error& e) {
      throw Error(e.code(), api + ": " + e.what());
    }
  }
  require(o.straggler >= -1 && o.straggler < nranks_,
          api + ": straggler " + std::to_string(o.straggler) + " is outside [0, " + std::to_string(nranks_) +
              ") (or -1 for rank n-1)");
  require(o.pipeline >= 0 && o.pipeline <= kMaxPipeline,
          api + ": pipeline " + std::to_string(o.pipeline) + " is outside [1, " + std::to_string(kMaxPipeline) +
              "] (or 0 for auto)");
  const int ph = static_cast<int>(phases);
  require(ph >= 0 && ph <= 2, api + ": phases " + std::to_string(ph) + " is not a PhaseSelection");
  require(phases == PhaseSelection::all || algorithm_info(o.algorithm).kind == AlgorithmKind::schedule,
          api + ": algorithm " + to_string(o.algorithm) + " cannot run part of a schedule (phases must be all)");
  require(count <= static_cast<std::size_t>(INT64_MAX) / size_of(dtype),
          api + ": count " + std::to_string(count) + " is too large for " + to_string(dtype) + " (bytes overflow)");
  check_buffers(sendbuf, recvbuf, count, dtype);
}

void Session::check_buffers(const void* sendbuf, const void* recvbuf, std::size_t count, DataType dtype) const {
  const char* problem = buffer_problem(sendbuf, recvbuf, count * size_of(dtype));
  if (!problem && count > 0) problem = engine_.buffer_problem(sendbuf, recvbuf);
  if (problem)
    throw Error(ErrorCode::InvalidUsage,
                std::string(api_) + ": " + problem + " (count " + std::to_string(count) + ")");
}

void Session::ensure_scratch(std::size_t bytes) {
  if (bytes <= scratch_size_) return;
  const std::size_t size = grown_size(scratch_size_, bytes);
  void* fresh = engine_.device().allocate(size);
  engine_.device().deallocate(scratch_);  // stream-ordered on GPUs, after every earlier use
  scratch_ = fresh;
  scratch_size_ = size;
}

void Session::ensure_kept(std::size_t bytes) {
  if (bytes <= kept_size_) return;
  const std::size_t size = grown_size(kept_size_, std::max<std::size_t>(bytes, 4096));  // no run of tiny ones
  void* fresh = engine_.device().allocate(size);
  engine_.device().deallocate(kept_);
  kept_ = fresh;
  kept_size_ = size;
}

void Session::prepare_auto_in_place(const AutoRunner& automatic, std::size_t bytes) {
  // Both, whatever this call runs: auto may run a schedule in this call and native in a later
  // one, or the other way round (mpi_hot_path_n4 met native's first in-place run, and the
  // engine's staging made then, in its counted calls).
  if (session_keeps_copy(/*native=*/false)) ensure_kept(bytes);
  if (automatic.may_run_native())
    // (The caller checked keeps_buffers(): the engine keeps the buffer where the session does not.)
    engine_.reserve(/*native_bytes=*/bytes, /*native_keeps_buffer=*/!session_keeps_copy(/*native=*/true),
                    /*agreement_values=*/0);
}

bool Session::keeps_buffers() const {
  return env().keep_buffers && caller_sees_buffers_ && nranks_ > 1 &&
         engine_.buffers_on_error() != Engine::BuffersOnError::undefined;
}

bool Session::session_keeps_copy(bool native) const {
  return keeps_buffers() && !(native && engine_.buffers_on_error() == Engine::BuffersOnError::native_stages);
}

// The engine's agreement within the session's timeout; a failure breaks the session (the ranks
// are out of step) and names what was being agreed.
void Session::agree_or_break(std::span<std::int64_t> values, const char* what) {
  try {
    engine_.agree_max(values, timeout_s_);
  } catch (const Error& e) {
    const Error wrapped(e.code(), std::string(api_) + ": " + what + " (rank " + std::to_string(rank_) + "): " + e.what());
    mark_broken(wrapped);
    throw wrapped;
  }
}

// At the session's first call, whatever its arguments (so every rank runs it, before the
// argument check's agreement): every rank's host id and clock id, by the same bounded agreement
// (a max over ranks of two slots each). 16 bytes per rank, once per communicator.
void Session::discover_hosts() {
  hosts_known_ = true;
  if (nranks_ < 2) return;
  // Slots [0, n): host ids; [n, 2n): clock ids (-1: none, as the max's neutral value).
  const auto n = static_cast<std::size_t>(nranks_), me = static_cast<std::size_t>(rank_);
  std::vector<std::int64_t> ids(2 * n, -1);
  ids[me] = engine_.host_id();
  ids[n + me] = engine_.clock_id();
  agree_or_break(ids, "the exchange of host and clock ids at this communicator's first call");
  const std::span<const std::int64_t> host(ids.data(), n), clock(ids.data() + n, n);
  ranks_per_host_ = host_major_ranks_per_host(host);
  shared_clock_ = clock[0] >= 0 && std::all_of(clock.begin(), clock.end(), [&](std::int64_t c) { return c == clock[0]; });
  if (env().debug_info && rank_ == 0)
    std::fprintf(stderr, "stragglar INFO: %s n=%d: %s\n", api_, nranks_,
                 ranks_per_host_ ? ("hosts: " + std::to_string(nranks_ / ranks_per_host_) + " of " +
                                    std::to_string(ranks_per_host_) + " ranks each, host-major (auto's hierarchical candidate)")
                                       .c_str()
                                 : "hosts: one, or not host-major with equal sizes (auto without hierarchical)");
}

// The first call of a configuration: everything is checked and built locally, errors included
// are carried into one agreement, so every rank fails together or goes on together.
const Session::Config& Session::first_call(const Key& key, const void* sendbuf, void* recvbuf, std::size_t count,
                                           DataType dtype, ReduceOp op, const Options& o,
                                           PhaseSelection phases) {
  if (!hosts_known_) discover_hosts();
  Config cfg;
  std::optional<Error> local;
  std::int64_t resolved_k = 0, cost = 0;
  try {
    validate(sendbuf, recvbuf, count, dtype, op, o, phases);
    const AlgorithmInfo& info = algorithm_info(o.algorithm);
    cfg.algorithm = o.algorithm;
    cfg.straggler = info.uses_straggler ? key.straggler : -1;
    cfg.stragglers = o.stragglers;
    std::sort(cfg.stragglers.begin(), cfg.stragglers.end());
    std::vector<int> late = late_set_of(o, nranks_, api_);  // issue #23: several late ranks
    if (late.size() == 1 && info.uses_straggler) cfg.straggler = late.front();
    if (late.size() == 1) late.clear();
    if (!late.empty()) cfg.straggler = -1;
    const std::size_t bytes = count * size_of(dtype);
    resolved_k = resolve_pipeline(o, nranks_, bytes);
    if (info.kind == AlgorithmKind::schedule && nranks_ > 1 && count > 0) {
      const ScheduleKey sk{o.algorithm, nranks_, cfg.straggler, static_cast<int>(resolved_k), late};
      cfg.plan = cached_plan(sk, rank_, env().verify);
      ensure_scratch(Executor::scratch_bytes(*cfg.plan, count, dtype));
    }
    if (info.kind == AlgorithmKind::automatic) {
      // auto's cost model: the user's, else this engine's default (auto_cost_model.hpp).
      const Options ao = with_auto_cost(o, engine_, ranks_per_host_);
      cost = cost_fingerprint(*ao.cost);
      if (nranks_ > 1 && count > 0) {
        // What auto's bounded native needs, made now, outside the timed calls (with the staging
        // of a kept buffer when the first call is in place: a configuration first called out of
        // place makes it at its first in-place call, prepare_auto_in_place).
        const bool native_keeps = sendbuf == recvbuf && phases == PhaseSelection::all && keeps_buffers();
        if (auto_runs_native(ao, nranks_, bytes)) {
          cfg.auto_native = true;
          cfg.algorithm = Algorithm::native;
          engine_.reserve(/*native_bytes=*/bytes, native_keeps, /*agreement_values=*/0);
        } else {
          AutoCall host(*this, nullptr, nullptr, 0, dtype, op);
          cfg.automatic = std::make_shared<AutoRunner>(engine_, api_, rank_, nranks_, count, dtype, ao, host,
                                                         shared_clock_);
          if (native_keeps)
            prepare_auto_in_place(*cfg.automatic, bytes);
          else if (cfg.automatic->may_run_native())
            engine_.reserve(/*native_bytes=*/bytes, /*native_keeps_buffer=*/false, /*agreement_values=*/0);
        }
      }
    }
    // The copy its calls in place keep (run), made with the configuration, outside the timed calls
    // (a configuration first called out of place and later in place makes it at that call).
    if (count > 0 && sendbuf == recvbuf && phases == PhaseSelection::all &&
        session_keeps_copy(cfg.algorithm == Algorithm::native))
      ensure_kept(bytes);
  } catch (const Error& e) {
    local = e;
  } catch (const std::bad_alloc&) {
    local = Error(ErrorCode::SystemError, std::string(api_) + ": out of memory while preparing this call");
  } catch (const std::exception& e) {
    local = Error(ErrorCode::Internal, std::string(api_) + ": " + e.what());
  }

  std::array<std::int64_t, kFields> sig = {local ? 0 : 1,
                                           key.algorithm,
                                           key.straggler,
                                           key.pipeline,
                                           resolved_k,
                                           static_cast<std::int64_t>(key.count),
                                           key.dtype,
                                           key.op,
                                           key.phases,
                                           cost,
                                           static_cast<std::int64_t>(key.stragglers >> 2)};  // >> 2: -v must not overflow
  std::array<std::int64_t, kSignatureSize> v{};
  for (std::size_t i = 0; i < kFields; ++i) {
    v[i] = sig[i];
    v[kFields + i] = -sig[i];
  }
  v[kFailingRank] = local ? -static_cast<std::int64_t>(rank_) : -std::int64_t{INT_MAX};
  v[kTag] = next_tag_;
  agree_or_break(v, "the argument check of a new configuration");
  if (local) throw *local;
  if (-v[kFields + kOk] == 0)
    throw Error(ErrorCode::RemoteError, std::string(api_) + ": rank " + std::to_string(-v[kFailingRank]) +
                                            " rejected its arguments for this call (see its error); no data was moved");
  for (int i = kAlgorithm; i < kFields; ++i) {
    const std::int64_t hi = v[i], lo = -v[kFields + i];
    if (hi != lo)
      throw Error(ErrorCode::Mismatch,
                  std::string(api_) + ": ranks disagree on " + kFieldNames[i] + ": values range from " +
                      field_value(i, lo) + " to " + field_value(i, hi) + " (rank " + std::to_string(rank_) +
                      " passed " + field_value(i, sig[i]) + "); every rank must pass the same arguments");
  }
  // Unique per communicator by construction: every rank takes the same, never used, tag.
  const std::int64_t tag = v[kTag];
  const int max_tag = engine_.transport().max_tag();
  if (tag > max_tag) {
    const Error e(ErrorCode::InvalidUsage, std::string(api_) + ": more than " + std::to_string(max_tag) +
                                               " configurations on one communicator (the transport's tag limit)");
    mark_broken(e);
    throw e;
  }
  cfg.tag = static_cast<int>(tag);
  next_tag_ = cfg.tag + 1;
  if (env().debug_info && rank_ == 0 && (cfg.plan || cfg.automatic))
    std::fprintf(stderr, "stragglar INFO: %s n=%d: new configuration %s count=%zu %s %s K=%lld tag=%d%s\n", api_,
                 nranks_, to_string(o.algorithm), count, to_string(dtype), to_string(op),
                 static_cast<long long>(resolved_k), cfg.tag,
                 cfg.automatic ? (" (auto starts with " + to_string(cfg.automatic->policy().current()) + ")").c_str() : "");
  return configs_.emplace(key, std::move(cfg)).first->second;
}

void Session::allreduce(const void* sendbuf, void* recvbuf, std::size_t count, DataType dtype, ReduceOp op,
                        const Options& o, PhaseSelection phases) {
  CallTrace::Call traced(trace_.get(), count, dtype, op, o);  // its entry now; recorded when it ends
  if (broken_) throw_broken();
  const Key key{static_cast<int>(o.algorithm), o.straggler < 0 ? nranks_ - 1 : o.straggler, o.pipeline, count,
                static_cast<int>(dtype), static_cast<int>(op), static_cast<int>(phases),
                late_set_fingerprint(o.stragglers)};
  auto it = configs_.find(key);
  if (it != configs_.end() && !o.stragglers.empty()) {  // a fingerprint is not the set: compare, allocation-free
    const std::vector<int>& known = it->second.stragglers;
    bool same = known.size() == o.stragglers.size();
    for (std::size_t i = 0; same && i < o.stragglers.size(); ++i)
      same = std::binary_search(known.begin(), known.end(), o.stragglers[i]);
    if (!same) throw Error(ErrorCode::Internal, std::string(api_) + ": two late sets share a fingerprint");
  }
  const Config& cfg = it != configs_.end() ? it->second
                                           : first_call(key, sendbuf, recvbuf, count, dtype, op, o, phases);
  if (it != configs_.end()) {  // pointers change per call
    try {
      check_buffers(sendbuf, recvbuf, count, dtype);
    } catch (const Error& e) {
      // No agreement runs here, so the peers go ahead with this call; were this rank to call
      // again, its next call would pair with their current one and mix data. Broken instead:
      // its later calls fail at once and the peers time out.
      if (nranks_ == 1) throw;  // no peer to be out of step with
      const Error unusable(e.code(), std::string(e.what()) +
                                         "; the other ranks cannot be told on a configuration already in use, "
                                         "so this communicator is now unusable (" + after_failure_ + ")");
      mark_broken(unusable);
      throw unusable;
    }
  }
  if (count == 0) return;
  try {
    if (cfg.automatic) {
      // A configuration first called out of place, now in place: its in-place memory now, before
      // auto picks (cheap once made: a size check).
      if (sendbuf == recvbuf && phases == PhaseSelection::all && keeps_buffers())
        prepare_auto_in_place(*cfg.automatic, count * size_of(dtype));
      last_auto_ = cfg.automatic;
      AutoCall host(*this, sendbuf, recvbuf, count, dtype, op, cfg.tag);
      last_choice_ = cfg.automatic->call(host, timeout_s_);
    } else {
      last_choice_ = {cfg.algorithm, cfg.straggler};
      run(cfg.algorithm, cfg.plan.get(), cfg.tag, sendbuf, recvbuf, count, dtype, op, phases,
          /*bounded=*/cfg.auto_native);
    }
  } catch (const Error& e) {
    // A timeout or engine failure leaves peers out of step: nothing may run on this
    // communicator again.
    mark_broken(e);
    throw;
  }
  traced.done(last_choice_, cfg.automatic.get(), cfg.auto_native, shared_clock_, engine_, ranks_per_host_);
}

// Issue #22 class 6, all or nothing: the executor reduces in the caller's buffer, so a call that
// fails mid-way would leave some chunks partly reduced. In place, where the engine allows it
// (session_keeps_copy), the call first copies the buffer and puts the copy back if it raises: the
// caller's data is then as it was, or fully reduced, never a mix. One copy per call
// (docs/reliability.md). Out of place the input is sendbuf, which is never written; recvbuf is
// an output, undefined after an error (as in MPI), and costs no copy.
void Session::run(Algorithm algorithm, const Plan* plan, int tag, const void* sendbuf, void* recvbuf,
                  std::size_t count, DataType dtype, ReduceOp op, PhaseSelection phases, bool bounded) {
  const bool native = algorithm == Algorithm::native;
  const std::size_t bytes = count * size_of(dtype);
  const bool in_place_whole = sendbuf == recvbuf && phases == PhaseSelection::all;
  const bool keep = in_place_whole && session_keeps_copy(native);
  if (keep) {
    ensure_kept(bytes);  // made with the configuration: no allocation here
    engine_.device().copy(kept_, recvbuf, bytes);
  }
  try {
    if (native && nranks_ > 1) {
      std::optional<Engine::NativeBound> bound;
      if (bounded) bound = Engine::NativeBound{timeout_s_, tag};
      engine_.native_allreduce(sendbuf, recvbuf, count, dtype, op, bound,
                               /*keep_buffer=*/in_place_whole && !keep && keeps_buffers());
      return;
    }
    if (sendbuf != recvbuf && phases != PhaseSelection::waiting_only) engine_.device().copy(recvbuf, sendbuf, bytes);
    if (!plan) return;  // one rank: the result is the input (avg: divided by 1)
    engine_.transport().set_tag(tag);
    executor_.run(*plan, recvbuf, count, dtype, op, scratch_, scratch_size_, phases);
  } catch (...) {
    if (keep) engine_.device().copy(recvbuf, kept_, bytes);
    throw;
  }
}

StragglerReport Session::auto_report() const {
  StragglerReport r;
  if (last_auto_) {
    r = last_auto_->report(nranks_);
  } else {
    r.scores.assign(static_cast<std::size_t>(nranks_), 0.0);
  }
  r.ranks_per_host = ranks_per_host_;
  return r;
}

}  // namespace stragglar::detail
