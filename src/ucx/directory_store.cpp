// DirectoryStore: a KeyValueStore of files in a shared directory (see kv_store.hpp).
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <system_error>
#include <thread>

#include "stragglar/error.hpp"
#include "ucx/kv_store.hpp"

namespace stragglar {
namespace {

std::string errno_text(int err) { return std::strerror(err); }

bool plain_key_char(unsigned char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '-';
}

// Writes all of `data` to `fd`, retrying short writes and EINTR.
bool write_all(int fd, const std::uint8_t* data, std::size_t size) {
  while (size > 0) {
    const ssize_t n = ::write(fd, data, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    data += n;
    size -= static_cast<std::size_t>(n);
  }
  return true;
}

}  // namespace

DirectoryStore::DirectoryStore(std::string directory) : directory_(std::move(directory)) {
  require(!directory_.empty(), "DirectoryStore: empty directory name, expected a path");
  std::error_code ec;
  std::filesystem::create_directories(directory_, ec);
  if (ec || !std::filesystem::is_directory(directory_))
    throw Error(ErrorCode::SystemError, "DirectoryStore: cannot use '" + directory_ + "' as the store directory" +
                                            (ec ? ": " + ec.message() : std::string(": not a directory")));
}

std::string DirectoryStore::path_of(const std::string& key) const {
  std::string name = "k_";
  for (unsigned char c : key) {
    if (plain_key_char(c)) {
      name += static_cast<char>(c);
    } else {
      char hex[4];
      std::snprintf(hex, sizeof hex, "%%%02X", c);
      name += hex;
    }
  }
  return directory_ + "/" + name;
}

void DirectoryStore::set(const std::string& key, std::span<const std::uint8_t> value) {
  const std::string path = path_of(key);
  // Hidden (leading dot, never a key's file) and unique per process and call.
  static std::atomic<unsigned> counter{0};
  const std::string tmp = directory_ + "/.tmp." + std::to_string(::getpid()) + "." +
                          std::to_string(counter.fetch_add(1));
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0)
    throw Error(ErrorCode::SystemError, "DirectoryStore::set('" + key + "'): cannot create " + tmp + ": " +
                                            errno_text(errno));
  const bool ok = write_all(fd, value.data(), value.size());
  const int write_err = errno;
  if (::close(fd) != 0 || !ok) {
    ::unlink(tmp.c_str());
    throw Error(ErrorCode::SystemError, "DirectoryStore::set('" + key + "'): cannot write " + tmp + ": " +
                                            errno_text(ok ? errno : write_err));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    throw Error(ErrorCode::SystemError, "DirectoryStore::set('" + key + "'): cannot rename " + tmp + " to " + path +
                                            ": " + errno_text(err));
  }
}

bool DirectoryStore::check(const std::string& key) { return ::access(path_of(key).c_str(), F_OK) == 0; }

std::vector<std::uint8_t> DirectoryStore::get(const std::string& key, double timeout_s) {
  const std::string path = path_of(key);
  const auto start = std::chrono::steady_clock::now();
  auto pause = std::chrono::microseconds(1000);
  for (;;) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
      std::vector<std::uint8_t> value;
      std::uint8_t block[4096];
      for (;;) {
        const ssize_t n = ::read(fd, block, sizeof block);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
          const int err = errno;
          ::close(fd);
          throw Error(ErrorCode::SystemError, "DirectoryStore::get('" + key + "'): cannot read " + path + ": " +
                                                  errno_text(err));
        }
        if (n == 0) break;
        value.insert(value.end(), block, block + n);
      }
      ::close(fd);
      return value;
    }
    if (errno != ENOENT)
      throw Error(ErrorCode::SystemError, "DirectoryStore::get('" + key + "'): cannot open " + path + ": " +
                                              errno_text(errno));
    const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (waited >= timeout_s) {
      char text[64];
      std::snprintf(text, sizeof text, "%g", timeout_s);
      throw Error(ErrorCode::Timeout, "DirectoryStore::get('" + key + "'): not set within " + text + " s (no file " +
                                          path + "): the rank that sets it did not start or failed");
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(20000));
  }
}

}  // namespace stragglar
