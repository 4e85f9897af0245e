// The STRAGGLAR_* reader (src/runtime/env.hpp): defaults, good values, and one error rule for
// bad ones — Error(InvalidUsage) naming the variable, the value and what was expected. Read
// through a map, never the process environment.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>

#include "runtime/env.hpp"
#include "stragglar/error.hpp"
#include "stragglar/synthesize.hpp"

namespace stragglar::detail {
namespace {

RuntimeConfig read(const std::map<std::string, std::string>& vars) {
  return read_runtime_config([&](const char* name) -> const char* {
    const auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  });
}

// The message of the error reading `name`=`value` raises ("" when it reads).
std::string error_of(const std::string& name, const std::string& value) {
  try {
    (void)read({{name, value}});
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidUsage) << name << "=" << value;
    return e.what();
  }
  return "";
}

TEST(RuntimeConfig, NothingSetGivesTheDefaults) {
  const RuntimeConfig c = read({});
  EXPECT_EQ(c.timeout_s, 60.0);
  EXPECT_FALSE(c.debug_info);
  EXPECT_FALSE(c.debug_trace);
  EXPECT_TRUE(c.verify);
  EXPECT_TRUE(c.keep_buffers);
  EXPECT_FALSE(c.cost_from_env);
  EXPECT_EQ(c.max_message_bytes, std::size_t{1} << 30);
  EXPECT_EQ(c.auto_period, 5);
  EXPECT_FALSE(c.algorithm);
  EXPECT_FALSE(c.straggler);
  EXPECT_FALSE(c.pipeline);
  EXPECT_EQ(c.ucx_wait, UcxWaitMode::backoff);
  EXPECT_EQ(c.ucx_error_mode, UcxErrorMode::per_host);
  EXPECT_EQ(c.pmpi_min_bytes, std::size_t{64} << 10);
  EXPECT_EQ(c.nccl_min_bytes, std::size_t{1} << 20);
}

TEST(RuntimeConfig, EmptyIsUnset) {
  const RuntimeConfig c = read({{"STRAGGLAR_TIMEOUT_S", ""}, {"STRAGGLAR_DEBUG", ""}});
  EXPECT_EQ(c.timeout_s, 60.0);
  EXPECT_FALSE(c.debug_info);
}

TEST(RuntimeConfig, GoodValuesReachTheirFields) {
  const RuntimeConfig c = read({{"STRAGGLAR_TIMEOUT_S", "2.5"},
                                {"STRAGGLAR_DEBUG", "TRACE"},
                                {"STRAGGLAR_VERIFY", "0"},
                                {"STRAGGLAR_KEEP_BUFFERS", "0"},
                                {"STRAGGLAR_MAX_MESSAGE_BYTES", "4096"},
                                {"STRAGGLAR_AUTO_PERIOD", "7"},
                                {"STRAGGLAR_ALGORITHM", "Ring"},
                                {"STRAGGLAR_STRAGGLER", "-1"},
                                {"STRAGGLAR_PIPELINE", "auto"},
                                {"STRAGGLAR_ALPHA_US", "20"},
                                {"STRAGGLAR_BANDWIDTH_GBPS", "2"},
                                {"STRAGGLAR_REDUCE_BANDWIDTH_GBPS", "40"},
                                {"STRAGGLAR_UCX_WAIT", "Yield_Poll"},
                                {"STRAGGLAR_UCX_ERROR_MODE", "peer"},
                                {"STRAGGLAR_PMPI_MIN_BYTES", "0"},
                                {"STRAGGLAR_NCCL_MIN_BYTES", "4K"}});
  EXPECT_EQ(c.timeout_s, 2.5);
  EXPECT_TRUE(c.debug_info);
  EXPECT_TRUE(c.debug_trace);
  EXPECT_FALSE(c.verify);
  EXPECT_FALSE(c.keep_buffers);
  EXPECT_EQ(c.max_message_bytes, 4096u);
  EXPECT_EQ(c.auto_period, 7);
  EXPECT_EQ(c.algorithm, Algorithm::ring);
  EXPECT_EQ(c.straggler, -1);
  EXPECT_EQ(c.pipeline, kPipelineAuto);
  EXPECT_TRUE(c.cost_from_env);
  EXPECT_DOUBLE_EQ(c.cost.alpha_s, 20e-6);
  EXPECT_DOUBLE_EQ(c.cost.beta_s_per_byte, 1.0 / 2e9);
  EXPECT_DOUBLE_EQ(c.cost.gamma_s_per_byte, 1.0 / 40e9);
  EXPECT_EQ(c.ucx_wait, UcxWaitMode::yield_poll);
  EXPECT_EQ(c.ucx_error_mode, UcxErrorMode::peer);
  EXPECT_EQ(c.pmpi_min_bytes, 0u);
  EXPECT_EQ(c.nccl_min_bytes, 4096u);
  EXPECT_EQ(read({{"STRAGGLAR_DEBUG", "info"}}).debug_trace, false);
  EXPECT_EQ(read({{"STRAGGLAR_DEBUG", "info"}}).debug_info, true);
  EXPECT_EQ(read({{"STRAGGLAR_PIPELINE", "3"}}).pipeline, 3);
  EXPECT_EQ(read({{"STRAGGLAR_STRAGGLER", "5"}}).straggler, 5);
  EXPECT_EQ(read({{"STRAGGLAR_AUTO_PERIOD", "1e1"}}).auto_period, 10);  // a number that is an integer
}

TEST(RuntimeConfig, BadValuesNameVariableValueAndWhatWasExpected) {
  const struct {
    const char* name;
    const char* value;
    const char* expected;
  } cases[] = {
      {"STRAGGLAR_TIMEOUT_S", "-1", "a positive number of seconds"},
      {"STRAGGLAR_TIMEOUT_S", "10s", "a positive number of seconds"},
      {"STRAGGLAR_DEBUG", "bogus", "TRACE, INFO, WARN or NONE"},
      {"STRAGGLAR_VERIFY", "yes", "0 or 1"},
      {"STRAGGLAR_KEEP_BUFFERS", "2", "0 or 1"},
      {"STRAGGLAR_MAX_MESSAGE_BYTES", "0", "an integer in [1, 2147483647]"},
      {"STRAGGLAR_MAX_MESSAGE_BYTES", "1.5", "an integer in [1, 2147483647]"},
      {"STRAGGLAR_AUTO_PERIOD", "1001", "an integer in [1, 1000]"},
      {"STRAGGLAR_ALGORITHM", "fastest", "one of stragglar, ring"},
      {"STRAGGLAR_STRAGGLER", "-2", "a rank, or -1 for the last rank"},
      {"STRAGGLAR_STRAGGLER", "x", "a rank, or -1 for the last rank"},
      {"STRAGGLAR_STRAGGLER", "3.0", "a rank, or -1 for the last rank"},
      {"STRAGGLAR_PIPELINE", "2000", "auto or an integer K in [1, 1024]"},
      {"STRAGGLAR_ALPHA_US", "0", "a positive number of microseconds"},
      {"STRAGGLAR_BANDWIDTH_GBPS", "fast", "a positive number of GB/s"},
      {"STRAGGLAR_REDUCE_BANDWIDTH_GBPS", "nan", "a positive number of GB/s"},
      {"STRAGGLAR_UCX_WAIT", "spin", "poll, backoff or yield_poll"},
      {"STRAGGLAR_UCX_ERROR_MODE", "maybe", "per_host, peer or none"},
      {"STRAGGLAR_PMPI_MIN_BYTES", "12Q", "a size in bytes"},
      {"STRAGGLAR_NCCL_MIN_BYTES", "-4", "a size in bytes"},
  };
  for (const auto& c : cases) {
    const std::string want = std::string(c.name) + "='" + c.value + "' is not valid: expected " + c.expected;
    const std::string got = error_of(c.name, c.value);
    EXPECT_EQ(got.rfind(want, 0), 0u) << "got: " << got << "\nwant it to start with: " << want;
  }
}

TEST(RuntimeConfig, TheTableCoversEveryFieldOnceWithHelp) {
  std::set<std::string> names;
  for (const ConfigVariable& v : config_variables()) {
    EXPECT_TRUE(names.insert(v.name).second) << v.name << " twice";
    EXPECT_EQ(std::string(v.name).rfind("STRAGGLAR_", 0), 0u) << v.name;
    EXPECT_FALSE(v.expected.empty()) << v.name;
    EXPECT_FALSE(v.default_text.empty()) << v.name;
    EXPECT_NE(std::string(v.help), "") << v.name;
  }
  EXPECT_EQ(names.size(), 18u);  // a new variable: add it to the table, this count and the docs
}

TEST(RuntimeConfig, ToStringShowsEveryValueAsSet) {
  const std::string text = read({{"STRAGGLAR_TIMEOUT_S", "7"}, {"STRAGGLAR_ALGORITHM", "rhd"}}).to_string();
  EXPECT_NE(text.find("STRAGGLAR_TIMEOUT_S=7 "), std::string::npos) << text;
  EXPECT_NE(text.find("STRAGGLAR_ALGORITHM=rhd"), std::string::npos) << text;
  EXPECT_NE(text.find("STRAGGLAR_PMPI_MIN_BYTES=65536 "), std::string::npos) << text;
  EXPECT_EQ(text.find("STRAGGLAR_STRAGGLER"), std::string::npos) << text;  // unset: not shown
  EXPECT_NE(text.find("(cost model: defaults)"), std::string::npos) << text;
}

TEST(RuntimeConfig, ReadingSomeVariablesLeavesTheOthersAlone) {
  const std::map<std::string, std::string> vars{{"STRAGGLAR_DEBUG", "bogus"}, {"STRAGGLAR_UCX_WAIT", "poll"}};
  const auto lookup = [&](const char* name) -> const char* {
    const auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
  EXPECT_EQ(read_runtime_config_of({"STRAGGLAR_UCX_WAIT"}, lookup).ucx_wait, UcxWaitMode::poll_fd);
  EXPECT_THROW((void)read_runtime_config(lookup), Error);
}

TEST(RuntimeConfig, HelpListsEveryVariable) {
  const std::string text = config_help_text(), markdown = config_help_markdown();
  for (const ConfigVariable& v : config_variables()) {
    EXPECT_NE(text.find(v.name), std::string::npos) << v.name;
    EXPECT_NE(markdown.find(std::string("| `") + v.name + "` |"), std::string::npos) << v.name;
  }
}

}  // namespace
}  // namespace stragglar::detail
