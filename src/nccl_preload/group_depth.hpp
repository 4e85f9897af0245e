// The program's ncclGroupStart nesting on one thread, as NCCL counts it: a call inside a group
// must fuse with the group's other operations, so the preload passes it to NCCL.
#pragma once

namespace stragglar::nccl_preload {

class GroupDepth {
 public:
  void start() noexcept { ++depth_; }
  // ncclGroupEnd and ncclGroupSimulateEnd both close a group (NCCL lowers its depth even when
  // the call fails); an end without a start is NCCL's error to report, not a negative depth.
  void end() noexcept {
    if (depth_ > 0) --depth_;
  }
  bool inside() const noexcept { return depth_ > 0; }
  int depth() const noexcept { return depth_; }

 private:
  int depth_ = 0;
};

}  // namespace stragglar::nccl_preload
