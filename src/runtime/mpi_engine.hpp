// The MPI engine of the runtime core (internal), a host engine (host_engine.hpp): MpiTransport on
// a private communicator, host memory and loops (CpuDevice), the agreement as transport_max over
// MpiTransport on a tag of its own (point to point: a timed-out agreement leaves no collective
// pending that MPI_Finalize trips over, and a rank in the argument check is visible to a peer in
// a data phase; docs/reliability.md),
// MPI_Allreduce as `native` (auto's native, bounded by the timeout: recursive doubling over
// MpiTransport in engine-owned memory up to kTransportNativeMaxBytes, MPI_Iallreduce above, into
// engine-owned memory too unless STRAGGLAR_KEEP_BUFFERS=0, Rabenseifner where Open MPI lets it be
// chosen: mpi_iallreduce_algorithm.hpp).
#pragma once
#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "runtime/call_timer.hpp"
#include "runtime/env.hpp"
#include "runtime/host_engine.hpp"
#include "runtime/mpi_iallreduce_algorithm.hpp"
#include "runtime/mpi_transport.hpp"

namespace stragglar::detail {

// Polls a request a timeout left pending until it completes, for at most timeout_s; false when
// it is still pending then.
bool settle_request(MPI_Request& request, double timeout_s);

class MpiEngine final : public HostEngine<> {
 public:
  // `comm` (borrowed) is the private duplicate, with MPI_ERRORS_RETURN.
  MpiEngine(MPI_Comm comm, const RuntimeConfig& e);
  Transport& transport() override { return transport_; }
  // MPI_Allreduce (the user's `native`: MPI's behaviour, it blocks on a dead peer); with a bound
  // (auto's) recursive doubling over the transport or MPI_Iallreduce, in the engine's staging
  // memory (see below). MPI cannot cancel an MPI_Iallreduce, so after a timeout it may still
  // read the caller's sendbuf (and write the staging memory) when the late peer joins: the MPI
  // front-end's rule after an error is to keep the failed call's buffers, unused, until
  // MPI_Finalize (docs/reliability.md, class 7).
  void native_allreduce(const void* sendbuf, void* recvbuf, std::size_t count, DataType dtype, ReduceOp op,
                        std::optional<NativeBound> bound, bool keep_buffer) override;
  // The host clock; auto's exchange split around the next call (MpiSplitAllgather) up to
  // kSplitExchangeMaxRanks ranks, above them the agreement at once (an allgather of n - 1
  // messages per rank would outgrow the log2 n rounds of the agreement).
  std::unique_ptr<CallTimer> make_timer() override;
  static constexpr int kSplitExchangeMaxRanks = 64;
  void reserve(std::size_t native_bytes, bool native_keeps_buffer, std::size_t agreement_values) override;
  const char* buffer_problem(const void* sendbuf, const void* recvbuf) const override;
  // The bounded native stages a kept buffer itself (keep_buffer); schedules: the session's copy.
  BuffersOnError buffers_on_error() const override { return BuffersOnError::native_stages; }
  // What MPI_Iallreduce's first runs at a size pay, its temporaries' fresh memory, is readied in
  // reserve() instead (warm_allocator_for): its first run reuses the heap, and only that run
  // touches it first (a first-use sample, measured again: docs/auto.md "The first calls").
  int native_warm_ups() const override { return 0; }
  // Even so, MPI_Iallreduce's first run at a new size is slower than its later ones (Open MPI
  // 4.1: 84–105 ms against 53 at 16 MiB, 8 ranks on 2 cores): auto's first call of a
  // configuration runs the model's best instead, and native is measured later.
  bool auto_first_call_measures_native() const override { return false; }
  // Whether the engine's memory may go: a timed-out bounded native has completed (waiting for it
  // at most `timeout_s`: the late peer has usually joined by the time the communicator is freed),
  // and no receive a timeout could not cancel may still write the staging or agreement buffers
  // (small messages are eager, so this is a guard, not a case seen).
  bool settle(double timeout_s) {
    return settle_request(native_pending_, timeout_s) && !transport_.writes_may_be_pending();
  }
  // Whether a message of ours may still arrive on the communicator (MpiTransport): it is then
  // kept until MPI_Finalize instead of freed.
  bool stray_messages_possible() const { return transport_.stray_messages_possible(); }

 private:
  // The agreement on a tag of the transport's own (point to point: see the top of this file).
  int agreement_tag() const override { return transport_.agreement_tag(); }

  MPI_Comm comm_;
  MpiTransport transport_;
  // The bounded native's staging buffer (recursive doubling over the transport: its receives;
  // MPI_Iallreduce: its result), what a timeout may leave pending writes only here.
  // Up to this size auto's native is recursive doubling over the transport (transport_allreduce):
  // for small messages Open MPI's MPI_Iallreduce costs more than its MPI_Allreduce, recursive
  // doubling the same; from ~2 KiB on MPI_Iallreduce is the faster (docs/auto.md "Small messages"
  // has the measurement).
  static constexpr std::size_t kTransportNativeMaxBytes = 2048;
  std::unique_ptr<std::byte[]> native_stage_;
  std::size_t native_stage_bytes_ = 0;
  std::size_t allocator_ready_bytes_ = 0;  // the largest MPI_Iallreduce temporaries readied for
  MPI_Request native_pending_ = MPI_REQUEST_NULL;
  IallreduceAlgorithmChoice iallreduce_algorithm_;  // Rabenseifner for auto's MPI_Iallreduce

  // Larger in-place messages with a kept buffer (keeps_buffer) run into the staging buffer too.
  void reserve_native(std::size_t bytes, bool keeps_buffer);
  void bounded_native(const void* sendbuf, void* recvbuf, std::size_t count, DataType dtype, ReduceOp op,
                      const NativeBound& bound, bool keep_buffer);
};

}  // namespace stragglar::detail
