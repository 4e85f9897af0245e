/* stragglar over MPI — C API (C++: stragglar/allreduce.hpp).
 *
 *   stragglar_options o; stragglar_options_init(&o); o.straggler = 3;
 *   if (stragglar_mpi_allreduce(buf, buf, n, stragglar_float32, stragglar_sum,
 *                               MPI_COMM_WORLD, &o) != stragglar_success)
 *     fprintf(stderr, "%s\n", stragglar_last_error());
 */
#ifndef STRAGGLAR_MPI_H_
#define STRAGGLAR_MPI_H_

#include <mpi.h>
#include <stddef.h>

#include "stragglar/stragglar.h"

#ifdef __cplusplus
extern "C" {
#endif

/* In place when sendbuf == recvbuf (or sendbuf == MPI_IN_PLACE). opts == NULL: defaults
 * (stragglar_options_init). Never aborts: failures return a status, message in
 * stragglar_last_error(). */
stragglar_result stragglar_mpi_allreduce(const void* sendbuf, void* recvbuf, size_t count,
                                         stragglar_dtype dtype, stragglar_op op, MPI_Comm comm,
                                         const stragglar_options* opts);

/* What auto decided and saw on `comm` (see stragglar_straggler_report in stragglar.h). Local:
 * no communication. report->active = 0 before the first auto call (and always on one rank: nothing to find). */
stragglar_result stragglar_mpi_straggler_report(MPI_Comm comm, stragglar_straggler_report* report, double* scores,
                                                int nscores);

#ifdef __cplusplus
}
#endif

#endif /* STRAGGLAR_MPI_H_ */
