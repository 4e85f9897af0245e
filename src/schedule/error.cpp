#include "stragglar/error.hpp"

namespace stragglar {

const char* to_string(ErrorCode code) noexcept {
  switch (code) {
    case ErrorCode::InvalidUsage: return "invalid usage";
    case ErrorCode::InvalidSchedule: return "invalid schedule";
    case ErrorCode::Mismatch: return "mismatch across ranks";
    case ErrorCode::Timeout: return "timeout";
    case ErrorCode::RemoteError: return "remote error";
    case ErrorCode::SystemError: return "system error";
    case ErrorCode::Internal: return "internal error";
  }
  return "unknown error";
}

}  // namespace stragglar
