// The c10d backend "stragglar" (process_group_stragglar.hpp; docs/torch.md).
#include "process_group_stragglar.hpp"

#include <ATen/MemoryOverlap.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <system_error>
#include <thread>
#include <utility>

#include "cpu_allreduce.hpp"
#include "runtime/cpu_device.hpp"
#include "runtime/env.hpp"
#include "tensor_args.hpp"
#if STRAGGLAR_TORCH_CUDA
#include "cuda_allreduce.hpp"
#endif

namespace stragglar::torch_backend {
namespace {

constexpr const char* kInnerNames[] = {"gloo", "gloo_native", "nccl"};

at::ScalarType torch_dtype(DataType t) {
  switch (t) {
    case DataType::float32: return at::kFloat;
    case DataType::float64: return at::kDouble;
    case DataType::float16: return at::kHalf;
    case DataType::bfloat16: return at::kBFloat16;
    case DataType::int32: return at::kInt;
    case DataType::int64: return at::kLong;
  }
  throw Error(ErrorCode::Internal, "torch_dtype: unknown DataType");
}

c10d::ReduceOp torch_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: case ReduceOp::avg: return c10d::ReduceOp::SUM;  // avg: divided afterwards
    case ReduceOp::prod: return c10d::ReduceOp::PRODUCT;
    case ReduceOp::min: return c10d::ReduceOp::MIN;
    case ReduceOp::max: return c10d::ReduceOp::MAX;
  }
  throw Error(ErrorCode::Internal, "torch_op: unknown ReduceOp");
}

}  // namespace

ProcessGroupStragglar::ProcessGroupStragglar(c10::intrusive_ptr<c10d::Store> store, int rank, int size,
                                             std::chrono::milliseconds timeout, BackendOptions options,
                                             InnerFactory inner_factory)
    : c10d::Backend(rank, size),
      store_(std::move(store)),
      options_(std::move(options)),
      inner_factory_(std::move(inner_factory)),
      timeout_ms_(timeout.count()),
      records_(store_, rank, size) {
  TORCH_CHECK_VALUE(options_.core.straggler < size, "stragglar.torch: ", options_.to_string(),
                    ": straggler is outside [0, ", size, ") for this group of ", size,
                    " ranks (or -1 for the last rank)");
  TORCH_CHECK_VALUE(timeout.count() > 0, "stragglar.torch: timeout ", timeout.count(), " ms, expected > 0");
  init();
  // The inner Gloo backends and the CPU engine now, while every rank is making the group,
  // not on first use: a delegated barrier or collective then times out and reports
  // exactly as Gloo's own, instead of waiting in a rendezvous that a dead, stopped or
  // differently-routed peer never joins. NCCL's stays lazy (it needs a CUDA device).
  inner(Inner::gloo);
  inner(Inner::gloo_native);
  cpu().connect_now(static_cast<double>(timeout_ms_) / 1000.0);
}

ProcessGroupStragglar::~ProcessGroupStragglar() {
  // The CPU worker may still use the native Gloo: it goes first, the inner backends last.
  if (cpu_ && cpu_->on_worker()) {
    // Destroyed by a future's callback on the worker itself (its closure held the last reference
    // to the group): the worker cannot join itself (std::terminate). It stops taking calls, and
    // a thread of its own joins it once this callback has returned, then frees it; the worker
    // runs nothing more that uses this group (queued calls failed in stop()).
    cpu_->stop("the process group was destroyed");
    CpuAllreduce* worker = cpu_.release();
    try {
      std::thread([worker] { delete worker; }).detach();
    } catch (const std::system_error&) {
      // No thread to be had (a pids limit): left, the stopped worker ends on its own.
    }
  }
  cpu_.reset();
#if STRAGGLAR_TORCH_CUDA
  cuda_.reset();
#endif
}

c10::intrusive_ptr<c10d::Backend::Options> ProcessGroupStragglar::getBackendOptions() {
  auto o = c10::make_intrusive<c10d::Backend::Options>("stragglar", timeout());
  o->group_name = getGroupUid();
  return o;
}

void ProcessGroupStragglar::setTimeout(std::chrono::milliseconds timeout) {
  TORCH_CHECK_VALUE(timeout.count() > 0, "stragglar.torch: timeout ", timeout.count(), " ms, expected > 0");
  timeout_ms_ = timeout.count();
  for (auto& inner : inners_)
    if (inner) inner->setTimeout(timeout);
}

std::chrono::milliseconds ProcessGroupStragglar::op_timeout(std::chrono::milliseconds requested) const {
  return requested.count() > 0 ? requested : timeout();
}

void ProcessGroupStragglar::abort() {
  if (cpu_) cpu_->stop("the process group was aborted");
#if STRAGGLAR_TORCH_CUDA
  if (cuda_) cuda_->abort();
#endif
  for (auto& inner : inners_)
    if (inner) inner->abort();
}

void ProcessGroupStragglar::shutdown() {
  // A normal end: the calls already queued run first (destroy_process_group right after
  // async all_reduces), then nothing more is taken.
  if (cpu_) {
    run_without_gil([this] { cpu_->drain(); });
    cpu_->stop("the process group was shut down");
  }
  for (auto& inner : inners_)
    if (inner) inner->shutdown();
}

// ---- inner backends -------------------------------------------------------------------------------
c10d::Backend& ProcessGroupStragglar::inner(Inner which) {
  const auto i = static_cast<std::size_t>(which);
  // One lock per inner backend: making one is collective and may wait for other ranks, while
  // another thread of this rank makes another (the worker its native Gloo).
  std::lock_guard<std::mutex> lock(inner_mutexes_[i]);
  if (!inners_[i]) {
    TORCH_CHECK(inner_factory_, "stragglar.torch: no factory for the inner backend '", kInnerNames[i], "'");
    inners_[i] = inner_factory_(kInnerNames[i]);
    TORCH_CHECK(inners_[i], "stragglar.torch: the factory returned no '", kInnerNames[i], "' backend");
  }
  return *inners_[i];
}

c10d::Backend& ProcessGroupStragglar::inner_for(const at::Tensor& tensor) {
  return inner(tensor.is_cuda() ? Inner::nccl : Inner::gloo);
}

c10d::Backend& ProcessGroupStragglar::inner_for(const std::vector<at::Tensor>& tensors) {
  for (const at::Tensor& t : tensors)
    if (t.is_cuda()) return inner(Inner::nccl);
  return inner(Inner::gloo);
}

std::string ProcessGroupStragglar::inner_backends() {
  std::string out;
  for (std::size_t i = 0; i < 3; ++i) {
    std::lock_guard<std::mutex> lock(inner_mutexes_[i]);
    if (inners_[i]) out += (out.empty() ? "" : ", ") + std::string(kInnerNames[i]);
  }
  return out;
}

void ProcessGroupStragglar::native_allreduce(void* buf, std::size_t count, DataType dtype, ReduceOp op, bool keep_buffer) {
  // c10 errors become the core's, so the session sees a failed engine (and breaks).
  // Through a tensor of our own (docs/reliability.md, class 6): Work::wait's timeout returns while Gloo's
  // thread may still run the allreduce (its own timeout starts when it starts) and write its
  // tensor when a stopped peer resumes. That tensor is the stage, which the Work keeps alive;
  // the caller's buffer is written only once Gloo has the result. Grown, never shrunk: no
  // allocation per call. After a failure the group is broken and the stage never used again.
  // Without a kept buffer (keep_buffer false: STRAGGLAR_KEEP_BUFFERS=0): on the caller's buffer,
  // no copies.
  const std::size_t bytes = count * size_of(dtype);
  const bool staged = keep_buffer;
  try {
    const auto n = static_cast<std::int64_t>(count);
    const auto options = at::TensorOptions().dtype(torch_dtype(dtype));
    if (staged && (!native_stage_.defined() || native_stage_.scalar_type() != torch_dtype(dtype) ||
                   native_stage_.numel() < n))
      native_stage_ = at::empty({std::max<std::int64_t>(n, native_stage_.defined() ? native_stage_.numel() : 0)}, options);
    std::vector<at::Tensor> tensors{staged ? native_stage_.narrow(0, 0, n) : at::from_blob(buf, {n}, options)};
    if (staged) std::memcpy(tensors[0].data_ptr(), buf, bytes);
    c10d::AllreduceOptions o;
    o.reduceOp = torch_op(op);
    o.timeout = timeout();
    inner(Inner::gloo_native).allreduce(tensors, o)->wait(timeout());
    if (staged) std::memcpy(buf, tensors[0].data_ptr(), bytes);
  } catch (const Error&) {
    throw;
  } catch (const c10::Error& e) {
    throw Error(ErrorCode::SystemError, std::string("the native allreduce (Gloo) failed: ") + e.what_without_backtrace());
  } catch (const std::exception& e) {
    throw Error(ErrorCode::SystemError, std::string("the native allreduce (Gloo) failed: ") + e.what());
  }
  if (op == ReduceOp::avg) cpu_finish_average(buf, count, dtype, getSize());
}

// ---- the engines ----------------------------------------------------------------------------------
CpuAllreduce& ProcessGroupStragglar::cpu() {
  std::lock_guard<std::mutex> lock(engines_mutex_);
  if (!cpu_)
    cpu_ = std::make_unique<CpuAllreduce>(
        store_, getRank(), getSize(),
        [this](void* buf, std::size_t count, DataType dtype, ReduceOp op, bool keep_buffer) {
          native_allreduce(buf, count, dtype, op, keep_buffer);
        },
        records_);
  return *cpu_;
}

#if STRAGGLAR_TORCH_CUDA
CudaAllreduce& ProcessGroupStragglar::cuda(const at::Tensor& tensor) {
  std::lock_guard<std::mutex> lock(engines_mutex_);
  // A failed creation is final: the ncclUniqueId key would be published anew under ranks that
  // already read the old one.
  TORCH_CHECK(cuda_error_.empty(), cuda_error_);
  if (!cuda_) {
    try {
      cuda_ = std::make_unique<CudaAllreduce>(store_, getRank(), getSize(), tensor.device(), timeout());
    } catch (const std::exception& e) {
      cuda_error_ = std::string("stragglar.torch: the CUDA engine could not start: ") + e.what();
      TORCH_CHECK(false, cuda_error_);
    }
  }
  return *cuda_;
}
#endif

// ---- all_reduce -------------------------------------------------------------------------------------
c10::intrusive_ptr<c10d::Work> ProcessGroupStragglar::allreduce(std::vector<at::Tensor>& tensors,
                                                                const c10d::AllreduceOptions& opts) {
  const std::optional<DataType> dtype =
      tensors.size() == 1 ? core_dtype(tensors[0].scalar_type()) : std::optional<DataType>();
  const std::optional<ReduceOp> op = core_op(opts.reduceOp);
  const bool ours = dtype && op && tensors[0].layout() == at::kStrided &&
                    (tensors[0].is_cpu() || (tensors[0].is_cuda() && STRAGGLAR_TORCH_CUDA));
  if (!ours) {
    // A rank whose tensors came here while a peer's went to stragglar is named when this fails.
    const std::uint64_t sequence = ++sequence_;
    const bool cuda = !tensors.empty() && tensors[0].is_cuda();
    return c10::make_intrusive<ExplainedWork>(
        getRank(), inner_for(tensors).allreduce(tensors, opts), records_, sequence,
        describe_all_reduce(tensors, reduce_op_name(opts.reduceOp), cuda ? "NCCL" : "Gloo"));
  }
  const at::Tensor& tensor = tensors[0];
  TORCH_CHECK_VALUE(at::has_internal_overlap(tensor) != at::MemOverlap::Yes,
                    "stragglar.torch all_reduce: the tensor's elements overlap in memory (sizes ", tensor.sizes(),
                    ", strides ", tensor.strides(),
                    ", e.g. from expand()): expected a tensor whose elements are distinct (clone() it)");
  const std::uint64_t sequence = ++sequence_;
  if (tensor.is_cpu()) return cpu().enqueue(tensor, *dtype, *op, options_.core, op_timeout(opts.timeout), sequence);
#if STRAGGLAR_TORCH_CUDA
  refuse_graph_capture(tensor.device());  // before the engine's creation too (cuda_allreduce.hpp)
  return cuda(tensor).run(tensor, *dtype, *op, options_.core, sequence, op_timeout(opts.timeout));
#else
  TORCH_CHECK(false, "unreachable: CUDA tensor without the CUDA engine");
#endif
}

GroupReport ProcessGroupStragglar::report(bool on_cuda) {
  CpuAllreduce* cpu_engine = nullptr;
#if STRAGGLAR_TORCH_CUDA
  CudaAllreduce* cuda_engine = nullptr;
#endif
  {
    std::lock_guard<std::mutex> lock(engines_mutex_);
    cpu_engine = cpu_.get();
#if STRAGGLAR_TORCH_CUDA
    cuda_engine = cuda_.get();
#endif
  }
  if (!on_cuda && cpu_engine != nullptr) return cpu_engine->report();
#if STRAGGLAR_TORCH_CUDA
  if (on_cuda && cuda_engine != nullptr) return cuda_engine->report();
#endif
  GroupReport r;
  r.device = on_cuda ? "cuda" : "cpu";
  return r;
}

std::string ProcessGroupStragglar::describe_peer(int peer) {
  TORCH_CHECK_VALUE(peer >= 0 && peer < getSize(), "stragglar.torch: peer ", peer, " is outside [0, ", getSize(), ")");
  CpuAllreduce* cpu_engine = nullptr;
  {
    std::lock_guard<std::mutex> lock(engines_mutex_);
    cpu_engine = cpu_.get();
  }
  return cpu_engine != nullptr ? cpu_engine->describe_peer(peer) : std::string();
}

// ---- barriers --------------------------------------------------------------------------------------
// A barrier orders after every collective issued before it (as Gloo's does): first the CPU
// all_reduces queued on the worker, then the inner backend's barrier.
c10::intrusive_ptr<c10d::Work> ProcessGroupStragglar::barrier(const c10d::BarrierOptions& opts) {
  ++sequence_;
  const bool on_cuda = !opts.device_ids.empty() || (opts.device.has_value() && opts.device->is_cuda());
  if (!on_cuda) {
    CpuAllreduce* cpu_engine = nullptr;
    {
      std::lock_guard<std::mutex> lock(engines_mutex_);
      cpu_engine = cpu_.get();
    }
    if (cpu_engine != nullptr) cpu_engine->drain();
  }
  return inner(on_cuda ? Inner::nccl : Inner::gloo).barrier(opts);
}

void ProcessGroupStragglar::monitoredBarrier(const c10d::BarrierOptions& opts, bool wait_all_ranks) {
  CpuAllreduce* cpu_engine = nullptr;
  {
    std::lock_guard<std::mutex> lock(engines_mutex_);
    cpu_engine = cpu_.get();
  }
  if (cpu_engine != nullptr) cpu_engine->drain();
  inner(Inner::gloo).monitoredBarrier(opts, wait_all_ranks);
}

}  // namespace stragglar::torch_backend
