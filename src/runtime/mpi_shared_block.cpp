// MpiSharedBlock: one window of shared memory, allocated on the communicator's rank 0 and mapped
// by every rank (mpi_shared_block.hpp).
#include "runtime/mpi_shared_block.hpp"

#include <cstring>
#include <string>

#include "stragglar/error.hpp"

namespace stragglar::detail {

namespace {
void check(int rc, const char* what) {
  if (rc != MPI_SUCCESS) throw Error(ErrorCode::SystemError, std::string("shared arrival block: ") + what + " failed");
}
}  // namespace

MpiSharedBlock::MpiSharedBlock(MPI_Comm comm, std::size_t bytes) {
  int size = 0, rank = 0;
  check(MPI_Comm_size(comm, &size), "MPI_Comm_size");
  check(MPI_Comm_rank(comm, &rank), "MPI_Comm_rank");
  check(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &shared_), "MPI_Comm_split_type");
  int shared_size = 0;
  check(MPI_Comm_size(shared_, &shared_size), "MPI_Comm_size");
  // Every rank sees the same sizes, so every rank takes the same branch: no window when the
  // communicator spans hosts.
  if (shared_size != size) return;
  MPI_Comm_set_errhandler(shared_, MPI_ERRORS_RETURN);
  void* base = nullptr;
  const auto mine = static_cast<MPI_Aint>(rank == 0 ? bytes : 0);
  int ok = MPI_Win_allocate_shared(mine, 8, MPI_INFO_NULL, shared_, &base, &win_) == MPI_SUCCESS;
  // Every rank must agree on using it (an MPI may refuse on one rank only).
  int all_ok = 0;
  check(MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, shared_), "MPI_Allreduce");
  if (!all_ok) {
    if (ok) MPI_Win_free(&win_);
    win_ = MPI_WIN_NULL;
    return;
  }
  MPI_Aint got = 0;
  int unit = 0;
  check(MPI_Win_shared_query(win_, 0, &got, &unit, &data_), "MPI_Win_shared_query");
  // One passive-target epoch for the window's life: the tickets are plain atomics on it, and
  // MPI_Win_sync needs an epoch.
  check(MPI_Win_lock_all(MPI_MODE_NOCHECK, win_), "MPI_Win_lock_all");
  if (rank == 0) std::memset(data_, 0, bytes);
  // Rank 0's zeros are visible before any rank uses the block (sync, barrier, sync: the unified
  // memory model's pattern for stores made outside MPI).
  MPI_Win_sync(win_);
  check(MPI_Barrier(shared_), "MPI_Barrier");
  MPI_Win_sync(win_);
}

MpiSharedBlock::~MpiSharedBlock() {
  if (win_ != MPI_WIN_NULL) {
    if (data_) MPI_Win_unlock_all(win_);
    MPI_Win_free(&win_);
  }
  if (shared_ != MPI_COMM_NULL) MPI_Comm_free(&shared_);
}

}  // namespace stragglar::detail
