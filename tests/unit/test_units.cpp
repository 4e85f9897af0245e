#include <gtest/gtest.h>

#include "stragglar/error.hpp"
#include "stragglar/schedule.hpp"
#include "stragglar/units.hpp"

namespace stragglar {
namespace {

TEST(Units, Durations) {
  EXPECT_DOUBLE_EQ(parse_duration_s("3us"), 3e-6);
  EXPECT_DOUBLE_EQ(parse_duration_s("0.5ms"), 0.5e-3);
  EXPECT_DOUBLE_EQ(parse_duration_s("2 s"), 2.0);
  EXPECT_DOUBLE_EQ(parse_duration_s("0"), 0.0);
  EXPECT_THROW(parse_duration_s("5"), Error);  // a unit is required
  EXPECT_THROW(parse_duration_s("-1ms"), Error);
  EXPECT_THROW(parse_duration_s("fast"), Error);
}

TEST(Units, Bandwidths) {
  EXPECT_DOUBLE_EQ(parse_bandwidth_Bps("450GiB/s"), 450.0 * 1073741824.0);
  EXPECT_DOUBLE_EQ(parse_bandwidth_Bps("450GB/s"), 450e9);
  EXPECT_DOUBLE_EQ(parse_bandwidth_Bps("100 MiB/s"), 100.0 * 1048576.0);
  EXPECT_THROW(parse_bandwidth_Bps("0GB/s"), Error);
  EXPECT_THROW(parse_bandwidth_Bps("450"), Error);
}

TEST(Units, Bytes) {
  EXPECT_EQ(parse_bytes("1024"), 1024u);
  EXPECT_EQ(parse_bytes("64K"), 65536u);
  EXPECT_EQ(parse_bytes("64M"), 64u << 20);
  EXPECT_EQ(parse_bytes("1GiB"), std::size_t{1} << 30);
  EXPECT_EQ(parse_bytes("0.5K"), 512u);
  EXPECT_THROW(parse_bytes("1.5"), Error);
  EXPECT_THROW(parse_bytes("12Q"), Error);
  try {
    parse_bytes("12Q");
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("size '12Q': expected a byte count"), std::string::npos);
  }
  EXPECT_EQ(format_bytes(64u << 20), "64 MiB");
  EXPECT_EQ(format_bytes(1000), "1000 B");
}

TEST(ChunkRange, CoversTheBufferWithNearEqualChunks) {
  for (std::size_t count : {0u, 1u, 6u, 7u, 8u, 1009u, 1000000u})
    for (int nchunks : {1, 3, 7, 8, 63}) {
      std::size_t next = 0;
      for (int c = 0; c < nchunks; ++c) {
        const ElementRange r = chunk_range(count, nchunks, c);
        EXPECT_EQ(r.begin, next);
        EXPECT_LE(r.size(), count / nchunks + 1);
        EXPECT_GE(r.size(), count / nchunks);
        next = r.end;
      }
      EXPECT_EQ(next, count);
    }
  EXPECT_THROW(chunk_range(10, 4, 4), Error);
}

}  // namespace
}  // namespace stragglar
