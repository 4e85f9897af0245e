// IEEE half (fp16) and bfloat16 <-> float conversions: they live in runtime/numeric_rule.hpp,
// one source for host and device with the rest of the numeric rule.
#pragma once
#include "runtime/numeric_rule.hpp"
