/* MPI_Sendrecv of SIZE bytes each way between ranks 0 and 1 at once (full duplex), REPS times
 * after one warm-up; prints each repetition's time in ms (rank 0). The MPI side of
 * scripts/cluster-floor.sh: compare with tcp_duplex.py moving the same bytes over plain sockets.
 * With more ranks (an even number, R per host, host-major: `sendrecv SIZE REPS R`) rank r
 * exchanges SIZE/R bytes with rank r + n/2 (mod n), all at once: every host's link moves SIZE
 * each way together, the least a late host must move after it arrives, under the same load of
 * ranks as a real run. */
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
  int per_host = argc > 3 ? atoi(argv[3]) : 1;
  if (size < 2 || size % 2 || per_host < 1 || (size / 2) % per_host || bytes <= 0 || bytes > (1L << 30) || reps <= 0) {
    if (rank == 0)
      fprintf(stderr, "sendrecv: need an even number of ranks, R dividing n/2, 0 < BYTES <= 1 GiB, REPS > 0 (got %d ranks, R %d, %ld, %d)\n",
              size, per_host, bytes, reps);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  bytes /= per_host;
  char *out = malloc(bytes), *in = malloc(bytes);
  for (long i = 0; i < bytes; i++) out[i] = (char)(i * 31 + rank);
  int peer = (rank + size / 2) % size;
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
