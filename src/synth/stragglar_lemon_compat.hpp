// Include LEMON's matching through this header. LEMON 1.3's ArrayMap (lemon/bits/array_map.h)
// calls std::allocator<T>::construct/destroy, which C++20 removed. Inside namespace lemon we
// give `std::allocator` back those two members; every other `std::` name lemon uses still
// resolves to ::std through the using-directive (qualified lookup only consults it for names
// not declared in lemon::std itself).
#pragma once
#include <memory>
#include <new>
#include <utility>

namespace lemon::std {
using namespace ::std;
template <class T>
struct allocator : ::std::allocator<T> {
  template <class U, class... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(::std::forward<Args>(args)...);
  }
  template <class U>
  void destroy(U* p) {
    p->~U();
  }
};
}  // namespace lemon::std

#include <lemon/list_graph.h>
#include <lemon/matching.h>
