// Small collectives over a UcxTransport's own messages, for tests and benchmarks started
// without MPI (no MPI_Barrier / MPI_Allgather there): one exchange in which every rank sends
// to and receives from every other, under a tag of its own. Not on any hot path (they
// allocate); the allreduce itself never uses them.
#pragma once
#include <cstddef>
#include <cstring>
#include <vector>

#include "ucx/ucx_transport.hpp"

namespace stragglar {

// Tags the helpers use; collectives use small positive tags (below 2^31 - 16).
inline constexpr int kAllgatherTag = 0x7ffffff0;

// all[r * bytes, (r + 1) * bytes) = rank r's `mine`, on every rank. `bytes` > 0.
inline void allgather_bytes(UcxTransport& t, const void* mine, void* all, std::size_t bytes) {
  const int n = t.nranks(), me = t.rank();
  auto* out = static_cast<std::byte*>(all);
  std::memcpy(out + static_cast<std::size_t>(me) * bytes, mine, bytes);
  std::vector<Message> sends, recvs;
  for (int r = 0; r < n; ++r) {
    if (r == me) continue;
    sends.push_back({r, const_cast<void*>(mine), bytes});
    recvs.push_back({r, out + static_cast<std::size_t>(r) * bytes, bytes});
  }
  const int tag = t.tag();
  t.set_tag(kAllgatherTag);
  try {
    t.exchange(sends, recvs);
  } catch (...) {
    t.set_tag(tag);
    throw;
  }
  t.set_tag(tag);
}

template <class T>
std::vector<T> allgather(UcxTransport& t, const T& mine) {
  std::vector<T> all(static_cast<std::size_t>(t.nranks()));
  allgather_bytes(t, &mine, all.data(), sizeof(T));
  return all;
}

// No rank returns before every rank has entered.
inline void barrier(UcxTransport& t) { (void)allgather(t, static_cast<unsigned char>(1)); }

}  // namespace stragglar
