// The library's stderr lines (log.hpp).
#include "runtime/log.hpp"

#include <unistd.h>

#include <cstdarg>
#include <cstdio>
#include <string>

namespace stragglar::detail {
namespace {

void write_line(const std::string& prefix, const char* format, va_list args) {
  va_list copy;
  va_copy(copy, args);
  const int n = std::vsnprintf(nullptr, 0, format, copy);
  va_end(copy);
  std::string text = prefix;
  const std::size_t at = text.size();
  text.resize(at + static_cast<std::size_t>(n > 0 ? n : 0) + 1);
  std::vsnprintf(text.data() + at, text.size() - at, format, args);
  text.back() = '\n';
  std::fwrite(text.data(), 1, text.size(), stderr);
}

}  // namespace

void log_info(const char* format, ...) {
  va_list args;
  va_start(args, format);
  write_line("stragglar INFO: ", format, args);
  va_end(args);
}

void log_trace(const char* format, ...) {
  va_list args;
  va_start(args, format);
  write_line("stragglar TRACE: ", format, args);
  va_end(args);
}

void log_info_process(const char* format, ...) {
  va_list args;
  va_start(args, format);
  write_line("stragglar INFO [pid " + std::to_string(static_cast<long>(getpid())) + "]: ", format, args);
  va_end(args);
}

}  // namespace stragglar::detail
