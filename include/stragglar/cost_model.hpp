// The α-β cost model (paper §3): sending m bytes takes α + m·β.
#pragma once

namespace stragglar {

struct CostModel {
  double alpha_s = 3e-6;                                   // per-message latency, seconds
  double beta_s_per_byte = 1.0 / (450.0 * 1073741824.0);   // 1 / bandwidth (450 GiB/s)
};

}  // namespace stragglar
