// MpiTransport: MPI_Irecv/MPI_Isend per message, polled wait with a timeout.
#include "runtime/mpi_transport.hpp"

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <climits>
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
// (after 1 ms: a long wait such as a straggler's delay) sleep a few microseconds between polls.
class Backoff {
 public:
  void pause() {
    ++polls_;
    if (polls_ < 64) return;  // the common case: the peer is already there
    const auto now = std::chrono::steady_clock::now();
    if (polls_ == 64) since_ = now;
    if (now - since_ < std::chrono::milliseconds(1)) {
      sched_yield();
      return;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(20));
  }

 private:
  unsigned polls_ = 0;
  std::chrono::steady_clock::time_point since_{};
};

}  // namespace

void check_mpi(int rc, const char* what) {
  if (rc != MPI_SUCCESS)
    throw Error(ErrorCode::SystemError, std::string(what) + " failed: " + mpi_error_string(rc));
}

void wait_with_timeout(MPI_Request& request, double timeout_s, const char* what) {
  const double start = MPI_Wtime();
  Backoff backoff;
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
}

void MpiTransport::set_max_piece_bytes(std::size_t bytes) {
  require(bytes >= 1 && bytes <= static_cast<std::size_t>(INT_MAX),
          "MpiTransport: max piece of " + std::to_string(bytes) + " bytes, expected [1, INT_MAX]");
  max_piece_ = bytes;
}

void MpiTransport::exchange(std::span<const Message> sends, std::span<const Message> recvs) {
  requests_.clear();
  pending_.clear();
  auto post = [&](const Message& m, bool is_send) {
    if (m.peer < 0 || m.peer >= nranks_)
      throw Error(ErrorCode::Internal, "MpiTransport: peer " + std::to_string(m.peer) +
                                           " outside [0, " + std::to_string(nranks_) + ")");
    auto* data = static_cast<char*>(m.data);
    for (std::size_t off = 0; off < m.bytes; off += max_piece_) {
      const int piece = static_cast<int>(std::min(max_piece_, m.bytes - off));
      MPI_Request req = MPI_REQUEST_NULL;
      const int rc = is_send ? MPI_Isend(data + off, piece, MPI_BYTE, m.peer, tag_, comm_, &req)
                             : MPI_Irecv(data + off, piece, MPI_BYTE, m.peer, tag_, comm_, &req);
      check_mpi(rc, is_send ? "MPI_Isend" : "MPI_Irecv");
      requests_.push_back(req);
      pending_.push_back({m.peer, is_send});
    }
  };
  // Receives first, so a peer's eager send finds its buffer posted.
  for (const Message& m : recvs) post(m, false);
  for (const Message& m : sends) post(m, true);
  if (requests_.empty()) return;

  const double start = MPI_Wtime();
  Backoff backoff;
  for (;;) {
    int done = 0;
    check_mpi(MPI_Testall(static_cast<int>(requests_.size()), requests_.data(), &done,
                          MPI_STATUSES_IGNORE),
              "MPI_Testall");
    if (done) return;
    if (MPI_Wtime() - start > timeout_s_) break;
    backoff.pause();
  }
  // Timeout: name what is still outstanding, then make sure nothing we posted writes into
  // memory after we return: a receive is cancelled and completed (a cancelled receive
  // completes at once unless its message is already arriving, which we give a moment).
  // A send is cancelled where MPI can; otherwise it stays with MPI and may still read the
  // buffer if its peer comes back (reading, never writing, the caller's memory).
  std::string waiting;
  for (std::size_t i = 0; i < requests_.size(); ++i) {
    if (requests_[i] == MPI_REQUEST_NULL) continue;
    int done = 0;
    MPI_Request_get_status(requests_[i], &done, MPI_STATUS_IGNORE);
    if (!done) {
      if (!waiting.empty()) waiting += ", ";
      waiting += (pending_[i].is_send ? "send to rank " : "receive from rank ") + std::to_string(pending_[i].peer);
    }
    MPI_Cancel(&requests_[i]);
    const double cancelled_at = MPI_Wtime();
    for (done = 0; !done && MPI_Wtime() - cancelled_at < 0.5;) MPI_Test(&requests_[i], &done, MPI_STATUS_IGNORE);
    if (!done) {
      abandoned_receives_ = abandoned_receives_ || !pending_[i].is_send;
      MPI_Request_free(&requests_[i]);
    }
  }
  throw Error(ErrorCode::Timeout, "rank " + std::to_string(rank_) + " waited " + seconds(timeout_s_) +
                                      " s (STRAGGLAR_TIMEOUT_S) for: " + waiting +
                                      " — that peer is later than the timeout, stopped, died, or called "
                                      "with different arguments");
}

}  // namespace stragglar
