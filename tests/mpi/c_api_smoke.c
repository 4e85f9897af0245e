/* The C API compiles as C and works: stragglar_mpi_allreduce with NULL options (defaults),
 * out of place, then in place with ring; a bad dtype returns stragglar_invalid_usage. */
#include <mpi.h>
#include <stdio.h>

#include "stragglar/stragglar_mpi.h"

int main(int argc, char** argv) {
  int rank, n, i, failures = 0;
  double in[37], out[37];
  stragglar_options opts;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  for (i = 0; i < 37; ++i) in[i] = rank + i;
  if (stragglar_mpi_allreduce(in, out, 37, stragglar_float64, stragglar_sum, MPI_COMM_WORLD, NULL) !=
      stragglar_success) {
    fprintf(stderr, "rank %d: %s\n", rank, stragglar_last_error());
    ++failures;
  }
  for (i = 0; i < 37; ++i)
    if (out[i] != n * (n - 1) / 2.0 + (double)n * i) ++failures;
  stragglar_options_init(&opts);
  opts.algorithm = stragglar_algo_ring;
  opts.straggler = 0;
  if (stragglar_mpi_allreduce(out, out, 37, stragglar_float64, stragglar_max, MPI_COMM_WORLD, &opts) !=
      stragglar_success)
    ++failures;
  if (stragglar_mpi_allreduce(in, out, 37, (stragglar_dtype)7, stragglar_sum, MPI_COMM_WORLD, &opts) !=
      stragglar_invalid_usage)
    ++failures;
  if (rank == 0) printf("C API: %s (last error: %s)\n", failures ? "FAIL" : "PASS", stragglar_last_error());
  MPI_Finalize();
  return failures ? 1 : 0;
}
