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
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "runtime/cpu_device.hpp"
#include "runtime/session.hpp"
#include "runtime/transport_agreement.hpp"
#include "ucx/ucx_transport.hpp"

namespace stragglar::detail {

class UcxEngine final : public Engine {
 public:
  // In-place AllReduce of `count` elements at `buf` by another engine, avg included (the
  // callback divides), within that engine's timeout; throws stragglar::Error on failure.
  using NativeAllreduce = std::function<void(void* buf, std::size_t count, DataType dtype, ReduceOp op)>;

  UcxEngine(std::unique_ptr<UcxTransport> transport, NativeAllreduce native);

  Transport& transport() override { return *transport_; }
  Device& device() override { return device_; }
  CostModel auto_cost_model() const override { return host_engine_auto_cost_model(); }  // a host engine
  // The agreement's messages use kAgreementTag; configurations take tags below it.
  int max_tag() const override { return kAgreementTag - 1; }
  // The transport's own timeout (UcxTransport::set_timeout, which the front-end keeps equal to
  // the session's) bounds it.
  void agree_max(std::span<std::int64_t> values, double timeout_s) override;
  void native_allreduce(const void* sendbuf, void* recvbuf, std::size_t count, DataType dtype, ReduceOp op) override;

  UcxTransport& ucx() noexcept { return *transport_; }
  const UcxTransport& ucx() const noexcept { return *transport_; }

 private:
  std::unique_ptr<UcxTransport> transport_;
  CpuDevice device_;
  NativeAllreduce native_;
  std::vector<std::int64_t> agreement_scratch_;  // transport_max's messages; alive as long as the engine
};

}  // namespace stragglar::detail
