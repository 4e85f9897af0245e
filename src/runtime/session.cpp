// The runtime core: one path for every front-end (see session.hpp).
#include "runtime/session.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstring>
#include <limits>
#include <cstdio>
#include <new>
#include <string>

#include "plan/plan_cache.hpp"
#include "runtime/env.hpp"
#include "stragglar/simulate.hpp"
#include "stragglar/verify.hpp"

namespace stragglar::detail {
namespace {

// ---- the agreement signature ----------------------------------------------------------------
// One element-wise max over ranks of (v, -v) gives every rank the max and min of each field.
enum Field { kOk, kAlgorithm, kStraggler, kPipeline, kResolvedK, kCount, kDtype, kOp, kPhases, kCost, kFields };
constexpr std::array<const char*, kFields> kFieldNames = {
    "ok",    "algorithm", "straggler", "pipeline", "pipeline (resolved K)", "count", "dtype", "op",
    "phases", "cost model (auto decides from it: pass the same Options::cost / STRAGGLAR_* model)"};
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

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Scratch grows geometrically: a job whose sizes keep growing reallocates O(log) times, not at
// every new size (which fragments the heap).
std::size_t grown_size(std::size_t current, std::size_t need) {
  return std::max(need, current + current / 2);
}

}  // namespace

// ---- Engine defaults for auto: the host clock, the exchange right away --------------------------
void Engine::time_begin() { host_start_ns_ = now_ns(); }
void Engine::time_end() {
  if (host_times_ == static_cast<int>(std::size(host_times_ns_)))
    throw Error(ErrorCode::Internal, "Engine: more timed calls than measurement_lag() allows");
  host_times_ns_[host_times_++] = now_ns() - host_start_ns_;
}
double Engine::take_time() {
  if (host_times_ == 0) throw Error(ErrorCode::Internal, "Engine: no timed call to take");
  const std::int64_t ns = host_times_ns_[0];
  std::copy(host_times_ns_ + 1, host_times_ns_ + host_times_, host_times_ns_);
  --host_times_;
  return static_cast<double>(ns) * 1e-9;
}
void Engine::exchange_begin(std::span<std::int64_t> values, double timeout_s) {
  agree_max(values, timeout_s);
  exchanged_.assign(values.begin(), values.end());
}
void Engine::exchange_end(std::span<std::int64_t> values, double) {
  std::copy(exchanged_.begin(), exchanged_.end(), values.begin());
}

// ---- algorithm = auto ----------------------------------------------------------------------------
// auto's model: the simulator on the schedule a choice would run (the cached one), with the
// straggler arriving delay_s late — the same numbers on every rank. The event simulator is
// max-plus linear in the straggler's arrival d (every start is a max of arrivals plus fixed
// durations), so its last finish is max(C0, d + C1) and the exposed time is exactly
// max(E(0) − d, E(∞)): two simulations per choice, on its first use, and predicting afterwards
// costs no simulation and no allocation (a configuration seen before allocates nothing, auto
// included).
class PredictionCache {
 public:
  PredictionCache(Options base, int nranks, std::size_t bytes) : base_(std::move(base)), n_(nranks), bytes_(bytes) {}
  double operator()(const Choice& c, double delay_s) {
    if (algorithm_info(c.algorithm).kind != AlgorithmKind::schedule) return std::numeric_limits<double>::quiet_NaN();
    const Curve& curve = curve_of(c);
    return std::max(curve.at_zero - std::max(0.0, delay_s), curve.at_infinity);
  }

 private:
  struct Curve {
    Choice choice;
    double at_zero;      // exposed time when the straggler is not late
    double at_infinity;  // exposed time when it is later than everything that can run without it
  };
  // Keyed by algorithm: a schedule for another straggler is a relabelling, with the same times.
  const Curve& curve_of(const Choice& c) {
    for (const Curve& curve : curves_)
      if (curve.choice.algorithm == c.algorithm) return curve;
    Options x = base_;
    x.algorithm = c.algorithm;
    x.straggler = c.straggler;
    const std::shared_ptr<const Schedule> s = schedule_for(x, n_, bytes_);
    Delay none, late;
    late.seconds = 1e4;  // far beyond any phase: the asymptote (double keeps ~1e-12 s here)
    curves_.push_back({c, simulate(*s, bytes_, *base_.cost, none).exposed_s,
                       simulate(*s, bytes_, *base_.cost, late).exposed_s});
    return curves_.back();
  }
  Options base_;
  int n_;
  std::size_t bytes_;
  std::vector<Curve> curves_;
};

// Small messages (docs/auto.md "Small messages"): auto runs the engine's native AllReduce with
// no policy when the model says no schedule can beat it at any delay: even with the straggler
// infinitely late, StragglAR's exposed time (what runs after it arrives) is no shorter than the
// best bulk-synchronous schedule at no delay, which is what native is modelled as. A function of
// the configuration and the agreed cost model only: the same answer on every rank.
namespace {
bool no_schedule_can_win(const Options& o, int nranks, std::size_t bytes) {
  Options base = o;
  base.cost = o.cost.value_or(env().cost);
  PredictionCache model(base, nranks, bytes);
  const double late_for_ever = 1e4;
  const double best_case = model(Choice{Algorithm::stragglar, nranks - 1}, late_for_ever);
  const double bulk = std::min(model(Choice{Algorithm::ring, -1}, 0.0), model(Choice{Algorithm::rhd, -1}, 0.0));
  return best_case >= bulk;
}

// How many calls one exchange should cover: 1 (decide after every call) when an exchange, an
// AllReduce of a few hundred bytes (2 log2 n latencies in the model), costs at most 2% of the
// cheapest candidate's call; else the period (a lag engine always: at most one exchange in flight).
int calls_per_exchange(PredictionCache& model, int nranks, const CostModel& cost, int period, int lag) {
  if (lag > 0) return period;
  double cheapest = std::numeric_limits<double>::infinity();
  for (Algorithm a : {Algorithm::stragglar, Algorithm::ring, Algorithm::rhd})
    cheapest = std::min(cheapest, model(Choice{a, nranks - 1}, 0.0));
  const double exchange = 2.0 * std::ceil(std::log2(static_cast<double>(nranks))) * cost.alpha_s;
  return exchange <= 0.02 * cheapest ? 1 : period;
}
}  // namespace

struct Session::AutoState {
  AutoState(PolicyConfig config, Predictor predictor) : policy(std::move(config), std::move(predictor)) {}
  StragglerPolicy policy;
  std::vector<std::int64_t> exchange;  // nranks × slots: the policy's window, every rank's after the max
  struct Sub {
    Choice choice;
    std::shared_ptr<const Plan> plan;  // null for native
  };
  std::vector<Sub> subs;  // the choices run so far, each with its plan (the first run builds it)
  int untaken = 0;        // calls timed whose time is not recorded yet (GPU: the lag)
  bool in_flight = false; // an exchange begun and not yet decided
  int in_flight_age = 0;  // calls since it began
  Options options;        // pipeline and cost for the candidates' schedules
  std::size_t count = 0;
  DataType dtype = DataType::float32;
};

std::size_t Session::KeyHash::operator()(const Key& k) const noexcept {
  std::uint64_t h = 1469598103934665603ull;  // FNV-1a over the fields
  for (std::uint64_t v : {std::uint64_t(k.algorithm), std::uint64_t(k.straggler), std::uint64_t(k.pipeline),
                          std::uint64_t(k.count), std::uint64_t(k.dtype), std::uint64_t(k.op),
                          std::uint64_t(k.phases)}) {
    h ^= v;
    h *= 1099511628211ull;
  }
  return static_cast<std::size_t>(h);
}

Session::Session(Engine& engine, const char* api, const char* after_failure)
    : engine_(engine), api_(api), after_failure_(after_failure), rank_(engine.transport().rank()), nranks_(engine.transport().nranks()),
      executor_(engine.transport(), engine.device()), timeout_s_(env().timeout_s) {
  configs_.reserve(16);
}

void Session::set_timeout(double timeout_s) {
  if (!(timeout_s > 0) || !std::isfinite(timeout_s))
    throw Error(ErrorCode::InvalidUsage, std::string(api_) + ": timeout " + std::to_string(timeout_s) +
                                             " s is not valid, expected a positive number of seconds");
  timeout_s_ = timeout_s;
}

Session::~Session() {
  // A broken session may have engine work in flight that writes to scratch (a GPU stream that
  // never finishes, an MPI receive that could not be cancelled): leak it rather than free
  // memory that is still a target.
  if (!broken_ || !engine_.writes_may_be_pending()) engine_.device().deallocate(scratch_);
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

// The first call of a configuration: everything is checked and built locally, errors included
// are carried into one agreement, so every rank fails together or goes on together.
const Session::Config& Session::first_call(const Key& key, const void* sendbuf, void* recvbuf, std::size_t count,
                                           DataType dtype, ReduceOp op, const Options& o,
                                           PhaseSelection phases) {
  Config cfg;
  std::optional<Error> local;
  std::int64_t resolved_k = 0, cost = 0;
  try {
    validate(sendbuf, recvbuf, count, dtype, op, o, phases);
    const AlgorithmInfo& info = algorithm_info(o.algorithm);
    cfg.algorithm = o.algorithm;
    cfg.straggler = info.uses_straggler ? key.straggler : -1;
    const std::size_t bytes = count * size_of(dtype);
    resolved_k = resolve_pipeline(o, nranks_, bytes);
    if (info.kind == AlgorithmKind::schedule && nranks_ > 1 && count > 0) {
      const ScheduleKey sk{o.algorithm, nranks_, cfg.straggler, static_cast<int>(resolved_k)};
      cfg.plan = cached_plan(sk, rank_, env().verify);
      ensure_scratch(Executor::scratch_bytes(*cfg.plan, count, dtype));
    }
    if (info.kind == AlgorithmKind::automatic) {
      cost = cost_fingerprint(o.cost.value_or(env().cost));
      if (nranks_ > 1 && count > 0) {
        if (no_schedule_can_win(o, nranks_, bytes)) {
          cfg.auto_native = true;
          cfg.algorithm = Algorithm::native;
          engine_.reserve_native(bytes);
        } else {
          cfg.automatic = make_auto(count, dtype, o);
        }
      }
    }
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
                                           cost};
  std::array<std::int64_t, kSignatureSize> v{};
  for (std::size_t i = 0; i < kFields; ++i) {
    v[i] = sig[i];
    v[kFields + i] = -sig[i];
  }
  v[kFailingRank] = local ? -static_cast<std::int64_t>(rank_) : -std::int64_t{INT_MAX};
  v[kTag] = next_tag_;
  try {
    engine_.agree_max(v, timeout_s_);
  } catch (const Error& e) {
    const Error wrapped(e.code(), std::string(api_) + ": the argument check of a new configuration (rank " +
                                      std::to_string(rank_) + "): " + e.what());
    mark_broken(wrapped);
    throw wrapped;
  }
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
  if (tag > engine_.max_tag()) {
    const Error e(ErrorCode::InvalidUsage, std::string(api_) + ": more than " + std::to_string(engine_.max_tag()) +
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
                 cfg.automatic ? (" (auto starts with " + to_string(cfg.automatic->policy.current()) + ")").c_str() : "");
  return configs_.emplace(key, std::move(cfg)).first->second;
}

void Session::allreduce(const void* sendbuf, void* recvbuf, std::size_t count, DataType dtype, ReduceOp op,
                        const Options& o, PhaseSelection phases) {
  if (broken_) throw_broken();
  const Key key{static_cast<int>(o.algorithm), o.straggler < 0 ? nranks_ - 1 : o.straggler, o.pipeline, count,
                static_cast<int>(dtype), static_cast<int>(op), static_cast<int>(phases)};
  auto it = configs_.find(key);
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
      last_auto_ = cfg.automatic;
      run_auto(*cfg.automatic, cfg.tag, sendbuf, recvbuf, count, dtype, op);
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
}

void Session::run(Algorithm algorithm, const Plan* plan, int tag, const void* sendbuf, void* recvbuf,
                  std::size_t count, DataType dtype, ReduceOp op, PhaseSelection phases, bool bounded) {
  if (algorithm == Algorithm::native && nranks_ > 1) {
    if (bounded)
      engine_.native_allreduce_bounded(sendbuf, recvbuf, count, dtype, op, timeout_s_);
    else
      engine_.native_allreduce(sendbuf, recvbuf, count, dtype, op);
    return;
  }
  if (sendbuf != recvbuf && phases != PhaseSelection::waiting_only)
    engine_.device().copy(recvbuf, sendbuf, count * size_of(dtype));
  if (!plan) return;  // one rank: the result is the input (avg: divided by 1)
  engine_.transport().set_tag(tag);
  executor_.run(*plan, recvbuf, count, dtype, op, scratch_, scratch_size_, phases);
}

// ---- algorithm = auto (docs/auto.md) --------------------------------------------------------------
std::shared_ptr<Session::AutoState> Session::make_auto(std::size_t count, DataType dtype, const Options& o) {
  PolicyConfig pc;
  pc.nranks = nranks_;
  pc.bytes = count * size_of(dtype);
  // An exchange must be decided before the next one begins (at most one in flight).
  pc.period = std::max(env().auto_period, engine_.measurement_lag());
  pc.keep_evidence = env().debug_info;
  pc.first_call_synchronised = true;  // it follows the agreement
  pc.initial_straggler = o.straggler;  // a hint: StragglAR's straggler until one is measured  // the switch evidence is text: only when it is printed
  Options base = o;
  base.cost = o.cost.value_or(env().cost);
  auto model = std::make_shared<PredictionCache>(base, nranks_, pc.bytes);
  pc.exchange_every = calls_per_exchange(*model, nranks_, *base.cost, pc.period, engine_.measurement_lag());
  Predictor predict = [model](const Choice& c, double delay_s) { return (*model)(c, delay_s); };
  auto a = std::make_shared<AutoState>(std::move(pc), std::move(predict));
  a->exchange.resize(static_cast<std::size_t>(a->policy.exchange_size()));
  engine_.reserve_exchange(a->exchange.size());
  a->options = base;
  a->count = count;
  a->dtype = dtype;
  // Every plan auto may run, built now (its first call is a first call anyway): later calls,
  // explorations and straggler switches then allocate nothing. Beyond kPrebuiltStragglers ranks
  // StragglAR's plan for a straggler is built when that rank is first found late (a straggler
  // switch: one compile from the cached canonical schedule, docs/verification.md).
  constexpr int kPrebuiltStragglers = 64;
  for (Algorithm alg : a->policy.config().candidates) {
    const AlgorithmInfo& info = algorithm_info(alg);
    if (alg == Algorithm::native) engine_.reserve_native(count * size_of(dtype));
    if (!info.uses_straggler) {
      (void)plan_for(*a, Choice{alg, -1});
    } else if (nranks_ <= kPrebuiltStragglers) {
      for (int s = 0; s < nranks_; ++s) (void)plan_for(*a, Choice{alg, s});
    } else {
      (void)plan_for(*a, Choice{alg, a->policy.current().straggler});
    }
  }
  return a;
}

const Plan* Session::plan_for(AutoState& a, const Choice& c) {
  for (const AutoState::Sub& sub : a.subs)
    if (sub.choice == c) return sub.plan.get();
  // The first run of this choice: its plan and scratch, before the call is timed.
  std::shared_ptr<const Plan> plan;
  const AlgorithmInfo& info = algorithm_info(c.algorithm);
  if (info.kind == AlgorithmKind::schedule) {
    Options x = a.options;
    x.algorithm = c.algorithm;
    x.straggler = c.straggler;
    const std::size_t bytes = a.count * size_of(a.dtype);
    const ScheduleKey key{c.algorithm, nranks_, info.uses_straggler ? c.straggler : -1,
                          resolve_pipeline(x, nranks_, bytes)};
    plan = cached_plan(key, rank_, env().verify);
    ensure_scratch(Executor::scratch_bytes(*plan, a.count, a.dtype));
  }
  a.subs.push_back({c, plan});
  return plan.get();
}

// Every rank makes the same calls here at the same call index (the lag is the engine's, the
// same everywhere), so every rank runs the same choice: docs/auto.md "Why every rank decides
// the same".
void Session::run_auto(AutoState& a, int tag, const void* sendbuf, void* recvbuf, std::size_t count,
                       DataType dtype, ReduceOp op) {
  // The configuration's first call runs right after the agreement, which waited for every rank:
  // the policy (first_call_synchronised) takes from it no late rank, only the time of a
  // straggler-agnostic choice (native, which has no model, runs in it).
  const Choice c = a.policy.begin_call();
  last_choice_ = c;
  const Plan* plan = plan_for(a, c);
  engine_.time_begin();
  run(c.algorithm, plan, tag, sendbuf, recvbuf, count, dtype, op, PhaseSelection::all, /*bounded=*/true);
  engine_.time_end();
  ++a.untaken;
  const int lag = engine_.measurement_lag();
  if (a.in_flight && ++a.in_flight_age >= lag) finish_exchange(a);
  while (a.untaken > lag) {
    a.policy.record(engine_.take_time());
    --a.untaken;
    if (a.policy.exchange_due()) {
      a.policy.fill_exchange(a.exchange, rank_);
      engine_.exchange_begin(a.exchange, timeout_s_);  // after the data phase: everyone is here
      a.in_flight = true;
      a.in_flight_age = 0;
      if (lag == 0) finish_exchange(a);
    }
  }
}

void Session::finish_exchange(AutoState& a) {
  engine_.exchange_end(a.exchange, timeout_s_);
  a.in_flight = false;
  if (a.policy.decide(a.exchange) && env().debug_info && rank_ == 0)
    std::fprintf(stderr, "stragglar INFO: %s n=%d auto (count=%zu %s): now %s — %s\n", api_, nranks_, a.count,
                 to_string(a.dtype), to_string(a.policy.incumbent()).c_str(),
                 a.policy.last_switch_evidence().c_str());
}

StragglerReport Session::auto_report() const {
  StragglerReport r;
  r.scores.assign(static_cast<std::size_t>(nranks_), 0.0);
  if (!last_auto_) return r;
  const StragglerPolicy& p = last_auto_->policy;
  r.active = true;
  r.algorithm = p.incumbent().algorithm;
  r.straggler = p.incumbent().straggler;
  r.late_rank = p.late_rank();
  r.delay_s = p.delay_s();
  if (p.scores().size() == r.scores.size()) r.scores = p.scores();
  r.calls = p.calls_begun();
  r.decisions = p.decisions();
  return r;
}

}  // namespace stragglar::detail
