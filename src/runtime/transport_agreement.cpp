// Element-wise max over ranks through point-to-point messages (transport_agreement.hpp).
#include "runtime/transport_agreement.hpp"

#include <algorithm>

namespace stragglar::detail {

void transport_max(Transport& transport, std::span<std::int64_t> values, std::vector<std::int64_t>& scratch,
                   int tag) {
  const int n = transport.nranks(), r = transport.rank();
  if (n <= 1) return;
  // Both the running max and the received vector live in `scratch`: a message a timeout leaves
  // pending only ever touches memory the engine keeps alive.
  const std::size_t m = values.size();
  scratch.resize(2 * m);
  std::int64_t* mine = scratch.data();
  std::int64_t* theirs = scratch.data() + m;
  std::copy(values.begin(), values.end(), mine);
  transport.set_tag(tag);
  const std::size_t bytes = m * sizeof(std::int64_t);
  for (int step = 1; step < n; step *= 2) {
    const Message send{(r + step) % n, mine, bytes};
    const Message recv{((r - step) % n + n) % n, theirs, bytes};
    transport.exchange(std::span<const Message>(&send, 1), std::span<const Message>(&recv, 1));
    for (std::size_t i = 0; i < m; ++i) mine[i] = std::max(mine[i], theirs[i]);
  }
  std::copy(mine, mine + m, values.begin());
}

}  // namespace stragglar::detail
