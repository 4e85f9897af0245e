// Single-process checks of the UCX bootstrap: DirectoryStore, connect()'s argument and store
// errors, and a one-rank UcxTransport talking to itself.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "stragglar/error.hpp"
#include "ucx/kv_store.hpp"
#include "ucx/ucx_transport.hpp"

using namespace stragglar;

namespace {

class TempDir {
 public:
  TempDir() {
    std::string t = (std::filesystem::temp_directory_path() / "stragglar-ucx-unit-XXXXXX").string();
    path_ = ::mkdtemp(t.data()) ? t : "";
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

std::vector<std::uint8_t> bytes(const std::string& s) { return {s.begin(), s.end()}; }

template <typename F>
ErrorCode code_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.code();
  }
  ADD_FAILURE() << "no stragglar::Error thrown";
  return ErrorCode::Internal;
}

}  // namespace

TEST(DirectoryStore, SetGetReplaceAndBinaryValues) {
  TempDir dir;
  DirectoryStore store(dir.path() + "/sub/dir");  // parents are created
  const std::vector<std::uint8_t> value = {0, 1, 2, 0, 255, 10, 13};
  store.set("a/b c", value);
  EXPECT_TRUE(store.check("a/b c"));
  EXPECT_FALSE(store.check("a/b"));
  EXPECT_EQ(store.get("a/b c", 1.0), value);
  store.set("a/b c", bytes("second"));
  EXPECT_EQ(store.get("a/b c", 1.0), bytes("second"));
  store.set("empty", {});
  EXPECT_TRUE(store.get("empty", 1.0).empty());
  // Keys map to distinct, tidy file names ('/' and ' ' escaped).
  EXPECT_NE(store.path_of("a/b"), store.path_of("a%2Fb"));
  EXPECT_EQ(std::filesystem::path(store.path_of("x/y")).filename().string(), "k_x%2Fy");
}

TEST(DirectoryStore, GetWaitsForALaterSet) {
  TempDir dir;
  DirectoryStore store(dir.path());
  std::thread writer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    DirectoryStore(dir.path()).set("late", bytes("here"));
  });
  EXPECT_EQ(store.get("late", 10.0), bytes("here"));
  writer.join();
}

TEST(DirectoryStore, GetTimesOutNamingTheKey) {
  TempDir dir;
  DirectoryStore store(dir.path());
  try {
    (void)store.get("never/set", 0.05);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Timeout);
    EXPECT_NE(std::string(e.what()).find("never/set"), std::string::npos) << e.what();
  }
}

TEST(DirectoryStore, RejectsAFileAsDirectory) {
  TempDir dir;
  DirectoryStore(dir.path()).set("f", bytes("x"));
  EXPECT_EQ(code_of([&] { DirectoryStore bad(DirectoryStore(dir.path()).path_of("f")); }), ErrorCode::SystemError);
}

TEST(UcxConnect, BadArgumentsAreInvalidUsage) {
  TempDir dir;
  DirectoryStore store(dir.path());
  EXPECT_EQ(code_of([&] { UcxTransport::connect(store, "p", 2, 2, 1.0); }), ErrorCode::InvalidUsage);
  EXPECT_EQ(code_of([&] { UcxTransport::connect(store, "p", -1, 2, 1.0); }), ErrorCode::InvalidUsage);
  EXPECT_EQ(code_of([&] { UcxTransport::connect(store, "p", 0, 0, 1.0); }), ErrorCode::InvalidUsage);
  EXPECT_EQ(code_of([&] { UcxTransport::connect(store, "p", 0, 1, 0.0); }), ErrorCode::InvalidUsage);
}

TEST(UcxConnect, MissingPeerTimesOutAndForeignKeyIsMismatch) {
  TempDir dir;
  DirectoryStore store(dir.path());
  EXPECT_EQ(code_of([&] { UcxTransport::connect(store, "lonely", 0, 2, 0.2); }), ErrorCode::Timeout);
  store.set("foreign/1", bytes("not an address"));
  EXPECT_EQ(code_of([&] { UcxTransport::connect(store, "foreign", 0, 2, 1.0); }), ErrorCode::Mismatch);
}

TEST(UcxConnect, BadEnvironmentIsInvalidUsage) {
  ::setenv("STRAGGLAR_UCX_WAIT", "spin", 1);
  EXPECT_EQ(code_of([] { (void)UcxOptions::from_env(1.0); }), ErrorCode::InvalidUsage);
  ::unsetenv("STRAGGLAR_UCX_WAIT");
  ::setenv("STRAGGLAR_UCX_ERROR_MODE", "maybe", 1);
  EXPECT_EQ(code_of([] { (void)UcxOptions::from_env(1.0); }), ErrorCode::InvalidUsage);
  ::unsetenv("STRAGGLAR_UCX_ERROR_MODE");
}

// One rank: messages to itself, several in one round, zero-byte ones skipped, tags kept apart.
TEST(UcxTransportSelf, RoundTripsToItself) {
  TempDir dir;
  DirectoryStore store(dir.path());
  auto t = UcxTransport::connect(store, "self", 0, 1, 5.0);
  ASSERT_EQ(t->rank(), 0);
  ASSERT_EQ(t->nranks(), 1);
  std::vector<std::uint8_t> a(1000), b(3 << 20), ra(1000, 0), rb(3 << 20, 0);
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = static_cast<std::uint8_t>(i * 7);
  for (std::size_t i = 0; i < b.size(); ++i) b[i] = static_cast<std::uint8_t>(i * 13 + 1);
  const Message sends[] = {{0, a.data(), a.size()}, {0, nullptr, 0}, {0, b.data(), b.size()}};
  const Message recvs[] = {{0, ra.data(), ra.size()}, {0, nullptr, 0}, {0, rb.data(), rb.size()}};
  t->exchange(sends, recvs);
  EXPECT_EQ(ra, a);
  EXPECT_EQ(rb, b);
  // Only zero-byte messages: nothing to wait for.
  const Message empty[] = {{0, nullptr, 0}};
  t->exchange(empty, empty);
  // A message under tag 5 is not received by a receive under tag 6, and a cancelled receive
  // leaves its buffer alone. The unmatched tag-5 message from the peer we wait for says that
  // peer is in another call: Mismatch naming both tags, within the watch period.
  t->set_tag(5);
  const Message send5[] = {{0, a.data(), 64}};
  t->exchange(send5, {});
  t->set_tag(6);
  t->set_timeout(0.2);
  std::vector<std::uint8_t> r6(64, 0xEE);
  const Message recv6[] = {{0, r6.data(), r6.size()}};
  try {
    t->exchange({}, recv6);
    FAIL() << "no timeout";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Mismatch) << e.what();
    EXPECT_NE(std::string(e.what()).find("has tag 5, this call's is 6"), std::string::npos) << e.what();
  }
  EXPECT_EQ(r6, std::vector<std::uint8_t>(64, 0xEE));
  // Unusable after an error, at once.
  EXPECT_EQ(code_of([&] { t->exchange({}, recv6); }), ErrorCode::RemoteError);
  t.reset();
  EXPECT_EQ(r6, std::vector<std::uint8_t>(64, 0xEE));
}
