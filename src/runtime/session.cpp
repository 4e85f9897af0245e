// The runtime core: one path for every front-end (see session.hpp).
#include "runtime/session.hpp"

#include <algorithm>
#include <climits>
#include <cmath>
#include <memory>
#include <new>
#include <string>

#include "plan/plan_cache.hpp"
#include "runtime/hosts.hpp"
#include "runtime/late_set.hpp"
#include "runtime/log.hpp"

namespace stragglar::detail {
namespace {

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

// Scratch grows geometrically: a job whose sizes keep growing reallocates O(log) times, not at
// every new size (which fragments the heap).
std::size_t grown_size(std::size_t current, std::size_t need) {
  return std::max(need, current + current / 2);
}

}  // namespace

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

// The configuration is read once, here (env() raises for a malformed STRAGGLAR_* variable).
Session::Session(Engine& engine, const char* api, const char* after_failure, const RuntimeConfig* config)
    : engine_(engine), api_(api), after_failure_(after_failure), config_(config ? *config : env()), rank_(engine.transport().rank()),
      nranks_(engine.transport().nranks()), executor_(engine.transport(), engine.device()), timeout_s_(config_.timeout_s) {
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
  return config_.keep_buffers && caller_sees_buffers_ && nranks_ > 1 &&
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
  one_host_ = std::all_of(host.begin(), host.end(), [&](std::int64_t h) { return h == host[0]; });
  if (config_.debug_info && rank_ == 0)
    log_info("%s n=%d: %s", api_, nranks_,
                 ranks_per_host_ ? ("hosts: " + std::to_string(nranks_ / ranks_per_host_) + " of " +
                                    std::to_string(ranks_per_host_) + " ranks each, host-major (auto's hierarchical candidate)")
                                       .c_str()
                                 : "hosts: one, or not host-major with equal sizes (auto without hierarchical)");
}

// ---- a configuration's first call ----------------------------------------------------------------

const Session::Config& Session::first_call(const Key& key, const void* sendbuf, void* recvbuf, std::size_t count,
                                           DataType dtype, ReduceOp op, const Options& o, PhaseSelection phases,
                                           FirstCallTrace& trace) {
  if (!hosts_known_) {
    discover_hosts();
    trace.mark("hosts");
  }
  Config cfg;
  ConfigSignature signature;
  signature[SignatureField::algorithm] = key.algorithm;
  signature[SignatureField::straggler] = key.straggler;
  signature[SignatureField::pipeline] = key.pipeline;
  signature[SignatureField::count] = static_cast<std::int64_t>(key.count);
  signature[SignatureField::dtype] = key.dtype;
  signature[SignatureField::op] = key.op;
  signature[SignatureField::phases] = key.phases;
  signature[SignatureField::stragglers] = static_cast<std::int64_t>(key.stragglers >> 2);  // -v must not overflow
  const std::optional<Error> local =
      prepare(key, sendbuf, recvbuf, count, dtype, op, o, phases, cfg, signature, trace);
  signature[SignatureField::ok] = local ? 0 : 1;
  // What this rank holds for auto's warm-ups of native (set_up_auto): their memory, or none needed.
  const bool warm_up_memory = !warm_up_wanted(cfg, sendbuf == recvbuf && phases == PhaseSelection::all) ||
                              warm_up_.get() != nullptr;
  const AgreedSignature agreed = agree_signature(signature, local, warm_up_memory);
  trace.mark("agreement");
  // Every rank warms native up, or none does (AutoCall::warm_up_native): whatever memory its
  // warm-ups would use, a rank skips them when a peer has none.
  warm_ups_agreed_ = agreed.warm_up_memory;
  if (!warm_ups_agreed_) warm_up_.release();
  cfg.tag = take_tag(agreed.tag);
  if (cfg.automatic && !tickets_tried_) {
    set_up_arrival_tickets();  // every rank: the agreement above went through on all of them
    trace.mark("arrival tickets");
  }
  log_new_configuration(cfg, o, count, dtype, op, signature[SignatureField::resolved_k]);
  return configs_.emplace(key, std::move(cfg)).first->second;
}

void Session::set_up_arrival_tickets() {
  tickets_tried_ = true;
  const ArrivalTicketsMode mode = config_.arrival_tickets;
  if (mode == ArrivalTicketsMode::off || nranks_ < 2) return;
  std::string why;
  if (!engine_.arrivals_on_host()) {
    why = "this engine's calls arrive on a GPU stream, not on the host";
  } else if (!one_host_ || !shared_clock_) {
    why = "the ranks do not all share one host and clock";
  } else {
    arrival_block_ = std::make_unique<SharedBlock>(ArrivalTickets::bytes(nranks_), rank_, [this](std::span<std::int64_t> v) {
      agree_or_break(v, "the arrival tickets' shared memory");
    });
    if (arrival_block_->data())
      tickets_.emplace(arrival_block_->data(), nranks_, rank_);
    else
      why = arrival_block_->why();
  }
  if (config_.debug_info && rank_ == 0)
    log_info("%s n=%d: arrival tickets %s%s", api_, nranks_, tickets_ ? "on" : "off: ", why.c_str());
  if (!tickets_ && mode == ArrivalTicketsMode::on) {  // the same on every rank: the block was agreed
    tickets_tried_ = false;  // and the next new configuration says so again
    throw Error(ErrorCode::InvalidUsage, std::string(api_) + ": STRAGGLAR_ARRIVAL_TICKETS=on, but " + why +
                                             " (expected every rank on one host; auto leaves them off there)");
  }
}

std::optional<Error> Session::prepare(const Key& key, const void* sendbuf, void* recvbuf, std::size_t count,
                                      DataType dtype, ReduceOp op, const Options& o, PhaseSelection phases,
                                      Config& cfg, ConfigSignature& signature, FirstCallTrace& trace) {
  try {
    validate(sendbuf, recvbuf, count, dtype, op, o, phases);
    const std::vector<int> late = resolve_late_set(key, o, cfg);
    const int resolved_k = resolve_pipeline(o, nranks_, count * size_of(dtype));
    signature[SignatureField::resolved_k] = resolved_k;
    trace.mark("validation, late set");
    build_plan(o, late, resolved_k, count, dtype, cfg);
    trace.mark("plan");
    const bool in_place_whole = sendbuf == recvbuf && phases == PhaseSelection::all;
    if (algorithm_info(o.algorithm).kind == AlgorithmKind::automatic) {
      signature[SignatureField::cost] = set_up_auto(o, in_place_whole, count, dtype, op, cfg, trace);
    }
    make_kept_copy(cfg, in_place_whole, count, dtype);
    trace.mark("kept copy");
    return std::nullopt;
  } catch (const Error& e) {
    return e;
  } catch (const std::bad_alloc&) {
    return Error(ErrorCode::SystemError, std::string(api_) + ": out of memory while preparing this call");
  } catch (const std::exception& e) {
    return Error(ErrorCode::Internal, std::string(api_) + ": " + e.what());
  }
}

std::vector<int> Session::resolve_late_set(const Key& key, const Options& o, Config& cfg) const {
  const AlgorithmInfo& info = algorithm_info(o.algorithm);
  cfg.algorithm = o.algorithm;
  cfg.straggler = info.uses_straggler ? key.straggler : -1;
  cfg.stragglers = o.stragglers;
  std::sort(cfg.stragglers.begin(), cfg.stragglers.end());
  std::vector<int> late = late_set_of(o, nranks_, api_);  // several late ranks: stragglar-k, hierarchical
  if (late.size() == 1 && info.uses_straggler) cfg.straggler = late.front();
  if (late.size() == 1) late.clear();
  if (!late.empty()) cfg.straggler = -1;
  return late;
}

void Session::build_plan(const Options& o, const std::vector<int>& late, int resolved_k, std::size_t count,
                         DataType dtype, Config& cfg) {
  if (algorithm_info(o.algorithm).kind != AlgorithmKind::schedule || nranks_ < 2 || count == 0) return;
  const ScheduleKey sk{o.algorithm, nranks_, cfg.straggler, resolved_k, late};
  cfg.plan = cached_plan(sk, rank_, config_.verify);
  ensure_scratch(Executor::scratch_bytes(*cfg.plan, count, dtype));
}

std::int64_t Session::set_up_auto(const Options& o, bool in_place_whole, std::size_t count, DataType dtype,
                                  ReduceOp op, Config& cfg, FirstCallTrace& trace) {
  // auto's cost model: the user's, else this engine's default (auto_cost_model.hpp).
  const Options ao = with_auto_cost(o, engine_, ranks_per_host_);
  if (nranks_ > 1 && count > 0) {
    // What auto's bounded native needs, made now, outside the timed calls (with the staging of
    // a kept buffer when the first call is in place: a configuration first called out of place
    // makes it at its first in-place call, prepare_auto_in_place).
    const std::size_t bytes = count * size_of(dtype);
    const bool native_keeps = in_place_whole && keeps_buffers();
    if (auto_runs_native(ao, nranks_, bytes)) {
      cfg.auto_native = true;
      cfg.algorithm = Algorithm::native;
      engine_.reserve(/*native_bytes=*/bytes, native_keeps, /*agreement_values=*/0);
    } else {
      AutoCall host(*this, nullptr, nullptr, 0, dtype, op);
      cfg.automatic =
          std::make_shared<AutoRunner>(engine_, config_, api_, rank_, nranks_, count, dtype, ao, host, shared_clock_);
      trace.mark("auto's policy and plans");
      if (native_keeps)
        prepare_auto_in_place(*cfg.automatic, bytes);
      else if (cfg.automatic->may_run_native())
        engine_.reserve(/*native_bytes=*/bytes, /*native_keeps_buffer=*/false, /*agreement_values=*/0);
      trace.mark("auto's native memory");
      // Where its first call measures native, after warm-ups (AutoRunner::call), on memory the caller
      // does not read (AutoCall::warm_up_native). Only a call in place without the session's
      // kept copy needs memory of its own: made now, so that the agreement can tell whether
      // every rank has it.
      if (warm_up_wanted(cfg, in_place_whole)) {
        (void)warm_up_.allocate(engine_.device(), bytes);
        trace.mark("auto's warm-up memory");
      }
    }
  }
  return cost_fingerprint(*ao.cost);
}

bool Session::warm_up_wanted(const Config& cfg, bool in_place_whole) const {
  return cfg.automatic && cfg.automatic->may_run_native() && engine_.native_warm_ups() > 0 && in_place_whole &&
         !session_keeps_copy(/*native=*/false);
}

void Session::abandon_kept() noexcept {
  kept_ = nullptr;
  kept_size_ = 0;
}

void Session::make_kept_copy(const Config& cfg, bool in_place_whole, std::size_t count, DataType dtype) {
  // (A configuration first called out of place and later in place makes it at that call.)
  if (count > 0 && in_place_whole && session_keeps_copy(cfg.algorithm == Algorithm::native))
    ensure_kept(count * size_of(dtype));
}

AgreedSignature Session::agree_signature(const ConfigSignature& signature, const std::optional<Error>& local,
                                         bool warm_up_memory) {
  SignatureExtras extras;
  extras.rank = rank_;
  extras.failed = local.has_value();
  extras.next_tag = next_tag_;
  extras.warm_up_memory = warm_up_memory;
  SignatureValues values = encode_signature(signature, extras);
  agree_or_break(values, "the argument check of a new configuration");
  const AgreedSignature agreed = decode_signature(values);
  if (local) throw *local;
  if (!agreed.every_rank_ok)
    throw Error(ErrorCode::RemoteError, std::string(api_) + ": rank " + std::to_string(agreed.failing_rank) +
                                            " rejected its arguments for this call (see its error); no data was moved");
  if (agreed.mismatch) throw Error(ErrorCode::Mismatch, signature_mismatch_text(api_, agreed, signature, rank_));
  return agreed;
}

int Session::take_tag(std::int64_t tag) {
  // Unique per communicator by construction: every rank takes the same, never used, tag.
  const int max_tag = engine_.transport().max_tag();
  if (tag > max_tag) {
    const Error e(ErrorCode::InvalidUsage, std::string(api_) + ": more than " + std::to_string(max_tag) +
                                               " configurations on one communicator (the transport's tag limit)");
    mark_broken(e);
    throw e;
  }
  next_tag_ = static_cast<int>(tag) + 1;
  return static_cast<int>(tag);
}

void Session::log_new_configuration(const Config& cfg, const Options& o, std::size_t count, DataType dtype,
                                    ReduceOp op, std::int64_t resolved_k) const {
  if (!config_.debug_info || rank_ != 0 || !(cfg.plan || cfg.automatic)) return;
  log_info("%s n=%d: new configuration %s count=%zu %s %s K=%lld tag=%d%s", api_, nranks_, to_string(o.algorithm),
           count, to_string(dtype), to_string(op), static_cast<long long>(resolved_k), cfg.tag,
           cfg.automatic ? (" (auto starts with " + to_string(cfg.automatic->policy().current()) + ")").c_str() : "");
}

// ---- every call ------------------------------------------------------------------------------------

void Session::allreduce(const void* sendbuf, void* recvbuf, std::size_t count, DataType dtype, ReduceOp op,
                        const Options& o, PhaseSelection phases) {
  CallTrace::Call traced(trace_.get(), count, dtype, op, o);  // its entry now; recorded when it ends
  if (broken_) throw_broken();
  const Key key{static_cast<int>(o.algorithm), o.straggler < 0 ? nranks_ - 1 : o.straggler, o.pipeline, count,
                static_cast<int>(dtype), static_cast<int>(op), static_cast<int>(phases),
                late_set_fingerprint(o.stragglers)};
  const auto it = configs_.find(key);
  if (it != configs_.end()) {
    check_known_call(it->second, o, sendbuf, recvbuf, count, dtype);
    call(it->second, sendbuf, recvbuf, count, dtype, op, phases, nullptr);
    traced.done(last_choice_, it->second.automatic.get(), it->second.auto_native, shared_clock_, engine_, ranks_per_host_);
    return;
  }
  FirstCallTrace trace(config_.debug_trace && rank_ == 0);
  struct EndWarmUps {  // the warm-ups' memory and agreement last until the end of this first call
    Session& s;
    ~EndWarmUps() {
      s.warm_up_.release();
      s.warm_ups_agreed_ = false;
    }
  } end_warm_ups{*this};
  const Config& cfg = first_call(key, sendbuf, recvbuf, count, dtype, op, o, phases, trace);
  call(cfg, sendbuf, recvbuf, count, dtype, op, phases, &trace);
  traced.done(last_choice_, cfg.automatic.get(), cfg.auto_native, shared_clock_, engine_, ranks_per_host_);
  if (trace.on()) {
    trace.mark("run");
    log_trace("%s n=%d: first call of %s count=%zu %s %s: %s", api_, nranks_, to_string(o.algorithm), count,
              to_string(dtype), to_string(op), trace.text().c_str());
  }
}

void Session::check_known_call(const Config& cfg, const Options& o, const void* sendbuf, const void* recvbuf,
                               std::size_t count, DataType dtype) {
  if (!o.stragglers.empty()) {  // a fingerprint is not the set: compare, allocation-free
    const std::vector<int>& known = cfg.stragglers;
    bool same = known.size() == o.stragglers.size();
    for (std::size_t i = 0; same && i < o.stragglers.size(); ++i)
      same = std::binary_search(known.begin(), known.end(), o.stragglers[i]);
    if (!same) throw Error(ErrorCode::Internal, std::string(api_) + ": two late sets share a fingerprint");
  }
  try {  // pointers change per call
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

void Session::call(const Config& cfg, const void* sendbuf, void* recvbuf, std::size_t count, DataType dtype,
                   ReduceOp op, PhaseSelection phases, FirstCallTrace* trace) {
  if (count == 0) return;
  try {
    if (cfg.automatic) {
      // A configuration first called out of place, now in place: its in-place memory now, before
      // auto picks (cheap once made: a size check).
      if (sendbuf == recvbuf && phases == PhaseSelection::all && keeps_buffers())
        prepare_auto_in_place(*cfg.automatic, count * size_of(dtype));
      last_auto_ = cfg.automatic;
      AutoCall host(*this, sendbuf, recvbuf, count, dtype, op, cfg.tag, trace);
      last_choice_ = cfg.automatic->call(host, timeout_s_, tickets_ ? &*tickets_ : nullptr);
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

// All or nothing (docs/reliability.md class 6): the executor reduces in the caller's buffer, so
// a call that fails mid-way would leave some chunks partly reduced. In place, where the engine
// allows it (session_keeps_copy), the call first copies the buffer and puts the copy back if it
// raises: the caller's data is then as it was, or fully reduced, never a mix. One copy per call. Out of place the input is sendbuf, which is never written; recvbuf is
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
