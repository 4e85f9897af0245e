// stragglar-schedule/1: exact round trips, and clear errors for malformed or inconsistent JSON.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "stragglar/error.hpp"
#include "stragglar/schedule_json.hpp"
#include "stragglar/synthesize.hpp"

namespace stragglar {
namespace {

TEST(ScheduleJson, RoundTripsEveryAlgorithm) {
  for (Algorithm a : scheduled_algorithms())
    for (int n : {2, 4, 6, 8, 16}) {
      SynthOptions o;
      o.straggler = n / 2;
      const Schedule s = synthesize(a, n, o);
      const std::string text = schedule_to_json(s);
      const Schedule back = schedule_from_json(text);
      EXPECT_EQ(back, s) << to_string(a) << " n=" << n;
      EXPECT_EQ(schedule_to_json(back), text);
      EXPECT_EQ(schedule_from_json(schedule_to_json(s, 2)), s);
    }
}

TEST(ScheduleJson, WritesTheDocumentedShape) {
  const auto j = nlohmann::json::parse(schedule_to_json(synthesize(Algorithm::allpairs, 3)));
  EXPECT_EQ(j["format"], "stragglar-schedule/1");
  EXPECT_EQ(j["algorithm"], "allpairs");
  EXPECT_EQ(j["nranks"], 3);
  EXPECT_TRUE(j["straggler"].is_null());
  EXPECT_EQ(j["ports"], "all");
  EXPECT_EQ(j["phases"][0]["rounds"][0][0], nlohmann::json::parse(R"({"src":0,"dst":1,"chunks":[1],"op":"reduce"})"));
  EXPECT_EQ(nlohmann::json::parse(schedule_to_json(synthesize(Algorithm::stragglar, 8)))["straggler"], 7);
}

void expect_invalid(const std::string& text, const std::string& needle) {
  try {
    schedule_from_json(text);
    FAIL() << "accepted: " << text;
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidSchedule);
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

std::string doc(const std::string& transfer, const std::string& extra = "") {
  return R"({"format":"stragglar-schedule/1","algorithm":"x","nranks":2,"straggler":null,"nchunks":1,"ports":1,)" + extra +
         R"("phases":[{"name":"p","waits_for_straggler":true,"rounds":[[)" + transfer + "]]}]}";
}

TEST(ScheduleJson, RejectsMalformedInput) {
  expect_invalid("{", "not valid JSON");
  expect_invalid("[]", "expected an object");
  expect_invalid(R"({"format":"stragglar-schedule/2"})", "format: \"stragglar-schedule/2\", expected \"stragglar-schedule/1\"");
  expect_invalid(R"({"format":"stragglar-schedule/1","algorithm":"x"})", "missing field \"nranks\"");
  expect_invalid(doc(R"({"src":0,"dst":1,"chunks":[0],"op":"reduce"})", R"("colour":1,)"), "unknown field \"colour\"");
}

TEST(ScheduleJson, RejectsInconsistentValues) {
  expect_invalid(doc(R"({"src":0,"dst":2,"chunks":[0],"op":"reduce"})"), "phases[0].rounds[0][0].dst: 2 out of range [0, 1]");
  expect_invalid(doc(R"({"src":0,"dst":1,"chunks":[1],"op":"reduce"})"), "chunks[0]: 1 out of range [0, 0]");
  expect_invalid(doc(R"({"src":1,"dst":1,"chunks":[0],"op":"reduce"})"), "src and dst are both 1");
  expect_invalid(doc(R"({"src":0,"dst":1,"chunks":[0],"op":"add"})"), "\"add\", expected \"reduce\" or \"copy\"");
  expect_invalid(doc(R"({"src":0,"dst":1,"chunks":[],"op":"copy"})"), "non-empty array");
  expect_invalid(doc(R"({"src":0,"dst":1,"chunks":["0"],"op":"copy"})"), "expected an integer");
  expect_invalid(R"({"format":"stragglar-schedule/1","algorithm":"x","nranks":2,"straggler":2,"nchunks":1,"ports":1,"phases":[]})",
                 "straggler: 2 out of range [0, 1]");
  expect_invalid(R"({"format":"stragglar-schedule/1","algorithm":"x","nranks":2,"straggler":null,"nchunks":1,"ports":3,"phases":[]})",
                 "ports: 3, expected 1 or \"all\"");
  expect_invalid(R"({"format":"stragglar-schedule/1","algorithm":"x","nranks":2,"straggler":null,"nchunks":1,"ports":1,"phases":[{"name":"p","waits_for_straggler":false,"rounds":[]}]})",
                 "waits_for_straggler is false but the schedule names no straggler");
}

}  // namespace
}  // namespace stragglar
