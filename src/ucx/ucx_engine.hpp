// UcxEngine: the runtime core's Engine over UCX (docs/runtime.md, docs/ucx.md), shared by every
// front-end whose CPU ranks talk UCX: the PyTorch backend's CPU tensors (docs/torch.md) and
// stragglar-ucx-bench (tools/ucx_bench).
//
//   transport   UcxTransport, connected by the caller through a KeyValueStore (shared memory
//               within a host, RDMA/TCP across hosts; docs/ucx.md has the measurement)
//   native      a callback: another engine's AllReduce (the torch backend: its inner Gloo; the
//               benchmark: MPI_Allreduce). This file knows neither.
//   the rest    a host engine's (host_engine.hpp): CpuDevice, the agreement over the same
//               transport on kAgreementTag, the host clock, the host cost model
//
// Its one timeout is the session's (Session::set_timeout sets it on the transport).
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>

#include "runtime/host_engine.hpp"
#include "ucx/ucx_transport.hpp"

namespace stragglar::detail {

class UcxEngine final : public HostEngine<> {
 public:
  // In-place AllReduce of `count` elements at `buf` by another engine, avg included (the
  // callback divides), within that engine's timeout; throws stragglar::Error on failure.
  // `keep_buffer`: Engine::native_allreduce's (only with native_stages below).
  using NativeAllreduce = std::function<void(void* buf, std::size_t count, DataType dtype, ReduceOp op, bool keep_buffer)>;

  // `buffers`: session_restores, unless the callback itself leaves `buf` as it was when it
  // throws (native_stages: the torch backend stages Gloo's; Engine::buffers_on_error).
  UcxEngine(std::unique_ptr<UcxTransport> transport, NativeAllreduce native,
            BuffersOnError buffers = BuffersOnError::session_restores);

  Transport& transport() override { return *transport_; }
  // The callback, bounded by its own engine's timeout: auto's bound needs nothing more.
  void native_allreduce(const void* sendbuf, void* recvbuf, std::size_t count, DataType dtype, ReduceOp op,
                        std::optional<NativeBound> bound, bool keep_buffer) override;
  BuffersOnError buffers_on_error() const override { return buffers_; }

  UcxTransport& ucx() noexcept { return *transport_; }
  const UcxTransport& ucx() const noexcept { return *transport_; }

 private:
  std::unique_ptr<UcxTransport> transport_;
  NativeAllreduce native_;
  BuffersOnError buffers_;
};

}  // namespace stragglar::detail
