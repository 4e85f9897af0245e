// HostEngine: what the engines whose buffers live in host memory share — the MPI engine
// (mpi_engine.hpp), the UCX engine (src/ucx/ucx_engine.hpp) and the tests' threads engine:
//
//   device      host memory and loops (CpuDevice; a test may count its allocations)
//   agree_max   transport_max over the engine's own transport, in scratch the engine keeps (a
//               timed-out agreement's receives may still land there), bounded by the transport's
//               timeout, which is the session's
//   timer       HostCallTimer: the host clock, auto's exchange through agree_max
//   cost model  host_engine_auto_cost_model (auto_cost_model.hpp)
//
// An engine over it supplies its transport and its native AllReduce, and overrides what differs
// (the MPI engine's split exchange and native staging).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "runtime/auto_cost_model.hpp"
#include "runtime/call_timer.hpp"
#include "runtime/cpu_device.hpp"
#include "runtime/engine.hpp"
#include "runtime/transport_agreement.hpp"

namespace stragglar::detail {

template <class HostDevice = CpuDevice>
class HostEngine : public Engine {
 public:
  Device& device() override { return device_; }
  void agree_max(std::span<std::int64_t> values, double /*timeout_s: the transport's*/) override {
    transport_max(transport(), values, agreement_scratch_, agreement_tag());
  }
  std::unique_ptr<CallTimer> make_timer() override { return std::make_unique<HostCallTimer>(*this); }
  void reserve(std::size_t /*native_bytes*/, bool /*native_keeps_buffer*/, std::size_t agreement_values) override {
    reserve_agreement(agreement_values);
  }
  CostModel auto_cost_model() const override { return host_engine_auto_cost_model(); }
  bool arrivals_on_host() const override { return true; }

 protected:
  // The agreement's tag: above every configuration's (Transport::max_tag) unless the transport
  // keeps one of its own (MpiTransport::agreement_tag).
  virtual int agreement_tag() const { return kAgreementTag; }
  void reserve_agreement(std::size_t values) { agreement_scratch_.reserve(2 * values); }  // the running max and a receive

  HostDevice device_;

 private:
  std::vector<std::int64_t> agreement_scratch_;  // transport_max's messages; alive as long as the engine
};

}  // namespace stragglar::detail
