// stragglar_mpi_allreduce: the MPI runtime's C entry point. Exceptions become a
// stragglar_result; the message goes to stragglar_last_error() (c_api.cpp).
#include <exception>
#include <new>
#include <string>

#include "stragglar/allreduce.hpp"
#include "stragglar/error.hpp"
#include "stragglar/runtime/last_error.hpp"
#include "stragglar/stragglar.h"
#include "stragglar/stragglar_mpi.h"

using stragglar::detail::guarded;

extern "C" {

stragglar_result stragglar_mpi_allreduce(const void* sendbuf, void* recvbuf, size_t count,
                                         stragglar_dtype dtype, stragglar_op op, MPI_Comm comm,
                                         const stragglar_options* opts) {
  return guarded([&] {
    stragglar_options o;
    stragglar_options_init(&o);
    if (opts != nullptr) o = *opts;
    stragglar::Options cpp;
    // An out-of-range algorithm is passed on: allreduce() rejects it on the agreed path, so
    // every rank learns about it (not only this one).
    const int a = static_cast<int>(o.algorithm);
    if (o.algorithm == stragglar_algo_native)
      cpp.native = true;
    else
      cpp.algorithm = static_cast<stragglar::Algorithm>(a);
    cpp.straggler = o.straggler;
    cpp.pipeline = o.pipeline;
    stragglar::allreduce(sendbuf, recvbuf, count, static_cast<stragglar::DataType>(dtype),
                         static_cast<stragglar::ReduceOp>(op), comm, cpp);
  });
}

}  // extern "C"
