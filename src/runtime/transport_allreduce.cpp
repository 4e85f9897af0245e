// A latency-bound AllReduce over a Transport: one round, or recursive doubling (transport_allreduce.hpp).
#include "runtime/transport_allreduce.hpp"

#include <algorithm>
#include <array>
#include <utility>

namespace stragglar::detail {

std::size_t transport_allreduce_staging_bytes(int nranks, std::size_t bytes) {
  return (nranks <= kOneRoundMaxRanks ? static_cast<std::size_t>(std::max(nranks, 2)) : 2) * bytes;
}

namespace {

// Every rank sends its data (slot 0) to every other and receives theirs: rank s's in slot s + 1
// below this rank, s above it. Then x0 op x1 op ... op x(n−1), accumulated in rank 0's slot.
void* one_round(Transport& transport, Device& device, std::byte* staging, std::size_t count, DataType dtype,
                ReduceOp op) {
  const int n = transport.nranks(), r = transport.rank();
  const std::size_t bytes = count * size_of(dtype);
  const auto slot = [&](int s) { return staging + static_cast<std::size_t>(s == r ? 0 : s < r ? s + 1 : s) * bytes; };
  std::array<Message, kOneRoundMaxRanks - 1> sends, recvs;
  for (int k = 1; k < n; ++k) {
    const int to = (r + k) % n, from = (r - k + n) % n;
    sends[static_cast<std::size_t>(k - 1)] = Message{to, staging, bytes};
    recvs[static_cast<std::size_t>(k - 1)] = Message{from, slot(from), bytes};
  }
  const auto peers = static_cast<std::size_t>(n - 1);
  transport.exchange(std::span<const Message>(sends.data(), peers), std::span<const Message>(recvs.data(), peers));
  std::byte* result = slot(0);
  for (int s = 1; s < n; ++s) device.reduce(result, slot(s), count, dtype, op);
  return result;
}

}  // namespace

void* transport_allreduce(Transport& transport, Device& device, std::byte* staging, std::size_t count, DataType dtype,
                          ReduceOp op, int tag) {
  const int n = transport.nranks(), r = transport.rank();
  if (n <= 1 || count == 0) return staging;
  transport.set_tag(tag);
  if (n <= kOneRoundMaxRanks) return one_round(transport, device, staging, count, dtype, op);
  const std::size_t bytes = count * size_of(dtype);
  void* mine = staging;          // this rank's running partial
  void* theirs = staging + bytes;  // what a partner sent
  auto send = [&](int peer) {
    const Message m{peer, mine, bytes};
    transport.exchange(std::span<const Message>(&m, 1), {});
  };
  auto receive = [&](int peer, void* into) {
    const Message m{peer, into, bytes};
    transport.exchange({}, std::span<const Message>(&m, 1));
  };
  // lower-rank partial op higher-rank partial, whichever buffer it lands in: both partners of a
  // round compute the same bits.
  auto combine = [&](int peer) {
    if (r < peer) {
      device.reduce(mine, theirs, count, dtype, op);
    } else {
      device.reduce(theirs, mine, count, dtype, op);
      std::swap(mine, theirs);
    }
  };

  int p = 1;  // the largest power of two <= n
  while (p * 2 <= n) p *= 2;
  const int rem = n - p;
  // Fold: of ranks 0 .. 2·rem-1, each even rank hands its data to the odd rank above it and
  // waits for the result; the odd ones take part as rank r/2 of p. The others are r - rem.
  if (r < 2 * rem && r % 2 == 0) {
    send(r + 1);
    receive(r + 1, mine);
    return mine;
  }
  if (r < 2 * rem) {
    receive(r - 1, theirs);
    combine(r - 1);
  }
  const int v = r < 2 * rem ? r / 2 : r - rem;
  auto real = [&](int w) { return w < rem ? 2 * w + 1 : w + rem; };
  for (int mask = 1; mask < p; mask <<= 1) {
    const int peer = real(v ^ mask);
    const Message out{peer, mine, bytes};
    const Message in{peer, theirs, bytes};
    transport.exchange(std::span<const Message>(&out, 1), std::span<const Message>(&in, 1));
    combine(peer);
  }
  if (r < 2 * rem) send(r - 1);  // unfold: the folded-out rank below gets the result
  return mine;
}

}  // namespace stragglar::detail
