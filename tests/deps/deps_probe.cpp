// velox_deps_probe (CMakeLists.txt, not built by default; tests/integration/test_prefix_build.sh):
// linked with exactly what velox_io links from outside (CFITSIO, HDF5, zlib: VELOX_IO_DEPS), it
// prints each library's version and exits 1 unless the library that runs is the version its
// header says: headers of one install with the library of another (a module loaded for one and
// not the other, or a prefix that shadows half of a system package) fail here.
#include <fitsio.h>
#include <hdf5.h>
#include <zlib.h>

#include <cmath>
#include <cstdio>
#include <cstring>

int main() {
  unsigned major = 0, minor = 0, release = 0;
  H5get_libversion(&major, &minor, &release);
  const bool hdf5_ok = major == H5_VERS_MAJOR && minor == H5_VERS_MINOR && release == H5_VERS_RELEASE;
  std::printf("HDF5 %u.%u.%u (header %d.%d.%d)\n", major, minor, release, H5_VERS_MAJOR,
              H5_VERS_MINOR, H5_VERS_RELEASE);
  float fits = 0;
  fits_get_version(&fits);  // MAJOR + MINOR / 100
  const long fits100 = std::lround(fits * 100);
  const bool fits_ok = fits100 == CFITSIO_MAJOR * 100 + CFITSIO_MINOR;
  std::printf("CFITSIO %ld.%ld (header %d.%d)\n", fits100 / 100, fits100 % 100, CFITSIO_MAJOR,
              CFITSIO_MINOR);
  const bool zlib_ok = std::strcmp(zlibVersion(), ZLIB_VERSION) == 0;
  std::printf("zlib %s (header %s)\n", zlibVersion(), ZLIB_VERSION);
  if (hdf5_ok && fits_ok && zlib_ok) return 0;
  std::printf("a library is not the version of its header\n");
  return 1;
}
