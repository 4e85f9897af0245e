// The MPI engine of the runtime core (mpi_engine.hpp).
#include "runtime/mpi_engine.hpp"
#include "runtime/mpi_split_allgather.hpp"

#include "runtime/transport_allreduce.hpp"

#include <algorithm>
#include <chrono>
#include <memory>
#include <utility>
#include <mutex>
#include <thread>

namespace stragglar::detail {
namespace {

// fp16/bf16 have no MPI type or op: 2-byte elements reduced by the CPU device's loops.
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

// Turns off the transport's check for "gave up" notices after receives for the rounds of one
// call that runs outside the executor (auto's small native), restored however the call ends.
// The timeout needs no such care: the transport's is the session's (Transport::set_timeout).
class NoNoticeCheckAfterReceives {
 public:
  explicit NoNoticeCheckAfterReceives(MpiTransport& t) : t_(t) { t_.set_check_notices_after_receives(false); }
  ~NoNoticeCheckAfterReceives() { t_.set_check_notices_after_receives(true); }
  NoNoticeCheckAfterReceives(const NoNoticeCheckAfterReceives&) = delete;
  NoNoticeCheckAfterReceives& operator=(const NoNoticeCheckAfterReceives&) = delete;

 private:
  MpiTransport& t_;
};

}  // namespace

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

MpiEngine::MpiEngine(MPI_Comm comm, const RuntimeConfig& e)
    : comm_(comm), transport_(comm, e.timeout_s) {
  transport_.set_max_piece_bytes(e.max_message_bytes);
}

const char* MpiEngine::buffer_problem(const void*, const void* recvbuf) const {
  // The front-end turns sendbuf == MPI_IN_PLACE into sendbuf = recvbuf; MPI_IN_PLACE is only
  // ever a send buffer (MPI_Allreduce answers MPI_ERR_BUFFER).
  if (recvbuf == MPI_IN_PLACE) return "recvbuf is MPI_IN_PLACE, expected the buffer (MPI_IN_PLACE goes in sendbuf for in place)";
  return nullptr;
}

std::unique_ptr<CallTimer> MpiEngine::make_timer() {
  if (transport_.nranks() < 2 || transport_.nranks() > kSplitExchangeMaxRanks) return std::make_unique<HostCallTimer>(*this);
  return std::make_unique<HostCallTimer>(*this, std::make_unique<MpiSplitAllgather>(transport_));
}

namespace {

// MPI's datatype and op for ours (fp16/bf16: 2-byte elements and our own ops).
std::pair<MPI_Datatype, MPI_Op> mpi_type_op(DataType dtype, ReduceOp op) {
  switch (dtype) {
    case DataType::float16: return {MPI_UINT16_T, half_op<DataType::float16>(op)};
    case DataType::bfloat16: return {MPI_UINT16_T, half_op<DataType::bfloat16>(op)};
    default: break;
  }
  MPI_Datatype type = MPI_FLOAT;
  switch (dtype) {
    case DataType::float64: type = MPI_DOUBLE; break;
    case DataType::int32: type = MPI_INT32_T; break;
    case DataType::int64: type = MPI_INT64_T; break;
    default: break;
  }
  switch (op) {
    case ReduceOp::prod: return {type, MPI_PROD};
    case ReduceOp::min: return {type, MPI_MIN};
    case ReduceOp::max: return {type, MPI_MAX};
    default: return {type, MPI_SUM};  // sum, and avg (divided afterwards)
  }
}

constexpr std::size_t kPiece = std::size_t{1} << 30;  // MPI counts are int

}  // namespace

void MpiEngine::native_allreduce(const void* sendbuf, void* recvbuf, std::size_t count, DataType dtype,
                                 ReduceOp op, std::optional<NativeBound> bound, bool keep_buffer) {
  if (bound) {
    bounded_native(sendbuf, recvbuf, count, dtype, op, *bound, keep_buffer);
    return;
  }
  const auto [type, mop] = mpi_type_op(dtype, op);
  const bool in_place = sendbuf == recvbuf;
  const std::size_t es = size_of(dtype);
  for (std::size_t off = 0; off < count; off += kPiece) {
    const int n = static_cast<int>(std::min(kPiece, count - off));
    void* r = static_cast<char*>(recvbuf) + off * es;
    const void* s = in_place ? MPI_IN_PLACE : static_cast<const char*>(sendbuf) + off * es;
    check_mpi(MPI_Allreduce(s, r, n, type, mop, comm_), "MPI_Allreduce (native)");
  }
  if (op == ReduceOp::avg) device_.finish_average(recvbuf, count, dtype, transport_.nranks());
}

void MpiEngine::reserve(std::size_t native_bytes, bool native_keeps_buffer, std::size_t agreement_values) {
  reserve_native(native_bytes, native_keeps_buffer);
  // MPI_Iallreduce's temporaries (Open MPI's libnbc mallocs and frees one of the message's size
  // per call): the allocator readied with the configuration, not in its first calls. Never
  // shrinks, so that an in-place call's reserve (Session::prepare_auto_in_place) is a size check.
  if (native_bytes > kTransportNativeMaxBytes && native_bytes > allocator_ready_bytes_) {
    warm_allocator_for(native_bytes);
    allocator_ready_bytes_ = native_bytes;
  }
  reserve_agreement(agreement_values);
}

void MpiEngine::reserve_native(std::size_t bytes, bool keeps_buffer) {
  // transport_allreduce needs its staging (every rank's contribution up to 16 ranks, else the
  // running partial and a receive: transport_allreduce.hpp); a larger message needs
  // its result's (bounded_native) when the caller's buffer is kept, else it runs on the caller's.
  if (bytes > kTransportNativeMaxBytes) iallreduce_algorithm_.prepare();  // once per process: not in a call
  if (bytes > kTransportNativeMaxBytes && !keeps_buffer) return;
  const std::size_t want =
      bytes > kTransportNativeMaxBytes ? bytes : transport_allreduce_staging_bytes(transport_.nranks(), bytes);
  if (native_stage_bytes_ >= want) return;
  // Never shrinks (the staging of the largest message so far).
  native_stage_ = std::make_unique_for_overwrite<std::byte[]>(want);
  advise_huge_pages(native_stage_.get(), want);
  // The small staging's pages faulted in now, when the configuration is made, not in its first
  // call (cpu_device.hpp). A large one is left to MPI_Iallreduce's first run, which pays its
  // temporaries' first touch anyway and is measured again (auto's first call does not run it).
  if (bytes <= kTransportNativeMaxBytes) touch_pages(native_stage_.get(), want);
  native_stage_bytes_ = want;
}

void MpiEngine::bounded_native(const void* sendbuf, void* recvbuf, std::size_t count, DataType dtype, ReduceOp op,
                               const NativeBound& bound, bool keep_buffer) {
  if (native_pending_ != MPI_REQUEST_NULL)  // the session is broken after a timeout; never reuse the buffer
    throw Error(ErrorCode::Internal, "MpiEngine: an earlier native AllReduce is still pending");
  const std::size_t es = size_of(dtype);
  const bool in_place = sendbuf == recvbuf;
  const bool staged = in_place && keep_buffer;
  reserve_native(count * es, staged);  // sized when auto's configuration was made: no allocation here
  if (count * es <= kTransportNativeMaxBytes) {
    // Every buffer in the staging memory: a receive a timeout leaves behind writes only there.
    std::byte* partial = native_stage_.get();
    device_.copy(partial, sendbuf, count * es);
    // Every buffer sent from is the staging memory, which nothing rewrites after a failure: a
    // receive that completed read what its sender meant, and the per-round probe for notices
    // (a yield on a shared core) can go. A rank that gave up is still seen by the 0.1 s probes
    // of a round that waits on it.
    void* result = nullptr;
    {
      const NoNoticeCheckAfterReceives during(transport_);  // timeout: the transport's, the session's
      result = transport_allreduce(transport_, device_, partial, count, dtype, op, bound.tag);
    }
    device_.copy(recvbuf, result, count * es);
    if (op == ReduceOp::avg) device_.finish_average(recvbuf, count, dtype, transport_.nranks());
    return;
  }
  const auto [type, mop] = mpi_type_op(dtype, op);
  // In pieces of at most INT_MAX elements, one deadline for the whole call. MPI cannot cancel a
  // collective: after a timeout the request stays pending and still reads the send buffer and
  // writes the result buffer when the late peer joins. In place with a kept buffer
  // (keep_buffer: STRAGGLAR_KEEP_BUFFERS=1, the default, and an error handler that returns):
  // from the caller's data into the engine's staging memory, copied back once every piece is
  // done, so a call that raises leaves the caller's data as it was, now and later; one copy of
  // the buffer per call. Out of place (sendbuf is only read) and without a kept buffer: on the
  // caller's buffers (docs/reliability.md, classes 6, 7).
  std::byte* const result = staged ? native_stage_.get() : static_cast<std::byte*>(recvbuf);
  const double deadline = MPI_Wtime() + bound.timeout_s;
  for (std::size_t off = 0; off < count; off += kPiece) {
    const int n = static_cast<int>(std::min(kPiece, count - off));
    void* r = result + off * es;
    const void* s = in_place && !staged ? MPI_IN_PLACE : static_cast<const char*>(sendbuf) + off * es;
    check_mpi(iallreduce_algorithm_.post(s, r, n, type, mop, comm_, &native_pending_),
              "MPI_Iallreduce (native, run by auto)");
    wait_with_timeout(native_pending_, std::max(deadline - MPI_Wtime(), 1e-9), "MPI_Iallreduce (native, run by auto)",
                      WaitPolls::yield);  // as MPI_Allreduce waits: libnbc advances only in MPI_Test
  }
  if (staged) device_.copy(recvbuf, result, count * es);
  if (op == ReduceOp::avg) device_.finish_average(recvbuf, count, dtype, transport_.nranks());
}

}  // namespace stragglar::detail
