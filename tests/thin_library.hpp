// The real MILES emulator built from the 219-star miles_thin subset (30 components, to keep the
// tests fast), once per build: ctest runs every test case as its own process, and 27 of them use
// it, so the first process builds it into VELOX_TEST_TMP_DIR/thin_library_30.h5 (under a lock)
// and every process, that one included, loads that file. A file older than the test binary is
// built again (the build code may have changed). Under ASan a build took ~35 s per process.
// Header-only: one static instance per executable.
#pragma once
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>

#include "emulator/build.hpp"
#include "io/readers.hpp"
#include "test_util.hpp"

namespace velox::test {
inline const TemplateLibrary& thin_library() {
  static const TemplateLibrary lib = [] {
    const std::string path = std::string(VELOX_TEST_TMP_DIR) + "/thin_library_30.h5";
    const int fd = ::open((path + ".lock").c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644);
    if (fd >= 0) ::flock(fd, LOCK_EX);
    struct stat lib_st, exe_st;
    const bool fresh = ::stat(path.c_str(), &lib_st) == 0 &&
                       ::stat("/proc/self/exe", &exe_st) == 0 &&
                       lib_st.st_mtime > exe_st.st_mtime;
    if (!fresh) {
      BuildConfig bc;
      bc.n_components = 30;
      build_library(read_templates(data("templates/miles/miles_thin")), bc).save(path);
    }
    TemplateLibrary out = TemplateLibrary::load(path);
    if (fd >= 0) ::close(fd);  // releases the lock
    return out;
  }();
  return lib;
}
}  // namespace velox::test
