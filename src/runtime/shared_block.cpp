// SharedBlock: a POSIX shared-memory segment named by rank 0 (shared_block.hpp).
#include "runtime/shared_block.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

namespace stragglar::detail {

namespace {

// Unique on the host: rank 0's pid and a count of the blocks it made.
std::string segment_name(std::int64_t id) { return "/stragglar-arrival-" + std::to_string(id); }

void* map(int fd, std::size_t bytes) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  return p == MAP_FAILED ? nullptr : p;
}

}  // namespace

SharedBlock::SharedBlock(std::size_t bytes, int rank, const Agree& agree) : bytes_(bytes) {
  static std::atomic<std::int64_t> made{0};
  // 1. Rank 0 creates the segment (zero-filled by ftruncate) and passes its id; -1: no id.
  std::int64_t id[1] = {-1};
  std::string name;
  if (rank == 0) {
    const std::int64_t mine = (static_cast<std::int64_t>(getpid()) << 24) | (made++ & 0xffffff);
    name = segment_name(mine);
    const int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd >= 0) {
      if (ftruncate(fd, static_cast<off_t>(bytes)) == 0) data_ = map(fd, bytes);
      close(fd);
      if (data_) id[0] = mine;
      else shm_unlink(name.c_str());
    }
    if (!data_) why_ = std::string("rank 0 could not create shared memory: ") + std::strerror(errno);
  }
  try {
    agree(id);
  } catch (...) {
    if (data_) munmap(data_, bytes_), shm_unlink(name.c_str());
    data_ = nullptr;
    throw;
  }
  if (id[0] < 0) {
    if (why_.empty()) why_ = "rank 0 could not create shared memory";
    return;
  }
  // 2. The others map it; every rank learns whether all did, before rank 0 removes the name.
  if (rank != 0) {
    name = segment_name(id[0]);
    const int fd = shm_open(name.c_str(), O_RDWR, 0600);
    if (fd >= 0) {
      data_ = map(fd, bytes);
      close(fd);
    }
    if (!data_) why_ = "rank " + std::to_string(rank) + " could not map rank 0's shared memory (" + std::strerror(errno) +
                       "): the ranks may not share a host";
  }
  std::int64_t failed[1] = {data_ ? 0 : 1};
  try {
    agree(failed);
  } catch (...) {
    if (rank == 0) shm_unlink(name.c_str());
    throw;
  }
  if (rank == 0) shm_unlink(name.c_str());  // every rank has it mapped: the name is no longer needed
  if (failed[0]) {
    if (data_) munmap(data_, bytes_);
    data_ = nullptr;
    if (why_.empty()) why_ = "a rank could not map rank 0's shared memory";
  }
}

SharedBlock::~SharedBlock() {
  if (data_) munmap(data_, bytes_);
}

}  // namespace stragglar::detail
