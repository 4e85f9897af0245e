// The C boundary of the NCCL runtime (stragglar_nccl.h): NCCL types are checked and mapped
// here, exceptions become a stragglar_result and the message goes to stragglar_last_error().
#include <exception>
#include <new>
#include <string>

#include "stragglar/nccl.hpp"
#include "stragglar/runtime/last_error.hpp"
#include "stragglar/stragglar_nccl.h"

using stragglar::detail::guarded;

extern "C" {

stragglar_result stragglarNcclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                                        ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                        cudaStream_t stream, const stragglar_options* opts) {
  return guarded([&] {
    stragglar_options o;
    stragglar_options_init(&o);
    if (opts != nullptr) o = *opts;
    stragglar::NcclOptions cpp;
    const int a = static_cast<int>(o.algorithm);
    if (o.algorithm == stragglar_algo_native) {
      cpp.native = true;
    } else {
      stragglar::require(a >= stragglar_algo_stragglar && a <= stragglar_algo_broadcast,
                         "stragglarNcclAllReduce: unknown algorithm " + std::to_string(a) +
                             "; expected stragglar_algo_stragglar (0) .. stragglar_algo_native (5)");
      cpp.algorithm = static_cast<stragglar::Algorithm>(a);
    }
    cpp.straggler = o.straggler;
    cpp.pipeline = o.pipeline;
    stragglar::nccl_allreduce(sendbuff, recvbuff, count, stragglar::from_nccl(datatype),
                              stragglar::from_nccl(op), comm, stream, cpp);
  });
}

stragglar_result stragglarNcclCommRelease(ncclComm_t comm) {
  return guarded([&] { stragglar::nccl_comm_release(comm); });
}

}  // extern "C"
