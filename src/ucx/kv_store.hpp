// KeyValueStore: how ranks that no MPI launcher started find each other.
//
// UcxTransport::connect publishes this rank's UCX worker address under a key and reads every
// other rank's. The interface is the part of torch's c10d::Store that this needs, so a thin
// adapter over it fits (c10d::Store::set(key, bytes); get = wait({key}, timeout) + get(key);
// check({key})). DirectoryStore is the implementation for tests and standalone runs: one file
// per key in a directory every rank can see, written atomically (like torch's FileStore, but
// without its single append-only file).
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace stragglar {

class KeyValueStore {
 public:
  virtual ~KeyValueStore() = default;
  // Stores `value` under `key`; readers see the whole value or nothing. Setting a key again
  // replaces the value.
  virtual void set(const std::string& key, std::span<const std::uint8_t> value) = 0;
  // The value of `key`, waiting up to `timeout_s` seconds for it to be set. Throws
  // Error(Timeout) naming the key when it does not appear in time.
  virtual std::vector<std::uint8_t> get(const std::string& key, double timeout_s) = 0;
  // Whether `key` is set, without waiting.
  virtual bool check(const std::string& key) = 0;
};

// Files in one directory, shared by every rank (a local or network file system): key K lives
// in the file "k_" + K with bytes outside [A-Za-z0-9._-] written as %XX. set() writes a
// hidden temporary file and rename(2)s it into place, so a reader never sees half a value.
class DirectoryStore final : public KeyValueStore {
 public:
  // Creates `directory` (and its parents) when missing; throws Error(SystemError) naming it
  // when that fails or it is not a directory.
  explicit DirectoryStore(std::string directory);
  void set(const std::string& key, std::span<const std::uint8_t> value) override;
  // Polls for the file: every millisecond at first, backing off to every 20 ms.
  std::vector<std::uint8_t> get(const std::string& key, double timeout_s) override;
  bool check(const std::string& key) override;
  const std::string& directory() const { return directory_; }
  // The file that holds `key`.
  std::string path_of(const std::string& key) const;

 private:
  std::string directory_;
};

}  // namespace stragglar
