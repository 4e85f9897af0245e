// Transport: how one round's messages move (MPI point-to-point on CPUs, NCCL on GPUs).
#pragma once
#include <cstddef>
#include <span>

namespace stragglar {

struct Message {
  int peer = 0;
  void* data = nullptr;  // host memory for MpiTransport, device memory for NcclTransport
  std::size_t bytes = 0;
};

class Transport {
 public:
  virtual ~Transport() = default;
  virtual int rank() const = 0;
  virtual int nranks() const = 0;
  // One round: every receive and send is posted together and has completed (CPU) or is
  // enqueued in stream order (GPU, inside one ncclGroupStart/End) when this returns.
  // Pairwise synchronisation only: no barrier.
  virtual void exchange(std::span<const Message> sends, std::span<const Message> recvs) = 0;
  // The message space of the following exchanges: messages of one tag never match another
  // tag's (MPI and UCX tags). Engines that match messages by order alone (NCCL) ignore it.
  virtual void set_tag(int /*tag*/) {}
};

}  // namespace stragglar
