// stragglar::allreduce over MPI: communicator state, caches, argument checks, native path.
//
// Per communicator (cached as an MPI attribute, freed with the communicator or at
// MPI_Finalize): a private MPI_Comm_dup with MPI_ERRORS_RETURN, an MpiTransport, a CpuDevice,
// an Executor, one scratch buffer (grown, never shrunk) and a table of configurations
// (method, straggler, pipeline, count, dtype, op) already agreed on by all ranks, each with
// its compiled Plan. The first call of a configuration runs one small MPI_Iallreduce of a
// packed signature (agreement + "my arguments are valid"); every later call is a hash lookup
// and the executor — no synthesis, no allocation, no collective that would wait for the
// straggler.
#include "stragglar/allreduce.hpp"

#include <algorithm>
#include <array>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <tuple>
#include <unordered_map>

#include "stragglar/config.hpp"
#include "stragglar/plan.hpp"
#include "stragglar/runtime/cpu_device.hpp"
#include "stragglar/runtime/env.hpp"
#include "stragglar/runtime/mpi_transport.hpp"
#include "stragglar/verify.hpp"

namespace stragglar {
namespace {

constexpr int kMaxPipeline = 4096;
constexpr int kNativeMethod = 100;  // method id of `native` in signatures (algorithms: 0..4)

int method_id(const Options& o) { return o.native ? kNativeMethod : static_cast<int>(o.algorithm); }

bool uses_straggler(Algorithm a) { return a == Algorithm::stragglar || a == Algorithm::broadcast; }

// ---- schedules: one global, verified cache ---------------------------------------------------
using ScheduleKey = std::tuple<int, int, int, int>;  // algorithm, n, straggler (-1: none), K
std::mutex g_schedule_mutex;
std::map<ScheduleKey, std::shared_ptr<const Schedule>> g_schedules;

CostModel cost_for(const Options& o) {
  if (o.cost) return *o.cost;
  return env().cost;
}

// ---- configurations ---------------------------------------------------------------------------
struct ConfigKey {
  int method, straggler, pipeline;
  std::size_t count;
  int dtype, op;
  bool operator==(const ConfigKey&) const = default;
};
struct ConfigKeyHash {
  std::size_t operator()(const ConfigKey& k) const noexcept {
    std::uint64_t h = 1469598103934665603ull;  // FNV-1a over the fields
    for (std::uint64_t v : {std::uint64_t(k.method), std::uint64_t(k.straggler),
                            std::uint64_t(k.pipeline), std::uint64_t(k.count),
                            std::uint64_t(k.dtype), std::uint64_t(k.op)}) {
      h ^= v;
      h *= 1099511628211ull;
    }
    return static_cast<std::size_t>(h);
  }
};
struct ConfigEntry {
  std::shared_ptr<const Plan> plan;  // null for native
  int tag = 1;
};

struct CommState {
  MPI_Comm user = MPI_COMM_NULL;
  MPI_Comm dup = MPI_COMM_NULL;
  int rank = 0;
  int nranks = 0;
  std::unique_ptr<MpiTransport> transport;
  CpuDevice device;
  std::unique_ptr<Executor> executor;
  void* scratch = nullptr;
  std::size_t scratch_size = 0;
  std::unordered_map<ConfigKey, ConfigEntry, ConfigKeyHash> configs;
  std::map<std::tuple<int, int, int>, std::shared_ptr<const Plan>> plans;  // algo, straggler, K

  ~CommState() {
    device.deallocate(scratch);
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (dup != MPI_COMM_NULL && !finalized) MPI_Comm_free(&dup);
  }
};

// ---- communicator attribute -------------------------------------------------------------------
std::mutex g_comm_mutex;
int g_keyval = MPI_KEYVAL_INVALID;
int g_self_keyval = MPI_KEYVAL_INVALID;
std::set<CommState*> g_states;
std::once_flag g_info_once;

int delete_state(MPI_Comm, int, void* attr, void*) {
  auto* st = static_cast<CommState*>(attr);
  {
    std::lock_guard<std::mutex> lock(g_comm_mutex);
    g_states.erase(st);
  }
  delete st;
  return MPI_SUCCESS;
}

// MPI_Finalize deletes MPI_COMM_SELF's attributes first, while MPI is fully usable: free every
// state there (MPI_COMM_WORLD's attributes are not reliably deleted at a usable moment).
int finalize_hook(MPI_Comm, int, void*, void*) {
  std::vector<std::pair<MPI_Comm, CommState*>> states;
  {
    std::lock_guard<std::mutex> lock(g_comm_mutex);
    for (CommState* st : g_states) states.emplace_back(st->user, st);
  }
  for (auto& [comm, st] : states) MPI_Comm_delete_attr(comm, g_keyval);
  return MPI_SUCCESS;
}

void ensure_keyvals() {
  std::lock_guard<std::mutex> lock(g_comm_mutex);
  if (g_keyval != MPI_KEYVAL_INVALID) return;
  check_mpi(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, delete_state, &g_keyval, nullptr),
            "MPI_Comm_create_keyval");
  check_mpi(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, finalize_hook, &g_self_keyval, nullptr),
            "MPI_Comm_create_keyval");
  check_mpi(MPI_Comm_set_attr(MPI_COMM_SELF, g_self_keyval, nullptr), "MPI_Comm_set_attr");
}

CommState& state_for(MPI_Comm comm) {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  require(initialized && !finalized,
          "stragglar::allreduce: MPI is not initialized (or already finalized); call MPI_Init first");
  require(comm != MPI_COMM_NULL, "stragglar::allreduce: comm is MPI_COMM_NULL, expected a communicator");
  ensure_keyvals();
  void* attr = nullptr;
  int found = 0;
  check_mpi(MPI_Comm_get_attr(comm, g_keyval, &attr, &found), "MPI_Comm_get_attr");
  if (found) return *static_cast<CommState*>(attr);

  int inter = 0;
  check_mpi(MPI_Comm_test_inter(comm, &inter), "MPI_Comm_test_inter");
  require(!inter, "stragglar::allreduce: comm is an intercommunicator, expected an intracommunicator");
  const Env& e = env();
  auto st = std::make_unique<CommState>();
  st->user = comm;
  // Collective: made with Idup + polled wait so a dead peer ends in Timeout, not a hang.
  MPI_Request req = MPI_REQUEST_NULL;
  check_mpi(MPI_Comm_idup(comm, &st->dup, &req), "MPI_Comm_idup");
  wait_with_timeout(req, e.timeout_s, "MPI_Comm_idup (first stragglar call on this communicator)");
  check_mpi(MPI_Comm_set_errhandler(st->dup, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
  st->transport = std::make_unique<MpiTransport>(st->dup, e.timeout_s);
  st->transport->set_max_piece_bytes(e.max_message_bytes);
  st->rank = st->transport->rank();
  st->nranks = st->transport->nranks();
  st->executor = std::make_unique<Executor>(*st->transport, st->device);
  if (e.debug_info && st->rank == 0)
    std::call_once(g_info_once, [&] {
      std::fprintf(stderr, "stragglar INFO: version %s, config: %s\n", STRAGGLAR_VERSION,
                   e.to_string().c_str());
    });
  check_mpi(MPI_Comm_set_attr(comm, g_keyval, st.get()), "MPI_Comm_set_attr");
  CommState* raw = st.release();
  std::lock_guard<std::mutex> lock(g_comm_mutex);
  g_states.insert(raw);
  return *raw;
}

// ---- argument checks (local) ------------------------------------------------------------------
void check_local(const void* sendbuf, void* recvbuf, std::size_t count, DataType dtype,
                 ReduceOp op, int nranks, const Options& o) {
  const int d = static_cast<int>(dtype);
  require(d >= stragglar_float32 && d <= stragglar_int64,
          "stragglar::allreduce: dtype " + std::to_string(d) +
              " is not valid, expected float32, float64, float16, bfloat16, int32 or int64 (0..5)");
  const int p = static_cast<int>(op);
  require(p >= stragglar_sum && p <= stragglar_avg,
          "stragglar::allreduce: op " + std::to_string(p) +
              " is not valid, expected sum, prod, min, max or avg (0..4)");
  const int a = static_cast<int>(o.algorithm);
  require(a >= 0 && a <= static_cast<int>(Algorithm::broadcast),
          "stragglar::allreduce: algorithm " + std::to_string(a) +
              " is not valid, expected stragglar, ring, rhd, allpairs or broadcast (0..4)");
  require(o.straggler >= -1 && o.straggler < nranks,
          "stragglar::allreduce: straggler " + std::to_string(o.straggler) + " is outside [0, " +
              std::to_string(nranks) + ") (or -1 for rank n-1)");
  require(o.pipeline >= 0 && o.pipeline <= kMaxPipeline,
          "stragglar::allreduce: pipeline " + std::to_string(o.pipeline) + " is outside [1, " +
              std::to_string(kMaxPipeline) + "] (or 0 for auto)");
  const int ph = static_cast<int>(o.phases);
  require(ph >= 0 && ph <= 2, "stragglar::allreduce: phases " + std::to_string(ph) + " is not a PhaseSelection");
  const std::size_t es = size_of(dtype);
  require(count <= static_cast<std::size_t>(INT64_MAX) / es,
          "stragglar::allreduce: count " + std::to_string(count) + " is too large for " +
              to_string(dtype) + " (bytes overflow)");
  if (count == 0) return;
  require(recvbuf != nullptr, "stragglar::allreduce: recvbuf is NULL with count " +
                                  std::to_string(count) + ", expected a buffer");
  const bool in_place = sendbuf == recvbuf || sendbuf == MPI_IN_PLACE;
  if (!in_place) {
    require(sendbuf != nullptr, "stragglar::allreduce: sendbuf is NULL with count " +
                                    std::to_string(count) +
                                    ", expected a buffer (or recvbuf / MPI_IN_PLACE for in place)");
    const auto s = reinterpret_cast<std::uintptr_t>(sendbuf);
    const auto r = reinterpret_cast<std::uintptr_t>(recvbuf);
    const std::size_t bytes = count * es;
    require(s + bytes <= r || r + bytes <= s,
            "stragglar::allreduce: sendbuf and recvbuf overlap partially; expected the same "
            "pointer (in place) or disjoint buffers");
  }
}

// ---- agreement across ranks -------------------------------------------------------------------
constexpr std::array<const char*, 8> kSignatureFields = {
    "ok", "algorithm", "straggler", "pipeline", "pipeline (resolved)", "count", "dtype", "op"};

// A signature value as the user wrote it ("ring", "float", "sum"), numbers otherwise.
std::string field_value(std::size_t field, std::int64_t v) {
  const bool small = v >= 0 && v < 16;
  if (field == 1 && v == kNativeMethod) return "native";
  if (field == 1 && small && v <= static_cast<int>(Algorithm::broadcast))
    return to_string(static_cast<Algorithm>(v));
  if (field == 6 && small && v <= stragglar_int64) return to_string(static_cast<DataType>(v));
  if (field == 7 && small && v <= stragglar_avg) return to_string(static_cast<ReduceOp>(v));
  if ((field == 3 || field == 4) && v == kPipelineAuto) return "auto";
  return std::to_string(v);
}

// One MPI_Iallreduce(MAX) of (v, -v) gives every rank the max and min of every field. Fails
// the same way on every rank: its own invalid arguments, another rank's, or a disagreement.
void agree(CommState& st, std::array<std::int64_t, 8> sig, const Error* local_error) {
  std::array<std::int64_t, 18> buf{};
  for (std::size_t i = 0; i < sig.size(); ++i) {
    buf[i] = sig[i];
    buf[sig.size() + i] = -sig[i];
  }
  // The lowest rank with invalid arguments, so the others can name it.
  buf[16] = local_error ? -static_cast<std::int64_t>(st.rank) : -std::int64_t{INT_MAX};
  buf[17] = 0;
  std::array<std::int64_t, 18> out{};
  MPI_Request req = MPI_REQUEST_NULL;
  check_mpi(MPI_Iallreduce(buf.data(), out.data(), static_cast<int>(buf.size()), MPI_INT64_T,
                           MPI_MAX, st.dup, &req),
            "MPI_Iallreduce (argument check)");
  wait_with_timeout(req, env().timeout_s, "rank " + std::to_string(st.rank) +
                                              ": the argument check of a new configuration");
  if (local_error) throw Error(local_error->code(), local_error->what());
  const std::int64_t min_ok = -out[sig.size()];
  if (min_ok == 0)
    throw Error(ErrorCode::RemoteError,
                "stragglar::allreduce: rank " + std::to_string(-out[16]) +
                    " rejected its arguments for this call (see its error); no data was moved");
  for (std::size_t i = 1; i < sig.size(); ++i) {
    const std::int64_t hi = out[i], lo = -out[sig.size() + i];
    if (hi != lo)
      throw Error(ErrorCode::Mismatch,
                  std::string("stragglar::allreduce: ranks disagree on ") + kSignatureFields[i] +
                      ": values range from " + field_value(i, lo) + " to " + field_value(i, hi) +
                      " (rank " + std::to_string(st.rank) + " passed " + field_value(i, sig[i]) +
                      "); every rank must pass the same arguments");
  }
}

std::shared_ptr<const Plan> plan_for(CommState& st, const Options& o, std::size_t bytes) {
  const int straggler = o.straggler < 0 ? st.nranks - 1 : o.straggler;
  const int k = resolve_pipeline(o, st.nranks, bytes);
  const auto key = std::make_tuple(static_cast<int>(o.algorithm),
                                   uses_straggler(o.algorithm) ? straggler : -1, k);
  auto it = st.plans.find(key);
  if (it != st.plans.end()) return it->second;
  Options resolved = o;
  resolved.straggler = straggler;
  resolved.pipeline = k;
  std::shared_ptr<const Schedule> s = schedule_for(resolved, st.nranks, bytes);
  auto plan = std::make_shared<const Plan>(compile(*s, st.rank));
  if (env().debug_info && st.rank == 0)
    std::fprintf(stderr, "stragglar INFO: n=%d %s: %s\n", st.nranks, algorithm_name(o),
                 summary(*s, verify(*s)).c_str());
  st.plans.emplace(key, plan);
  return plan;
}

// ---- native: MPI_Allreduce --------------------------------------------------------------------
template <DataType T, ReduceOp Op>
void user_op(void* in, void* inout, int* len, MPI_Datatype*) {
  cpu_reduce(inout, in, static_cast<std::size_t>(*len), T, Op);
}

template <DataType T>
MPI_Op half_op(ReduceOp op) {
  static std::once_flag once;
  static MPI_Op ops[4];
  std::call_once(once, [] {
    check_mpi(MPI_Op_create(&user_op<T, ReduceOp::sum>, 1, &ops[0]), "MPI_Op_create");
    check_mpi(MPI_Op_create(&user_op<T, ReduceOp::prod>, 1, &ops[1]), "MPI_Op_create");
    check_mpi(MPI_Op_create(&user_op<T, ReduceOp::min>, 1, &ops[2]), "MPI_Op_create");
    check_mpi(MPI_Op_create(&user_op<T, ReduceOp::max>, 1, &ops[3]), "MPI_Op_create");
  });
  switch (op) {
    case ReduceOp::prod: return ops[1];
    case ReduceOp::min: return ops[2];
    case ReduceOp::max: return ops[3];
    default: return ops[0];
  }
}

void native_allreduce(CommState& st, const void* sendbuf, void* recvbuf, std::size_t count,
                      DataType dtype, ReduceOp op) {
  MPI_Datatype type = MPI_BYTE;
  MPI_Op mop = MPI_SUM;
  switch (dtype) {
    case DataType::float32: type = MPI_FLOAT; break;
    case DataType::float64: type = MPI_DOUBLE; break;
    case DataType::int32: type = MPI_INT32_T; break;
    case DataType::int64: type = MPI_INT64_T; break;
    // No MPI type/op for fp16/bf16: 2-byte elements reduced by our own loops (user MPI_Op).
    case DataType::float16: type = MPI_UINT16_T; mop = half_op<DataType::float16>(op); break;
    case DataType::bfloat16: type = MPI_UINT16_T; mop = half_op<DataType::bfloat16>(op); break;
  }
  if (dtype != DataType::float16 && dtype != DataType::bfloat16) {
    switch (op) {
      case ReduceOp::sum:
      case ReduceOp::avg: mop = MPI_SUM; break;
      case ReduceOp::prod: mop = MPI_PROD; break;
      case ReduceOp::min: mop = MPI_MIN; break;
      case ReduceOp::max: mop = MPI_MAX; break;
    }
  }
  const bool in_place = sendbuf == recvbuf || sendbuf == MPI_IN_PLACE;
  const std::size_t es = size_of(dtype);
  constexpr std::size_t kPiece = std::size_t{1} << 30;  // MPI counts are int
  for (std::size_t off = 0; off < count; off += kPiece) {
    const int n = static_cast<int>(std::min(kPiece, count - off));
    void* r = static_cast<char*>(recvbuf) + off * es;
    const void* s = in_place ? MPI_IN_PLACE : static_cast<const char*>(sendbuf) + off * es;
    check_mpi(MPI_Allreduce(s, r, n, type, mop, st.dup), "MPI_Allreduce (native)");
  }
  if (op == ReduceOp::avg) st.device.finish_average(recvbuf, count, dtype, st.nranks);
}

}  // namespace

Options options_for(std::string_view name) {
  Options o;
  if (name == "native" || name == "mpi") {
    o.native = true;
    return o;
  }
  try {
    o.algorithm = parse_algorithm(name);
  } catch (const Error&) {
    throw Error(ErrorCode::InvalidUsage,
                "algorithm '" + std::string(name) +
                    "' is not known, expected stragglar, ring, rhd, allpairs, broadcast (direct) or native");
  }
  return o;
}

const char* algorithm_name(const Options& o) noexcept {
  return o.native ? "native" : to_string(o.algorithm);
}

int resolve_pipeline(const Options& o, int nranks, std::size_t bytes) {
  if (o.native || o.algorithm != Algorithm::stragglar) return 1;
  require(o.pipeline >= 0 && o.pipeline <= kMaxPipeline,
          "pipeline " + std::to_string(o.pipeline) + " is outside [1, " +
              std::to_string(kMaxPipeline) + "] (or 0 for auto)");
  if (o.pipeline != kPipelineAuto) return o.pipeline;
  return std::max(1, choose_pipeline(nranks, bytes, cost_for(o)));
}

std::shared_ptr<const Schedule> schedule_for(const Options& o, int nranks, std::size_t bytes) {
  require(!o.native, "schedule_for: the native algorithm (MPI_Allreduce) has no schedule");
  const int k = resolve_pipeline(o, nranks, bytes);
  const int straggler = o.straggler < 0 ? nranks - 1 : o.straggler;
  const ScheduleKey key{static_cast<int>(o.algorithm), nranks,
                        uses_straggler(o.algorithm) ? straggler : -1, k};
  {
    std::lock_guard<std::mutex> lock(g_schedule_mutex);
    auto it = g_schedules.find(key);
    if (it != g_schedules.end()) return it->second;
  }
  SynthOptions so;
  if (uses_straggler(o.algorithm)) so.straggler = straggler;
  so.pipeline = k;
  so.bytes = bytes;
  so.cost = cost_for(o);
  auto s = std::make_shared<const Schedule>(synthesize(o.algorithm, nranks, so));
  if (env().verify) verify_or_throw(*s);  // once, when it enters the cache
  std::lock_guard<std::mutex> lock(g_schedule_mutex);
  return g_schedules.emplace(key, std::move(s)).first->second;
}

void allreduce(const void* sendbuf, void* recvbuf, std::size_t count, DataType dtype, ReduceOp op,
               MPI_Comm comm, const Options& o) {
  CommState& st = state_for(comm);
  const ConfigKey key{method_id(o), o.straggler < 0 ? st.nranks - 1 : o.straggler, o.pipeline,
                      count, static_cast<int>(dtype), static_cast<int>(op)};
  auto it = st.configs.find(key);
  if (it == st.configs.end()) {
    // First call of this configuration: validate and build the plan locally, then agree.
    ConfigEntry entry;
    std::optional<Error> local_error;
    std::int64_t resolved_k = 1;
    try {
      check_local(sendbuf, recvbuf, count, dtype, op, st.nranks, o);
      const std::size_t bytes = count * size_of(dtype);
      resolved_k = resolve_pipeline(o, st.nranks, bytes);
      if (!o.native) entry.plan = plan_for(st, o, bytes);
    } catch (const Error& e) {
      local_error = e;
    } catch (const std::exception& e) {
      local_error = Error(ErrorCode::Internal, e.what());
    }
    const std::array<std::int64_t, 8> sig = {
        local_error ? 0 : 1,         key.method, key.straggler,       key.pipeline,
        resolved_k,                  static_cast<std::int64_t>(count), key.dtype, key.op};
    agree(st, sig, local_error ? &*local_error : nullptr);
    entry.tag = 1 + static_cast<int>(ConfigKeyHash{}(key) % 32000);  // MPI_TAG_UB >= 32767
    it = st.configs.emplace(key, std::move(entry)).first;
  } else {
    check_local(sendbuf, recvbuf, count, dtype, op, st.nranks, o);
  }
  if (count == 0) return;

  if (o.native) {
    native_allreduce(st, sendbuf, recvbuf, count, dtype, op);
    return;
  }
  const Plan& plan = *it->second.plan;
  const std::size_t bytes = count * size_of(dtype);
  const std::size_t need = Executor::scratch_bytes(plan, count, dtype);
  if (need > st.scratch_size) {
    void* fresh = st.device.allocate(need);
    st.device.deallocate(st.scratch);
    st.scratch = fresh;
    st.scratch_size = need;
  }
  const bool in_place = sendbuf == recvbuf || sendbuf == MPI_IN_PLACE;
  if (!in_place && o.phases != PhaseSelection::waiting_only) st.device.copy(recvbuf, sendbuf, bytes);
  st.transport->set_tag(it->second.tag);
  st.executor->run(plan, recvbuf, count, dtype, op, st.scratch, st.scratch_size, o.phases);
}

}  // namespace stragglar
