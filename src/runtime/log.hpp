// The library's lines on stderr ("stragglar INFO: ...", "stragglar TRACE: ...") in one place: one
// write per line, so that lines of concurrent ranks and threads do not interleave mid-line.
// Callers test STRAGGLAR_DEBUG (RuntimeConfig::debug_info / debug_trace) before building text.
#pragma once

namespace stragglar::detail {

// "stragglar INFO: <text>"
void log_info(const char* format, ...) __attribute__((format(printf, 1, 2)));
// "stragglar TRACE: <text>"
void log_trace(const char* format, ...) __attribute__((format(printf, 1, 2)));
// "stragglar INFO [pid N]: <text>": a line said once per process, which names its process.
void log_info_process(const char* format, ...) __attribute__((format(printf, 1, 2)));

}  // namespace stragglar::detail
