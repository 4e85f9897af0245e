/* C consumer of stragglar::mpi from an installed package: stragglar_mpi_allreduce under mpirun
 * (StragglAR in place, ring out of place), exact results, and the status and message every rank
 * gets for an invalid straggler. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stragglar/stragglar_mpi.h>

#define COUNT 1003

int main(int argc, char** argv) {
  int rank = 0, nranks = 0, failures = 0, all_failures = 0, i = 0;
  static double buf[COUNT];
  static long long in[COUNT], out[COUNT];
  stragglar_options opts;
  stragglar_result r;

  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);

  stragglar_options_init(&opts);
  opts.straggler = nranks - 1;
  for (i = 0; i < COUNT; ++i) buf[i] = (double)(rank + 1) * (i % 5);
  r = stragglar_mpi_allreduce(buf, buf, COUNT, stragglar_float64, stragglar_sum, MPI_COMM_WORLD, &opts);
  if (r != stragglar_success) {
    fprintf(stderr, "FAIL rank %d: stragglar: %s: %s\n", rank, stragglar_result_string(r), stragglar_last_error());
    ++failures;
  } else {
    for (i = 0; i < COUNT; ++i)
      if (buf[i] != (double)(nranks * (nranks + 1) / 2) * (i % 5)) {
        fprintf(stderr, "FAIL rank %d: element %d is %g\n", rank, i, buf[i]);
        ++failures;
        break;
      }
  }

  opts.algorithm = stragglar_algo_ring;
  for (i = 0; i < COUNT; ++i) in[i] = (long long)i + rank;
  r = stragglar_mpi_allreduce(in, out, COUNT, stragglar_int64, stragglar_min, MPI_COMM_WORLD, &opts);
  if (r != stragglar_success) {
    fprintf(stderr, "FAIL rank %d: ring: %s: %s\n", rank, stragglar_result_string(r), stragglar_last_error());
    ++failures;
  } else {
    for (i = 0; i < COUNT; ++i)
      if (out[i] != (long long)i) {
        fprintf(stderr, "FAIL rank %d: ring min element %d is %lld\n", rank, i, out[i]);
        ++failures;
        break;
      }
  }

  /* Invalid on every rank: stragglar_invalid_usage everywhere, a message naming the value. */
  opts.algorithm = stragglar_algo_stragglar;
  opts.straggler = nranks + 3;
  r = stragglar_mpi_allreduce(buf, buf, COUNT, stragglar_float64, stragglar_sum, MPI_COMM_WORLD, &opts);
  if (r != stragglar_invalid_usage || strlen(stragglar_last_error()) == 0) {
    fprintf(stderr, "FAIL rank %d: bad straggler gave %s (\"%s\")\n", rank, stragglar_result_string(r),
            stragglar_last_error());
    ++failures;
  }

  MPI_Allreduce(&failures, &all_failures, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0 && all_failures == 0) printf("mpi consumer (C): %d ranks, allreduce exact\n", nranks);
  MPI_Finalize();
  return all_failures == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
