// UcxEngine: the runtime core's Engine for CPU tensors of a "stragglar" process group
// (DESIGN.md "Runtime core and front-ends"; docs/torch.md). No torch headers.
//
//   transport   UcxTransport, connected through the group's c10d store (shared memory within a
//               host, RDMA/TCP across hosts; docs/ucx.md has the measurement that chose it)
//   device      CpuDevice (host loops)
//   agree_max   transport_max: dissemination over the same transport, on a tag of its own
//   native      the group's inner Gloo backend's allreduce (a callback: this file knows no torch)
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

namespace stragglar::torch_backend {

class UcxEngine final : public detail::Engine {
 public:
  // In-place AllReduce of `count` elements at `buf` by another engine (Gloo), within its timeout.
  using NativeAllreduce = std::function<void(void* buf, std::size_t count, DataType dtype, ReduceOp op)>;

  UcxEngine(std::unique_ptr<UcxTransport> transport, NativeAllreduce native);

  Transport& transport() override { return *transport_; }
  Device& device() override { return device_; }
  // The agreement's messages use detail::kAgreementTag; configurations take tags below it.
  int max_tag() const override { return detail::kAgreementTag - 1; }
  // The transport's own timeout (set_timeout: the process group's timeout, which the session
  // also has) bounds it.
  void agree_max(std::span<std::int64_t> values, double timeout_s) override;
  void native_allreduce(const void* sendbuf, void* recvbuf, std::size_t count, DataType dtype, ReduceOp op) override;

  UcxTransport& ucx() noexcept { return *transport_; }

 private:
  std::unique_ptr<UcxTransport> transport_;
  CpuDevice device_;
  NativeAllreduce native_;
  std::vector<std::int64_t> agreement_scratch_;  // transport_max's messages; alive as long as the engine
};

}  // namespace stragglar::torch_backend
