// stragglar_mpi_allreduce: the MPI runtime's C entry point. Exceptions become a
// stragglar_result; the message goes to stragglar_last_error() (c_api.cpp).
#include "runtime/last_error.hpp"
#include "stragglar/allreduce.hpp"
#include "stragglar/stragglar_mpi.h"

extern "C" stragglar_result stragglar_mpi_allreduce(const void* sendbuf, void* recvbuf, size_t count,
                                                    stragglar_dtype dtype, stragglar_op op, MPI_Comm comm,
                                                    const stragglar_options* opts) {
  return stragglar::detail::guarded([&] {
    stragglar::allreduce(sendbuf, recvbuf, count, static_cast<stragglar::DataType>(dtype),
                         static_cast<stragglar::ReduceOp>(op), comm, stragglar::detail::options_from_c(opts));
  });
}

extern "C" stragglar_result stragglar_mpi_straggler_report(MPI_Comm comm, stragglar_straggler_report* report,
                                                           double* scores, int nscores) {
  return stragglar::detail::guarded([&] {
    const stragglar::StragglerReport r = stragglar::straggler_report(comm);
    stragglar::detail::report_to_c(r, static_cast<int>(r.scores.size()), report, scores, nscores);
  });
}
