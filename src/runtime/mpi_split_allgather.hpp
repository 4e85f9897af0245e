// auto's exchange over MPI without a wait inside a call (call_timer.hpp SplitAllgather; docs/auto.md
// "The exchange"): after a call's data phase each rank posts its slots to every peer (n - 1
// messages of (2 P + 1) × 8 bytes, 88 at the default P = 5, on auto's exchange tag,
// MpiTransport::exchange_tag) and its receives for theirs; at the configuration's next call the
// messages are there and the wait returns at once. Every rank makes the same calls in the same order, so a peer's exchanges reach
// this rank in the order it posts its receives (MPI does not let one sender's messages on a tag
// overtake each other), one configuration's or several's.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "runtime/call_timer.hpp"
#include "runtime/mpi_transport.hpp"

namespace stragglar::detail {

class MpiSplitAllgather final : public SplitAllgather {
 public:
  // `transport` (the engine's) outlives this object, or MPI is finalized before it goes.
  explicit MpiSplitAllgather(MpiTransport& transport);
  // Waits for what is still posted (the last call's exchange: at most STRAGGLAR_TIMEOUT_S), else
  // cancels it and has the transport keep its communicator until MPI_Finalize (a part may still
  // arrive); its memory is leaked where MPI kept a request (nothing may touch freed memory).
  ~MpiSplitAllgather() override;
  MpiSplitAllgather(const MpiSplitAllgather&) = delete;
  MpiSplitAllgather& operator=(const MpiSplitAllgather&) = delete;
  void reserve(std::size_t values) override;
  void begin(std::span<const std::int64_t> values) override;
  // Waits with the transport's timeout (the session's: the same value as timeout_s).
  void end(std::span<std::int64_t> values, double timeout_s) override;

 private:
  void size_for(std::size_t values);
  MpiTransport& transport_;
  std::unique_ptr<std::vector<std::int64_t>> memory_;  // every rank's slots: what is sent and received
  std::size_t slots_ = 0, mine_ = 0;  // values per rank; where this rank's begin
  std::vector<Message> sends_, recvs_;
  MpiTransport::Round round_;
};

}  // namespace stragglar::detail
