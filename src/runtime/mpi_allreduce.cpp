// The MPI front-end: stragglar::allreduce on an MPI communicator (include/stragglar/allreduce.hpp).
//
// Thin by design: everything but the engine lives in the runtime core (session.hpp). Here:
// per communicator (an MPI attribute, freed with the communicator or at MPI_Finalize) a private
// MPI_Comm_idup with MPI_ERRORS_RETURN, and an MpiEngine — MpiTransport, CpuDevice, the
// agreement as one MPI_Iallreduce(MAX) on buffers the engine owns, and MPI_Allreduce as `native`.
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <mutex>
#include <thread>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "runtime/cpu_device.hpp"
#include "runtime/env.hpp"
#include "runtime/mpi_session.hpp"
#include "runtime/mpi_transport.hpp"
#include "runtime/session.hpp"
#include "stragglar/allreduce.hpp"

namespace stragglar {
namespace {

// Polls a request left pending by a timeout until it completes, for at most timeout_s.
bool settle_request(MPI_Request& request, double timeout_s) {
  const double start = MPI_Wtime();
  for (;;) {
    int done = 1;
    if (request != MPI_REQUEST_NULL && MPI_Test(&request, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) return false;
    if (done) return true;
    if (MPI_Wtime() - start > timeout_s) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

// ---- native: MPI_Allreduce; fp16/bf16 through user ops running the CPU device's loops -------
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

class MpiEngine final : public detail::Engine {
 public:
  MpiEngine(MPI_Comm dup, const detail::Env& e) : comm_(dup), transport_(dup, e.timeout_s) {
    transport_.set_max_piece_bytes(e.max_message_bytes);
    void* attr = nullptr;
    int found = 0;
    check_mpi(MPI_Comm_get_attr(dup, MPI_TAG_UB, &attr, &found), "MPI_Comm_get_attr(MPI_TAG_UB)");
    tag_ub_ = found ? *static_cast<int*>(attr) : 32767;  // the standard's guaranteed minimum
  }
  Transport& transport() override { return transport_; }
  Device& device() override { return device_; }
  int max_tag() const override { return tag_ub_; }
  bool writes_may_be_pending() const override { return transport_.abandoned_receives(); }
  bool pending() const { return pending_ != MPI_REQUEST_NULL; }
  // Whether a timed-out agreement has completed (then its buffers may go), waiting for it at
  // most `timeout_s`: the late peer has usually joined by the time the communicator is freed.
  bool settle(double timeout_s) { return settle_request(pending_, timeout_s); }

  void agree_max(std::span<std::int64_t> values, double timeout_s) override {
    if (pending_ != MPI_REQUEST_NULL)  // the session is broken after a timeout; never reuse the buffers
      throw Error(ErrorCode::Internal, "MpiEngine: an earlier agreement is still pending");
    // Engine-owned buffers: after a timeout the request stays pending and may write them later.
    in_.assign(values.begin(), values.end());
    out_.resize(values.size());
    check_mpi(MPI_Iallreduce(in_.data(), out_.data(), static_cast<int>(values.size()), MPI_INT64_T, MPI_MAX,
                             comm_, &pending_),
              "MPI_Iallreduce (argument check)");
    wait_with_timeout(pending_, timeout_s, "MPI_Iallreduce (argument check)");
    std::copy(out_.begin(), out_.end(), values.begin());
  }

  void native_allreduce(const void* sendbuf, void* recvbuf, std::size_t count, DataType dtype,
                        ReduceOp op) override {
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
    const bool in_place = sendbuf == recvbuf;
    const std::size_t es = size_of(dtype);
    constexpr std::size_t kPiece = std::size_t{1} << 30;  // MPI counts are int
    for (std::size_t off = 0; off < count; off += kPiece) {
      const int n = static_cast<int>(std::min(kPiece, count - off));
      void* r = static_cast<char*>(recvbuf) + off * es;
      const void* s = in_place ? MPI_IN_PLACE : static_cast<const char*>(sendbuf) + off * es;
      check_mpi(MPI_Allreduce(s, r, n, type, mop, comm_), "MPI_Allreduce (native)");
    }
    if (op == ReduceOp::avg) device_.finish_average(recvbuf, count, dtype, transport_.nranks());
  }

 private:
  MPI_Comm comm_;
  MpiTransport transport_;
  CpuDevice device_;
  std::vector<std::int64_t> in_, out_;
  MPI_Request pending_ = MPI_REQUEST_NULL;
  int tag_ub_ = 32767;
};

// One per user communicator, kept as an MPI attribute.
struct CommState {
  MPI_Comm user = MPI_COMM_NULL;
  MPI_Comm dup = MPI_COMM_NULL;
  MPI_Request idup = MPI_REQUEST_NULL;  // still pending when the idup timed out
  std::optional<Error> setup_error;
  std::unique_ptr<MpiEngine> engine;
  std::unique_ptr<detail::Session> session;

  // Operations a timeout left pending must complete before their memory and their
  // communicators go: an MPI_Comm_idup still in flight at MPI_Finalize crashes Open MPI, and a
  // pending MPI_Iallreduce writes the engine's buffers. Each gets up to STRAGGLAR_TIMEOUT_S
  // more (the late peer has usually arrived by now); whatever is still pending after that is
  // left alone, its memory leaked rather than freed under it.
  ~CommState() {
    int finalized = 0;
    MPI_Finalized(&finalized);
    session.reset();
    if (finalized) {  // nothing may call MPI any more; the handles die with the process
      (void)engine.release();
      return;
    }
    // At least a second even under a tiny STRAGGLAR_TIMEOUT_S: an idup every rank has posted
    // needs a few progress rounds.
    const double timeout_s = std::max(detail::env().timeout_s, 1.0);
    bool dup_busy = !settle_request(idup, timeout_s);
    if (engine && !engine->settle(timeout_s)) {
      (void)engine.release();
      dup_busy = true;
    }
    engine.reset();
    if (dup != MPI_COMM_NULL && !dup_busy) MPI_Comm_free(&dup);
  }
};

// ---- the communicator attribute -------------------------------------------------------------
std::mutex g_comm_mutex;
int g_keyval = MPI_KEYVAL_INVALID;
int g_self_keyval = MPI_KEYVAL_INVALID;
std::set<CommState*> g_states;

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

constexpr const char* kApi = "stragglar::allreduce";

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
  if (found) {
    auto& st = *static_cast<CommState*>(attr);
    if (st.setup_error)
      throw Error(st.setup_error->code(), std::string(kApi) + ": this communicator is unusable after an earlier failure (" +
                                              st.setup_error->what() + "); free it and create a new one");
    return st;
  }
  int inter = 0;
  check_mpi(MPI_Comm_test_inter(comm, &inter), "MPI_Comm_test_inter");
  require(!inter, "stragglar::allreduce: comm is an intercommunicator, expected an intracommunicator");
  const detail::Env& e = detail::env();
  // Attached before the collective idup, so that a timed-out idup leaves a broken state behind
  // (later calls fail at once) and nobody frees a communicator still being created.
  auto* st = new CommState;
  st->user = comm;
  if (const int rc = MPI_Comm_set_attr(comm, g_keyval, st); rc != MPI_SUCCESS) {
    delete st;
    check_mpi(rc, "MPI_Comm_set_attr");
  }
  {
    std::lock_guard<std::mutex> lock(g_comm_mutex);
    g_states.insert(st);
  }
  try {
    check_mpi(MPI_Comm_idup(comm, &st->dup, &st->idup), "MPI_Comm_idup");
    wait_with_timeout(st->idup, e.timeout_s, "MPI_Comm_idup (the first stragglar call on this communicator)");
    check_mpi(MPI_Comm_set_errhandler(st->dup, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
    st->engine = std::make_unique<MpiEngine>(st->dup, e);
    st->session = std::make_unique<detail::Session>(*st->engine, kApi);
  } catch (const Error& err) {
    st->setup_error = Error(err.code(), std::string(kApi) + ": " + err.what());
    throw *st->setup_error;
  }
  return *st;
}

}  // namespace

namespace detail {
Session& mpi_session(MPI_Comm comm) { return *state_for(comm).session; }
}  // namespace detail

void allreduce(const void* sendbuf, void* recvbuf, std::size_t count, DataType dtype, ReduceOp op, MPI_Comm comm,
               const Options& opts) {
  detail::Session& session = *state_for(comm).session;
  session.allreduce(sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf, recvbuf, count, dtype, op, opts);
}

}  // namespace stragglar
