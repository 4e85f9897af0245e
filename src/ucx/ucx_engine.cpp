// The runtime core's Engine over UCX (ucx_engine.hpp).
#include "ucx/ucx_engine.hpp"

#include <utility>

#include "stragglar/error.hpp"

namespace stragglar::detail {

UcxEngine::UcxEngine(std::unique_ptr<UcxTransport> transport, NativeAllreduce native, BuffersOnError buffers)
    : transport_(std::move(transport)), native_(std::move(native)), buffers_(buffers) {
  // auto counts native among its candidates, so every UcxEngine needs one.
  if (!transport_ || !native_)
    throw Error(ErrorCode::InvalidUsage, "UcxEngine: expected a connected transport and a native allreduce");
}

void UcxEngine::native_allreduce(const void* sendbuf, void* recvbuf, std::size_t count, DataType dtype,
                                 ReduceOp op, std::optional<NativeBound>, bool keep_buffer) {
  if (sendbuf != recvbuf) device_.copy(recvbuf, sendbuf, count * size_of(dtype));
  native_(recvbuf, count, dtype, op, keep_buffer);
}

}  // namespace stragglar::detail
