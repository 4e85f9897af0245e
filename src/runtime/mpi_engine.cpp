// The MPI engine of the runtime core (mpi_engine.hpp).
#include "runtime/mpi_engine.hpp"

#include <algorithm>
#include <chrono>
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

MpiEngine::MpiEngine(MPI_Comm comm, const Env& e) : comm_(comm), transport_(comm, e.timeout_s) {
  transport_.set_max_piece_bytes(e.max_message_bytes);
  void* attr = nullptr;
  int found = 0;
  check_mpi(MPI_Comm_get_attr(comm, MPI_TAG_UB, &attr, &found), "MPI_Comm_get_attr(MPI_TAG_UB)");
  if (found) tag_ub_ = *static_cast<int*>(attr);
}

void MpiEngine::agree_max(std::span<std::int64_t> values, double timeout_s) {
  if (pending_ != MPI_REQUEST_NULL)  // the session is broken after a timeout; never reuse the buffers
    throw Error(ErrorCode::Internal, "MpiEngine: an earlier agreement is still pending");
  // Engine-owned buffers: after a timeout the request stays pending and may write them later.
  in_.assign(values.begin(), values.end());
  out_.resize(values.size());
  check_mpi(MPI_Iallreduce(in_.data(), out_.data(), static_cast<int>(values.size()), MPI_INT64_T, MPI_MAX, comm_,
                           &pending_),
            "MPI_Iallreduce (argument check)");
  wait_with_timeout(pending_, timeout_s, "MPI_Iallreduce (argument check)");
  std::copy(out_.begin(), out_.end(), values.begin());
}

void MpiEngine::native_allreduce(const void* sendbuf, void* recvbuf, std::size_t count, DataType dtype,
                                 ReduceOp op) {
  MPI_Datatype type = MPI_BYTE;
  MPI_Op mop = MPI_SUM;
  switch (dtype) {
    case DataType::float32: type = MPI_FLOAT; break;
    case DataType::float64: type = MPI_DOUBLE; break;
    case DataType::int32: type = MPI_INT32_T; break;
    case DataType::int64: type = MPI_INT64_T; break;
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

}  // namespace stragglar::detail
