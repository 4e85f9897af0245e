// MpiTransport: one round = MPI_Irecv/MPI_Isend for every message, then a polling wait.
//
// Runs on a private duplicate of the user's communicator (made by the caller, errors set to
// MPI_ERRORS_RETURN) so our messages never match the user's. Never hangs on a dead or stopped
// peer: the wait polls MPI_Testall and throws Error(Timeout) naming the peers it still waits
// for after `timeout_s`. Messages larger than INT_MAX bytes are sent as several pieces.
//
// Issue #22 (as UcxTransport does): every 0.1 s a waiting rank probes for
//  - a "gave up" notice from any rank (a rank that failed this call tells every peer): it
//    fails too, within 0.1 s, instead of waiting out its own timeout (timeouts cascaded one
//    hop at a time);
//  - an unmatched message of another tag from a peer it waits for: MPI does not let one
//    sender's messages on a communicator overtake each other, so had that peer been in this
//    call, its message for our posted receive would have come first and matched. It is in
//    another call (another configuration, or the argument check of a new one): Error(Mismatch)
//    instead of a timeout.
#pragma once
#include <mpi.h>

#include <cstddef>
#include <string>
#include <vector>

#include "runtime/transport.hpp"
#include "stragglar/error.hpp"

namespace stragglar {

class MpiTransport final : public Transport {
 public:
  // `comm` is borrowed (not freed here); it must use MPI_ERRORS_RETURN.
  MpiTransport(MPI_Comm comm, double timeout_s);
  int rank() const override { return rank_; }
  int nranks() const override { return nranks_; }
  void exchange(std::span<const Message> sends, std::span<const Message> recvs) override;

  // Messages of one configuration carry one tag (DESIGN: a mismatched call never matches
  // another's messages, it fails instead of mixing data). Configurations take tags in
  // [1, max_tag()]; the three tags above are auto's exchange's, the agreement's and the "gave
  // up" notices'.
  void set_tag(int tag) override { tag_ = tag; }
  int max_tag() const override { return tag_ub_ - 3; }
  int exchange_tag() const { return tag_ub_ - 2; }
  int agreement_tag() const { return tag_ub_ - 1; }

  // A round posted now and waited for later, beside exchange()'s (auto's exchange of
  // measurements, MpiSplitAllgather: posted after a call, collected at the next). The caller
  // owns it and the memory of its messages.
  struct Round {
    struct Pending {
      int peer;
      bool is_send;
    };
    std::vector<MPI_Request> requests;  // reused: no allocation once warmed up
    std::vector<Pending> pending;
    int tag = 0;
    // A request that could not be completed or cancelled was left to MPI (a receive that may
    // still write, a send that may still read): the memory of its messages must outlive it.
    bool left_pending = false;
    bool posted() const { return !requests.empty(); }
  };
  // Posts the round's receives, then its sends, with `tag`; returns at once.
  void post(Round& round, std::span<const Message> sends, std::span<const Message> recvs, int tag);
  // Waits for a posted round as exchange() waits for its own: the session's timeout, a peer's
  // "gave up" notice, a peer in another call (each an Error naming the peers, after cancelling
  // the round); `check_notices`: as set_check_notices_after_receives. Nothing posted: returns.
  void wait(Round& round, bool check_notices);
  // Cancels what the round still has pending (what cannot be cancelled is left to MPI:
  // Round::left_pending). Only exchange()'s own round counts for writes_may_be_pending(): the
  // memory of a caller's round is the caller's to keep.
  void abandon(Round& round) noexcept;
  // MPI requests one message of `bytes` takes (pieces of at most the max piece size).
  std::size_t pieces(std::size_t bytes) const { return (bytes + max_piece_ - 1) / max_piece_; }
  // A message of ours may still arrive on this communicator after its receive was cancelled
  // (mark_stray_messages): freed, the communicator's context id would pass to the next one
  // Open MPI makes, and the message would be matched there — keep it until MPI_Finalize.
  void mark_stray_messages() { stray_messages_ = true; }
  bool stray_messages_possible() const { return stray_messages_ || abandoned_receives_; }
  void set_timeout(double timeout_s) override { timeout_s_ = timeout_s; }
  // Largest piece one MPI call moves, in [1, INT_MAX] (default 1 GiB).
  void set_max_piece_bytes(std::size_t bytes);
  MPI_Comm comm() const { return comm_; }
  // A timeout left a receive that could not be cancelled: it may still write its buffer.
  bool writes_may_be_pending() const override { return abandoned_receives_; }
  // Whether a round whose receives completed looks for "gave up" notices before it counts as a
  // success (default true): needed when a sender's buffer may be rewritten after it gave up (the
  // executor works in the caller's buffers; reliability.md row 15). A caller whose every send
  // buffer is engine memory that nothing rewrites after a failure may turn it off: the probe
  // costs a yield per round when ranks share cores (Open MPI progresses and yields in
  // MPI_Iprobe), which doubled the time of an 8-byte recursive doubling on 8 ranks / 2 cores.
  void set_check_notices_after_receives(bool check) { check_notices_after_receives_ = check; }

 private:
  int gave_up_tag() const { return tag_ub_; }
  bool still_pending(const Round& round, std::size_t i) const;
  // Throws (through fail) when a rank gave up or a peer we wait for is in another call.
  void check_peers(Round& round);
  // Throws (through fail) when a rank's "gave up" notice is here.
  void check_gave_up(Round& round);
  // Cancels what the round posted, tells every peer this rank gave up, throws.
  [[noreturn]] void fail(Round& round, ErrorCode code, const std::string& message);
  void tell_peers_we_gave_up(ErrorCode code);
  MPI_Comm comm_;
  int rank_ = 0;
  int nranks_ = 0;
  int tag_ = 1;
  int tag_ub_ = 32767;  // MPI_TAG_UB of the communicator (the standard's minimum until read)
  bool told_peers_ = false;
  double timeout_s_;
  std::size_t max_piece_ = std::size_t{1} << 30;
  bool abandoned_receives_ = false;
  bool stray_messages_ = false;
  bool check_notices_after_receives_ = true;
  Round round_;  // exchange()'s
};

// Throws Error(SystemError) naming `what` and MPI's message when rc != MPI_SUCCESS.
void check_mpi(int rc, const char* what);

// How a wait polls once it has waited 1 ms (a late peer). sleep_after_1ms: sleeps ~20 µs between
// polls, giving the core to the rank it waits for on an oversubscribed host (the transport's
// rounds: each round is a new wait, so only the round that waited long sleeps). yield: never
// sleeps — for a request that advances only inside MPI_Test (a nonblocking collective: libnbc
// starts each of its rounds in a test), where a sleep after each test would delay every round once
// the late rank is there (sleep_for(20 µs) takes ~110 µs on the 2-core VM); it waits as a blocking
// MPI collective waits (Open MPI polls, yielding when oversubscribed).
enum class WaitPolls { sleep_after_1ms, yield };

// Polls `request` until it completes; throws Error(Timeout) mentioning `what` after timeout_s.
void wait_with_timeout(MPI_Request& request, double timeout_s, const char* what,
                       WaitPolls polls = WaitPolls::sleep_after_1ms);

}  // namespace stragglar
