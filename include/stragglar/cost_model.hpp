// The α-β cost model (paper §3): sending m bytes takes α + m·β. An optional γ term (the
// α-β-γ model of Thakur, Rabenseifner & Gropp, 2005) charges γ per byte a rank reduces into
// its buffer after a `reduce` receive; γ = 0, the default, is the paper's model exactly.
#pragma once

namespace stragglar {

struct CostModel {
  double alpha_s = 3e-6;                                   // per-message latency, seconds
  double beta_s_per_byte = 1.0 / (450.0 * 1073741824.0);   // 1 / bandwidth (450 GiB/s)
  double gamma_s_per_byte = 0.0;                           // reduction time per byte; 0: not modelled
  // Two link classes (hierarchical jobs): with ranks_per_host > 0, rank r sits on
  // host r / ranks_per_host and a transfer between two hosts costs inter_beta_s_per_byte per
  // byte instead of beta_s_per_byte. 0: one link class (the paper's model).
  int ranks_per_host = 0;
  double inter_beta_s_per_byte = 0.0;

  // β of a transfer from rank a to rank b.
  double beta_between(int a, int b) const {
    return ranks_per_host > 0 && a / ranks_per_host != b / ranks_per_host ? inter_beta_s_per_byte : beta_s_per_byte;
  }
};

}  // namespace stragglar
