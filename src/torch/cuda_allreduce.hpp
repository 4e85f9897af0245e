// The CUDA half of the backend (CUDA builds only; docs/torch.md "CUDA tensors"): all_reduce of
// CUDA tensors through the core's NCCL engine (src/cuda/nccl_engine.hpp: NcclSession) on an
// ncclComm of this group's own, its ncclUniqueId passed through the group's c10d store.
//
// Stream-ordered like ProcessGroupNCCL: the group's backend stream first waits (event) for the
// caller's current stream, runs the call, and the Work completes through an event recorded
// after it; the caching allocator is told the tensor is in use on the backend stream. The host
// never waits for the GPU, except in the core's argument check on the first call of each new
// configuration (a small ncclAllReduce polled with the timeout) and in Work.wait(timeout).
//
// The process must use one NCCL, torch's: this module links libnccl.so.2 by its soname and
// stragglar.torch imports torch first, so the library torch loaded (the nvidia-nccl wheel) is the
// one in use; loaded_nccl() says which one that is.
#pragma once
#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <chrono>
#include <memory>
#include <string>

#include "process_group_stragglar.hpp"

namespace stragglar::torch_backend {

class CudaAllreduce {
 public:
  // Creates the communicator on `device` (collective: every rank of the group, with the same
  // device count per rank irrelevant; one device per rank). Throws Error(Timeout) when a rank
  // does not join within `timeout` (the communicator is aborted).
  CudaAllreduce(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size, at::Device device,
                std::chrono::milliseconds timeout);
  // A broken communicator's GPU work may never finish: its session and comm are leaked then.
  ~CudaAllreduce();
  CudaAllreduce(const CudaAllreduce&) = delete;
  CudaAllreduce& operator=(const CudaAllreduce&) = delete;

  // tensor ⊕= over ranks, stream-ordered after the caller's current stream; returns at once.
  // `timeout`: this call's (the group's, or AllreduceOptions.timeout), for the agreement and polls.
  // A stream being captured into a CUDA graph is refused (c10::Error) before anything is enqueued.
  c10::intrusive_ptr<c10d::Work> run(const at::Tensor& tensor, DataType dtype, ReduceOp op, const Options& options,
                                     std::uint64_t sequence, std::chrono::milliseconds timeout);
  at::Device device() const noexcept;
  GroupReport report();
  // ncclCommAbort: pending and later calls fail; the communicator is leaked.
  void abort() noexcept;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Throws c10::Error (naming CUDA graphs) when `device`'s current stream is being captured into a
// CUDA graph: called before anything CUDA is done for an all_reduce, the engine's creation
// included (its cudaMalloc would invalidate a global-mode capture and leave the group's CUDA path
// failed for good), so the capture and the group stay usable.
void refuse_graph_capture(at::Device device);

// The NCCL this process has loaded: its version code (ncclGetVersion, e.g. 23007 for 2.30.7),
// the file it was loaded from, and the version of the nccl.h this module was compiled with.
struct NcclLibrary {
  int version = 0;
  std::string path;
  int compiled_version = 0;
};
NcclLibrary loaded_nccl();

}  // namespace stragglar::torch_backend
