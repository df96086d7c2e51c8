// std::vector whose resize and size constructor leave new elements of trivial types
// uninitialised (default-initialised) instead of zeroing them: for arrays that are written in
// full right after, where the zeroing was a measurable share of a DESI spectrum's preparation
// and of its read (the arms' arrays that CFITSIO fills).
#pragma once
#include <memory>
#include <new>
#include <type_traits>
#include <utility>
#include <vector>

namespace velox {

template <class T>
struct DefaultInitAllocator : std::allocator<T> {
  using std::allocator<T>::allocator;
  template <class U>
  struct rebind {
    using other = DefaultInitAllocator<U>;
  };
  DefaultInitAllocator() = default;
  template <class U>
  DefaultInitAllocator(const DefaultInitAllocator<U>&) noexcept {}
  template <class U>
  void construct(U* p) noexcept(std::is_nothrow_default_constructible<U>::value) {
    ::new (static_cast<void*>(p)) U;
  }
  template <class U, class... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
};

// Elements added by resize(n) or UninitVector<T>(n) hold indeterminate values until written.
template <class T>
using UninitVector = std::vector<T, DefaultInitAllocator<T>>;

}  // namespace velox
