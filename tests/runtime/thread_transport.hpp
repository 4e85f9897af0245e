// An in-process Transport for tests: n ranks as threads of one process, no MPI.
//
// Rendezvous per (src, dst) pair, with no heap allocation per message (the hot-path allocation
// test relies on that): a send publishes {pointer, bytes} in its pair's slot; the receiver
// copies straight from the sender's buffer and marks the slot consumed; exchange() returns
// once its receives are copied and its sends consumed — so, as with MPI, a buffer is not
// reused before the peer has it. Messages between one pair are matched in order. A wait longer
// than the timeout throws Error(Timeout) naming the peer.
#pragma once
#include <sched.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <thread>

#include "runtime/transport.hpp"
#include "stragglar/error.hpp"

namespace stragglar::testing {

class ThreadHub {
 public:
  explicit ThreadHub(int n, double timeout_s = 30)
      : n_(n), timeout_s_(timeout_s), slots_(std::make_unique<Slot[]>(static_cast<std::size_t>(n) * n)) {}
  int n() const { return n_; }
  double timeout_s() const { return timeout_s_; }

  // A pair's messages in flight: a fixed ring (a round may hold several messages per pair).
  static constexpr std::uint64_t kRing = 256;
  struct Slot {
    std::atomic<std::uint64_t> posted{0};    // sequence number of the last published message
    std::atomic<std::uint64_t> consumed{0};  // sequence number of the last copied message
    struct Entry {
      const void* data = nullptr;
      std::size_t bytes = 0;
    } ring[kRing];
    std::uint64_t next_send = 0;  // touched by the sender only
    std::uint64_t next_recv = 0;  // touched by the receiver only
  };
  Slot& slot(int src, int dst) { return slots_[static_cast<std::size_t>(src) * n_ + dst]; }

 private:
  int n_;
  double timeout_s_;
  std::unique_ptr<Slot[]> slots_;
};

class ThreadTransport final : public Transport {
 public:
  ThreadTransport(ThreadHub& hub, int rank) : hub_(hub), rank_(rank) {}
  int rank() const override { return rank_; }
  int nranks() const override { return hub_.n(); }
  void set_tag(int tag) override { tag_ = tag; }
  int tag() const { return tag_; }  // the last tag the runtime set (tests check tags are unique)
  // Ignored: the job's timeout (ThreadHub) bounds every wait of its ranks, so that a test can
  // make it short whatever the session's is.
  void set_timeout(double) override {}

  void exchange(std::span<const Message> sends, std::span<const Message> recvs) override {
    for (const Message& m : sends) {
      ThreadHub::Slot& s = hub_.slot(rank_, m.peer);
      wait_until([&] { return s.next_send - s.consumed.load(std::memory_order_acquire) < ThreadHub::kRing; },
                 m.peer, "free send slot");
      s.ring[s.next_send % ThreadHub::kRing] = {m.data, m.bytes};
      s.posted.store(++s.next_send, std::memory_order_release);
    }
    for (const Message& m : recvs) {
      ThreadHub::Slot& s = hub_.slot(m.peer, rank_);
      const std::uint64_t seq = ++s.next_recv;
      wait_until([&] { return s.posted.load(std::memory_order_acquire) >= seq; }, m.peer, "message");
      const ThreadHub::Slot::Entry& e = s.ring[(seq - 1) % ThreadHub::kRing];
      if (e.bytes != m.bytes)
        throw Error(ErrorCode::Internal, "rank " + std::to_string(rank_) + " expected " + std::to_string(m.bytes) +
                                             " bytes from rank " + std::to_string(m.peer) + ", got " +
                                             std::to_string(e.bytes));
      if (m.bytes) std::memcpy(m.data, e.data, m.bytes);
      s.consumed.store(seq, std::memory_order_release);
    }
    for (const Message& m : sends) {  // the buffer may change once the peer has copied it
      ThreadHub::Slot& s = hub_.slot(rank_, m.peer);
      wait_until([&] { return s.consumed.load(std::memory_order_acquire) == s.next_send; }, m.peer, "consumer");
    }
  }

 private:
  template <typename Ready>
  void wait_until(Ready ready, int peer, const char* what) {
    if (ready()) return;
    const auto start = std::chrono::steady_clock::now();
    for (unsigned spins = 0; !ready(); ++spins) {
      if (spins < 64) continue;
      if (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() > hub_.timeout_s())
        throw Error(ErrorCode::Timeout, "rank " + std::to_string(rank_) + ": no " + what + " from rank " +
                                            std::to_string(peer) + " within the timeout");
      sched_yield();
    }
  }

  ThreadHub& hub_;
  int rank_;
  int tag_ = 0;
};

}  // namespace stragglar::testing
