// MpiTransport: MPI_Irecv/MPI_Isend per message, polled wait with a timeout.
#include "runtime/mpi_transport.hpp"

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <iterator>
#include <cstdio>
#include <string>
#include <thread>

#include "stragglar/error.hpp"

namespace stragglar {
namespace {

std::string seconds(double s) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", s);
  return text;
}

std::string mpi_error_string(int rc) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS) return "MPI error " + std::to_string(rc);
  return std::string(text, static_cast<std::size_t>(len));
}

// Waiting ranks give the CPU away: on an oversubscribed node (8 ranks, 2 cores) a spinning
// waiter would steal the core from the peer it waits for. Spin briefly, then yield, then
// (after 1 ms: a long wait such as a straggler's delay) sleep a few microseconds between polls —
// or keep yielding (WaitPolls::yield, mpi_transport.hpp).
class Backoff {
 public:
  explicit Backoff(WaitPolls polls = WaitPolls::sleep_after_1ms) : may_sleep_(polls == WaitPolls::sleep_after_1ms) {}
  void pause() {
    ++polls_;
    if (polls_ < 64) return;  // the common case: the peer is already there
    const auto now = std::chrono::steady_clock::now();
    if (polls_ == 64) since_ = now;
    if (!may_sleep_ || now - since_ < std::chrono::milliseconds(1)) {
      sched_yield();
      return;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(20));
  }

 private:
  bool may_sleep_;
  unsigned polls_ = 0;
  std::chrono::steady_clock::time_point since_{};
};

constexpr double kCheckPeriod = 0.1;  // s between probes of a waiting rank
constexpr double kCancelGrace = 0.5;  // s for cancelled receives whose data is arriving

}  // namespace

void check_mpi(int rc, const char* what) {
  if (rc != MPI_SUCCESS)
    throw Error(ErrorCode::SystemError, std::string(what) + " failed: " + mpi_error_string(rc));
}

void wait_with_timeout(MPI_Request& request, double timeout_s, const char* what, WaitPolls polls) {
  const double start = MPI_Wtime();
  Backoff backoff(polls);
  for (;;) {
    int done = 0;
    check_mpi(MPI_Test(&request, &done, MPI_STATUS_IGNORE), "MPI_Test");
    if (done) return;
    if (MPI_Wtime() - start > timeout_s) {
      // The request cannot be completed any more; leave it (the communicator is now unusable).
      throw Error(ErrorCode::Timeout, std::string(what) + " did not complete within " +
                                          seconds(timeout_s) +
                                          " s (STRAGGLAR_TIMEOUT_S): a peer is later than the timeout, "
                                          "stopped, died, or called with different arguments");
    }
    backoff.pause();
  }
}

MpiTransport::MpiTransport(MPI_Comm comm, double timeout_s) : comm_(comm), timeout_s_(timeout_s) {
  check_mpi(MPI_Comm_rank(comm_, &rank_), "MPI_Comm_rank");
  check_mpi(MPI_Comm_size(comm_, &nranks_), "MPI_Comm_size");
  void* attr = nullptr;
  int found = 0;
  check_mpi(MPI_Comm_get_attr(comm_, MPI_TAG_UB, &attr, &found), "MPI_Comm_get_attr(MPI_TAG_UB)");
  if (found) tag_ub_ = *static_cast<int*>(attr);
}

void MpiTransport::set_max_piece_bytes(std::size_t bytes) {
  require(bytes >= 1 && bytes <= static_cast<std::size_t>(INT_MAX),
          "MpiTransport: max piece of " + std::to_string(bytes) + " bytes, expected [1, INT_MAX]");
  max_piece_ = bytes;
}

void MpiTransport::exchange(std::span<const Message> sends, std::span<const Message> recvs) {
  post(round_, sends, recvs, tag_);
  wait(round_, /*check_notices=*/!recvs.empty() && check_notices_after_receives_);
}

void MpiTransport::post(Round& round, std::span<const Message> sends, std::span<const Message> recvs, int tag) {
  if (round.posted())
    throw Error(ErrorCode::Internal, "MpiTransport: a round posted while its previous one is still pending");
  round.requests.clear();
  round.pending.clear();
  round.tag = tag;
  // Everything that can fail before MPI holds a request: the peers, and room for every request.
  std::size_t requests = 0;
  for (std::span<const Message> ms : {recvs, sends})
    for (const Message& m : ms) {
      if (m.peer < 0 || m.peer >= nranks_)
        throw Error(ErrorCode::Internal, "MpiTransport: peer " + std::to_string(m.peer) +
                                             " outside [0, " + std::to_string(nranks_) + ")");
      requests += pieces(m.bytes);
    }
  round.requests.reserve(requests);
  round.pending.reserve(requests);
  auto post_one = [&](const Message& m, bool is_send) {
    auto* data = static_cast<char*>(m.data);
    for (std::size_t off = 0; off < m.bytes; off += max_piece_) {
      const int piece = static_cast<int>(std::min(max_piece_, m.bytes - off));
      MPI_Request req = MPI_REQUEST_NULL;
      const int rc = is_send ? MPI_Isend(data + off, piece, MPI_BYTE, m.peer, tag, comm_, &req)
                             : MPI_Irecv(data + off, piece, MPI_BYTE, m.peer, tag, comm_, &req);
      if (rc != MPI_SUCCESS) {
        abandon(round);
        check_mpi(rc, is_send ? "MPI_Isend" : "MPI_Irecv");
      }
      round.requests.push_back(req);
      round.pending.push_back({m.peer, is_send});
    }
  };
  // Receives first, so a peer's eager send finds its buffer posted.
  for (const Message& m : recvs) post_one(m, false);
  for (const Message& m : sends) post_one(m, true);
}

void MpiTransport::wait(Round& round, bool check_notices) {
  if (!round.posted()) return;
  const double start = MPI_Wtime();
  double next_check = start + kCheckPeriod;
  Backoff backoff;
  for (;;) {
    int done = 0;
    const int rc = MPI_Testall(static_cast<int>(round.requests.size()), round.requests.data(), &done,
                               MPI_STATUSES_IGNORE);
    if (rc != MPI_SUCCESS) fail(round, ErrorCode::SystemError, "MPI_Testall failed: " + mpi_error_string(rc));
    if (done) {
      round.requests.clear();  // every request is MPI_REQUEST_NULL now
      round.pending.clear();
      // A rank that gave up on this call went back to its caller with its sends still posted:
      // a receive here may have read its buffer (single copy, or pieces still to come) after the
      // caller reused it, and completed with someone else's numbers. It sent its notice before
      // returning, and on one host its messages arrive in order: once our receives are complete
      // the notice is here, and the round is not a success (the UCX transport does the same).
      if (check_notices) check_gave_up(round);
      return;
    }
    const double now = MPI_Wtime();
    if (now >= next_check) {  // off the hot path: a round that waits 0.1 s is waiting on someone
      check_peers(round);
      next_check = now + kCheckPeriod;
    }
    if (now - start > timeout_s_) break;
    backoff.pause();
  }
  std::string waiting;
  for (std::size_t i = 0; i < round.requests.size(); ++i) {
    if (!still_pending(round, i)) continue;
    const std::string item =
        (round.pending[i].is_send ? "send to rank " : "receive from rank ") + std::to_string(round.pending[i].peer);
    if (waiting.find(item) != std::string::npos) continue;  // several pieces to one peer
    if (!waiting.empty()) waiting += ", ";
    waiting += item;
  }
  fail(round, ErrorCode::Timeout,
       "rank " + std::to_string(rank_) + " waited " + seconds(timeout_s_) + " s (STRAGGLAR_TIMEOUT_S) for: " + waiting +
           (round.tag == exchange_tag() ? " in auto's exchange of measurements" : "") +
           " — that peer is later than the timeout, stopped, died, or called with different arguments");
}

// MPI_Testall that finds some requests still pending leaves every request as it was, completed
// ones included: ask each.
bool MpiTransport::still_pending(const Round& round, std::size_t i) const {
  if (round.requests[i] == MPI_REQUEST_NULL) return false;
  int done = 0;
  MPI_Request_get_status(round.requests[i], &done, MPI_STATUS_IGNORE);
  return !done;
}

void MpiTransport::check_gave_up(Round& round) {
  int found = 0;
  MPI_Status status;
  MPI_Iprobe(MPI_ANY_SOURCE, gave_up_tag(), comm_, &found, &status);
  if (found) {
    int code = -1;
    MPI_Recv(&code, 1, MPI_INT, status.MPI_SOURCE, gave_up_tag(), comm_, MPI_STATUS_IGNORE);
    const std::string who = "rank " + std::to_string(rank_) + ": rank " + std::to_string(status.MPI_SOURCE);
    if (code == static_cast<int>(ErrorCode::Mismatch))
      fail(round, ErrorCode::Mismatch, who + " found that the ranks called with different arguments (count, dtype, op "
                                      "or options; its own error says which) and gave up on this call");
    fail(round, ErrorCode::RemoteError, who + " gave up on this call (it timed out, lost a peer or was called with "
                                       "different arguments; its own error says which)");
  }
}

void MpiTransport::check_peers(Round& round) {
  check_gave_up(round);
  int found = 0;
  MPI_Status status;
  for (std::size_t i = 0; i < round.requests.size(); ++i) {
    // Only a receive not yet matched: a peer whose message came may have finished this call.
    if (round.pending[i].is_send || !still_pending(round, i)) continue;
    const int peer = round.pending[i].peer;
    MPI_Iprobe(peer, MPI_ANY_TAG, comm_, &found, &status);
    // The same tag: a later round of this call (the peer is ahead, not elsewhere).
    if (!found || status.MPI_TAG == round.tag || status.MPI_TAG == gave_up_tag()) continue;
    const auto tag_name = [&](int t) {
      return t == agreement_tag()  ? std::string("the argument check of a new configuration")
             : t == exchange_tag() ? std::string("auto's exchange of measurements")
                                   : "the configuration with tag " + std::to_string(t);
    };
    fail(round, ErrorCode::Mismatch, "rank " + std::to_string(rank_) + ": rank " + std::to_string(peer) +
                                  " is in another call (its message is for " + tag_name(status.MPI_TAG) +
                                  ", this call's is " + tag_name(round.tag) +
                                  "): the ranks called with different arguments (count, dtype, op or options)");
  }
}

void MpiTransport::fail(Round& round, ErrorCode code, const std::string& message) {
  abandon(round);
  tell_peers_we_gave_up(code);
  throw Error(code, message);
}

// Nothing we posted may write into memory after we return: a receive is cancelled and completed
// (a cancelled receive completes at once unless its message is already arriving, which gets one
// grace period for all of them together). A send is cancelled where MPI can; otherwise it stays
// with MPI and may still read the buffer if its peer comes back (reading, never writing, the
// caller's memory).
void MpiTransport::abandon(Round& round) noexcept {
  std::vector<MPI_Request>& requests = round.requests;
  for (MPI_Request& r : requests)
    if (r != MPI_REQUEST_NULL) MPI_Cancel(&r);
  const double cancelled_at = MPI_Wtime();
  for (;;) {
    bool receives_left = false;
    for (std::size_t i = 0; i < requests.size(); ++i) {
      if (requests[i] == MPI_REQUEST_NULL) continue;
      int done = 0;
      MPI_Test(&requests[i], &done, MPI_STATUS_IGNORE);
      receives_left = receives_left || (!done && !round.pending[i].is_send);
    }
    if (!receives_left || MPI_Wtime() - cancelled_at > kCancelGrace) break;
    sched_yield();
  }
  for (std::size_t i = 0; i < requests.size(); ++i) {
    if (requests[i] == MPI_REQUEST_NULL) continue;
    if (&round == &round_ && !round.pending[i].is_send) abandoned_receives_ = true;
    round.left_pending = true;
    MPI_Request_free(&requests[i]);
  }
  requests.clear();
  round.pending.clear();
}

// Fire and forget, once: a 4-byte message (sent eagerly) holding the error code, from static
// memory (nothing to keep alive). A peer that is gone or stopped never reads it.
void MpiTransport::tell_peers_we_gave_up(ErrorCode code) {
  if (told_peers_) return;
  told_peers_ = true;
  static const int kCodes[] = {0, 1, 2, 3, 4, 5, 6, 7};
  const int* payload = &kCodes[std::min<std::size_t>(static_cast<std::size_t>(code), std::size(kCodes) - 1)];
  for (int peer = 0; peer < nranks_; ++peer) {
    if (peer == rank_) continue;
    MPI_Request request = MPI_REQUEST_NULL;
    if (MPI_Isend(payload, 1, MPI_INT, peer, gave_up_tag(), comm_, &request) == MPI_SUCCESS)
      MPI_Request_free(&request);
  }
}

}  // namespace stragglar
