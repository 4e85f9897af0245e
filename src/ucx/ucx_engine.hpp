// UcxEngine: the runtime core's Engine over UCX (DESIGN.md "Runtime core and front-ends";
// docs/ucx.md), shared by every front-end whose CPU ranks talk UCX: the PyTorch backend's CPU
// tensors (docs/torch.md) and stragglar-ucx-bench (tools/ucx_bench).
//
//   transport   UcxTransport, connected by the caller through a KeyValueStore (shared memory
//               within a host, RDMA/TCP across hosts; docs/ucx.md has the measurement)
//   device      CpuDevice (host loops)
//   agree_max   transport_max: dissemination over the same transport, on a tag of its own
//   native      a callback: another engine's AllReduce (the torch backend: its inner Gloo; the
//               benchmark: MPI_Allreduce). This file knows neither.
//   timer       HostCallTimer: the host clock, auto's exchange through agree_max
//
// Its one timeout is the session's (Session::set_timeout sets it on the transport).
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "runtime/call_timer.hpp"
#include "runtime/cpu_device.hpp"
#include "runtime/engine.hpp"
#include "runtime/transport_agreement.hpp"
#include "ucx/ucx_transport.hpp"

namespace stragglar::detail {

class UcxEngine final : public Engine {
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
  Device& device() override { return device_; }
  // transport_max on kAgreementTag, above every configuration's tag (Transport::max_tag), bounded
  // by the transport's timeout: the session's (Transport::set_timeout), which is timeout_s.
  void agree_max(std::span<std::int64_t> values, double timeout_s) override;
  // The callback, bounded by its own engine's timeout: auto's bound needs nothing more.
  void native_allreduce(const void* sendbuf, void* recvbuf, std::size_t count, DataType dtype, ReduceOp op,
                        std::optional<NativeBound> bound, bool keep_buffer) override;
  std::unique_ptr<CallTimer> make_timer() override { return std::make_unique<HostCallTimer>(*this); }  // the host clock
  void reserve(std::size_t, bool, std::size_t agreement_values) override {
    agreement_scratch_.reserve(2 * agreement_values);  // transport_max: the running max and a receive
  }
  CostModel auto_cost_model() const override { return host_engine_auto_cost_model(); }  // a host engine
  BuffersOnError buffers_on_error() const override { return buffers_; }

  UcxTransport& ucx() noexcept { return *transport_; }
  const UcxTransport& ucx() const noexcept { return *transport_; }

 private:
  std::unique_ptr<UcxTransport> transport_;
  CpuDevice device_;
  NativeAllreduce native_;
  BuffersOnError buffers_;
  std::vector<std::int64_t> agreement_scratch_;  // transport_max's messages; alive as long as the engine
};

}  // namespace stragglar::detail
