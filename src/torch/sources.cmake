# The PyTorch module's own sources, relative to src/torch: one list for the main build
# (src/torch/CMakeLists.txt) and the module built on the lent GPU machine
# (tests/gpu/torch_module/CMakeLists.txt), so the two never drift apart (a file missing from
# the second gave an undefined symbol at import on the first GPU run, 2026-11-27).
set(STRAGGLAR_TORCH_SOURCES
  module.cpp
  process_group_stragglar.cpp
  cpu_allreduce.cpp
  call_records.cpp
  backend_options.cpp)
# With the CUDA engine (torch has CUDA and the GPU runtime is built).
set(STRAGGLAR_TORCH_CUDA_SOURCES cuda_allreduce.cpp)
