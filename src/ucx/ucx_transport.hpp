// UcxTransport: one round = UCX tag receives and sends for every message, then one wait
// (the CPU engine of the PyTorch backend, started by torchrun, not by mpirun).
//
// The same contract as MpiTransport: all receives and sends of a round are posted together;
// exchange() returns when all have completed; it never hangs: after `timeout_s` it throws
// Error(Timeout) naming what it still waits for. A receive still pending then is cancelled
// and completed before the throw, so it never writes into the caller's memory afterwards.
// Pairwise only, no barrier. Zero-byte messages are skipped on both sides. Messages of any
// size go as one UCX message (UCX takes size_t lengths and splits internally; 2^31 + 16
// bytes checked over shared memory and TCP by `test_ucx_allreduce --np 2 huge`).
//
// Bootstrap without MPI: connect() publishes this rank's UCX worker address in a
// KeyValueStore (torch's c10d::Store through an adapter, or DirectoryStore) and creates an
// endpoint to every rank from theirs.
//
// Matching: a message's 64-bit UCX tag is (tag set by set_tag) << 32 | source rank, matched
// with a full mask, so messages of one tag never match another tag's and a receive only
// matches its peer. UCX matches messages with equal tags from one endpoint in the order
// they were sent (as MPI does), so several messages to one peer in one round arrive in order.
//
// Engines (UCX picks them per peer): shared memory (sysv/posix + CMA) within a host,
// RDMA or TCP across hosts. UCX_TLS and the other UCX_* variables apply as usual.
//
// Failure detection: UCX's error handling (UCP_ERR_HANDLING_MODE_PEER) reports a dead peer
// as an endpoint error, but in UCX 1.13 it rules out the shared-memory transports (they
// cannot detect a dead peer; UCX falls back to TCP loopback, 2-3x slower here, see
// docs/ucx.md). So by default (ErrorMode::per_host) peers on other hosts get PEER mode and
// peers on this host get shared memory; for those this transport itself watches their
// process (pid + start time, exchanged at connect) while it waits, and a peer that exited
// gives Error(RemoteError) within ~0.1 s. A stopped (SIGSTOP) peer gives Error(Timeout).
#pragma once
#include <memory>
#include <span>
#include <string>

#include "runtime/env.hpp"
#include "runtime/transport.hpp"
#include "ucx/kv_store.hpp"

namespace stragglar {

struct UcxOptions {
  // Seconds exchange() waits for its messages before Error(Timeout); also the time connect()
  // waits for every rank's address in the store.
  double timeout_s = 60.0;
  // Where timeout_s came from, for messages ("STRAGGLAR_TIMEOUT_S", "the process group's timeout").
  std::string timeout_source = "STRAGGLAR_TIMEOUT_S";
  // How a waiting rank gives its core away after spinning briefly (~20 µs of polling):
  //   backoff:    sched_yield for 1 ms, then sleep 20 µs between polls (like MpiTransport);
  //   poll_fd:    ucp_worker_arm + poll(2) on the worker's event fd (the kernel wakes it);
  //   yield_poll: sched_yield for 1 ms, then ucp_worker_arm + poll(2).
  // backoff is the default: measured fastest with 8 ranks on 2 cores (docs/ucx.md).
  using Wait = detail::UcxWaitMode;
  Wait wait = Wait::backoff;
  // per_host: PEER error handling across hosts, shared memory + process watch within a host;
  // peer: PEER everywhere (no shared memory in UCX 1.13); none: no UCX error handling.
  using ErrorMode = detail::UcxErrorMode;
  ErrorMode error_mode = ErrorMode::per_host;

  // timeout_s as given; STRAGGLAR_UCX_WAIT=poll|backoff|yield_poll and
  // STRAGGLAR_UCX_ERROR_MODE=per_host|peer|none override the defaults. Throws
  // Error(InvalidUsage) naming a bad value.
  static UcxOptions from_env(double timeout_s);
  // "wait backoff, errors per_host": the two choices by their STRAGGLAR_UCX_* names.
  std::string describe() const;
};

class UcxTransport final : public Transport {
 public:
  // Publishes this rank's address under `prefix` + "/" + rank, reads every other rank's
  // (waiting up to timeout_s for each), creates the endpoints. Every rank of the group calls
  // it with the same prefix and nranks. Throws Error(InvalidUsage) for rank outside
  // [0, nranks) or nranks < 1, Error(Timeout) when a rank's address does not appear,
  // Error(Mismatch) when a rank published a different nranks, Error(SystemError) when UCX
  // fails. Options other than the timeout come from the environment (UcxOptions::from_env).
  static std::unique_ptr<UcxTransport> connect(KeyValueStore& store, std::string prefix, int rank, int nranks,
                                               double timeout_s);
  static std::unique_ptr<UcxTransport> connect(KeyValueStore& store, std::string prefix, int rank, int nranks,
                                               const UcxOptions& options);
  ~UcxTransport() override;
  UcxTransport(const UcxTransport&) = delete;
  UcxTransport& operator=(const UcxTransport&) = delete;

  int rank() const override;
  int nranks() const override;
  // Throws Error(Timeout) (peer stopped or too slow), Error(RemoteError) (peer died: UCX
  // endpoint error, or the peer's process on this host exited), Error(Mismatch) (a received
  // message has another size than the receive expects), Error(SystemError) (UCX failed),
  // Error(Internal) (peer out of range). After any of these the transport is unusable: later
  // calls throw Error(RemoteError) at once.
  //
  // Pending sends at an error: they stay with UCX (a send cannot be recalled once the peer
  // may have matched it). UCX only reads their buffers, never writes them: a peer that
  // resumes late may still read (through CMA, or receive over TCP) whatever the buffer then
  // holds. The destructor closes the endpoints (flushing for at most 2 s, by force for
  // endpoints UCX reported failed), which ends them.
  void exchange(std::span<const Message> sends, std::span<const Message> recvs) override;

  // Messages of one tag never match another tag's (one tag per collective configuration).
  void set_tag(int tag) override;
  int tag() const;
  void set_timeout(double timeout_s) override;
  // What UCX uses to reach `peer`, e.g. "sysv/memory cma/memory" or "tcp/lo" (diagnostics).
  std::string describe_peer(int peer) const;

 private:
  struct Impl;
  explicit UcxTransport(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace stragglar
