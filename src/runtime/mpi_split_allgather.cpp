// auto's exchange over MPI, split around the next call (mpi_split_allgather.hpp).
#include "runtime/mpi_split_allgather.hpp"

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>

#include "runtime/env.hpp"
#include "stragglar/error.hpp"

namespace stragglar::detail {

MpiSplitAllgather::MpiSplitAllgather(MpiTransport& transport)
    : transport_(transport), memory_(std::make_unique<std::vector<std::int64_t>>()) {}

MpiSplitAllgather::~MpiSplitAllgather() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!round_.posted()) return;
  if (finalized) {  // MPI is gone: nothing to wait for or cancel, and nothing may free the memory
    (void)memory_.release();
    return;
  }
  // The last call's exchange: every peer posts its part when it finishes that call, so it comes
  // unless a peer died. Waited for (at most STRAGGLAR_TIMEOUT_S, at least a second) rather than
  // cancelled: a part arriving after its receive was cancelled would stay on the communicator and
  // be matched by the next communicator Open MPI makes with its context id.
  const double deadline = MPI_Wtime() + std::max(cleanup_timeout_s(), 1.0);
  int done = 0;
  while (MPI_Testall(static_cast<int>(round_.requests.size()), round_.requests.data(), &done,
                     MPI_STATUSES_IGNORE) == MPI_SUCCESS &&
         !done && MPI_Wtime() < deadline)
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  if (done) return;
  transport_.abandon(round_);
  transport_.mark_stray_messages();  // the communicator is kept until MPI_Finalize
  if (round_.left_pending) (void)memory_.release();
}

void MpiSplitAllgather::size_for(std::size_t values) {
  const int n = transport_.nranks();
  if (values % static_cast<std::size_t>(n) != 0)
    throw Error(ErrorCode::Internal, "MpiSplitAllgather: " + std::to_string(values) + " values for " +
                                         std::to_string(n) + " ranks, expected a multiple");
  if (memory_->size() == values) return;
  memory_->assign(values, -1);
  slots_ = values / static_cast<std::size_t>(n);
  mine_ = static_cast<std::size_t>(transport_.rank()) * slots_;
  const std::size_t bytes = slots_ * sizeof(std::int64_t);
  sends_.clear();
  recvs_.clear();
  for (int p = 0; p < n; ++p) {
    if (p == transport_.rank()) continue;
    sends_.push_back({p, memory_->data() + mine_, bytes});
    recvs_.push_back({p, memory_->data() + static_cast<std::size_t>(p) * slots_, bytes});
  }
}

void MpiSplitAllgather::reserve(std::size_t values) {
  size_for(values);
  const std::size_t requests = 2 * sends_.size() * (sends_.empty() ? 0 : transport_.pieces(sends_.front().bytes));
  round_.requests.reserve(requests);
  round_.pending.reserve(requests);
}

void MpiSplitAllgather::begin(std::span<const std::int64_t> values) {
  if (round_.posted()) throw Error(ErrorCode::Internal, "MpiSplitAllgather: begun twice without an end");
  size_for(values.size());
  std::copy_n(values.begin() + static_cast<std::ptrdiff_t>(mine_), slots_,
              memory_->begin() + static_cast<std::ptrdiff_t>(mine_));
  transport_.post(round_, sends_, recvs_, transport_.exchange_tag());
}

void MpiSplitAllgather::end(std::span<std::int64_t> values, double) {
  if (values.size() != memory_->size())
    throw Error(ErrorCode::Internal, "MpiSplitAllgather: ended with " + std::to_string(values.size()) +
                                         " values, begun with " + std::to_string(memory_->size()));
  // No "gave up" check after the receives: what a peer sends is its own memory, which it
  // rewrites only at its next begin, never its caller's buffer.
  transport_.wait(round_, /*check_notices=*/false);
  for (std::size_t i = 0; i < values.size(); ++i)
    if (i < mine_ || i >= mine_ + slots_) values[i] = (*memory_)[i];
}

}  // namespace stragglar::detail
