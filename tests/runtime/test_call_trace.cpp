// The trace of every call (src/runtime/call_trace.hpp) over the thread engine: a known job — a
// fixed late rank, a moving one, native observed — leaves per-rank files that parse (JSON lines
// and Chrome trace), name the rank that was made late on every call, and on the one clock the
// threads share every rank leaves each call after the last rank entered it. A path that cannot
// be written gives one error naming it, and the job runs untraced. No timing is asserted.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "runtime/session.hpp"
#include "thread_engine.hpp"
#include "trace_check.hpp"

namespace stragglar {
namespace {

using testing::ThreadEngine;
using testing::ThreadJob;

constexpr int kRanks = 4;
constexpr int kCalls = 8;
constexpr std::size_t kCount = 1 << 14;
constexpr int kDelayMs = 50;

std::string fresh_dir(const std::string& name) {
  const std::string dir = ::testing::TempDir() + "stragglar-trace-" + name + "-" + std::to_string(getpid());
  ::mkdir(dir.c_str(), 0755);
  return dir;
}

// kCalls calls of `algorithm` on kRanks threads; before call c, after a barrier, rank late(c)
// sleeps kDelayMs (far above a loaded host's scheduling delays). Every
// result is checked exact (rank r contributes r + 1 + c in every element).
std::vector<std::string> run_job(Algorithm algorithm, const std::function<int(int)>& late) {
  ThreadJob job(kRanks, 30);
  std::vector<std::string> errors(kRanks);
  std::vector<std::thread> threads;
  for (int r = 0; r < kRanks; ++r)
    threads.emplace_back([&, r] {
      try {
        ThreadEngine engine(job, r);
        detail::Session session(engine, "test");
        Options o;
        o.algorithm = algorithm;
        std::vector<float> buf(kCount);
        for (int c = 0; c < kCalls; ++c) {
          std::fill(buf.begin(), buf.end(), static_cast<float>(r + 1 + c));
          job.barrier(r);  // a common start: a thread started late is not a late rank
          if (r == late(c)) std::this_thread::sleep_for(std::chrono::milliseconds(kDelayMs));
          session.allreduce(buf.data(), buf.data(), kCount, DataType::float32, ReduceOp::sum, o);
          const float want = static_cast<float>(kRanks * (kRanks + 1) / 2 + kRanks * c);
          for (float v : buf)
            if (v != want) throw Error(ErrorCode::Internal, "call " + std::to_string(c) + ": wrong sum");
        }
      } catch (const Error& e) {
        errors[static_cast<std::size_t>(r)] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  return errors;
}

// Runs the job traced under `prefix` and checks its files: every call names late(c).
void expect_trace_names(const std::string& prefix, Algorithm algorithm, const std::function<int(int)>& late) {
  set_trace_path(prefix);
  for (const std::string& e : run_job(algorithm, late)) EXPECT_EQ(e, "");
  set_trace_path("");
  std::string problems;
  std::vector<testing::RankTrace> ranks;
  const int comm = testing::only_comm(prefix);
  for (int r = 0; r < kRanks; ++r) ranks.push_back(testing::read_rank_trace(prefix, comm, r, problems));
  const std::vector<int> found = testing::late_rank_per_call(ranks, problems);
  EXPECT_EQ(problems, "");
  ASSERT_EQ(found.size(), static_cast<std::size_t>(kCalls));
  for (int c = 0; c < kCalls; ++c) EXPECT_EQ(found[static_cast<std::size_t>(c)], late(c)) << "call " << c;
  for (int r = 0; r < kRanks; ++r) {
    const testing::RankTrace& t = ranks[static_cast<std::size_t>(r)];
    EXPECT_EQ(t.header.value("rank", -1), r);
    EXPECT_EQ(t.header.value("nranks", -1), kRanks);
    EXPECT_EQ(t.header.value("clock_id", -2), ranks[0].header.value("clock_id", -3)) << "threads share one clock";
    for (const testing::TracedCall& c : t.calls) {
      EXPECT_NE(c.algorithm, "none");
      EXPECT_NE(c.reason, "failed");
      if (algorithm != Algorithm::automatic) {
        EXPECT_EQ(c.algorithm, to_string(algorithm));
        EXPECT_EQ(c.reason, "requested");
      }
    }
  }
}

TEST(CallTrace, AFixedLateRankIsNamedOnEveryCall) {
  expect_trace_names(fresh_dir("fixed") + "/job", Algorithm::automatic, [](int) { return 3; });
}

TEST(CallTrace, AMovingLateRankIsNamedOnEveryCall) {
  expect_trace_names(fresh_dir("moving") + "/job", Algorithm::stragglar, [](int c) { return c % kRanks; });
}

// Observe-only: the native collective, traced, still names the late rank (and its results are
// the native's, checked exact in run_job).
TEST(CallTrace, NativeObservedNamesTheLateRank) {
  expect_trace_names(fresh_dir("native") + "/job", Algorithm::native, [](int c) { return c < 4 ? 1 : 2; });
}

// A directory as the path: files trace.c0.r<R>.* inside it.
TEST(CallTrace, ADirectoryGetsTraceFilesInside) {
  const std::string dir = fresh_dir("dir");
  set_trace_path(dir);
  for (const std::string& e : run_job(Algorithm::ring, [](int) { return 0; })) EXPECT_EQ(e, "");
  set_trace_path("");
  std::string problems;
  const int comm = testing::only_comm(dir + "/trace");
  for (int r = 0; r < kRanks; ++r) (void)testing::read_rank_trace(dir + "/trace", comm, r, problems);
  EXPECT_EQ(problems, "");
}

TEST(CallTrace, AnUnwritablePathGivesOneErrorAndTheJobRuns) {
  const std::string bad = "/nonexistent-stragglar-dir/job";
  set_trace_path(bad);
  ::testing::internal::CaptureStderr();
  const std::vector<std::string> errors = run_job(Algorithm::automatic, [](int) { return 2; });
  const std::string err = ::testing::internal::GetCapturedStderr();
  set_trace_path("");
  for (const std::string& e : errors) EXPECT_EQ(e, "");
  std::size_t messages = 0;
  for (std::size_t at = err.find("cannot write"); at != std::string::npos; at = err.find("cannot write", at + 1))
    ++messages;
  EXPECT_EQ(messages, 1u) << err;
  EXPECT_NE(err.find(bad), std::string::npos) << "the message names the path: " << err;
}

}  // namespace
}  // namespace stragglar

namespace stragglar {
namespace {

// More calls than the buffers hold (the writer thread writes the full ones while calls go on):
// every call is in the files, once, in order, on one rank.
TEST(CallTrace, CallsBeyondTheBuffersAreAllWrittenInOrder) {
  const std::string prefix = fresh_dir("long") + "/job";
  constexpr std::int64_t kMany = 2 * static_cast<std::int64_t>(detail::CallTrace::kCapacity) + 1234;
  set_trace_path(prefix);
  {
    ThreadJob job(1, 30);
    ThreadEngine engine(job, 0);
    detail::Session session(engine, "test");
    Options o;
    o.algorithm = Algorithm::ring;
    float x = 1;
    for (std::int64_t i = 0; i < kMany; ++i)
      session.allreduce(&x, &x, 1, DataType::float32, ReduceOp::sum, o);
  }
  set_trace_path("");
  std::string problems;
  const testing::RankTrace t = testing::read_rank_trace(prefix, testing::only_comm(prefix), 0, problems);
  EXPECT_EQ(problems, "");  // includes "call i out of order" and the Chrome slice count
  EXPECT_EQ(static_cast<std::int64_t>(t.calls.size()), kMany);
}

}  // namespace
}  // namespace stragglar
