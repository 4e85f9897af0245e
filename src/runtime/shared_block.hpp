// Memory that every rank of a communicator on one host maps: the arrival tickets' block
// (arrival_tickets.hpp). A POSIX shared-memory segment that rank 0 creates and names, the name
// passed to the others through the engine's agreement (a max over ranks), so any engine with an
// agreement gets it — MPI (Open MPI and MPICH alike), UCX under the PyTorch backend, the threads
// of the tests — and freeing it is local: no rank waits for another to let go (a broken
// communicator's ranks free their state at different times).
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>

namespace stragglar::detail {

class SharedBlock {
 public:
  // Element-wise max of the values over every rank of the communicator, in place (it throws
  // on a timeout: Engine::agree_max within the session's timeout).
  using Agree = std::function<void(std::span<std::int64_t>)>;

  // Collective (every rank calls it, two agreements): `bytes` zeroed bytes mapped on every rank,
  // or, when any rank cannot create or map it, nothing on any rank (data() null, why() says why).
  SharedBlock(std::size_t bytes, int rank, const Agree& agree);
  ~SharedBlock();
  SharedBlock(const SharedBlock&) = delete;
  SharedBlock& operator=(const SharedBlock&) = delete;

  void* data() const noexcept { return data_; }
  const std::string& why() const noexcept { return why_; }

 private:
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
  std::string why_;
};

}  // namespace stragglar::detail
