// The MPI engine of the runtime core (internal): MpiTransport on a private communicator, host
// memory and loops (CpuDevice), the agreement as one MPI_Iallreduce(MAX) on buffers the engine
// owns, MPI_Allreduce as `native`.
#pragma once
#include <mpi.h>

#include <cstdint>
#include <span>
#include <vector>

#include "runtime/cpu_device.hpp"
#include "runtime/env.hpp"
#include "runtime/mpi_transport.hpp"
#include "runtime/session.hpp"

namespace stragglar::detail {

// Polls a request a timeout left pending until it completes, for at most timeout_s; false when
// it is still pending then.
bool settle_request(MPI_Request& request, double timeout_s);

class MpiEngine final : public Engine {
 public:
  // `comm` (borrowed) is the private duplicate, with MPI_ERRORS_RETURN.
  MpiEngine(MPI_Comm comm, const Env& e);
  Transport& transport() override { return transport_; }
  Device& device() override { return device_; }
  int max_tag() const override { return tag_ub_; }
  bool writes_may_be_pending() const override { return transport_.abandoned_receives(); }
  void agree_max(std::span<std::int64_t> values, double timeout_s) override;
  void native_allreduce(const void* sendbuf, void* recvbuf, std::size_t count, DataType dtype, ReduceOp op) override;
  void reserve_exchange(std::size_t values) override {
    Engine::reserve_exchange(values);
    in_.reserve(values);
    out_.reserve(values);
  }
  // Whether a timed-out agreement has completed (then its buffers may go), waiting for it at
  // most `timeout_s`: the late peer has usually joined by the time the communicator is freed.
  bool settle(double timeout_s) { return settle_request(pending_, timeout_s); }

 private:
  MPI_Comm comm_;
  MpiTransport transport_;
  CpuDevice device_;
  std::vector<std::int64_t> in_, out_;  // the agreement's buffers, alive while it is pending
  MPI_Request pending_ = MPI_REQUEST_NULL;
  int tag_ub_ = 32767;  // the standard's guaranteed minimum
};

}  // namespace stragglar::detail
