// The streaming JSON writer and reader: the writer's text is schedule_to_json's, byte
// for byte; verify_json_file gives what schedule_from_json + verify give, whether the streaming
// reader takes the document or hands it to the full reader.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "stragglar/error.hpp"
#include "stragglar/schedule_json.hpp"
#include "stragglar/synthesize.hpp"
#include "stragglar/verify.hpp"

namespace stragglar {
namespace {

std::string streamed(const Schedule& s, int indent) {
  std::ostringstream out;
  write_schedule_json(out, s, indent);
  return out.str();
}

TEST(ScheduleJsonStream, WriterMatchesTheDocumentWriter) {
  for (Algorithm a : scheduled_algorithms())
    for (int n : {2, 3, 5, 8, 13}) {
      SynthOptions o;
      o.straggler = n / 2;
      const Schedule s = synthesize(a, n, o);
      for (int indent : {-1, 0, 1, 2, 4}) EXPECT_EQ(streamed(s, indent), schedule_to_json(s, indent)) << to_string(a) << " n=" << n;
      std::ostringstream direct;
      synthesize_json(direct, a, n, o, 1);
      EXPECT_EQ(direct.str(), schedule_to_json(s, 1)) << to_string(a) << " n=" << n;
    }
  // Empty arrays print as [] in both.
  Schedule s;
  s.algorithm = "empty \"quoted\"";
  s.nranks = 2;
  s.nchunks = 1;
  for (int indent : {-1, 1}) EXPECT_EQ(streamed(s, indent), schedule_to_json(s, indent));
  s.phases.push_back(Phase{"none", true, {}});
  s.phases.push_back(Phase{"one empty round", true, {Round{}}});
  for (int indent : {-1, 1}) EXPECT_EQ(streamed(s, indent), schedule_to_json(s, indent));
}

TEST(ScheduleJsonStream, SynthesizeJsonReportsBadArgumentsLikeSynthesize) {
  std::ostringstream out;
  SynthOptions o;
  o.straggler = 9;
  EXPECT_THROW(synthesize_json(out, Algorithm::stragglar, 8, o), Error);
  EXPECT_TRUE(out.str().empty());
  o.straggler.reset();
  o.pipeline = 1024;  // 1024 * 99 chunks: more than the limit
  EXPECT_THROW(synthesize_json(out, Algorithm::stragglar, 100, o), Error);
}

class TempFile {
 public:
  explicit TempFile(const std::string& text) : path_(::testing::TempDir() + "stragglar_stream_" + std::to_string(++count_) + ".json") {
    std::ofstream(path_, std::ios::binary) << text;
  }
  ~TempFile() { std::remove(path_.c_str()); }
  const std::string& path() const { return path_; }

 private:
  static inline int count_ = 0;
  std::string path_;
};

// verify_json_file against schedule_from_json + verify: the same report and line, or the same error.
void expect_same_as_full_reader(const std::string& text) {
  const TempFile file(text);
  std::string want_error, got_error, line;
  VerifyReport want, got;
  std::string want_line;
  try {
    const Schedule s = schedule_from_json(text);
    want = verify(s);
    want_line = summary(s, want);
  } catch (const Error& e) {
    want_error = e.what();
  }
  try {
    got = verify_json_file(file.path(), &line);
  } catch (const Error& e) {
    got_error = e.what();
  }
  ASSERT_EQ(got_error, want_error) << text.substr(0, 200);
  if (!want_error.empty()) return;
  EXPECT_EQ(got.ok, want.ok);
  EXPECT_EQ(got.message, want.message);
  EXPECT_EQ(got.rounds_per_phase, want.rounds_per_phase);
  EXPECT_EQ(line, want_line);
}

TEST(ScheduleJsonStream, VerifyJsonFileAgreesWithTheFullReader) {
  for (Algorithm a : scheduled_algorithms())
    for (int n : {2, 7, 16}) {
      const std::string text = schedule_to_json(synthesize(a, n));
      expect_same_as_full_reader(text);
      expect_same_as_full_reader(schedule_to_json(synthesize(a, n), 2));
    }
  // Another key order: the full reader takes it, and accepts it.
  expect_same_as_full_reader(
      R"({"phases":[{"rounds":[[{"op":"reduce","chunks":[0],"dst":1,"src":0},{"src":1,"dst":0,"chunks":[0],"op":"reduce"}]],"name":"x","waits_for_straggler":true}],)"
      R"("ports":1,"nchunks":1,"straggler":null,"nranks":2,"algorithm":"x","format":"stragglar-schedule/1"})");
  // Malformed or invalid documents: the full reader's error.
  expect_same_as_full_reader("{");
  expect_same_as_full_reader("[1,2]");
  expect_same_as_full_reader(R"({"format":"stragglar-schedule/1","algorithm":"x","nranks":2,"straggler":null,"nchunks":1,"ports":1,"phases":[{"name":"p","waits_for_straggler":true,"rounds":[[{"src":0,"dst":2,"chunks":[0],"op":"reduce"}]]}]})");
  expect_same_as_full_reader(R"({"format":"stragglar-schedule/1","algorithm":"x","nranks":2,"straggler":null,"nchunks":1,"ports":1,"phases":[{"name":"p","waits_for_straggler":true,"rounds":[[{"src":0,"dst":1,"chunks":[0],"op":"reduce"}]]}]} trailing)");
  // Valid JSON, invalid schedule: the verifier's message.
  expect_same_as_full_reader(R"({"format":"stragglar-schedule/1","algorithm":"x","nranks":2,"straggler":null,"nchunks":1,"ports":1,"phases":[{"name":"p","waits_for_straggler":true,"rounds":[[{"src":0,"dst":1,"chunks":[0],"op":"reduce"}]]}]})");
}

TEST(ScheduleJsonStream, VerifyJsonFileNamesAMissingFile) {
  try {
    verify_json_file("/nonexistent/schedule.json");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidUsage);
    EXPECT_NE(std::string(e.what()).find("cannot open schedule file '/nonexistent/schedule.json'"), std::string::npos);
  }
}

}  // namespace
}  // namespace stragglar
