// The policy's configuration checked once, before any stage is built.
#pragma once
#include <string>

#include "runtime/auto/policy_config.hpp"

namespace stragglar::detail::auto_policy {

// Throws Error(InvalidUsage) naming the first bad value of `config` and what was expected.
void check_config(const PolicyConfig& config);
// Throws Error(InvalidUsage): "straggler policy: <name> <value> is not valid, expected <expected>".
[[noreturn]] void bad_int(const char* name, long long value, const char* expected);

}  // namespace stragglar::detail::auto_policy
