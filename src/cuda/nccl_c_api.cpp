// The C boundary of the NCCL runtime (stragglar_nccl.h): NCCL types are checked and mapped
// here, exceptions become a stragglar_result and the message goes to stragglar_last_error().
#include <exception>
#include <new>
#include <string>

#include "stragglar/nccl.hpp"
#include "stragglar/stragglar_nccl.h"

// stragglar_last_error() and its thread-local string live in the shared C boundary
// (src/runtime/c_api.cpp). Its setter is referenced weakly so that this file links against a
// runtime that does not export one yet; with no setter the message stays in t_message below
// (still returned by the C++ API's exceptions) and stragglar_last_error() cannot see it.
namespace stragglar::detail {
void set_last_error(const std::string& message) __attribute__((weak));
}

namespace {

thread_local std::string t_message;

void record(const char* message) {
  t_message = message;
  if (&stragglar::detail::set_last_error != nullptr) stragglar::detail::set_last_error(t_message);
}

stragglar_result to_result(stragglar::ErrorCode c) {
  using stragglar::ErrorCode;
  switch (c) {
    case ErrorCode::InvalidUsage:
    case ErrorCode::InvalidSchedule: return stragglar_invalid_usage;
    case ErrorCode::Mismatch: return stragglar_mismatch;
    case ErrorCode::Timeout: return stragglar_timeout;
    case ErrorCode::RemoteError: return stragglar_remote_error;
    case ErrorCode::SystemError: return stragglar_system_error;
    case ErrorCode::Internal: return stragglar_internal_error;
  }
  return stragglar_internal_error;
}

template <typename F>
stragglar_result guarded(F&& f) noexcept {
  try {
    f();
    record("");
    return stragglar_success;
  } catch (const stragglar::Error& e) {
    record(e.what());
    return to_result(e.code());
  } catch (const std::bad_alloc&) {
    record("out of memory");
    return stragglar_system_error;
  } catch (const std::exception& e) {
    record(e.what());
    return stragglar_internal_error;
  } catch (...) {
    record("unknown exception");
    return stragglar_internal_error;
  }
}

}  // namespace

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
