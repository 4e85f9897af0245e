// The runtime core (src/runtime/session.*) without MPI: n ranks as threads of this process over
// thread_engine.hpp. What every front-end inherits from the core is tested here once:
// one-rank calls, exact results for every algorithm, "invalid on one rank → error on every
// rank", tags, the broken state after a timeout, geometric scratch growth, NaN/±0/±Inf bits,
// and zero heap allocations on the hot path (this binary replaces operator new to count them).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <new>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "runtime/element.hpp"
#include "runtime/hosts.hpp"
#include "runtime/session.hpp"
#include "runtime/transport_agreement.hpp"
#include "runtime/transport_allreduce.hpp"
#include "thread_engine.hpp"

// ---- counting allocations (hot-path test) ------------------------------------------------------
namespace {
thread_local bool t_counting = false;
std::atomic<long> g_allocations{0};
thread_local long t_allocations = 0;  // this thread's share: a rank's own count
}  // namespace

void* operator new(std::size_t bytes) {
  if (t_counting) {
    g_allocations.fetch_add(1, std::memory_order_relaxed);
    ++t_allocations;
  }
  if (void* p = std::malloc(bytes == 0 ? 1 : bytes)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t bytes) { return operator new(bytes); }
// The nothrow forms too (std::stable_sort's temporary buffer uses them): all of operator new
// must pair with the operator delete above, or ASan reports new-vs-free mismatches.
void* operator new(std::size_t bytes, const std::nothrow_t&) noexcept {
  try {
    return operator new(bytes);
  } catch (...) {
    return nullptr;
  }
}
void* operator new[](std::size_t bytes, const std::nothrow_t& t) noexcept { return operator new(bytes, t); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }

namespace stragglar {
namespace {

using testing::ThreadEngine;
using testing::ThreadJob;
using detail::Choice;

// What one rank's call gave: "" or "<code>: <message>".
using RankBody = std::function<void(int rank, detail::Session&, ThreadEngine&)>;

// `config`: the session's STRAGGLAR_* (null: the environment's); `hosts` > 1: rank r on host r % hosts.
std::vector<std::string> run_ranks(int n, const RankBody& body, double timeout_s = 20,
                                   const detail::RuntimeConfig* config = nullptr, int hosts = 1) {
  ThreadJob job(n, timeout_s);
  std::vector<std::string> errors(static_cast<std::size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      ThreadEngine engine(job, r);
      if (hosts > 1) engine.host = r % hosts;
      detail::Session session(engine, "test", "free it and create a new one", config);
      try {
        body(r, session, engine);
      } catch (const Error& e) {
        errors[static_cast<std::size_t>(r)] = std::string(to_string(e.code())) + ": " + e.what();
      }
    });
  for (auto& t : threads) t.join();
  return errors;
}

std::vector<Algorithm> runnable_algorithms() {
  std::vector<Algorithm> v;
  for (const AlgorithmInfo& row : algorithm_table())
    if (row.kind != AlgorithmKind::automatic) v.push_back(row.id);
  return v;
}

Options with(Algorithm a, int straggler = -1) {
  Options o;
  o.algorithm = a;
  o.straggler = straggler;
  return o;
}

// ---- one rank -----------------------------------------------------------------------------------
TEST(Session, OneRankEveryAlgorithmReturnsTheInput) {
  const std::vector<DataType> types = {DataType::float32, DataType::float64, DataType::float16,
                                       DataType::bfloat16, DataType::int32, DataType::int64};
  const auto errors = run_ranks(1, [&](int, detail::Session& s, ThreadEngine& e) {
    for (Algorithm a : runnable_algorithms())
      for (DataType t : types)
        for (ReduceOp op : {ReduceOp::sum, ReduceOp::prod, ReduceOp::min, ReduceOp::max, ReduceOp::avg})
          for (std::size_t count : {std::size_t{0}, std::size_t{1}, std::size_t{1000}})
            for (bool in_place : {true, false}) {
              std::vector<unsigned char> in(count * size_of(t) + 8), out(in.size(), 0xA5);
              for (std::size_t i = 0; i < count; ++i) store_element(in.data(), i, t, static_cast<double>(i % 13) - 6);
              const std::vector<unsigned char> expected_in = in;
              if (in_place) out = in;
              s.allreduce(in_place ? out.data() : in.data(), out.data(), count, t, op, with(a));
              EXPECT_EQ(0, std::memcmp(out.data(), expected_in.data(), count * size_of(t)))
                  << to_string(a) << " " << to_string(t) << " " << to_string(op) << " count " << count;
              EXPECT_EQ(in, expected_in);
            }
    EXPECT_EQ(e.native_calls, 0);  // one rank never needs the engine
  });
  EXPECT_EQ(errors[0], "");
}

// ---- every algorithm through the core, exact -------------------------------------------------------
TEST(Session, EveryAlgorithmExactOnEveryRank) {
  for (int n : {2, 3, 5, 8}) {
    std::vector<std::vector<double>> results(static_cast<std::size_t>(n));
    for (Algorithm a : runnable_algorithms()) {
      for (int straggler : {n - 1, 0}) {
        const std::size_t count = 1000 + static_cast<std::size_t>(n);
        const auto errors = run_ranks(n, [&](int r, detail::Session& s, ThreadEngine&) {
          std::vector<double> buf(count);
          for (std::size_t i = 0; i < count; ++i) buf[i] = static_cast<double>((r * 37 + static_cast<int>(i) * 11) % 23 - 11);
          std::vector<double> out(count, -1);
          s.allreduce(buf.data(), out.data(), count, DataType::float64, ReduceOp::sum, with(a, straggler));
          results[static_cast<std::size_t>(r)] = out;
        });
        for (int r = 0; r < n; ++r) ASSERT_EQ(errors[static_cast<std::size_t>(r)], "") << to_string(a) << " n=" << n;
        for (std::size_t i = 0; i < count; ++i) {
          double want = 0;
          for (int r = 0; r < n; ++r) want += static_cast<double>((r * 37 + static_cast<int>(i) * 11) % 23 - 11);
          for (int r = 0; r < n; ++r)
            ASSERT_EQ(results[static_cast<std::size_t>(r)][i], want) << to_string(a) << " n=" << n << " rank " << r;
        }
      }
    }
  }
}

// ---- invalid on one rank → an error on every rank, buffers untouched -------------------------------
TEST(Session, InvalidArgumentOnOneRankFailsEveryRankWithoutMovingData) {
  const int n = 4;
  for (int bad : {0, 2}) {
    std::vector<std::vector<float>> outs(n, std::vector<float>(10, 7.0f));
    const auto errors = run_ranks(n, [&](int r, detail::Session& s, ThreadEngine&) {
      std::vector<float> in(10, 1.0f);
      float* out = outs[static_cast<std::size_t>(r)].data();
      s.allreduce(in.data(), r == bad ? nullptr : out, 10, DataType::float32, ReduceOp::sum, with(Algorithm::ring));
    });
    for (int r = 0; r < n; ++r) {
      const std::string& e = errors[static_cast<std::size_t>(r)];
      if (r == bad) {
        EXPECT_NE(e.find("invalid usage: test: recvbuf is NULL"), std::string::npos) << e;
      } else {
        EXPECT_NE(e.find("remote error"), std::string::npos) << e;
        EXPECT_NE(e.find("rank " + std::to_string(bad) + " rejected its arguments"), std::string::npos) << e;
      }
      EXPECT_EQ(outs[static_cast<std::size_t>(r)], std::vector<float>(10, 7.0f)) << "rank " << r;
    }
  }
  // A bad enum value on one rank only, and a bad straggler.
  const auto errors = run_ranks(n, [&](int r, detail::Session& s, ThreadEngine&) {
    std::vector<float> buf(10, 1.0f);
    s.allreduce(buf.data(), buf.data(), 10, r == 1 ? static_cast<DataType>(9) : DataType::float32, ReduceOp::sum,
                with(Algorithm::stragglar));
  });
  EXPECT_NE(errors[1].find("dtype 9 is not valid"), std::string::npos) << errors[1];
  EXPECT_NE(errors[0].find("rank 1 rejected"), std::string::npos) << errors[0];
  const auto bad_algo = run_ranks(2, [&](int r, detail::Session& s, ThreadEngine&) {
    std::vector<float> buf(10, 1.0f);
    s.allreduce(buf.data(), buf.data(), 10, DataType::float32, ReduceOp::sum,
                with(r == 0 ? static_cast<Algorithm>(42) : Algorithm::ring));
  });
  EXPECT_NE(bad_algo[0].find("algorithm 42 is not valid, expected one of 0 (stragglar)"), std::string::npos)
      << bad_algo[0];
  EXPECT_NE(bad_algo[1].find("rank 0 rejected"), std::string::npos) << bad_algo[1];
}

// One pipeline limit, in one place (kMaxPipeline): the API and synthesis reject the same values.
TEST(Session, PipelineLimitIsTheSynthesizersLimit) {
  const auto errors = run_ranks(2, [&](int, detail::Session& s, ThreadEngine&) {
    std::vector<float> buf(64, 1.0f);
    Options o;
    o.pipeline = kMaxPipeline + 1;
    s.allreduce(buf.data(), buf.data(), buf.size(), DataType::float32, ReduceOp::sum, o);
  });
  for (const std::string& e : errors)
    EXPECT_NE(e.find("pipeline " + std::to_string(kMaxPipeline + 1) + " is outside [1, " + std::to_string(kMaxPipeline) + "]"),
              std::string::npos)
        << e;
  SynthOptions so;
  so.pipeline = kMaxPipeline;
  EXPECT_NO_THROW((void)synthesize(Algorithm::stragglar, 2, so));
  so.pipeline = kMaxPipeline + 1;
  EXPECT_THROW((void)synthesize(Algorithm::stragglar, 2, so), Error);
}

TEST(Session, MismatchNamesTheFieldOnEveryRank) {
  const auto errors = run_ranks(3, [&](int r, detail::Session& s, ThreadEngine&) {
    std::vector<int> buf(20, 1);
    s.allreduce(buf.data(), buf.data(), r == 2 ? 19 : 20, DataType::int32, ReduceOp::sum, with(Algorithm::rhd));
  });
  for (const std::string& e : errors)
    EXPECT_NE(e.find("mismatch across ranks: test: ranks disagree on count: values range from 19 to 20"),
              std::string::npos)
        << e;
  const auto algos = run_ranks(2, [&](int r, detail::Session& s, ThreadEngine&) {
    std::vector<int> buf(20, 1);
    s.allreduce(buf.data(), buf.data(), 20, DataType::int32, ReduceOp::sum,
                with(r == 0 ? Algorithm::ring : Algorithm::native));
  });
  for (const std::string& e : algos)
    EXPECT_NE(e.find("ranks disagree on algorithm: values range from ring to native"), std::string::npos) << e;
}

// ---- tags: one per configuration, the same on every rank ---------------------------------------
TEST(Session, EveryConfigurationGetsItsOwnTagOnEveryRank) {
  const int n = 3;
  std::vector<std::vector<int>> tags(n);
  const auto errors = run_ranks(n, [&](int r, detail::Session& s, ThreadEngine& e) {
    std::vector<float> buf(64, 1.0f);
    for (std::size_t count : {std::size_t{64}, std::size_t{32}, std::size_t{64}, std::size_t{16}, std::size_t{32}}) {
      s.allreduce(buf.data(), buf.data(), count, DataType::float32, ReduceOp::max, with(Algorithm::ring));
      tags[static_cast<std::size_t>(r)].push_back(e.tag());
    }
  });
  for (const std::string& e : errors) EXPECT_EQ(e, "");
  for (int r = 0; r < n; ++r) EXPECT_EQ(tags[static_cast<std::size_t>(r)], (std::vector<int>{1, 2, 1, 3, 2}));
}

// ---- broken after a timeout ------------------------------------------------------------------------
// The STRAGGLAR_* variables parse (CTest env_keep_buffers_malformed runs this with a malformed
// value and expects the error that names it).
TEST(Session, TheEnvironmentParses) {
  try {
    (void)detail::env();
  } catch (const Error& e) {
    FAIL() << e.what();
  }
}

TEST(Session, AfterATimeoutEveryLaterCallFailsAtOnce) {
  const int n = 3;
  std::vector<std::string> second(n);
  const auto errors = run_ranks(
      n,
      [&](int r, detail::Session& s, ThreadEngine&) {
        if (r == 2) return;  // never arrives: the others' agreement times out
        std::vector<float> buf(8, 1.0f);
        try {
          s.allreduce(buf.data(), buf.data(), 8, DataType::float32, ReduceOp::sum, with(Algorithm::ring));
        } catch (const Error& e) {
          EXPECT_EQ(e.code(), ErrorCode::Timeout) << e.what();
          EXPECT_TRUE(s.broken());
          try {  // a different configuration: no agreement is attempted, the error comes back
            s.allreduce(buf.data(), buf.data(), 4, DataType::float32, ReduceOp::sum, with(Algorithm::rhd));
          } catch (const Error& again) {
            second[static_cast<std::size_t>(r)] = std::string(to_string(again.code())) + ": " + again.what();
          }
          throw;
        }
      },
      /*timeout_s=*/1);
  for (int r = 0; r < 2; ++r) {
    EXPECT_NE(errors[static_cast<std::size_t>(r)].find("timeout"), std::string::npos) << errors[static_cast<std::size_t>(r)];
    EXPECT_NE(second[static_cast<std::size_t>(r)].find("timeout: test: this communicator is unusable after an earlier failure"),
              std::string::npos)
        << second[static_cast<std::size_t>(r)];
  }
}

// Issue #22 class 6: a call in place that raises leaves every survivor's buffer as it was (the
// session keeps a copy, STRAGGLAR_KEEP_BUFFERS=1 by default), never partly reduced; out of place
// the input (sendbuf) is never written. Rank 3 makes the
// configuration's first call and then never comes: the others get into the data phase (the
// StragglAR ranks run their whole ReduceScatter, Ring and RHD their first rounds) and time out.
TEST(Session, ACallThatRaisesLeavesTheBufferAsItWas) {
  if (!detail::env().keep_buffers) GTEST_SKIP() << "STRAGGLAR_KEEP_BUFFERS=0: buffers are not kept";
  const int n = 4;
  const std::size_t count = 1000;
  for (Algorithm a : {Algorithm::stragglar, Algorithm::ring, Algorithm::rhd, Algorithm::allpairs}) {
    for (bool out_of_place : {false, true}) {
      std::vector<int> as_it_was(n, -1);
      const auto errors = run_ranks(
          n,
          [&](int r, detail::Session& s, ThreadEngine&) {
            std::vector<float> in(count), buf(count), before(count);
            for (std::size_t i = 0; i < count; ++i) in[i] = buf[i] = static_cast<float>(r + 1 + i % 7);
            const std::vector<float> input = in;
            s.allreduce(buf.data(), buf.data(), count, DataType::float32, ReduceOp::sum, with(a, 3));  // all ranks
            if (r == 3) return;
            for (std::size_t i = 0; i < count; ++i) before[i] = buf[i] = in[i] * 2 + static_cast<float>(i);
            try {
              s.allreduce(out_of_place ? in.data() : buf.data(), buf.data(), count, DataType::float32, ReduceOp::sum,
                          with(a, 3));
            } catch (const Error&) {
              // Out of place the caller's data is sendbuf, never written; recvbuf is an output.
              as_it_was[static_cast<std::size_t>(r)] = out_of_place ? in == input : buf == before;
              throw;
            }
          },
          /*timeout_s=*/0.5);
      for (int r = 0; r < 3; ++r) {
        const std::string where = std::string(to_string(a)) + (out_of_place ? " out of place" : " in place") +
                                  ", rank " + std::to_string(r);
        EXPECT_NE(errors[static_cast<std::size_t>(r)].find("timeout"), std::string::npos)
            << where << ": " << errors[static_cast<std::size_t>(r)];
        EXPECT_EQ(as_it_was[static_cast<std::size_t>(r)], 1) << where << ": the buffer was not put back";
      }
    }
  }
}

TEST(Session, TheNativeIsToldToKeepTheBufferOnlyWhereTheCallerSeesIt) {
  // An engine whose native stages the caller's buffer itself (native_stages: MPI's uncancellable
  // MPI_Iallreduce, torch's Gloo) is told per call whether to: in place and the caller reads its
  // buffer after an error; not out of place (sendbuf is never written), not where an error ends
  // the process (the MPI preload under MPI_ERRORS_ARE_FATAL, stragglar-bench), and not where the
  // session keeps the copy itself (session_restores).
  if (!detail::env().keep_buffers) GTEST_SKIP() << "STRAGGLAR_KEEP_BUFFERS=0: buffers are not kept";
  const int n = 2;
  const std::size_t count = 64;
  std::vector<std::vector<int>> told(n);
  std::vector<std::vector<float>> results(n);
  const auto errors = run_ranks(n, [&](int r, detail::Session& s, ThreadEngine& e) {
    e.buffers = detail::Engine::BuffersOnError::native_stages;
    std::vector<float> in(count, static_cast<float>(r + 1)), buf = in;
    const Options native = with(Algorithm::native);
    s.allreduce(buf.data(), buf.data(), count, DataType::float32, ReduceOp::sum, native);  // kept
    s.allreduce(in.data(), buf.data(), count, DataType::float32, ReduceOp::sum, native);   // out of place
    s.set_caller_sees_buffers_after_errors(false);
    s.allreduce(buf.data(), buf.data(), count, DataType::float32, ReduceOp::sum, native);  // nobody looks
    s.set_caller_sees_buffers_after_errors(true);
    e.buffers = detail::Engine::BuffersOnError::session_restores;
    s.allreduce(buf.data(), buf.data(), count, DataType::float32, ReduceOp::sum, native);  // the session's copy
    told[static_cast<std::size_t>(r)].assign(e.native_keep_buffer.begin(), e.native_keep_buffer.begin() + e.native_keep_told);
    results[static_cast<std::size_t>(r)] = buf;
  });
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(errors[static_cast<std::size_t>(r)], "") << "rank " << r;
    EXPECT_EQ(told[static_cast<std::size_t>(r)], (std::vector<int>{1, 0, 0, 0})) << "rank " << r;
    // 3 (out of place: 1 + 2), then doubled twice: 12 everywhere.
    EXPECT_EQ(results[static_cast<std::size_t>(r)], std::vector<float>(count, 12.0f)) << "rank " << r;
  }
}

TEST(Session, AnAutoConfigurationFirstCalledOutOfPlaceMakesItsInPlaceMemoryAtItsFirstInPlaceCall) {
  // Made at the first in-place call whatever auto runs in it, so that the choice of a later call
  // allocates nothing: mpi_hot_path_n4 once met auto's first in-place run of native in its counted
  // calls, where the engine's staging for the kept buffer was made (1 allocation on every rank).
  if (!detail::env().keep_buffers) GTEST_SKIP() << "STRAGGLAR_KEEP_BUFFERS=0: buffers are not kept";
  const int n = 2;
  const std::size_t count = 1 << 16;  // 256 KiB: auto runs its policy (never native alone at n = 2)
  std::vector<std::size_t> before(n), after(n), after_more(n);
  std::vector<long> allocations_after(n), allocations_end(n);
  const auto errors = run_ranks(n, [&](int r, detail::Session& s, ThreadEngine& e) {
    e.buffers = detail::Engine::BuffersOnError::native_stages;  // the engine stages a kept buffer (MPI)
    std::vector<float> in(count, 1.0f), buf(count, 1.0f);
    const Options automatic = with(Algorithm::automatic);
    for (int i = 0; i < 3; ++i) s.allreduce(in.data(), buf.data(), count, DataType::float32, ReduceOp::sum, automatic);
    before[static_cast<std::size_t>(r)] = e.native_keep_reserved;
    s.allreduce(buf.data(), buf.data(), count, DataType::float32, ReduceOp::sum, automatic);  // in place
    after[static_cast<std::size_t>(r)] = e.native_keep_reserved;
    allocations_after[static_cast<std::size_t>(r)] = e.device_allocations();
    for (int i = 0; i < 10; ++i) s.allreduce(buf.data(), buf.data(), count, DataType::float32, ReduceOp::sum, automatic);
    allocations_end[static_cast<std::size_t>(r)] = e.device_allocations();
  });
  for (int r = 0; r < n; ++r) {
    const auto i = static_cast<std::size_t>(r);
    EXPECT_EQ(errors[i], "") << "rank " << r;
    EXPECT_EQ(before[i], 0u) << "rank " << r << ": out of place, no kept buffer to stage";
    EXPECT_GE(after[i], count * sizeof(float)) << "rank " << r << ": the engine's staging for native, at the first in-place call";
    EXPECT_EQ(allocations_end[i], allocations_after[i]) << "rank " << r << ": the session's copy made at that call too";
  }
}

// ---- auto with a lagged timer (the NCCL engine's lag) ------------------------------------------------
TEST(Session, AutoWithALaggedTimerKeepsEachConfigurationsTimesApart) {
  // The first GPU run (H100, 2026-11-27): a timer shared by every configuration of an engine,
  // with the NCCL engine's lag of 2, overflowed after four switches of configuration ("more timed
  // calls than the lag allows") and handed one configuration's times to the next. Here the same
  // pattern, configurations interleaved call by call, on CPUs with the lag of 2.
  const int n = 4;
  const std::size_t counts[] = {1 << 12, (1 << 12) + 3, 1 << 14};
  const DataType dtypes[] = {DataType::float32, DataType::int32};
  const auto errors = run_ranks(n, [&](int r, detail::Session& s, ThreadEngine& e) {
    e.timer_lag = 2;
    const Options automatic = with(Algorithm::automatic);
    for (int round = 0; round < 12; ++round)
      for (DataType t : dtypes)
        for (std::size_t count : counts) {
          // Small integers: every sum is exact in float32 too.
          std::vector<double> want(count);
          for (std::size_t i = 0; i < count; ++i)
            want[i] = n * (n + 1) / 2.0 + n * static_cast<double>((i + round) % 5);
          if (t == DataType::float32) {
            std::vector<float> buf(count);
            for (std::size_t i = 0; i < count; ++i) buf[i] = static_cast<float>(r + 1 + (i + round) % 5);
            s.allreduce(buf.data(), buf.data(), count, t, ReduceOp::sum, automatic);
            for (std::size_t i = 0; i < count; ++i)
              if (buf[i] != want[i]) FAIL() << "float32 count " << count << " round " << round << " [" << i << "]";
          } else {
            std::vector<std::int32_t> buf(count);
            for (std::size_t i = 0; i < count; ++i) buf[i] = static_cast<std::int32_t>(r + 1 + (i + round) % 5);
            s.allreduce(buf.data(), buf.data(), count, t, ReduceOp::sum, automatic);
            for (std::size_t i = 0; i < count; ++i)
              if (buf[i] != want[i]) FAIL() << "int32 count " << count << " round " << round << " [" << i << "]";
          }
        }
    const StragglerReport report = s.auto_report();
    EXPECT_TRUE(report.active);
    EXPECT_GE(report.calls, 12);
    EXPECT_GE(report.decisions, 1) << "exchanges delivered with the lag";
  });
  for (int r = 0; r < n; ++r) EXPECT_EQ(errors[static_cast<std::size_t>(r)], "") << "rank " << r;
}

TEST(Session, AutoWithALaggedTimerKeepsEachConfigurationsLateRankApart) {
  // Two configurations called in turn, rank 3 30 ms late only to the first: with the lag of 2, a
  // timer shared by both would hand the first's times (rank 3's gap) and exchanges to the second.
  // The second may still name a rank that the scheduler made late by chance (4 threads on shared
  // cores), but never rank 3 by anything near 30 ms.
  const int n = 4, late = 3;
  const std::size_t count_a = 1 << 14, count_b = (1 << 14) + 3;
  std::vector<int> late_a(n), late_b(n);
  std::vector<double> delay_b(n);
  const auto errors = run_ranks(n, [&](int r, detail::Session& s, ThreadEngine& e) {
    e.timer_lag = 2;
    const Options automatic = with(Algorithm::automatic);
    std::vector<float> a(count_a, 1.0f), b(count_b, 1.0f);
    for (int round = 0; round < 16; ++round) {
      if (r == late) std::this_thread::sleep_for(std::chrono::milliseconds(30));
      s.allreduce(a.data(), a.data(), count_a, DataType::float32, ReduceOp::max, automatic);
      late_a[static_cast<std::size_t>(r)] = s.auto_report().late_rank;
      s.allreduce(b.data(), b.data(), count_b, DataType::float32, ReduceOp::max, automatic);
      late_b[static_cast<std::size_t>(r)] = s.auto_report().late_rank;
      delay_b[static_cast<std::size_t>(r)] = s.auto_report().delay_s;
    }
  });
  for (int r = 0; r < n; ++r) {
    const auto i = static_cast<std::size_t>(r);
    EXPECT_EQ(errors[i], "") << "rank " << r;
    EXPECT_EQ(late_a[i], late) << "rank " << r << ": the configuration rank 3 is late to";
    EXPECT_FALSE(late_b[i] == late && delay_b[i] >= 0.010)
        << "rank " << r << ": the configuration nobody is late to names rank 3, " << delay_b[i] << " s late";
  }
}

TEST(Session, AnEngineThatStartsWithNativeGetsNativeUntilMeasurementsSayOtherwise) {
  // Engine::auto_starts_with_native (NCCL's) reaches the policy: the first calls run native,
  // where a host engine's run the model's best after the first.
  const int n = 4;
  const std::size_t count = 1 << 16;
  for (bool native_first : {true, false}) {
    std::vector<std::vector<Algorithm>> ran(n);
    const auto errors = run_ranks(n, [&](int r, detail::Session& s, ThreadEngine& e) {
      e.starts_with_native = native_first;
      std::vector<float> buf(count, 1.0f);
      for (int i = 0; i < 3; ++i) {
        s.allreduce(buf.data(), buf.data(), count, DataType::float32, ReduceOp::max, with(Algorithm::automatic));
        ran[static_cast<std::size_t>(r)].push_back(s.last_choice().algorithm);
      }
    });
    for (int r = 0; r < n; ++r) {
      const auto i = static_cast<std::size_t>(r);
      EXPECT_EQ(errors[i], "") << "rank " << r;
      ASSERT_EQ(ran[i].size(), 3u);
      EXPECT_EQ(ran[i][0], Algorithm::native) << "rank " << r << ": the first call measures native either way";
      if (native_first)
        EXPECT_EQ(ran[i][1], Algorithm::native) << "rank " << r;
      else
        EXPECT_NE(ran[i][1], Algorithm::native) << "rank " << r << ": the model's best";
    }
  }
}

TEST(Session, AutosFirstCallWarmsNativeUpOnMemoryOfItsOwn) {
  // The first call measures native; its first runs pay first-use costs (Open MPI's temporaries),
  // so two run before it, untimed, into memory the caller does not read (in place: the kept
  // copy, or memory of its own without one): the caller's buffer is reduced once.
  const int n = 4;
  const std::size_t count = 1 << 16;
  struct Seen {
    int native_calls = 0;
    std::array<const void*, 16> wrote{};
    const void* buffer = nullptr;
    std::vector<float> result;
  };
  std::vector<Seen> seen(n);
  const auto errors = run_ranks(n, [&](int r, detail::Session& s, ThreadEngine& e) {
    std::vector<float> buf(count, static_cast<float>(r + 1));
    s.allreduce(buf.data(), buf.data(), count, DataType::float32, ReduceOp::sum, with(Algorithm::automatic));
    Seen& mine = seen[static_cast<std::size_t>(r)];
    mine.native_calls = e.native_calls;
    mine.wrote = e.native_recvbufs;
    mine.buffer = buf.data();
    mine.result = buf;
  });
  for (int r = 0; r < n; ++r) {
    const Seen& mine = seen[static_cast<std::size_t>(r)];
    EXPECT_EQ(errors[static_cast<std::size_t>(r)], "") << "rank " << r;
    ASSERT_EQ(mine.native_calls, 3) << "rank " << r << ": two warm-ups and the measured call";
    EXPECT_NE(mine.wrote[0], mine.buffer) << "rank " << r << ": a warm-up wrote the caller's buffer";
    EXPECT_NE(mine.wrote[1], mine.buffer) << "rank " << r << ": a warm-up wrote the caller's buffer";
    EXPECT_EQ(mine.wrote[2], mine.buffer) << "rank " << r;
    EXPECT_EQ(mine.result, std::vector<float>(count, 10.0f)) << "rank " << r << ": reduced once (1+2+3+4)";
  }
}

// ---- scratch grows geometrically ---------------------------------------------------------------------
TEST(Session, ScratchGrowsGeometricallyWithAscendingCounts) {
  const int n = 2;
  ThreadJob job(n);
  std::vector<int> allocations(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      ThreadEngine engine(job, r);
      detail::Session s(engine, "test");
      std::vector<float> buf(3000, 1.0f);
      for (std::size_t count = 1; count <= buf.size(); ++count)
        s.allreduce(buf.data(), buf.data(), count, DataType::float32, ReduceOp::max, with(Algorithm::stragglar));
      allocations[static_cast<std::size_t>(r)] = static_cast<int>(engine.device_allocations());
    });
  for (auto& t : threads) t.join();
  for (int a : allocations) {
    EXPECT_GT(a, 0);
    EXPECT_LE(a, 30) << "scratch (or the kept copy) reallocated at too many of the 3000 ascending counts";
  }
}

// ---- NaN, ±Inf and -0: identical bits on every rank, one documented rule ---------------------------
// The rule (docs/runtime.md): a NaN result is the canonical quiet NaN; min/max are IEEE 754-2019
// minimum/maximum (NaN propagates, -0 < +0).
double rule(ReduceOp op, double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<double>::quiet_NaN();
  switch (op) {
    case ReduceOp::sum: return a + b;
    case ReduceOp::prod: return a * b;
    case ReduceOp::min: return a == b ? (std::signbit(a) ? a : b) : std::min(a, b);
    case ReduceOp::max: return a == b ? (std::signbit(a) ? b : a) : std::max(a, b);
    default: return 0;
  }
}

TEST(Session, SpecialValuesGiveIdenticalBitsAndFollowOneRule) {
  const double inf = std::numeric_limits<double>::infinity();
  const std::vector<double> specials = {std::numeric_limits<double>::quiet_NaN(), -std::numeric_limits<double>::quiet_NaN(),
                                        inf, -inf, -0.0, 0.0};
  const std::vector<double> regular = {-1.0, 0.0, -0.0, 2.0};
  for (int n : {2, 4, 5}) {
    for (Algorithm a : runnable_algorithms()) {
      for (DataType t : {DataType::float32, DataType::float64, DataType::float16, DataType::bfloat16}) {
        for (ReduceOp op : {ReduceOp::sum, ReduceOp::prod, ReduceOp::min, ReduceOp::max}) {
          // Element j: rank (j / |specials|) % n holds specials[j % |specials|]; the others a regular value.
          const std::size_t count = specials.size() * static_cast<std::size_t>(n) * regular.size();
          auto value = [&](int r, std::size_t j) {
            const std::size_t k = j % specials.size();
            const int special_rank = static_cast<int>((j / specials.size()) % static_cast<std::size_t>(n));
            return r == special_rank ? specials[k] : regular[(j / (specials.size() * n) + static_cast<std::size_t>(r)) % regular.size()];
          };
          std::vector<std::vector<unsigned char>> out(static_cast<std::size_t>(n));
          const auto errors = run_ranks(n, [&](int r, detail::Session& s, ThreadEngine&) {
            std::vector<unsigned char> buf(count * size_of(t));
            for (std::size_t j = 0; j < count; ++j) store_element(buf.data(), j, t, value(r, j));
            s.allreduce(buf.data(), buf.data(), count, t, op, with(a, static_cast<int>(count % n)));
            out[static_cast<std::size_t>(r)] = buf;
          });
          for (const std::string& e : errors) ASSERT_EQ(e, "");
          const std::string what = std::string(to_string(a)) + " n=" + std::to_string(n) + " " + to_string(t) + " " +
                                   to_string(op);
          for (int r = 1; r < n; ++r) ASSERT_EQ(out[0], out[static_cast<std::size_t>(r)]) << what << ": rank " << r;
          for (std::size_t j = 0; j < count; ++j) {
            double want = 0;
            for (int r = 0; r < n; ++r) {
              std::uint64_t tmp = 0;
              store_element(&tmp, 0, t, value(r, j));
              want = r == 0 ? load_element(&tmp, 0, t) : rule(op, want, load_element(&tmp, 0, t));
            }
            std::uint64_t want_bits = 0, got_bits = 0;
            store_element(&want_bits, 0, t, want);
            std::memcpy(&got_bits, out[0].data() + j * size_of(t), size_of(t));
            if (std::isnan(want)) store_element(&want_bits, 0, t, std::numeric_limits<double>::quiet_NaN());
            ASSERT_EQ(got_bits, want_bits) << what << " element " << j;
          }
        }
      }
    }
  }
}

// ---- algorithm = auto: the late rank is found, every rank runs the same choice, results exact ----
TEST(Session, AutoNamesTheLateRankAndEveryRankRunsTheSameChoice) {
  const int n = 4, late = 2, calls = 40;
  const std::size_t count = 20000;
  // As text: a Choice's late set points into its session's tables, gone after run_ranks.
  std::vector<std::vector<std::string>> choices(n);
  std::vector<StragglerReport> reports(n);
  const auto errors = run_ranks(n, [&](int r, detail::Session& s, ThreadEngine&) {
    std::vector<float> buf(count);
    Options o;
    o.algorithm = Algorithm::automatic;
    for (int call = 0; call < calls; ++call) {
      for (std::size_t i = 0; i < count; ++i) buf[i] = static_cast<float>((r + 1) * static_cast<int>(i % 5));
      if (r == late) std::this_thread::sleep_for(std::chrono::milliseconds(20));
      s.allreduce(buf.data(), buf.data(), count, DataType::float32, ReduceOp::sum, o);
      choices[static_cast<std::size_t>(r)].push_back(to_string(s.last_choice()));
      for (std::size_t i = 0; i < count; ++i)
        ASSERT_EQ(buf[i], static_cast<float>(n * (n + 1) / 2 * static_cast<int>(i % 5))) << "call " << call;
    }
    reports[static_cast<std::size_t>(r)] = s.auto_report();
  });
  for (const std::string& e : errors) ASSERT_EQ(e, "");
  for (int r = 1; r < n; ++r) EXPECT_EQ(choices[0], choices[static_cast<std::size_t>(r)]) << "rank " << r;
  // With more rank threads than CPUs, a rank descheduled past the grace (or the one that finished
  // the previous call last) can be late beside rank 2 in most calls: the report then holds both in
  // late_set, and late_rank names the one late most often, then the one that came last most often.
  for (const StragglerReport& rep : reports) {
    EXPECT_TRUE(rep.active);
    EXPECT_EQ(rep.calls, calls);
    EXPECT_EQ(rep.late_rank, late);
    ASSERT_EQ(rep.scores.size(), static_cast<std::size_t>(n));
    for (int r = 0; r < n; ++r) {
      EXPECT_GE(rep.scores[static_cast<std::size_t>(r)], 0.0);
      EXPECT_LE(rep.scores[static_cast<std::size_t>(r)], 1.0);
      if (r != late) {
        EXPECT_GE(rep.scores[late], rep.scores[static_cast<std::size_t>(r)]);
      }
    }
  }
  // Which candidate is fastest on threads is the host's business; what is asserted is that
  // StragglAR was tried with the right rank and the decided choice never names another.
  EXPECT_NE(std::find(choices[0].begin(), choices[0].end(), to_string(Choice{Algorithm::stragglar, late})), choices[0].end());
  if (reports[0].algorithm == Algorithm::stragglar) {
    EXPECT_EQ(reports[0].straggler, late);
  }
}

// ---- algorithm = auto: the small-message gate takes the engine's cost model -----------------------
// 1 MiB on 8 ranks: under the host model (α = 20 µs, 1.7 GB/s; crossover ≈ 217 KiB) StragglAR
// can win, so auto runs its policy; under the GPU model (CostModel{}: α = 3 µs, 450 GiB/s;
// crossover ≈ 9 MiB) no schedule can, so auto goes straight to native. Every rank decides alike.
TEST(Session, AutoSmallMessageGateFollowsTheEnginesCostModelOnEveryRank) {
  const int n = 8;
  const std::size_t count = (std::size_t{1} << 20) / sizeof(float);
  Options o;
  o.algorithm = Algorithm::automatic;
  Options cpu = o, gpu = o;
  cpu.cost = detail::host_shared_memory_cost_model();
  gpu.cost = CostModel{};
  EXPECT_FALSE(detail::auto_runs_native(cpu, n, count * sizeof(float)));
  EXPECT_TRUE(detail::auto_runs_native(gpu, n, count * sizeof(float)));

  // Through the session: with no Options::cost the ThreadEngine (a host engine) supplies auto's
  // model; Options::cost = the GPU model sends the same size to native. A session each (the
  // cost model is agreed with a configuration, not part of its key).
  struct Seen {
    CostModel engine_model;
    bool policy = false;  // an auto policy was made (StragglerReport::active)
    Algorithm ran = Algorithm::automatic;
    int native_calls = 0;
  };
  for (const Options* opts : {&o, &gpu}) {
    std::vector<Seen> seen(n);
    const auto errors = run_ranks(n, [&](int r, detail::Session& s, ThreadEngine& e) {
      Seen& mine = seen[static_cast<std::size_t>(r)];
      mine.engine_model = e.auto_cost_model();
      std::vector<float> buf(count, static_cast<float>(r + 1));
      s.allreduce(buf.data(), buf.data(), count, DataType::float32, ReduceOp::sum, *opts);
      for (std::size_t i = 0; i < count; i += 4099) ASSERT_EQ(buf[i], static_cast<float>(n * (n + 1) / 2));
      mine.policy = s.auto_report().active;
      mine.ran = s.last_choice().algorithm;
      mine.native_calls = e.native_calls;
    });
    for (const std::string& e : errors) ASSERT_EQ(e, "");
    const bool user_model = detail::env().cost_from_env;  // STRAGGLAR_* set: the engine defers to it
    for (int r = 0; r < n; ++r) {
      const Seen& mine = seen[static_cast<std::size_t>(r)];
      const CostModel want = user_model ? detail::env().cost : detail::host_shared_memory_cost_model();
      EXPECT_EQ(mine.engine_model.alpha_s, want.alpha_s) << "rank " << r;
      EXPECT_EQ(mine.engine_model.beta_s_per_byte, want.beta_s_per_byte) << "rank " << r;
      EXPECT_EQ(mine.engine_model.gamma_s_per_byte, want.gamma_s_per_byte) << "rank " << r;
      EXPECT_EQ(mine.policy, seen[0].policy) << "rank " << r;
      EXPECT_EQ(mine.ran, seen[0].ran) << "rank " << r;
      if (opts == &gpu) {
        EXPECT_FALSE(mine.policy) << "rank " << r << ": the GPU model makes no policy at 1 MiB, n = 8";
        EXPECT_EQ(mine.ran, Algorithm::native) << "rank " << r;
        EXPECT_EQ(mine.native_calls, 1) << "rank " << r;
      } else if (!user_model) {
        EXPECT_TRUE(mine.policy) << "rank " << r << ": the host model runs auto's policy at 1 MiB, n = 8";
      }
    }
  }
}

// ---- hosts: exchanged at the first call, given to auto's cost model --------------------
// Three in-place auto calls of `count` floats on rank r of n (rank r contributes r + 1), each
// result checked: what the host and clock tests below run.
void three_checked_auto_calls(int r, int n, detail::Session& s, std::size_t count) {
  std::vector<float> buf(count);
  Options o;
  o.algorithm = Algorithm::automatic;
  for (int call = 0; call < 3; ++call) {
    std::fill(buf.begin(), buf.end(), static_cast<float>(r + 1));
    s.allreduce(buf.data(), buf.data(), count, DataType::float32, ReduceOp::sum, o);
    for (std::size_t i = 0; i < count; i += 997) ASSERT_EQ(buf[i], static_cast<float>(n * (n + 1) / 2));
  }
}


// Threads given hosts of their own (ThreadEngine::host): host-major hosts of 4 make every rank
// see 4 ranks per host (auto's hierarchical candidate and cost model take it; the report shows
// it); interleaved hosts, or one host, give 0. Results stay exact either way.
TEST(Session, HostsOfTheCommunicatorAreFoundAtItsFirstCall) {
  const int n = 8;
  const std::size_t count = 100003;
  struct Layout {
    const char* name;
    std::function<int(int)> host;  // -1: the process's own host (one host)
    int want;
  };
  const Layout layouts[] = {{"host-major 2 x 4", [](int r) { return r / 4; }, 4},
                            {"round robin", [](int r) { return r % 2; }, 0},
                            {"one host", [](int) { return -1; }, 0}};
  for (const Layout& l : layouts) {
    std::vector<int> seen(n, -7), reported(n, -7);
    const auto errors = run_ranks(n, [&](int r, detail::Session& s, ThreadEngine& e) {
      e.host = l.host(r);
      three_checked_auto_calls(r, n, s, count);
      seen[static_cast<std::size_t>(r)] = s.ranks_per_host();
      reported[static_cast<std::size_t>(r)] = s.auto_report().ranks_per_host;
    });
    for (const std::string& e : errors) ASSERT_EQ(e, "") << l.name;
    for (int r = 0; r < n; ++r) {
      EXPECT_EQ(seen[static_cast<std::size_t>(r)], l.want) << l.name << " rank " << r;
      EXPECT_EQ(reported[static_cast<std::size_t>(r)], l.want) << l.name << " rank " << r;
    }
  }
}

// auto measures a call's exposed time exactly when every rank reads one clock (docs/auto.md
// "Measuring a call on one clock"): threads of one process do; threads given clocks of their own,
// or one rank without a known clock, do not (the in-call estimate). Exact results either way.
TEST(Session, AutoMeasuresOnOneClockOnlyWhenEveryRankSharesIt) {
  if (detail::this_clock_id() < 0) GTEST_SKIP() << "no /proc/sys/kernel/random/boot_id here";
  const int n = 4;
  const std::size_t count = 100003;
  struct Layout {
    const char* name;
    std::function<std::int64_t(int)> clock;
    bool want;
  };
  const Layout layouts[] = {{"one process", [](int) { return ThreadEngine::kProcessClock; }, true},
                            {"a clock per rank", [](int r) { return std::int64_t{100 + r}; }, false},
                            {"rank 2 without a clock", [](int r) { return r == 2 ? -1 : ThreadEngine::kProcessClock; }, false}};
  for (const Layout& l : layouts) {
    std::vector<int> exact(n, -7);
    const auto errors = run_ranks(n, [&](int r, detail::Session& s, ThreadEngine& e) {
      e.clock = l.clock(r);
      three_checked_auto_calls(r, n, s, count);
      exact[static_cast<std::size_t>(r)] = s.auto_report().exposed_time_exact ? 1 : 0;
    });
    for (const std::string& e : errors) ASSERT_EQ(e, "") << l.name;
    for (int r = 0; r < n; ++r) EXPECT_EQ(exact[static_cast<std::size_t>(r)], l.want ? 1 : 0) << l.name << " rank " << r;
  }
}

// ---- the agreement over a bare transport (engines without a collective: UCX) -----------------------
TEST(TransportAgreement, EveryRankGetsTheElementwiseMaxForAnyN) {
  for (int n = 1; n <= 9; ++n) {
    testing::ThreadHub hub(n);
    std::vector<std::vector<std::int64_t>> got(static_cast<std::size_t>(n));
    std::vector<std::thread> threads;
    for (int r = 0; r < n; ++r)
      threads.emplace_back([&, r] {
        testing::ThreadTransport t(hub, r);
        std::vector<std::int64_t> v = {r, -r, (r * 7919) % 13, r == n / 2 ? 1000 : -1000}, scratch;
        detail::transport_max(t, v, scratch, 0);
        got[static_cast<std::size_t>(r)] = v;
      });
    for (auto& t : threads) t.join();
    int argmax = 0;
    for (int r = 0; r < n; ++r)
      if ((r * 7919) % 13 > (argmax * 7919) % 13) argmax = r;
    const std::vector<std::int64_t> want = {n - 1, 0, (argmax * 7919) % 13, 1000};
    for (int r = 0; r < n; ++r) EXPECT_EQ(got[static_cast<std::size_t>(r)], want) << "n=" << n << " rank " << r;
  }
}

// ---- auto's small-message native over a bare transport (one round; recursive doubling) ---------------
// Every n up to 9 and 12, 16 (one round: every rank reduces all n contributions in rank order),
// 17, 20, 32 (recursive doubling, with the fold for n not a power of two), every dtype and op:
// exact against a float64 reference on small integers, and identical bits on every rank for
// inputs whose sum rounds (the order of the reduction must be the same everywhere).
TEST(TransportAllreduce, ExactAndIdenticalOnEveryRankForAnyN) {
  const std::size_t count = 37;
  for (int n : {1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 16, 17, 20, 32})
    for (DataType t : {DataType::float32, DataType::float64, DataType::float16, DataType::bfloat16, DataType::int32,
                       DataType::int64})
      for (ReduceOp op : {ReduceOp::sum, ReduceOp::prod, ReduceOp::min, ReduceOp::max})
        for (bool rounding : {false, true}) {
          if (rounding && (op != ReduceOp::sum || t == DataType::int32 || t == DataType::int64)) continue;
          const std::size_t es = size_of(t);
          auto input = [&](int r, std::size_t i) -> double {
            if (rounding) return 1.0 / (3.0 + r + 7.0 * static_cast<double>(i));  // sums that round
            if (op == ReduceOp::prod) return ((r + static_cast<int>(i)) % 3 == 0) ? 2.0 : 1.0;
            return static_cast<double>((r * 5 + static_cast<int>(i) * 3) % 11) - 5.0;
          };
          testing::ThreadHub hub(n);
          std::vector<std::vector<std::byte>> got(static_cast<std::size_t>(n));
          std::vector<std::string> errors(static_cast<std::size_t>(n));
          std::vector<std::thread> threads;
          for (int r = 0; r < n; ++r)
            threads.emplace_back([&, r] {
              testing::ThreadTransport tr(hub, r);
              CpuDevice device;
              std::vector<std::byte> staging(detail::transport_allreduce_staging_bytes(n, count * es));
              for (std::size_t i = 0; i < count; ++i) store_element(staging.data(), i, t, input(r, i));
              try {
                void* out = detail::transport_allreduce(tr, device, staging.data(), count, t, op, 5);
                const auto* b = static_cast<const std::byte*>(out);
                got[static_cast<std::size_t>(r)].assign(b, b + count * es);
              } catch (const Error& e) {
                errors[static_cast<std::size_t>(r)] = e.what();
              }
            });
          for (auto& th : threads) th.join();
          const std::string what = "n=" + std::to_string(n) + " " + to_string(t) + " " + to_string(op) +
                                   (rounding ? " (rounding sums)" : "");
          for (int r = 0; r < n; ++r) {
            ASSERT_EQ(errors[static_cast<std::size_t>(r)], "") << what << " rank " << r;
            EXPECT_EQ(got[static_cast<std::size_t>(r)], got[0]) << what << ": rank " << r << " differs from rank 0";
          }
          if (rounding) continue;
          for (std::size_t i = 0; i < count; ++i) {
            double want = input(0, i);
            for (int r = 1; r < n; ++r) {
              const double x = input(r, i);
              want = op == ReduceOp::sum ? want + x : op == ReduceOp::prod ? want * x
                     : op == ReduceOp::min ? std::min(want, x) : std::max(want, x);
            }
            EXPECT_EQ(load_element(got[0].data(), i, t), want) << what << " element " << i;
          }
        }
}

// ---- the hot path makes no heap allocation ----------------------------------------------------------
TEST(Session, AKnownConfigurationMakesNoHeapAllocation) {
  std::vector<Algorithm> algorithms = runnable_algorithms();
  algorithms.push_back(Algorithm::automatic);  // its exchanges and decisions happen in the counted calls
  for (int n : {1, 4}) {
    for (Algorithm a : algorithms) {
      std::vector<long> counted(static_cast<std::size_t>(n));
      const auto errors = run_ranks(n, [&](int r, detail::Session& s, ThreadEngine& engine) {
        std::vector<float> in(4099, 1.0f), out(4099);
        // auto's policy may learn from timings (a new straggler, a new late set, another
        // algorithm), and timings differ run to run, under sanitizers most: a call that learns
        // or runs a choice for the first time may allocate (its table entry, its plan). Its
        // steady state must not: of six windows (the same on every rank: every rank makes the
        // same calls), at least one allocates nothing. Every other algorithm: not one allocation.
        for (int i = 0; i < 3; ++i)  // first calls: agreement, plan, scratch, message lists
          for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg})
            s.allreduce(in.data(), out.data(), in.size(), DataType::float32, op, with(a));
        const int windows = a == Algorithm::automatic ? 6 : 1;
        long fewest = -1;
        for (int window = 0; window < windows; ++window) {
          const long before = t_allocations, device_before = engine.device_allocations();
          t_counting = true;
          for (int i = 0; i < 20; ++i)
            for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg})
              s.allreduce(in.data(), out.data(), in.size(), DataType::float32, op, with(a));
          t_counting = false;
          // operator new, and the device's memory (scratch, the kept copy: CpuDevice allocates
          // with aligned_alloc, which operator new does not see).
          const long made = t_allocations - before + engine.device_allocations() - device_before;
          fewest = fewest < 0 ? made : std::min(fewest, made);
        }
        counted[static_cast<std::size_t>(r)] = fewest;
      });
      for (const std::string& e : errors) ASSERT_EQ(e, "");
      long total = 0;
      for (long c : counted) total += c;
      // Each rank counts its own thread's allocations; the sum must be zero.
      EXPECT_EQ(total, 0) << to_string(a) << " n=" << n << ": heap allocations on the hot path";
    }
  }
}

}  // namespace
}  // namespace stragglar

namespace stragglar {
namespace {

// ---- arrival tickets (docs/arrival-tickets.md) ---------------------------------------------------

detail::RuntimeConfig tickets_config(detail::ArrivalTicketsMode mode) {
  detail::RuntimeConfig c = detail::env();
  c.arrival_tickets = mode;
  return c;
}

TEST(SessionArrivalTickets, ARandomLateRankPerCallIsExactAndTheSameChoiceOnEveryRank) {
  const detail::RuntimeConfig config = tickets_config(detail::ArrivalTicketsMode::on);
  for (int n : {4, 5}) {
    const int calls = 30;
    const std::size_t count = 50000;  // odd chunk splits at n = 5
    std::vector<std::vector<std::string>> choices(static_cast<std::size_t>(n));  // text: outlives the sessions
    std::vector<StragglerReport> reports(static_cast<std::size_t>(n));
    const auto errors = run_ranks(n, [&](int r, detail::Session& s, ThreadEngine&) {
      std::mt19937 shared(7);  // the same draws on every rank: who is late in each call
      std::vector<float> buf(count);
      Options o;
      o.algorithm = Algorithm::automatic;
      for (int call = 0; call < calls; ++call) {
        const int late = static_cast<int>(shared() % static_cast<unsigned>(n));
        for (std::size_t i = 0; i < count; ++i) buf[i] = static_cast<float>((r + 1) * static_cast<int>(i % 7) + call);
        if (r == late) std::this_thread::sleep_for(std::chrono::milliseconds(30));
        s.allreduce(buf.data(), buf.data(), count, DataType::float32, ReduceOp::sum, o);
        choices[static_cast<std::size_t>(r)].push_back(to_string(s.last_choice()));
        for (std::size_t i = 0; i < count; ++i)  // small integers: exact in float32
          ASSERT_EQ(buf[i], static_cast<float>(n * (n + 1) / 2 * static_cast<int>(i % 7) + n * call))
              << "n " << n << " call " << call << " element " << i;
      }
      reports[static_cast<std::size_t>(r)] = s.auto_report();
    }, 20, &config);
    for (const std::string& e : errors) ASSERT_EQ(e, "") << "n " << n;
    for (int r = 1; r < n; ++r) EXPECT_EQ(choices[0], choices[static_cast<std::size_t>(r)]) << "n " << n << " rank " << r;
    for (const StragglerReport& rep : reports) {
      EXPECT_EQ(rep.calls, calls);
      EXPECT_EQ(rep.arrival_calls, calls - 1);  // every call after the configuration's first
      EXPECT_EQ(rep.arrival_late_calls, reports[0].arrival_late_calls);
    }
    std::printf("n %d: %lld of %d calls went on without their late rank\n", n,
                static_cast<long long>(reports[0].arrival_late_calls), calls);
  }
}

TEST(SessionArrivalTickets, TheDecisionRaceOverAThousandCallsWithRandomArrivals) {
  // Through the whole runtime, with the default (tickets where the ranks share a host): each
  // call, every rank sleeps its own random 0-3 ms (one seed, so every rank knows every delay;
  // around the graces, so calls land before, at and after them), sometimes two ranks much
  // later. Every call exact (each rank's data reduced exactly once), the same choice on every
  // rank, every call after the first ticketed.
  const detail::RuntimeConfig config = detail::env();
  for (int n : {4, 5}) {
    const int calls = 1000;
    const std::size_t count = 50000;  // above auto's small-message gate; odd chunk splits at n = 5
    std::vector<std::vector<std::string>> choices(static_cast<std::size_t>(n));
    std::vector<StragglerReport> reports(static_cast<std::size_t>(n));
    const auto errors = run_ranks(n, [&](int r, detail::Session& s, ThreadEngine&) {
      std::mt19937 shared(38);
      std::vector<float> buf(count);
      std::vector<int> delay_us(static_cast<std::size_t>(n));
      for (int call = 0; call < calls; ++call) {
        for (int& d : delay_us) d = static_cast<int>(shared() % 3000);
        if (shared() % 10 == 0) delay_us[shared() % static_cast<unsigned>(n)] += 8000;
        if (shared() % 20 == 0) delay_us[shared() % static_cast<unsigned>(n)] += 8000;
        for (std::size_t i = 0; i < count; ++i) buf[i] = static_cast<float>((r + 1) * static_cast<int>(i % 7) + call % 64);
        std::this_thread::sleep_for(std::chrono::microseconds(delay_us[static_cast<std::size_t>(r)]));
        s.allreduce(buf.data(), buf.data(), count, DataType::float32, ReduceOp::sum, with(Algorithm::automatic));
        choices[static_cast<std::size_t>(r)].push_back(to_string(s.last_choice()));
        for (std::size_t i = 0; i < count; ++i)  // small integers: exact in float32
          ASSERT_EQ(buf[i], static_cast<float>(n * (n + 1) / 2 * static_cast<int>(i % 7) + n * (call % 64)))
              << "n " << n << " call " << call << " element " << i;
      }
      reports[static_cast<std::size_t>(r)] = s.auto_report();
    }, 60, &config);
    for (const std::string& e : errors) ASSERT_EQ(e, "") << "n " << n;
    for (int r = 1; r < n; ++r) EXPECT_EQ(choices[0], choices[static_cast<std::size_t>(r)]) << "n " << n << " rank " << r;
    for (const StragglerReport& rep : reports) {
      EXPECT_EQ(rep.calls, calls);
      EXPECT_EQ(rep.arrival_calls, calls - 1);
      EXPECT_EQ(rep.arrival_late_calls, reports[0].arrival_late_calls);
      EXPECT_EQ(rep.late_rank, reports[0].late_rank);
    }
    std::printf("n %d: %lld of %d calls went on without their late ranks\n", n,
                static_cast<long long>(reports[0].arrival_late_calls), calls);
  }
}

TEST(SessionArrivalTickets, ACommunicatorAcrossHostsRunsWithoutThemOrSaysWhyWhenAskedFor) {
  Options o;
  o.algorithm = Algorithm::automatic;
  const std::size_t count = 50000;
  // auto: ranks on two hosts take no tickets, and every call is exact.
  const detail::RuntimeConfig automatic = tickets_config(detail::ArrivalTicketsMode::automatic);
  const detail::RuntimeConfig on = tickets_config(detail::ArrivalTicketsMode::on);
  const auto fallback = run_ranks(4,
                                       [&](int r, detail::Session& s, ThreadEngine&) {
                                         std::vector<float> buf(count, static_cast<float>(r));
                                         for (int call = 0; call < 3; ++call) {
                                           std::fill(buf.begin(), buf.end(), static_cast<float>(r));
                                           s.allreduce(buf.data(), buf.data(), count, DataType::float32, ReduceOp::sum, o);
                                           ASSERT_EQ(buf[count - 1], 6.0f);
                                         }
                                         EXPECT_EQ(s.auto_report().arrival_calls, 0);
                                       },
                                       20, &automatic, /*hosts=*/2);
  for (const std::string& e : fallback) EXPECT_EQ(e, "");
  // on: every rank fails with the reason, and the buffer is left as it was.
  const auto refused = run_ranks(4,
                                      [&](int r, detail::Session& s, ThreadEngine&) {
                                        std::vector<float> buf(count, static_cast<float>(r));
                                        try {
                                          s.allreduce(buf.data(), buf.data(), count, DataType::float32, ReduceOp::sum, o);
                                        } catch (...) {
                                          EXPECT_EQ(buf[0], static_cast<float>(r));
                                          throw;
                                        }
                                      },
                                      20, &on, /*hosts=*/2);
  for (const std::string& e : refused) EXPECT_NE(e.find("STRAGGLAR_ARRIVAL_TICKETS=on"), std::string::npos) << e;
}

TEST(SessionArrivalTickets, ARankThatStopsCallingEndsInATimeoutOnEverySurvivor) {
  detail::RuntimeConfig config = tickets_config(detail::ArrivalTicketsMode::on);
  config.timeout_s = 2;
  const int n = 4;
  const std::size_t count = 50000;
  const auto errors = run_ranks(n, [&](int r, detail::Session& s, ThreadEngine&) {
    Options o;
    o.algorithm = Algorithm::automatic;
    std::vector<float> buf(count, 1.0f);
    for (int call = 0; call < 6; ++call) {
      if (r == n - 1 && call == 3) return;  // this rank is gone from call 3 on
      s.allreduce(buf.data(), buf.data(), count, DataType::float32, ReduceOp::sum, o);
    }
  }, /*timeout_s=*/2, &config);
  for (int r = 0; r + 1 < n; ++r)
    EXPECT_EQ(errors[static_cast<std::size_t>(r)].rfind("timeout", 0), 0u) << "rank " << r << ": " << errors[static_cast<std::size_t>(r)];
  EXPECT_EQ(errors.back(), "");
}

}  // namespace
}  // namespace stragglar
