// Which algorithm MPI_Iallreduce runs for auto's bounded native (internal; docs/auto.md "Known
// miss on MPI"). Open MPI 4.1's libnbc runs an *in-place* MPI_Iallreduce as a binomial reduce
// followed by a binomial broadcast — every round moves the whole message — whatever its size,
// while MPI_Allreduce (coll/tuned) runs reduce-scatter + allgather (Rabenseifner) on large
// messages; an in-place MPI_Iallreduce took ~2.4× as long (16 MiB, 8 ranks on the 2-core VM:
// 53 vs 22 ms; with Rabenseifner chosen 22 ms, the same as MPI_Allreduce).
// libnbc reads its choice from the MCA variable coll_libnbc_iallreduce_algorithm at every call,
// and the MPI tool interface (MPI_T, MPI-3) can write it: this class sets it to Rabenseifner for
// the one call auto posts and restores the application's value right after, so the
// application's own MPI_Iallreduce calls are never affected.
//
// Only where that is safe: Open MPI (the variable exists and is writable), and a thread level
// of MPI_THREAD_SINGLE or FUNNELED (under SERIALIZED or MULTIPLE another thread's MPI_Iallreduce
// posted during the window could see our value on one rank and not on another, and ranks would
// run different schedules). Anywhere else it does nothing and MPI picks as always.
#pragma once
// NULL: MPICH's mpi.h defines MPI_T_CVAR_HANDLE_NULL with it and includes nothing that defines it.
#include <cstddef>

#include <mpi.h>

namespace stragglar::detail {

class IallreduceAlgorithmChoice {
 public:
  // Finds the variable, once per process (MPI must be initialised): the tool interface's
  // initialisation costs ~0.2 s in Open MPI 4.1 (it registers every component's variables), so
  // it is made when auto first needs it (an auto configuration above the transport's small
  // native), never at a communicator's set-up or for the user's `native`. The handle lives as
  // long as the process.
  void prepare();

  // MPI_Iallreduce(sendbuf, recvbuf, ...) (sendbuf may be MPI_IN_PLACE) with Rabenseifner's
  // algorithm where it can be chosen (libnbc runs it when count is at least the largest power of
  // two <= nranks and the op commutes — every op auto serves), else as MPI picks. Returns MPI's
  // error code.
  int post(const void* sendbuf, void* recvbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm,
           MPI_Request* request);

  bool active();
};

}  // namespace stragglar::detail
