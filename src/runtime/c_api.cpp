// The C boundary: exceptions become a stragglar_result, the message stays in a thread-local
// string for stragglar_last_error() (DESIGN.md "Errors").
#include <exception>
#include <new>
#include <string>

#include "stragglar/allreduce.hpp"
#include "stragglar/error.hpp"
#include "stragglar/runtime/last_error.hpp"
#include "stragglar/stragglar.h"
#include "stragglar/stragglar_mpi.h"

namespace {

thread_local std::string t_last_error;

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

// Runs f; maps every exception to a status and records its message.
template <typename F>
stragglar_result guarded(F&& f) noexcept {
  try {
    f();
    t_last_error.clear();
    return stragglar_success;
  } catch (const stragglar::Error& e) {
    t_last_error = e.what();
    return to_result(e.code());
  } catch (const std::bad_alloc&) {
    t_last_error = "out of memory";
    return stragglar_system_error;
  } catch (const std::exception& e) {
    t_last_error = e.what();
    return stragglar_internal_error;
  } catch (...) {
    t_last_error = "unknown exception";
    return stragglar_internal_error;
  }
}

}  // namespace

void stragglar::detail::set_last_error(const std::string& message) { t_last_error = message; }

extern "C" {

void stragglar_options_init(stragglar_options* opts) {
  if (opts == nullptr) return;
  opts->algorithm = stragglar_algo_stragglar;
  opts->straggler = -1;
  opts->pipeline = STRAGGLAR_PIPELINE_AUTO;
}

const char* stragglar_last_error(void) { return t_last_error.c_str(); }

const char* stragglar_result_string(stragglar_result r) {
  switch (r) {
    case stragglar_success: return "success";
    case stragglar_invalid_usage: return "invalid usage";
    case stragglar_mismatch: return "ranks disagree on the call's arguments";
    case stragglar_timeout: return "timeout: a peer died or stopped";
    case stragglar_remote_error: return "error on a remote rank";
    case stragglar_system_error: return "system error (MPI / CUDA / NCCL)";
    case stragglar_internal_error: return "internal error";
  }
  return "unknown stragglar_result";
}

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
