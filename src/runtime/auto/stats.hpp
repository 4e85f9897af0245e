// Order statistics the policy's stages share, computed in scratch the caller keeps (its capacity
// is reused: deciding makes no heap allocation once the buffers have grown).
#pragma once
#include <algorithm>
#include <cstddef>
#include <limits>
#include <span>
#include <vector>

namespace stragglar::detail::auto_policy {

inline constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// The element at (size - 1) / divisor in sorted order; NaN for no values.
inline double lower_quantile(std::span<const double> v, std::vector<double>& work, std::size_t divisor) {
  if (v.empty()) return kNaN;
  work.assign(v.begin(), v.end());
  const auto q = work.begin() + static_cast<std::ptrdiff_t>((work.size() - 1) / divisor);
  std::nth_element(work.begin(), q, work.end());
  return *q;
}
// The lower median (the smaller middle value of an even count).
inline double lower_median(std::span<const double> v, std::vector<double>& work) { return lower_quantile(v, work, 2); }
// A candidate's typical exposed time from few measurements: the lower quartile. On a shared host
// the noise is mostly slow outliers (interference only ever slows a call down); the lower
// quartile ignores up to three in four of them, where a median of three ignores one. Every
// candidate is estimated the same way, so comparisons stay fair.
inline double lower_quartile(std::span<const double> v, std::vector<double>& work) { return lower_quantile(v, work, 4); }

}  // namespace stragglar::detail::auto_policy
