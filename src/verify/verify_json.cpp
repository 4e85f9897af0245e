// verify_json_file: the CLI's `stragglar verify` without a JSON document in memory.
#include <cstdio>
#include <memory>
#include <string>

#include "schedule/packed_schedule.hpp"
#include "schedule/schedule_json_stream.hpp"
#include "stragglar/error.hpp"
#include "stragglar/schedule_json.hpp"
#include "stragglar/verify.hpp"
#include "verify/verify_packed.hpp"

namespace stragglar {
namespace {

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};
using File = std::unique_ptr<std::FILE, FileCloser>;

// Standard input cannot be read twice: copied to a temporary file first (disk, not memory).
File open_input(const std::string& path) {
  if (path != "-") {
    File f(std::fopen(path.c_str(), "rb"));
    if (!f) throw Error(ErrorCode::InvalidUsage, "cannot open schedule file '" + path + "'");
    return f;
  }
  File f(std::tmpfile());
  if (!f) throw Error(ErrorCode::SystemError, "cannot create a temporary file for the schedule from standard input");
  std::string buffer(std::size_t{1} << 20, '\0');
  for (std::size_t got; (got = std::fread(buffer.data(), 1, buffer.size(), stdin)) > 0;)
    if (std::fwrite(buffer.data(), 1, got, f.get()) != got)
      throw Error(ErrorCode::SystemError, "cannot spool the schedule from standard input to a temporary file");
  std::rewind(f.get());
  return f;
}

std::string read_all(std::FILE* f) {
  std::rewind(f);
  std::string text;
  std::string buffer(std::size_t{1} << 20, '\0');
  for (std::size_t got; (got = std::fread(buffer.data(), 1, buffer.size(), f)) > 0;) text.append(buffer.data(), got);
  return text;
}

}  // namespace

VerifyReport verify_json_file(const std::string& path, std::string* summary_line) {
  const File file = open_input(path);
  {
    detail::PackedScheduleBuilder builder;
    if (detail::read_packed_json(file.get(), builder)) {
      const detail::PackedSchedule packed = builder.take();
      VerifyReport r = detail::verify(packed);
      if (summary_line) *summary_line = detail::summary(packed, r);
      return r;
    }
  }
  // Another shape (or malformed): the full reader's answer.
  const Schedule s = schedule_from_json(read_all(file.get()));
  VerifyReport r = verify(s);
  if (summary_line) *summary_line = summary(s, r);
  return r;
}

}  // namespace stragglar
