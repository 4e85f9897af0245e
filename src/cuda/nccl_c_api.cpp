// The C boundary of the NCCL runtime (stragglar_nccl.h): NCCL types are mapped here,
// exceptions become a stragglar_result and the message goes to stragglar_last_error().
#include "runtime/last_error.hpp"
#include "stragglar/nccl.hpp"
#include "stragglar/stragglar_nccl.h"

using stragglar::detail::guarded;

extern "C" {

stragglar_result stragglarNcclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                                        ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                        cudaStream_t stream, const stragglar_options* opts) {
  return guarded([&] {
    stragglar::nccl_allreduce(sendbuff, recvbuff, count, stragglar::from_nccl(datatype), stragglar::from_nccl(op),
                              comm, stream, stragglar::detail::options_from_c(opts));
  });
}

stragglar_result stragglarNcclCommRelease(ncclComm_t comm) {
  return guarded([&] { stragglar::nccl_comm_release(comm); });
}

stragglar_result stragglarNcclCommAbandon(ncclComm_t comm) {
  return guarded([&] { stragglar::nccl_comm_abandon(comm); });
}

stragglar_result stragglarNcclStragglerReport(ncclComm_t comm, stragglar_straggler_report* report, double* scores,
                                              int nscores) {
  return guarded([&] {
    const stragglar::StragglerReport r = stragglar::nccl_straggler_report(comm);
    stragglar::detail::report_to_c(r, static_cast<int>(r.scores.size()), report, scores, nscores);
  });
}

}  // extern "C"
