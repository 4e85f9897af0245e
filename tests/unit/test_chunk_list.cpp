// ChunkList (a transfer's chunk indices, inline up to 4): behaves like std::vector<int> across
// the inline → heap boundary, on copy, move and self-assignment (ASan runs these too).
#include <gtest/gtest.h>

#include <numeric>
#include <utility>
#include <vector>

#include "stragglar/chunk_list.hpp"

namespace stragglar {
namespace {

std::vector<int> as_vector(const ChunkList& c) { return {c.begin(), c.end()}; }

TEST(ChunkList, GrowsFromInlineToHeapKeepingOrder) {
  for (int n : {0, 1, 4, 5, 9, 100}) {
    ChunkList c;
    std::vector<int> want;
    for (int i = 0; i < n; ++i) {
      c.push_back(i * 3);
      want.push_back(i * 3);
    }
    EXPECT_EQ(as_vector(c), want) << "n=" << n;
    EXPECT_EQ(c.size(), want.size());
    EXPECT_EQ(c.empty(), n == 0);
    if (n > 0) {
      EXPECT_EQ(c.front(), 0);
      EXPECT_EQ(c.back(), (n - 1) * 3);
    }
  }
}

TEST(ChunkList, CopyMoveAndAssignAcrossTheBoundary) {
  for (int n : {0, 2, 4, 5, 33}) {
    std::vector<int> v(static_cast<std::size_t>(n));
    std::iota(v.begin(), v.end(), 7);
    const ChunkList original(v);
    ChunkList copy = original;
    EXPECT_EQ(copy, original);
    ChunkList moved = std::move(copy);
    EXPECT_EQ(as_vector(moved), v);
    EXPECT_TRUE(copy.empty());  // NOLINT(bugprone-use-after-move): moved-from is empty by contract
    for (int m : {1, 6}) {      // assign over an inline and a heap list
      ChunkList target(std::vector<int>(static_cast<std::size_t>(m), -1));
      target = original;
      EXPECT_EQ(as_vector(target), v);
      ChunkList target2(std::vector<int>(static_cast<std::size_t>(m), -1));
      target2 = ChunkList(original);
      EXPECT_EQ(as_vector(target2), v);
    }
    ChunkList self = original;
    const ChunkList& alias = self;
    self = alias;
    EXPECT_EQ(self, original);
  }
}

TEST(ChunkList, ReserveWritesAndReuseAfterMove) {
  ChunkList c({1, 2});
  c.reserve(100);  // inline -> heap keeps the contents
  EXPECT_EQ(as_vector(c), (std::vector<int>{1, 2}));
  c[1] = 9;
  EXPECT_EQ(c.back(), 9);
  ChunkList taken = std::move(c);
  c.push_back(5);  // NOLINT(bugprone-use-after-move): a moved-from list is empty and usable
  for (int i = 0; i < 10; ++i) c.push_back(i);
  EXPECT_EQ(c.size(), 11u);
  EXPECT_EQ(c.front(), 5);
  EXPECT_EQ(as_vector(taken), (std::vector<int>{1, 9}));
  c.clear();
  EXPECT_TRUE(c.empty());
  EXPECT_THROW(c.reserve(std::size_t{1} << 40), std::length_error);
}

TEST(ChunkList, EqualityComparesContents) {
  EXPECT_EQ(ChunkList({1, 2}), ChunkList(std::vector<int>{1, 2}));
  EXPECT_NE(ChunkList({1, 2}), ChunkList({1, 2, 3}));
  EXPECT_NE(ChunkList({1, 2, 3, 4, 5}), ChunkList({1, 2, 3, 4, 6}));
  EXPECT_EQ(ChunkList{}, ChunkList(std::vector<int>{}));
}

}  // namespace
}  // namespace stragglar
