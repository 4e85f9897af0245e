/* MPI_Sendrecv of SIZE bytes each way between ranks 0 and 1 at once (full duplex), REPS times
 * after one warm-up; prints each repetition's time in ms (rank 0). The MPI side of
 * scripts/cluster-floor.sh: compare with tcp_duplex.py moving the same bytes over plain sockets. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  long bytes = argc > 1 ? atol(argv[1]) : 16L << 20;
  int reps = argc > 2 ? atoi(argv[2]) : 5;
  if (size != 2 || bytes <= 0 || bytes > (1L << 30) || reps <= 0) {
    if (rank == 0) fprintf(stderr, "sendrecv: need 2 ranks, 0 < BYTES <= 1 GiB, REPS > 0 (got %d ranks, %ld, %d)\n", size, bytes, reps);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  char *out = malloc(bytes), *in = malloc(bytes);
  for (long i = 0; i < bytes; i++) out[i] = (char)(i * 31 + rank);
  int peer = 1 - rank;
  for (int r = -1; r < reps; r++) {
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    MPI_Sendrecv(out, (int)bytes, MPI_BYTE, peer, 0, in, (int)bytes, MPI_BYTE, peer, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    double ms = (MPI_Wtime() - t0) * 1e3, worst = 0;
    MPI_Reduce(&ms, &worst, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (rank == 0 && r >= 0) printf("%.1f\n", worst);
  }
  free(out);
  free(in);
  MPI_Finalize();
  return 0;
}
