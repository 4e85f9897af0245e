// stragglar::Error — the one exception type of the library (docs/design.md "Errors").
// A message always names the bad value and what was expected.
#pragma once
#include <stdexcept>
#include <string>

namespace stragglar {

enum class ErrorCode {
  InvalidUsage,   // bad argument from the caller (value named in the message)
  InvalidSchedule,  // a schedule that the verifier or the JSON reader rejects
  Mismatch,       // ranks disagree on the arguments of one collective call
  Timeout,        // a peer did not answer in time (died or stopped)
  RemoteError,    // a peer reported a failure
  SystemError,    // MPI / CUDA / NCCL returned an error
  Internal,       // a bug in stragglar
};

const char* to_string(ErrorCode code) noexcept;

class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, const std::string& message)
      : std::runtime_error(message), code_(code) {}
  ErrorCode code() const noexcept { return code_; }

 private:
  ErrorCode code_;
};

// Throws Error(code, message) when cond is false. A message built with `+` is built even when
// the check passes: on hot paths write `if (!cond) throw Error(...)` instead.
inline void require(bool cond, const std::string& message,
                    ErrorCode code = ErrorCode::InvalidUsage) {
  if (!cond) throw Error(code, message);
}
// A literal message: no string is built unless the check fails.
inline void require(bool cond, const char* message, ErrorCode code = ErrorCode::InvalidUsage) {
  if (!cond) throw Error(code, message);
}

}  // namespace stragglar
