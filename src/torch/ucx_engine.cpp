// The CPU engine of the PyTorch backend (ucx_engine.hpp).
#include "ucx_engine.hpp"

#include <utility>

#include "runtime/transport_agreement.hpp"

namespace stragglar::torch_backend {

UcxEngine::UcxEngine(std::unique_ptr<UcxTransport> transport, NativeAllreduce native)
    : transport_(std::move(transport)), native_(std::move(native)) {}

void UcxEngine::agree_max(std::span<std::int64_t> values, double) {
  detail::transport_max(*transport_, values, agreement_scratch_, detail::kAgreementTag);
}

void UcxEngine::native_allreduce(const void* sendbuf, void* recvbuf, std::size_t count, DataType dtype,
                                 ReduceOp op) {
  if (sendbuf != recvbuf) device_.copy(recvbuf, sendbuf, count * size_of(dtype));
  native_(recvbuf, count, dtype, op);
}

}  // namespace stragglar::torch_backend
