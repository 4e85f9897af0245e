/* An unmodified MPI program: a loop of MPI_Allreduce with one rank late (docs/preload.md).
 * It knows nothing of stragglar; run it plain and through the preload to compare:
 *
 *   mpirun -np 8 ./build/delayed_allreduce --mib 64 --delay-ms 300
 *   mpirun -np 8 ./build/stragglar-run ./build/delayed_allreduce --mib 64 --delay-ms 300
 *
 * Each iteration: a barrier (common start), the late rank sleeps --delay-ms, then every rank
 * calls MPI_Allreduce(SUM) on --mib MiB of floats (in place). The exposed time is from the
 * late rank's arrival to the last rank's return, on CLOCK_MONOTONIC (one host: one clock for every
 * rank; MPI_Wtime is not, Open MPI 4 counts it from each process's first call). Results are
 * checked exactly (small integers); it prints the median over --iters timed iterations (after
 * --warmup untimed ones, which let auto find the late rank). --latency BYTES instead times --calls back-to-back calls of
 * BYTES with no delay, then the same calls in alternating blocks of MPI_Allreduce and
 * PMPI_Allreduce (MPI's own, past any preload): the cost of the pass-through for small messages. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void sleep_ms(double ms) {
  struct timespec ts = {(time_t)(ms / 1000), (long)((ms - 1000 * (double)(time_t)(ms / 1000)) * 1e6)};
  nanosleep(&ts, NULL);
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
static int by_value(const void* a, const void* b) {
  const double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, n = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  double mib = 64, delay_ms = 300;
  int iters = 10, warmup = 3, late = n - 1, calls = 10000;
  long latency_bytes = -1;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--mib")) mib = atof(argv[i + 1]);
    else if (!strcmp(argv[i], "--delay-ms")) delay_ms = atof(argv[i + 1]);
    else if (!strcmp(argv[i], "--iters")) iters = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--warmup")) warmup = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--late-rank")) late = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--latency")) latency_bytes = atol(argv[i + 1]);
    else if (!strcmp(argv[i], "--calls")) calls = atoi(argv[i + 1]);
    else {
      if (rank == 0) fprintf(stderr, "unknown option '%s' (expected --mib, --delay-ms, --iters, --warmup, --late-rank, --latency, --calls)\n", argv[i]);
      MPI_Abort(MPI_COMM_WORLD, 2);
    }
  }
  if (mib <= 0 || delay_ms < 0 || iters < 1 || warmup < 0 || late < 0 || late >= n || calls < 1) {
    if (rank == 0) fprintf(stderr, "bad arguments: need --mib > 0, --delay-ms >= 0, --iters >= 1, --late-rank in [0, %d)\n", n);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }

  if (latency_bytes >= 0) {
    const int count = (int)(latency_bytes / 4 > 0 ? latency_bytes / 4 : 1);
    float* buf = malloc((size_t)count * sizeof(float));
    for (int i = 0; i < count; ++i) buf[i] = 0.0f;
    for (int i = 0; i < 100; ++i) MPI_Allreduce(MPI_IN_PLACE, buf, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    const double t0 = now_s();
    for (int i = 0; i < calls; ++i) MPI_Allreduce(MPI_IN_PLACE, buf, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    const double t = (now_s() - t0) / calls;
    double worst = 0;
    PMPI_Allreduce(&t, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0) printf("latency bytes=%d calls=%d ranks=%d us_per_call=%.3f\n", count * 4, calls, n, worst * 1e6);
    /* Side by side in this one run: blocks of MPI_Allreduce (the preload's, when preloaded) and
     * PMPI_Allreduce (MPI's own) alternate A B B A ..., so both see the same machine load; the
     * median block of each gives the pass-through's cost. Without the preload both are MPI's:
     * the ratio then shows the method's own spread. */
    enum { blocks = 100 };
    const int per_block = calls / blocks > 0 ? calls / blocks : 1;
    double mpi_us[blocks / 2], pmpi_us[blocks / 2];
    int na = 0, nb = 0;
    for (int b = 0; b < blocks; ++b) {
      const int use_pmpi = (b % 4 == 1 || b % 4 == 2);
      PMPI_Barrier(MPI_COMM_WORLD);
      const double s0 = now_s();
      for (int i = 0; i < per_block; ++i) {
        if (use_pmpi)
          PMPI_Allreduce(MPI_IN_PLACE, buf, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        else
          MPI_Allreduce(MPI_IN_PLACE, buf, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      }
      const double mine = (now_s() - s0) / per_block;
      double slowest = 0;
      PMPI_Allreduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
      if (use_pmpi) pmpi_us[nb++] = slowest * 1e6; else mpi_us[na++] = slowest * 1e6;
    }
    qsort(mpi_us, (size_t)na, sizeof(double), by_value);
    qsort(pmpi_us, (size_t)nb, sizeof(double), by_value);
    const double ma = (mpi_us[na / 2 - 1] + mpi_us[na / 2]) / 2, mb = (pmpi_us[nb / 2 - 1] + pmpi_us[nb / 2]) / 2;
    if (rank == 0)
      printf("latency_ab bytes=%d calls_per_block=%d blocks=%d median_us MPI_Allreduce=%.3f PMPI_Allreduce=%.3f ratio=%.4f\n",
             count * 4, per_block, blocks, ma, mb, ma / mb);
    free(buf);
    MPI_Finalize();
    return 0;
  }

  const size_t count = (size_t)(mib * 1048576.0 / sizeof(float));
  float* buf = malloc(count * sizeof(float));
  double* exposed_s = malloc((size_t)iters * sizeof(double));
  int bad_total = 0;
  for (int it = 0; it < warmup + iters; ++it) {
    for (size_t i = 0; i < count; ++i) buf[i] = (float)((rank + (int)(i % 7)) % 5);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == late) sleep_ms(delay_ms);
    const double arrive = now_s();
    MPI_Allreduce(MPI_IN_PLACE, buf, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    const double done = now_s();
    /* exposed = last return - the late rank's arrival */
    double times[2] = {rank == late ? -arrive : -1e300, done}, agg[2];
    MPI_Allreduce(times, agg, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    const double exposed = agg[1] + agg[0];
    float want[7] = {0};
    for (int k = 0; k < 7; ++k)
      for (int r = 0; r < n; ++r) want[k] += (float)((r + k) % 5);
    int bad = 0;
    for (size_t i = 0; i < count; ++i) bad += buf[i] != want[i % 7];
    bad_total += bad;
    if (it >= warmup) exposed_s[it - warmup] = exposed;
  }
  int bad_all = 0;
  MPI_Allreduce(&bad_total, &bad_all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  qsort(exposed_s, (size_t)iters, sizeof(double), by_value);
  const double median = iters % 2 ? exposed_s[iters / 2] : (exposed_s[iters / 2 - 1] + exposed_s[iters / 2]) / 2;
  if (rank == 0)
    printf("delayed_allreduce ranks=%d MiB=%g delay_ms=%g late_rank=%d iters=%d median_exposed_ms=%.2f check=%s\n", n,
           mib, delay_ms, late, iters, 1e3 * median, bad_all ? "FAILED" : "ok");
  free(exposed_s);
  free(buf);
  MPI_Finalize();
  return bad_all ? 1 : 0;
}
