// Parsing of quantities with units, for the command-line tools ("3us", "450GiB/s", "64M").
#pragma once
#include <cstddef>
#include <string>
#include <string_view>

namespace stragglar {

// "3us", "3µs", "0.5ms", "2s", "100ns"; "0" alone is accepted. Returns seconds.
double parse_duration_s(std::string_view text);
// "450GiB/s", "450GB/s", "12.5 GB/s", "100MiB/s", "1e9B/s". Returns bytes per second.
double parse_bandwidth_Bps(std::string_view text);
// "1024", "64K", "64M", "1G", "1GiB", "64MB" — K/M/G/T are binary (×1024), as in nccl-tests.
std::size_t parse_bytes(std::string_view text);

// "64 MiB", "1 GiB", "300 B": the largest binary unit that divides evenly, else bytes.
std::string format_bytes(std::size_t bytes);

}  // namespace stragglar
