// The runtime core's agreement over any Transport, for engines without a small collective of
// their own (UCX; Gloo point-to-point): element-wise max of an int64 vector across ranks.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "runtime/transport.hpp"

namespace stragglar::detail {

// Dissemination (Bruck et al.): in round k every rank sends its running max to rank + 2^k and
// receives from rank - 2^k; max is idempotent, so ceil(log2 n) rounds give every rank the max
// over all ranks for any n. Messages carry `tag` (a tag no configuration uses: kAgreementTag,
// transport.hpp, or one of the transport's own). Timeouts are the transport's, i.e. the
// session's (Transport::set_timeout). `scratch` (owned by the engine, kept alive after a
// timeout) holds what is sent and received.
void transport_max(Transport& transport, std::span<std::int64_t> values, std::vector<std::int64_t>& scratch, int tag);

}  // namespace stragglar::detail
