// Memory that every rank of an MPI communicator maps, when they all share one host: the arrival
// tickets' block (arrival_tickets.hpp). MPI-3 shared windows (MPI_Comm_split_type with
// MPI_COMM_TYPE_SHARED, MPI_Win_allocate_shared), so it works with Open MPI and MPICH alike.
#pragma once
#include <mpi.h>

#include <cstddef>

namespace stragglar::detail {

class MpiSharedBlock {
 public:
  // Collective over `comm`. Maps `bytes` zeroed bytes on every rank when every rank of `comm`
  // shares one host's memory; otherwise (several hosts, or an MPI that cannot make the window)
  // holds nothing and data() is null. Throws Error(SystemError) only when MPI fails in a way
  // that leaves the ranks out of step.
  MpiSharedBlock(MPI_Comm comm, std::size_t bytes);
  // Collective too (MPI_Win_free): destroyed where the communicator is freed.
  ~MpiSharedBlock();
  MpiSharedBlock(const MpiSharedBlock&) = delete;
  MpiSharedBlock& operator=(const MpiSharedBlock&) = delete;

  void* data() const noexcept { return data_; }

 private:
  MPI_Comm shared_ = MPI_COMM_NULL;
  MPI_Win win_ = MPI_WIN_NULL;
  void* data_ = nullptr;
};

}  // namespace stragglar::detail
