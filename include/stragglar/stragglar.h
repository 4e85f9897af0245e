/* stragglar — C API, shaped like nccl.h / MPI (docs/design.md "Public API").
 * Every function returns a stragglar_result; stragglar_last_error() gives the message. */
#ifndef STRAGGLAR_H_
#define STRAGGLAR_H_

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  stragglar_success = 0,
  stragglar_invalid_usage = 1,   /* bad argument: buffers untouched */
  stragglar_mismatch = 2,        /* ranks disagree on the call's arguments */
  stragglar_timeout = 3,         /* a peer died or stopped */
  stragglar_remote_error = 4,
  stragglar_system_error = 5,    /* MPI / CUDA / NCCL error */
  stragglar_internal_error = 6
} stragglar_result;

typedef enum {
  stragglar_float32 = 0,
  stragglar_float64 = 1,
  stragglar_float16 = 2,
  stragglar_bfloat16 = 3,
  stragglar_int32 = 4,
  stragglar_int64 = 5
} stragglar_dtype;

typedef enum {
  stragglar_sum = 0,
  stragglar_prod = 1,
  stragglar_min = 2,
  stragglar_max = 3,
  stragglar_avg = 4
} stragglar_op;

/* The algorithm table (src/synth/algorithm_table.cpp): values below 100 are schedules run by our
 * executor (a new one takes the next free number); native and auto keep their values. */
typedef enum {
  stragglar_algo_stragglar = 0,
  stragglar_algo_ring = 1,
  stragglar_algo_rhd = 2,
  stragglar_algo_allpairs = 3,
  stragglar_algo_broadcast = 4, /* the paper's code calls it "direct" */
  stragglar_algo_stragglar_k = 5, /* several ranks late together (a slow node) */
  stragglar_algo_hierarchical = 6, /* a late host: reduce inside hosts, StragglAR across hosts */
  stragglar_algo_native = 100,  /* the engine's own: MPI_Allreduce / ncclAllReduce / Gloo */
  stragglar_algo_auto = 101     /* the library finds the straggler and picks the algorithm online */
} stragglar_algorithm;

#define STRAGGLAR_PIPELINE_AUTO 0

typedef struct {
  stragglar_algorithm algorithm; /* default stragglar_algo_auto (or STRAGGLAR_ALGORITHM) */
  int straggler;                 /* rank expected last; -1 = n-1 */
  int pipeline;                  /* StragglAR chunks per rank K; STRAGGLAR_PIPELINE_AUTO = model */
  /* Several ranks late together (stragglar_algo_stragglar_k): nstragglers distinct
   * ranks, at most n/2; read during the call only. NULL / 0 = none (then `straggler`). */
  const int* stragglers;
  int nstragglers;
} stragglar_options;

/* What algorithm = stragglar_algo_auto decided and saw on a communicator (its most recently
 * used auto configuration; docs/auto.md). Filled by stragglar_mpi_straggler_report and
 * stragglarNcclStragglerReport, which also copy min(nranks, nscores) per-rank scores in [0, 1]
 * (how late each rank came; the latest has the highest) into `scores` (may be NULL). */
typedef struct {
  int active;                    /* 1 once an auto call has run on this communicator */
  stragglar_algorithm algorithm; /* the decided choice (exploration calls aside) */
  int straggler;                 /* the rank that choice treats as late; -1: none */
  int late_rank;                 /* the rank late in most calls of the last window; -1: none */
  double delay_s;                /* its median delay in that window, seconds */
  long long calls;               /* auto calls so far */
  int nranks;
} stragglar_straggler_report;

/* Fills defaults: algorithm auto, straggler -1 (n-1), pipeline auto — or the values of
 * STRAGGLAR_ALGORITHM, STRAGGLAR_STRAGGLER, STRAGGLAR_PIPELINE when set (a malformed one
 * leaves the default; the first call then reports it). */
void stragglar_options_init(stragglar_options* opts);

/* Message of the last failed call on this thread ("" if none). */
const char* stragglar_last_error(void);
const char* stragglar_result_string(stragglar_result r);

#ifdef __cplusplus
}
#endif

#endif /* STRAGGLAR_H_ */
