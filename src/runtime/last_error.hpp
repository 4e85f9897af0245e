// The C boundary shared by every runtime (MPI and NCCL): the thread-local message behind
// stragglar_last_error() (src/runtime/c_api.cpp) and the guard that turns exceptions into a
// stragglar_result.
#pragma once
#include <exception>
#include <new>
#include <string>

#include "stragglar/error.hpp"
#include "stragglar/options.hpp"
#include "stragglar/stragglar.h"

namespace stragglar::detail {

// Sets the message stragglar_last_error() returns on this thread ("" clears it).
void set_last_error(const std::string& message);

// The C options (NULL = stragglar_options_init's defaults) as stragglar::Options. Values are
// cast, not checked: the runtime core rejects a bad one on every rank through its agreement.
Options options_from_c(const stragglar_options* opts) noexcept;

// Copies a StragglerReport into the C struct and up to nscores scores (scores may be NULL).
void report_to_c(const StragglerReport& r, int nranks, stragglar_straggler_report* out, double* scores, int nscores);

inline stragglar_result to_result(ErrorCode c) noexcept {
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

// Runs f; maps every exception to a status and records its message (success clears it).
template <typename F>
stragglar_result guarded(F&& f) noexcept {
  try {
    f();
    set_last_error("");
    return stragglar_success;
  } catch (const Error& e) {
    set_last_error(e.what());
    return to_result(e.code());
  } catch (const std::bad_alloc&) {
    set_last_error("out of memory");
    return stragglar_system_error;
  } catch (const std::exception& e) {
    set_last_error(e.what());
    return stragglar_internal_error;
  } catch (...) {
    set_last_error("unknown exception");
    return stragglar_internal_error;
  }
}

}  // namespace stragglar::detail
