// The cost model auto decides with (docs/auto.md "The cost model per engine"): the user's
// (Options::cost, else STRAGGLAR_ALPHA_US / STRAGGLAR_BANDWIDTH_GBPS /
// STRAGGLAR_REDUCE_BANDWIDTH_GBPS), else the engine's default (Engine::auto_cost_model). The
// library's CostModel{} is a GPU/NVLink model (α = 3 µs, 450 GiB/s); under it a CPU engine would
// send auto straight to native up to several MiB (the small-message gate, auto_runner.cpp), where
// StragglAR wins on CPUs from a few hundred KiB. Host engines therefore default to the model below.
#pragma once
#include "runtime/env.hpp"
#include "stragglar/cost_model.hpp"

namespace stragglar::detail {

// Processes of one host over shared memory (MPI, UCX, the PyTorch CPU backend): α ≈ 20 µs per
// message, ≈ 1.7 GB/s per transfer, reduction ≈ 37 GB/s (calibrated: docs/auto.md "The cost
// model per engine").
// Only its ratios matter to auto (the policy scales the model by what it measures).
inline CostModel host_shared_memory_cost_model() {
  CostModel c;
  c.alpha_s = 20e-6;
  c.beta_s_per_byte = 1.0 / 1.7e9;
  c.gamma_s_per_byte = 1.0 / 37e9;
  return c;
}

// What a host engine gives auto: the STRAGGLAR_* model when the user set any of it, else the above.
inline CostModel host_engine_auto_cost_model() {
  return env().cost_from_env ? env().cost : host_shared_memory_cost_model();
}

}  // namespace stragglar::detail
