// ChunkList: the chunk indices one transfer carries.
//
// Why not std::vector<int>: almost every transfer carries a single chunk (StragglAR, Ring,
// allpairs), and a StragglAR schedule for n = 256 holds ~130k transfers; one heap block per
// transfer made synthesis allocation-bound (n = 256 is asked in ≤ 5 ms). Up to kInline
// indices live inside the object; longer lists (RHD, broadcast) move to the heap. The
// interface is the part of std::vector<int> that schedules use, so code reads the same.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <iterator>
#include <limits>
#include <stdexcept>
#include <span>
#include <vector>

namespace stragglar {

class ChunkList {
 public:
  using value_type = int;
  using size_type = std::size_t;
  using iterator = int*;
  using const_iterator = const int*;

  ChunkList() noexcept = default;
  ChunkList(std::initializer_list<int> chunks) : ChunkList() { assign(chunks.begin(), chunks.end()); }
  template <std::input_iterator It>
  ChunkList(It first, It last) : ChunkList() {
    assign(first, last);
  }
  // Implicit, so code written against std::vector<int> chunk lists keeps compiling.
  ChunkList(const std::vector<int>& chunks) : ChunkList() { assign(chunks.begin(), chunks.end()); }
  ChunkList(const ChunkList& other) : ChunkList() { assign(other.begin(), other.end()); }
  ChunkList(ChunkList&& other) noexcept : ChunkList() { steal(other); }
  ChunkList& operator=(const ChunkList& other) {
    if (this != &other) {
      clear();
      assign(other.begin(), other.end());
    }
    return *this;
  }
  ChunkList& operator=(ChunkList&& other) noexcept {
    if (this != &other) {
      release();
      steal(other);
    }
    return *this;
  }
  ~ChunkList() { release(); }

  size_type size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }
  int* data() noexcept { return on_heap() ? heap_ : inline_; }
  const int* data() const noexcept { return on_heap() ? heap_ : inline_; }
  iterator begin() noexcept { return data(); }
  iterator end() noexcept { return data() + size_; }
  const_iterator begin() const noexcept { return data(); }
  const_iterator end() const noexcept { return data() + size_; }
  int& operator[](size_type i) noexcept { return data()[i]; }
  int operator[](size_type i) const noexcept { return data()[i]; }
  int front() const noexcept { return data()[0]; }
  int back() const noexcept { return data()[size_ - 1]; }
  operator std::span<const int>() const noexcept { return {data(), size_}; }

  void push_back(int chunk) {
    if (size_ == capacity_) {
      if (capacity_ >= kMaxSize) throw std::length_error("ChunkList: more than INT_MAX chunk indices");
      reserve(std::min<size_type>(static_cast<size_type>(capacity_) * 2, kMaxSize));
    }
    data()[size_++] = chunk;
  }
  void reserve(size_type capacity) {
    if (capacity <= capacity_) return;
    if (capacity > kMaxSize) throw std::length_error("ChunkList: more than INT_MAX chunk indices");
    int* grown = new int[capacity];
    std::copy(begin(), end(), grown);
    const std::uint32_t size = size_;
    release();
    heap_ = grown;
    size_ = size;
    capacity_ = static_cast<std::uint32_t>(capacity);
  }
  void clear() noexcept { size_ = 0; }

  friend bool operator==(const ChunkList& a, const ChunkList& b) noexcept {
    return std::equal(a.begin(), a.end(), b.begin(), b.end());
  }

 private:
  static constexpr std::uint32_t kInline = 4;
  static constexpr size_type kMaxSize = static_cast<size_type>(std::numeric_limits<int>::max());

  bool on_heap() const noexcept { return capacity_ > kInline; }
  template <class It>
  void assign(It first, It last) {
    for (; first != last; ++first) push_back(*first);
  }
  void release() noexcept {
    if (on_heap()) delete[] heap_;
    heap_ = nullptr;
    size_ = 0;
    capacity_ = kInline;
  }
  // Takes other's contents (pointer or inline values); other is left empty. *this is empty.
  void steal(ChunkList& other) noexcept {
    if (other.on_heap()) {
      heap_ = other.heap_;
    } else {
      std::copy(other.inline_, other.inline_ + other.size_, inline_);
    }
    size_ = other.size_;
    capacity_ = other.capacity_;
    other.size_ = 0;
    other.capacity_ = kInline;
    other.heap_ = nullptr;
  }

  // Not a union with inline_: switching the active member back and forth is formally
  // undefined; 8 more bytes per transfer buy plain, obviously valid code.
  std::uint32_t size_ = 0;
  std::uint32_t capacity_ = kInline;  // > kInline: the list lives in heap_
  int* heap_ = nullptr;
  int inline_[kInline] = {};
};

}  // namespace stragglar
