// Hosts of a communicator's ranks (hosts.hpp).
#include "runtime/hosts.hpp"

#include <unistd.h>

#include <climits>
#include <cstddef>
#include <fstream>
#include <string>
#include <string_view>

namespace stragglar::detail {
namespace {

std::int64_t hash63(std::string_view s) {
  std::uint64_t h = 1469598103934665603ull;  // FNV-1a, 64 bits
  for (const char c : s) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  return static_cast<std::int64_t>(h >> 1);
}

}  // namespace

std::int64_t this_host_id() {
  char name[HOST_NAME_MAX + 1] = {};
  if (gethostname(name, sizeof name - 1) != 0) return 0;  // unknown: every such rank one host
  return hash63(name);
}

std::int64_t this_clock_id() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string id;
  if (!(in >> id) || id.empty()) return -1;
  // A time namespace (Linux 5.6+: `unshare --time`, CRIU) shifts CLOCK_MONOTONIC under the same
  // boot id: its offsets are part of the clock's identity.
  std::ifstream offsets("/proc/self/timens_offsets");
  for (std::string word; offsets >> word;) id += " " + word;
  return hash63(id);
}

int host_major_ranks_per_host(std::span<const std::int64_t> host_of_rank) {
  const std::size_t n = host_of_rank.size();
  std::size_t per_host = 0;  // the run of ranks on host 0
  while (per_host < n && host_of_rank[per_host] == host_of_rank[0]) ++per_host;
  if (per_host == n || n % per_host != 0) return 0;  // one host, or hosts of different sizes
  for (std::size_t base = 0; base < n; base += per_host) {
    for (std::size_t r = base; r < base + per_host; ++r)
      if (host_of_rank[r] != host_of_rank[base]) return 0;
    for (std::size_t earlier = 0; earlier < base; earlier += per_host)  // a host seen twice: interleaved
      if (host_of_rank[earlier] == host_of_rank[base]) return 0;
  }
  return static_cast<int>(per_host);
}

}  // namespace stragglar::detail
