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

// The tag of agreements over a bare transport (transport_agreement.hpp). No configuration gets
// it or any tag above: Transport::max_tag() stays below it unless a transport says otherwise.
inline constexpr int kAgreementTag = 0x7ffffff8;

class Transport {
 public:
  virtual ~Transport() = default;
  virtual int rank() const = 0;
  virtual int nranks() const = 0;
  // One round: every receive and send is posted together and has completed (CPU) or is
  // enqueued in stream order (GPU, inside one ncclGroupStart/End) when this returns.
  // Pairwise synchronisation only: no barrier.
  virtual void exchange(std::span<const Message> sends, std::span<const Message> recvs) = 0;
  // Seconds every following wait may take. The Session sets its own timeout here (at its
  // construction and at every Session::set_timeout), so the executor's rounds and everything
  // an engine runs over its transport wait as long as the session's agreement: one timeout,
  // the session's, which no front-end has to repeat. The session passes only positive, finite
  // values (it validates them in Session::set_timeout).
  virtual void set_timeout(double timeout_s) = 0;
  // The message space of the following exchanges: messages of one tag never match another
  // tag's (MPI and UCX tags). Engines that match messages by order alone (NCCL) ignore it.
  virtual void set_tag(int /*tag*/) {}
  // Largest tag a configuration may take: each gets its own in [1, max_tag()]. The tags above
  // are the transport's own (MPI: auto's exchange's, the agreement's and the "gave up" notices')
  // or the agreement's over it (kAgreementTag).
  virtual int max_tag() const { return kAgreementTag - 1; }
  // After a failure: may a receive this transport posted (or, on a GPU, work enqueued on its
  // stream) still write into memory the session gave it (scratch)? Then a broken session leaks
  // that memory instead of freeing it under the writer.
  virtual bool writes_may_be_pending() const { return false; }
};

}  // namespace stragglar
