// Bounded random-mutation fuzzing of everything that reads a schedule from outside:
// schedule_from_json, the streaming reader behind verify_json_file, pack() and the verifier. Inputs: synthesized schedules damaged as data (schedule_mutator.hpp), then written as
// JSON and damaged as text (bytes flipped, cut, inserted; numbers replaced by extreme ones).
// Each input must
//   * never crash, hang or throw anything but stragglar::Error (the sanitizer build runs this too);
//   * get from verify_json_file exactly what schedule_from_json + verify give (report or error);
//   * get from the verifier exactly the report of the round-by-round reference verifier, on the
//     Schedule and on its packed form.
// Usage: fuzz_schedule [cases] (default 3000; env STRAGGLAR_FUZZ_CASES, STRAGGLAR_FUZZ_SEED).
// Prints "N passed, M failed" and the first failing input.
#include <cstdio>
#include <cstdlib>
#include <unistd.h>
#include <exception>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "reference_verifier.hpp"
#include "schedule/packed_schedule.hpp"
#include "schedule_mutator.hpp"
#include "stragglar/error.hpp"
#include "stragglar/schedule_json.hpp"
#include "stragglar/synthesize.hpp"
#include "stragglar/verify.hpp"
#include "verify/verify_packed.hpp"

namespace {

using namespace stragglar;
using testing::Rng;

const char* const kTokens[] = {",", ":", "[", "]", "{", "}", "\"", "0", "-1", "1", "2", "7", "4096", "65536",
                               "2147483647", "2147483648", "-2147483649", "18446744073709551616", "1e999", "0.5",
                               "1.0", "-0", "null", "true", "false", "\"all\"", "\"copy\"", "\"reduce\"", "\"x\"",
                               "[]", "{}", "\"src\":0,", "\"chunks\":[0],", "\\u0000", " ", "\n"};

std::string mutate_text(std::string text, Rng& rng) {
  const int edits = rng.range(1, 3);
  for (int e = 0; e < edits && !text.empty(); ++e) {
    const auto at = static_cast<std::size_t>(rng.range(0, static_cast<int>(text.size()) - 1));
    switch (rng.range(0, 5)) {
      case 0:  // one byte
        text[at] = "{}[],:\"0123456789-.eEtrufalsn \\x"[rng.range(0, 31)];
        break;
      case 1:  // cut a few bytes
        text.erase(at, static_cast<std::size_t>(rng.range(1, 12)));
        break;
      case 2:  // a token
        text.insert(at, kTokens[rng.range(0, static_cast<int>(std::size(kTokens)) - 1)]);
        break;
      case 3: {  // a number → another, often extreme
        std::size_t b = text.find_first_of("0123456789", at);
        if (b == std::string::npos) break;
        std::size_t end = text.find_first_not_of("0123456789", b);
        if (end == std::string::npos) end = text.size();
        text.replace(b, end - b, kTokens[rng.range(7, 20)]);
        break;
      }
      case 4:  // truncated
        text.resize(at);
        break;
      default: {  // a slice repeated
        const auto len = static_cast<std::size_t>(rng.range(1, 40));
        text.insert(at, text.substr(at, len));
        break;
      }
    }
  }
  return text;
}

struct Failure {
  std::string what;
  std::string input;
};

bool same(const VerifyReport& a, const VerifyReport& b) {
  return a.ok == b.ok && a.message == b.message && a.rounds_per_phase == b.rounds_per_phase &&
         a.beta_cost_total == b.beta_cost_total && a.beta_cost_waiting == b.beta_cost_waiting;
}

// The checks on one schedule (from the mutator or from the JSON reader).
void check_schedule(const Schedule& s, std::vector<Failure>& failures, const std::string& input) {
  if (s.nranks > detail::kMaxVerifiedRanks) {  // refused by design (the reference would need n^3 bits)
    const VerifyReport r = verify(s);
    if (r.ok || r.message.find("the verifier's limit") == std::string::npos)
      failures.push_back({"nranks above the verifier's limit not refused: " + r.message, input});
    return;
  }
  const VerifyReport want = reference::verify(s);
  if (!same(verify(s), want)) failures.push_back({"verify differs from the reference: " + want.message, input});
  try {
    const detail::PackedSchedule packed = detail::pack(s);
    if (!same(detail::verify(packed, 2), want)) failures.push_back({"packed verify differs from the reference", input});
  } catch (const Error&) {  // a rank or chunk the packed form cannot hold: fine
  }
}

void check_text(const std::string& text, const std::string& path, std::vector<Failure>& failures) {
  std::string dom_error, stream_error, dom_line, stream_line;
  VerifyReport dom, stream;
  try {
    const Schedule s = schedule_from_json(text);
    check_schedule(s, failures, text);
    dom = verify(s);
    dom_line = summary(s, dom);
  } catch (const Error& e) {
    dom_error = e.what();
  }
  {
    std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
  }
  try {
    stream = verify_json_file(path, &stream_line);
  } catch (const Error& e) {
    stream_error = e.what();
  }
  if (dom_error != stream_error) failures.push_back({"readers disagree: '" + dom_error + "' vs '" + stream_error + "'", text});
  else if (dom_error.empty() && (!same(dom, stream) || dom_line != stream_line))
    failures.push_back({"reports differ: '" + dom.message + "' vs '" + stream.message + "'", text});
}

}  // namespace

int main(int argc, char** argv) {
  const char* env_cases = std::getenv("STRAGGLAR_FUZZ_CASES");
  const char* env_seed = std::getenv("STRAGGLAR_FUZZ_SEED");
  const int cases = env_cases ? std::atoi(env_cases) : argc > 1 ? std::atoi(argv[1]) : 3000;
  Rng rng(env_seed ? std::strtoull(env_seed, nullptr, 10) : 15);
  const std::string path = std::string(std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp") + "/stragglar_fuzz_" +
                           std::to_string(::getpid()) + ".json";

  std::vector<Schedule> base;
  for (Algorithm a : scheduled_algorithms())
    for (int n : {2, 3, 4, 5, 8, 9}) {
      SynthOptions o;
      o.straggler = n / 2;
      base.push_back(synthesize(a, n, o));
    }

  std::vector<Failure> failures;
  int passed = 0;
  for (int i = 0; i < cases; ++i) {
    const std::size_t before = failures.size();
    Schedule s = base[static_cast<std::size_t>(rng.range(0, static_cast<int>(base.size()) - 1))];
    try {
      testing::mutate(s, rng, rng.range(0, 3));
      check_schedule(s, failures, "(schedule " + std::to_string(i) + ")");
      const std::string text = schedule_to_json(s, rng.chance(20) ? 1 : -1);
      check_text(rng.chance(85) ? mutate_text(text, rng) : text, path, failures);
    } catch (const Error& e) {  // e.g. schedule_to_json of a damaged header: allowed
      (void)e;
    } catch (const std::exception& e) {
      failures.push_back({std::string("threw something else than stragglar::Error: ") + e.what(), "case " + std::to_string(i)});
    }
    if (failures.size() == before) ++passed;
  }
  std::remove(path.c_str());
  if (!failures.empty()) {
    std::cout << "first failure: " << failures.front().what << "\ninput: " << failures.front().input.substr(0, 2000) << "\n";
  }
  std::cout << passed << " passed, " << failures.size() << " failed\n";
  return failures.empty() ? 0 : 1;
}
