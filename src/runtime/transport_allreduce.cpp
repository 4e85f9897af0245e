// Recursive doubling AllReduce over a Transport (transport_allreduce.hpp).
#include "runtime/transport_allreduce.hpp"

#include <utility>

namespace stragglar::detail {

void* transport_allreduce(Transport& transport, Device& device, void* data, void* spare, std::size_t count,
                          DataType dtype, ReduceOp op, int tag) {
  const int n = transport.nranks(), r = transport.rank();
  if (n <= 1 || count == 0) return data;
  const std::size_t bytes = count * size_of(dtype);
  void* mine = data;    // this rank's running partial
  void* theirs = spare;  // what a partner sent
  transport.set_tag(tag);
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
