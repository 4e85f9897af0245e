// libstragglar_nccl_preload.so: ncclAllReduce through stragglar for unmodified NCCL programs
// (PyTorch's ProcessGroupNCCL, nccl-tests), docs/preload.md "NCCL".
//
// Preloaded, this library's ncclAllReduce is the one the program calls. It serves a call
// through the NCCL front-end of the runtime core (stragglarNcclAllReduce: auto by default,
// STRAGGLAR_ALGORITHM etc. honoured) and hands every other call to the real NCCL, found at run
// time (process_nccl.hpp): the libnccl the program itself loaded (torch's own, for PyTorch). Passed
// through: calls inside ncclGroupStart/End (they must fuse with the group's other operations),
// calls on a stream under CUDA graph capture (stragglar's host-side agreement cannot be
// captured), unsupported types and ops (ncclPreMulSum, user ops, uint8/uint32/uint64/fp8),
// calls below STRAGGLAR_NCCL_MIN_BYTES, and one-rank communicators. NCCL requires every rank
// to pass the same count, type and op, and symmetric groups and captures, so every rank
// decides alike.
//
// The static runtime's own NCCL calls (runtime_nccl_calls.cpp; ncclAllReduce for its agreement)
// reach the real NCCL — the gate marks them — and leave the program's group depth untouched.
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstdio>

#include "group_depth.hpp"
#include "process_nccl.hpp"
#include "stragglar/stragglar.h"
#include "stragglar/stragglar_nccl.h"
#include "runtime/preload_gate.hpp"

namespace {

using stragglar::nccl_preload::real;

// The gate shared with the PMPI preload (runtime/preload_gate.hpp): STRAGGLAR_NCCL_MIN_BYTES
// and the rest of the configuration read once, counters, the runtime's own calls, announcements.
struct NcclPreload;
using Gate = stragglar::detail::PreloadGate<NcclPreload, ncclComm_t>;
Gate& g_gate = *new Gate(&stragglar::detail::RuntimeConfig::nccl_min_bytes);  // never freed: no work at exit

__attribute__((tls_model("initial-exec"))) thread_local stragglar::nccl_preload::GroupDepth t_group;  // the program's

std::size_t element_size(ncclDataType_t t) {
  switch (t) {
    case ncclFloat32: case ncclInt32: return 4;
    case ncclFloat64: case ncclInt64: return 8;
    case ncclFloat16: case ncclBfloat16: return 2;
    default: return 0;  // not served: int8, uint8, uint32, uint64, fp8
  }
}

bool served_op(ncclRedOp_t op) {
  return op == ncclSum || op == ncclProd || op == ncclMin || op == ncclMax || op == ncclAvg;
}

ncclResult_t to_nccl(stragglar_result r) {
  switch (r) {
    case stragglar_success: return ncclSuccess;
    case stragglar_invalid_usage: return ncclInvalidArgument;
    case stragglar_mismatch: return ncclInvalidUsage;
    case stragglar_remote_error: return ncclRemoteError;
    case stragglar_timeout: return ncclSystemError;
    case stragglar_system_error: return ncclUnhandledCudaError;
    default: return ncclInternalError;
  }
}

// STRAGGLAR_DEBUG=INFO: one line per communicator, on its rank 0.
void announce(ncclComm_t comm, int nranks, std::size_t min_bytes, const char* pass_reason) {
  if (!g_gate.first_sight(comm)) return;
  int rank = 0;
  real().comm_user_rank(comm, &rank);
  if (rank != 0) return;
  if (pass_reason)
    std::fprintf(stderr, "stragglar-nccl-preload: communicator %p (%d ranks): every ncclAllReduce goes to NCCL (%s)\n",
                 static_cast<void*>(comm), nranks, pass_reason);
  else
    std::fprintf(stderr,
                 "stragglar-nccl-preload: communicator %p (%d ranks): ncclAllReduce of fp32/fp64/fp16/bf16/int32/int64 x "
                 "sum/prod/min/max/avg >= %zu bytes, outside groups and graph capture, goes through stragglar; "
                 "everything else goes to NCCL\n",
                 static_cast<void*>(comm), nranks, min_bytes);
}

}  // namespace

extern "C" {

ncclResult_t ncclGroupStart() {
  if (!Gate::inside()) t_group.start();
  return real().group_start();
}

ncclResult_t ncclGroupEnd() {
  if (!Gate::inside()) t_group.end();
  return real().group_end();
}

#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 22, 0)
// Closes the group as ncclGroupEnd does (NCCL only simulates its operations): torch calls it.
ncclResult_t ncclGroupSimulateEnd(ncclSimInfo_t* simInfo) {
  static const auto group_simulate_end =
      stragglar::nccl_preload::nccl_function<decltype(&ncclGroupSimulateEnd)>("ncclGroupSimulateEnd");
  if (!Gate::inside()) t_group.end();
  return group_simulate_end(simInfo);
}
#endif

ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                           ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  const stragglar::nccl_preload::NcclFunctions& r = real();
  const auto pass = [&] {
    g_gate.pass();
    return r.all_reduce(sendbuff, recvbuff, count, datatype, op, comm, stream);
  };
  if (Gate::inside()) return r.all_reduce(sendbuff, recvbuff, count, datatype, op, comm, stream);  // the runtime's own
  if (t_group.inside()) return pass();
  const std::size_t es = element_size(datatype);
  if (es == 0 || !served_op(op) || count == 0 || g_gate.below_threshold(count * es) || comm == nullptr) return pass();
  int nranks = 0;
  if (r.comm_count(comm, &nranks) != ncclSuccess) return pass();
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream, &capture) != cudaSuccess) capture = cudaStreamCaptureStatusActive;  // be safe
  const stragglar::detail::PreloadSettings& s = g_gate.settings();
  const char* pass_reason = nranks < 2 ? "one rank" : nullptr;
  if (s.debug) announce(comm, nranks, s.min_bytes, pass_reason);
  if (pass_reason || capture != cudaStreamCaptureStatusNone) return pass();
  if (s.error) {
    std::fprintf(stderr, "stragglar-nccl-preload: %s\n", s.error->what());
    return ncclInvalidArgument;
  }
  const auto serving = g_gate.serve();
  const stragglar_result res = stragglarNcclAllReduce(sendbuff, recvbuff, count, datatype, op, comm, stream, nullptr);
  if (res != stragglar_success)
    std::fprintf(stderr, "stragglar-nccl-preload: ncclAllReduce failed: %s\n", stragglar_last_error());
  return to_nccl(res);
}

// How many ncclAllReduce calls went through stragglar and how many to NCCL in this process (for
// checks; found with dlsym).
void stragglar_nccl_preload_counts(long long* served, long long* passed) {
  if (served) *served = g_gate.served();
  if (passed) *passed = g_gate.passed();
}

// For checks (found with dlsym): the calling thread's group depth as the library tracks it.
int stragglar_nccl_preload_group_depth() { return t_group.depth(); }

// stragglar's per-communicator state must go before NCCL frees the communicator.
ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  {
    const Gate::Serving inside;  // the runtime's NCCL calls while it lets go: not the program's
    (void)stragglarNcclCommRelease(comm);
  }
  g_gate.forget(comm);
  return real().comm_destroy(comm);
}

// An abort is for a communicator whose GPU work may never finish (a peer died, a collective
// hangs, torch's watchdog): stragglar's state is left, not freed, since freeing would wait for
// that work and hang the abort.
ncclResult_t ncclCommAbort(ncclComm_t comm) {
  {
    const Gate::Serving inside;
    (void)stragglarNcclCommAbandon(comm);
  }
  g_gate.forget(comm);
  return real().comm_abort(comm);
}

}  // extern "C"
