#include "stragglar/units.hpp"

#include <cctype>
#include <charconv>
#include <cmath>
#include <string>
#include <system_error>

#include "stragglar/error.hpp"

namespace stragglar {
namespace {

struct NumberAndUnit {
  double value;
  std::string unit;
};

NumberAndUnit split(std::string_view text, const char* what, const char* expected) {
  auto fail = [&] {
    throw Error(ErrorCode::InvalidUsage, std::string(what) + " '" + std::string(text) + "': expected " + expected);
  };
  std::size_t i = 0;
  while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
  double v = 0;
  auto [end, ec] = std::from_chars(text.data() + i, text.data() + text.size(), v);
  if (ec != std::errc() || !std::isfinite(v) || v < 0) fail();
  std::string unit;
  for (const char* p = end; p != text.data() + text.size(); ++p)
    if (!std::isspace(static_cast<unsigned char>(*p))) unit += *p;
  return {v, unit};
}

}  // namespace

double parse_duration_s(std::string_view text) {
  const char* expected = "a non-negative number with a unit ns, us, ms or s (e.g. 3us)";
  auto [v, unit] = split(text, "duration", expected);
  if (unit == "ns") return v * 1e-9;
  if (unit == "us" || unit == "µs") return v * 1e-6;
  if (unit == "ms") return v * 1e-3;
  if (unit == "s") return v;
  if (unit.empty() && v == 0) return 0;
  throw Error(ErrorCode::InvalidUsage, "duration '" + std::string(text) + "': expected " + expected);
}

double parse_bandwidth_Bps(std::string_view text) {
  const char* expected = "a positive number with a unit B/s, KB/s, MB/s, GB/s, TB/s or KiB/s, MiB/s, GiB/s, TiB/s";
  auto [v, unit] = split(text, "bandwidth", expected);
  static const struct { const char* name; double factor; } units[] = {
      {"B/s", 1.0},   {"KB/s", 1e3},         {"MB/s", 1e6},         {"GB/s", 1e9},         {"TB/s", 1e12},
      {"KiB/s", 1024.0}, {"MiB/s", 1048576.0}, {"GiB/s", 1073741824.0}, {"TiB/s", 1099511627776.0}};
  for (const auto& u : units)
    if (unit == u.name && v > 0) return v * u.factor;
  throw Error(ErrorCode::InvalidUsage, "bandwidth '" + std::string(text) + "': expected " + expected);
}

std::size_t parse_bytes(std::string_view text) {
  const char* expected = "a byte count like 1024, 64K, 64M, 1G or 1GiB (K/M/G/T are powers of 1024)";
  auto [v, unit] = split(text, "size", expected);
  double factor = 0;
  if (unit.empty() || unit == "B") factor = 1;
  else if (unit == "K" || unit == "KB" || unit == "KiB" || unit == "k") factor = 1024.0;
  else if (unit == "M" || unit == "MB" || unit == "MiB") factor = 1048576.0;
  else if (unit == "G" || unit == "GB" || unit == "GiB") factor = 1073741824.0;
  else if (unit == "T" || unit == "TB" || unit == "TiB") factor = 1099511627776.0;
  const double bytes = v * factor;
  if (factor == 0 || bytes != std::floor(bytes) || bytes > 1.8e19)
    throw Error(ErrorCode::InvalidUsage, "size '" + std::string(text) + "': expected " + expected);
  return static_cast<std::size_t>(bytes);
}

std::string format_bytes(std::size_t bytes) {
  static const char* names[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (u < 4 && bytes >= 1024 && bytes % 1024 == 0) {
    bytes /= 1024;
    ++u;
  }
  return std::to_string(bytes) + " " + names[u];
}

}  // namespace stragglar
