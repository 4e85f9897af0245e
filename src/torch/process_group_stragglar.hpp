// The c10d backend "stragglar" (docs/torch.md): torch.distributed's all_reduce runs
// through the runtime core (src/runtime/session.hpp), everything else through inner backends.
//
//   all_reduce of one dense tensor, float32/64, float16, bfloat16, int32, int64 ×
//   SUM, PRODUCT, MIN, MAX, AVG:
//     CPU tensor   → a worker thread of this group: Session over UcxEngine (src/ucx/ucx_engine.hpp)
//     CUDA tensor  → NcclSession on an ncclComm of this group's own, on a backend stream
//                    ordered after the caller's (cuda_allreduce.hpp; CUDA builds only)
//   anything else (other collectives, dtypes, ops; sparse tensors; lists of tensors)
//     → the inner backend for the tensors' device: Gloo (CPU) or NCCL (CUDA), made on first
//       use from the same store (PrefixStore) by torch's own classes, through `InnerFactory`.
//
// Any tensor works: contiguous ones (views with a storage offset, 0-dim, empty included) are
// reduced in place, others through a contiguous copy written back element by element, so
// nothing outside the tensor's elements is touched. Tensors whose elements overlap are refused.
#pragma once
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "backend_options.hpp"
#include "call_records.hpp"
#include "runtime/straggler_policy.hpp"
#include "stragglar/types.hpp"

namespace stragglar::torch_backend {

class CpuAllreduce;   // cpu_allreduce.hpp
class CudaAllreduce;  // cuda_allreduce.hpp (CUDA builds: STRAGGLAR_TORCH_CUDA=1)

// Makes the inner backend `name` — "gloo" (delegated CPU collectives), "gloo_native" (the CPU
// engine's `native`, used only from the worker thread so that its calls keep one order on every
// rank) or "nccl" (delegated CUDA collectives) — over PrefixStore(name + "/", the group's store).
// Called once per name, by every rank at the same point of the program (it is collective).
using InnerFactory = std::function<c10::intrusive_ptr<c10d::Backend>(const std::string& name)>;

// What a group's all_reduce ran and saw on one device (stragglar.torch.straggler_report):
// the core's choice for the most recent call and, for algorithm = auto, the straggler policy's
// state (docs/auto.md).
struct GroupReport {
  bool ran = false;              // an all_reduce on this device has run through the core
  std::string device;            // "cpu" or "cuda:N"
  detail::Choice last;           // what the most recent call ran
  StragglerReport automatic;     // algorithm = auto: who is late, by how much, scores per rank
};

class ProcessGroupStragglar final : public c10d::Backend {
 public:
  ProcessGroupStragglar(c10::intrusive_ptr<c10d::Store> store, int rank, int size, std::chrono::milliseconds timeout,
                        BackendOptions options, InnerFactory inner_factory);
  ~ProcessGroupStragglar() override;

  const std::string getBackendName() const override { return "stragglar"; }
  c10::intrusive_ptr<c10d::Backend::Options> getBackendOptions() override;
  void setTimeout(std::chrono::milliseconds timeout) override;
  uint64_t getSequenceNumberForGroup() override { return sequence_.load(); }
  void setSequenceNumberForGroup() override {}  // every rank starts at 0
  void abort() override;
  void shutdown() override;

  // Through the core (or delegated, see the top of this file).
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts = c10d::AllreduceOptions()) override;

  // Delegated to the inner backend of the tensors' device (collective / point_to_point below).
  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts = c10d::BroadcastOptions()) override {
    return collective(&c10d::Backend::broadcast, tensors, tensors, opts);
  }
  c10::intrusive_ptr<c10d::Work> allreduce_sparse(std::vector<at::Tensor>& tensors,
                                                  const c10d::AllreduceOptions& opts = c10d::AllreduceOptions()) override {
    return collective(&c10d::Backend::allreduce_sparse, tensors, tensors, opts);
  }
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
      std::vector<at::Tensor>& tensors,
      const c10d::AllreduceCoalescedOptions& opts = c10d::AllreduceCoalescedOptions()) override {
    return collective(&c10d::Backend::allreduce_coalesced, tensors, tensors, opts);
  }
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                        const c10d::ReduceOptions& opts = c10d::ReduceOptions()) override {
    return collective(&c10d::Backend::reduce, tensors, tensors, opts);
  }
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts = c10d::AllgatherOptions()) override {
    return collective(&c10d::Backend::allgather, inputs, outputs, inputs, opts);
  }
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts = c10d::AllgatherOptions()) override {
    return collective(&c10d::Backend::_allgather_base, input, output, input, opts);
  }
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(
      std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts = c10d::AllgatherOptions()) override {
    return collective(&c10d::Backend::allgather_coalesced, inputs, outputs, inputs, opts);
  }
  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts = c10d::AllgatherOptions()) override {
    return collective(&c10d::Backend::allgather_into_tensor_coalesced, inputs, outputs, inputs, opts);
  }
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                        std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts = c10d::GatherOptions()) override {
    return collective(&c10d::Backend::gather, inputs, outputs, inputs, opts);
  }
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                         std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts = c10d::ScatterOptions()) override {
    return collective(&c10d::Backend::scatter, outputs, outputs, inputs, opts);
  }
  c10::intrusive_ptr<c10d::Work> reduce_scatter(
      std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
      const c10d::ReduceScatterOptions& opts = c10d::ReduceScatterOptions()) override {
    return collective(&c10d::Backend::reduce_scatter, outputs, outputs, inputs, opts);
  }
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
      at::Tensor& output, at::Tensor& input,
      const c10d::ReduceScatterOptions& opts = c10d::ReduceScatterOptions()) override {
    return collective(&c10d::Backend::_reduce_scatter_base, input, output, input, opts);
  }
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::ReduceScatterOptions& opts = c10d::ReduceScatterOptions()) override {
    return collective(&c10d::Backend::reduce_scatter_tensor_coalesced, inputs, outputs, inputs, opts);
  }
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& output_split_sizes,
                                               std::vector<int64_t>& input_split_sizes,
                                               const c10d::AllToAllOptions& opts = c10d::AllToAllOptions()) override {
    return collective(&c10d::Backend::alltoall_base, input, output, input, output_split_sizes, input_split_sizes, opts);
  }
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts = c10d::AllToAllOptions()) override {
    return collective(&c10d::Backend::alltoall, inputs, outputs, inputs, opts);
  }
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst_rank, int tag) override {
    return point_to_point(&c10d::Backend::send, tensors, tensors, dst_rank, tag);
  }
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src_rank, int tag) override {
    return point_to_point(&c10d::Backend::recv, tensors, tensors, src_rank, tag);
  }
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors, int tag) override {
    return point_to_point(&c10d::Backend::recvAnysource, tensors, tensors, tag);
  }
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts = c10d::BarrierOptions()) override;
  void monitoredBarrier(const c10d::BarrierOptions& opts, bool wait_all_ranks = false) override;

  const BackendOptions& options() const noexcept { return options_; }
  std::chrono::milliseconds timeout() const noexcept { return std::chrono::milliseconds(timeout_ms_.load()); }
  // What the most recent all_reduce on the CPU / on CUDA ran through the core.
  GroupReport report(bool cuda);
  // The inner backends made so far, e.g. "gloo, gloo_native".
  std::string inner_backends();
  // What carries the CPU engine's messages to `peer` ("sysv/memory cma/memory (process
  // watched)"), or "" before the first CPU all_reduce connected it.
  std::string describe_peer(int peer);

 private:
  enum class Inner { gloo, gloo_native, nccl };
  c10d::Backend& inner(Inner which);
  c10d::Backend& inner_for(const std::vector<at::Tensor>& tensors);
  c10d::Backend& inner_for(const at::Tensor& tensor);
  // A delegated call: `method` of the inner backend for the device of `by` (a tensor or the
  // tensors that name it). Every rank makes the same inner backend at the same call (making one
  // is collective), so the sequence of collectives stays the same on every rank; collectives
  // count in the group's sequence number, point-to-point calls do not.
  template <class Method, class By, class... Args>
  c10::intrusive_ptr<c10d::Work> collective(Method method, const By& by, Args&&... args) {
    ++sequence_;
    return (inner_for(by).*method)(std::forward<Args>(args)...);
  }
  template <class Method, class By, class... Args>
  c10::intrusive_ptr<c10d::Work> point_to_point(Method method, const By& by, Args&&... args) {
    return (inner_for(by).*method)(std::forward<Args>(args)...);
  }
  // The CPU engine's `native`: Gloo's allreduce on a copy in native_stage_ (avg as sum, then
  // divided), copied back on success.
  void native_allreduce(void* buf, std::size_t count, DataType dtype, ReduceOp op, bool keep_buffer);
  at::Tensor native_stage_;  // the CPU engine's worker thread's only
  CpuAllreduce& cpu();
#if STRAGGLAR_TORCH_CUDA
  CudaAllreduce& cuda(const at::Tensor& tensor);
#endif
  std::chrono::milliseconds op_timeout(std::chrono::milliseconds requested) const;

  c10::intrusive_ptr<c10d::Store> store_;
  BackendOptions options_;
  InnerFactory inner_factory_;
  std::atomic<std::int64_t> timeout_ms_;
  std::atomic<std::uint64_t> sequence_{0};
  CallRecords records_;  // explains a failed all_reduce (call_records.hpp); outlives cpu_

  std::mutex inner_mutexes_[3];  // one per inner backend: guards its creation
  c10::intrusive_ptr<c10d::Backend> inners_[3];

  std::mutex engines_mutex_;  // guards the creation of cpu_ and cuda_
  std::unique_ptr<CpuAllreduce> cpu_;
#if STRAGGLAR_TORCH_CUDA
  std::unique_ptr<CudaAllreduce> cuda_;
  std::string cuda_error_;  // a failed start of the CUDA engine, final
#endif
};

// For module.cpp: runs f with the GIL released when this thread holds it (joining a worker that
// may need the GIL to make an inner backend). Defined in module.cpp.
void run_without_gil(const std::function<void()>& f);

// What a torch user does with a group whose all_reduce failed (the core's "broken" state).
inline constexpr const char* kAfterFailure =
    "destroy this process group (torch.distributed.destroy_process_group, or destroy_process_group(group)) "
    "and create a new one";

}  // namespace stragglar::torch_backend
