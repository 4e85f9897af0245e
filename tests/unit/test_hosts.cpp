// Hosts of a communicator from its ranks' host ids (src/runtime/hosts.hpp): auto's
// hierarchical candidate needs host-major hosts of equal size.
#include <gtest/gtest.h>

#include <vector>

#include "runtime/hosts.hpp"

using stragglar::detail::host_major_ranks_per_host;
using stragglar::detail::this_host_id;

TEST(Hosts, HostMajorHostsOfEqualSizeGiveTheirSize) {
  EXPECT_EQ(host_major_ranks_per_host(std::vector<std::int64_t>{7, 7, 7, 7, 9, 9, 9, 9}), 4);
  EXPECT_EQ(host_major_ranks_per_host(std::vector<std::int64_t>{5, 5, 3, 3, 8, 8}), 2);
  EXPECT_EQ(host_major_ranks_per_host(std::vector<std::int64_t>{1, 2, 3, 4}), 1);  // a host per rank
}

TEST(Hosts, OneHostUnevenOrInterleavedGiveZero) {
  EXPECT_EQ(host_major_ranks_per_host(std::vector<std::int64_t>{4, 4, 4, 4}), 0);        // one host
  EXPECT_EQ(host_major_ranks_per_host(std::vector<std::int64_t>{1, 1, 1, 2, 2, 2, 2, 2}), 0);  // 3 + 5
  EXPECT_EQ(host_major_ranks_per_host(std::vector<std::int64_t>{1, 1, 2, 2, 2, 2}), 0);  // 2 + 4
  EXPECT_EQ(host_major_ranks_per_host(std::vector<std::int64_t>{1, 2, 1, 2}), 0);        // round robin
  EXPECT_EQ(host_major_ranks_per_host(std::vector<std::int64_t>{1, 1, 2, 2, 1, 1}), 0);  // a host twice
  EXPECT_EQ(host_major_ranks_per_host(std::vector<std::int64_t>{3}), 0);
  EXPECT_EQ(host_major_ranks_per_host(std::vector<std::int64_t>{}), 0);
}

TEST(Hosts, ThisHostIdIsStableAndNonNegative) {
  EXPECT_GE(this_host_id(), 0);
  EXPECT_EQ(this_host_id(), this_host_id());
}
