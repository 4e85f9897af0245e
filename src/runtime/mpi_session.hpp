// The runtime core's session behind an MPI communicator (for the benchmark, which times parts
// of a schedule with PhaseSelection; users call stragglar::allreduce).
#pragma once
#include <mpi.h>

#include "runtime/session.hpp"

namespace stragglar::detail {

// Creates the communicator's state on first use (collective, like the first allreduce).
Session& mpi_session(MPI_Comm comm);

}  // namespace stragglar::detail
