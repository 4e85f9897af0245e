// CUDA tensors through the core's NCCL engine (cuda_allreduce.hpp). Compiled only in CUDA builds;
// nothing here has run on a GPU in the session that wrote it (docs/torch.md "What was run where").
#include "cuda_allreduce.hpp"

#include <ATen/core/LegacyTypeDispatch.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <dlfcn.h>
#include <nccl.h>

#include <cstring>
#include <mutex>
#include <optional>
#include <thread>

#include "cuda_check.hpp"      // src/cuda
#include "nccl_engine.hpp"     // src/cuda
#include "nccl_transport.hpp"  // src/cuda
#include "tensor_args.hpp"

namespace stragglar::torch_backend {
namespace {

constexpr const char* kUniqueIdKey = "stragglar_nccl_unique_id";

// The Work of one CUDA all_reduce: done when the event after the call has passed.
class CudaAllreduceWork final : public c10d::Work {
 public:
  CudaAllreduceWork(int rank, at::Tensor tensor, std::uint64_t sequence, c10::cuda::CUDAStream stream)
      : c10d::Work(rank, c10d::OpType::ALLREDUCE, "stragglar:all_reduce", std::vector<at::Tensor>{tensor}),
        tensor_(std::move(tensor)),
        device_(tensor_.device()),
        future_(c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()),
                                                          std::vector<c10::Device>{device_})),
        sequence_(sequence) {
    end_.record(stream);
    // Completed now, in the backend stream's context: the future records its own events there,
    // so whoever uses its value waits for the GPU, not the host (as ProcessGroupNCCL does).
    c10::cuda::CUDAStreamGuard guard(stream);
    future_->markCompleted(c10::IValue(std::vector<at::Tensor>{tensor_}));
    // The host's part is done (as the future says): end the profiler range c10d::Work opened
    // for "stragglar:all_reduce". The GPU's part is what isCompleted()/wait() report.
    finish();
  }

  bool isCompleted() override { return end_.query(); }
  bool isSuccess() const override { return true; }
  std::vector<at::Tensor> result() override { return {tensor_}; }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }
  uint64_t getSequencenumber() const override { return sequence_; }

  // The caller's current stream waits for the call; the host does not, unless a timeout is
  // given: then the host polls the event and raises when it has not passed in time.
  void synchronize() override { end_.block(c10::cuda::getCurrentCUDAStream(device_.index())); }
  bool wait(std::chrono::milliseconds timeout) override {
    synchronize();
    if (timeout == kNoTimeout) return true;
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!end_.query()) {
      if (std::chrono::steady_clock::now() > deadline)
        std::rethrow_exception(dist_backend_error(
            "stragglar.torch all_reduce (CUDA): not finished on the GPU after " + std::to_string(timeout.count()) +
            " ms (Work.wait timeout): a peer is late, stopped or died; abort the process group"));
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    return true;
  }

 private:
  at::Tensor tensor_;
  at::Device device_;
  c10::cuda::CUDAEvent end_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  std::uint64_t sequence_;
};

}  // namespace

struct CudaAllreduce::Impl {
  int rank = 0;
  at::Device device{at::kCUDA, 0};
  double timeout_s = 0;
  ncclComm_t comm = nullptr;
  std::unique_ptr<detail::NcclSession> session;
  std::optional<c10::cuda::CUDAStream> stream;
  std::mutex mutex;  // one call at a time (NcclSession is not thread-safe)
  bool ran = false;
  bool aborted = false;
};

CudaAllreduce::CudaAllreduce(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size, at::Device device,
                             std::chrono::milliseconds timeout)
    : impl_(std::make_unique<Impl>()) {
  Impl& s = *impl_;
  s.rank = rank;
  s.device = device;
  s.timeout_s = static_cast<double>(timeout.count()) / 1000.0;
  c10::cuda::CUDAGuard guard(device.index());

  ncclUniqueId id;
  if (rank == 0) {
    STRAGGLAR_NCCL_CHECK(ncclGetUniqueId(&id));
    const auto* bytes = reinterpret_cast<const std::uint8_t*>(&id);
    store->set(kUniqueIdKey, std::vector<std::uint8_t>(bytes, bytes + sizeof id));
  } else {
    try {
      store->wait({kUniqueIdKey}, timeout);
    } catch (const c10::Error& e) {
      throw Error(ErrorCode::Timeout, std::string("stragglar.torch: rank 0 did not publish the ncclUniqueId within ") +
                                          std::to_string(s.timeout_s) + " s: " + e.what_without_backtrace());
    }
    const std::vector<std::uint8_t> bytes = store->get(kUniqueIdKey);
    if (bytes.size() != sizeof id)
      throw Error(ErrorCode::Mismatch, "stragglar.torch: the ncclUniqueId in the store has " +
                                           std::to_string(bytes.size()) + " bytes, expected " +
                                           std::to_string(sizeof id));
    std::memcpy(&id, bytes.data(), sizeof id);
  }

  // Non-blocking: the host polls with the group's timeout instead of hanging on a missing rank.
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  const ncclResult_t r = ncclCommInitRankConfig(&s.comm, size, id, rank, &config);
  try {
    cuda::settle_nccl(s.comm, r, "ncclCommInitRankConfig", s.timeout_s);
  } catch (...) {
    if (s.comm != nullptr) (void)ncclCommAbort(s.comm);
    throw;
  }
  s.session = std::make_unique<detail::NcclSession>(s.comm, s.timeout_s, "stragglar.torch all_reduce (CUDA)",
                                                    kAfterFailure);
  s.stream = c10::cuda::getStreamFromPool(/*isHighPriority=*/false, device.index());
}

CudaAllreduce::~CudaAllreduce() {
  Impl& s = *impl_;
  if (!s.session) return;
  if (s.aborted || s.session->broken()) {
    (void)s.session.release();  // pending GPU work may still write its memory (nccl_engine.hpp)
    return;
  }
  try {
    c10::cuda::CUDAGuard guard(s.device.index());
    s.session.reset();
    if (ncclCommFinalize(s.comm) == ncclInProgress) {
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(s.timeout_s);
      ncclResult_t state = ncclInProgress;
      while (ncclCommGetAsyncError(s.comm, &state) == ncclSuccess && state == ncclInProgress &&
             std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    (void)ncclCommDestroy(s.comm);
  } catch (...) {
    // A destructor reports nothing: the process group is going away.
  }
}

at::Device CudaAllreduce::device() const noexcept { return impl_->device; }

c10::intrusive_ptr<c10d::Work> CudaAllreduce::run(const at::Tensor& tensor, DataType dtype, ReduceOp op,
                                                  const Options& options, std::uint64_t sequence,
                                                  std::chrono::milliseconds timeout) {
  Impl& s = *impl_;
  std::lock_guard<std::mutex> lock(s.mutex);
  TORCH_CHECK(!s.aborted, "stragglar.torch all_reduce (CUDA): the process group was aborted");
  TORCH_CHECK(tensor.device() == s.device, "stragglar.torch all_reduce: tensor on ", tensor.device(),
              ", but this process group's CUDA communicator is on ", s.device,
              " (one device per rank; set torch.cuda.set_device before the first all_reduce)");
  c10::cuda::CUDAGuard guard(s.device.index());
  const c10::cuda::CUDAStream stream = *s.stream;
  // Graph capture (torch.cuda.graph): refused before the backend stream joins the capture (an
  // event wait would make it part of the graph), so the capture and the group stay usable.
  refuse_graph_capture(s.device);
  // The group's timeout (init_process_group(timeout=...), setTimeout, AllreduceOptions.timeout)
  // bounds the agreement and every poll, not STRAGGLAR_TIMEOUT_S.
  const double timeout_s = static_cast<double>(timeout.count()) / 1000.0;
  if (timeout_s != s.timeout_s) {
    s.session->session().set_timeout(timeout_s);  // every wait, the engine's transport's included
    s.timeout_s = timeout_s;
  }

  // The backend stream starts when the caller's work on the tensor is done.
  c10::cuda::CUDAEvent ready;
  ready.record(c10::cuda::getCurrentCUDAStream(s.device.index()));
  ready.block(stream);
  {
    c10::cuda::CUDAStreamGuard on_backend_stream(stream);
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    // A packed copy (non-contiguous tensors) lives on the backend stream: freeing it at the end
    // of this scope is ordered after its uses there by the caching allocator.
    const at::Tensor buffer = tensor.is_contiguous() ? tensor : tensor.contiguous();
    void* data = buffer.numel() == 0 ? nullptr : buffer.data_ptr();
    try {
      s.session->allreduce(data, data, static_cast<std::size_t>(buffer.numel()), dtype, op, stream.stream(), options);
    } catch (...) {
      std::rethrow_exception(current_as_dist_error());
    }
    s.ran = true;
    if (!buffer.is_same(tensor)) tensor.copy_(buffer);
  }
  // The user's memory is in use on the backend stream until the call ends there.
  if (tensor.storage().data_ptr().get() != nullptr)
    c10::cuda::CUDACachingAllocator::recordStream(tensor.storage().data_ptr(), stream);
  return c10::make_intrusive<CudaAllreduceWork>(s.rank, tensor, sequence, stream);
}

GroupReport CudaAllreduce::report() {
  Impl& s = *impl_;
  std::lock_guard<std::mutex> lock(s.mutex);
  GroupReport r;
  r.device = s.device.str();
  r.ran = s.ran;
  if (s.session) {
    r.last = s.session->session().last_choice();
    r.automatic = s.session->session().auto_report();
  }
  return r;
}

void CudaAllreduce::abort() noexcept {
  Impl& s = *impl_;
  std::lock_guard<std::mutex> lock(s.mutex);
  if (s.aborted || s.comm == nullptr) return;
  s.aborted = true;
  if (s.session) s.session->session().mark_broken(Error(ErrorCode::RemoteError, "the process group was aborted"));
  (void)ncclCommAbort(s.comm);
}

void refuse_graph_capture(at::Device device) {
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  const cudaError_t e = cudaStreamIsCapturing(c10::cuda::getCurrentCUDAStream(device.index()).stream(), &capture);
  TORCH_CHECK(e == cudaSuccess && capture == cudaStreamCaptureStatusNone,
              "stragglar.torch all_reduce (CUDA): the current stream is being captured into a CUDA graph "
              "(cudaStreamIsCapturing: ", e != cudaSuccess ? cudaGetErrorName(e) : "capturing",
              "); stragglar's calls wait on the host (argument agreement, timeouts) and cannot be captured: "
              "run this all_reduce outside the capture, or capture with the nccl backend");
}

NcclLibrary loaded_nccl() {
  NcclLibrary lib;
  (void)ncclGetVersion(&lib.version);
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&ncclGetVersion), &info) != 0 && info.dli_fname != nullptr)
    lib.path = info.dli_fname;
  lib.compiled_version = NCCL_VERSION_CODE;
  return lib;
}

}  // namespace stragglar::torch_backend
