// FNV-1a 64 (Fowler-Noll-Vo), the one hash behind velox's checksums: the template library's
// checksum (emulator/library.cpp), the HDF5 integrity seal (io/h5_seal.cpp) and the fit
// configuration hash (app/fit_identity.cpp). Start from kFnvOffset; velox's offset basis is
// 1469598103934665603 (not the standard 0xcbf29ce484222325): kept, since every library
// checksum and seal already written depends on it.
#pragma once
#include <cstddef>
#include <cstdint>

namespace velox {

constexpr uint64_t kFnvOffset = 1469598103934665603ULL;

// Folds n bytes at p into h.
inline void fnv1a(uint64_t& h, const void* p, size_t n) {
  const auto* c = static_cast<const unsigned char*>(p);
  for (size_t i = 0; i < n; ++i) {
    h ^= c[i];
    h *= 1099511628211ULL;
  }
}

}  // namespace velox
