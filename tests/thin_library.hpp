// The real MILES emulator built once per test binary from the 219-star miles_thin subset (30
// components, to keep the tests fast). Header-only: one static instance per executable.
#pragma once
#include "emulator/build.hpp"
#include "io/readers.hpp"
#include "test_util.hpp"

namespace velox::test {
inline const TemplateLibrary& thin_library() {
  static const TemplateLibrary lib = [] {
    BuildConfig bc;
    bc.n_components = 30;
    return build_library(read_templates(data("templates/miles/miles_thin")), bc);
  }();
  return lib;
}
}  // namespace velox::test
