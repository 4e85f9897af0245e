// The NCCL calls of the static runtime inside the preload library, forwarded to the process's
// own NCCL (process_nccl.hpp): the runtime links against these definitions instead of libnccl.
// They stay hidden (exports.map), so the program's calls never reach them. ncclAllReduce and
// ncclGroupStart/End are the library's exported wrappers (nccl_preload.cpp), which pass the
// runtime's calls straight through. The link uses -z defs: an NCCL call added to the runtime
// without a forwarder here fails the build.
#include <nccl.h>

#include "process_nccl.hpp"

using stragglar::nccl_preload::nccl_function;

extern "C" {

ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream) {
  static const auto real = nccl_function<decltype(&ncclSend)>("ncclSend");
  return real(sendbuff, count, datatype, peer, comm, stream);
}

ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream) {
  static const auto real = nccl_function<decltype(&ncclRecv)>("ncclRecv");
  return real(recvbuff, count, datatype, peer, comm, stream);
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError) {
  static const auto real = nccl_function<decltype(&ncclCommGetAsyncError)>("ncclCommGetAsyncError");
  return real(comm, asyncError);
}

ncclResult_t ncclCommCount(const ncclComm_t comm, int* count) {
  static const auto real = nccl_function<decltype(&ncclCommCount)>("ncclCommCount");
  return real(comm, count);
}

ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank) {
  static const auto real = nccl_function<decltype(&ncclCommUserRank)>("ncclCommUserRank");
  return real(comm, rank);
}

ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int* device) {
  static const auto real = nccl_function<decltype(&ncclCommCuDevice)>("ncclCommCuDevice");
  return real(comm, device);
}

const char* ncclGetErrorString(ncclResult_t result) {
  static const auto real = nccl_function<decltype(&ncclGetErrorString)>("ncclGetErrorString");
  return real(result);
}

}  // extern "C"
