// The thread-local message behind stragglar_last_error() (src/runtime/c_api.cpp), shared by
// every C boundary of the library (MPI and NCCL runtimes).
#pragma once
#include <string>

namespace stragglar::detail {

// Sets the message stragglar_last_error() returns on this thread ("" clears it).
void set_last_error(const std::string& message);

}  // namespace stragglar::detail
