/* An unmodified MPI program (plain C, linked with MPI only) that checks MPI_Allreduce; run with
 * and without libstragglar_pmpi_<mpi>.so preloaded (tests/pmpi/CMakeLists.txt).
 *
 *   pmpi_check [expect-preload|no-preload] [min-bytes]   correctness, pass-through, errors
 *   pmpi_check fatal                                     a stragglar error on a communicator with
 *                                                        MPI_ERRORS_ARE_FATAL must abort the job
 *
 * Every result is compared element-wise with a float64 reference (inputs are small integers, so
 * every sum, product, min and max is exact in every type) and every rank must hold identical
 * bits. With the preload, the library's counters (stragglar_pmpi_counts, found with dlsym) say
 * which calls went through stragglar: the decision must be the same on every rank. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int rank, nranks, failures;
static void (*counts_fn)(long long*, long long*);

#define CHECK(cond, ...)                                          \
  do {                                                            \
    if (!(cond)) {                                                \
      fprintf(stderr, "rank %d: FAILED %s: ", rank, #cond);      \
      fprintf(stderr, __VA_ARGS__);                               \
      fprintf(stderr, "\n");                                      \
      failures++;                                                 \
    }                                                             \
  } while (0)

static long long served_now(void) {
  long long s = 0, p = 0;
  if (counts_fn) counts_fn(&s, &p);
  return s;
}

/* Contribution of rank r to element i: small integers, products stay tiny (values in {1, 2}
 * for prod), all exact in fp32. */
static double input(int r, size_t i, MPI_Op op) {
  if (op == MPI_PROD) return (double)(1 + ((r + i) % 5 == 0));
  return (double)((int)((r * 7 + i * 3) % 23) - 11);
}

static double reference(size_t i, MPI_Op op) {
  double acc = input(0, i, op);
  for (int r = 1; r < nranks; ++r) {
    const double v = input(r, i, op);
    if (op == MPI_SUM) acc += v;
    else if (op == MPI_PROD) acc *= v;
    else if (op == MPI_MIN) acc = v < acc ? v : acc;
    else acc = v > acc ? v : acc;
  }
  return acc;
}

typedef struct {
  MPI_Datatype type;
  const char* name;
  int kind; /* 0 float, 1 double, 2 int32, 3 int64 */
} TypeCase;

static void put(void* buf, int kind, size_t i, double v) {
  switch (kind) {
    case 0: ((float*)buf)[i] = (float)v; break;
    case 1: ((double*)buf)[i] = v; break;
    case 2: ((int32_t*)buf)[i] = (int32_t)v; break;
    default: ((int64_t*)buf)[i] = (int64_t)v; break;
  }
}
static double get(const void* buf, int kind, size_t i) {
  switch (kind) {
    case 0: return ((const float*)buf)[i];
    case 1: return ((const double*)buf)[i];
    case 2: return ((const int32_t*)buf)[i];
    default: return (double)((const int64_t*)buf)[i];
  }
}

/* FNV-1a of the bytes; every rank must get the same. */
static uint64_t hash_bytes(const void* p, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; ++i) h = (h ^ ((const unsigned char*)p)[i]) * 1099511628211ull;
  return h;
}
static void check_identical(const void* buf, size_t bytes, const char* what) {
  unsigned long long h = hash_bytes(buf, bytes), lo = 0, hi = 0;
  PMPI_Allreduce(&h, &lo, 1, MPI_UNSIGNED_LONG_LONG, MPI_MIN, MPI_COMM_WORLD);
  PMPI_Allreduce(&h, &hi, 1, MPI_UNSIGNED_LONG_LONG, MPI_MAX, MPI_COMM_WORLD);
  CHECK(lo == hi, "%s: ranks hold different bits", what);
}

/* The served counter moved by `expected` on this rank and on every rank alike. */
static void check_served(long long before, int expected, const char* what) {
  if (!counts_fn) return;
  const long long moved = served_now() - before;
  long long lo = 0, hi = 0;
  PMPI_Allreduce(&moved, &lo, 1, MPI_LONG_LONG, MPI_MIN, MPI_COMM_WORLD);
  PMPI_Allreduce(&moved, &hi, 1, MPI_LONG_LONG, MPI_MAX, MPI_COMM_WORLD);
  CHECK(lo == hi, "%s: served on some ranks only (%lld..%lld)", what, lo, hi);
  if (expected >= 0) CHECK(moved == expected, "%s: %lld calls went through stragglar, expected %d", what, moved, expected);
}

static void predefined_types(long long min_bytes) {
  const TypeCase types[] = {
      {MPI_FLOAT, "MPI_FLOAT", 0},   {MPI_DOUBLE, "MPI_DOUBLE", 1},     {MPI_INT, "MPI_INT", 2},
      {MPI_INT32_T, "MPI_INT32_T", 2}, {MPI_LONG, "MPI_LONG", sizeof(long) == 8 ? 3 : 2},
      {MPI_INT64_T, "MPI_INT64_T", 3}, {MPI_LONG_LONG, "MPI_LONG_LONG", 3},
      {MPI_REAL, "MPI_REAL", 0},     {MPI_DOUBLE_PRECISION, "MPI_DOUBLE_PRECISION", 1},
      {MPI_INTEGER, "MPI_INTEGER", 2},
  };
  const MPI_Op ops[] = {MPI_SUM, MPI_PROD, MPI_MIN, MPI_MAX};
  const char* op_names[] = {"sum", "prod", "min", "max"};
  const size_t counts[] = {1, 7, 1000, 70001};
  for (size_t t = 0; t < sizeof types / sizeof *types; ++t) {
    int es = 0;
    MPI_Type_size(types[t].type, &es);
    if (es == 0) continue; /* a Fortran type of an MPI built without Fortran */
    for (size_t o = 0; o < 4; ++o)
      for (size_t c = 0; c < 4; ++c)
        for (int in_place = 0; in_place < 2; ++in_place) {
          const size_t n = counts[c];
          char* send = malloc(n * (size_t)es);
          char* recv = malloc(n * (size_t)es);
          for (size_t i = 0; i < n; ++i) put(send, types[t].kind, i, input(rank, i, ops[o]));
          if (in_place) memcpy(recv, send, n * (size_t)es);
          const long long before = served_now();
          const int rc = MPI_Allreduce(in_place ? MPI_IN_PLACE : send, recv, (int)n, types[t].type, ops[o], MPI_COMM_WORLD);
          char what[128];
          snprintf(what, sizeof what, "%s %s count %zu%s", types[t].name, op_names[o], n, in_place ? " in place" : "");
          CHECK(rc == MPI_SUCCESS, "%s: rc %d", what, rc);
          size_t bad = 0;
          for (size_t i = 0; i < n; ++i)
            if (get(recv, types[t].kind, i) != reference(i, ops[o])) bad++;
          CHECK(bad == 0, "%s: %zu elements differ from the float64 reference", what, bad);
          check_identical(recv, n * (size_t)es, what);
          check_served(before, min_bytes >= 0 ? (nranks > 1 && (long long)(n * (size_t)es) >= min_bytes) : -1, what);
          free(send);
          free(recv);
        }
  }
}

/* A derived datatype with a predefined op passes through to MPI on every rank (Open MPI and
 * MPICH answer MPI_ERR_OP: predefined ops take predefined types); the call's outcome is MPI's. */
static void derived_type(void) {
  MPI_Comm c;
  MPI_Comm_dup(MPI_COMM_WORLD, &c);
  MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN);
  MPI_Datatype four;
  MPI_Type_contiguous(4, MPI_DOUBLE, &four);
  MPI_Type_commit(&four);
  const int n = 20000;
  double* d = malloc(4 * (size_t)n * sizeof(double));
  for (int i = 0; i < 4 * n; ++i) d[i] = 1.0;
  const long long before = served_now();
  const int rc = MPI_Allreduce(MPI_IN_PLACE, d, n, four, MPI_SUM, c);
  int cls = MPI_SUCCESS, lo = 0, hi = 0;
  MPI_Error_class(rc, &cls);
  PMPI_Allreduce(&cls, &lo, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  PMPI_Allreduce(&cls, &hi, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  CHECK(lo == hi, "derived type: ranks got different error classes");
  if (rc == MPI_SUCCESS) CHECK(d[0] == nranks, "derived type sum %g", d[0]);
  check_served(before, 0, "derived type");
  MPI_Type_free(&four);
  MPI_Comm_free(&c);
  free(d);
}

static void user_max(void* in, void* inout, int* len, MPI_Datatype* t) {
  (void)t;
  for (int i = 0; i < *len; ++i)
    if (((double*)in)[i] > ((double*)inout)[i]) ((double*)inout)[i] = ((double*)in)[i];
}

/* Calls that must reach MPI unchanged: user ops, MAXLOC, bitwise ops, unsupported types,
 * MPI_COMM_SELF, an intercommunicator. Each is still checked for its result. */
static void pass_through(void) {
  const int n = 40000; /* large: only the kind of call keeps it from stragglar */
  long long before = served_now();
  double* d = malloc((size_t)n * sizeof(double));
  MPI_Op op;
  MPI_Op_create(user_max, 1, &op);
  for (int i = 0; i < n; ++i) d[i] = input(rank, (size_t)i, MPI_MAX);
  CHECK(MPI_Allreduce(MPI_IN_PLACE, d, n, MPI_DOUBLE, op, MPI_COMM_WORLD) == MPI_SUCCESS, "user op");
  for (int i = 0; i < n; ++i) CHECK(d[i] == reference((size_t)i, MPI_MAX), "user op element %d", i);
  MPI_Op_free(&op);

  struct { double v; int r; } *loc = malloc((size_t)n * sizeof *loc);
  for (int i = 0; i < n; ++i) { loc[i].v = input(rank, (size_t)i, MPI_MAX); loc[i].r = rank; }
  CHECK(MPI_Allreduce(MPI_IN_PLACE, loc, n, MPI_DOUBLE_INT, MPI_MAXLOC, MPI_COMM_WORLD) == MPI_SUCCESS, "maxloc");
  for (int i = 0; i < n; ++i) CHECK(loc[i].v == reference((size_t)i, MPI_MAX), "maxloc element %d", i);

  int* bits = malloc((size_t)n * sizeof(int));
  for (int i = 0; i < n; ++i) bits[i] = 1 << (rank % 31);
  CHECK(MPI_Allreduce(MPI_IN_PLACE, bits, n, MPI_INT, MPI_BOR, MPI_COMM_WORLD) == MPI_SUCCESS, "bor");
  short* shorts = malloc((size_t)n * sizeof(short));
  for (int i = 0; i < n; ++i) shorts[i] = 1;
  CHECK(MPI_Allreduce(MPI_IN_PLACE, shorts, n, MPI_SHORT, MPI_SUM, MPI_COMM_WORLD) == MPI_SUCCESS, "short");
  CHECK(shorts[0] == nranks, "short sum %d", shorts[0]);
  for (int i = 0; i < n; ++i) d[i] = 3.0;
  CHECK(MPI_Allreduce(MPI_IN_PLACE, d, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_SELF) == MPI_SUCCESS, "self");
  CHECK(d[0] == 3.0, "self sum %g", d[0]);
  if (nranks >= 2) {
    MPI_Comm half, inter;
    MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half);
    MPI_Intercomm_create(half, 0, MPI_COMM_WORLD, rank % 2 ? 0 : 1, 7, &inter);
    for (int i = 0; i < n; ++i) d[i] = 1.0;
    double* out = malloc((size_t)n * sizeof(double));
    CHECK(MPI_Allreduce(d, out, n, MPI_DOUBLE, MPI_SUM, inter) == MPI_SUCCESS, "intercommunicator");
    int remote = 0;
    MPI_Comm_remote_size(inter, &remote);
    CHECK(out[0] == remote, "intercommunicator sum %g, expected %d", out[0], remote);
    free(out);
    MPI_Comm_free(&inter);
    MPI_Comm_free(&half);
  }
  check_served(before, 0, "pass-through calls");
  free(shorts);
  free(bits);
  free(loc);
  free(d);
}

/* Communicators made and freed over and over: each gets its state and frees it with itself. */
static void comm_churn(void) {
  const int n = 20000;
  float* f = malloc((size_t)n * sizeof(float));
  for (int round = 0; round < 12; ++round) {
    MPI_Comm c;
    MPI_Comm_split(MPI_COMM_WORLD, round % 3 == 2 ? rank % 2 : 0, rank, &c);
    int size = 0;
    MPI_Comm_size(c, &size);
    for (int i = 0; i < n; ++i) f[i] = 1.0f;
    CHECK(MPI_Allreduce(MPI_IN_PLACE, f, n, MPI_FLOAT, MPI_SUM, c) == MPI_SUCCESS, "churn");
    CHECK(f[n - 1] == (float)size, "churn sum %g, expected %d", f[n - 1], size);
    MPI_Comm_free(&c);
  }
  free(f);
}

/* An erroneous program (counts differ between ranks) on a communicator with MPI_ERRORS_RETURN:
 * through stragglar every rank gets an error code (Mismatch) naming the problem. Only with the
 * preload and when both counts are served: plain MPI's behaviour here is undefined. */
static void errors_return(long long min_bytes) {
  if (!counts_fn || nranks < 2 || min_bytes > 80000) return;
  MPI_Comm c;
  MPI_Comm_dup(MPI_COMM_WORLD, &c);
  MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN);
  const int n = 20000 + (rank == 0);
  float* f = calloc((size_t)n, sizeof(float));
  for (int i = 0; i < n; ++i) f[i] = 2.0f;
  const int rc = MPI_Allreduce(MPI_IN_PLACE, f, n, MPI_FLOAT, MPI_SUM, c);
  CHECK(rc != MPI_SUCCESS, "mismatched counts gave MPI_SUCCESS");
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  CHECK(strstr(text, "stragglar") != NULL, "error string '%s' does not name stragglar", text);
  CHECK(f[0] == 2.0f && f[n - 1] == 2.0f, "buffer touched by a failed call");
  if (rank == 0) printf("MPI_ERRORS_RETURN gave: %s\n", text);
  MPI_Comm_free(&c);
  free(f);
}

/* Issue #22 class 6 through the preload: on a communicator with MPI_ERRORS_RETURN, an in-place
 * call that fails mid-way — the last rank comes later than STRAGGLAR_TIMEOUT_S (run with 1 s and
 * STRAGGLAR_ALGORITHM=stragglar, so the others have reduce-scattered into their buffers by then)
 * — returns an error with every other rank's buffer as it was. Buffers and communicator are
 * kept until MPI_Finalize (docs/reliability.md class 7). */
static void kept_after_error(void) {
  MPI_Comm c;
  MPI_Comm_dup(MPI_COMM_WORLD, &c);
  MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN);
  const int n = 1 << 16;
  float* f = malloc((size_t)n * sizeof(float));
  for (int i = 0; i < n; ++i) f[i] = (float)(rank + 1);
  int rc = MPI_Allreduce(MPI_IN_PLACE, f, n, MPI_FLOAT, MPI_SUM, c); /* the configuration, all ranks */
  CHECK(rc == MPI_SUCCESS && f[0] == (float)(nranks * (nranks + 1) / 2), "kept: the first call failed");
  for (int i = 0; i < n; ++i) f[i] = (float)(rank + 1 + i % 5);
  if (rank == nranks - 1) sleep(3);
  rc = MPI_Allreduce(MPI_IN_PLACE, f, n, MPI_FLOAT, MPI_SUM, c);
  if (rank < nranks - 1) {
    CHECK(rc != MPI_SUCCESS, "kept: rank %d's call succeeded without the late rank", rank);
    int changed = 0;
    for (int i = 0; i < n; ++i) changed += f[i] != (float)(rank + 1 + i % 5);
    CHECK(changed == 0, "kept: rank %d's failed call changed %d of %d elements", rank, changed, n);
  }
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);
  const char* mode = argc > 1 ? argv[1] : "no-preload";
  if (getenv("PMPI_CHECK_ERRORS_RETURN")) MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  counts_fn = (void (*)(long long*, long long*))dlsym(RTLD_DEFAULT, "stragglar_pmpi_counts");
  if (strcmp(mode, "fatal") == 0) {
    /* MPI_COMM_WORLD has MPI_ERRORS_ARE_FATAL: the mismatch must abort, not return. */
    const int n = 20000 + (rank == 0);
    float* f = calloc((size_t)n, sizeof(float));
    MPI_Allreduce(MPI_IN_PLACE, f, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) printf("fatal: the call returned (it must abort)\n");
    MPI_Finalize();
    return 0;
  }
  if (strcmp(mode, "kept") == 0) {
    kept_after_error();
    if (rank == 0) printf("pmpi_check kept on %d ranks: %s\n", nranks, failures ? "FAILED" : "passed");
    MPI_Finalize();
    return failures ? 1 : 0;
  }
  const int expect_preload = strcmp(mode, "expect-preload") == 0;
  CHECK(!expect_preload || counts_fn, "the preload library is not loaded (no stragglar_pmpi_counts)");
  CHECK(expect_preload || !counts_fn, "the preload library is loaded in a no-preload run");
  const long long min_bytes = argc > 2 ? atoll(argv[2]) : -1; /* -1: do not check the counts */
  predefined_types(min_bytes);
  derived_type();
  pass_through();
  comm_churn();
  errors_return(min_bytes);
  int total = 0;
  PMPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0) {
    long long s = 0, p = 0;
    if (counts_fn) counts_fn(&s, &p);
    printf("pmpi_check %s on %d ranks: %s (rank 0: %lld calls through stragglar, %lld passed through)\n", mode,
           nranks, total ? "FAILED" : "passed", s, p);
  }
  MPI_Finalize();
  return total ? 1 : 0;
}
